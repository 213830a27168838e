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
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgroup.h"
#include "config.h"
#include "egress.h"
#include "jail.h"
#include "json.h"
#include "kvm.h"
#include "run_int.h"
#include "util.h"

#ifndef HUSK_IMAGE_DIR
#define HUSK_IMAGE_DIR "/usr/local/share/husk/images"
#endif
/* The VM process enforces --timeout and its boot allowance; this is the backstop. */
#define BACKSTOP_US (90ull * 1000000)
#define PVM_BACKSTOP_US (1860ull * 1000000)
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
	uint8_t mac[6];
	const struct netpool_lease *lease;
	bool jail;			/* full jail for the VM process */
	uid_t uid;			/* its uid (= gid) when jailed */
	int uid_lock;			/* flock'ed lease of uid */
	pid_t pid;
	int wstatus;
	bool exited;
	uint64_t backstop;
	char error[512];		/* the supervisor's own reason to end the run */
};

/* ---- default images ---- */

static int find_image(const char *given, const char *env, const char *name,
		      char *out, size_t len)
{
	char exe[PATH_MAX], *slash;
	ssize_t n;
	const char *e = getenv(env);

	if (given || (e && *e)) {
		snprintf(out, len, "%s", given ? given : e);
		return 0;
	}
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n > 0) {
		exe[n] = '\0';
		slash = strrchr(exe, '/');
		if (slash) {
			*slash = '\0';
			snprintf(out, len, "%s/images/%s", exe, name);
			if (access(out, R_OK) == 0)
				return 0;
		}
	}
	snprintf(out, len, "%s/%s", HUSK_IMAGE_DIR, name);
	if (access(out, R_OK) == 0)
		return 0;
	return husk_seterr(ENOENT, "no default %s: build it with 'make images' in the husk "
			   "build tree, or pass it explicitly (or set %s)", name, env);
}

/* ---- runtime directory ---- */

static const char *tmp_dir(void)
{
	const char *t = getenv("TMPDIR");

	return t && *t ? t : "/tmp";
}

/*
 * Runtime directories whose husk is gone: their lock is free. One still
 * being created has no lock file yet; it is left alone unless it is old.
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
	if (dfd >= 0) {
		S->dir_lock = openat(dfd, RUNDIR_LOCK, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC |
				     O_NOFOLLOW, 0600);
		close(dfd);
	}
	if (S->dir_lock < 0 || flock(S->dir_lock, LOCK_EX | LOCK_NB) < 0)
		return husk_seterr(errno, "cannot lock the runtime directory %s: %s", S->dir,
				   strerror(errno));
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

static int spawn_vm(struct sup *S, uint64_t start)
{
	struct run_vm_args a;
	struct chan_hdr go = { .type = CHAN_GO };
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
	a.console_fd = S->console_fd;
	a.tap_fd = S->tap_fd;
	memcpy(a.mac, S->mac, sizeof(a.mac));
	a.lease = S->lease;

	a.jail = S->jail;
	a.uid = S->uid;
	a.gid = S->uid;

	fflush(NULL);
	S->pid = S->o->no_jail ? fork() : jail_fork(JAIL_NEWNET);
	if (S->pid < 0) {
		close(sv[0]);
		close(sv[1]);
		return husk_seterr(errno, "cannot fork the VM process: %s", strerror(errno));
	}
	if (S->pid == 0) {
		int keep[] = { sv[1], a.put_fd, a.console_fd, a.tap_fd };

		/* Dies with the supervisor, whatever kills it (jail_fork does it too). */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		/* Nothing of the supervisor's: locks, maps, netlink, the user's dirs. */
		if (jail_close_fds(keep, sizeof(keep) / sizeof(keep[0]))) {
			husk_msg("%s", husk_lasterr());
			_exit(1);
		}
		_exit(run_vm_main(&a));
	}
	close(sv[1]);
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
	/* Before it maps guest RAM: memory charges stay where they were made. */
	if (S->cg_on && cgroup_attach(&S->cg, S->pid))
		return husk_seterr(EIO, "cannot put the VM process in its cgroup: %s",
				   husk_lasterr());
	if (send(S->chan, &go, sizeof(go), MSG_NOSIGNAL) != sizeof(go))
		return husk_seterr(errno, "cannot start the VM process: %s", strerror(errno));
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

static void on_chan(struct sup *S)
{
	static uint8_t buf[RUN_CHAN_MAX];
	struct chan_hdr h;
	ssize_t n = recv(S->chan, buf, sizeof(buf), MSG_DONTWAIT);
	int err;

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n < (ssize_t)sizeof(h)) {
		close(S->chan);		/* the VM process is going */
		S->chan = -1;
		return;
	}
	memcpy(&h, buf, sizeof(h));
	if (h.type == CHAN_GET_DATA)
		err = run_files_get_data(&S->files, h.idx, buf + sizeof(h), n - sizeof(h));
	else if (h.type == CHAN_GET_END)
		err = run_files_get_end(&S->files, h.idx);
	else
		err = husk_seterr(EPROTO, "the VM process sent message type %u", h.type);
	if (err)
		stop_vm(S, husk_lasterr());
}

static void supervise(struct sup *S)
{
	while (!S->exited) {
		struct pollfd p[5] = {
			{ .fd = S->pidfd, .events = POLLIN },
			{ .fd = S->sfd, .events = POLLIN },
			{ .fd = S->chan, .events = POLLIN },
			{ .fd = run_net_events_fd(S->net), .events = POLLIN },
			{ .fd = run_net_dns_fd(S->net), .events = POLLIN },
		};
		char why[256];
		int r = poll(p, 5, 1000);

		if (r < 0 && errno != EINTR) {
			stop_vm(S, "poll failed");
			kill(S->pid, SIGKILL);
		}
		/* Drain the VM process's messages before noticing it exited. */
		if (p[2].revents & (POLLIN | POLLHUP | POLLERR)) {
			on_chan(S);
			continue;
		}
		if (p[0].revents & POLLIN) {
			if (waitpid(S->pid, &S->wstatus, WNOHANG) == S->pid)
				S->exited = true;
			continue;
		}
		if (p[1].revents & POLLIN) {
			struct signalfd_siginfo si;

			if (read(S->sfd, &si, sizeof(si)) == sizeof(si)) {
				S->r->signal = si.ssi_signo;
				kill(S->pid, si.ssi_signo);
			}
		}
		if ((p[3].revents & POLLIN) && run_net_poll(S->net, why, sizeof(why)))
			stop_vm(S, why);
		if (p[4].revents & POLLIN)
			run_net_dns_handle(S->net);
		if (now_us() > S->backstop) {
			stop_vm(S, "the VM process did not end by its deadline; killed");
			kill(S->pid, SIGKILL);
		}
	}
}

/* How the VM process ended, into r (the shared record is now final). */
static void collect(struct sup *S)
{
	struct run_result *r = S->r;
	int sig = r->signal;

	*r = S->sh->r;
	if (sig && !r->signal)
		r->signal = sig;
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

static int exit_status(const struct run_result *r)
{
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
static void setup_cgroup(struct sup *S)
{
	const struct run_opts *o = S->o;
	struct cgroup_limits l;
	int n;

	n = cgroup_clean_stale();
	if (n > 0)
		husk_debug("removed %d stale cgroup(s)", n);
	cgroup_limits_for_vm(&l, o->mem_mib << 20, o->vcpus);
	if (o->cpu_milli)
		l.cpu_milli = o->cpu_milli;
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

/* ---- the run ---- */

static int prepare(struct sup *S)
{
	const struct run_opts *o = S->o;
	int err;

	err = find_image(o->kernel, "HUSK_KERNEL", "vmlinux", S->kernel, sizeof(S->kernel));
	if (!err)
		err = find_image(o->rootfs, "HUSK_ROOTFS", "rootfs.ext4", S->rootfs,
				 sizeof(S->rootfs));
	if (err)
		return err;
	clean_stale_rundirs();
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
		S->console_fd = open(o->console, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC |
				     O_NOCTTY, 0644);
		if (S->console_fd < 0)
			return husk_seterr(errno, "cannot open console file %s: %s", o->console,
					   strerror(errno));
	}
	if (o->net == RUN_NET_EGRESS) {
		err = run_net_setup(&S->net, o, &S->tap_fd, S->mac, &S->lease);
		if (err)
			return err;
	}
	setup_cgroup(S);
	err = setup_jail(S);
	if (!err && S->net)
		err = run_net_dns_start(S->net, S->cg_on ? &S->cg : NULL);
	if (err)
		return err;
	S->sfd = stop_signalfd();
	return 0;
}

int run_job(const struct run_opts *o, uint64_t start, struct run_result *r)
{
	struct sup S;
	struct run_result *sr;
	bool commit;

	memset(r, 0, sizeof(*r));
	memset(&S, 0, sizeof(S));
	S.o = o;
	S.r = r;
	S.dir_lock = S.tap_fd = S.console_fd = S.chan = S.sfd = S.pidfd = S.uid_lock = -1;
	run_files_init(&S.files, o);
	S.sh = mmap(NULL, sizeof(*S.sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		    -1, 0);
	if (S.sh == MAP_FAILED) {
		snprintf(r->error, sizeof(r->error), "out of memory");
		return r->exit_code = RUN_EXIT_FAILURE;
	}
	sr = &S.sh->r;
	sr->t_first_run = sr->t_init = sr->t_job_start = sr->t_job_end = sr->t_exit = -1;
	sr->start_epoch_us = wall_us() - (now_us() - start);
	S.backstop = start + o->timeout_sec * 1000000u +
		     (kvm_host_is_pvm() ? PVM_BACKSTOP_US : BACKSTOP_US);

	if (prepare(&S) || spawn_vm(&S, start)) {
		snprintf(S.error, sizeof(S.error), "%s", husk_lasterr());
		if (S.pid > 0)
			kill(S.pid, SIGKILL);
	}
	if (S.pid > 0) {
		supervise(&S);
		if (!S.exited && waitpid(S.pid, &S.wstatus, 0) == S.pid)
			S.exited = true;
	}
	collect(&S);
	if (!S.pid)
		r->reason = VM_STOP_HOST_ERROR;
	run_net_teardown(S.net, r);
	teardown_cgroup(&S);
	r->exit_code = exit_status(r);
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
	remove_rundir(&S);
	if (S.uid_lock >= 0)
		close(S.uid_lock);	/* the VM process is reaped: the uid is free */
	r->jail_uid = S.jail ? S.uid : 0;
	munmap(S.sh, sizeof(*S.sh));
	r->t_teardown = now_us() - start;
	return r->exit_code;
}

/* "cgroup": the VM process's group on the host and what it used. */
static void print_cgroup(FILE *f, const struct run_result *r)
{
	if (!r->cg_on) {
		fputs(",\"cgroup\":null", f);
		return;
	}
	fprintf(f, ",\"cgroup\":{\"mode\":\"%s\"", r->cg_mode);
	if (r->cg_have & CGROUP_USAGE_CPU)
		fprintf(f, ",\"cpu_us\":%llu", (unsigned long long)r->cg_cpu_us);
	if (r->cg_have & CGROUP_USAGE_THROTTLED)
		fprintf(f, ",\"cpu_throttled_us\":%llu", (unsigned long long)r->cg_throttled_us);
	if (r->cg_have & CGROUP_USAGE_MEM_PEAK)
		fprintf(f, ",\"memory_peak_bytes\":%llu", (unsigned long long)r->cg_mem_peak);
	if (r->cg_have & CGROUP_USAGE_OOM)
		fprintf(f, ",\"oom_kills\":%llu", (unsigned long long)r->cg_oom_kills);
	fputc('}', f);
}

/* "denied_destinations": the first distinct ones the filter refused. */
static void print_denied(FILE *f, const struct run_result *r)
{
	char addr[INET6_ADDRSTRLEN];
	unsigned i;

	fputs(",\"denied_destinations\":[", f);
	for (i = 0; i < r->nr_denied; i++) {
		const struct egress_denied_dst *d = &r->denied[i];
		const char *proto = d->proto == IPPROTO_TCP ? "tcp" : d->proto == IPPROTO_UDP ?
				    "udp" : d->proto == IPPROTO_ICMP || d->proto == IPPROTO_ICMPV6 ?
				    "icmp" : "other";

		if (!inet_ntop(d->family == 6 ? AF_INET6 : AF_INET, d->addr, addr, sizeof(addr)))
			snprintf(addr, sizeof(addr), "?");
		fprintf(f, "%s{\"address\":\"%s\",\"protocol\":\"%s\",\"port\":%u,"
			"\"reason\":\"%s\"}", i ? "," : "", addr, proto, d->port,
			egress_reason_name(d->reason));
	}
	fputc(']', f);
}

/* The DNS proxy's part of the network section. */
static void print_dns(FILE *f, const struct run_result *r)
{
	unsigned i;

	if (!r->dns_on) {
		fputs(",\"dns\":null", f);
		return;
	}
	fprintf(f, ",\"dns\":{\"queries\":%llu,\"allowed\":%llu,\"refused\":%llu,"
		"\"failed\":%llu,\"malformed\":%llu,\"foreign\":%llu,"
		"\"addresses_opened\":%llu,\"quota_full\":%llu,\"helper_error\":",
		(unsigned long long)r->dns.queries, (unsigned long long)r->dns.allowed,
		(unsigned long long)r->dns.refused, (unsigned long long)r->dns.failed,
		(unsigned long long)r->dns.malformed, (unsigned long long)r->dns.foreign,
		(unsigned long long)r->dns_learn.opened,
		(unsigned long long)r->dns_learn.quota_full);
	if (r->dns_fault[0])
		json_string(f, r->dns_fault);
	else
		fputs("null", f);
	fputs(",\"refused_names\":[", f);
	for (i = 0; i < r->nr_dns_refused; i++) {
		if (i)
			fputc(',', f);
		json_string(f, r->dns_refused[i]);
	}
	fputs("]}", f);
}

void run_print_json(const struct run_result *r)
{
	FILE *f = stdout;

	fprintf(f, "{\"exit_code\":%d,\"job\":{\"started\":%s,\"exited\":%s,", r->exit_code,
		r->job_started ? "true" : "false", r->job_exited ? "true" : "false");
	if (r->job_exited && !r->job_signal)
		fprintf(f, "\"exit\":%d,\"signal\":null,", r->job_code);
	else if (r->job_exited)
		fprintf(f, "\"exit\":null,\"signal\":%d,", r->job_signal);
	else
		fprintf(f, "\"exit\":null,\"signal\":null,");
	fprintf(f, "\"timed_out\":%s,\"cpu_user_us\":%llu,\"cpu_sys_us\":%llu,"
		"\"peak_rss_kib\":%llu},", r->timed_out ? "true" : "false",
		(unsigned long long)r->user_us, (unsigned long long)r->sys_us,
		(unsigned long long)r->maxrss_kib);
	fprintf(f, "\"vm_stop\":\"%s\",\"error\":", vm_reason_name(r->reason));
	if (r->error[0])
		json_string(f, r->error);
	else
		fputs("null", f);
	fprintf(f, ",\"bytes\":{\"stdout\":%llu,\"stderr\":%llu,\"stdout_dropped\":%llu,"
		"\"stderr_dropped\":%llu},\"files_committed\":%s,"
		"\"start_epoch_us\":%llu,\"timings_us\":{\"process_start\":0,"
		"\"first_kvm_run\":%lld,\"init\":%lld,\"job_start\":%lld,\"job_end\":%lld,"
		"\"vm_exit\":%lld,\"teardown\":%lld}",
		(unsigned long long)r->stdout_bytes, (unsigned long long)r->stderr_bytes,
		(unsigned long long)r->stdout_dropped, (unsigned long long)r->stderr_dropped,
		r->files_committed ? "true" : "false", (unsigned long long)r->start_epoch_us,
		(long long)r->t_first_run, (long long)r->t_init, (long long)r->t_job_start,
		(long long)r->t_job_end, (long long)r->t_exit, (long long)r->t_teardown);
	fprintf(f, ",\"jail\":{\"confined\":%s,\"uid\":", r->jailed ? "true" : "false");
	if (r->jailed)
		fprintf(f, "%u}", r->jail_uid);
	else
		fputs("null}", f);
	print_cgroup(f, r);
	if (r->net) {
		const struct egress_counters *c = &r->net_ctr;
		unsigned i;

		/* Counters are null when the filter could not be read. */
		fputs(",\"network\":{\"mode\":\"egress\",\"anomaly\":", f);
		if (r->anomaly[0])
			json_string(f, r->anomaly);
		else
			fputs("null", f);
		if (r->net_counters) {
			fprintf(f, ",\"packets_out\":%llu,\"bytes_out\":%llu,\"drops\":%llu,"
				"\"drops_by_reason\":{", (unsigned long long)c->packets,
				(unsigned long long)c->bytes, (unsigned long long)c->dropped);
			for (i = 0; i < EGRESS_DROP__MAX; i++)
				fprintf(f, "%s\"%s\":%llu", i ? "," : "", egress_reason_name(i),
					(unsigned long long)c->drops[i]);
			fprintf(f, "},\"packets_in\":%llu,\"bytes_in\":%llu",
				(unsigned long long)c->in_packets, (unsigned long long)c->in_bytes);
		} else {
			fputs(",\"packets_out\":null,\"bytes_out\":null,\"drops\":null,"
			      "\"drops_by_reason\":null,\"packets_in\":null,\"bytes_in\":null", f);
		}
		print_denied(f, r);
		print_dns(f, r);
		fputc('}', f);
	}
	fputs("}\n", f);
	fflush(f);
}
