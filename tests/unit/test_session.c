/*
 * Unit tests of job/session.c: the host's half of the guest protocol,
 * spoken to the real guest-init (husk-init --test-fd) over a socketpair,
 * the way husk run's VM process speaks to it over vsock. No VM: a test is a
 * few process forks and finishes in well under a second.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "job/session.h"
#include "job/tar.h"
#include "lib/util.h"
#include "suites.h"

#define DEADLINE_US (20ull * 1000000)

struct buf {
	uint8_t *p;
	size_t n;
};

static void buf_add(struct buf *b, const void *p, size_t n)
{
	b->p = realloc(b->p, b->n + n + 1);
	ck_assert_ptr_nonnull(b->p);
	memcpy(b->p + b->n, p, n);
	b->n += n;
	b->p[b->n] = '\0';
}

/* A conversation: guest-init as a child, the session, what came back. */
struct conv {
	pid_t pid;
	int fd;
	char ws[64];
	struct session s;
	struct job_opts job;
	struct proto_reader rd;
	struct buf out, err, get[2];
	unsigned gets_ended;
	struct buf put;			/* one --put stream, served by put_read */
	size_t put_off;
	bool started, stopped, over;
	enum session_stop why;
	/* session events */
	struct buf xout[8];
	struct session_exit xexit[8];
	bool xstarted[8], xexited[8], xdone[8], xerror[8], xfiles_end[8];
	struct buf xfiles[8];
	char xerr_msg[8][256];
};

static const char *init_path(void)
{
	static char path[4096];
	const char *top = getenv("top_builddir");

	snprintf(path, sizeof(path), "%s/guest-init/husk-init", top ? top : ".");
	return path;
}

static void op_output(void *arg, int stream, const uint8_t *p, size_t n)
{
	struct conv *c = arg;

	buf_add(stream == 1 ? &c->out : &c->err, p, n);
}

static void op_get_data(void *arg, unsigned idx, uint8_t **pp, size_t n)
{
	struct conv *c = arg;

	ck_assert_uint_lt(idx, 2);
	if (n)
		buf_add(&c->get[idx], *pp, n);
	else
		c->gets_ended++;
}

static ssize_t op_put_read(void *arg, unsigned idx, void *b, size_t cap)
{
	struct conv *c = arg;
	size_t n = c->put.n - c->put_off;

	ck_assert_uint_eq(idx, 0);
	if (n > cap)
		n = cap;
	memcpy(b, c->put.p + c->put_off, n);
	c->put_off += n;
	return n;
}

static void op_started(void *arg)
{
	((struct conv *)arg)->started = true;
}

static void op_xevent(void *arg, const struct session_xevent *ev)
{
	struct conv *c = arg;
	unsigned i = ev->id;

	ck_assert_uint_lt(i, 8);
	switch (ev->kind) {
	case SX_STARTED:
		c->xstarted[i] = true;
		break;
	case SX_OUT:
		buf_add(&c->xout[i], ev->data, ev->len);
		break;
	case SX_EXIT:
		c->xexited[i] = true;
		c->xexit[i] = ev->exit;
		break;
	case SX_FILES:
		if (ev->len)
			buf_add(&c->xfiles[i], ev->data, ev->len);
		else
			c->xfiles_end[i] = true;
		break;
	case SX_DONE:
		c->xdone[i] = true;
		break;
	case SX_ERROR:
		c->xerror[i] = true;
		snprintf(c->xerr_msg[i], sizeof(c->xerr_msg[i]), "%.*s", (int)ev->len, ev->data);
		break;
	}
}

static void op_stop(void *arg, enum session_stop why, const char *msg)
{
	struct conv *c = arg;

	c->stopped = true;
	c->why = why;
}

static void conv_start(struct conv *c)
{
	static const struct session_ops ops = {
		.output = op_output, .get_data = op_get_data, .put_read = op_put_read,
		.started = op_started, .xevent = op_xevent, .stop = op_stop,
	};
	struct session_ops o = ops;
	struct session_timing tm = {
		.stall_us = 10000000, .write_stall_us = 10000000, .done_grace_us = 5000000,
		.allowance_s = 20,
	};
	uint64_t now = now_us();
	char fdarg[16];
	int sv[2];

	snprintf(c->ws, sizeof(c->ws), "/tmp/husk-sess-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(c->ws));
	/* guest-init runs jobs as uid 1000 when root: they must write there. */
	ck_assert_int_eq(chmod(c->ws, 0777), 0);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	c->pid = fork();
	ck_assert_int_ge(c->pid, 0);
	if (!c->pid) {
		int fd = dup(sv[1]);	/* without CLOEXEC */

		snprintf(fdarg, sizeof(fdarg), "%d", fd);
		execl(init_path(), "husk-init", "--test-fd", fdarg, "--workspace", c->ws,
		      (char *)NULL);
		_exit(127);
	}
	close(sv[1]);
	c->fd = sv[0];
	ck_assert_int_eq(fcntl(c->fd, F_SETFL, O_NONBLOCK), 0);
	proto_reader_init(&c->rd);
	tm.connect_by = now + DEADLINE_US;
	tm.deadline = now + DEADLINE_US;
	o.arg = c;
	session_init(&c->s, &c->job, NULL, 0, &tm, &o);
	session_connected(&c->s, now);
}

/* One pass: read frames, write the queue, apply the time rules. */
static void conv_step(struct conv *c, int ms)
{
	struct proto_outq *q = session_outq(&c->s);
	struct pollfd p = { .fd = c->fd, .events = POLLIN | (proto_outq_len(q) ? POLLOUT : 0) };
	struct proto_hdr h;
	uint8_t *payload;
	int n;

	if (c->over || poll(&p, 1, ms) < 0)
		return;
	while (!c->over && (n = proto_reader_read(&c->rd, c->fd, &h, &payload)) == 1) {
		n = session_frame(&c->s, &h, &payload, now_us());
		free(payload);
		if (n)
			c->over = true;
	}
	if (!c->over && (n == -EPIPE || n == -EPROTO)) {
		session_closed(&c->s, n);
		c->over = true;
	}
	session_pump(&c->s, now_us());
	if (proto_outq_len(q))
		session_wrote(&c->s, proto_outq_flush(q, c->fd), now_us());
	session_tick(&c->s, now_us());
	if (c->stopped)
		c->over = true;
}

/* Until the conversation is over (or `until` holds), bounded by the deadline. */
static void conv_run(struct conv *c, bool (*until)(struct conv *))
{
	uint64_t end = now_us() + DEADLINE_US;

	while (!c->over && !(until && until(c)) && now_us() < end)
		conv_step(c, 20);
	ck_assert_msg(c->over || (until && until(c)), "the conversation did not finish in time");
}

/* guest-init's exit status once the host closed its end. */
static int conv_end(struct conv *c)
{
	int st = -1;
	unsigned i;

	close(c->fd);
	ck_assert_int_eq(waitpid(c->pid, &st, 0), c->pid);
	proto_reader_free(&c->rd);
	session_free(&c->s);
	rm_tree_at(AT_FDCWD, c->ws);
	free(c->out.p);
	free(c->err.p);
	free(c->get[0].p);
	free(c->get[1].p);
	free(c->put.p);
	for (i = 0; i < 8; i++) {
		free(c->xout[i].p);
		free(c->xfiles[i].p);
	}
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static bool have_init(void)
{
	if (access(init_path(), X_OK) == 0)
		return true;
	unit_skip("session against guest-init", "guest-init/husk-init is not built");
	return false;
}

static void job_defaults(struct job_opts *j, char **argv, int argc)
{
	memset(j, 0, sizeof(*j));
	j->argv = argv;
	j->argc = argc;
	j->timeout_sec = 30;
	j->workspace_mib = 16;
	j->max_output = 1 << 20;
}

START_TEST(one_shot_streams_and_status)
{
	static char *argv[] = { "sh", "-c", "echo out; echo err >&2; exit 3" };
	struct conv c = { 0 };

	if (!have_init())
		return;
	job_defaults(&c.job, argv, 3);
	conv_start(&c);
	conv_run(&c, NULL);
	ck_assert_msg(!c.stopped, "stopped: %s", c.s.r.error);
	ck_assert(c.started && c.s.r.job_started && c.s.r.job_exited);
	ck_assert(c.s.r.exit.exited);
	ck_assert_uint_eq(c.s.r.exit.code, 3);
	ck_assert_str_eq((char *)c.out.p, "out\n");
	ck_assert_str_eq((char *)c.err.p, "err\n");
	ck_assert_uint_ne(c.s.r.t_done, 0);
	ck_assert_int_ge(c.s.r.guest_steps[IS_HELLO], 0);
	ck_assert_int_ge(c.s.r.guest_steps[IS_JOB_STARTED], 0);
	ck_assert_int_eq(conv_end(&c), 0);
}
END_TEST

static bool wants_stdin(struct conv *c)
{
	return session_wants_stdin(&c->s);
}

START_TEST(one_shot_stdin)
{
	static char *argv[] = { "sh", "-c", "tr a-z A-Z" };
	struct conv c = { 0 };

	if (!have_init())
		return;
	job_defaults(&c.job, argv, 3);
	c.job.stdin = true;
	conv_start(&c);
	conv_run(&c, wants_stdin);
	ck_assert_int_eq(session_stdin(&c.s, "hello", 5, now_us()), 0);
	ck_assert_int_eq(session_stdin(&c.s, NULL, 0, now_us()), 0);
	ck_assert(!session_wants_stdin(&c.s));
	conv_run(&c, NULL);
	ck_assert_msg(!c.stopped, "stopped: %s", c.s.r.error);
	ck_assert_str_eq((char *)c.out.p, "HELLO");
	ck_assert(c.s.r.stdout_open_line);
	ck_assert_uint_eq(c.s.r.exit.code, 0);
	ck_assert_int_eq(conv_end(&c), 0);
}
END_TEST

/*
 * A terminal's window: the one asked for before the job runs is sent at
 * STARTED (the job waits for a line, then looks); a job without a terminal
 * gets none (guest-init would end the conversation).
 */
START_TEST(one_shot_resize)
{
	static char *argv[] = { "sh", "-c", "read x; stty size" };
	static char *plain[] = { "sh", "-c", "cat" };
	struct conv c = { 0 };

	if (!have_init())
		return;
	job_defaults(&c.job, argv, 3);
	c.job.stdin = true;
	c.job.terminal = true;
	c.job.rows = 24;
	c.job.cols = 80;
	conv_start(&c);
	ck_assert_int_eq(session_resize(&c.s, 40, 120, now_us()), 0);
	ck_assert_int_eq(session_resize(&c.s, 33, 111, now_us()), 0);
	conv_run(&c, wants_stdin);
	ck_assert_int_eq(session_stdin(&c.s, "go\r", 3, now_us()), 0);
	conv_run(&c, NULL);
	ck_assert_msg(!c.stopped, "stopped: %s", c.s.r.error);
	ck_assert_ptr_nonnull(strstr((char *)c.out.p, "33 111"));
	ck_assert_uint_eq(c.s.r.exit.code, 0);
	ck_assert_int_eq(conv_end(&c), 0);

	memset(&c, 0, sizeof(c));
	job_defaults(&c.job, plain, 3);
	c.job.stdin = true;
	conv_start(&c);
	conv_run(&c, wants_stdin);
	ck_assert_int_eq(session_resize(&c.s, 33, 111, now_us()), 0);
	ck_assert_int_eq(session_stdin(&c.s, NULL, 0, now_us()), 0);
	conv_run(&c, NULL);
	ck_assert_msg(!c.stopped, "stopped: %s", c.s.r.error);
	ck_assert_uint_eq(c.s.r.exit.code, 0);
	ck_assert_int_eq(conv_end(&c), 0);
}
END_TEST

static int collect(void *arg, const void *p, size_t n)
{
	buf_add(arg, p, n);
	return 0;
}

/* Files in through a --put stream, back through a --get stream, intact. */
START_TEST(one_shot_put_and_get)
{
	static char *argv[] = { "sh", "-c", "mkdir out && tr a-z A-Z <in/f >out/g" };
	char src[] = "/tmp/husk-sess-src-XXXXXX", path[128], back[] = "/tmp/husk-sess-back-XXXXXX";
	struct tar_limits lim = { .max_bytes = 1 << 20, .max_entries = 100, .only = "out" };
	struct tar_extract *x;
	struct conv c = { 0 };
	char data[64] = { 0 };
	int fd, dfd;

	if (!have_init())
		return;
	ck_assert_ptr_nonnull(mkdtemp(src));
	snprintf(path, sizeof(path), "%s/f", src);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
	ck_assert_int_eq(write(fd, "payload", 7), 7);
	close(fd);
	ck_assert_int_eq(tar_create(src, "in", collect, &c.put), 0);
	job_defaults(&c.job, argv, 3);
	c.job.nr_put = 1;
	c.job.get[0] = "out";
	c.job.nr_get = 1;
	conv_start(&c);
	conv_run(&c, NULL);
	ck_assert_msg(!c.stopped, "stopped: %s", c.s.r.error);
	ck_assert_uint_eq(c.s.r.exit.code, 0);
	ck_assert_uint_eq(c.gets_ended, 1);
	ck_assert_uint_gt(c.get[0].n, 0);
	/* What came back is a gzip'd tar holding out/g. */
	ck_assert_ptr_nonnull(mkdtemp(back));
	dfd = open(back, O_RDONLY | O_DIRECTORY);
	x = tar_extract_new(dfd, &lim);
	ck_assert_ptr_nonnull(x);
	ck_assert_int_eq(tar_extract_feed(x, c.get[0].p, c.get[0].n), 0);
	ck_assert_int_eq(tar_extract_finish(x), 0);
	tar_extract_free(x);
	fd = openat(dfd, "out/g", O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(read(fd, data, sizeof(data) - 1), 7);
	ck_assert_str_eq(data, "PAYLOAD");
	close(fd);
	close(dfd);
	rm_tree_at(AT_FDCWD, back);
	rm_tree_at(AT_FDCWD, src);
	ck_assert_int_eq(conv_end(&c), 0);
}
END_TEST

START_TEST(one_shot_output_cap)
{
	static char *argv[] = { "sh", "-c", "i=0; while [ $i -lt 100 ]; do printf x; i=$((i+1)); done" };
	struct conv c = { 0 };

	if (!have_init())
		return;
	job_defaults(&c.job, argv, 3);
	c.job.max_output = 10;
	conv_start(&c);
	conv_run(&c, NULL);
	ck_assert_msg(!c.stopped, "stopped: %s", c.s.r.error);
	ck_assert_uint_eq(c.s.r.stdout_bytes, 100);
	ck_assert_uint_eq(c.s.r.stdout_dropped, 90);
	ck_assert(!strncmp((char *)c.out.p, "xxxxxxxxxx\n[husk: stdout exceeded 10 bytes", 42));
	ck_assert_int_eq(conv_end(&c), 0);
}
END_TEST

START_TEST(one_shot_timeout)
{
	static char *argv[] = { "sleep", "30" };
	struct conv c = { 0 };

	if (!have_init())
		return;
	job_defaults(&c.job, argv, 2);
	c.job.timeout_sec = 1;
	conv_start(&c);
	conv_run(&c, NULL);
	ck_assert_msg(!c.stopped, "stopped: %s", c.s.r.error);
	ck_assert(c.s.r.job_exited && c.s.r.exit.timed_out);
	ck_assert(!c.s.r.exit.exited);
	ck_assert_uint_eq(c.s.r.exit.signal, 9);
	ck_assert_int_eq(conv_end(&c), 0);
}
END_TEST

/* The guest may not send what it was not asked for: a session frame in a one-shot job. */
START_TEST(guest_breaks_the_rules)
{
	struct job_opts j;
	struct session s;
	struct session_ops ops = { .stop = op_stop };
	struct session_timing tm = { .stall_us = 1000, .deadline = UINT64_MAX,
				     .connect_by = UINT64_MAX };
	struct conv c = { 0 };
	struct proto_hdr h = { .type = P_XOUT, .len = 5 };
	uint8_t frame[5] = { 1, 0, 0, 0, 1 }, *p = frame;
	static char *argv[] = { "true" };

	job_defaults(&j, argv, 1);
	ops.arg = &c;
	session_init(&s, &j, NULL, 0, &tm, &ops);
	session_connected(&s, 1);
	/* Before HELLO: nothing but HELLO. */
	ck_assert_int_eq(session_frame(&s, &h, &p, 2), -EPROTO);
	ck_assert(c.stopped && c.why == SESSION_FAILED);
	ck_assert(strstr(s.r.error, "outside a session"));
	session_free(&s);

	/* A stall before the job starts is a failure, not a timeout. */
	memset(&c, 0, sizeof(c));
	session_init(&s, &j, NULL, 0, &tm, &ops);
	session_connected(&s, 1);
	session_tick(&s, 1 + 2000);
	ck_assert(c.stopped && c.why == SESSION_FAILED);
	ck_assert(strstr(s.r.error, "stopped responding before the job started"));
	session_free(&s);
}
END_TEST

static bool session_up(struct conv *c)
{
	return session_ready(&c->s);
}

static bool exited_1_2(struct conv *c)
{
	return c->xexited[1] && c->xexited[2];
}

static bool exited_3(struct conv *c)
{
	return c->xexited[3];
}

static bool files_4(struct conv *c)
{
	return c->xfiles_end[4] || c->xerror[4];
}

static bool done_5(struct conv *c)
{
	return c->xdone[5] || c->xerror[5];
}

/* A session: execs at once, stdin, a signal, a put and a get, then the end. */
START_TEST(session_requests)
{
	static char *sh1[] = { "sh", "-c", "sleep 0.3; echo one" };
	static char *sh2[] = { "sh", "-c", "echo two >&2; exit 4" };
	static char *cat[] = { "sh", "-c", "read l; echo got:$l" };
	static char *slp[] = { "sleep", "30" };
	struct exec_opts x1 = { .argv = sh1, .argc = 3 }, x2 = { .argv = sh2, .argc = 3 };
	struct exec_opts xc = { .argv = cat, .argc = 3, .stdin = true };
	struct exec_opts xs = { .argv = slp, .argc = 2 };
	char src[] = "/tmp/husk-sess-src-XXXXXX", path[128];
	struct buf tarb = { 0 };
	struct conv c = { 0 };
	int fd;

	if (!have_init())
		return;
	job_defaults(&c.job, NULL, 0);
	c.job.session = true;
	conv_start(&c);
	conv_run(&c, session_up);
	ck_assert_msg(!c.stopped, "stopped: %s", c.s.r.error);
	/* Two at once; the slow one answers last. */
	ck_assert_int_eq(session_exec(&c.s, 1, &x1, now_us()), 0);
	ck_assert_int_eq(session_exec(&c.s, 2, &x2, now_us()), 0);
	/* An id in use is the host's own mistake: refused before it is sent. */
	ck_assert_int_eq(session_exec(&c.s, 2, &x1, now_us()), -EBUSY);
	conv_run(&c, exited_1_2);
	ck_assert(c.xstarted[1] && c.xstarted[2]);
	ck_assert_str_eq((char *)c.xout[1].p, "one\n");
	ck_assert_str_eq((char *)c.xout[2].p, "two\n");
	ck_assert(c.xexit[1].exited && c.xexit[1].code == 0);
	ck_assert(c.xexit[2].exited && c.xexit[2].code == 4);
	/* stdin to an exec */
	ck_assert_int_eq(session_exec(&c.s, 1, &xc, now_us()), 0);
	ck_assert_int_eq(session_xstdin(&c.s, 1, "abc\n", 4, now_us()), 0);
	ck_assert_int_eq(session_xstdin(&c.s, 1, NULL, 0, now_us()), 0);
	c.xexited[1] = false;
	free(c.xout[1].p);
	c.xout[1] = (struct buf){ 0 };
	ck_assert_int_eq(session_exec(&c.s, 3, &xs, now_us()), 0);
	conv_run(&c, exited_1_2);
	ck_assert_str_eq((char *)c.xout[1].p, "got:abc\n");
	/* a signal ends the sleeper */
	ck_assert_int_eq(session_signal(&c.s, 3, 15, now_us()), 0);
	conv_run(&c, exited_3);
	ck_assert(!c.xexit[3].exited && c.xexit[3].signal == 15);
	ck_assert_int_eq(session_signal(&c.s, 3, 15, now_us()), -ESRCH);
	/* a put, then a get of what it put */
	ck_assert_ptr_nonnull(mkdtemp(src));
	snprintf(path, sizeof(path), "%s/f", src);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
	ck_assert_int_eq(write(fd, "putdata", 7), 7);
	close(fd);
	ck_assert_int_eq(tar_create(src, "d", collect, &tarb), 0);
	ck_assert_int_eq(session_put(&c.s, 5, tarb.p, tarb.n, now_us()), 0);
	ck_assert_int_eq(session_put(&c.s, 5, NULL, 0, now_us()), 0);
	/* A second put waits for the first one's answer. */
	ck_assert_int_eq(session_put(&c.s, 6, "x", 1, now_us()), -EBUSY);
	conv_run(&c, done_5);
	ck_assert_msg(c.xdone[5], "put failed: %s", c.xerr_msg[5]);
	ck_assert_int_eq(session_get(&c.s, 4, "d", now_us()), 0);
	conv_run(&c, files_4);
	ck_assert_msg(c.xfiles_end[4], "get failed: %s", c.xerr_msg[4]);
	ck_assert_uint_gt(c.xfiles[4].n, 0);
	/* the end: DONE, and guest-init exits 0 */
	ck_assert_int_eq(session_end(&c.s, now_us()), 0);
	conv_run(&c, NULL);
	ck_assert_msg(!c.stopped, "stopped: %s", c.s.r.error);
	ck_assert_uint_ne(c.s.r.t_done, 0);
	free(tarb.p);
	rm_tree_at(AT_FDCWD, src);
	ck_assert_int_eq(conv_end(&c), 0);
}
END_TEST

/* A session frame where none may come ends the session. */
START_TEST(session_frames_checked)
{
	static char *argv[] = { "true" };
	struct job_opts j;
	struct session s;
	struct session_ops ops = { .stop = op_stop };
	struct session_timing tm = { .stall_us = UINT64_MAX / 2, .deadline = UINT64_MAX,
				     .connect_by = UINT64_MAX, .write_stall_us = UINT64_MAX / 2 };
	struct conv c = { 0 };
	struct proto_hdr hello = { .type = P_HELLO }, started = { .type = P_STARTED };
	struct proto_hdr xexit = { .type = P_XEXIT, .len = 4 };
	uint8_t id9[4] = { 9, 0, 0, 0 }, *p = NULL, *q = id9;

	job_defaults(&j, argv, 0);
	j.session = true;
	ops.arg = &c;
	session_init(&s, &j, NULL, 0, &tm, &ops);
	session_connected(&s, 1);
	ck_assert_int_eq(session_frame(&s, &hello, &p, 2), 0);
	ck_assert_int_eq(session_frame(&s, &started, &p, 3), 0);
	ck_assert(session_ready(&s));
	/* An answer to a request the host never made. */
	ck_assert_int_eq(session_frame(&s, &xexit, &q, 4), -EPROTO);
	ck_assert(c.stopped && strstr(s.r.error, "not open"));
	session_free(&s);
}
END_TEST

/*
 * session_tick() says when its next rule falls due, and that is exactly
 * when it fires: a tick just before does nothing, a tick then stops the
 * session. An event loop that sleeps until then misses nothing.
 */
static void fires_when_due(struct session *s, struct conv *c, uint64_t now,
			   enum session_stop why, const char *error)
{
	uint64_t due = session_tick(s, now);

	ck_assert_msg(!c->stopped, "stopped early: %s", s->r.error);
	ck_assert_uint_gt(due, now);
	ck_assert(due != UINT64_MAX);
	ck_assert_uint_eq(session_tick(s, due - 1), due);
	ck_assert(!c->stopped);
	ck_assert_uint_eq(session_tick(s, due), UINT64_MAX);
	ck_assert(c->stopped && c->why == why);
	/* Only a failure is an error; a timeout is the job's outcome. */
	if (error)
		ck_assert_msg(strstr(s->r.error, error), "error: %s", s->r.error);
}

START_TEST(tick_says_when_next)
{
	struct job_opts j;
	struct session s;
	struct session_ops ops = { .stop = op_stop };
	struct session_timing tm = { .stall_us = 1000, .write_stall_us = 500,
				     .done_grace_us = 300, .deadline = 50000,
				     .connect_by = 3000, .allowance_s = 3 };
	struct conv c = { 0 };
	static char *argv[] = { "true" };

	job_defaults(&j, argv, 1);
	ops.arg = &c;

	/* Not connected yet: the connect allowance. */
	session_init(&s, &j, NULL, 0, &tm, &ops);
	fires_when_due(&s, &c, 10, SESSION_FAILED, "did not connect");
	session_free(&s);

	/* Connected and silent: the stall rule, counted from the last byte. */
	memset(&c, 0, sizeof(c));
	session_init(&s, &j, NULL, 0, &tm, &ops);
	session_connected(&s, 100);
	session_rx(&s, false, 700);
	fires_when_due(&s, &c, 800, SESSION_FAILED, "stopped responding");
	session_free(&s);

	/* Talking all along: the deadline is next. */
	memset(&c, 0, sizeof(c));
	tm.stall_us = 1000000;
	session_init(&s, &j, NULL, 0, &tm, &ops);
	session_connected(&s, 100);
	fires_when_due(&s, &c, 200, SESSION_TIMEOUT, NULL);
	/* Stopped: nothing is due any more. */
	ck_assert_uint_eq(session_tick(&s, 60000), UINT64_MAX);
	session_free(&s);
}
END_TEST

Suite *session_suite(void)
{
	Suite *s = suite_create("session");
	TCase *tc = tcase_create("guest-init");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, one_shot_streams_and_status);
	tcase_add_test(tc, one_shot_stdin);
	tcase_add_test(tc, one_shot_resize);
	tcase_add_test(tc, one_shot_put_and_get);
	tcase_add_test(tc, one_shot_output_cap);
	tcase_add_test(tc, one_shot_timeout);
	tcase_add_test(tc, guest_breaks_the_rules);
	tcase_add_test(tc, session_requests);
	tcase_add_test(tc, session_frames_checked);
	tcase_add_test(tc, tick_says_when_next);
	suite_add_tcase(s, tc);
	return s;
}
