/*
 * sandbox: one sandbox of husk serve, run by its worker process (`husk run
 * --session-fd 3 --json-fd 4 ...`): spawning it, the session frames with
 * it (docs/protocol.md, Sessions), a run's course (puts, the job's exec,
 * its files, the end) and what is left when the worker is gone: its result
 * record, patched into the answer.
 *
 * The worker is checked as a hostile peer: a frame that is malformed or
 * answers no open request ends the sandbox.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli_run.h"
#include "job/session.h"
#include "lib/util.h"
#include "serve/metrics.h"
#include "serve/serve_int.h"

#define FRAME_MAX (PROTO_HDR_LEN + PROTO_ID_LEN + 1 + 64 * 1024)
#define FRAMES_PER_WAKEUP 32
#define POOL_LIFETIME_S (24 * 3600)

static void finish(struct sandbox *sb);
static void policy_answer(struct sandbox *sb);

/* ---- spawning ---- */

static int move_high(int fd)
{
	int n = fcntl(fd, F_DUPFD, 10);

	close(fd);
	return n;
}

static void worker_exec(char **argv, int xfd, int jfd, int lfd, int pfd)
{
	sigset_t none;
	int nul;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	/* Above every target first, so no dup2 clobbers a source. */
	xfd = move_high(xfd);
	jfd = move_high(jfd);
	lfd = move_high(lfd);
	if (pfd >= 0 && (pfd = move_high(pfd)) < 0)
		_exit(127);
	nul = open("/dev/null", O_RDWR);
	if (xfd < 0 || jfd < 0 || lfd < 0 || nul < 0 || dup2(nul, 0) < 0 || dup2(lfd, 1) < 0 ||
	    dup2(lfd, 2) < 0 || dup2(xfd, 3) < 0 || dup2(jfd, 4) < 0 ||
	    (pfd >= 0 && dup2(pfd, 5) < 0))
		_exit(127);
	syscall(SYS_close_range, pfd >= 0 ? 6 : 5, ~0u, 0);
	execv(argv[0], argv);
	_exit(127);
}

static void ep_add(int fd, struct handle *h, enum h_kind k, void *p, uint32_t ev)
{
	struct epoll_event e = { .events = ev, .data.ptr = h };

	h->kind = k;
	h->p = p;
	epoll_ctl(srv.epfd, EPOLL_CTL_ADD, fd, &e);
}

static int no_worker(const char *call, int e)
{
	return husk_seterr(e, "cannot start the sandbox's worker: %s: %s%s", call, strerror(e),
			   e == EMFILE || e == ENFILE || e == EAGAIN ?
			   " (husk serve is out of descriptors or processes: try again later)" : "");
}

static int start_worker(struct sandbox *sb, char **wargv, int wargc, bool policy)
{
	char *argv[API_MAX_WORKER_ARGS + 4];
	int xs[2], jp[2], lp[2], ps[2] = { -1, -1 }, n = 0, i;

	argv[n++] = (char *)srv.cfg.husk_path;
	for (i = 0; i < wargc && n < API_MAX_WORKER_ARGS; i++)
		argv[n++] = wargv[i];
	if (srv.cfg.template_dir && sb->template_name[0]) {
		argv[n++] = "--template-dir";
		argv[n++] = (char *)srv.cfg.template_dir;
	}
	argv[n] = NULL;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, xs) < 0)
		return no_worker("socketpair", errno);
	if (pipe2(jp, O_CLOEXEC) < 0) {
		int e = errno;

		close(xs[0]);
		close(xs[1]);
		return no_worker("pipe", e);
	}
	if (pipe2(lp, O_CLOEXEC) < 0) {
		int e = errno;

		close(xs[0]);
		close(xs[1]);
		close(jp[0]);
		close(jp[1]);
		return no_worker("pipe", e);
	}
	if (policy && socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ps) < 0) {
		int e = errno;

		for (i = 0; i < 2; i++) {
			close(xs[i]);
			close(jp[i]);
			close(lp[i]);
		}
		return no_worker("socketpair", e);
	}
	sb->pid = fork();
	if (sb->pid == 0)
		worker_exec(argv, xs[1], jp[1], lp[1], ps[1]);
	close(xs[1]);
	close(jp[1]);
	close(lp[1]);
	if (ps[1] >= 0)
		close(ps[1]);
	sb->xfd = xs[0];
	sb->jfd = jp[0];
	sb->logfd = lp[0];
	sb->pfd = ps[0];
	if (sb->pid < 0)
		return no_worker("fork", errno);
	fcntl(sb->xfd, F_SETFL, O_NONBLOCK);
	fcntl(sb->jfd, F_SETFL, O_NONBLOCK);
	fcntl(sb->logfd, F_SETFL, O_NONBLOCK);
	sb->pidfd = syscall(SYS_pidfd_open, sb->pid, 0);
	if (sb->pidfd < 0) {
		int e = errno;

		/* Not watched, so reaped here: no zombie is left behind. */
		kill(sb->pid, SIGKILL);
		while (waitpid(sb->pid, NULL, 0) < 0 && errno == EINTR)
			;
		sb->pid = 0;
		return no_worker("pidfd_open", e);
	}
	ep_add(sb->xfd, &sb->hx, H_SB_X, sb, EPOLLIN);
	ep_add(sb->jfd, &sb->hj, H_SB_JSON, sb, EPOLLIN);
	ep_add(sb->logfd, &sb->hl, H_SB_LOG, sb, EPOLLIN);
	ep_add(sb->pidfd, &sb->hp, H_SB_PID, sb, EPOLLIN);
	if (sb->pfd >= 0) {
		fcntl(sb->pfd, F_SETFL, O_NONBLOCK);
		ep_add(sb->pfd, &sb->hpol, H_SB_POLICY, sb, EPOLLIN);
	}
	return 0;
}

struct sandbox *sb_spawn(const struct api_req *r, const char *pool_template)
{
	struct sandbox *sb = calloc(1, sizeof(*sb));
	char *pargv[16], life[24];
	int err;

	if (!sb) {
		husk_seterr(ENOMEM, "out of memory");
		return NULL;
	}
	sb->pidfd = sb->xfd = sb->jfd = sb->logfd = sb->pfd = -1;
	snprintf(sb->name, sizeof(sb->name), "sb-%u", ++srv.next_sb);
	sb->t_request = sb->t_active = now_us();
	sb->next_id = 1;
	if (pool_template) {
		int n = 9;

		snprintf(sb->template_name, sizeof(sb->template_name), "%s", pool_template);
		sb->machine_default = true;
		sb->from_pool = true;
		snprintf(life, sizeof(life), "%d", POOL_LIFETIME_S);
		pargv[0] = "run";
		pargv[1] = "--session-fd";
		pargv[2] = API_WORKER_SESSION_FD;
		pargv[3] = "--json-fd";
		pargv[4] = API_WORKER_JSON_FD;
		pargv[5] = "--template";
		pargv[6] = sb->template_name;
		pargv[7] = "--timeout";
		pargv[8] = life;
		/* A template with a NIC: its clones wait with the network up and
		 * no rule (everything denied) until a request's rules arrive. They
		 * may serve any client: the platform endpoints and the host's
		 * addresses stay closed (serve.c, rules_refused). */
		sb->pool_net = serve_template_net(pool_template);
		if (sb->pool_net) {
			pargv[n++] = "--net";
			pargv[n++] = "egress";
			pargv[n++] = "--policy-fd";
			pargv[n++] = API_WORKER_POLICY_FD;
			pargv[n++] = "--absolute-builtins";
			sb->strict_net = true;
		}
		err = start_worker(sb, pargv, n, sb->pool_net);
	} else {
		snprintf(sb->template_name, sizeof(sb->template_name), "%s",
			 r->template_name ? r->template_name : "");
		sb->machine_default = r->machine_default;
		sb->strict_net = r->strict_net;
		sb->mem_mib = r->mem_mib;
		err = start_worker(sb, (char **)r->wargv, r->wargc, r->net_policy);
	}
	sb->start_kind = sb->template_name[0] ? "template" : "cold";
	if (!sb->mem_mib)
		sb->mem_mib = RUN_DEFAULT_MEM_MIB;
	sb->next = srv.sandboxes;
	srv.sandboxes = sb;
	if (err) {
		sb->state = SB_DONE;
		sb->exited = true;
		return sb;	/* finish() reports it where it is bound */
	}
	return sb;
}

/* ---- frames to the worker ---- */

static int outq_push(struct sandbox *sb, uint8_t *f, size_t n)
{
	if (sb->outq_n == sb->outq_cap) {
		unsigned cap = sb->outq_cap ? 2 * sb->outq_cap : 16;
		uint8_t **q = realloc(sb->outq, cap * sizeof(*q));
		size_t *l = q ? realloc(sb->outq_len, cap * sizeof(*l)) : NULL;

		if (!q || !l) {
			if (q)
				sb->outq = q;
			return husk_seterr(ENOMEM, "out of memory");
		}
		sb->outq = q;
		sb->outq_len = l;
		sb->outq_cap = cap;
	}
	sb->outq[sb->outq_n] = f;
	sb->outq_len[sb->outq_n++] = n;
	sb->outq_bytes += n;
	ep_mod(sb->xfd, &sb->hx, EPOLLIN | EPOLLOUT);
	return 0;
}

static void outq_flush(struct sandbox *sb)
{
	unsigned done = 0;

	while (done < sb->outq_n) {
		ssize_t w = send(sb->xfd, sb->outq[done], sb->outq_len[done],
				 MSG_DONTWAIT | MSG_NOSIGNAL);

		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS))
			break;
		sb->outq_bytes -= sb->outq_len[done];
		free(sb->outq[done]);
		done++;
		if (w < 0)
			break;	/* the worker is gone: its exit tells the rest */
	}
	memmove(sb->outq, sb->outq + done, (sb->outq_n - done) * sizeof(*sb->outq));
	memmove(sb->outq_len, sb->outq_len + done, (sb->outq_n - done) * sizeof(*sb->outq_len));
	sb->outq_n -= done;
	if (!sb->outq_n && sb->xfd >= 0)
		ep_mod(sb->xfd, &sb->hx, sb_paused(sb) ? 0 : EPOLLIN);
}

int sb_send(struct sandbox *sb, uint16_t type, uint32_t id, const void *p, size_t n)
{
	size_t head = PROTO_HDR_LEN + (type == P_END ? 0 : PROTO_ID_LEN);
	uint8_t *f;
	ssize_t w;

	if (sb->xfd < 0 || sb->exited)
		return husk_seterr(EPIPE, "the sandbox is gone");
	if (head + n > FRAME_MAX)
		return husk_seterr(EMSGSIZE, "a frame of %zu bytes is too large", n);
	if (sb->outq_bytes + head + n > SB_OUT_MAX)
		return husk_seterr(EBUSY, "the sandbox does not keep up: try again");
	f = malloc(head + n);
	if (!f)
		return husk_seterr(ENOMEM, "out of memory");
	proto_hdr_encode(f, type, (uint32_t)(head - PROTO_HDR_LEN + n));
	if (type != P_END)
		le32_put(f + PROTO_HDR_LEN, id);
	if (n)
		memcpy(f + head, p, n);
	if (!sb->outq_n) {
		w = send(sb->xfd, f, head + n, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (w == (ssize_t)(head + n) || (w < 0 && errno != EAGAIN &&
						 errno != EWOULDBLOCK && errno != ENOBUFS)) {
			free(f);
			return w < 0 ? husk_seterr(errno, "the sandbox is gone") : 0;
		}
	}
	if (outq_push(sb, f, head + n)) {
		free(f);
		return -ENOMEM;
	}
	return 0;
}

/* ---- open requests ---- */

struct xreq *sb_req_new(struct sandbox *sb, enum xkind kind)
{
	unsigned i;

	for (i = 0; i < SB_MAX_REQS; i++) {
		if (!sb->reqs[i].id) {
			struct xreq *x = &sb->reqs[i];

			memset(x, 0, sizeof(*x));
			/* Ids are never 0 and not reused soon: stale answers stay stale. */
			x->id = sb->next_id++;
			if (!sb->next_id)
				sb->next_id = 1;
			x->kind = kind;
			return x;
		}
	}
	husk_seterr(EBUSY, "too many requests open in %s", sb->name);
	return NULL;
}

struct xreq *sb_req_find(struct sandbox *sb, uint32_t id)
{
	unsigned i;

	for (i = 0; id && i < SB_MAX_REQS; i++)
		if (sb->reqs[i].id == id)
			return &sb->reqs[i];
	return NULL;
}

void sb_req_free(struct xreq *x)
{
	bind_clear(&x->to);
	free(x->stream);
	free(x->path);
	memset(x, 0, sizeof(*x));
}

bool sb_paused(const struct sandbox *sb)
{
	unsigned i;

	if (sb->creator.c && client_full(sb->creator.c))
		return true;
	for (i = 0; i < SB_MAX_REQS; i++)
		if (sb->reqs[i].id && sb->reqs[i].to.c && client_full(sb->reqs[i].to.c))
			return true;
	return false;
}

void sb_resume_check(struct sandbox *sb)
{
	if (sb->xfd >= 0 && !sb->exited)
		ep_mod(sb->xfd, &sb->hx, (sb_paused(sb) ? 0 : EPOLLIN) |
		       (sb->outq_n ? EPOLLOUT : 0));
}

/* ---- requests ---- */

/* Whether the command sets the key of "K=V" kv itself. */
static bool env_has(const struct api_cmd *c, const char *kv)
{
	size_t k = strcspn(kv, "=");
	unsigned i;

	for (i = 0; i < c->nr_env; i++)
		if (!strncmp(c->env[i], kv, k) && c->env[i][k] == '=')
			return true;
	return false;
}

static int send_cmd(struct sandbox *sb, uint32_t id, const struct api_cmd *c)
{
	const struct api_cmd *def = sb->req && !sb->is_run && c != &sb->req->cmd ?
				    &sb->req->cmd : NULL;
	struct tlv_buf b;
	unsigned i;
	int err;

	tlv_init(&b);
	for (i = 0; i < c->argc; i++)
		tlv_put_str(&b, T_JOB_ARG, c->argv[i]);
	/*
	 * A session's env and cwd (its create request) are every exec's
	 * defaults: a pooled clone was started before anyone asked for them.
	 */
	if (def)
		for (i = 0; i < def->nr_env; i++)
			if (!env_has(c, def->env[i]))
				tlv_put_str(&b, T_JOB_ENV, def->env[i]);
	for (i = 0; i < c->nr_env; i++)
		tlv_put_str(&b, T_JOB_ENV, c->env[i]);
	if (c->cwd || (def && def->cwd))
		tlv_put_str(&b, T_JOB_CWD, c->cwd ? c->cwd : def->cwd);
	tlv_put_u8(&b, T_JOB_STDIN, c->stdin);
	if (c->timeout_ms)
		tlv_put_u64(&b, T_JOB_TIMEOUT_MS, c->timeout_ms);
	if (b.failed) {
		tlv_free(&b);
		return husk_seterr(E2BIG, "the command is too large");
	}
	err = sb_send(sb, P_EXEC, id, b.data, b.len);
	tlv_free(&b);
	return err;
}

int sb_exec(struct sandbox *sb, struct bind *to, const struct api_cmd *cmd, bool for_run)
{
	struct xreq *x = sb_req_new(sb, X_EXEC);
	int err;

	if (!x)
		return -EBUSY;
	err = send_cmd(sb, x->id, cmd);
	if (err) {
		sb_req_free(x);
		return err;
	}
	x->stdin = cmd->stdin;
	x->for_run = for_run;
	if (to)
		bind_set(&x->to, to->c, to->re);
	sb->t_active = now_us();
	return 0;
}

int sb_put(struct sandbox *sb, struct bind *to, const char *stream, const uint8_t *p,
	   size_t n, bool more, bool for_run)
{
	struct xreq *x = NULL;
	size_t off = 0, k;
	unsigned i;
	int err = 0;

	for (i = 0; stream && i < SB_MAX_REQS; i++)
		if (sb->reqs[i].id && sb->reqs[i].kind == X_PUT && sb->reqs[i].stream &&
		    !strcmp(sb->reqs[i].stream, stream))
			x = &sb->reqs[i];
	if (!x) {
		for (i = 0; i < SB_MAX_REQS; i++)
			if (sb->reqs[i].id && sb->reqs[i].kind == X_PUT)
				return husk_seterr(EBUSY, "another put is open in %s", sb->name);
		x = sb_req_new(sb, X_PUT);
		if (!x)
			return -EBUSY;
		x->for_run = for_run;
		if (stream) {
			x->stream = strdup(stream);
			if (!x->stream) {
				sb_req_free(x);
				return husk_seterr(ENOMEM, "out of memory");
			}
		}
	}
	while (!err && off < n) {
		k = n - off < XCHUNK ? n - off : XCHUNK;
		err = sb_send(sb, P_PUT, x->id, p + off, k);
		off += k;
	}
	if (!err && !more)
		err = sb_send(sb, P_PUT, x->id, NULL, 0);
	if (err) {
		sb_req_free(x);
		return err;
	}
	/* The answer comes with XDONE; until then the last chunk's request waits. */
	if (!more) {
		bind_clear(&x->to);
		if (to)
			bind_set(&x->to, to->c, to->re);
	}
	sb->t_active = now_us();
	return 0;
}

int sb_get(struct sandbox *sb, struct bind *to, const char *path, bool for_run)
{
	struct xreq *x = sb_req_new(sb, X_GET);
	int err;

	if (!x)
		return -EBUSY;
	x->path = strdup(path);
	if (!x->path) {
		sb_req_free(x);
		return husk_seterr(ENOMEM, "out of memory");
	}
	err = sb_send(sb, P_GET, x->id, path, strlen(path));
	if (err) {
		sb_req_free(x);
		return err;
	}
	x->for_run = for_run;
	if (to)
		bind_set(&x->to, to->c, to->re);
	sb->t_active = now_us();
	return 0;
}

void sb_end(struct sandbox *sb)
{
	if (sb->state == SB_ENDING || sb->state == SB_DONE)
		return;
	if (sb->state != SB_READY || sb_send(sb, P_END, 0, NULL, 0))
		sb_kill(sb);
	sb->state = SB_ENDING;
}

void sb_kill(struct sandbox *sb)
{
	if (sb->pid > 0 && !sb->exited)
		kill(sb->pid, SIGTERM);
	if (sb->state != SB_DONE)
		sb->state = SB_ENDING;
}

/* ---- a run's course ---- */

static void run_fail(struct sandbox *sb, const char *msg)
{
	if (sb->creator.c || sb->detach) {
		char *l = api_error(sb->creator.re, E_FAILED, msg, NULL);

		if (sb->detach && !sb->final)
			sb->final = json_loads(l ? l : "null", 0, NULL);
		bind_send(&sb->creator, l);
	}
	bind_clear(&sb->creator);
	sb_kill(sb);
}

static void run_next(struct sandbox *sb);

/* The sandbox is ready (and its puts are in): the job's command. */
static void run_exec(struct sandbox *sb)
{
	if (sb_exec(sb, NULL, &sb->req->cmd, true))
		run_fail(sb, husk_lasterr());
}

/* After the job: its files one after the other, then the end. */
static void run_next(struct sandbox *sb)
{
	const struct api_req *r = sb->req;

	if (sb->run_files_ok && sb->run_get < r->nr_gets) {
		if (sb_get(sb, NULL, r->gets[sb->run_get++], true))
			run_fail(sb, husk_lasterr());
		return;
	}
	sb_end(sb);
}

/* Ready and its puts are in: a run's job starts, a create is answered. */
static void proceed(struct sandbox *sb)
{
	if (sb->is_run) {
		/* "started" comes with the job's process (the guest's XSTARTED). */
		run_exec(sb);
		return;
	}
	bind_send(&sb->creator, api_ok(sb->creator.re,
				       json_pack("{s:s,s:s,s:b}", "sandbox", sb->name,
						 "start", sb->start_kind, "pool", sb->from_pool)));
	bind_clear(&sb->creator);
}

/* The request's puts, once the sandbox is ready; then proceed. */
static void setup_ready(struct sandbox *sb)
{
	const struct api_req *r = sb->req;
	unsigned i = sb->puts_sent;

	/* A networked pool's clone has no rule: the request's come first. */
	if (sb->pool_net && r->policy && !sb->rules_set) {
		if (sb->rules_pending)
			return;
		if (sb_policy(sb, NULL, r->policy)) {
			run_fail(sb, husk_lasterr());
			return;
		}
		sb->rules_pending = true;
		return;
	}
	/* One put at a time: the next goes when the guest answered this one. */
	if (sb->puts_pending)
		return;
	if (i < r->nr_puts) {
		if (sb_put(sb, NULL, NULL, r->puts[i], r->put_len[i], false, true)) {
			run_fail(sb, husk_lasterr());
			return;
		}
		sb->puts_sent++;
		sb->puts_pending = 1;
		return;
	}
	proceed(sb);
}

void sb_begin(struct sandbox *sb, struct bind *to, struct api_req *r, bool is_run)
{
	sb->owned = true;
	sb->owner = to->c ? to->c->uid : 0;
	sb->is_run = is_run;
	sb->detach = is_run && r->detach;
	sb->req = r;
	bind_set(&sb->creator, to->c, to->re);
	if (!is_run) {
		/* Its connection is not idle while the session lives. */
		sb->origin = to->c;
		if (to->c)
			to->c->sessions++;
		sb->idle_us = r->idle_timeout_s * 1000000ull;
		sb->lifetime_end = r->lifetime_s ? now_us() + r->lifetime_s * 1000000ull : 0;
	}
	/* Ready already (a pooled clone): carry on at once; else when it is. */
	if (sb->state == SB_READY && !sb->warming)
		setup_ready(sb);
}

/* ---- frames from the worker ---- */

/*
 * A pooled clone runs one `true` before it is offered: the guest pages a
 * fork and exec touch are copied from the template then, while the clone
 * waits, not on the first job's time (the first exec in a fresh clone took
 * 0.6 s in the test host, later ones 0.08 s).
 */
static void warm_up(struct sandbox *sb)
{
	static char *argv[] = { "true", NULL };
	const struct api_cmd c = { .argv = argv, .argc = 1, .timeout_ms = 60000 };
	unsigned i;

	if (sb_exec(sb, NULL, &c, false))
		return;	/* offered cold, then: slower, not wrong */
	for (i = 0; i < SB_MAX_REQS; i++)
		if (sb->reqs[i].id && sb->reqs[i].kind == X_EXEC)
			sb->reqs[i].warmup = true;
	sb->warming = true;
}

static void on_ready(struct sandbox *sb)
{
	sb->state = SB_READY;
	sb->t_ready = now_us();
	if (!sb->from_pool || sb->owned)
		metrics_started(sb->start_kind, (sb->t_ready - sb->t_request) / 1e6);
	if (sb->from_pool && !sb->owned)
		warm_up(sb);
	if (sb->owned && sb->req && !sb->warming)
		setup_ready(sb);
	serve_changed();
}

static json_t *exit_json(const struct session_exit *e)
{
	return json_pack("{s:o,s:o,s:b,s:I,s:I,s:I}",
			 "exit_code", e->exited ? json_integer(e->code) : json_null(),
			 "signal", e->exited ? json_null() : json_integer(e->signal),
			 "timed_out", e->timed_out, "cpu_user_us", (json_int_t)e->user_us,
			 "cpu_sys_us", (json_int_t)e->sys_us,
			 "peak_rss_kib", (json_int_t)e->maxrss_kib);
}

static int exit_code_of(const struct session_exit *e)
{
	if (e->timed_out)
		return 124;
	return e->exited ? (int)e->code : 128 + (int)e->signal;
}

static const char *outcome(const struct session_exit *e)
{
	if (e->timed_out)
		return "timeout";
	if (!e->exited)
		return "signal";
	return e->code ? "nonzero" : "ok";
}

static void on_xexit(struct sandbox *sb, struct xreq *x, const struct session_exit *e)
{
	if (x->warmup) {
		sb_req_free(x);
		sb->warming = false;
		/* Claimed while it warmed up: its request goes on now. */
		if (sb->owned)
			metrics_started(sb->start_kind, (now_us() - sb->t_request) / 1e6);
		if (sb->owned && sb->req)
			setup_ready(sb);
		serve_changed();
		return;
	}
	metrics_job(outcome(e));
	if (x->for_run) {
		sb->run_exited = true;
		json_decref(sb->run_exit);
		sb->run_exit = exit_json(e);
		bind_send(&sb->creator, api_event(sb->creator.re, "exit", json_deep_copy(sb->run_exit)));
		sb->run_files_ok = exit_code_of(e) == 0 || sb->req->get_always;
		sb_req_free(x);
		run_next(sb);
		return;
	}
	bind_send(&x->to, api_event(x->to.re, "exit", exit_json(e)));
	bind_send(&x->to, api_ok(x->to.re, json_pack("{s:i}", "exit_code", exit_code_of(e))));
	sb_req_free(x);
}

/* A run's output within its max_output per stream; the rest is counted. */
static void run_output(struct sandbox *sb, int stream, const uint8_t *p, size_t n)
{
	uint64_t *seen = &sb->run_out[stream - 1], *dropped = &sb->run_drop[stream - 1];
	uint64_t cap = sb->req->max_output, room = *seen < cap ? cap - *seen : 0;
	size_t m = n < room ? n : (size_t)room;
	const char *ev = stream == 1 ? "stdout" : "stderr";

	*seen += n;
	if (m)
		bind_send(&sb->creator, api_event(sb->creator.re, ev,
						  json_pack("{s:o}", "data", api_b64(p, m))));
	if (m < n) {
		if (!*dropped) {
			char marker[160];

			snprintf(marker, sizeof(marker), "\n[husk: %s exceeded %llu bytes; the rest "
				 "is dropped and counted]\n", ev, (unsigned long long)cap);
			bind_send(&sb->creator, api_event(sb->creator.re, ev, json_pack("{s:o}",
				"data", api_b64((const uint8_t *)marker, strlen(marker)))));
		}
		*dropped += n - m;
	}
}

static void on_xframe(struct sandbox *sb, const struct proto_hdr *h, const uint8_t *p)
{
	uint32_t id = le32_get(p);
	const uint8_t *d = p + PROTO_ID_LEN;
	size_t n = h->len - PROTO_ID_LEN;
	struct xreq *x = sb_req_find(sb, id);
	struct session_exit e;
	struct bind *to;

	if (!x) {
		/* A request given up on (its client left): nothing to do with it. */
		return;
	}
	to = x->for_run ? &sb->creator : &x->to;
	switch (h->type) {
	case P_XSTARTED:
		if (!x->for_run)
			bind_send(to, api_event(to->re, "started", NULL));
		else if (x->kind == X_EXEC)
			bind_send(to, api_event(to->re, "started",
						json_pack("{s:s}", "start", sb->start_kind)));
		return;
	case P_XOUT:
		if (n < 1 || (d[0] != 1 && d[0] != 2))
			goto bad;
		if (x->for_run) {
			run_output(sb, d[0], d + 1, n - 1);
			return;
		}
		bind_send(to, api_event(to->re, d[0] == 1 ? "stdout" : "stderr",
					json_pack("{s:o}", "data", api_b64(d + 1, n - 1))));
		return;
	case P_XEXIT:
		if (x->kind != X_EXEC || session_parse_exit(d, n, &e))
			goto bad;
		on_xexit(sb, x, &e);
		return;
	case P_XFILES:
		if (x->kind != X_GET)
			goto bad;
		bind_send(to, api_event(to->re, "files", json_pack("{s:s,s:o}", "path", x->path,
								  "data", api_b64(d, n))));
		if (!n) {
			bool run = x->for_run;

			if (!run)
				bind_send(to, api_ok(to->re, NULL));
			sb_req_free(x);
			if (run)
				run_next(sb);
		}
		return;
	case P_XDONE:
		if (x->kind != X_PUT)
			goto bad;
		if (x->for_run) {
			sb_req_free(x);
			sb->puts_pending = 0;
			setup_ready(sb);
			return;
		}
		bind_send(to, api_ok(to->re, NULL));
		sb_req_free(x);
		return;
	case P_XERROR: {
		char msg[300];

		snprintf(msg, sizeof(msg), "%.*s", (int)(n < 256 ? n : 256), (const char *)d);
		if (x->for_run) {
			sb_req_free(x);
			run_fail(sb, msg);
			return;
		}
		if (x->kind == X_EXEC)
			metrics_job("failed");
		bind_send(to, api_error(to->re, E_FAILED, msg, NULL));
		sb_req_free(x);
		return;
	}
	}
bad:
	snprintf(sb->log, sizeof(sb->log), "the worker broke the session protocol");
	sb->log_len = strlen(sb->log);
	kill(sb->pid, SIGKILL);
}

static void read_frames(struct sandbox *sb)
{
	static uint8_t buf[FRAME_MAX + 1];
	struct proto_hdr h;
	unsigned k;
	ssize_t n;

	for (k = 0; k < FRAMES_PER_WAKEUP && !sb_paused(sb); k++) {
		n = recv(sb->xfd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n <= 0) {
			/* The worker closed it: its exit (pidfd) finishes the sandbox. */
			ep_mod(sb->xfd, &sb->hx, 0);
			return;
		}
		if (n < PROTO_HDR_LEN || n > FRAME_MAX || proto_hdr_decode(buf, &h) ||
		    h.len != (size_t)n - PROTO_HDR_LEN) {
			kill(sb->pid, SIGKILL);
			return;
		}
		if (h.type == P_STARTED) {
			if (sb->state == SB_STARTING)
				on_ready(sb);
			continue;
		}
		if (h.len < PROTO_ID_LEN || h.type < P_XSTARTED || h.type > P_XERROR) {
			kill(sb->pid, SIGKILL);
			return;
		}
		on_xframe(sb, &h, buf + PROTO_HDR_LEN);
	}
}

static void read_more(int fd, char **buf, size_t *len, size_t max, bool ring)
{
	char chunk[4096];
	ssize_t n;

	while ((n = read(fd, chunk, sizeof(chunk))) > 0) {
		if (ring) {
			/* The log keeps its tail. */
			char *log = *buf;

			if ((size_t)n >= max) {
				memcpy(log, chunk + n - (max - 1), max - 1);
				*len = max - 1;
			} else {
				if (*len + n > max - 1) {
					size_t drop = *len + n - (max - 1);

					memmove(log, log + drop, *len - drop);
					*len -= drop;
				}
				memcpy(log + *len, chunk, n);
				*len += n;
			}
			log[*len] = '\0';
			continue;
		}
		if (*len + n > max)
			continue;	/* a record that large is not believed anyway */
		char *nb = realloc(*buf, *len + n + 1);

		if (!nb)
			return;
		*buf = nb;
		memcpy(nb + *len, chunk, n);
		*len += n;
		nb[*len] = '\0';
	}
}

void sb_event(struct sandbox *sb, struct handle *h, uint32_t events)
{
	char *logp = sb->log;

	switch (h->kind) {
	case H_SB_X:
		if (events & EPOLLOUT)
			outq_flush(sb);
		if (events & (EPOLLIN | EPOLLHUP | EPOLLERR))
			read_frames(sb);
		break;
	case H_SB_JSON:
		read_more(sb->jfd, &sb->record, &sb->record_len, SB_RECORD_MAX, false);
		if (events & (EPOLLHUP | EPOLLERR))
			ep_mod(sb->jfd, &sb->hj, 0);
		break;
	case H_SB_LOG:
		read_more(sb->logfd, &logp, &sb->log_len, SB_LOG_MAX, true);
		if (events & (EPOLLHUP | EPOLLERR))
			ep_mod(sb->logfd, &sb->hl, 0);
		break;
	case H_SB_POLICY:
		policy_answer(sb);
		break;
	case H_SB_PID:
		if (waitpid(sb->pid, &sb->wstatus, WNOHANG) == sb->pid) {
			sb->exited = true;
			/* Its last frames and record, before it is judged. */
			read_frames(sb);
			read_more(sb->jfd, &sb->record, &sb->record_len, SB_RECORD_MAX, false);
			read_more(sb->logfd, &logp, &sb->log_len, SB_LOG_MAX, true);
			finish(sb);
		}
		break;
	default:
		break;
	}
}

/* ---- policy: the worker's supervisor changes the egress rules ---- */

int sb_policy(struct sandbox *sb, struct bind *to, json_t *policy)
{
	char *m;
	ssize_t n;

	if (sb->pfd < 0)
		return husk_seterr(ENOTSUP, "the sandbox has no network (net \"egress\") whose "
				   "rules could change");
	if (sb->policy_pending)
		return husk_seterr(EBUSY, "another policy change of this sandbox is under way");
	m = json_dumps(policy, JSON_COMPACT);
	if (!m)
		return husk_seterr(ENOMEM, "out of memory");
	n = send(sb->pfd, m, strlen(m), MSG_DONTWAIT | MSG_NOSIGNAL);
	free(m);
	if (n < 0)
		return husk_seterr(errno, "the sandbox's supervisor does not take it: %s",
				   strerror(errno));
	if (to)
		bind_set(&sb->policy_to, to->c, to->re);
	sb->policy_pending = true;
	return 0;
}

/* The supervisor's answer, checked as any peer's, to the waiting client. */
static void policy_answer(struct sandbox *sb)
{
	static char buf[64 * 1024];
	json_t *a = NULL, *al = NULL, *ah = NULL, *dn = NULL;
	const char *err;
	bool lists_ok;
	ssize_t n = recv(sb->pfd, buf, sizeof(buf), MSG_DONTWAIT | MSG_TRUNC);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		epoll_ctl(srv.epfd, EPOLL_CTL_DEL, sb->pfd, NULL);
		close(sb->pfd);
		sb->pfd = -1;
		if (sb->rules_pending) {
			sb->rules_pending = false;
			run_fail(sb, "the sandbox ended before its egress rules were set");
		}
		if (sb->policy_to.c)
			bind_send(&sb->policy_to, api_error(sb->policy_to.re, E_FAILED,
							    "the sandbox ended", NULL));
		bind_clear(&sb->policy_to);
		return;
	}
	if ((size_t)n <= sizeof(buf))
		a = json_loadb(buf, n, JSON_REJECT_DUPLICATES, NULL);
	err = json_string_value(json_object_get(a, "error"));
	lists_ok = !api_str_array(a, "allow", RUN_MAX_ALLOW, &al) && al &&
		   !api_str_array(a, "allow_host", RUN_MAX_ALLOW_HOST, &ah) && ah &&
		   !api_str_array(a, "deny", RUN_MAX_DENY, &dn) && dn;
	if (sb->rules_pending) {
		/* The rules of the request that claimed this pooled clone. */
		sb->rules_pending = false;
		sb->policy_pending = false;
		if (err || !json_is_true(json_object_get(a, "ok")) || !lists_ok) {
			run_fail(sb, err ? err : "the sandbox's supervisor answered nonsense");
		} else {
			sb->rules_set = true;
			setup_ready(sb);
		}
		json_decref(a);
		return;
	} else if (!sb->policy_pending || !sb->policy_to.c) {
		/* Nobody asked, or the client left: nothing to pass on. */
	} else if (err) {
		bind_send(&sb->policy_to, api_error(sb->policy_to.re, E_FAILED, err, NULL));
	} else if (json_is_true(json_object_get(a, "ok")) && lists_ok) {
		bind_send(&sb->policy_to, api_ok(sb->policy_to.re,
						 json_pack("{s:O,s:O,s:O}", "allow", al,
							   "allow_host", ah, "deny", dn)));
	} else {
		bind_send(&sb->policy_to, api_error(sb->policy_to.re, E_INTERNAL,
						    "the sandbox's supervisor answered nonsense",
						    NULL));
	}
	bind_clear(&sb->policy_to);
	sb->policy_pending = false;
	json_decref(a);
}

/* ---- the end ---- */

/* The worker's last message line, for an error that says why. */
static const char *log_tail(const struct sandbox *sb)
{
	const char *e = sb->log + sb->log_len, *s;

	while (e > sb->log && (e[-1] == '\n' || e[-1] == ' '))
		e--;
	for (s = e; s > sb->log && s[-1] != '\n'; s--)
		;
	return s;
}

static void metrics_from_record(json_t *rec)
{
	json_t *drops = json_object_get(json_object_get(rec, "net"), "drops");
	json_t *cg = json_object_get(rec, "cgroup");
	const char *k;
	json_t *v;

	if (json_is_integer(json_object_get(cg, "oom_kills")))
		metrics_oom_kills(json_integer_value(json_object_get(cg, "oom_kills")));
	json_object_foreach(drops, k, v)
		if (json_is_integer(v) && json_integer_value(v) > 0)
			metrics_egress_drops(k, json_integer_value(v));
	v = json_object_get(json_object_get(rec, "dns"), "refused");
	if (json_is_integer(v))
		metrics_dns_refused(json_integer_value(v));
}

/* The record's "job" and "bytes" for a run: its exec's, not the session's. */
static json_t *job_record(struct sandbox *sb)
{
	json_t *e = sb->run_exit, *code = json_object_get(e, "exit_code");

	return json_pack("{s:b,s:b,s:O,s:O,s:O,s:O,s:O,s:O}", "started", true,
			 "exited", json_is_integer(code), "exit", code,
			 "signal", json_object_get(e, "signal"),
			 "timed_out", json_object_get(e, "timed_out"),
			 "cpu_user_us", json_object_get(e, "cpu_user_us"),
			 "cpu_sys_us", json_object_get(e, "cpu_sys_us"),
			 "peak_rss_kib", json_object_get(e, "peak_rss_kib"));
}

static void origin_clear(struct sandbox *sb)
{
	if (sb->origin)
		sb->origin->sessions--;
	sb->origin = NULL;
}

static void finish(struct sandbox *sb)
{
	json_t *rec = sb->record ? json_loads(sb->record, 0, NULL) : NULL;
	const char *why = json_string_value(json_object_get(rec, "error"));
	char msg[600];
	unsigned i;

	if (!json_is_object(rec)) {
		json_decref(rec);
		rec = NULL;
		why = NULL;
	}
	snprintf(msg, sizeof(msg), "%s", why ? why : sb->log_len ? log_tail(sb) :
		 "the sandbox's worker ended");
	sb->state = SB_DONE;
	origin_clear(sb);
	if (rec)
		metrics_from_record(rec);
	if (sb->is_run && (sb->creator.c || sb->detach)) {
		char *l;

		if (rec) {
			/* The run's record: the job is the exec, not the session. */
			json_object_set_new(rec, "start", json_string(sb->start_kind));
			json_object_set_new(rec, "bytes", json_pack("{s:I,s:I,s:I,s:I}", "stdout",
				(json_int_t)sb->run_out[0], "stderr", (json_int_t)sb->run_out[1],
				"stdout_dropped", (json_int_t)sb->run_drop[0],
				"stderr_dropped", (json_int_t)sb->run_drop[1]));
			json_object_set_new(rec, "pool", json_boolean(sb->from_pool));
			if (sb->run_exit)
				json_object_set_new(rec, "job", job_record(sb));
		}
		if (sb->run_exited && !why) {
			json_t *ec = json_object_get(sb->run_exit, "exit_code");
			int code = json_is_integer(ec) ? (int)json_integer_value(ec) : 0;

			if (json_is_true(json_object_get(sb->run_exit, "timed_out")))
				code = 124;
			else if (json_is_integer(json_object_get(sb->run_exit, "signal")))
				code = 128 + (int)json_integer_value(json_object_get(sb->run_exit,
										     "signal"));
			if (rec)
				json_object_set_new(rec, "exit_code", json_integer(code));
			l = api_ok(sb->creator.re, json_pack("{s:i,s:O?}", "exit_code", code,
							    "record", rec));
		} else {
			metrics_job("failed");
			l = api_error(sb->creator.re, E_FAILED, msg,
				      json_pack("{s:O?}", "record", rec));
		}
		if (sb->detach)
			sb->final = json_loads(l ? l : "null", 0, NULL);
		bind_send(&sb->creator, l);
	} else if (sb->creator.c) {
		/* A create that never became ready. */
		bind_send(&sb->creator, api_error(sb->creator.re, E_FAILED, msg,
						  json_pack("{s:O?}", "record", rec)));
	}
	bind_clear(&sb->creator);
	for (i = 0; i < SB_MAX_REQS; i++) {
		struct xreq *x = &sb->reqs[i];

		if (!x->id)
			continue;
		if (x->to.c)
			bind_send(&x->to, api_error(x->to.re, E_FAILED, "the sandbox ended", NULL));
		sb_req_free(x);
	}
	if (sb->policy_to.c)
		bind_send(&sb->policy_to, api_error(sb->policy_to.re, E_FAILED, "the sandbox ended",
						    NULL));
	bind_clear(&sb->policy_to);
	if (sb->waiter.c) {
		if (sb->final)
			bind_send(&sb->waiter, api_ok(sb->waiter.re, json_pack("{s:O}", "final",
										 sb->final)));
		else
			bind_send(&sb->waiter, api_ok(sb->waiter.re,
						      json_pack("{s:O?}", "record", rec)));
		bind_clear(&sb->waiter);
	}
	json_decref(rec);
	serve_changed();
}

void sb_client_gone(struct sandbox *sb, struct client *c)
{
	unsigned i;

	for (i = 0; i < SB_MAX_REQS; i++)
		if (sb->reqs[i].id && sb->reqs[i].to.c == c)
			bind_clear(&sb->reqs[i].to);
	if (sb->waiter.c == c)
		bind_clear(&sb->waiter);
	if (sb->policy_to.c == c)
		bind_clear(&sb->policy_to);
	if (sb->origin == c)
		origin_clear(sb);
	if (sb->creator.c == c) {
		bind_clear(&sb->creator);
		/* A run nobody waits for dies with its client, unless it was detached. */
		if ((sb->is_run && !sb->detach) || sb->state == SB_STARTING)
			sb_kill(sb);
	}
}

void sb_tick(struct sandbox *sb, uint64_t now)
{
	bool busy = false;
	unsigned i;

	if (sb->state != SB_READY || sb->is_run || !sb->owned)
		return;
	for (i = 0; i < SB_MAX_REQS; i++)
		busy |= sb->reqs[i].id != 0;
	if (sb->lifetime_end && now >= sb->lifetime_end) {
		sb_end(sb);
		return;
	}
	/* Idle: no request open and none for idle_timeout. */
	if (!busy && sb->idle_us && now - sb->t_active > sb->idle_us)
		sb_end(sb);
}

json_t *sb_describe(const struct sandbox *sb, bool detail)
{
	static const char *const states[] = { "starting", "ready", "ending", "done" };
	unsigned i, execs = 0;
	json_t *o;

	for (i = 0; i < SB_MAX_REQS; i++)
		execs += sb->reqs[i].id && sb->reqs[i].kind == X_EXEC;
	o = json_pack("{s:s,s:s,s:s,s:i,s:I,s:s?,s:s,s:b,s:i}", "sandbox", sb->name,
		      "kind", sb->is_run ? "run" : "session", "state", states[sb->state],
		      "owner", (int)sb->owner,
		      "created", (json_int_t)((wall_us() - (now_us() - sb->t_request)) / 1000000),
		      "template", sb->template_name[0] ? sb->template_name : NULL,
		      "start", sb->start_kind, "pool", sb->from_pool, "execs", execs);
	if (o && detail) {
		json_object_set_new(o, "mem_mib", json_integer(sb->mem_mib));
		json_object_set_new(o, "pid", json_integer(sb->pid));
		json_object_set_new(o, "ready_ms", sb->t_ready ?
				    json_integer((sb->t_ready - sb->t_request) / 1000) : json_null());
		json_object_set_new(o, "idle_timeout", json_integer(sb->idle_us / 1000000));
		json_object_set_new(o, "detached", json_boolean(sb->detach));
	}
	return o;
}

void sb_free(struct sandbox *sb)
{
	unsigned i;

	for (i = 0; i < SB_MAX_REQS; i++)
		if (sb->reqs[i].id)
			sb_req_free(&sb->reqs[i]);
	bind_clear(&sb->creator);
	bind_clear(&sb->waiter);
	bind_clear(&sb->policy_to);
	origin_clear(sb);
	if (sb->pfd >= 0)
		close(sb->pfd);
	if (sb->xfd >= 0)
		close(sb->xfd);
	if (sb->jfd >= 0)
		close(sb->jfd);
	if (sb->logfd >= 0)
		close(sb->logfd);
	if (sb->pidfd >= 0)
		close(sb->pidfd);
	for (i = 0; i < sb->outq_n; i++)
		free(sb->outq[i]);
	free(sb->outq);
	free(sb->outq_len);
	free(sb->record);
	json_decref(sb->run_exit);
	json_decref(sb->final);
	if (sb->req) {
		api_req_free(sb->req);
		free(sb->req);
	}
	free(sb);
}
