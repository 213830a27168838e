/*
 * run_vm: the VM process of `husk run` (see run_int.h for the split).
 *
 * It opens what the VM needs while it still can, enters the jail, starts
 * the vCPUs and then runs the job's event loop on its main thread: accept
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

#include "jail.h"
#include "proto.h"
#include "run_int.h"
#include "seccomp.h"
#include "template.h"
#include "util.h"
#include "vm_snapshot.h"

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
#define OUTQ_LOW (256 * 1024)		/* read --put data and stdin only below this */
#define FRAMES_PER_WAKEUP 16
#define BYTES_PER_WAKEUP (1u << 20)
#define VSOCK_NAME "vsock"		/* relative: valid before and after pivot_root */

enum run_state { S_CONNECT, S_HELLO, S_RUNNING, S_FILES_OUT, S_DONE };

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
	struct proto_reader rd;
	struct proto_outq q;		/* frames for guest-init */
	struct chan_out up;
	enum run_state state;
	unsigned get_idx;
	unsigned put_idx;		/* --put stream being queued */
	uint64_t put_off, put_left;	/* position in put_fd, bytes left of this stream */
	bool put_open;			/* stream put_idx is being queued */
	bool puts_queued;		/* every stream and its end are queued */
	uint64_t deadline, done_at;
	uint64_t connect_by;		/* guest-init must have connected by then */
	uint64_t stall_us, write_stall_us;
	uint64_t last_rx;		/* last byte from guest-init */
	uint64_t last_tx;		/* last byte guest-init took, or when q filled */
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

static int64_t since_start(struct rvm *R)
{
	return (int64_t)(now_us() - R->vm->t.start);
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

/* CHAN_STOP from the supervisor (an egress anomaly, a --get it refused). */
static void on_chan(struct rvm *R)
{
	uint8_t buf[512];
	ssize_t n = run_chan_recv(R->chan, buf, sizeof(buf) - 1);

	if (!n)
		return;
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
	/* The jailed uid's vsock device connects here. */
	if (R->a->jail && (chown(a.sun_path, R->a->uid, R->a->gid) < 0 ||
			   chmod(a.sun_path, 0600) < 0))
		return husk_seterr(errno, "cannot hand %s to the jail: %s", a.sun_path,
				   strerror(errno));
	return 0;
}

/* Queue one frame for guest-init; the event loop writes it when it can. */
static int ctl_send(struct rvm *R, uint16_t type, const void *p, uint32_t len)
{
	if (!proto_outq_len(&R->q))
		R->last_tx = now_us();	/* the write-stall clock starts now */
	return proto_outq_add(&R->q, type, p, len);
}

/*
 * Each --put is its own gzip'd tar stream, ended by an empty chunk; queued
 * a chunk at a time while the queue is short, so a guest that reads slowly
 * holds up only itself.
 */
static int queue_puts(struct rvm *R)
{
	uint8_t buf[CHUNK];
	size_t n;
	int err;

	while (!R->puts_queued && proto_outq_len(&R->q) < OUTQ_LOW) {
		if (R->put_open && !R->put_left) {
			err = ctl_send(R, P_FILES_IN, NULL, 0);	/* end of this stream */
			if (err)
				return err;
			R->put_open = false;
			R->puts_queued = ++R->put_idx == R->o->nr_put;
			continue;
		}
		if (!R->put_open) {
			R->put_left = R->a->sh->put_len[R->put_idx];
			R->put_open = true;
			continue;
		}
		n = R->put_left < sizeof(buf) ? R->put_left : sizeof(buf);
		err = read_exact_at(R->a->put_fd, buf, n, R->put_off);
		if (err)
			return husk_seterr(err, "cannot read the staged --put files");
		err = ctl_send(R, P_FILES_IN, buf, n);
		if (err)
			return err;
		R->put_off += n;
		R->put_left -= n;
	}
	return 0;
}

static int send_job(struct rvm *R)
{
	const struct run_opts *o = R->o;
	const struct netpool_lease *l = R->a->lease;
	uint8_t seed[64];
	uint64_t mem = o->mem_mib << 20, reserve;
	struct tlv_buf b;
	unsigned i;
	int err;

	/*
	 * The job's cgroup gets the guest's RAM minus what the kernel and
	 * guest-init keep (docs/protocol.md has the figures): 16 MiB for the
	 * kernel image, guest-init and its buffers, RAM/16 for the memory map
	 * and kernel allocations that grow with RAM.
	 */
	reserve = (16ull << 20) + mem / 16;
	if (reserve >= mem)	/* below 18 MiB, which --mem refuses */
		reserve = mem / 2;
	tlv_init(&b);
	for (i = 0; i < (unsigned)o->argc; i++)
		tlv_put_str(&b, T_JOB_ARG, o->argv[i]);
	for (i = 0; i < o->nr_env; i++)
		tlv_put_str(&b, T_JOB_ENV, o->env[i]);
	tlv_put_u64(&b, T_JOB_TIMEOUT_MS, o->timeout_sec * 1000);
	tlv_put_u32(&b, T_JOB_WORKSPACE_MIB, o->workspace_mib);
	tlv_put_u64(&b, T_JOB_CLOCK_NS, wall_us() * 1000);
	if (getrandom(seed, sizeof(seed), 0) == sizeof(seed))
		tlv_put(&b, T_JOB_RNG_SEED, seed, sizeof(seed));
	tlv_put_u8(&b, T_JOB_STDIN, o->stdin);
	tlv_put_u8(&b, T_JOB_FILES_IN, o->nr_put);
	tlv_put_u64(&b, T_JOB_MEM_LIMIT, mem - reserve);
	for (i = 0; i < o->nr_get; i++)
		tlv_put_str(&b, T_JOB_GET, o->get[i].guest);
	if (l) {
		/* Addresses in network order, as the in_addr holds them. */
		tlv_put_u32(&b, T_JOB_NET_ADDR, l->guest.s_addr);
		tlv_put_u32(&b, T_JOB_NET_GW, l->host.s_addr);
		tlv_put_u8(&b, T_JOB_NET_PREFIX, l->prefixlen);
		/* A template's clone must not keep the MAC the template booted with. */
		tlv_put(&b, T_JOB_NET_MAC, R->a->mac, 6);
	}
	if (b.failed) {
		tlv_free(&b);
		return husk_seterr(E2BIG, "the job description is too large");
	}
	err = ctl_send(R, P_JOB, b.data, b.len);
	tlv_free(&b);
	R->puts_queued = !o->nr_put;
	return err ? err : queue_puts(R);
}

/*
 * Pass job output through up to --max-output bytes per stream; past that
 * it is counted, not written, and one marker line says so.
 */
static void forward_output(struct rvm *R, bool out, const uint8_t *p, uint32_t len)
{
	struct run_vm_report *r = R->r;
	uint64_t *seen = out ? &r->stdout_bytes : &r->stderr_bytes;
	uint64_t *dropped = out ? &r->stdout_dropped : &r->stderr_dropped;
	int fd = out ? STDOUT_FILENO : STDERR_FILENO;
	uint64_t room = *seen < R->o->max_output ? R->o->max_output - *seen : 0;
	uint32_t n = len < room ? len : (uint32_t)room;

	write_best_effort(fd, p, n);
	if (out && n)
		r->stdout_open_line = p[n - 1] != '\n';
	*seen += len;
	if (n < len) {
		char marker[160];

		if (!*dropped) {
			snprintf(marker, sizeof(marker), "\n[husk: %s exceeded %llu bytes; the rest "
				 "is dropped and counted]\n", out ? "stdout" : "stderr",
				 (unsigned long long)R->o->max_output);
			write_best_effort(fd, marker, strlen(marker));
			if (out)
				r->stdout_open_line = 0;
		}
		*dropped += len - n;
	}
}

static int parse_exit(struct rvm *R, const uint8_t *p, uint32_t len)
{
	struct run_vm_report *r = R->r;
	struct tlv_iter it;
	struct tlv t;
	uint32_t v32;
	uint8_t v8;
	int n;

	tlv_iter_init(&it, p, len);
	while ((n = tlv_next(&it, &t)) == 1) {
		switch (t.tag) {
		case T_EXIT_CODE:
			if (tlv_u32(&t, &v32) || v32 > 255)
				return -EINVAL;
			r->job_code = v32;
			break;
		case T_EXIT_SIGNAL:
			if (tlv_u32(&t, &v32) || v32 == 0 || v32 > 64)
				return -EINVAL;
			r->job_signal = v32;
			break;
		case T_EXIT_TIMED_OUT:
			if (tlv_u8(&t, &v8))
				return -EINVAL;
			r->timed_out = v8;
			break;
		case T_EXIT_USER_US:
			if (tlv_u64(&t, &r->user_us))
				return -EINVAL;
			break;
		case T_EXIT_SYS_US:
			if (tlv_u64(&t, &r->sys_us))
				return -EINVAL;
			break;
		case T_EXIT_MAXRSS_KIB:
			if (tlv_u64(&t, &r->maxrss_kib))
				return -EINVAL;
			break;
		default:
			break;	/* newer guest-init fields are ignored */
		}
	}
	return n;
}

/* The frame's payload moves to the pending slot (*pp is taken). */
static int on_files_out(struct rvm *R, uint8_t **pp, uint32_t len)
{
	if (R->state != S_FILES_OUT || R->get_idx >= R->o->nr_get)
		return fail(R, "guest sent files that were not asked for");
	R->up.idx = R->get_idx;
	if (len) {
		R->up.buf = *pp;
		R->up.off = 0;
		R->up.len = len;
		*pp = NULL;
	} else {
		R->up.end = true;
		if (++R->get_idx == R->o->nr_get)
			R->state = S_DONE;
	}
	if (chan_pump(R))
		return fail(R, "%s", husk_lasterr());
	return 0;
}

/*
 * template create: guest-init waits for a job; save the VM as it is. The
 * supervisor completes the template from what lands in the two files.
 */
static int save_template(struct rvm *R)
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
	if (err)
		return fail(R, "cannot save the VM: %s", husk_lasterr());
	R->r->nr_devices = n;
	R->r->saved = 1;
	return 1;
}

/* Handle one frame: <0 ends the run as a failure, 1 ends the conversation. */
static int on_frame(struct rvm *R, const struct proto_hdr *h, uint8_t **pp)
{
	struct run_vm_report *r = R->r;
	uint8_t *p = *pp;

	switch (h->type) {
	case P_HELLO:
		if (R->state != S_HELLO)
			return fail(R, "guest sent HELLO twice");
		if (R->a->snapshot)
			return save_template(R);
		R->state = S_RUNNING;
		if (send_job(R))
			return fail(R, "cannot send the job: %s", husk_lasterr());
		return 0;
	case P_STARTED:
		if (R->state != S_RUNNING || r->job_started)
			return fail(R, "guest sent STARTED out of order");
		r->job_started = true;
		r->t_job_start = since_start(R);
		/* Boot and job set-up are over: the job gets its own CPU quota now. */
		if (chan_try(R, CHAN_READY, 0, NULL, 0) < 0)
			return fail(R, "%s", husk_lasterr());
		return 0;
	case P_STDOUT:
	case P_STDERR:
		if (R->state != S_RUNNING)
			return fail(R, "guest sent output after the job ended");
		forward_output(R, h->type == P_STDOUT, p, h->len);
		return 0;
	case P_EXIT:
		if (R->state != S_RUNNING || r->job_exited)
			return fail(R, "guest sent EXIT out of order");
		if (parse_exit(R, p, h->len) < 0)
			return fail(R, "guest sent a malformed EXIT record");
		r->job_exited = true;
		r->t_job_end = since_start(R);
		/* Whatever stdin is still queued, the job is past reading it. */
		R->in_fd = -1;
		R->state = R->o->nr_get ? S_FILES_OUT : S_DONE;
		return 0;
	case P_FILES_OUT:
		return on_files_out(R, pp, h->len);
	case P_DONE:
		if (R->state != S_DONE)
			return fail(R, "guest finished before the job's results were complete");
		R->done_at = now_us();
		/* Closing tells guest-init everything arrived: it powers off now. */
		return 1;
	case P_ERROR: {
		char msg[256];
		size_t n = h->len < sizeof(msg) - 1 ? h->len : sizeof(msg) - 1;
		size_t i;

		memcpy(msg, p, n);
		msg[n] = '\0';
		for (i = 0; i < n; i++)
			if ((unsigned char)msg[i] < 0x20)
				msg[i] = ' ';
		fail(R, "guest-init: %s", msg);
		return 1;
	}
	default:
		return fail(R, "guest sent an unexpected frame (type %u)", h->type);
	}
}

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

	while (R->cfd >= 0 && !chan_busy(R) && frames < FRAMES_PER_WAKEUP &&
	       bytes < BYTES_PER_WAKEUP) {
		before = R->rd.hdr_got + R->rd.got;
		n = proto_reader_read(&R->rd, R->cfd, &h, &p);
		if (n == 1 || R->rd.hdr_got + R->rd.got != before)
			R->last_rx = now_us();
		if (n != 1)
			break;
		frames++;
		bytes += PROTO_HDR_LEN + h.len;
		n = on_frame(R, &h, &p);
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
		if (R->state != S_DONE || !R->done_at)
			fail(R, n == -EPIPE ? "guest-init closed the control channel early"
					    : "guest-init sent a malformed frame");
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
	R->state = S_HELLO;
	R->last_rx = now_us();
	R->r->t_init = R->vm->t.event[HUSK_EV_INIT] ?
		(int64_t)(R->vm->t.event[HUSK_EV_INIT] - R->vm->t.start) : since_start(R);
}

/* One chunk of husk's stdin into the queue; read only while the queue is short. */
static void on_stdin(struct rvm *R)
{
	uint8_t buf[CHUNK];
	ssize_t n = read(R->in_fd, buf, sizeof(buf));

	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		R->in_fd = -1;
		if (ctl_send(R, P_STDIN, NULL, 0))
			fail(R, "%s", husk_lasterr());
		return;
	}
	if (ctl_send(R, P_STDIN, buf, n))
		fail(R, "%s", husk_lasterr());
}

/* Write what guest-init takes now; then top up the --put data. */
static void flush_ctl(struct rvm *R)
{
	ssize_t n;

	if (R->cfd < 0)
		return;
	if (R->state == S_RUNNING && !R->puts_queued && queue_puts(R)) {
		fail(R, "%s", husk_lasterr());
		return;
	}
	if (!proto_outq_len(&R->q))
		return;
	n = proto_outq_flush(&R->q, R->cfd);
	if (n > 0)
		R->last_tx = now_us();
	/* A closed peer shows up on the read side too; say it once, there. */
	if (n < 0 && R->state != S_DONE)
		fail(R, "guest-init stopped reading its control channel (%s)", husk_lasterr());
	if (R->state == S_RUNNING && !R->puts_queued && proto_outq_len(&R->q) < OUTQ_LOW &&
	    queue_puts(R))
		fail(R, "%s", husk_lasterr());
}

/* A guest-init that stopped talking where it must not: a VM failure. */
static void check_stall(struct rvm *R, uint64_t now)
{
	bool mid_frame = R->rd.hdr_got || R->rd.payload;

	if (R->state == S_CONNECT) {
		if (now > R->connect_by)
			fail(R, "guest-init did not connect within %llu s of the VM's start",
			     (unsigned long long)((R->connect_by - R->a->start) / 1000000));
		return;
	}
	if (R->cfd >= 0 && !R->r->job_started && proto_outq_len(&R->q) &&
	    now - R->last_tx > R->write_stall_us) {
		fail(R, "guest-init stopped reading its control channel before the job started");
		return;
	}
	if (R->cfd < 0 || now - R->last_rx <= R->stall_us)
		return;
	if (mid_frame)
		fail(R, "guest-init stopped in the middle of a frame");
	else if (!R->r->job_started)
		fail(R, "guest-init stopped responding before the job started");
	else if (R->state == S_FILES_OUT || (R->state == S_DONE && !R->done_at))
		fail(R, "guest-init stopped sending the job's results");
}

/* Past the deadline: a timeout if the job was still running, else a VM failure. */
static void deadline_passed(struct rvm *R)
{
	if (R->r->job_exited)
		fail(R, "guest-init did not finish sending the job's results within --timeout "
		     "plus the %llu s allowance", (unsigned long long)((R->connect_by - R->a->start) /
									1000000));
	else
		vm_stop(R->vm, VM_STOP_TIMEOUT, 0, "the guest did not finish within --timeout "
			"plus the boot allowance");
}

static void event_loop(struct rvm *R)
{
	for (;;) {
		bool want_in = R->in_fd >= 0 && R->cfd >= 0 && R->r->job_started &&
			       R->state == S_RUNNING && proto_outq_len(&R->q) < OUTQ_LOW;
		short ctl_ev = (chan_busy(R) ? 0 : POLLIN) | (proto_outq_len(&R->q) ? POLLOUT : 0);
		struct pollfd p[6] = {
			{ .fd = R->vm->stop_fd, .events = POLLIN },
			{ .fd = R->sfd, .events = POLLIN },
			{ .fd = R->lfd, .events = POLLIN },
			{ .fd = R->cfd, .events = ctl_ev },
			{ .fd = want_in ? R->in_fd : -1, .events = POLLIN },
			{ .fd = R->chan, .events = POLLIN | (chan_busy(R) ? POLLOUT : 0) },
		};
		uint64_t now;
		int r = poll(p, 6, 20), i;

		if (r < 0 && errno != EINTR) {
			fail(R, "poll: %s", strerror(errno));
			break;
		}
		console_flush(&R->vm->console);
		if (p[0].revents & POLLIN) {
			/* Take what the guest sent before it stopped, within bounds. */
			for (i = 0; i < 8 && R->cfd >= 0 && !chan_busy(R); i++)
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
		flush_ctl(R);
		now = now_us();
		check_stall(R, now);
		if (now >= R->deadline)
			deadline_passed(R);
		if (R->done_at && now - R->done_at > DONE_GRACE_US)
			vm_stop(R->vm, VM_STOP_POWEROFF, 0, "guest-init finished but did not "
				"power off; stopped by husk");
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
		.uid = a->uid,
		.gid = a->gid,
		.nofile = 1024,			/* vsock connections, eventfds, KVM fds */
		/* The console log is capped at 64 MiB; a template's image is RAM's size. */
		.fsize = a->snapshot ? (R->o->mem_mib << 20) + (64ull << 20) : 256ull << 20,
		.nproc = R->o->vcpus + 8,	/* main, device loop, vCPUs, slack */
	};
	int err;

	if (!a->jail) {
		/* Not privileged: jail_enter applies what it can and says what not. */
		c.uid = c.gid = 0;
	}
	err = jail_enter(&c);
	if (err < 0)
		return err;
	R->r->jailed = err == 0;
	return 0;
}

/* Wait for the supervisor's go (it has put this process in its cgroup). */
static int wait_go(int chan)
{
	struct chan_hdr h;
	ssize_t n;

	do
		n = recv(chan, &h, sizeof(h), 0);
	while (n < 0 && errno == EINTR);
	if (n != sizeof(h) || h.type != CHAN_GO)
		return husk_seterr(EPIPE, "the supervisor did not start the VM");
	return 0;
}

/* The state file the supervisor checked, parsed again here (it is small). */
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
	R->restore.mem_fd = R->a->tpl_mem_fd;
	return 0;
}

static int setup(struct rvm *R)
{
	const struct run_vm_args *a = R->a;
	const struct run_opts *o = R->o;
	struct vm_config cfg;
	int err;

	err = wait_go(R->chan);
	if (err)
		return err;
	if (chdir(a->root) < 0)
		return husk_seterr(errno, "cannot enter %s: %s", a->root, strerror(errno));
	err = listen_ctl(R);
	if (err)
		return err;
	R->sfd = stop_signalfd();

	memset(&cfg, 0, sizeof(cfg));
	if (a->tpl_state_fd >= 0) {
		err = load_template(R);
		if (err)
			return err;
		cfg.restore = &R->restore;
	}
	cfg.net_tap_fd = a->tap_fd;
	memcpy(cfg.net_mac, a->mac, sizeof(cfg.net_mac));
	cfg.kernel_path = a->kernel;
	cfg.rootfs_path = a->rootfs;
	cfg.rng = true;
	cfg.vsock_uds = VSOCK_NAME;
	cfg.guest_cid = RUN_GUEST_CID;
	cfg.cmdline = RUN_CMDLINE;
	cfg.mem_bytes = o->mem_mib << 20;
	cfg.nr_vcpus = o->vcpus;
	cfg.console_fd = a->console_fd;
	cfg.seccomp = !o->no_jail;
	err = vm_create(R->vm, &cfg, a->start);
	if (err)
		return err;
	if (cfg.restore)
		R->r->t_restored = since_start(R);
	/* Everything is open: lock the process in before the guest runs. */
	if (!o->no_jail) {
		err = enter_jail(R);
		if (err)
			return err;
	}
	err = vm_start(R->vm);
	if (!err && !o->no_jail)
		err = seccomp_install(a->snapshot ? SECCOMP_KIND_TEMPLATE_MAIN :
				      SECCOMP_KIND_RUN_VM_MAIN);
	if (err)
		return err;
	if (R->vm->kvm.pvm)
		husk_msg("warning: this host's KVM is PVM: guest kernel code is emulated and "
			 "booting takes minutes; use hardware KVM for real work");
	R->connect_by = a->start + (R->vm->kvm.pvm ? PVM_BOOT_ALLOWANCE_US : BOOT_ALLOWANCE_US);
	R->deadline = R->connect_by + o->timeout_sec * 1000000u;
	R->stall_us = R->vm->kvm.pvm ? PVM_STALL_US : STALL_US;
	R->write_stall_us = R->vm->kvm.pvm ? PVM_STALL_US : WRITE_STALL_US;
	return 0;
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
	R.chan = a->chan_fd;
	R.in_fd = a->o->stdin ? STDIN_FILENO : -1;
	proto_reader_init(&R.rd);
	proto_outq_init(&R.q);
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
	vm_destroy(R.vm);
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
	if (!r->error[0] && r->job_exited && !R.done_at)
		snprintf(r->error, sizeof(r->error), "the VM stopped before guest-init sent all "
			 "of the job's results: %s", R.vm->detail);
	proto_reader_free(&R.rd);
	proto_outq_free(&R.q);
	free(R.up.buf);
	free(R.snap);
	free(R.tpl);
	free(R.vm);
	return 0;
}
