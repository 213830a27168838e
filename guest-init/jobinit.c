/*
 * jobinit: the job's init, PID 1 of the job's own namespaces, and the
 * job's process up to exec.
 *
 * guest-init clones the job's init into new PID, mount, IPC, UTS and
 * network namespaces before it says HELLO, so that the job is not kept
 * waiting for them, and a template holds its init ready-made. The init,
 * still root, makes every mount private, replaces /proc and /dev (a tmpfs
 * with the usual devices, devpts and /dev/shm) and brings up lo,
 * then waits for the job spec (the P_JOB payload, relayed by guest-init
 * on the spec pipe). A job with a network (T_JOB_NET_*) leaves the private
 * network namespace for the guest's, where eth0 lives. For the job
 * guest-init does not exist: its /proc is a fresh procfs of its own PID
 * namespace, where PID 1 is "job-init" and ps shows only the job's
 * processes.
 *
 * The init then forks the job, which enters the sandbox (sandbox_enter:
 * cgroup, rlimits, capabilities, uid, no_new_privs, seccomp) and execs. The
 * init takes a uid of its own with CAP_KILL only, no_new_privs and seccomp
 * (sandbox_enter_jobinit) and from there on only
 *  - reaps every process orphaned in the namespace,
 *  - forwards SIGTERM, SIGINT and SIGHUP to the job's main process,
 *  - kills every process of the job on JOBINIT_KILL from guest-init,
 *  - reports the main process's wait status and rusage on the status pipe
 *    when it ends (a PID-namespace init cannot die of the job's signal, so
 *    its own exit status could not carry it) and exits, which makes the
 *    kernel kill whatever is left in the namespace.
 * It stays outside the job's cgroup: a timeout's cgroup.kill or the job's
 * memory limit ends the job's processes, never the one that reports how.
 *
 * In a session (T_JOB_SESSION) the init forks nothing: it stays PID 1 of
 * the namespaces that guest-init's helpers join for each exec (session.c).
 *
 * Test mode without root cannot create namespaces, so it skips them: the
 * job's init is then an ordinary child of guest-init (a subreaper, so
 * orphans still come to it) and kills the job's process group instead.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "init.h"
#include "job/proto.h"
#include "lib/util.h"

extern char **environ;

/* ---- the job's process ---- */

static bool env_has(char **env, size_t n, const char *key)
{
	size_t kl = strlen(key), i;

	for (i = 0; i < n; i++)
		if (!strncmp(env[i], key, kl) && env[i][kl] == '=')
			return true;
	return false;
}

/* T_JOB_ENV plus defaults for what the job did not set. */
static char **job_env(const struct job_spec *js)
{
	static const char *const defaults[] = {
		"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=", "USER=",
	};
	char **env = calloc(js->nenv + ARRAY_SIZE(defaults) + 1, sizeof(*env));
	char key[16];
	size_t n = 0, i;

	if (!env)
		return NULL;
	for (i = 0; i < js->nenv; i++)
		env[n++] = js->env[i];
	for (i = 0; i < ARRAY_SIZE(defaults); i++) {
		snprintf(key, sizeof(key), "%.*s", (int)strcspn(defaults[i], "="), defaults[i]);
		if (env_has(js->env, js->nenv, key))
			continue;
		if (!strcmp(key, "HOME")) {
			if (asprintf(&env[n++], "HOME=%s", cfg.workspace) < 0)
				return NULL;
		} else if (!strcmp(key, "USER")) {
			env[n++] = js->root ? "USER=root" : "USER=agentuser";
		} else {
			env[n++] = (char *)defaults[i];
		}
	}
	return env;
}

/* Report a set-up failure through errfd (guest-init: P_ERROR, or P_XERROR for an exec). */
_Noreturn void child_fail(int errfd)
{
	const char *m = husk_lasterr();

	if (write(errfd, m, strlen(m)) < 0)
		_exit(125);
	_exit(125);
}

/*
 * The job's terminal: the pty guest-init made in the job's devpts, opened by
 * the new session's leader, so it is its controlling terminal, and the job
 * user's (devpts gives it to whoever made it).
 */
static int open_tty(int index, bool root)
{
	char path[32];
	int fd;

	snprintf(path, sizeof(path), "/dev/pts/%d", index);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return husk_seterr(errno, "open the job's terminal %s: %s", path, strerror(errno));
	if (ioctl(fd, TIOCSCTTY, 0) || (cfg.drop_user && !root &&
					 fchown(fd, AGENT_UID, AGENT_GID)))
		return husk_seterr(errno, "make %s the job's terminal: %s", path, strerror(errno));
	return fd;
}

_Noreturn void job_exec(const struct job_spec *js, const struct job_fds *f, const char *cgroup)
{
	sigset_t none;
	char msg[512];
	char **env;
	int e, in;

	/* The job gets default signal state, not its init's. */
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_DFL);
	/* Its own session and process group: what test mode kills without a namespace. */
	if (setsid() < 0) {
		husk_seterr(errno, "setsid: %s", strerror(errno));
		child_fail(f->errfd);
	}
	/* The stdin pipe exists before the job does: without stdin frames, /dev/null. */
	in = js->stdin_frames ? f->in : open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (js->tty >= 0) {
		in = open_tty(js->tty, js->root);
		if (in < 0)
			child_fail(f->errfd);
		if (dup2(in, 0) < 0 || dup2(in, 1) < 0 || dup2(in, 2) < 0) {
			husk_seterr(errno, "dup2: %s", strerror(errno));
			child_fail(f->errfd);
		}
	} else if (in < 0 || dup2(in, 0) < 0 || dup2(f->out, 1) < 0 || dup2(f->err, 2) < 0) {
		husk_seterr(errno, "dup2: %s", strerror(errno));
		child_fail(f->errfd);
	}
	env = job_env(js);
	if (!env) {
		husk_seterr(ENOMEM, "out of memory for the environment");
		child_fail(f->errfd);
	}
	if (sandbox_enter(js, cgroup))
		child_fail(f->errfd);
	/* After the uid switch, so the agent user's permissions decide. */
	if (chdir(cfg.workspace) || (js->cwd && chdir(js->cwd))) {
		husk_seterr(errno, "chdir %s: %s", js->cwd ? js->cwd : cfg.workspace,
			    strerror(errno));
		child_fail(f->errfd);
	}
	/* execvp searches the PATH of environ, so switch before the call. */
	environ = env;
	execvp(js->argv[0], js->argv);
	e = errno;
	snprintf(msg, sizeof(msg), "husk-init: cannot execute '%s': %s\n", js->argv[0],
		 strerror(e));
	if (write(2, msg, strlen(msg)) < 0)
		_exit(126);
	_exit(e == ENOENT || e == ENOTDIR ? 127 : 126);
}

/* ---- the job's init: set-up ---- */

/* SIGCHLD and what the init acts on; blocked before it exists (no race). */
static void jobinit_sigset(sigset_t *s)
{
	sigemptyset(s);
	sigaddset(s, SIGCHLD);
	sigaddset(s, SIGTERM);
	sigaddset(s, SIGINT);
	sigaddset(s, SIGHUP);
	sigaddset(s, JOBINIT_KILL);
}

static int cmp_int(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

/*
 * Children that do not exec keep guest-init's close-on-exec descriptors
 * (control socket, signalfd, the guest-init ends of every pipe, another
 * exec's stdin among them, whose EOF would never come): close all but
 * stdio and keep.
 */
void close_fds_except(const int *keep_fds, size_t n)
{
	unsigned from = 3, last, i, fd;
	struct rlimit rl;
	int keep[16];

	if (n > ARRAY_SIZE(keep))
		n = ARRAY_SIZE(keep);
	memcpy(keep, keep_fds, n * sizeof(keep[0]));
	qsort(keep, n, sizeof(keep[0]), cmp_int);
	for (i = 0; i <= n; i++) {
		/* Sorted: -1 (absent) and stdio come first and are skipped. */
		if (i < n && (keep[i] < 0 || (unsigned)keep[i] < from))
			continue;
		last = i < n ? (unsigned)keep[i] - 1 : ~0u;
		if (last >= from && close_range(from, last, 0) && errno == ENOSYS) {
			/* Kernels before 5.9: one by one, up to the descriptor limit. */
			if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur > 65536)
				rl.rlim_cur = 65536;
			for (fd = from; fd <= last && fd < rl.rlim_cur; fd++)
				close(fd);
		}
		if (i < n)
			from = keep[i] + 1;
	}
}

/* The init keeps stdio and the job's pipe ends only. */
static void close_other_fds(const struct job_fds *f)
{
	int keep[] = { f->in, f->out, f->err, f->errfd, f->statfd, f->spec, f->netns };

	close_fds_except(keep, ARRAY_SIZE(keep));
}

/*
 * What the job reads as /proc/1/cmdline and comm: our argv strings are
 * rewritten in place (the init's own copy of guest-init's memory).
 */
static void set_title(void)
{
	if (cfg.title && cfg.title_len > 1) {
		memset(cfg.title, 0, cfg.title_len);
		snprintf(cfg.title, cfg.title_len, "%s", JOBINIT_NAME);
	}
	prctl(PR_SET_NAME, JOBINIT_NAME, 0, 0, 0);
}

/*
 * The job's /dev: a tmpfs of its own holding the devices a program expects
 * (the OCI runtime spec's default set), not guest-init's devtmpfs with the
 * root disk, the vsock, the console and the memory devices, whose nodes
 * the job never sees. Terminals come from the devpts instance guest-init
 * mounted for the job (it makes a --tty job's pty there), moved aside over
 * /tmp while /dev is replaced; POSIX shared memory from a tmpfs at /dev/shm.
 */
#define DEV_SHM_OPTS "mode=1777,size=64m"

static int dev_setup(void)
{
	static const struct {
		const char *path;
		unsigned major, minor;
	} nodes[] = {
		{ "/dev/null", 1, 3 }, { "/dev/zero", 1, 5 }, { "/dev/full", 1, 7 },
		{ "/dev/random", 1, 8 }, { "/dev/urandom", 1, 9 }, { "/dev/tty", 5, 0 },
	};
	static const struct {
		const char *target, *path;
	} links[] = {
		{ "/proc/self/fd", "/dev/fd" }, { "/proc/self/fd/0", "/dev/stdin" },
		{ "/proc/self/fd/1", "/dev/stdout" }, { "/proc/self/fd/2", "/dev/stderr" },
		{ "pts/ptmx", "/dev/ptmx" },
	};
	size_t i;

	if (mount("/dev/pts", "/tmp", NULL, MS_MOVE, NULL))
		return husk_seterr(errno, "move the job's devpts aside: %s", strerror(errno));
	/* Gone, not just covered: not even its mount shows. */
	if (umount2("/dev", MNT_DETACH))
		return husk_seterr(errno, "unmount guest-init's /dev: %s", strerror(errno));
	if (mount("tmpfs", "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k"))
		return husk_seterr(errno, "mount the job's /dev: %s", strerror(errno));
	for (i = 0; i < ARRAY_SIZE(nodes); i++)
		if (mknod(nodes[i].path, S_IFCHR | 0666, makedev(nodes[i].major, nodes[i].minor)) ||
		    chmod(nodes[i].path, 0666))
			return husk_seterr(errno, "make %s: %s", nodes[i].path, strerror(errno));
	for (i = 0; i < ARRAY_SIZE(links); i++)
		if (symlink(links[i].target, links[i].path))
			return husk_seterr(errno, "link %s: %s", links[i].path, strerror(errno));
	if (mkdir("/dev/pts", 0755) || mkdir("/dev/shm", 01777))
		return husk_seterr(errno, "make the job's /dev directories: %s", strerror(errno));
	if (mount("/tmp", "/dev/pts", NULL, MS_MOVE, NULL))
		return husk_seterr(errno, "move the job's devpts to /dev/pts: %s", strerror(errno));
	if (mount("shm", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, DEV_SHM_OPTS))
		return husk_seterr(errno, "mount the job's /dev/shm: %s", strerror(errno));
	return 0;
}

/* mkdir -p, one component at a time (each may exist already). */
static int make_dirs(const char *path)
{
	char buf[4096];
	size_t i, n = strlen(path);

	if (n >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, n + 1);
	for (i = 1; i <= n; i++) {
		if (buf[i] != '/' && buf[i])
			continue;
		buf[i] = '\0';
		if (mkdir(buf, 0755) && errno != EEXIST)
			return -errno;
		buf[i] = i < n ? '/' : '\0';
	}
	return 0;
}

/*
 * The job's tmpfs mounts (--tmpfs, an OCI bundle's tmpfs), in its own mount
 * namespace, as root: on a directory of the root image, or one made under a
 * writable tmpfs (/tmp, /run); the image itself is read-only.
 */
static int tmpfs_mounts(const struct job_spec *js)
{
	char opts[64];
	struct stat st;
	size_t i;
	int e;

	if (js->ntmpfs && !cfg.namespaces)
		return husk_seterr(ENOTSUP, "tmpfs mounts need the job's own mount namespace");
	for (i = 0; i < js->ntmpfs; i++) {
		const char *p = js->tmpfs[i].path;

		if (lstat(p, &st) && errno == ENOENT && (e = make_dirs(p)))
			return husk_seterr(-e, "the tmpfs at %s: no such directory, and it cannot be "
					   "made (%s): the root image is read-only, so it goes on a "
					   "directory the image has or under /tmp or /run", p,
					   strerror(-e));
		if (lstat(p, &st) || !S_ISDIR(st.st_mode))
			return husk_seterr(ENOTDIR, "the tmpfs at %s: not a directory", p);
		if (js->tmpfs[i].size)
			snprintf(opts, sizeof(opts), "mode=%o,size=%llu", js->tmpfs[i].mode,
				 (unsigned long long)js->tmpfs[i].size);
		else
			snprintf(opts, sizeof(opts), "mode=%o", js->tmpfs[i].mode);
		if (mount("tmpfs", p, "tmpfs",
			  MS_NOSUID | MS_NODEV | (js->tmpfs[i].noexec ? MS_NOEXEC : 0), opts))
			return husk_seterr(errno, "mount the tmpfs at %s (%s): %s", p, opts,
					   strerror(errno));
	}
	return 0;
}

/* Inside the new namespaces, as root: private mounts, a fresh /proc and /dev, lo. */
static int ns_setup(void)
{
	int err;

	/* Nothing mounted here may propagate back to guest-init's namespace. */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL))
		return husk_seterr(errno, "make the job's mounts private: %s", strerror(errno));
	/* guest-init's procfs goes entirely, not just under the new one. */
	if (umount2("/proc", MNT_DETACH))
		return husk_seterr(errno, "unmount guest-init's /proc: %s", strerror(errno));
	if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL))
		return husk_seterr(errno, "mount the job's /proc: %s", strerror(errno));
	err = dev_setup();
	if (err)
		return err;
	/* A private network namespace starts with lo down. */
	return net_lo_up();
}

/*
 * The job spec from guest-init: the pty index (JOBINIT_NO_TTY), the P_JOB
 * payload, then EOF. EOF before any byte: guest-init is gone, or ends
 * without a job.
 */
static void read_spec(const struct job_fds *f, struct job_spec *js)
{
	size_t len = 0, cap = 0;
	uint8_t *buf = NULL, *nb;
	uint32_t tty;
	ssize_t n;

	for (;;) {
		if (len == cap) {
			cap = cap ? cap * 2 : 4096;
			if (cap > PROTO_MAX_PAYLOAD || !(nb = realloc(buf, cap))) {
				husk_seterr(E2BIG, "the job spec does not fit %u bytes",
					    PROTO_MAX_PAYLOAD);
				child_fail(f->errfd);
			}
			buf = nb;
		}
		n = read(f->spec, buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			husk_seterr(errno, "reading the job spec: %s", strerror(errno));
			child_fail(f->errfd);
		}
		if (!n)
			break;
		len += n;
	}
	close(f->spec);
	if (!len)
		_exit(0);
	if (len < sizeof(tty) + 1 || job_spec_parse(buf + sizeof(tty), len - sizeof(tty), js))
		child_fail(f->errfd);
	memcpy(&tty, buf, sizeof(tty));
	if (tty != JOBINIT_NO_TTY) {
		if (!js->terminal || tty > INT32_MAX) {
			husk_seterr(EINVAL, "a pty for a job without a terminal");
			child_fail(f->errfd);
		}
		js->tty = (int)tty;
	}
	free(buf);
}

/* ---- the job's init: supervision ---- */

static void kill_job(pid_t job)
{
	/* In the namespace -1 is everyone but us; without one, the job's group. */
	if (cfg.namespaces) {
		kill(-1, SIGKILL);
	} else {
		kill(-job, SIGKILL);
		kill(job, SIGKILL);	/* it may not have called setsid() yet */
	}
}

int jobinit_report_write(int fd, int st, const struct rusage *ru)
{
	struct jobinit_report r;

	memset(&r, 0, sizeof(r));
	r.magic = JOBINIT_MAGIC;
	r.status = st;
	r.ru = *ru;
	/* One write below PIPE_BUF: atomic. */
	if (write(fd, &r, sizeof(r)) != (ssize_t)sizeof(r))
		return -EPIPE;
	return 0;
}

static _Noreturn void report_and_exit(pid_t job, int statfd, int st, const struct rusage *ru)
{
	/* If the report does not go, guest-init is gone. */
	if (jobinit_report_write(statfd, st, ru))
		_exit(1);
	/* Leaving the namespace kills what is left of the job; test mode has none. */
	if (!cfg.namespaces)
		kill_job(job);
	_exit(0);
}

static _Noreturn void supervise(pid_t job, int statfd)
{
	struct rusage ru;
	siginfo_t si;
	sigset_t set;
	pid_t pid;
	int sig, st;

	jobinit_sigset(&set);
	for (;;) {
		sig = sigwaitinfo(&set, &si);
		if (sig == SIGCHLD) {
			/* Orphans of the whole namespace come here; only the job counts. */
			while ((pid = wait4(-1, &st, WNOHANG, &ru)) > 0)
				if (pid == job)
					report_and_exit(job, statfd, st, &ru);
		} else if (sig == JOBINIT_KILL) {
			kill_job(job);
		} else if (sig > 0) {
			kill(job, sig);
		}
	}
}

/*
 * A session has no main process: the init stays PID 1 of the namespaces
 * its execs join (session.c) and only reaps the orphans there, until
 * guest-init kills it at the session's end, which ends the namespace and
 * whatever is left in it.
 */
static _Noreturn void session_init(const struct job_fds *f)
{
	siginfo_t si;
	sigset_t set;
	int sig;

	close(f->in);
	close(f->out);
	close(f->err);
	close(f->statfd);
	if (sandbox_enter_jobinit())
		child_fail(f->errfd);
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	/* EOF: guest-init may let the execs in. */
	close(f->errfd);
	jobinit_sigset(&set);
	for (;;) {
		sig = sigwaitinfo(&set, &si);
		if (sig == SIGCHLD)
			while (waitpid(-1, NULL, WNOHANG) > 0)
				;
		else if (sig == JOBINIT_KILL && cfg.namespaces)
			kill(-1, SIGKILL);
		/* SIGTERM, SIGINT, SIGHUP: there is no main process to pass them to. */
	}
}

static _Noreturn void jobinit_main(const struct job_fds *f)
{
	struct job_spec js;
	bool placed;
	int err = 0;
	pid_t job;

	close_other_fds(f);
	set_title();
	if (setsid() < 0) {
		husk_seterr(errno, "setsid: %s", strerror(errno));
		child_fail(f->errfd);
	}
	if (cfg.namespaces)
		err = ns_setup();
	else if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0))
		err = husk_seterr(errno, "PR_SET_CHILD_SUBREAPER: %s", strerror(errno));
	if (err)
		child_fail(f->errfd);
	read_spec(f, &js);
	if (tmpfs_mounts(&js))
		child_fail(f->errfd);
	/* The job's own UTS namespace: guest-init's name stays. */
	if (js.hostname && cfg.namespaces && sethostname(js.hostname, strlen(js.hostname))) {
		husk_seterr(errno, "set the job's host name: %s", strerror(errno));
		child_fail(f->errfd);
	}
	/* eth0 lives in the guest's network namespace. */
	if (js.net && f->netns >= 0 && setns(f->netns, CLONE_NEWNET)) {
		husk_seterr(errno, "enter the guest's network namespace: %s", strerror(errno));
		child_fail(f->errfd);
	}
	if (f->netns >= 0)
		close(f->netns);
	if (js.session)
		session_init(f);
	job = sandbox_fork(JOB_CGROUP, &placed);
	if (job < 0) {
		husk_seterr(errno, "fork the job: %s", strerror(errno));
		child_fail(f->errfd);
	}
	if (job == 0) {
		close(f->statfd);
		job_exec(&js, f, placed ? NULL : JOB_CGROUP);
	}
	/* Only the job may hold its pipes: their EOF is how its output ends. */
	close(f->in);
	close(f->out);
	close(f->err);
	if (sandbox_enter_jobinit()) {
		kill(job, SIGKILL);
		child_fail(f->errfd);
	}
	/*
	 * If guest-init dies (test mode: the test gave up on it), so does the
	 * job. Set after the uid change, which clears it.
	 */
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	close(f->errfd);
	supervise(job, f->statfd);
}

pid_t jobinit_prepare(struct job_fds *f)
{
	unsigned long flags = SIGCHLD;
	sigset_t set, old;
	long pid;
	int e;

	f->netns = -1;
	if (cfg.namespaces) {
		flags |= CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWNET;
		f->netns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
		if (f->netns < 0)
			return husk_seterr(errno, "open /proc/self/ns/net: %s", strerror(errno));
	}
	/* The init must not die of JOBINIT_KILL or SIGTERM sent before it waits for them. */
	jobinit_sigset(&set);
	sigprocmask(SIG_BLOCK, &set, &old);
	/*
	 * The raw system call, fork-like (no new stack), as bubblewrap does:
	 * glibc's clone() wants a stack of our own. The child's glibc keeps the
	 * parent's cached thread id, which only raise() and pthreads would use.
	 */
	pid = syscall(SYS_clone, flags, NULL, NULL, NULL, 0);
	if (pid == 0)
		jobinit_main(f);
	e = errno;
	sigprocmask(SIG_SETMASK, &old, NULL);
	if (f->netns >= 0)
		close(f->netns);
	f->netns = -1;
	if (pid < 0)
		return husk_seterr(e, "start the job's init%s: %s",
				   cfg.namespaces ? " in new namespaces" : "", strerror(e));
	return pid;
}
