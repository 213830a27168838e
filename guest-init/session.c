/*
 * session: one VM serving many commands (docs/protocol.md, "Sessions").
 * After the same set-up as a one-shot job, guest-init serves P_EXEC,
 * P_XSTDIN, P_XSIGNAL, P_PUT and P_GET from one poll loop until P_END, the
 * session's lifetime or a protocol error, then kills everything.
 *
 * The job's init stays PID 1 of the session's namespaces (jobinit.c).
 * Each exec is started by a helper, a child of guest-init that joins those
 * namespaces with setns() and forks the exec's process, which joins a
 * cgroup of its own below the job's, enters the sandbox and execs
 * (job_exec, as for a one-shot job). The helper stays in guest-init's PID
 * namespace, where the exec cannot see it, and is what lets guest-init
 * never wait for an exec: it passes on the signals guest-init writes to it
 * on a pipe, and when the exec's main process ends it kills the rest of its
 * process group and writes the wait status and rusage on another pipe, as
 * the job's init does for a one-shot job.
 *
 * Puts and gets run in children that are the agent user (job.c), fed
 * through pipes, so the execs' output keeps flowing while files move.
 *
 * Test mode without root has no namespaces and no cgroups: an exec is then
 * a grandchild of guest-init in its own process group, which is what its
 * helper signals and kills.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "init.h"
#include "job/proto.h"
#include "lib/util.h"

/* In the order a helper joins them: mnt last, it moves the root. */
enum { NS_IPC, NS_UTS, NS_NET, NS_PID, NS_MNT, NS_NR };
static const char *const ns_names[NS_NR] = { "ipc", "uts", "net", "pid", "mnt" };

struct exec {
	struct exec *next;
	uint32_t id;
	bool live;		/* its id is taken: no P_XEXIT or P_XERROR yet */
	bool started;		/* P_XSTARTED sent */
	bool failed;		/* its set-up failed: P_XERROR sent */
	bool ended;		/* its main process is gone: res is filled */
	pid_t helper;		/* 0 once reaped */
	int cmd;		/* signal numbers for the helper; its EOF kills the exec */
	int ep;			/* set-up failure message; EOF once it has exec'd */
	char msg[512];
	size_t msg_len;
	struct report_rd rep;	/* the helper's report */
	struct feed in;
	struct stream out[2];
	uint64_t timeout_at;	/* its T_JOB_TIMEOUT_MS; 0 = none or passed */
	uint64_t force_at;	/* SIGKILL the helper if no report has come by then */
	uint64_t drain_at;	/* give up on its output then; 0 = not ended */
	char cgroup[64];	/* its cgroup, "" without cgroups */
	struct job_result res;
};

/* A put or a get. */
struct xfer {
	struct xfer *next;
	bool put;
	uint32_t id;
	bool live;		/* no P_XDONE, last P_XFILES or P_XERROR yet */
	pid_t pid;		/* its helper, 0 once reaped */
	int status;		/* the helper's wait status */
	int msg;		/* why it failed, read once the helper is gone */
	struct feed in;		/* put: the archive, to the helper */
	bool end;		/* put: the host sent its last chunk */
	int out;		/* get: the archive, from the helper; -1 at EOF */
};

struct session;
typedef int (*watch_fn)(struct session *s, void *obj);

/* This round's poll set: what to call for each descriptor that is ready. */
struct watches {
	struct pollfd *pfd;
	watch_fn *fn;
	void **obj;
	size_t n, cap;
};

struct session {
	const struct job_spec *js;
	pid_t init;		/* the job's init, PID 1 of the namespaces; 0 once reaped */
	int ns[NS_NR];		/* its namespaces, for the helpers to join */
	struct exec *execs;
	struct xfer *xfers;
	int sfd;		/* SIGCHLD */
	struct proto_reader rd;
	uint64_t end_at;	/* the session's lifetime; 0 = none */
	bool end;		/* P_END came */
	bool ending;		/* killing everything: the init's death is expected */
	struct watches w;
	uint32_t *stale;	/* ids whose cgroups were still busy when freed */
	size_t nstale;
};

/* ---- frames to the host ---- */

static void put_id(uint8_t *p, uint32_t id)
{
	p[0] = id;
	p[1] = id >> 8;
	p[2] = id >> 16;
	p[3] = id >> 24;
}

static uint32_t get_id(const uint8_t *p)
{
	return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24;
}

/* A frame for id: the id, then len (at most CHUNK_MAX) bytes of p. */
static int send_x(uint16_t type, uint32_t id, const void *p, size_t len)
{
	static uint8_t buf[PROTO_ID_LEN + CHUNK_MAX];

	if (len > CHUNK_MAX)
		len = CHUNK_MAX;
	put_id(buf, id);
	if (len)
		memmove(buf + PROTO_ID_LEN, p, len);
	return proto_send(cfg.ctl, type, buf, PROTO_ID_LEN + len);
}

/* One request failed; the session goes on. -errno only if the send failed. */
static int __attribute__((format(printf, 2, 3))) xerror(uint32_t id, const char *fmt, ...)
{
	char msg[600];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "husk-init: request %u: %s\n", id, msg);
	return send_x(P_XERROR, id, msg, strlen(msg));
}

/* ---- ids ---- */

static struct exec *exec_find(struct session *s, uint32_t id)
{
	struct exec *x;

	for (x = s->execs; x; x = x->next)
		if (x->live && x->id == id)
			return x;
	return NULL;
}

static struct xfer *xfer_find(struct session *s, uint32_t id)
{
	struct xfer *t;

	for (t = s->xfers; t; t = t->next)
		if (t->live && t->id == id)
			return t;
	return NULL;
}

static bool id_busy(struct session *s, uint32_t id)
{
	return exec_find(s, id) || xfer_find(s, id);
}

static unsigned live_execs(struct session *s)
{
	struct exec *x;
	unsigned n = 0;

	for (x = s->execs; x; x = x->next)
		n += x->live;
	return n;
}

static struct xfer *open_put(struct session *s)
{
	struct xfer *t;

	for (t = s->xfers; t; t = t->next)
		if (t->live && t->put)
			return t;
	return NULL;
}

/* Some stdin or put queue is full: the host waits until it drains. */
static bool queues_full(struct session *s)
{
	struct exec *x;
	struct xfer *t;

	for (x = s->execs; x; x = x->next)
		if (x->in.len >= STDIN_QUEUE_MAX)
			return true;
	for (t = s->xfers; t; t = t->next)
		if (t->in.len >= STDIN_QUEUE_MAX)
			return true;
	return false;
}

/* ---- an exec's helper (a child of guest-init) ---- */

struct helper_fds {
	int in, out, err, ep, sp, cmd;	/* the exec's side of each pipe; in -1: none */
};

static int join_namespaces(const int *ns)
{
	int i;

	for (i = 0; i < NS_NR; i++) {
		if (setns(ns[i], 0))
			return husk_seterr(errno, "join the session's %s namespace: %s",
					   ns_names[i], strerror(errno));
		close(ns[i]);
	}
	return 0;
}

static void signal_group(pid_t g, int sig)
{
	/* Before its setsid() the group does not exist yet. */
	if (kill(-g, sig) && errno == ESRCH)
		kill(g, sig);
}

/*
 * Pass on guest-init's signals until the exec's main process g ends, then
 * kill the rest of its group and report. waitid(WNOWAIT) sees the end
 * before the reaping, so g's pid and group cannot be reused by then.
 */
static _Noreturn void helper_wait(pid_t g, int sp, int cmd)
{
	struct signalfd_siginfo ssi;
	uint32_t sigs[64];
	struct pollfd p[2];
	struct rusage ru;
	sigset_t chld;
	siginfo_t si;
	int sfd, st, i;
	ssize_t n;

	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	/* Without it, poll every 100 ms instead. */
	sfd = signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC);
	for (;;) {
		memset(&si, 0, sizeof(si));
		if (!waitid(P_PID, g, &si, WEXITED | WNOHANG | WNOWAIT) && si.si_pid == g)
			break;
		p[0] = (struct pollfd){ .fd = cmd, .events = POLLIN };
		p[1] = (struct pollfd){ .fd = sfd, .events = POLLIN };
		if (poll(p, 2, sfd >= 0 ? -1 : 100) < 0)
			continue;
		while (sfd >= 0 && read(sfd, &ssi, sizeof(ssi)) > 0)
			;
		if (!p[0].revents)
			continue;
		n = read(cmd, sigs, sizeof(sigs));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			/* guest-init closed it, or is gone: the exec goes. */
			signal_group(g, SIGKILL);
			close(cmd);
			cmd = -1;
		}
		for (i = 0; i < n / 4; i++)
			signal_group(g, sigs[i]);
	}
	kill(-g, SIGKILL);
	while (wait4(g, &st, 0, &ru) < 0 && errno == EINTR)
		;
	jobinit_report_write(sp, st, &ru);
	_exit(0);
}

static _Noreturn void exec_helper(const struct session *s, const struct job_spec *xs,
				  const char *cgroup, const struct helper_fds *h)
{
	struct job_fds f = { h->in, h->out, h->err, h->ep, -1, -1, -1 };
	int keep[6 + NS_NR] = { h->in, h->out, h->err, h->ep, h->sp, h->cmd };
	bool placed;
	pid_t pid;
	int i;

	for (i = 0; i < NS_NR; i++)
		keep[6 + i] = s->ns[i];
	close_fds_except(keep, ARRAY_SIZE(keep));
	if (cfg.namespaces && join_namespaces(s->ns))
		child_fail(h->ep);
	/* setns(pid) takes effect for children: this one is in the job's PID namespace. */
	pid = sandbox_fork(cgroup, &placed);
	if (pid < 0) {
		husk_seterr(errno, "fork the exec: %s", strerror(errno));
		child_fail(h->ep);
	}
	if (pid == 0) {
		close(h->sp);
		close(h->cmd);
		job_exec(xs, &f, placed ? NULL : cgroup);
	}
	/* Only the exec may hold its pipes: their EOF is how its output ends. */
	if (h->in >= 0)
		close(h->in);
	close(h->out);
	close(h->err);
	close(h->ep);
	helper_wait(pid, h->sp, h->cmd);
}

/* ---- execs (guest-init's side) ---- */

enum { PI_IN, PI_OUT, PI_ERR, PI_EP, PI_SP, PI_CMD, PI_NR };

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static int exec_spawn(struct session *s, struct exec *x, const struct job_spec *xs)
{
	int p[PI_NR][2], i, err = 0;
	struct helper_fds h;
	pid_t pid;

	for (i = 0; i < PI_NR; i++)
		p[i][0] = p[i][1] = -1;
	for (i = 0; i < PI_NR && !err; i++)
		if ((i != PI_IN || xs->stdin_frames) && pipe2(p[i], O_CLOEXEC))
			err = husk_seterr(errno, "pipe: %s", strerror(errno));
	if (!err && cfg.use_cgroup) {
		snprintf(x->cgroup, sizeof(x->cgroup), JOB_CGROUP "/x%u", x->id);
		if (mkdir(x->cgroup, 0755) && errno != EEXIST)
			err = husk_seterr(errno, "mkdir %s: %s", x->cgroup, strerror(errno));
	}
	if (!err) {
		h = (struct helper_fds){ p[PI_IN][0], p[PI_OUT][1], p[PI_ERR][1], p[PI_EP][1],
					 p[PI_SP][1], p[PI_CMD][0] };
		x->res.start_ns = realtime_ns();
		pid = fork();
		if (pid == 0)
			exec_helper(s, xs, x->cgroup, &h);
		if (pid < 0)
			err = husk_seterr(errno, "fork: %s", strerror(errno));
		x->helper = pid > 0 ? pid : 0;
	}
	/* The helper's ends; ours on success, all of them otherwise. */
	close_fd(&p[PI_IN][0]);
	close_fd(&p[PI_OUT][1]);
	close_fd(&p[PI_ERR][1]);
	close_fd(&p[PI_EP][1]);
	close_fd(&p[PI_SP][1]);
	close_fd(&p[PI_CMD][0]);
	if (err) {
		if (x->cgroup[0])
			rmdir(x->cgroup);
		for (i = 0; i < PI_NR; i++) {
			close_fd(&p[i][0]);
			close_fd(&p[i][1]);
		}
		return err;
	}
	x->in.fd = p[PI_IN][1];
	x->out[0].fd = p[PI_OUT][0];
	x->out[1].fd = p[PI_ERR][0];
	x->ep = p[PI_EP][0];
	x->rep.fd = p[PI_SP][0];
	x->cmd = p[PI_CMD][1];
	for (i = 0; i < PI_NR; i++) {
		int fd = i == PI_IN || i == PI_CMD ? p[i][1] : p[i][0];

		if (fd >= 0)
			fcntl(fd, F_SETFL, O_NONBLOCK);
	}
	return 0;
}

/* An exec of that id (a new one, if the host reused it) owns its cgroup. */
static bool cgroup_taken(struct session *s, uint32_t id)
{
	struct exec *x;

	for (x = s->execs; x; x = x->next)
		if (x->id == id)
			return true;
	return false;
}

/* 0 removed or taken over, -EBUSY still in use. */
static int cgroup_remove(struct session *s, uint32_t id)
{
	char path[64];

	if (cgroup_taken(s, id))
		return 0;
	snprintf(path, sizeof(path), JOB_CGROUP "/x%u", id);
	return rmdir(path) && errno == EBUSY ? -EBUSY : 0;
}

/*
 * Killed processes leave their cgroup a moment after their pipes close:
 * a cgroup still busy is removed later (tend), so a long session that
 * never reuses an id does not pile them up.
 */
static void cgroups_tidy(struct session *s)
{
	size_t i = 0;

	while (i < s->nstale) {
		if (cgroup_remove(s, s->stale[i]))
			i++;
		else
			s->stale[i] = s->stale[--s->nstale];
	}
}

/* x is no longer on the session's list. */
static void exec_free(struct session *s, struct exec *x)
{
	uint32_t *nv;

	close_fd(&x->ep);
	close_fd(&x->rep.fd);
	close_fd(&x->cmd);
	close_fd(&x->out[0].fd);
	close_fd(&x->out[1].fd);
	feed_close(&x->in);
	if (x->cgroup[0] && cgroup_remove(s, x->id)) {
		nv = reallocarray(s->stale, s->nstale + 1, sizeof(*nv));
		if (nv) {
			s->stale = nv;
			s->stale[s->nstale++] = x->id;
		}
	}
	free(x);
}

/* now + ms, saturating: 2^64 ms never comes. 0 ms: none. */
static uint64_t deadline(uint64_t now, uint64_t ms)
{
	if (!ms)
		return 0;
	if (ms > (UINT64_MAX - now) / 1000)
		return UINT64_MAX;
	return now + ms * 1000;
}

static int on_exec(struct session *s, uint32_t id, const uint8_t *p, size_t len)
{
	struct job_spec xs;
	struct exec *x;
	int err;

	if (id_busy(s, id))
		return xerror(id, "id %u is in use", id);
	if (live_execs(s) >= PROTO_MAX_EXECS)
		return xerror(id, "already %d execs running", PROTO_MAX_EXECS);
	if (exec_spec_parse(p, len, s->js, &xs)) {
		err = xerror(id, "bad exec spec: %s", husk_lasterr());
		job_spec_free(&xs);
		return err;
	}
	x = calloc(1, sizeof(*x));
	if (!x) {
		job_spec_free(&xs);
		return xerror(id, "out of memory for an exec");
	}
	x->id = id;
	x->in.fd = x->ep = x->rep.fd = x->cmd = -1;
	x->out[0] = (struct stream){ .fd = -1, .type = P_XOUT, .pre_len = PROTO_ID_LEN + 1 };
	x->out[1] = x->out[0];
	put_id(x->out[0].pre, id);
	put_id(x->out[1].pre, id);
	x->out[0].pre[PROTO_ID_LEN] = 1;
	x->out[1].pre[PROTO_ID_LEN] = 2;
	err = exec_spawn(s, x, &xs);
	x->timeout_at = deadline(now_us(), xs.timeout_ms);
	job_spec_free(&xs);
	if (err) {
		free(x);
		return xerror(id, "starting the exec: %s", husk_lasterr());
	}
	x->live = true;
	x->next = s->execs;
	s->execs = x;
	return 0;
}

/* Signals go through the helper, which knows whether the exec is still there. */
static void exec_signal(struct exec *x, int sig)
{
	uint32_t v = sig;

	if (x->cmd >= 0 && write(x->cmd, &v, sizeof(v)) < 0)
		fprintf(stderr, "husk-init: exec %u: signal %d: %s\n", x->id, sig, strerror(errno));
}

/* Every process of the exec: its cgroup, and its group through the helper. */
static void exec_kill(struct exec *x)
{
	if (x->cgroup[0])
		sandbox_kill_cgroup(x->cgroup);
	exec_signal(x, SIGKILL);
}

static int on_signal(struct session *s, uint32_t id, const uint8_t *p, size_t len)
{
	struct exec *x;
	uint32_t sig;

	if (len != 4)
		return husk_seterr(EPROTO, "P_XSIGNAL for %u has %zu bytes after the id (4)", id,
				   len);
	sig = get_id(p);
	if (sig < 1 || sig > 64)
		return husk_seterr(EPROTO, "P_XSIGNAL for %u has signal %u (1..64)", id, sig);
	x = exec_find(s, id);
	/* An exec that has just ended, or never was: the host raced it. */
	if (!x || x->ended)
		return 0;
	if (sig == SIGKILL)
		exec_kill(x);
	else
		exec_signal(x, sig);
	return 0;
}

static int on_stdin(struct session *s, uint32_t id, const uint8_t *p, size_t len)
{
	struct exec *x = exec_find(s, id);

	/* Not asked for (no pipe: dropped), ended or unknown: dropped too. */
	if (!x || x->ended)
		return 0;
	return feed_queue(&x->in, p, len);
}

static int exec_failed(struct exec *x)
{
	x->failed = true;
	x->live = false;
	close_fd(&x->out[0].fd);
	close_fd(&x->out[1].fd);
	close_fd(&x->rep.fd);
	feed_close(&x->in);
	x->msg[x->msg_len] = 0;
	return xerror(x->id, "setting up the exec: %s", x->msg);
}

/* A message means its set-up failed; EOF alone, that it is about to exec. */
static int on_ep(struct session *s, void *obj)
{
	struct exec *x = obj;
	ssize_t n;

	n = read(x->ep, x->msg + x->msg_len, sizeof(x->msg) - 1 - x->msg_len);
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return 0;
	if (n > 0) {
		x->msg_len += n;
		if (x->msg_len < sizeof(x->msg) - 1)
			return 0;
	}
	close_fd(&x->ep);
	if (x->msg_len)
		return exec_failed(x);
	x->started = true;
	return send_x(P_XSTARTED, x->id, NULL, 0);
}

static void exec_ended(struct exec *x, int st, const struct rusage *ru)
{
	x->ended = true;
	job_result_set(&x->res, st, ru);
}

static int on_report(struct session *s, void *obj)
{
	struct exec *x = obj;

	if (report_read(&x->rep) == 1 && !x->ended)
		exec_ended(x, x->rep.rep.status, &x->rep.rep.ru);
	return 0;
}

/* Without a report, the helper's own death stands for the exec's. */
static void helper_gone(struct exec *x, int st, const struct rusage *ru)
{
	x->helper = 0;
	close_fd(&x->cmd);
	if (x->ended || x->failed)
		return;
	if (report_read(&x->rep) == 1) {
		exec_ended(x, x->rep.rep.status, &x->rep.rep.ru);
		return;
	}
	close_fd(&x->rep.fd);
	exec_ended(x, st, ru);
}

static int on_out(struct session *s, void *obj)
{
	return stream_pump(obj);
}

static int on_feed(struct session *s, void *obj)
{
	feed_pump(obj);
	return 0;
}

/* The exec's output is drained (or given up on): its exit record. */
static int exec_exit(struct session *s, struct exec *x)
{
	struct tlv_buf b;
	int err;

	if (x->out[0].fd >= 0 || x->out[1].fd >= 0)
		fprintf(stderr, "husk-init: exec %u: output still open after %d ms, "
			"giving up on it\n", x->id, DRAIN_MS);
	close_fd(&x->out[0].fd);
	close_fd(&x->out[1].fd);
	x->live = false;
	err = report_oom(s->js, x->cgroup, &x->out[1], true);
	if (err)
		return err;
	tlv_init(&b);
	exit_record_put(&b, &x->res);
	err = b.failed ? husk_seterr(ENOMEM, "out of memory for an exit record") :
			 send_x(P_XEXIT, x->id, b.data, b.len);
	tlv_free(&b);
	return err;
}

/* Timers and the end of one exec. */
static int exec_tend(struct session *s, struct exec *x, uint64_t now)
{
	if (!x->live)
		return 0;
	if (!x->ended) {
		if (x->timeout_at && now >= x->timeout_at) {
			x->timeout_at = 0;
			x->res.timed_out = true;
			exec_kill(x);
			/* The helper reports the SIGKILL; one that does not goes too. */
			x->force_at = now + DRAIN_MS * 1000ull;
		}
		if (x->force_at && now >= x->force_at) {
			x->force_at = 0;
			if (x->helper > 0)
				kill(x->helper, SIGKILL);
		}
		return 0;
	}
	/* ep says first whether it ever ran (P_XSTARTED) or failed (P_XERROR). */
	if (!x->started)
		return 0;
	if (!x->drain_at) {
		/* Whatever its main process left behind goes now; its stdin is moot. */
		if (x->cgroup[0])
			sandbox_kill_cgroup(x->cgroup);
		feed_close(&x->in);
		x->drain_at = now + DRAIN_MS * 1000ull;
	}
	if ((x->out[0].fd >= 0 || x->out[1].fd >= 0) && now < x->drain_at)
		return 0;
	return exec_exit(s, x);
}

/* ---- puts and gets ---- */

static struct xfer *xfer_new(struct session *s, bool put, uint32_t id, const char *path)
{
	int data[2] = { -1, -1 }, msg[2] = { -1, -1 };
	struct xfer *t = calloc(1, sizeof(*t));

	if (!t) {
		husk_seterr(ENOMEM, "out of memory");
		return NULL;
	}
	t->put = put;
	t->id = id;
	t->in.fd = t->out = t->msg = -1;
	if (pipe2(data, O_CLOEXEC) || pipe2(msg, O_CLOEXEC)) {
		husk_seterr(errno, "pipe: %s", strerror(errno));
		t->pid = -1;
	} else {
		t->pid = put ? files_put_start(data[0], msg[1]) :
			       files_get_start(path, data[1], msg[1]);
	}
	close_fd(&msg[1]);
	close_fd(put ? &data[0] : &data[1]);
	if (t->pid < 0) {
		close_fd(&data[0]);
		close_fd(&data[1]);
		close_fd(&msg[0]);
		free(t);
		return NULL;
	}
	if (put)
		t->in.fd = data[1];
	else
		t->out = data[0];
	t->msg = msg[0];
	fcntl(data[put], F_SETFL, O_NONBLOCK);
	fcntl(msg[0], F_SETFL, O_NONBLOCK);
	t->live = true;
	t->next = s->xfers;
	s->xfers = t;
	return t;
}

static void xfer_free(struct xfer *t)
{
	feed_close(&t->in);
	close_fd(&t->out);
	close_fd(&t->msg);
	free(t);
}

/*
 * A put's answer comes after its end, also when the archive went bad
 * before: the chunks in between are dropped (its helper is gone), and an
 * id cannot be answered twice.
 */
static int on_put(struct session *s, uint32_t id, const uint8_t *p, size_t len)
{
	struct xfer *t = xfer_find(s, id);

	if (t && t->put) {
		if (t->end)
			return 0;
		t->end = !len;
		return feed_queue(&t->in, p, len);
	}
	if (t || exec_find(s, id))
		return xerror(id, "id %u is in use", id);
	if (open_put(s))
		return xerror(id, "put %u is still open: one put at a time", open_put(s)->id);
	t = xfer_new(s, true, id, NULL);
	if (!t)
		return xerror(id, "starting the put: %s", husk_lasterr());
	t->end = !len;
	return feed_queue(&t->in, p, len);
}

static int on_get(struct session *s, uint32_t id, const uint8_t *p, size_t len)
{
	char path[PATH_MAX];
	struct xfer *t;

	if (id_busy(s, id))
		return xerror(id, "id %u is in use", id);
	if (!len || len >= sizeof(path) || memchr(p, 0, len))
		return xerror(id, "get path is empty, too long or has a NUL byte");
	memcpy(path, p, len);
	path[len] = 0;
	if (!job_path_sane(path))
		return xerror(id, "get path '%s' must be workspace-relative without '..'", path);
	t = xfer_new(s, false, id, path);
	if (!t)
		return xerror(id, "starting the get: %s", husk_lasterr());
	return 0;
}

static int on_get_out(struct session *s, void *obj)
{
	static uint8_t buf[PROTO_ID_LEN + CHUNK_MAX];
	struct xfer *t = obj;
	ssize_t n;

	n = read(t->out, buf + PROTO_ID_LEN, CHUNK_MAX);
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return 0;
	if (n <= 0) {
		close_fd(&t->out);
		return 0;
	}
	put_id(buf, t->id);
	return proto_send(cfg.ctl, P_XFILES, buf, PROTO_ID_LEN + n);
}

/* The helper is gone and its stream is over: the answer. */
static int xfer_tend(struct session *s, struct xfer *t)
{
	char msg[600];
	ssize_t n;

	if (!t->live || t->pid || (t->put && !t->end) || t->out >= 0)
		return 0;
	feed_close(&t->in);
	t->live = false;
	if (WIFEXITED(t->status) && WEXITSTATUS(t->status) == 0)
		return send_x(t->put ? P_XDONE : P_XFILES, t->id, NULL, 0);
	n = read(t->msg, msg, sizeof(msg) - 1);
	if (n <= 0)
		n = snprintf(msg, sizeof(msg), "the %s's helper ended with wait status 0x%x",
			     t->put ? "put" : "get", t->status);
	msg[n] = 0;
	/* The helper has said it on the console already. */
	return send_x(P_XERROR, t->id, msg, strlen(msg));
}

/* ---- the control socket ---- */

static int on_frame(struct session *s, const struct proto_hdr *h, const uint8_t *p)
{
	uint32_t id;

	switch (h->type) {
	case P_END:
		if (h->len)
			return husk_seterr(EPROTO, "P_END has %u bytes (none expected)", h->len);
		s->end = true;
		return 0;
	case P_ERROR:
		return husk_seterr(ECONNABORTED, "host sent an error: %.*s",
				   (int)(h->len < 300 ? h->len : 300), p ? (const char *)p : "");
	case P_EXEC:
	case P_XSTDIN:
	case P_XSIGNAL:
	case P_PUT:
	case P_GET:
		break;
	default:
		return husk_seterr(EPROTO, "unexpected frame type %u in a session", h->type);
	}
	if (h->len < PROTO_ID_LEN)
		return husk_seterr(EPROTO, "session frame type %u of %u bytes has no id", h->type,
				   h->len);
	id = get_id(p);
	if (!id)
		return husk_seterr(EPROTO, "session frame type %u has id 0", h->type);
	p += PROTO_ID_LEN;
	switch (h->type) {
	case P_EXEC:
		return on_exec(s, id, p, h->len - PROTO_ID_LEN);
	case P_XSTDIN:
		return on_stdin(s, id, p, h->len - PROTO_ID_LEN);
	case P_XSIGNAL:
		return on_signal(s, id, p, h->len - PROTO_ID_LEN);
	case P_PUT:
		return on_put(s, id, p, h->len - PROTO_ID_LEN);
	default:
		return on_get(s, id, p, h->len - PROTO_ID_LEN);
	}
}

/* Frames as they come, until a queue is full (back-pressure) or P_END. */
static int on_ctl(struct session *s, void *obj)
{
	struct proto_hdr h;
	uint8_t *p;
	int r;

	while (!s->end && !queues_full(s)) {
		r = proto_reader_read(&s->rd, cfg.ctl, &h, &p);
		if (r <= 0)
			return r;
		r = on_frame(s, &h, p);
		free(p);
		if (r)
			return r;
	}
	return 0;
}

/* ---- children ---- */

static int reap(struct session *s)
{
	struct rusage ru;
	struct exec *x;
	struct xfer *t;
	pid_t pid;
	int st;

	while ((pid = wait4(-1, &st, WNOHANG, &ru)) > 0) {
		if (pid == s->init) {
			s->init = 0;
			if (!s->ending)
				return husk_seterr(ECHILD, "the session's init ended (wait status "
						   "0x%x)", st);
			continue;
		}
		for (x = s->execs; x; x = x->next)
			if (x->helper == pid)
				helper_gone(x, st, &ru);
		for (t = s->xfers; t; t = t->next)
			if (t->pid == pid) {
				t->pid = 0;
				t->status = st;
			}
		/* Anything else is an orphan that came to us (test mode): reaped. */
	}
	return 0;
}

static int on_sigchld(struct session *s, void *obj)
{
	struct signalfd_siginfo si;

	while (read(s->sfd, &si, sizeof(si)) > 0)
		;
	return reap(s);
}

static bool children_left(struct session *s)
{
	struct exec *x;
	struct xfer *t;

	for (x = s->execs; x; x = x->next)
		if (x->helper)
			return true;
	for (t = s->xfers; t; t = t->next)
		if (t->pid)
			return true;
	return s->init > 0;
}

/*
 * The end: every exec and transfer killed, the init too (which ends its
 * PID namespace and whatever is left in it), all of them reaped. Helpers
 * that linger past DRAIN_MS are killed and waited for.
 */
static void session_kill(struct session *s)
{
	uint64_t until = now_us() + DRAIN_MS * 1000ull;
	struct pollfd p = { .fd = s->sfd, .events = POLLIN };
	struct exec *x;
	struct xfer *t;

	s->ending = true;
	for (x = s->execs; x; x = x->next)
		if (x->helper) {
			exec_kill(x);
			close_fd(&x->cmd);
		}
	for (t = s->xfers; t; t = t->next)
		if (t->pid > 0)
			kill(t->pid, SIGKILL);
	if (s->init > 0) {
		sandbox_kill_job(s->init);
		kill(s->init, SIGKILL);
	}
	while (children_left(s) && now_us() < until) {
		poll(&p, 1, 50);
		on_sigchld(s, NULL);
	}
	for (x = s->execs; x; x = x->next)
		if (x->helper > 0) {
			kill(x->helper, SIGKILL);
			waitpid(x->helper, NULL, 0);
			x->helper = 0;
		}
	for (t = s->xfers; t; t = t->next)
		if (t->pid > 0) {
			waitpid(t->pid, NULL, 0);
			t->pid = 0;
		}
	if (s->init > 0)
		waitpid(s->init, NULL, 0);
	s->init = 0;
}

/* ---- the loop ---- */

static int watch(struct watches *w, int fd, short events, watch_fn fn, void *obj)
{
	size_t cap;

	if (fd < 0)
		return 0;
	if (w->n == w->cap) {
		cap = w->cap ? 2 * w->cap : 64;
		w->pfd = reallocarray(w->pfd, cap, sizeof(*w->pfd));
		w->fn = reallocarray(w->fn, cap, sizeof(*w->fn));
		w->obj = reallocarray(w->obj, cap, sizeof(*w->obj));
		if (!w->pfd || !w->fn || !w->obj)
			return husk_seterr(ENOMEM, "out of memory for the poll set");
		w->cap = cap;
	}
	w->pfd[w->n] = (struct pollfd){ .fd = fd, .events = events };
	w->fn[w->n] = fn;
	w->obj[w->n] = obj;
	w->n++;
	return 0;
}

static int watch_all(struct session *s)
{
	struct watches *w = &s->w;
	struct exec *x;
	struct xfer *t;
	int err;

	w->n = 0;
	err = watch(w, queues_full(s) ? -1 : cfg.ctl, POLLIN, on_ctl, NULL);
	err = err ?: watch(w, s->sfd, POLLIN, on_sigchld, NULL);
	for (x = s->execs; x && !err; x = x->next) {
		err = watch(w, x->ep, POLLIN, on_ep, x);
		err = err ?: watch(w, x->rep.fd, POLLIN, on_report, x);
		/* Output only after P_XSTARTED, which ep decides. */
		if (x->started) {
			err = err ?: watch(w, x->out[0].fd, POLLIN, on_out, &x->out[0]);
			err = err ?: watch(w, x->out[1].fd, POLLIN, on_out, &x->out[1]);
		}
		if (x->in.off < x->in.len)
			err = err ?: watch(w, x->in.fd, POLLOUT, on_feed, &x->in);
	}
	for (t = s->xfers; t && !err; t = t->next) {
		if (t->in.off < t->in.len)
			err = watch(w, t->in.fd, POLLOUT, on_feed, &t->in);
		err = err ?: watch(w, t->out, POLLIN, on_get_out, t);
	}
	return err;
}

static void wake_at(uint64_t *wake, uint64_t t)
{
	if (t && (!*wake || t < *wake))
		*wake = t;
}

/* Timers and answers; what is over is freed. The earliest timer in *wake. */
static int tend(struct session *s, uint64_t now, uint64_t *wake)
{
	struct exec **xp, *x;
	struct xfer **tp, *t;
	int err;

	*wake = s->end_at;
	cgroups_tidy(s);
	for (xp = &s->execs; (x = *xp);) {
		err = exec_tend(s, x, now);
		if (err)
			return err;
		if (!x->live && !x->helper) {
			*xp = x->next;
			exec_free(s, x);
			continue;
		}
		if (x->live) {
			wake_at(wake, x->timeout_at);
			wake_at(wake, x->force_at);
			wake_at(wake, x->ended ? x->drain_at : 0);
		}
		xp = &x->next;
	}
	for (tp = &s->xfers; (t = *tp);) {
		err = xfer_tend(s, t);
		if (err)
			return err;
		if (!t->live) {
			*tp = t->next;
			xfer_free(t);
			continue;
		}
		tp = &t->next;
	}
	return 0;
}

static int poll_timeout(uint64_t wake, uint64_t now)
{
	if (!wake)
		return -1;
	if (wake <= now)
		return 0;
	if (wake - now > 3600000000ull)
		return 3600000;
	return (int)((wake - now) / 1000) + 1;
}

static int serve(struct session *s)
{
	uint64_t now, wake;
	size_t i;
	int err;

	for (;;) {
		now = now_us();
		if (s->end)
			return 0;
		if (s->end_at && now >= s->end_at) {
			fprintf(stderr, "husk-init: the session's lifetime of %llu ms is over\n",
				(unsigned long long)s->js->timeout_ms);
			return 0;
		}
		err = tend(s, now, &wake);
		err = err ?: watch_all(s);
		if (err)
			return err;
		if (poll(s->w.pfd, s->w.n, poll_timeout(wake, now)) < 0) {
			if (errno == EINTR)
				continue;
			return husk_seterr(errno, "poll: %s", strerror(errno));
		}
		for (i = 0; i < s->w.n; i++) {
			if (!s->w.pfd[i].revents)
				continue;
			err = s->w.fn[i](s, s->w.obj[i]);
			if (err)
				return err;
		}
	}
}

/* ---- start and end ---- */

static int open_namespaces(struct session *s)
{
	char path[64];
	int i;

	for (i = 0; i < NS_NR; i++) {
		snprintf(path, sizeof(path), "/proc/%d/ns/%s", (int)s->init, ns_names[i]);
		s->ns[i] = open(path, O_RDONLY | O_CLOEXEC);
		if (s->ns[i] < 0)
			return husk_seterr(errno, "open %s: %s", path, strerror(errno));
	}
	return 0;
}

static int session_start(struct session *s, const uint8_t *spec, size_t len)
{
	struct tlv_buf b;
	sigset_t chld;
	int err;

	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	s->sfd = signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC);
	if (s->sfd < 0)
		return husk_seterr(errno, "signalfd: %s", strerror(errno));
	err = job_session_init(spec, len, &s->init);
	if (!err && cfg.namespaces)
		err = open_namespaces(s);
	if (err)
		return err;
	sandbox_session_cgroup();
	if (fcntl(cfg.ctl, F_SETFL, fcntl(cfg.ctl, F_GETFL) | O_NONBLOCK))
		return husk_seterr(errno, "control socket O_NONBLOCK: %s", strerror(errno));
	s->end_at = deadline(now_us(), s->js->timeout_ms);
	init_step(IS_JOB_STARTED);
	tlv_init(&b);
	init_steps_put(&b);
	err = b.failed ? husk_seterr(ENOMEM, "out of memory for P_STARTED") :
			 proto_send(cfg.ctl, P_STARTED, b.data, b.len);
	tlv_free(&b);
	if (!err)
		husk_event(HUSK_EV_JOB_STARTED);
	return err;
}

static void session_free(struct session *s)
{
	struct exec *x;
	struct xfer *t;
	int i;

	while ((x = s->execs)) {
		s->execs = x->next;
		exec_free(s, x);
	}
	cgroups_tidy(s);
	free(s->stale);
	while ((t = s->xfers)) {
		s->xfers = t->next;
		xfer_free(t);
	}
	for (i = 0; i < NS_NR; i++)
		close_fd(&s->ns[i]);
	close_fd(&s->sfd);
	proto_reader_free(&s->rd);
	free(s->w.pfd);
	free(s->w.fn);
	free(s->w.obj);
}

int session_run(const struct job_spec *js, const uint8_t *spec, size_t len)
{
	struct session s = { .js = js, .sfd = -1 };
	int err, i;

	for (i = 0; i < NS_NR; i++)
		s.ns[i] = -1;
	proto_reader_init(&s.rd);
	err = session_start(&s, spec, len);
	if (!err)
		err = serve(&s);
	session_kill(&s);
	session_free(&s);
	/* Back to blocking for the rest of the conversation. */
	fcntl(cfg.ctl, F_SETFL, fcntl(cfg.ctl, F_GETFL) & ~O_NONBLOCK);
	if (!err)
		husk_event(HUSK_EV_JOB_ENDED);
	return err;
}
