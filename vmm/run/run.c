/*
 * run: `husk run`, the supervisor's side of the job's life cycle. See
 * run.h, and run_int.h for how the work is split between this process and
 * the jailed VM process it forks.
 *
 * The supervisor prepares everything that needs the host (images, files,
 * network, runtime directory), forks the VM process, then waits for it
 * while passing --get streams into staging, forwarding signals, reacting to
 * the egress filter's events and enforcing a last-resort deadline. Once the
 * VM process is gone it tears everything down, commits files only for a
 * successful job, and reports. Nothing it created outlives it; what a
 * SIGKILL'ed husk leaves is removed by the next run.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox/cgroup.h"
#include "config.h"
#include "net/egress.h"
#include "lib/host_file.h"
#include "sandbox/jail.h"
#include "lib/json.h"
#include "machine/kvm.h"
#include "run/run_int.h"
#include "lib/util.h"

#ifndef HUSK_IMAGE_DIR
#define HUSK_IMAGE_DIR "/usr/local/share/husk/images"
#endif
/* The VM process enforces --timeout and its boot allowance; this is the backstop. */
#define BACKSTOP_US (90ull * 1000000)
#define PVM_BACKSTOP_US (1860ull * 1000000)
/* KVM_CREATE_VM comes within milliseconds of the VM process's start. */
#define VM_MADE_WAIT_US (60ull * 1000000)
/* After a signal is passed on, the VM process has this long to end. */
#define SIGNAL_GRACE_US (700ull * 1000)
/* Inflated --get bytes extracted per pass before the stop checks run again. */
#define GET_BUDGET (128 * 1024)
#define RUNDIR_PREFIX "husk-run-"
#define RUNDIR_LOCK "lock"

struct sup {
	const struct run_opts *o;
	struct run_result *r;
	struct run_shared *sh;
	char dir[PATH_MAX];		/* runtime directory, the VM process's "/" */
	int dir_lock;			/* flock'ed RUNDIR_LOCK inside it */
	char kernel[PATH_MAX], rootfs[PATH_MAX];
	struct run_files files;
	struct run_egress *net;
	struct husk_cgroup cg;
	bool cg_on;
	int tap_fd, console_fd, chan, sfd, pidfd;
	int policy_fd;			/* --policy-fd, -1 once its peer is gone */
	uint8_t mac[6];
	const struct netpool_lease *lease;
	bool jail;			/* full jail for the VM process */
	uid_t uid;			/* its uid (= gid) when jailed */
	int uid_lock;			/* flock'ed lease of uid */
	pid_t pid;
	int wstatus;
	bool exited;
	bool stopping;			/* a signal asked us to stop: --get data is dropped */
	bool child_gone;		/* pidfd readable: reap once the channel is drained */
	/* The VM process's message being worked on (one at a time). */
	uint8_t *msg;			/* RUN_CHAN_MAX bytes */
	size_t msg_len, msg_off;	/* payload bytes and how far extraction got */
	bool msg_on;
	uint64_t backstop;
	bool hold_over;			/* --hold-fd: the job was released */
	uint64_t kill_at;		/* SIGKILL the VM process then, 0 = not yet */
	int result_fd;			/* --result FILE, opened at the start */
	char error[512];		/* the supervisor's own reason to end the run */
	/* Templates: the options with the template's machine, and its files. */
	struct run_opts eff;
	struct run_tpl tpl;
	int net_sink;			/* a template NIC's other end under --net none */
	/* The CPU quota while the guest boots (or restores), and for the job. */
	unsigned cpu_boot, cpu_job;
	uint64_t start;
};

/* ---- default images ---- */

int run_find_image(const char *given, const char *env, const char *name,
		   char *out, size_t len)
{
	char beside[PATH_MAX], installed[PATH_MAX];
	const char *e = getenv(env);

	if (given || (e && *e)) {
		snprintf(out, len, "%s", given ? given : e);
		return 0;
	}
	snprintf(beside, sizeof(beside), "images/%s", name);
	snprintf(installed, sizeof(installed), "%s/%s", HUSK_IMAGE_DIR, name);
	if (!husk_own_file(beside, installed, R_OK, out, len))
		return 0;
	return husk_seterr(ENOENT, "no default %s: build it with 'make images' in the husk "
			   "build tree, or pass it explicitly (or set %s)", name, env);
}

static bool is_seqpacket(int fd)
{
	int type = 0;
	socklen_t len = sizeof(type);

	return getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 && type == SOCK_SEQPACKET;
}

/* ---- runtime directory ---- */

static const char *tmp_dir(void)
{
	const char *t = getenv("TMPDIR");

	return t && *t ? t : "/tmp";
}

/*
 * Runtime directories whose husk is gone: their lock is free. One still
 * being created has no lock file yet (lock_rundir); it is left alone unless
 * it is old.
 */
static void clean_stale_rundirs(void)
{
	int tfd = open(tmp_dir(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = tfd >= 0 ? fdopendir(tfd) : NULL;
	struct dirent *de;

	if (!d) {
		if (tfd >= 0)
			close(tfd);
		return;
	}
	while ((de = readdir(d))) {
		struct stat st;
		int dfd, lfd;
		bool stale;

		if (strncmp(de->d_name, RUNDIR_PREFIX, strlen(RUNDIR_PREFIX)))
			continue;
		dfd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
			     O_CLOEXEC);
		if (dfd < 0)
			continue;
		if (fstat(dfd, &st) < 0 || st.st_uid != geteuid()) {
			close(dfd);
			continue;
		}
		lfd = openat(dfd, RUNDIR_LOCK, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		if (lfd >= 0)
			stale = !flock(lfd, LOCK_EX | LOCK_NB);
		else
			stale = (int64_t)(wall_us() / 1000000) > (int64_t)st.st_mtime + 600;
		if (lfd >= 0)
			close(lfd);
		close(dfd);
		if (stale) {
			husk_debug("removing stale runtime directory %s/%s", tmp_dir(), de->d_name);
			rm_tree_at(dirfd(d), de->d_name);
		}
	}
	closedir(d);
}

void run_clean_stale(void)
{
	clean_stale_rundirs();
	cgroup_clean_stale();
	run_net_clean_stale();
}

/*
 * The lock gets its name only once it is held: until then another husk's
 * clean_stale_rundirs() would find it free and take the directory for stale.
 */
static int lock_rundir(int dfd)
{
	int fd = openat(dfd, RUNDIR_LOCK ".new", O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC |
			O_NOFOLLOW, 0600);

	if (fd < 0)
		return -1;
	if (flock(fd, LOCK_EX | LOCK_NB) < 0 ||
	    renameat(dfd, RUNDIR_LOCK ".new", dfd, RUNDIR_LOCK) < 0) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

static int make_rundir(struct sup *S)
{
	int dfd;

	snprintf(S->dir, sizeof(S->dir), "%s/" RUNDIR_PREFIX "XXXXXX", tmp_dir());
	if (!mkdtemp(S->dir)) {
		S->dir[0] = '\0';
		return husk_seterr(errno, "cannot create a runtime directory in %s: %s",
				   tmp_dir(), strerror(errno));
	}
	dfd = open(S->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	S->dir_lock = dfd < 0 ? -1 : lock_rundir(dfd);
	if (S->dir_lock < 0) {
		int err = husk_seterr(errno, "cannot lock the runtime directory %s: %s",
				      S->dir, strerror(errno));

		if (dfd >= 0)
			close(dfd);
		return err;
	}
	close(dfd);
	return 0;
}

static void remove_rundir(struct sup *S)
{
	char *slash;

	if (!S->dir[0])
		return;
	slash = strrchr(S->dir, '/');
	*slash = '\0';
	{
		int pfd = open(S->dir[0] ? S->dir : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

		if (pfd >= 0) {
			rm_tree_at(pfd, slash + 1);
			close(pfd);
		}
	}
	*slash = '/';
	if (S->dir_lock >= 0)
		close(S->dir_lock);
	S->dir_lock = -1;
	S->dir[0] = '\0';
}

/* ---- the VM process ---- */

static void setup_cgroup(struct sup *S);
static int setup_jail(struct sup *S);

static int spawn_vm(struct sup *S, uint64_t start)
{
	struct run_vm_args a;
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return husk_seterr(errno, "socketpair: %s", strerror(errno));
	memset(&a, 0, sizeof(a));
	a.o = S->o;
	a.sh = S->sh;
	a.start = start;
	a.kernel = S->kernel;
	a.rootfs = S->rootfs;
	a.root = S->dir;
	a.chan_fd = sv[1];
	a.put_fd = S->files.put_fd;
	a.xfd = S->o->session_fd;
	a.hold_fd = S->o->hold_fd;
	a.console_fd = S->console_fd;
	a.tap_fd = S->tap_fd;
	memcpy(a.mac, S->mac, sizeof(a.mac));
	a.lease = S->lease;

	a.tpl_state_fd = S->tpl.state_memfd;
	a.tpl_mem_fd = S->tpl.open ? S->tpl.t.mem_fd : -1;
	a.kernel_fd = S->tpl.kernel_fd;
	a.rootfs_fd = S->tpl.rootfs_fd;
	a.snapshot = S->o->template_create;
	a.snap_state_fd = S->tpl.n.state_fd;
	a.snap_mem_fd = S->tpl.n.mem_fd;

	fflush(NULL);
	S->pid = S->o->no_jail ? fork() : jail_fork(JAIL_NEWNET);
	if (S->pid < 0) {
		close(sv[0]);
		close(sv[1]);
		return husk_seterr(errno, "cannot fork the VM process: %s", strerror(errno));
	}
	if (S->pid == 0) {
		int keep[] = { sv[1], a.xfd, a.put_fd, a.console_fd, a.tap_fd, a.tpl_state_fd,
			       a.tpl_mem_fd, a.snap_state_fd, a.snap_mem_fd, S->net_sink,
			       a.hold_fd, a.kernel_fd, a.rootfs_fd };

		/* Dies with the supervisor, whatever kills it (jail_fork does it too). */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		/* Nothing of the supervisor's: locks, maps, netlink, the user's dirs. */
		if (jail_close_fds(keep, sizeof(keep) / sizeof(keep[0]))) {
			husk_msg("%s", husk_lasterr());
			_exit(1);
		}
		_exit(run_vm_main(&a));
	}
	phase_mark(PH_SUP_FORK);
	close(sv[1]);
	/* The VM process holds the session: husk serve sees EOF when it is gone. */
	if (S->o->session_fd >= 0)
		close(S->o->session_fd);
	if (S->o->hold_fd >= 0)
		close(S->o->hold_fd);
	S->chan = sv[0];
	/* The VM process holds these now; the tap must vanish with it. */
	if (S->tap_fd >= 0)
		close(S->tap_fd);
	if (S->console_fd >= 0)
		close(S->console_fd);
	S->tap_fd = S->console_fd = -1;
	S->pidfd = syscall(SYS_pidfd_open, S->pid, 0);
	if (S->pidfd < 0)
		return husk_seterr(errno, "pidfd_open: %s", strerror(errno));
	return 0;
}

/*
 * The VM process already ended (it failed to build its VM before the go):
 * its exit and its report say why, not the go that found it gone.
 */
static bool vm_gone(struct sup *S)
{
	struct pollfd p = { .fd = S->pidfd, .events = POLLIN };

	return S->pidfd >= 0 && poll(&p, 1, 100) > 0;
}

/*
 * Until the VM process made its VM (CHAN_MADE). KVM puts a kernel thread of
 * the VM's (x86's NX huge page recovery worker, before Linux 6.13) in the
 * cgroup its maker is in then, and a group that holds a kernel thread never
 * reports frozen: husk oci pause would time out. The thread stays in the
 * caller's group. 0 also when the VM process is gone (its exit says why) or
 * a signal came (the main loop takes it).
 */
static int wait_vm_made(struct sup *S)
{
	uint64_t due = now_us() + VM_MADE_WAIT_US;
	struct chan_hdr h;
	ssize_t n;
	int r;

	for (;;) {
		struct pollfd p[3] = {
			{ .fd = S->chan, .events = POLLIN },
			{ .fd = S->pidfd, .events = POLLIN },
			{ .fd = S->sfd, .events = POLLIN },
		};

		r = poll(p, 3, ms_until(due, now_us()));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return husk_seterr(errno, "poll: %s", strerror(errno));
		if (!r)
			return husk_seterr(ETIMEDOUT, "the VM process did not make its VM "
					   "within %d s", (int)(VM_MADE_WAIT_US / 1000000));
		if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR)))
			return 0;
		n = run_chan_recv(S->chan, S->msg, RUN_CHAN_MAX);
		if (!n)
			continue;
		if (n < 0)
			return 0;
		memcpy(&h, S->msg, sizeof(h));
		if (h.type != CHAN_MADE)
			return husk_seterr(EPROTO, "the VM process sent message %u before its "
					   "go", h.type);
		return 0;
	}
}

/*
 * While the VM process builds its VM: its cgroup, its identity, the DNS
 * helper; then, once the VM exists, it is moved into the cgroup and let go
 * with that identity.
 */
static int confine_vm(struct sup *S)
{
	struct chan_go go = { .h.type = CHAN_GO };
	int err;

	setup_cgroup(S);
	phase_mark(PH_SUP_CGROUP);
	err = setup_jail(S);
	if (err)
		return err;
	phase_mark(PH_SUP_JAIL);
	if (S->net) {
		err = run_net_dns_start(S->net, S->cg_on ? &S->cg : NULL);
		if (err)
			return err;
		phase_mark(PH_SUP_DNS);
	}
	/*
	 * Before its guest runs: memory charges stay where they were made.
	 * The move waits for KVM_CREATE_VM (wait_vm_made), and the VM process
	 * builds the rest of its VM meanwhile and takes the go only then
	 * (run_vm.c setup), so neither the wait nor the move's cost shows.
	 */
	err = wait_vm_made(S);
	if (err)
		return err;
	if (S->cg_on && cgroup_attach(&S->cg, S->pid))
		return vm_gone(S) ? 0 : husk_seterr(EIO, "cannot put the VM process in its "
						    "cgroup: %s", husk_lasterr());
	go.jail = S->jail;
	go.uid = go.gid = S->jail ? S->uid : 0;
	if (send(S->chan, &go, sizeof(go), MSG_NOSIGNAL) != sizeof(go))
		return vm_gone(S) ? 0 : husk_seterr(errno, "cannot start the VM process: %s",
						    strerror(errno));
	phase_mark(PH_SUP_GO);
	/* Others' leftovers: swept while this guest boots, off its path. */
	clean_stale_rundirs();
	cgroup_clean_stale();
	return 0;
}

/* The supervisor's reason to stop the VM: recorded, then passed down. */
static void stop_vm(struct sup *S, const char *why)
{
	uint8_t buf[sizeof(struct chan_hdr) + 256];
	struct chan_hdr h = { .type = CHAN_STOP };
	size_t n = strlen(why);

	if (!S->error[0])
		snprintf(S->error, sizeof(S->error), "%s", why);
	if (n > sizeof(buf) - sizeof(h))
		n = sizeof(buf) - sizeof(h);
	memcpy(buf, &h, sizeof(h));
	memcpy(buf + sizeof(h), why, n);
	if (S->chan < 0 || send(S->chan, buf, sizeof(h) + n, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
		kill(S->pid, SIGKILL);
}

/* The run is over for --get data: what is queued or half done is dropped. */
static bool discarding(const struct sup *S)
{
	return S->stopping || S->error[0];
}

/* The backstop for a job whose --timeout counts from `from`. */
static uint64_t backstop_after(const struct run_opts *o, uint64_t from)
{
	return from + o->job.timeout_sec * 1000000u +
	       (kvm_host_is_pvm() ? PVM_BACKSTOP_US : BACKSTOP_US);
}

/*
 * The job started: the boot (or restore) and guest-init's set-up of the
 * job are over, and with them the boot's CPU quota. From here on the VM has
 * what --cpus says.
 */
static void on_ready(struct sup *S)
{
	/* A held job (--hold-fd) starts now: --timeout counts from here, once. */
	if (S->o->hold_fd >= 0 && !S->hold_over) {
		S->hold_over = true;
		S->backstop = backstop_after(S->o, now_us());
	}
	if (S->cg_on && S->cpu_job && S->cpu_job != S->cpu_boot &&
	    cgroup_set_cpu(&S->cg, S->cpu_job))
		husk_msg("warning: cannot set the job's CPU quota: %s", husk_lasterr());
	S->cpu_boot = S->cpu_job;
}

/* Take one message from the VM process into S->msg: 1 taken, 0 none waiting, -1 gone. */
static int recv_chan(struct sup *S)
{
	struct chan_hdr h;
	ssize_t n = run_chan_recv(S->chan, S->msg, RUN_CHAN_MAX);

	if (!n)
		return 0;
	if (n < 0) {
		if (n != -EPIPE) {
			/* It broke the rules: nothing more it says is believed. */
			stop_vm(S, husk_lasterr());
			kill(S->pid, SIGKILL);
		}
		close(S->chan);
		S->chan = -1;
		return -1;
	}
	memcpy(&h, S->msg, sizeof(h));
	if (h.type == CHAN_READY) {
		on_ready(S);
		return 1;
	}
	/* Late: a signal ended the wait for it (wait_vm_made). */
	if (h.type == CHAN_MADE)
		return 1;
	if (discarding(S))
		return 1;
	if (h.type != CHAN_GET_DATA && h.type != CHAN_GET_END) {
		stop_vm(S, "the VM process sent an unknown message");
		return 1;
	}
	S->msg_len = n - sizeof(h);
	S->msg_off = 0;
	S->msg_on = true;
	return 1;
}

/* A bounded step of the message at hand: GET_BUDGET inflated bytes at most. */
static void work_msg(struct sup *S)
{
	struct chan_hdr h;
	ssize_t n;
	int err = 0;

	memcpy(&h, S->msg, sizeof(h));
	if (discarding(S)) {
		S->msg_on = false;
		return;
	}
	if (S->msg_off < S->msg_len || run_files_get_busy(&S->files, h.idx)) {
		n = run_files_get_data(&S->files, h.idx, S->msg + sizeof(h) + S->msg_off,
				       S->msg_len - S->msg_off, GET_BUDGET);
		if (n < 0)
			err = (int)n;
		else
			S->msg_off += n;
		if (!err && (S->msg_off < S->msg_len || run_files_get_busy(&S->files, h.idx)))
			return;
	}
	if (!err && h.type == CHAN_GET_END)
		err = run_files_get_end(&S->files, h.idx);
	S->msg_on = false;
	if (err)
		stop_vm(S, husk_lasterr());
}

/*
 * --tty: our terminal's window changed (SIGWINCH comes to the terminal's
 * foreground group, which is us, not the VM process in its own session).
 * A lost message only loses a resize, so it is never waited for.
 */
static void pass_window(struct sup *S)
{
	struct chan_hdr h = { .type = CHAN_RESIZE };
	uint8_t buf[sizeof(h) + 4];
	struct winsize ws;

	if (ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws))
		return;
	memcpy(buf, &h, sizeof(h));
	memcpy(buf + sizeof(h), &ws.ws_row, 2);
	memcpy(buf + sizeof(h) + 2, &ws.ws_col, 2);
	if (S->chan >= 0)
		send(S->chan, buf, sizeof(buf), MSG_NOSIGNAL | MSG_DONTWAIT);
}

static void on_signal(struct sup *S)
{
	struct signalfd_siginfo si;

	if (read(S->sfd, &si, sizeof(si)) != sizeof(si))
		return;
	if (si.ssi_signo == SIGWINCH) {
		pass_window(S);
		return;
	}
	if (!S->r->signal)
		S->r->signal = si.ssi_signo;
	S->stopping = true;
	kill(S->pid, si.ssi_signo);
	if (!S->kill_at)
		S->kill_at = now_us() + SIGNAL_GRACE_US;
}

/* Sleep until the backstop has passed or the kill is due: nothing else is timed. */
static int next_timeout(const struct sup *S)
{
	uint64_t next = S->backstop == UINT64_MAX ? UINT64_MAX : S->backstop + 1;

	if (S->kill_at && S->kill_at < next)
		next = S->kill_at;
	return ms_until(next, now_us());
}

static void on_policy(struct sup *S)
{
	char why[512];
	int r = run_policy_handle(S->policy_fd, S->net, S->r, (now_us() - S->start) / 1000,
				  why, sizeof(why));

	if (r < 0) {
		close(S->policy_fd);
		S->policy_fd = -1;
	} else if (r > 0) {
		stop_vm(S, why);
		kill(S->pid, SIGKILL);
	}
}

/*
 * Wait for the VM process while extracting what it sends. Whatever it
 * sends, each pass does a bounded step of work and then looks at signals,
 * the egress filter, the backstop and the kill deadline. Once the VM
 * process is gone, what it left in the channel is finished before it is
 * reaped (its last --get data may still be queued).
 */
static void supervise(struct sup *S)
{
	while (!S->exited) {
		bool take = S->chan >= 0 && !S->msg_on;
		struct pollfd p[7] = {
			{ .fd = S->pidfd, .events = POLLIN },
			{ .fd = S->sfd, .events = POLLIN },
			{ .fd = take ? S->chan : -1, .events = POLLIN },
			{ .fd = run_net_events_fd(S->net), .events = POLLIN },
			{ .fd = run_net_addr_fd(S->net), .events = POLLIN },
			{ .fd = run_net_dns_fd(S->net), .events = POLLIN },
			{ .fd = S->policy_fd, .events = POLLIN },
		};
		bool busy = S->msg_on || (S->child_gone && S->chan >= 0);
		char why[256];
		uint64_t now;
		int r = poll(p, 7, busy ? 0 : next_timeout(S));

		if (r < 0 && errno != EINTR) {
			stop_vm(S, "poll failed");
			kill(S->pid, SIGKILL);
		}
		if (p[1].revents & POLLIN)
			on_signal(S);
		if ((p[3].revents & POLLIN) && run_net_poll(S->net, why, sizeof(why)))
			stop_vm(S, why);
		if ((p[4].revents & (POLLIN | POLLERR)) &&
		    run_net_addr_poll(S->net, why, sizeof(why)))
			stop_vm(S, why);
		if (p[5].revents & POLLIN)
			run_net_dns_handle(S->net);
		if (p[6].revents & (POLLIN | POLLHUP | POLLERR))
			on_policy(S);
		if (p[0].revents & POLLIN)
			S->child_gone = true;
		if (S->msg_on)
			work_msg(S);
		else if (take && ((p[2].revents & (POLLIN | POLLHUP | POLLERR)) || S->child_gone) &&
			 recv_chan(S) > 0 && S->msg_on)
			work_msg(S);
		/* Gone: reap once its messages are done (or not wanted any more). */
		if (S->child_gone && (S->chan < 0 || discarding(S)) && !S->msg_on &&
		    waitpid(S->pid, &S->wstatus, WNOHANG) == S->pid)
			S->exited = true;
		now = now_us();
		if (!S->exited && now > S->backstop) {
			stop_vm(S, "the VM process did not end by its deadline; killed");
			kill(S->pid, SIGKILL);
		}
		if (!S->exited && S->kill_at && now >= S->kill_at)
			kill(S->pid, SIGKILL);
	}
}

/* How the VM process ended, into r (the shared record is now final). */
static void collect(struct sup *S, uint64_t start)
{
	struct run_result *r = S->r;
	int sig = r->signal;

	run_report_import(r, &S->sh->vm, (int64_t)(now_us() - start));
	S->sh->seccomp_report[sizeof(S->sh->seccomp_report) - 1] = '\0';
	if (sig) {
		/* husk was asked to stop: that is how the VM ended, whatever it says. */
		r->signal = sig;
		r->reason = VM_STOP_SIGNAL;
	}
	if (S->error[0]) {
		snprintf(r->error, sizeof(r->error), "%s", S->error);
		if (r->reason == VM_RUNNING || r->reason == VM_STOP_POWEROFF)
			r->reason = VM_STOP_HOST_ERROR;
	}
	if (!S->exited)
		return;
	if (WIFSIGNALED(S->wstatus) && !r->error[0])
		snprintf(r->error, sizeof(r->error), "the VM process was killed by signal %d (%s)",
			 WTERMSIG(S->wstatus), strsignal(WTERMSIG(S->wstatus)));
	else if (WIFEXITED(S->wstatus) && WEXITSTATUS(S->wstatus) && !r->error[0])
		snprintf(r->error, sizeof(r->error), "%s", S->sh->seccomp_report[0] ?
			 S->sh->seccomp_report : "the VM process failed");
	if (r->error[0] && r->reason == VM_RUNNING)
		r->reason = VM_STOP_HOST_ERROR;
}

static int exit_status(const struct run_opts *o, const struct run_result *r)
{
	if (o->template_create)
		return r->error[0] ? RUN_EXIT_FAILURE : 0;
	if (r->timed_out)
		return RUN_EXIT_TIMEOUT;
	if (r->job_exited && !r->error[0])
		return r->job_signal ? 128 + r->job_signal : r->job_code;
	switch (r->reason) {
	case VM_STOP_TIMEOUT:
		return RUN_EXIT_TIMEOUT;
	case VM_STOP_SIGNAL:
		return 128 + r->signal;
	default:
		return RUN_EXIT_FAILURE;
	}
}

/* ---- the VM process's jail (jail.h) ---- */

/*
 * As root: a uid of its own from --uid-range and the runtime directory
 * prepared for it. Otherwise jail_fork/jail_enter do what they can and
 * say what is missing.
 */
static int setup_jail(struct sup *S)
{
	const struct run_opts *o = S->o;
	int err;

	if (o->no_jail) {
		husk_msg("warning: --no-jail: the VM process runs with husk's privileges, in "
			 "the host's namespaces, without seccomp");
		return 0;
	}
	if (!jail_privileged(NULL, 0))
		return 0;
	err = jail_uid_lease(o->uid_base, o->uid_count, &S->uid, &S->uid_lock);
	if (!err)
		err = jail_prepare_dir(S->dir, S->uid, S->uid);
	if (err)
		return err;
	S->jail = true;
	return 0;
}

/* ---- the VM process's cgroup ---- */

/*
 * CPU quota, memory (guest RAM + bounded overhead, no swap) and tasks. A
 * host without the controllers (or without root) runs the VM uncapped and
 * says so; the JSON record shows "cgroup": null.
 */
static unsigned boot_quota(unsigned vcpus)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	if (n < 1)
		n = 1;
	/* One more than the vCPUs: the device loop and main thread serve the boot. */
	return (vcpus + 1 < (unsigned long)n ? vcpus + 1 : (unsigned)n) * 1000;
}

static void setup_cgroup(struct sup *S)
{
	const struct run_opts *o = S->o;
	struct cgroup_limits l;

	cgroup_limits_for_vm(&l, o->mem_mib << 20, o->vcpus);
	if (o->cpu_milli)
		l.cpu_milli = o->cpu_milli;
	/*
	 * Booting (or restoring) and setting the job up are husk's work, not
	 * the job's: a CPU per vCPU and one more (as many as the host has) until the
	 * job starts, which the boot allowance and the stall rules bound; then
	 * --cpus (on_ready).
	 */
	S->cpu_job = l.cpu_milli;
	S->cpu_boot = boot_quota(o->vcpus);
	if (S->cpu_boot > S->cpu_job)
		l.cpu_milli = S->cpu_boot;
	else
		S->cpu_boot = S->cpu_job;
	if (o->pids_max)
		l.pids = o->pids_max;
	if (cgroup_create(&S->cg, &l)) {
		husk_msg("warning: the VM runs without a cgroup (no CPU, memory or task "
			 "limits on the host): %s", husk_lasterr());
		return;
	}
	S->cg_on = true;
}

static void teardown_cgroup(struct sup *S)
{
	struct run_result *r = S->r;
	struct cgroup_usage u;

	if (!S->cg_on)
		return;
	r->cg_on = true;
	snprintf(r->cg_mode, sizeof(r->cg_mode), "%s", cgroup_mode_name(&S->cg));
	if (!cgroup_read_usage(&S->cg, &u)) {
		r->cg_have = u.have;
		r->cg_cpu_us = u.cpu_us;
		r->cg_throttled_us = u.cpu_throttled_us;
		r->cg_mem_peak = u.mem_peak_bytes;
		r->cg_oom_kills = u.oom_kills;
		if (u.oom_kills && !r->job_exited)
			snprintf(r->error, sizeof(r->error), "the VM process exceeded its memory "
				 "limit on the host and was killed (cgroup OOM)");
	}
	if (cgroup_destroy(&S->cg))
		husk_msg("warning: %s", husk_lasterr());
	S->cg_on = false;
}

/* ---- the result record ---- */

static void record_to_fd(int fd, const struct run_result *r, const char *what)
{
	int dfd = dup(fd);
	FILE *f = dfd >= 0 ? fdopen(dfd, "w") : NULL;

	if (!f) {
		if (dfd >= 0)
			close(dfd);
		husk_msg("cannot write the result record to %s: %s", what, strerror(errno));
		return;
	}
	run_record_json(f, r);
	if (fclose(f))
		husk_msg("cannot write the result record to %s: %s", what, strerror(errno));
}

/*
 * Where the record was asked for. On stdout it follows the job's output,
 * which the job chose: a newline first if that output ended mid-line, so the
 * record is always a line of its own and the last one (nothing of the
 * job's can come after it). --json-fd and --result are beyond the job's
 * reach altogether.
 */
static void deliver_record(struct sup *S)
{
	const struct run_opts *o = S->o;
	const struct run_result *r = S->r;

	if (o->json) {
		if (r->stdout_open_line)
			fputc('\n', stdout);
		run_record_json(stdout, r);
		fflush(stdout);
	}
	if (o->json_fd >= 0)
		record_to_fd(o->json_fd, r, "--json-fd");
	if (S->result_fd >= 0)
		record_to_fd(S->result_fd, r, o->result);
}

/* ---- the run ---- */

/*
 * A template made with a NIC restores with one; under --net none it gets a
 * socket pair instead of a tap: what the guest sends goes nowhere, nothing
 * ever arrives (guest-init leaves eth0 down without a network anyway).
 */
static int black_hole_nic(struct sup *S)
{
	static const uint8_t mac[6] = { 0x02, 0x68, 0x75, 0x73, 0x6b, 0x00 };
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0)
		return husk_seterr(errno, "socketpair: %s", strerror(errno));
	S->tap_fd = sv[0];
	S->net_sink = sv[1];
	memcpy(S->mac, mac, sizeof(mac));
	return 0;
}

static int prepare(struct sup *S)
{
	const struct run_opts *o = S->o;
	int err;

	if (o->template_name && !o->template_create) {
		/* The template's images; a --kernel or --rootfs given must be them. */
		err = run_tpl_open(&S->tpl, &S->eff, S->rootfs, sizeof(S->rootfs));
		if (err)
			return err;
		snprintf(S->kernel, sizeof(S->kernel), "%s", S->tpl.t.meta.kernel_path);
		S->r->from_template = true;
		S->r->t_restore_open = now_us() - S->start;
	} else {
		err = run_find_image(o->kernel, "HUSK_KERNEL", ARCH_KERNEL_NAME, S->kernel,
				 sizeof(S->kernel));
		if (!err)
			err = run_find_image(o->rootfs, "HUSK_ROOTFS", "rootfs.cpio", S->rootfs,
					 sizeof(S->rootfs));
		if (!err && o->template_create)
			err = run_tpl_begin(&S->tpl, o, S->kernel, S->rootfs);
		if (err)
			return err;
	}
	if (o->net == RUN_NET_EGRESS)
		run_net_clean_stale();
	err = run_files_open_gets(&S->files);
	if (!err)
		err = make_rundir(S);
	if (!err)
		err = run_files_build_puts(&S->files, S->dir, S->sh->put_len);
	if (err)
		return err;
	if (o->console) {
		S->console_fd = host_open_output(o->console, "--console");
		if (S->console_fd < 0)
			return S->console_fd;
	}
	if (o->result) {
		S->result_fd = host_open_output(o->result, "--result");
		if (S->result_fd < 0)
			return S->result_fd;
	}
	if (o->json_fd >= 0 && (fcntl(o->json_fd, F_GETFL) & O_ACCMODE) == O_RDONLY)
		return husk_seterr(EBADF, "--json-fd %d: not open for writing", o->json_fd);
	if (o->session_fd >= 0 && !is_seqpacket(o->session_fd))
		return husk_seterr(EBADF, "--session-fd %d: not a SOCK_SEQPACKET socket",
				   o->session_fd);
	if (o->hold_fd >= 0 && fcntl(o->hold_fd, F_GETFD) < 0)
		return husk_seterr(EBADF, "--hold-fd %d is not an open file descriptor", o->hold_fd);
	if (o->policy_fd >= 0 && !is_seqpacket(o->policy_fd))
		return husk_seterr(EBADF, "--policy-fd %d: not a SOCK_SEQPACKET socket",
				   o->policy_fd);
	S->policy_fd = o->policy_fd;
	phase_mark(PH_SUP_PREPARE);
	if (o->net == RUN_NET_EGRESS) {
		err = run_net_setup(&S->net, o, &S->tap_fd, S->mac, &S->lease);
		if (err)
			return err;
		phase_mark(PH_SUP_NET);
	} else if (S->r->from_template && S->tpl.t.meta.net) {
		err = black_hole_nic(S);
		if (err)
			return err;
	}
	S->sfd = stop_signalfd();
	if (S->sfd >= 0 && S->o->job.terminal) {
		sigset_t set;

		/* --tty: window changes come in with the stop signals. */
		stop_sigset(&set);
		sigaddset(&set, SIGWINCH);
		pthread_sigmask(SIG_BLOCK, &set, NULL);
		signalfd(S->sfd, &set, 0);
	}
	return 0;
}

int run_job(const struct run_opts *o, uint64_t start, struct run_result *r)
{
	struct sup S;
	struct run_vm_report *sr;
	bool commit;

	memset(r, 0, sizeof(*r));
	memset(&S, 0, sizeof(S));
	/* A template may change the machine: everything reads S.o from here. */
	S.eff = *o;
	S.o = o = &S.eff;
	S.r = r;
	S.start = start;
	S.net_sink = -1;
	run_tpl_init(&S.tpl);
	S.dir_lock = S.tap_fd = S.console_fd = S.chan = S.sfd = S.pidfd = S.uid_lock = -1;
	S.result_fd = S.policy_fd = -1;
	run_files_init(&S.files, o);
	S.sh = mmap(NULL, sizeof(*S.sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		    -1, 0);
	S.msg = malloc(RUN_CHAN_MAX);
	if (S.sh == MAP_FAILED || !S.msg) {
		if (S.sh != MAP_FAILED)
			munmap(S.sh, sizeof(*S.sh));
		free(S.msg);
		snprintf(r->error, sizeof(r->error), "out of memory");
		return r->exit_code = RUN_EXIT_FAILURE;
	}
	phase_move(&S.sh->phases);
	sr = &S.sh->vm;
	sr->t_first_run = sr->t_init = sr->t_job_start = sr->t_job_end = sr->t_exit = -1;
	sr->t_restored = -1;
	for (int i = 0; i < IS_NR; i++)
		sr->guest_steps[i] = -1;
	r->start_epoch_us = wall_us() - (now_us() - start);
	/* A held job may wait for its start without end, as a created container does. */
	S.backstop = o->hold_fd >= 0 ? UINT64_MAX : backstop_after(o, start);

	if (prepare(&S) || spawn_vm(&S, start) || confine_vm(&S)) {
		snprintf(S.error, sizeof(S.error), "%s", husk_lasterr());
		if (S.pid > 0)
			kill(S.pid, SIGKILL);
	}
	if (S.pid > 0) {
		supervise(&S);
		if (!S.exited && waitpid(S.pid, &S.wstatus, 0) == S.pid)
			S.exited = true;
	}
	collect(&S, start);
	if (!S.pid)
		r->reason = VM_STOP_HOST_ERROR;
	run_net_teardown(S.net, r);
	teardown_cgroup(&S);
	if (o->template_create && !r->error[0] &&
	    run_tpl_finish(&S.tpl, &S.sh->vm, r))
		snprintf(r->error, sizeof(r->error), "template %s: %s", o->template_name,
			 husk_lasterr());
	if (o->template_create && !r->error[0] && !r->template_data && !S.sh->vm.saved)
		snprintf(r->error, sizeof(r->error), "the VM was not saved");
	r->exit_code = exit_status(o, r);
	commit = r->job_exited && !r->error[0] &&
		 (o->get_always || (r->exit_code == 0 && !r->timed_out));
	r->files_committed = run_files_close(&S.files, commit);
	if (commit && o->nr_get && !r->files_committed) {
		/* The job succeeded but its files did not reach the host. */
		snprintf(r->error, sizeof(r->error), "%s", husk_lasterr());
		r->exit_code = RUN_EXIT_FAILURE;
	}
	if (S.tap_fd >= 0)
		close(S.tap_fd);
	if (S.console_fd >= 0)
		close(S.console_fd);
	if (S.chan >= 0)
		close(S.chan);
	if (S.pidfd >= 0)
		close(S.pidfd);
	if (S.sfd >= 0)
		close(S.sfd);
	if (S.policy_fd >= 0)
		close(S.policy_fd);
	remove_rundir(&S);
	if (S.uid_lock >= 0)
		close(S.uid_lock);	/* the VM process is reaped: the uid is free */
	r->jail_uid = S.jail ? S.uid : 0;
	if (!S.jail)
		r->jailed = false;
	phase_import(&r->phases, &S.sh->phases, (int64_t)(now_us() - start));
	phase_move(NULL);
	munmap(S.sh, sizeof(*S.sh));
	free(S.msg);
	run_tpl_close(&S.tpl);
	if (S.net_sink >= 0)
		close(S.net_sink);
	r->t_teardown = now_us() - start;
	deliver_record(&S);
	if (S.result_fd >= 0)
		close(S.result_fd);
	return r->exit_code;
}

