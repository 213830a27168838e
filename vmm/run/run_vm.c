/*
 * run_vm: the VM process of `husk run` (see run_int.h for the split).
 *
 * It opens what the VM needs while it still can, enters the jail, applies a
 * template's state (only once jailed: it is input), starts the vCPUs and
 * then runs the job's event loop on its main thread: accept
 * guest-init's control connection (bridged by the vsock device to a Unix
 * socket in the runtime directory, which is now "/"), speak the protocol
 * of docs/protocol.md, forward stdin and output, pass --get streams up to
 * the supervisor, and enforce the deadline. Everything the guest sends is
 * checked; a guest that misbehaves ends the run as a VM failure, never as a
 * crash or a hang. How it went is written to the shared run_vm_report.
 *
 * The loop never blocks on a peer. Frames for guest-init wait in a queue
 * that is written as the socket takes them (--put data and stdin are read
 * only while the queue is short); --get data for the supervisor waits in
 * one pending slot, and while it waits no more guest frames are read (so the
 * guest's own vsock credit pushes back). Each wake-up handles a bounded
 * number of frames, and the stop checks (the VM's end, signals, the
 * supervisor, the deadline, stalls) run on every iteration.
 */
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "sandbox/jail.h"
#include "job/proto.h"
#include "job/session.h"
#include "run/run_int.h"
#include "sandbox/seccomp.h"
#include "template/template.h"
#include "lib/util.h"
#include "template/vm_snapshot.h"

#define BOOT_ALLOWANCE_US (60ull * 1000000)	/* boot + teardown beyond --timeout */
#define PVM_BOOT_ALLOWANCE_US (1800ull * 1000000)
#define DONE_GRACE_US (5ull * 1000000)
/*
 * guest-init keeps talking except while the job runs: it connects within
 * the boot allowance, and before the job starts, inside a frame and while
 * sending results it never goes quiet this long. Silence there is a stall.
 */
#define STALL_US (30ull * 1000000)
#define PVM_STALL_US (600ull * 1000000)
/* Before the job starts, guest-init must take what husk sends this fast. */
#define WRITE_STALL_US (10ull * 1000000)
#define CHUNK (64 * 1024)
#define FRAMES_PER_WAKEUP 16
#define BYTES_PER_WAKEUP (1u << 20)
#define VSOCK_NAME "vsock"		/* relative: valid before and after pivot_root */

/* --get bytes on their way up to the supervisor, in RUN_CHAN_MAX pieces. */
struct chan_out {
	uint8_t *buf;			/* a FILES_OUT payload (owned), or NULL */
	size_t off, len;
	unsigned idx;
	bool end;			/* CHAN_GET_END for idx follows */
};

struct rvm {
	const struct run_vm_args *a;
	const struct run_opts *o;
	struct run_vm_report *r;
	struct vm *vm;
	int lfd, cfd, sfd, in_fd, chan;
	bool jail;			/* the go said: the full jail, as uid/gid */
	uid_t uid;
	gid_t gid;
	struct proto_reader rd;
	struct session sess;		/* the guest protocol (job/session.h) */
	int xfd;			/* husk serve's end of a session, or -1 */
	uint8_t *xpend;			/* a frame for it that did not go yet */
	size_t xpend_len;
	struct chan_out up;
	unsigned put_cur;		/* --put stream being read */
	uint64_t put_off, put_left;	/* position in put_fd, bytes left of put_cur */
	/* A template to restore (run --template). */
	uint8_t *tpl;
	size_t tpl_len;
	struct snap *snap;
	struct template_meta meta;
	struct vm_restore restore;
};

static int fail(struct rvm *R, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct rvm *R, const char *fmt, ...)
{
	va_list ap;

	if (!R->r->error[0]) {
		va_start(ap, fmt);
		vsnprintf(R->r->error, sizeof(R->r->error), fmt, ap);
		va_end(ap);
	}
	vm_stop(R->vm, VM_STOP_HOST_ERROR, 0, "%s", R->r->error);
	return -EPROTO;
}

/* ---- supervisor channel ---- */

/* One message without waiting: 1 sent, 0 the socket is full, -errno. */
static int chan_try(struct rvm *R, uint8_t type, unsigned idx, const void *p, size_t n)
{
	struct chan_hdr h = { .type = type, .idx = idx };
	struct iovec iov[2] = { { &h, sizeof(h) }, { (void *)p, n } };
	struct msghdr m = { .msg_iov = iov, .msg_iovlen = n ? 2 : 1 };
	ssize_t w;

	do
		w = sendmsg(R->chan, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
	while (w < 0 && errno == EINTR);
	if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS))
		return 0;
	if (w < 0)
		return husk_seterr(errno, "the supervisor is gone: %s", strerror(errno));
	return 1;
}

/* Send what is pending up; 0 when all of it went (or some waits), -errno. */
static int chan_pump(struct rvm *R)
{
	struct chan_out *u = &R->up;
	int sent;

	while (u->buf && u->off < u->len) {
		size_t n = u->len - u->off;

		if (n > RUN_CHAN_MAX - sizeof(struct chan_hdr))
			n = RUN_CHAN_MAX - sizeof(struct chan_hdr);
		sent = chan_try(R, CHAN_GET_DATA, u->idx, u->buf + u->off, n);
		if (sent <= 0)
			return sent;
		u->off += n;
	}
	free(u->buf);
	u->buf = NULL;
	u->off = u->len = 0;
	if (u->end) {
		sent = chan_try(R, CHAN_GET_END, u->idx, NULL, 0);
		if (sent <= 0)
			return sent;
		u->end = false;
	}
	return 0;
}

static bool chan_busy(const struct rvm *R)
{
	return R->up.buf || R->up.end;
}

/* No guest frames are read while what they produced waits for its reader. */
static bool busy(const struct rvm *R)
{
	return chan_busy(R) || R->xpend;
}

/*
 * CHAN_STOP from the supervisor (an egress anomaly, a --get it refused), or
 * CHAN_RESIZE (its terminal's new window).
 */
static void on_chan(struct rvm *R)
{
	uint8_t buf[512];
	ssize_t n = run_chan_recv(R->chan, buf, sizeof(buf) - 1);

	if (!n)
		return;
	if (n == sizeof(struct chan_hdr) + 4 && buf[0] == CHAN_RESIZE) {
		uint16_t rows, cols;

		memcpy(&rows, buf + sizeof(struct chan_hdr), 2);
		memcpy(&cols, buf + sizeof(struct chan_hdr) + 2, 2);
		session_resize(&R->sess, rows, cols, now_us());
		return;
	}
	if (n < 0 || buf[0] != CHAN_STOP) {
		/* The supervisor died or spoke nonsense: nobody is left to report to. */
		vm_stop(R->vm, VM_STOP_HOST_ERROR, 0, "lost the supervisor");
		R->chan = -1;
		return;
	}
	buf[n] = '\0';
	fail(R, "%s", (char *)buf + sizeof(struct chan_hdr));
}

/* ---- control channel ---- */

static int listen_ctl(struct rvm *R)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };

	snprintf(a.sun_path, sizeof(a.sun_path), VSOCK_NAME "_%u", PROTO_VSOCK_PORT);
	R->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (R->lfd < 0 || bind(R->lfd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    listen(R->lfd, 1) < 0)
		return husk_seterr(errno, "cannot listen on %s/%s: %s", R->a->root, a.sun_path,
				   strerror(errno));
	return 0;
}

/* The jailed uid's vsock device connects to the control socket. */
static int hand_ctl_to_jail(struct rvm *R)
{
	char path[64];

	snprintf(path, sizeof(path), VSOCK_NAME "_%u", PROTO_VSOCK_PORT);
	if (chown(path, R->uid, R->gid) < 0 || chmod(path, 0600) < 0)
		return husk_seterr(errno, "cannot hand %s to the jail: %s", path,
				   strerror(errno));
	return 0;
}

/*
 * template create: guest-init waits for a job; save the VM as it is. The
 * supervisor completes the template from what lands in the two files.
 */
static void save_template(struct rvm *R)
{
	struct snap_writer w;
	unsigned n = 0;
	int err;

	vm_stop(R->vm, VM_STOP_SAVED, 0, "saved as a template");
	vm_join(R->vm);
	snap_writer_init(&w);
	err = vm_snapshot(R->vm, &w, R->a->snap_mem_fd, &R->r->mem_data, R->r->devices, &n);
	if (!err)
		err = snap_finish(&w);
	if (!err) {
		err = write_all_at(R->a->snap_state_fd, w.data, w.len, 0);
		if (err)
			husk_seterr(err, "cannot write the template's state: %s", strerror(-err));
	}
	snap_writer_free(&w);
	if (err) {
		fail(R, "cannot save the VM: %s", husk_lasterr());
		return;
	}
	R->r->nr_devices = n;
	R->r->saved = 1;
}

/* ---- husk serve's end of a session (run_vm_args.xfd) ---- */

/*
 * Frames on the session socket are the guest protocol's session frames,
 * one per SOCK_SEQPACKET message: husk serve sends requests (P_EXEC ...
 * P_END), this process checks each through the session and answers with
 * what the guest reports (P_XSTARTED ... P_XERROR), plus P_STARTED when the
 * session is ready. husk serve is trusted no more than the guest: a
 * malformed message ends the session.
 */
#define XFD_MAX (PROTO_HDR_LEN + PROTO_ID_LEN + 1 + 64 * 1024)

/* A frame for husk serve; if its socket is full it waits, and guest frames with it. */
static void xsend(struct rvm *R, uint16_t type, bool with_id, uint32_t id, uint8_t lead,
		  bool with_lead, const void *p, size_t n)
{
	size_t head = PROTO_HDR_LEN + (with_id ? PROTO_ID_LEN : 0) + (with_lead ? 1 : 0);
	uint8_t *b;
	ssize_t w;

	if (R->xfd < 0)
		return;
	if (R->xpend || head + n > XFD_MAX) {
		fail(R, "internal: a session frame could not be queued");
		return;
	}
	b = malloc(head + n);
	if (!b) {
		fail(R, "out of memory");
		return;
	}
	proto_hdr_encode(b, type, (uint32_t)(head - PROTO_HDR_LEN + n));
	if (with_id)
		le32_put(b + PROTO_HDR_LEN, id);
	if (with_lead)
		b[head - 1] = lead;
	if (n)
		memcpy(b + head, p, n);
	w = send(R->xfd, b, head + n, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (w == (ssize_t)(head + n)) {
		free(b);
		return;
	}
	if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS)) {
		R->xpend = b;
		R->xpend_len = head + n;
		return;
	}
	free(b);
	fail(R, "husk serve's end of the session is gone");
}

static void xflush(struct rvm *R)
{
	ssize_t w;

	if (!R->xpend)
		return;
	w = send(R->xfd, R->xpend, R->xpend_len, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS))
		return;
	free(R->xpend);
	R->xpend = NULL;
	if (w < 0)
		fail(R, "husk serve's end of the session is gone");
}

static void op_xevent(void *arg, const struct session_xevent *ev)
{
	struct rvm *R = arg;
	struct tlv_buf b;

	switch (ev->kind) {
	case SX_STARTED:
		xsend(R, P_XSTARTED, true, ev->id, 0, false, NULL, 0);
		break;
	case SX_OUT:
		xsend(R, P_XOUT, true, ev->id, (uint8_t)ev->stream, true, ev->data, ev->len);
		break;
	case SX_EXIT:
		/* Re-encoded from what the session checked, not the guest's bytes. */
		tlv_init(&b);
		if (ev->exit.exited)
			tlv_put_u32(&b, T_EXIT_CODE, ev->exit.code);
		else
			tlv_put_u32(&b, T_EXIT_SIGNAL, ev->exit.signal);
		tlv_put_u8(&b, T_EXIT_TIMED_OUT, ev->exit.timed_out);
		tlv_put_u64(&b, T_EXIT_USER_US, ev->exit.user_us);
		tlv_put_u64(&b, T_EXIT_SYS_US, ev->exit.sys_us);
		tlv_put_u64(&b, T_EXIT_MAXRSS_KIB, ev->exit.maxrss_kib);
		xsend(R, P_XEXIT, true, ev->id, 0, false, b.data, b.len);
		tlv_free(&b);
		break;
	case SX_FILES:
		xsend(R, P_XFILES, true, ev->id, 0, false, ev->data, ev->len);
		break;
	case SX_DONE:
		xsend(R, P_XDONE, true, ev->id, 0, false, NULL, 0);
		break;
	case SX_ERROR:
		xsend(R, P_XERROR, true, ev->id, 0, false, ev->data, ev->len);
		break;
	}
}

/* An exec spec from husk serve, parsed with the guest's rules, then sent on. */
static int x_exec(struct rvm *R, uint32_t id, const uint8_t *p, size_t len)
{
	char *argv[PROTO_MAX_ARGS], *env[PROTO_MAX_ENV], *cwd = NULL;
	struct exec_opts x = { .argv = argv, .env = (const char *const *)env };
	struct tlv_iter it;
	struct tlv t;
	uint8_t u8;
	unsigned i;
	int n, err = 0;

	tlv_iter_init(&it, p, len);
	while (!err && (n = tlv_next(&it, &t)) == 1) {
		switch (t.tag) {
		case T_JOB_ARG:
			err = x.argc < PROTO_MAX_ARGS ? tlv_str(&t, &argv[x.argc]) : -E2BIG;
			if (!err)
				x.argc++;
			break;
		case T_JOB_ENV:
			err = x.nr_env < PROTO_MAX_ENV ? tlv_str(&t, &env[x.nr_env]) : -E2BIG;
			if (!err)
				x.nr_env++;
			break;
		case T_JOB_CWD:
			free(cwd);
			cwd = NULL;
			err = tlv_str(&t, &cwd);
			x.cwd = cwd;
			break;
		case T_JOB_STDIN:
			err = tlv_u8(&t, &u8);
			x.stdin = u8;
			break;
		case T_JOB_TIMEOUT_MS:
			err = tlv_u64(&t, &x.timeout_ms);
			break;
		default:
			err = -EINVAL;
		}
	}
	if (!err && n < 0)
		err = n;
	if (err)
		husk_seterr(err, "exec: a malformed command");
	else
		err = session_exec(&R->sess, id, &x, now_us());
	for (i = 0; i < x.argc; i++)
		free(argv[i]);
	for (i = 0; i < x.nr_env; i++)
		free(env[i]);
	free(cwd);
	return err;
}

/* One request from husk serve. */
static void on_xfd(struct rvm *R)
{
	static uint8_t buf[XFD_MAX + 1];
	struct proto_hdr h;
	const uint8_t *p;
	uint64_t now = now_us();
	uint32_t id = 0;
	ssize_t n;
	char path[4097];
	int err;

	n = recv(R->xfd, buf, sizeof(buf), MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		fail(R, "husk serve closed the session");
		R->xfd = -1;
		return;
	}
	if (n < PROTO_HDR_LEN || n > XFD_MAX || proto_hdr_decode(buf, &h) ||
	    h.len != (size_t)n - PROTO_HDR_LEN ||
	    (h.type != P_END && h.len < PROTO_ID_LEN)) {
		fail(R, "husk serve sent a malformed session frame");
		return;
	}
	p = buf + PROTO_HDR_LEN + PROTO_ID_LEN;
	if (h.type != P_END)
		id = le32_get(buf + PROTO_HDR_LEN);
	n = h.type == P_END ? 0 : (ssize_t)h.len - PROTO_ID_LEN;
	switch (h.type) {
	case P_EXEC:
		err = x_exec(R, id, p, n);
		break;
	case P_XSTDIN:
		err = session_xstdin(&R->sess, id, p, n, now);
		break;
	case P_XSIGNAL:
		err = n == 4 ? session_signal(&R->sess, id, le32_get(p), now) :
		      husk_seterr(EINVAL, "signal: malformed");
		break;
	case P_PUT:
		err = session_put(&R->sess, id, p, n, now);
		break;
	case P_GET:
		if (n <= 0 || n >= (ssize_t)sizeof(path) || memchr(p, 0, n)) {
			err = husk_seterr(EINVAL, "get: a malformed path");
			break;
		}
		memcpy(path, p, n);
		path[n] = '\0';
		err = session_get(&R->sess, id, path, now);
		break;
	case P_END:
		if (session_end(&R->sess, now))
			fail(R, "the session was ended before it was ready");
		return;
	default:
		fail(R, "husk serve sent an unexpected frame (type %u)", h.type);
		return;
	}
	if (err)
		xsend(R, P_XERROR, true, id, 0, false, husk_lasterr(), strlen(husk_lasterr()));
}

/* ---- what the session asks of this process (session_ops) ---- */

static void op_output(void *arg, int stream, const uint8_t *p, size_t n)
{
	write_best_effort(stream == 1 ? STDOUT_FILENO : STDERR_FILENO, p, n);
}

/* The chunk waits in the pending slot; no more guest frames are read meanwhile. */
static void op_get_data(void *arg, unsigned idx, uint8_t **pp, size_t n)
{
	struct rvm *R = arg;

	R->up.idx = idx;
	if (n) {
		R->up.buf = *pp;
		R->up.off = 0;
		R->up.len = n;
		*pp = NULL;
	} else {
		R->up.end = true;
	}
	if (chan_pump(R))
		fail(R, "%s", husk_lasterr());
}

/* The --put streams lie back to back in put_fd; their lengths are shared. */
static ssize_t op_put_read(void *arg, unsigned idx, void *buf, size_t cap)
{
	struct rvm *R = arg;
	size_t n;
	int err;

	if (idx >= RUN_MAX_PUTS)
		return -EINVAL;
	if (idx != R->put_cur || !R->put_left) {
		if (idx != R->put_cur) {
			R->put_cur = idx;
			R->put_left = R->a->sh->put_len[idx];
		}
	}
	n = R->put_left < cap ? R->put_left : cap;
	if (!n)
		return 0;
	err = read_exact_at(R->a->put_fd, buf, n, R->put_off);
	if (err)
		return husk_seterr(err, "cannot read the staged --put files");
	R->put_off += n;
	R->put_left -= n;
	return n;
}

static void op_started(void *arg)
{
	struct rvm *R = arg;

	/* husk serve may send requests from now on. */
	xsend(R, P_STARTED, false, 0, 0, false, NULL, 0);

	/* Boot and job set-up are over: the job gets its own CPU quota now. */
	if (chan_try(R, CHAN_READY, 0, NULL, 0) < 0)
		fail(R, "%s", husk_lasterr());
}

static enum session_hello op_hello(void *arg)
{
	struct rvm *R = arg;

	if (R->a->snapshot) {
		save_template(R);
		return SH_END;
	}
	/* --hold-fd: the VM is up, the job goes when a byte arrives there. */
	return R->a->hold_fd >= 0 ? SH_WAIT : SH_GO;
}

static void op_stop(void *arg, enum session_stop why, const char *msg)
{
	struct rvm *R = arg;

	switch (why) {
	case SESSION_TIMEOUT:
		vm_stop(R->vm, VM_STOP_TIMEOUT, 0, "%s", msg);
		break;
	case SESSION_NO_POWEROFF:
		vm_stop(R->vm, VM_STOP_POWEROFF, 0, "%s", msg);
		break;
	default:
		fail(R, "%s", msg);
	}
}

/* ---- the event loop ---- */

/*
 * At most FRAMES_PER_WAKEUP frames or BYTES_PER_WAKEUP bytes, and nothing
 * while --get data waits for the supervisor: the caller's stop checks run
 * between calls whatever the guest sends.
 */
static void on_ctl_readable(struct rvm *R)
{
	struct proto_hdr h;
	uint8_t *p;
	unsigned frames = 0;
	size_t bytes = 0, before;
	int n = 0;

	while (R->cfd >= 0 && !busy(R) && frames < FRAMES_PER_WAKEUP &&
	       bytes < BYTES_PER_WAKEUP) {
		before = R->rd.hdr_got + R->rd.got;
		n = proto_reader_read(&R->rd, R->cfd, &h, &p);
		if (n != 1 && R->rd.hdr_got + R->rd.got != before)
			session_rx(&R->sess, true, now_us());
		if (n != 1)
			break;
		frames++;
		bytes += PROTO_HDR_LEN + h.len;
		n = session_frame(&R->sess, &h, &p, now_us());
		free(p);
		if (n < 0)
			return;
		if (n == 1) {		/* conversation over */
			close(R->cfd);
			R->cfd = -1;
			return;
		}
	}
	if (n == -EPIPE || n == -EPROTO) {
		close(R->cfd);
		R->cfd = -1;
		session_closed(&R->sess, n);
	}
}

static void on_accept(struct rvm *R)
{
	int fd = accept4(R->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

	if (fd < 0)
		return;
	close(R->lfd);
	R->lfd = -1;
	R->cfd = fd;
	session_connected(&R->sess, now_us());
	R->r->t_init = R->vm->t.event[HUSK_EV_INIT] ?
		(int64_t)(R->vm->t.event[HUSK_EV_INIT] - R->vm->t.start) :
		(int64_t)(now_us() - R->vm->t.start);
}

/* One chunk of husk's stdin into the queue; read only while the queue is short. */
static void on_stdin(struct rvm *R)
{
	uint8_t buf[CHUNK];
	ssize_t n = read(R->in_fd, buf, sizeof(buf));

	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0)
		R->in_fd = -1;
	session_stdin(&R->sess, buf, n > 0 ? (size_t)n : 0, now_us());
}

/* Write what guest-init takes now; then top up the --put data. */
static void flush_ctl(struct rvm *R)
{
	struct proto_outq *q = session_outq(&R->sess);
	ssize_t n;

	if (R->cfd < 0)
		return;
	session_pump(&R->sess, now_us());
	if (!proto_outq_len(q))
		return;
	n = proto_outq_flush(q, R->cfd);
	session_wrote(&R->sess, n, now_us());
	session_pump(&R->sess, now_us());
}

/* --hold-fd readable: a byte starts the held job; EOF means it never will. */
static void on_hold(struct rvm *R)
{
	struct session *s = &R->sess;
	uint64_t now = now_us();
	char c;
	ssize_t n = read(R->a->hold_fd, &c, 1);

	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n != 1) {
		fail(R, "the job was never started (--hold-fd %s)", n ? strerror(errno) : "closed");
		return;
	}
	/* --timeout and the set-up allowance count from the start, not the boot. */
	s->tm.deadline = now + s->tm.allowance_s * 1000000ull + R->o->job.timeout_sec * 1000000ull;
	session_release(s, now);
}

static void event_loop(struct rvm *R)
{
	/* The session's next deadline: the loop sleeps until then, or an event. */
	uint64_t due = now_us();

	for (;;) {
		struct proto_outq *q = session_outq(&R->sess);
		bool want_in = R->in_fd >= 0 && R->cfd >= 0 && session_wants_stdin(&R->sess);
		short ctl_ev = (busy(R) ? 0 : POLLIN) | (proto_outq_len(q) ? POLLOUT : 0);
		/* Requests only once the session runs, and while the guest's queue is short. */
		bool want_x = session_ready(&R->sess) && proto_outq_len(q) < SESSION_OUTQ_LOW;
		struct pollfd p[9] = {
			{ .fd = R->vm->stop_fd, .events = POLLIN },
			{ .fd = R->sfd, .events = POLLIN },
			{ .fd = R->lfd, .events = POLLIN },
			{ .fd = R->cfd, .events = ctl_ev },
			{ .fd = want_in ? R->in_fd : -1, .events = POLLIN },
			{ .fd = R->chan, .events = POLLIN | (chan_busy(R) ? POLLOUT : 0) },
			{ .fd = R->xfd, .events = (want_x ? POLLIN : 0) | (R->xpend ? POLLOUT : 0) },
			{ .fd = session_waiting(&R->sess) ? R->a->hold_fd : -1, .events = POLLIN },
			{ .fd = R->vm->console_kick, .events = POLLIN },
		};
		int r = poll(p, 9, console_wait_ms(&R->vm->console, ms_until(due, now_us()))), i;

		if (r < 0 && errno != EINTR) {
			fail(R, "poll: %s", strerror(errno));
			break;
		}
		console_flush(&R->vm->console);
		if (p[0].revents & POLLIN) {
			/* Take what the guest sent before it stopped, within bounds. */
			for (i = 0; i < 8 && R->cfd >= 0 && !busy(R); i++)
				on_ctl_readable(R);
			break;
		}
		if (p[1].revents & POLLIN) {
			struct signalfd_siginfo si;

			if (read(R->sfd, &si, sizeof(si)) == sizeof(si)) {
				R->r->signal = si.ssi_signo;
				vm_stop(R->vm, VM_STOP_SIGNAL, 0, "stopped by signal %d (%s)",
					(int)si.ssi_signo, strsignal(si.ssi_signo));
			}
			continue;
		}
		if (p[2].revents & POLLIN)
			on_accept(R);
		if (p[5].revents & (POLLIN | POLLHUP | POLLERR))
			on_chan(R);
		if (R->chan >= 0 && chan_busy(R) && (p[5].revents & POLLOUT) && chan_pump(R))
			fail(R, "%s", husk_lasterr());
		if (p[3].revents & (POLLIN | POLLHUP | POLLERR))
			on_ctl_readable(R);
		if (p[4].revents & (POLLIN | POLLHUP | POLLERR))
			on_stdin(R);
		if (p[6].revents & POLLOUT)
			xflush(R);
		if (p[6].revents & (POLLIN | POLLHUP | POLLERR))
			on_xfd(R);
		if (p[7].revents & (POLLIN | POLLHUP | POLLERR))
			on_hold(R);
		if (p[8].revents & POLLIN)
			drain_eventfd(R->vm->console_kick);
		flush_ctl(R);
		due = session_tick(&R->sess, now_us());
	}
}

/*
 * pivot_root into the runtime directory, the run's own uid, no
 * capabilities, no_new_privs, rlimits. Threads come after: the mount
 * namespace, capabilities and no_new_privs are per thread.
 */
static int enter_jail(struct rvm *R)
{
	const struct run_vm_args *a = R->a;
	struct jail_cfg c = {
		.root = a->root,
		.uid = R->uid,
		.gid = R->gid,
		.nofile = 1024,			/* vsock connections, eventfds, KVM fds */
		/* The console log is capped at 64 MiB; a template's image is RAM's size. */
		.fsize = a->snapshot ? (R->o->mem_mib << 20) + (64ull << 20) : 256ull << 20,
		.nproc = R->o->vcpus + 8,	/* main, device loop, vCPUs, slack */
	};
	int err;

	if (!R->jail) {
		/* Not privileged: jail_enter applies what it can and says what not. */
		c.uid = c.gid = 0;
	}
	err = jail_enter(&c);
	if (err < 0)
		return err;
	R->r->jailed = err == 0;
	return 0;
}

/*
 * The VM exists: the supervisor may now move this process into the VM's
 * cgroup (vm_config.made says why not before). Sent at most once, before
 * anything else on the channel; a supervisor that is gone finds out itself.
 */
static void vm_made(void *arg)
{
	struct rvm *R = arg;
	struct chan_hdr h = { .type = CHAN_MADE };

	send(R->chan, &h, sizeof(h), MSG_NOSIGNAL);
}

/*
 * Wait for the supervisor's go: it has put this process in its cgroup and
 * says which identity the jail takes.
 */
static int wait_go(struct rvm *R)
{
	struct chan_go go;
	ssize_t n;

	do
		n = recv(R->chan, &go, sizeof(go), 0);
	while (n < 0 && errno == EINTR);
	if (n != sizeof(go) || go.h.type != CHAN_GO)
		return husk_seterr(EPIPE, "the supervisor did not start the VM");
	R->jail = go.jail != 0;
	R->uid = go.uid;
	R->gid = go.gid;
	return R->jail ? hand_ctl_to_jail(R) : 0;
}

/*
 * The state file the supervisor checked (and whose seal it verified),
 * parsed again here: it is small, and this process trusts no parse but its
 * own.
 */
static int load_template(struct rvm *R)
{
	struct stat st;
	int err;

	if (fstat(R->a->tpl_state_fd, &st) < 0 || st.st_size < SNAP_HEADER_LEN ||
	    st.st_size > SNAP_MAX_LEN)
		return husk_seterr(EINVAL, "the template's state did not arrive");
	R->tpl_len = st.st_size;
	R->tpl = malloc(R->tpl_len);
	if (!R->tpl)
		return husk_seterr(ENOMEM, "out of memory for the template's state");
	err = read_exact_at(R->a->tpl_state_fd, R->tpl, R->tpl_len, 0);
	if (err)
		return husk_seterr(err, "cannot read the template's state: %s", strerror(-err));
	R->snap = malloc(sizeof(*R->snap));
	if (!R->snap)
		return husk_seterr(ENOMEM, "out of memory for the template's state");
	err = snap_parse(R->tpl, R->tpl_len, R->snap);
	if (!err)
		err = template_meta_read(R->snap, &R->meta);
	if (err)
		return err;
	R->restore.snap = R->snap;
	R->restore.meta = &R->meta;
	return 0;
}

/*
 * The template's state onto the machine vm_create built for it. Called
 * once the process is jailed (its own uid, no capabilities, "/" the
 * runtime directory): every section, the vCPUs' registers, the devices'
 * queues and the rings in guest RAM they lead to, is input this process
 * did not produce, and a flaw in reading it finds no more than the jail.
 */
static int restore(struct rvm *R)
{
	int err = load_template(R);

	if (!err)
		err = vm_restore_state(R->vm, &R->restore);
	if (err)
		return err;
	phase_mark(PH_RESTORE);
	R->r->t_restored = (int64_t)(now_us() - R->vm->t.start);
	return 0;
}

/*
 * A root image that is a cpio archive (newc: "070701", or "070702" with
 * checksums) goes into guest RAM as the initramfs, and guest-init makes it
 * read-only; anything else is the read-only disk. A small root in RAM
 * spares every job the disk's probe and the file system's mount, and its
 * reads of the disk after (docs/architecture.md, "The cold path"). fd: the
 * image as the supervisor checked it, or -1 to open path.
 */
static bool root_is_cpio(const char *path, int fd)
{
	struct stat st;
	char magic[6];
	bool cpio, given = fd >= 0;

	/* O_NONBLOCK: a FIFO named as the root must not hang us here. */
	if (!given)
		fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return false;	/* the disk's open says why */
	cpio = !fstat(fd, &st) && S_ISREG(st.st_mode) &&
	       read_exact_at(fd, magic, sizeof(magic), 0) == 0 &&
	       (!memcmp(magic, "070701", 6) || !memcmp(magic, "070702", 6));
	if (!given)
		close(fd);
	return cpio;
}

static int setup(struct rvm *R)
{
	const struct run_vm_args *a = R->a;
	const struct run_opts *o = R->o;
	struct session_timing *tm = &R->sess.tm;
	struct vm_config cfg;
	int err;

	if (chdir(a->root) < 0)
		return husk_seterr(errno, "cannot enter %s: %s", a->root, strerror(errno));
	err = listen_ctl(R);
	if (err)
		return err;
	R->sfd = stop_signalfd();

	memset(&cfg, 0, sizeof(cfg));
	if (a->tpl_state_fd >= 0) {
		/* The machine and its RAM now; the template's state once jailed (restore). */
		R->restore.mem_fd = a->tpl_mem_fd;
		cfg.restore = &R->restore;
	}
	cfg.net_tap_fd = a->tap_fd;
	memcpy(cfg.net_mac, a->mac, sizeof(cfg.net_mac));
	cfg.kernel_path = a->kernel;
	cfg.kernel_fd = a->kernel_fd;
	if (root_is_cpio(a->rootfs, a->rootfs_fd)) {
		cfg.initrd_path = a->rootfs;
		cfg.initrd_fd = a->rootfs_fd;
		cfg.cmdline = o->image_init ? RUN_CMDLINE_IMAGE_RAM : RUN_CMDLINE_RAM;
	} else {
		cfg.rootfs_path = a->rootfs;
		cfg.rootfs_fd = a->rootfs_fd;
		cfg.cmdline = o->image_init ? RUN_CMDLINE_IMAGE : RUN_CMDLINE;
	}
	cfg.vsock_uds = VSOCK_NAME;
	cfg.guest_cid = RUN_GUEST_CID;
	cfg.mem_bytes = o->mem_mib << 20;
	cfg.nr_vcpus = o->vcpus;
	cfg.console_fd = a->console_fd;
	cfg.seccomp = !o->no_jail;
	cfg.no_hugepages = o->no_hugepages;
	cfg.made = vm_made;
	cfg.made_arg = R;
	err = vm_create(R->vm, &cfg, a->start);
	if (err)
		return err;
	/*
	 * The VM is built while the supervisor puts this process in its
	 * cgroup (from vm_made on): what was charged so far is husk's own and
	 * bounded (KVM's structures, the kernel image and boot tables in guest
	 * RAM, at most KERNEL_MAX_FILE + INITRD_MAX_FILE); the rest of guest
	 * RAM is charged when the guest touches it, which it cannot before the
	 * go.
	 */
	err = wait_go(R);
	if (err)
		return err;
	/* Everything is open: lock the process in before the guest runs. */
	if (!o->no_jail) {
		err = enter_jail(R);
		if (err)
			return err;
		phase_mark(PH_JAIL);
	}
	if (cfg.restore) {
		err = restore(R);
		if (err)
			return err;
	}
	err = vm_start(R->vm);
	if (!err && !o->no_jail) {
		err = seccomp_install(a->snapshot ? SECCOMP_KIND_TEMPLATE_MAIN :
				      SECCOMP_KIND_RUN_VM_MAIN);
		if (!err)
			phase_mark(PH_SECCOMP);
	}
	if (err)
		return err;
	if (R->vm->kvm.pvm)
		husk_msg("warning: this host's KVM is PVM: guest kernel code is emulated and "
			 "booting takes minutes; use hardware KVM for real work");
	tm->allowance_s = (R->vm->kvm.pvm ? PVM_BOOT_ALLOWANCE_US : BOOT_ALLOWANCE_US) / 1000000;
	tm->connect_by = a->start + tm->allowance_s * 1000000ull;
	tm->deadline = tm->connect_by + o->job.timeout_sec * 1000000u;
	tm->stall_us = R->vm->kvm.pvm ? PVM_STALL_US : STALL_US;
	tm->write_stall_us = R->vm->kvm.pvm ? PVM_STALL_US : WRITE_STALL_US;
	tm->done_grace_us = DONE_GRACE_US;
	return 0;
}

/*
 * The job's cgroup in the guest gets the guest's RAM minus what the kernel
 * and guest-init keep (docs/protocol.md has the figures): 16 MiB for the
 * kernel image, guest-init and its buffers, RAM/16 for the memory map and
 * kernel allocations that grow with RAM.
 */
static uint64_t job_mem_limit(uint64_t mem)
{
	uint64_t reserve = (16ull << 20) + mem / 16;

	if (reserve >= mem)	/* below 18 MiB, which --mem refuses */
		reserve = mem / 2;
	return mem - reserve;
}

static void start_session(struct rvm *R)
{
	static const struct session_timing none;
	const struct netpool_lease *l = R->a->lease;
	struct session_net net = { 0 };
	struct session_ops ops = {
		.arg = R, .output = op_output, .get_data = op_get_data,
		.put_read = op_put_read, .started = op_started, .hello = op_hello,
		.xevent = op_xevent, .stop = op_stop,
	};

	if (l) {
		/* Addresses in network order, as the in_addr holds them. */
		net.addr = l->guest.s_addr;
		net.gw = l->host.s_addr;
		net.prefix = l->prefixlen;
		memcpy(net.mac, R->a->mac, 6);
	}
	session_init(&R->sess, &R->o->job, l ? &net : NULL,
		     job_mem_limit(R->o->mem_mib << 20), &none, &ops);
	R->put_cur = UINT_MAX;
}

/* How the conversation went, into the shared report. */
static void report_session(struct rvm *R)
{
	const struct session_result *s = &R->sess.r;
	struct run_vm_report *r = R->r;
	int64_t base = (int64_t)R->a->start;
	unsigned i;

	r->job_started = s->job_started;
	r->job_exited = s->job_exited;
	/* A session that ended as asked (END, then DONE) is a job that exited 0. */
	if (R->o->job.session && s->t_done)
		r->job_exited = true;
	r->timed_out = s->exit.timed_out;
	if (s->job_exited) {
		r->job_code = s->exit.exited ? s->exit.code : 0;
		r->job_signal = s->exit.exited ? 0 : s->exit.signal;
	}
	r->user_us = s->exit.user_us;
	r->sys_us = s->exit.sys_us;
	r->maxrss_kib = s->exit.maxrss_kib;
	r->stdout_bytes = s->stdout_bytes;
	r->stderr_bytes = s->stderr_bytes;
	r->stdout_dropped = s->stdout_dropped;
	r->stderr_dropped = s->stderr_dropped;
	r->stdout_open_line = s->stdout_open_line;
	if (s->t_started)
		r->t_job_start = (int64_t)s->t_started - base;
	if (s->t_exited)
		r->t_job_end = (int64_t)s->t_exited - base;
	for (i = 0; i < IS_NR; i++)
		r->guest_steps[i] = s->guest_steps[i];
	if (!r->error[0] && s->error[0])
		snprintf(r->error, sizeof(r->error), "%s", s->error);
}

int run_vm_main(const struct run_vm_args *a)
{
	struct run_vm_report *r = &a->sh->vm;
	struct rvm R;

	memset(&R, 0, sizeof(R));
	R.a = a;
	R.o = a->o;
	R.r = r;
	R.lfd = R.cfd = R.sfd = -1;
	R.xfd = a->xfd;
	R.chan = a->chan_fd;
	R.in_fd = a->o->job.stdin ? STDIN_FILENO : -1;
	proto_reader_init(&R.rd);
	start_session(&R);
	seccomp_set_report(a->sh->seccomp_report, sizeof(a->sh->seccomp_report));
	R.vm = calloc(1, sizeof(*R.vm));
	if (!R.vm) {
		snprintf(r->error, sizeof(r->error), "out of memory");
		return 1;
	}
	if (setup(&R)) {
		snprintf(r->error, sizeof(r->error), "%s", husk_lasterr());
		vm_stop(R.vm, VM_STOP_HOST_ERROR, 0, "%s", r->error);
	} else {
		event_loop(&R);
	}
	/* What the guest printed last says why it died, or why the host gave up on it. */
	if (R.vm->reason == VM_STOP_PANIC || R.vm->reason == VM_STOP_CRASH ||
	    R.vm->reason == VM_STOP_HOST_ERROR) {
		console_flush(&R.vm->console);
		console_tail(&R.vm->console, r->console_tail, sizeof(r->console_tail));
	}
	vm_destroy(R.vm);
	report_session(&R);
	r->reason = R.vm->reason;
	if (R.vm->t.first_run)
		r->t_first_run = R.vm->t.first_run - a->start;
	if (R.vm->t.exit)
		r->t_exit = R.vm->t.exit - a->start;
	if (r->t_init < 0 && R.vm->t.event[HUSK_EV_INIT])
		r->t_init = R.vm->t.event[HUSK_EV_INIT] - a->start;
	if (!r->error[0] && !r->job_exited && R.vm->reason != VM_STOP_SIGNAL &&
	    R.vm->reason != VM_STOP_TIMEOUT && !r->saved)
		snprintf(r->error, sizeof(r->error), "the VM stopped before the job finished: %s",
			 R.vm->detail);
	if (R.vm->reason == VM_STOP_TIMEOUT && !r->job_exited)
		r->timed_out = true;
	/* The job ended but its results did not all arrive. */
	if (!r->error[0] && r->job_exited && !R.sess.r.t_done)
		snprintf(r->error, sizeof(r->error), "the VM stopped before guest-init sent all "
			 "of the job's results: %s", R.vm->detail);
	proto_reader_free(&R.rd);
	session_free(&R.sess);
	free(R.xpend);
	free(R.up.buf);
	free(R.snap);
	free(R.tpl);
	free(R.vm);
	return 0;
}
