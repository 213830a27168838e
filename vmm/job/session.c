/*
 * session: the host's half of the guest protocol. See session.h.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "job/session.h"
#include "lib/util.h"

#define CHUNK (64 * 1024)

static void vstop(struct session *s, enum session_stop why, const char *fmt, va_list ap)
{
	char msg[sizeof(s->r.error)];

	if (s->stopped)
		return;
	s->stopped = true;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	if (why == SESSION_FAILED) {
		if (!s->r.error[0])
			snprintf(s->r.error, sizeof(s->r.error), "%s", msg);
		s->state = SS_OVER;
	}
	if (s->ops.stop)
		s->ops.stop(s->ops.arg, why, msg);
}

static void stop(struct session *s, enum session_stop why, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void stop(struct session *s, enum session_stop why, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vstop(s, why, fmt, ap);
	va_end(ap);
}

/* A protocol or rule violation: the session is over. */
static int fail(struct session *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct session *s, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vstop(s, SESSION_FAILED, fmt, ap);
	va_end(ap);
	return -EPROTO;
}

void session_init(struct session *s, const struct job_opts *job, const struct session_net *net,
		  uint64_t mem_limit, const struct session_timing *tm,
		  const struct session_ops *ops)
{
	int i;

	memset(s, 0, sizeof(*s));
	s->job = job;
	if (net) {
		s->net = *net;
		s->have_net = true;
	}
	s->mem_limit = mem_limit;
	s->tm = *tm;
	s->ops = *ops;
	s->state = SS_CONNECT;
	proto_outq_init(&s->q);
	for (i = 0; i < IS_NR; i++)
		s->r.guest_steps[i] = -1;
}

void session_free(struct session *s)
{
	proto_outq_free(&s->q);
}

struct proto_outq *session_outq(struct session *s)
{
	return &s->q;
}

/* Queue one frame; the write-stall clock starts when the queue fills. */
static int send_frame(struct session *s, uint16_t type, const void *p, uint32_t len,
		      uint64_t now)
{
	if (!proto_outq_len(&s->q))
		s->last_tx = now;
	return proto_outq_add(&s->q, type, p, len);
}

/* A session frame: the u32 id, then the payload. */
static int send_id_frame(struct session *s, uint16_t type, uint32_t id, const void *p,
			 size_t len, uint64_t now)
{
	uint8_t *b;
	int err;

	if (len > PROTO_MAX_PAYLOAD - PROTO_ID_LEN)
		return husk_seterr(EMSGSIZE, "a request of %zu bytes is too large", len);
	b = malloc(PROTO_ID_LEN + len);
	if (!b)
		return husk_seterr(ENOMEM, "out of memory");
	le32_put(b, id);
	if (len)
		memcpy(b + PROTO_ID_LEN, p, len);
	err = send_frame(s, type, b, PROTO_ID_LEN + len, now);
	free(b);
	return err;
}

static int send_resize(struct session *s, uint64_t now);

/* ---- the job spec ---- */

/*
 * Each --put is its own gzip'd tar stream, ended by an empty chunk; queued
 * a chunk at a time while the queue is short, so a guest that reads slowly
 * holds up only itself.
 */
static int queue_puts(struct session *s, uint64_t now)
{
	uint8_t buf[CHUNK];
	ssize_t n;
	int err;

	while (!s->puts_queued && proto_outq_len(&s->q) < SESSION_OUTQ_LOW) {
		if (!s->put_open) {
			s->put_open = true;
			continue;
		}
		n = s->ops.put_read ? s->ops.put_read(s->ops.arg, s->put_idx, buf, sizeof(buf)) :
		    0;
		if (n < 0)
			return husk_seterr((int)n, "cannot read the --put files: %s", husk_lasterr());
		err = send_frame(s, P_FILES_IN, buf, (uint32_t)n, now);
		if (err)
			return err;
		if (!n) {	/* that stream's end */
			s->put_open = false;
			s->puts_queued = ++s->put_idx >= s->job->nr_put;
		}
	}
	return 0;
}

static int send_job(struct session *s, uint64_t now)
{
	const struct job_opts *j = s->job;
	uint8_t seed[64];
	struct tlv_buf b;
	unsigned i;
	int err;

	tlv_init(&b);
	for (i = 0; !j->session && i < (unsigned)j->argc; i++)
		tlv_put_str(&b, T_JOB_ARG, j->argv[i]);
	for (i = 0; i < j->nr_env; i++)
		tlv_put_str(&b, T_JOB_ENV, j->env[i]);
	if (j->cwd)
		tlv_put_str(&b, T_JOB_CWD, j->cwd);
	if (j->hostname)
		tlv_put_str(&b, T_JOB_HOSTNAME, j->hostname);
	if (j->root)
		tlv_put_u8(&b, T_JOB_ROOT, 1);
	if (j->verbose)
		tlv_put_u8(&b, T_JOB_VERBOSE, 1);
	if (j->terminal)
		tlv_put_u32(&b, T_JOB_TERMINAL, (uint32_t)j->rows << 16 | j->cols);
	for (i = 0; i < j->nr_rlimits; i++) {
		uint8_t v[PROTO_RLIMIT_LEN];

		le32_put(v, j->rlimits[i].resource);
		le64_put(v + 4, j->rlimits[i].soft);
		le64_put(v + 12, j->rlimits[i].hard);
		tlv_put(&b, T_JOB_RLIMIT, v, sizeof(v));
	}
	for (i = 0; i < j->nr_tmpfs; i++) {
		size_t n = strlen(j->tmpfs[i].path);
		uint8_t v[PROTO_TMPFS_HDR + 4096];

		if (n > 4095)
			n = 4095;	/* refused by the parser long before */
		le64_put(v, j->tmpfs[i].size);
		le32_put(v + 8, j->tmpfs[i].mode);
		le32_put(v + 12, j->tmpfs[i].noexec ? PROTO_TMPFS_NOEXEC : 0);
		memcpy(v + PROTO_TMPFS_HDR, j->tmpfs[i].path, n);
		tlv_put(&b, T_JOB_TMPFS, v, PROTO_TMPFS_HDR + n);
	}
	tlv_put_u64(&b, T_JOB_TIMEOUT_MS, j->timeout_sec * 1000);
	tlv_put_u32(&b, T_JOB_WORKSPACE_MIB, (uint32_t)j->workspace_mib);
	tlv_put_u64(&b, T_JOB_CLOCK_NS, wall_us() * 1000);
	if (getrandom(seed, sizeof(seed), 0) == sizeof(seed))
		tlv_put(&b, T_JOB_RNG_SEED, seed, sizeof(seed));
	if (!j->session)
		tlv_put_u8(&b, T_JOB_STDIN, j->stdin);
	tlv_put_u8(&b, T_JOB_FILES_IN, (uint8_t)j->nr_put);
	if (s->mem_limit)
		tlv_put_u64(&b, T_JOB_MEM_LIMIT, s->mem_limit);
	for (i = 0; !j->session && i < j->nr_get; i++)
		tlv_put_str(&b, T_JOB_GET, j->get[i]);
	if (s->have_net) {
		/* Addresses in network order, as they are kept. */
		tlv_put_u32(&b, T_JOB_NET_ADDR, s->net.addr);
		tlv_put_u32(&b, T_JOB_NET_GW, s->net.gw);
		tlv_put_u8(&b, T_JOB_NET_PREFIX, s->net.prefix);
		/* A template's clone must not keep the MAC the template booted with. */
		tlv_put(&b, T_JOB_NET_MAC, s->net.mac, 6);
	}
	if (j->session)
		tlv_put_u8(&b, T_JOB_SESSION, 1);
	if (b.failed) {
		tlv_free(&b);
		return husk_seterr(E2BIG, "the job description is too large");
	}
	err = send_frame(s, P_JOB, b.data, (uint32_t)b.len, now);
	tlv_free(&b);
	s->puts_queued = !j->nr_put;
	s->stdin_open = !j->session && j->stdin;
	return err ? err : queue_puts(s, now);
}

/* ---- what guest-init sends ---- */

/*
 * Pass job output on up to max_output bytes per stream; past that it is
 * counted, not passed, and one marker line says so.
 */
static void forward_output(struct session *s, bool out, const uint8_t *p, uint32_t len)
{
	struct session_result *r = &s->r;
	uint64_t *seen = out ? &r->stdout_bytes : &r->stderr_bytes;
	uint64_t *dropped = out ? &r->stdout_dropped : &r->stderr_dropped;
	uint64_t cap = s->job->max_output;
	uint64_t room = *seen < cap ? cap - *seen : 0;
	uint32_t n = len < room ? len : (uint32_t)room;
	int stream = out ? 1 : 2;

	if (n && s->ops.output)
		s->ops.output(s->ops.arg, stream, p, n);
	if (out && n)
		r->stdout_open_line = p[n - 1] != '\n';
	*seen += len;
	if (n < len) {
		char marker[160];

		if (!*dropped && s->ops.output) {
			snprintf(marker, sizeof(marker), "\n[husk: %s exceeded %llu bytes; the rest "
				 "is dropped and counted]\n", out ? "stdout" : "stderr",
				 (unsigned long long)cap);
			s->ops.output(s->ops.arg, stream, (const uint8_t *)marker, strlen(marker));
			if (out)
				r->stdout_open_line = false;
		}
		*dropped += len - n;
	}
}

int session_parse_exit(const uint8_t *p, size_t len, struct session_exit *e)
{
	struct tlv_iter it;
	struct tlv t;
	bool code = false, sig = false;
	uint8_t v8;
	int n;

	memset(e, 0, sizeof(*e));
	tlv_iter_init(&it, p, len);
	while ((n = tlv_next(&it, &t)) == 1) {
		switch (t.tag) {
		case T_EXIT_CODE:
			if (tlv_u32(&t, &e->code) || e->code > 255)
				return -EINVAL;
			code = true;
			break;
		case T_EXIT_SIGNAL:
			if (tlv_u32(&t, &e->signal) || e->signal == 0 || e->signal > 64)
				return -EINVAL;
			sig = true;
			break;
		case T_EXIT_TIMED_OUT:
			if (tlv_u8(&t, &v8))
				return -EINVAL;
			e->timed_out = v8;
			break;
		case T_EXIT_USER_US:
			if (tlv_u64(&t, &e->user_us))
				return -EINVAL;
			break;
		case T_EXIT_SYS_US:
			if (tlv_u64(&t, &e->sys_us))
				return -EINVAL;
			break;
		case T_EXIT_MAXRSS_KIB:
			if (tlv_u64(&t, &e->maxrss_kib))
				return -EINVAL;
			break;
		default:
			break;	/* newer guest-init fields are ignored */
		}
	}
	if (n < 0 || code == sig)	/* exactly one of them */
		return -EINVAL;
	e->exited = code;
	return 0;
}

/*
 * guest-init's step marks, for the record only: whatever the guest claims
 * there decides nothing, so a malformed entry is skipped, not an error.
 */
static void read_steps(struct session *s, const uint8_t *p, uint32_t len)
{
	struct tlv_iter it;
	struct tlv t;
	uint64_t us;
	unsigned k;

	tlv_iter_init(&it, p, len);
	while (tlv_next(&it, &t) == 1) {
		if (t.tag != T_INIT_STEP || t.len != INIT_STEP_LEN || t.val[0] >= IS_NR)
			continue;
		for (us = 0, k = 0; k < 8; k++)
			us |= (uint64_t)t.val[1 + k] << (8 * k);
		s->r.guest_steps[t.val[0]] = us <= INT64_MAX ? (int64_t)us : -1;
	}
}

static int on_files_out(struct session *s, uint8_t **pp, uint32_t len)
{
	unsigned idx = s->get_idx;

	if (s->state != SS_FILES_OUT || idx >= s->job->nr_get)
		return fail(s, "guest sent files that were not asked for");
	if (!len && ++s->get_idx == s->job->nr_get)
		s->state = SS_DONE;
	if (s->ops.get_data)
		s->ops.get_data(s->ops.arg, idx, pp, len);
	return 0;
}

static int on_hello(struct session *s, const uint8_t *p, uint32_t len, uint64_t now)
{
	enum session_hello h;

	if (s->state != SS_HELLO || s->waiting)
		return fail(s, "guest sent HELLO twice");
	read_steps(s, p, len);
	h = s->ops.hello ? s->ops.hello(s->ops.arg) : SH_GO;
	if (h == SH_END) {
		s->held = true;
		s->state = SS_OVER;
		return 1;
	}
	if (h == SH_WAIT) {
		s->waiting = true;
		return 0;
	}
	s->state = SS_RUNNING;
	if (send_job(s, now))
		return fail(s, "cannot send the job: %s", husk_lasterr());
	return 0;
}

static int on_exit_frame(struct session *s, const uint8_t *p, uint32_t len, uint64_t now)
{
	if (s->state != SS_RUNNING || s->r.job_exited || s->job->session || !s->r.job_started)
		return fail(s, "guest sent EXIT out of order");
	if (session_parse_exit(p, len, &s->r.exit))
		return fail(s, "guest sent a malformed EXIT record");
	s->r.job_exited = true;
	s->r.t_exited = now;
	/* Whatever stdin is still wanted, the job is past reading it. */
	s->stdin_open = false;
	s->state = s->job->nr_get ? SS_FILES_OUT : SS_DONE;
	return 0;
}

static int on_error_frame(struct session *s, const uint8_t *p, uint32_t len)
{
	char msg[256];
	size_t n = len < sizeof(msg) - 1 ? len : sizeof(msg) - 1, i;

	if (n)
		memcpy(msg, p, n);
	msg[n] = '\0';
	for (i = 0; i < n; i++)
		if ((unsigned char)msg[i] < 0x20)
			msg[i] = ' ';
	fail(s, "guest-init: %s", msg);
	return 1;
}

/* ---- a session's answers ---- */

static struct session_id *find_id(struct session *s, uint32_t id)
{
	unsigned i;

	for (i = 0; id && i < SESSION_MAX_IDS; i++)
		if (s->ids[i].kind && s->ids[i].id == id)
			return &s->ids[i];
	return NULL;
}

static void free_id(struct session *s, struct session_id *e)
{
	if (e->kind == 'x' && s->nr_execs)
		s->nr_execs--;
	if (e->kind == 'p' || e->kind == 'd')
		s->put_live = false;
	memset(e, 0, sizeof(*e));
}

static void xevent(struct session *s, enum session_xkind k, uint32_t id, const uint8_t *d,
		   size_t n, int stream, const struct session_exit *e)
{
	struct session_xevent ev = { .kind = k, .id = id, .data = d, .len = n, .stream = stream };

	if (e)
		ev.exit = *e;
	if (s->ops.xevent)
		s->ops.xevent(s->ops.arg, &ev);
}

/* One of P_XSTARTED .. P_XERROR: it must answer a live request of its kind. */
static int on_xframe(struct session *s, const struct proto_hdr *h, const uint8_t *p)
{
	struct session_id *e;
	struct session_exit ex;
	const uint8_t *d;
	uint32_t id;
	size_t n;

	if (!s->job->session || s->state != SS_RUNNING || !s->r.job_started)
		return fail(s, "guest sent a session frame (type %u) outside a session", h->type);
	if (h->len < PROTO_ID_LEN)
		return fail(s, "guest sent a session frame (type %u) without an id", h->type);
	id = le32_get(p);
	d = p + PROTO_ID_LEN;
	n = h->len - PROTO_ID_LEN;
	e = find_id(s, id);
	if (!e)
		return fail(s, "guest answered request %u, which is not open", id);
	switch (h->type) {
	case P_XSTARTED:
		if (e->kind != 'x' || e->started)
			return fail(s, "guest sent XSTARTED for %u out of order", id);
		e->started = true;
		xevent(s, SX_STARTED, id, NULL, 0, 0, NULL);
		return 0;
	case P_XOUT:
		if (e->kind != 'x' || !e->started || n < 1 || (d[0] != 1 && d[0] != 2))
			return fail(s, "guest sent output for %u out of order or malformed", id);
		xevent(s, SX_OUT, id, d + 1, n - 1, d[0], NULL);
		return 0;
	case P_XEXIT:
		if (e->kind != 'x' || !e->started)
			return fail(s, "guest sent XEXIT for %u out of order", id);
		if (session_parse_exit(d, n, &ex))
			return fail(s, "guest sent a malformed exit record for %u", id);
		free_id(s, e);
		xevent(s, SX_EXIT, id, NULL, 0, 0, &ex);
		return 0;
	case P_XFILES:
		if (e->kind != 'g')
			return fail(s, "guest sent files for %u, which is no get", id);
		if (!n)
			free_id(s, e);
		xevent(s, SX_FILES, id, d, n, 0, NULL);
		return 0;
	case P_XDONE:
		if (e->kind != 'p' || s->put_live)
			return fail(s, "guest finished put %u before it ended", id);
		free_id(s, e);
		xevent(s, SX_DONE, id, NULL, 0, 0, NULL);
		return 0;
	case P_XERROR: {
		char msg[256];
		size_t k, m = n < sizeof(msg) - 1 ? n : sizeof(msg) - 1;

		memcpy(msg, d, m);
		msg[m] = '\0';
		for (k = 0; k < m; k++)
			if ((unsigned char)msg[k] < 0x20)
				msg[k] = ' ';
		if (e->kind == 'd')
			return fail(s, "guest failed put %u twice", id);
		/*
		 * A put refused before the host ended it drains: its id stays
		 * taken until the end chunk, and no more of its data is sent.
		 */
		if (e->kind == 'p' && s->put_live)
			e->kind = 'd';
		else
			free_id(s, e);
		xevent(s, SX_ERROR, id, (const uint8_t *)msg, m, 0, NULL);
		return 0;
	}
	}
	return fail(s, "guest sent an unexpected frame (type %u)", h->type);
}

/* ---- the conversation ---- */

void session_connected(struct session *s, uint64_t now)
{
	if (s->state == SS_CONNECT)
		s->state = SS_HELLO;
	s->r.t_connected = now;
	s->last_rx = now;
}

void session_rx(struct session *s, bool mid_frame, uint64_t now)
{
	s->last_rx = now;
	s->mid_frame = mid_frame;
}

int session_frame(struct session *s, const struct proto_hdr *h, uint8_t **pp, uint64_t now)
{
	struct session_result *r = &s->r;
	const uint8_t *p = *pp;

	s->last_rx = now;
	s->mid_frame = false;
	if (s->state == SS_OVER)
		return 1;
	switch (h->type) {
	case P_HELLO:
		return on_hello(s, p, h->len, now);
	case P_STARTED:
		if (s->state != SS_RUNNING || r->job_started)
			return fail(s, "guest sent STARTED out of order");
		r->job_started = true;
		r->t_started = now;
		read_steps(s, p, h->len);
		if (s->ops.started)
			s->ops.started(s->ops.arg);
		if (s->winsz)
			return send_resize(s, now);
		return 0;
	case P_STDOUT:
	case P_STDERR:
		if (s->state != SS_RUNNING || s->job->session || !r->job_started)
			return fail(s, "guest sent output after the job ended");
		forward_output(s, h->type == P_STDOUT, p, h->len);
		return 0;
	case P_EXIT:
		return on_exit_frame(s, p, h->len, now);
	case P_FILES_OUT:
		return on_files_out(s, pp, h->len);
	case P_DONE:
		if (s->state != SS_DONE)
			return fail(s, "guest finished before the job's results were complete");
		r->t_done = now;
		/* Closing tells guest-init everything arrived: it powers off now. */
		return 1;
	case P_ERROR:
		return on_error_frame(s, p, h->len);
	case P_XSTARTED: case P_XOUT: case P_XEXIT: case P_XFILES: case P_XDONE:
	case P_XERROR:
		return on_xframe(s, h, p);
	default:
		return fail(s, "guest sent an unexpected frame (type %u)", h->type);
	}
}

void session_closed(struct session *s, int err)
{
	if (s->state == SS_OVER || (s->state == SS_DONE && s->r.t_done))
		return;
	if (err == -EPROTO)
		fail(s, "guest-init sent a malformed frame");
	else
		fail(s, "guest-init closed the control channel early");
}

void session_wrote(struct session *s, ssize_t n, uint64_t now)
{
	if (n > 0)
		s->last_tx = now;
	/* A closed peer shows up on the read side too; say it once, there. */
	if (n < 0 && s->state != SS_DONE && s->state != SS_OVER)
		fail(s, "guest-init stopped reading its control channel (%s)", husk_lasterr());
}

void session_pump(struct session *s, uint64_t now)
{
	if (s->state == SS_RUNNING && !s->puts_queued && queue_puts(s, now))
		fail(s, "%s", husk_lasterr());
}

bool session_wants_stdin(const struct session *s)
{
	return s->stdin_open && s->r.job_started && s->state == SS_RUNNING &&
	       proto_outq_len(&s->q) < SESSION_OUTQ_LOW;
}

int session_stdin(struct session *s, const void *p, size_t n, uint64_t now)
{
	int err;

	if (!s->stdin_open)
		return 0;
	if (!n)
		s->stdin_open = false;
	err = send_frame(s, P_STDIN, p, (uint32_t)n, now);
	if (err)
		fail(s, "%s", husk_lasterr());
	return err;
}

static int send_resize(struct session *s, uint64_t now)
{
	uint8_t b[4];
	int err;

	le32_put(b, s->winsz);
	s->winsz = 0;
	err = send_frame(s, P_RESIZE, b, sizeof(b), now);
	if (err)
		fail(s, "%s", husk_lasterr());
	return err;
}

int session_resize(struct session *s, uint16_t rows, uint16_t cols, uint64_t now)
{
	if (!s->job->terminal || s->job->session || s->r.job_exited || !rows || !cols ||
	    s->state > SS_RUNNING)
		return 0;
	/* Before the job runs, the last window waits for STARTED. */
	s->winsz = (uint32_t)rows << 16 | cols;
	return s->r.job_started ? send_resize(s, now) : 0;
}

/* Make *next the earlier of itself and t. */
static void sooner(uint64_t *next, uint64_t t)
{
	if (t < *next)
		*next = t;
}

/*
 * A guest-init that stopped talking where it must not: a VM failure.
 * Each rule below fails the session once its time has passed and otherwise
 * notes in *next when it would: the same expressions decide both, so the
 * caller's sleep never outlasts a rule.
 */
static void check_stall(struct session *s, uint64_t now, uint64_t *next)
{
	if (s->state == SS_CONNECT) {
		if (now > s->tm.connect_by)
			fail(s, "guest-init did not connect within %u s of the VM's start",
			     s->tm.allowance_s);
		else
			sooner(next, s->tm.connect_by + 1);
		return;
	}
	/* guest-init waits for its job without a word: not a stall. */
	if (s->state == SS_OVER || s->waiting)
		return;
	if (!s->r.job_started && proto_outq_len(&s->q)) {
		if (now - s->last_tx > s->tm.write_stall_us) {
			fail(s, "guest-init stopped reading its control channel before the job started");
			return;
		}
		sooner(next, s->last_tx + s->tm.write_stall_us + 1);
	}
	if (now - s->last_rx <= s->tm.stall_us) {
		sooner(next, s->last_rx + s->tm.stall_us + 1);
		return;
	}
	if (s->mid_frame)
		fail(s, "guest-init stopped in the middle of a frame");
	else if (!s->r.job_started)
		fail(s, "guest-init stopped responding before the job started");
	else if (s->state == SS_FILES_OUT || (s->state == SS_DONE && !s->r.t_done))
		fail(s, "guest-init stopped sending the job's results");
}

uint64_t session_tick(struct session *s, uint64_t now)
{
	uint64_t next = UINT64_MAX;

	if (s->stopped)
		return next;
	check_stall(s, now, &next);
	if (s->stopped || s->waiting)
		return UINT64_MAX;
	if (s->r.t_done) {
		if (now - s->r.t_done > s->tm.done_grace_us) {
			stop(s, SESSION_NO_POWEROFF, "guest-init finished but did not power off; "
			     "stopped by husk");
			return UINT64_MAX;
		}
		sooner(&next, s->r.t_done + s->tm.done_grace_us + 1);
	}
	if (now < s->tm.deadline)
		return next < s->tm.deadline ? next : s->tm.deadline;
	if (s->r.job_exited)
		fail(s, "guest-init did not finish sending the job's results within --timeout "
		     "plus the %u s allowance", s->tm.allowance_s);
	else
		stop(s, SESSION_TIMEOUT, "the guest did not finish within --timeout plus the "
		     "boot allowance");
	return UINT64_MAX;
}

int session_release(struct session *s, uint64_t now)
{
	if (!s->waiting || s->stopped)
		return husk_seterr(EINVAL, "no job waits to be started");
	s->waiting = false;
	s->state = SS_RUNNING;
	s->last_rx = now;
	if (send_job(s, now))
		return fail(s, "cannot send the job: %s", husk_lasterr());
	return 0;
}

bool session_waiting(const struct session *s)
{
	return s->waiting && !s->stopped;
}

/* ---- session requests ---- */

bool session_ready(const struct session *s)
{
	return s->job->session && s->state == SS_RUNNING && s->r.job_started && !s->stopped;
}

static struct session_id *new_id(struct session *s, uint32_t id, uint8_t kind)
{
	unsigned i;

	if (!id)
		return husk_seterr(EINVAL, "request id 0 is not allowed"), NULL;
	if (find_id(s, id))
		return husk_seterr(EBUSY, "request id %u is in use", id), NULL;
	for (i = 0; i < SESSION_MAX_IDS; i++) {
		if (!s->ids[i].kind) {
			s->ids[i] = (struct session_id){ .id = id, .kind = kind };
			return &s->ids[i];
		}
	}
	return husk_seterr(EBUSY, "too many requests in flight"), NULL;
}

static int need_ready(const struct session *s)
{
	if (!s->job->session)
		return husk_seterr(EINVAL, "not a session");
	if (!session_ready(s))
		return husk_seterr(EAGAIN, "the session is not running");
	return 0;
}

int session_exec(struct session *s, uint32_t id, const struct exec_opts *x, uint64_t now)
{
	struct session_id *e;
	struct tlv_buf b;
	unsigned i;
	int err = need_ready(s);

	if (err)
		return err;
	if (!x->argc || !x->argv[0] || !*x->argv[0])
		return husk_seterr(EINVAL, "exec: no command");
	if (s->nr_execs >= PROTO_MAX_EXECS)
		return husk_seterr(EBUSY, "exec: %u commands run already", PROTO_MAX_EXECS);
	tlv_init(&b);
	for (i = 0; i < x->argc; i++)
		tlv_put_str(&b, T_JOB_ARG, x->argv[i]);
	for (i = 0; i < x->nr_env; i++)
		tlv_put_str(&b, T_JOB_ENV, x->env[i]);
	if (x->cwd)
		tlv_put_str(&b, T_JOB_CWD, x->cwd);
	tlv_put_u8(&b, T_JOB_STDIN, x->stdin);
	if (x->timeout_ms)
		tlv_put_u64(&b, T_JOB_TIMEOUT_MS, x->timeout_ms);
	if (b.failed) {
		tlv_free(&b);
		return husk_seterr(E2BIG, "exec: the command is too large");
	}
	e = new_id(s, id, 'x');
	if (!e) {
		tlv_free(&b);
		return -EBUSY;
	}
	err = send_id_frame(s, P_EXEC, id, b.data, b.len, now);
	tlv_free(&b);
	if (err) {
		free_id(s, e);
		return err;
	}
	s->nr_execs++;
	return 0;
}

int session_xstdin(struct session *s, uint32_t id, const void *p, size_t n, uint64_t now)
{
	struct session_id *e;
	int err = need_ready(s);

	if (err)
		return err;
	e = find_id(s, id);
	/* An exec that ended meanwhile: its stdin goes nowhere, as in the guest. */
	if (!e || e->kind != 'x')
		return 0;
	return send_id_frame(s, P_XSTDIN, id, p, n, now);
}

int session_signal(struct session *s, uint32_t id, uint32_t sig, uint64_t now)
{
	struct session_id *e;
	uint8_t v[4];
	int err = need_ready(s);

	if (err)
		return err;
	if (!sig || sig > 64)
		return husk_seterr(EINVAL, "signal %u is not a signal", sig);
	e = find_id(s, id);
	if (!e || e->kind != 'x')
		return husk_seterr(ESRCH, "no command %u runs", id);
	le32_put(v, sig);
	return send_id_frame(s, P_XSIGNAL, id, v, sizeof(v), now);
}

int session_put(struct session *s, uint32_t id, const void *p, size_t n, uint64_t now)
{
	struct session_id *e;
	int err = need_ready(s);

	if (err)
		return err;
	e = find_id(s, id);
	if (!e) {
		unsigned i;

		/* One put at a time, until guest-init answered it (docs/protocol.md). */
		for (i = 0; i < SESSION_MAX_IDS; i++)
			if (s->ids[i].kind == 'p' || s->ids[i].kind == 'd')
				return husk_seterr(EBUSY, "put: another put is open");
		e = new_id(s, id, 'p');
		if (!e)
			return -EBUSY;
		s->put_live = true;
	} else if (e->kind == 'd') {
		/* Refused already: drop its data, send its end, and it is free. */
		if (n)
			return 0;
		err = send_id_frame(s, P_PUT, id, NULL, 0, now);
		free_id(s, e);
		return err;
	} else if (e->kind != 'p' || !s->put_live) {
		return husk_seterr(EBUSY, "request id %u is in use", id);
	}
	err = send_id_frame(s, P_PUT, id, p, n, now);
	if (!err && !n)
		s->put_live = false;	/* ended: the guest answers XDONE or XERROR */
	return err;
}

int session_get(struct session *s, uint32_t id, const char *path, uint64_t now)
{
	struct session_id *e;
	int err = need_ready(s);

	if (err)
		return err;
	if (!path || !*path || strlen(path) >= 4096)
		return husk_seterr(EINVAL, "get: no path");
	e = new_id(s, id, 'g');
	if (!e)
		return -EBUSY;
	err = send_id_frame(s, P_GET, id, path, strlen(path), now);
	if (err)
		free_id(s, e);
	return err;
}

int session_end(struct session *s, uint64_t now)
{
	int err = need_ready(s);

	if (err)
		return err;
	err = send_frame(s, P_END, NULL, 0, now);
	if (!err)
		s->state = SS_DONE;
	return err;
}
