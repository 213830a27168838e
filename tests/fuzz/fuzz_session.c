/*
 * fuzz_session: libFuzzer target for job/session.c, the host's half of the
 * guest protocol, with the guest's side chosen by the input.
 *
 * Input: byte 0 picks the job (bit 0: a session, else a one-shot job with
 * stdin, two --put streams and two --get paths; bit 1: the host makes some
 * session requests as frames arrive); then frames as a hostile guest-init
 * would send them: each an 8-byte header (its length clipped to what is
 * left) and its payload. Between frames the clock moves by the header's
 * version field in milliseconds and session_tick() runs.
 *
 * Checks: the session never calls an op after it stopped (except the stop
 * itself, once), --get data arrives only for asked streams, output never
 * exceeds max_output plus one marker, no session event names an id the
 * host did not open, and nothing leaks.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "job/session.h"

struct fz {
	struct session s;
	unsigned stops;
	bool stopped;
	uint64_t out_bytes;
	uint32_t opened[16];
	unsigned nr_opened;
};

static void check_live(struct fz *f)
{
	if (f->stopped)
		abort();
}

static void op_output(void *arg, int stream, const uint8_t *p, size_t n)
{
	struct fz *f = arg;

	check_live(f);
	if (stream != 1 && stream != 2)
		abort();
	f->out_bytes += n;
}

static void op_get_data(void *arg, unsigned idx, uint8_t **pp, size_t n)
{
	struct fz *f = arg;

	check_live(f);
	if (idx >= f->s.job->nr_get)
		abort();
	if (n) {
		free(*pp);	/* taken, as a real owner would */
		*pp = NULL;
	}
}

static ssize_t op_put_read(void *arg, unsigned idx, void *buf, size_t cap)
{
	static unsigned calls;

	if (idx >= 2)
		abort();
	/* Each stream: one small chunk, then its end. */
	if (++calls % 2) {
		memset(buf, 'p', cap < 100 ? cap : 100);
		return cap < 100 ? cap : 100;
	}
	return 0;
}

static void op_started(void *arg)
{
	check_live(arg);
}

static enum session_hello op_hello(void *arg)
{
	check_live(arg);
	return SH_GO;
}

static void op_xevent(void *arg, const struct session_xevent *ev)
{
	struct fz *f = arg;
	unsigned i;

	check_live(f);
	for (i = 0; i < f->nr_opened; i++)
		if (f->opened[i] == ev->id)
			return;
	abort();
}

static void op_stop(void *arg, enum session_stop why, const char *msg)
{
	struct fz *f = arg;

	if (f->stops++ || !msg)
		abort();
	f->stopped = true;
}

static void requests(struct fz *f, uint8_t sel, uint64_t now)
{
	static char *argv[] = { "sh", "-c", "true" };
	struct exec_opts x = { .argv = argv, .argc = 3, .stdin = true };
	uint32_t id = 1 + sel % 8;

	if (!session_ready(&f->s) || f->nr_opened >= 16)
		return;
	switch (sel % 5) {
	case 0:
		if (!session_exec(&f->s, id, &x, now))
			f->opened[f->nr_opened++] = id;
		break;
	case 1:
		session_xstdin(&f->s, id, "in", 2, now);
		break;
	case 2:
		if (!session_get(&f->s, id, "out", now))
			f->opened[f->nr_opened++] = id;
		break;
	case 3:
		if (!session_put(&f->s, id, "tar", 3, now))
			f->opened[f->nr_opened++] = id;
		session_put(&f->s, id, NULL, 0, now);
		break;
	default:
		session_signal(&f->s, id, 15, now);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char *argv[] = { "cat" };
	struct job_opts job = { .argv = argv, .argc = 1, .timeout_sec = 5, .max_output = 64,
				.nr_put = 2, .get = { "a", "b/c" }, .nr_get = 2, .stdin = true };
	struct session_timing tm = { .connect_by = 1000000, .deadline = 20000000,
				     .stall_us = 3000000, .write_stall_us = 3000000,
				     .done_grace_us = 1000000, .allowance_s = 1 };
	struct session_ops ops = { .output = op_output, .get_data = op_get_data,
				   .put_read = op_put_read, .started = op_started,
				   .hello = op_hello, .xevent = op_xevent, .stop = op_stop };
	struct fz *f;
	uint64_t now = 1;
	size_t off = 1;
	bool reqs;

	if (!size)
		return 0;
	f = calloc(1, sizeof(*f));
	if (!f)
		return 0;
	if (data[0] & 1) {
		job.session = true;
		job.argc = 0;
		job.nr_get = 0;
		job.stdin = false;
	}
	reqs = data[0] & 2;
	ops.arg = f;
	session_init(&f->s, &job, NULL, 1 << 20, &tm, &ops);
	session_connected(&f->s, now);
	while (off + PROTO_HDR_LEN <= size && !f->stopped) {
		struct proto_hdr h;
		uint8_t *p = NULL;
		size_t len;
		int r;

		h.len = data[off] | data[off + 1] << 8 | (uint32_t)data[off + 2] << 16;
		h.type = data[off + 4] | data[off + 5] << 8;
		now += (data[off + 6] | data[off + 7] << 8) * 1000ull;
		off += PROTO_HDR_LEN;
		len = h.len < size - off ? h.len : size - off;
		h.len = (uint32_t)len;
		if (len) {
			p = malloc(len);
			if (!p)
				break;
			memcpy(p, data + off, len);
		}
		off += len;
		r = session_frame(&f->s, &h, &p, now);
		free(p);
		if (r < 0 && !f->stopped)
			abort();
		if (r)
			break;
		if (job.stdin && session_wants_stdin(&f->s))
			session_stdin(&f->s, "x", 1, now);
		session_pump(&f->s, now);
		if (reqs && !f->stopped)
			requests(f, (uint8_t)h.type ^ (uint8_t)len, now);
		session_tick(&f->s, now);
	}
	if (!job.session && f->out_bytes > 2 * job.max_output + 2 * 160)
		abort();
	session_free(&f->s);
	free(f);
	return 0;
}
