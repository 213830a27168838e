/*
 * Unit tests for console: the guest's serial output collected into lines and
 * written to a pipe standing in for the console fd. Covers line buffering
 * (nothing reaches the fd before '\n'), '\r' dropped but counted,
 * console_flush() of a partial line, over-long lines written in pieces
 * without loss, panic banner detection (on '\n' and on flush, reported line
 * without newline, safe truncation, first panic wins, banner split by a flush
 * or by the line limit), fd -1 discarding, a closed reader (EPIPE), and
 * the event loop's timer: none while no partial line waits, one kick on the
 * eventfd for the first byte after the loop went to sleep, CONSOLE_FLUSH_MS
 * while a partial line waits.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "machine/console.h"
#include "suites.h"

#define BANNER CONSOLE_PANIC_BANNER

static struct console con;
static int rfd = -1, wfd = -1;
static char out[8192];

static void setup(void)
{
	int p[2];

	ck_assert_int_eq(pipe(p), 0);
	rfd = p[0];
	wfd = p[1];
	ck_assert_int_eq(fcntl(rfd, F_SETFL, O_NONBLOCK), 0);
	console_init(&con, wfd);
}

static void teardown(void)
{
	if (rfd >= 0)
		close(rfd);
	if (wfd >= 0)
		close(wfd);
	rfd = wfd = -1;
}

/* Everything in the pipe right now, NUL-terminated in out[]; its length. */
static size_t drain(void)
{
	size_t n = 0;

	for (;;) {
		ssize_t r = read(rfd, out + n, sizeof(out) - 1 - n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			ck_assert_int_eq(errno, EAGAIN);
			break;
		}
		if (r == 0)
			break;
		n += r;
		ck_assert_uint_lt(n, sizeof(out) - 1);
	}
	out[n] = '\0';
	return n;
}

static void put_str(const char *s)
{
	while (*s)
		console_put(&con, (uint8_t)*s++);
}

START_TEST(init_state)
{
	char line[8] = "unset";

	ck_assert_int_eq(con.fd, wfd);
	ck_assert_uint_eq(con.len, 0);
	ck_assert_uint_eq(con.bytes, 0);
	ck_assert(!console_panicked(&con, line, sizeof(line)));
	ck_assert_str_eq(line, "unset");
}
END_TEST

START_TEST(log_limit_drops_and_counts)
{
	con.limit = 10;
	ck_assert_uint_eq(CONSOLE_DEFAULT_LIMIT, 64ull << 20);
	put_str("0123456\n");		/* 8 bytes: under the limit */
	put_str("abcdef\n");		/* 2 fit, 5 dropped */
	put_str("more\n");		/* all 5 dropped, no second marker */
	drain();
	ck_assert_str_eq(out, "0123456\nab\n[husk: console log limit reached; further "
			 "output is dropped and counted]\n");
	ck_assert_uint_eq(con.written, 10);
	ck_assert_uint_eq(con.dropped, 10);
	ck_assert_uint_eq(con.bytes, 20);
}
END_TEST

START_TEST(written_a_line_at_a_time)
{
	put_str("hello");
	ck_assert_uint_eq(drain(), 0);
	ck_assert_uint_eq(con.bytes, 5);
	console_put(&con, '\n');
	ck_assert_uint_eq(drain(), 6);
	ck_assert_str_eq(out, "hello\n");
	ck_assert_uint_eq(con.bytes, 6);
	ck_assert_uint_eq(con.len, 0);
}
END_TEST

START_TEST(several_lines)
{
	put_str("one\ntwo\nthr");
	ck_assert_uint_eq(drain(), 8);
	ck_assert_str_eq(out, "one\ntwo\n");
	put_str("ee\n");
	ck_assert_uint_eq(drain(), 6);
	ck_assert_str_eq(out, "three\n");
	ck_assert_uint_eq(con.bytes, 14);
}
END_TEST

START_TEST(carriage_return_dropped_but_counted)
{
	put_str("a\r\nb\r\n\r\r\n");
	ck_assert_uint_eq(drain(), 5);
	ck_assert_str_eq(out, "a\nb\n\n");
	ck_assert_uint_eq(con.bytes, 9);
}
END_TEST

START_TEST(lone_carriage_return_not_a_line_end)
{
	put_str("x\r");
	ck_assert_uint_eq(drain(), 0);
	ck_assert_uint_eq(con.len, 1);
	ck_assert_uint_eq(con.bytes, 2);
}
END_TEST

START_TEST(flush_writes_partial_line)
{
	put_str("login: ");
	ck_assert_uint_eq(drain(), 0);
	console_flush(&con);
	ck_assert_uint_eq(drain(), 7);
	ck_assert_str_eq(out, "login: ");
	/* A second flush has nothing to write; the line continues afterwards. */
	console_flush(&con);
	ck_assert_uint_eq(drain(), 0);
	put_str("root\n");
	ck_assert_uint_eq(drain(), 5);
	ck_assert_str_eq(out, "root\n");
	ck_assert_uint_eq(con.bytes, 12);
}
END_TEST

START_TEST(flush_empty_writes_nothing)
{
	console_flush(&con);
	ck_assert_uint_eq(drain(), 0);
	ck_assert_uint_eq(con.bytes, 0);
}
END_TEST

START_TEST(long_line_flushed_in_pieces)
{
	unsigned i, n = 3 * CONSOLE_LINE_MAX + 17;

	for (i = 0; i < CONSOLE_LINE_MAX - 2; i++)
		console_put(&con, 'a' + i % 26);
	ck_assert_uint_eq(drain(), 0);
	console_put(&con, 'a' + i % 26);
	i++;
	ck_assert_uint_eq(drain(), CONSOLE_LINE_MAX - 1);
	for (; i < n; i++)
		console_put(&con, 'a' + i % 26);
	console_put(&con, '\n');
	ck_assert_uint_eq(con.bytes, n + 1);
	/* 510 more bytes went out with the earlier piece, the rest now. */
	ck_assert_uint_eq(drain(), n + 1 - (CONSOLE_LINE_MAX - 1));
	for (i = CONSOLE_LINE_MAX - 1; i < n; i++)
		ck_assert_int_eq(out[i - (CONSOLE_LINE_MAX - 1)], 'a' + i % 26);
	ck_assert_int_eq(out[n - (CONSOLE_LINE_MAX - 1)], '\n');
}
END_TEST

START_TEST(long_line_keeps_every_byte)
{
	unsigned i, n = 2000;
	size_t got;

	for (i = 0; i < n; i++)
		console_put(&con, '0' + i % 10);
	console_flush(&con);
	got = drain();
	ck_assert_uint_eq(got, n);
	for (i = 0; i < n; i++)
		ck_assert_int_eq(out[i], '0' + i % 10);
	ck_assert_uint_eq(con.bytes, n);
}
END_TEST

START_TEST(panic_detected_on_newline)
{
	char line[CONSOLE_LINE_MAX];

	put_str("[    0.500000] Freeing unused kernel memory\r\n");
	ck_assert(!console_panicked(&con, line, sizeof(line)));
	put_str("[    1.234567] " BANNER ": xyz\r\n");
	ck_assert(console_panicked(&con, line, sizeof(line)));
	ck_assert_str_eq(line, "[    1.234567] " BANNER ": xyz");
	/* The panic line still goes to the console unchanged. */
	drain();
	ck_assert_str_eq(out, "[    0.500000] Freeing unused kernel memory\n"
			 "[    1.234567] " BANNER ": xyz\n");
}
END_TEST

START_TEST(panic_seen_once_banner_complete)
{
	char line[CONSOLE_LINE_MAX];

	/* Seen as soon as the banner is complete; the line grows until its end. */
	put_str(BANNER);
	ck_assert(console_panicked(&con, line, sizeof(line)));
	ck_assert_str_eq(line, BANNER);
	put_str(": xyz");
	ck_assert(console_panicked(&con, line, sizeof(line)));
	ck_assert_str_eq(line, BANNER ": xyz");
	put_str("\nafter\n");
	ck_assert(console_panicked(&con, line, sizeof(line)));
	ck_assert_str_eq(line, BANNER ": xyz");
}
END_TEST

START_TEST(panic_detected_on_flush)
{
	char line[CONSOLE_LINE_MAX];

	put_str(BANNER ": xyz");
	console_flush(&con);
	ck_assert(console_panicked(&con, line, sizeof(line)));
	ck_assert_str_eq(line, BANNER ": xyz");
	ck_assert_uint_eq(drain(), strlen(BANNER ": xyz"));
}
END_TEST

START_TEST(panic_line_truncated_to_buffer)
{
	char line[16];

	memset(line, 'Z', sizeof(line));
	put_str(BANNER ": xyz\n");
	ck_assert(console_panicked(&con, line, 8));
	ck_assert_str_eq(line, "Kernel ");
	ck_assert_int_eq(line[8], 'Z');
	ck_assert_int_eq(line[15], 'Z');
}
END_TEST

START_TEST(panic_query_without_buffer)
{
	char one[1] = { 'Z' };

	put_str(BANNER "\n");
	ck_assert(console_panicked(&con, NULL, 0));
	ck_assert(console_panicked(&con, NULL, 64));
	ck_assert(console_panicked(&con, one, 0));
	ck_assert_int_eq(one[0], 'Z');
	ck_assert(console_panicked(&con, one, 1));
	ck_assert_int_eq(one[0], '\0');
}
END_TEST

START_TEST(no_panic_without_banner)
{
	char line[CONSOLE_LINE_MAX] = "untouched";

	put_str("Kernel panic - not syncin\n");
	put_str("kernel panic - not syncing: lower case\n");
	put_str("Kernel panic - not  syncing: two spaces\n");
	put_str("reboot: Restarting system\n");
	console_flush(&con);
	ck_assert(!console_panicked(&con, line, sizeof(line)));
	ck_assert_str_eq(line, "untouched");
}
END_TEST

START_TEST(first_panic_wins)
{
	char line[CONSOLE_LINE_MAX];

	put_str(BANNER ": first\n");
	put_str(BANNER ": second\n");
	ck_assert(console_panicked(&con, line, sizeof(line)));
	ck_assert_str_eq(line, BANNER ": first");
}
END_TEST

START_TEST(panic_banner_split_by_flush)
{
	char line[CONSOLE_LINE_MAX];

	/*
	 * husk's event loop flushes every CONSOLE_FLUSH_MS whether or not the
	 * guest is mid-line, so a flush may land inside the banner.
	 */
	put_str("Kernel pan");
	console_flush(&con);
	put_str("ic - not syncing: xyz\r\n");
	drain();
	ck_assert_str_eq(out, BANNER ": xyz\n");
	ck_assert(console_panicked(&con, line, sizeof(line)));
}
END_TEST

START_TEST(panic_banner_split_at_line_limit)
{
	char line[CONSOLE_LINE_MAX];
	unsigned i;

	/* A long prefix pushes the banner across the CONSOLE_LINE_MAX-1 cut. */
	for (i = 0; i < CONSOLE_LINE_MAX - 1 - 10; i++)
		console_put(&con, '.');
	put_str(BANNER ": xyz\n");
	ck_assert(console_panicked(&con, line, sizeof(line)));
}
END_TEST

START_TEST(discard_fd)
{
	char line[CONSOLE_LINE_MAX];

	console_init(&con, -1);
	put_str("dropped\r\n");
	put_str("partial");
	console_flush(&con);
	ck_assert_uint_eq(drain(), 0);
	ck_assert_uint_eq(con.bytes, 16);
	ck_assert_uint_eq(con.len, 0);
	/* Panics are still recognised with nowhere to write. */
	put_str(BANNER ": gone\n");
	ck_assert(console_panicked(&con, line, sizeof(line)));
	ck_assert_str_eq(line, BANNER ": gone");
}
END_TEST

START_TEST(closed_reader)
{
	struct sigaction ign = { .sa_handler = SIG_IGN }, old;
	char line[CONSOLE_LINE_MAX];
	unsigned i;

	ck_assert_int_eq(sigaction(SIGPIPE, &ign, &old), 0);
	close(rfd);
	rfd = -1;
	for (i = 0; i < 4 * CONSOLE_LINE_MAX; i++)
		console_put(&con, 'x');
	put_str("line\r\n" BANNER ": epipe\n tail");
	console_flush(&con);
	ck_assert_uint_eq(con.bytes, 4 * CONSOLE_LINE_MAX + 6 + strlen(BANNER) + 8 + 5);
	ck_assert_uint_eq(con.len, 0);
	ck_assert(console_panicked(&con, line, sizeof(line)));
	ck_assert_str_eq(line, BANNER ": epipe");
	ck_assert_int_eq(sigaction(SIGPIPE, &old, NULL), 0);
}
END_TEST

/* The tail is kept with nowhere to write, oldest first, without '\r'. */
START_TEST(tail_short)
{
	char buf[64];

	console_init(&con, -1);
	ck_assert_uint_eq(console_tail(&con, buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "");
	put_str("one\r\ntwo\r\nthr");
	ck_assert_uint_eq(console_tail(&con, buf, sizeof(buf)), 11);
	ck_assert_str_eq(buf, "one\ntwo\nthr");
	/* A small buffer gets the newest bytes, from a whole line. */
	ck_assert_uint_eq(console_tail(&con, buf, 10), 7);
	ck_assert_str_eq(buf, "two\nthr");
	ck_assert_uint_eq(console_tail(&con, buf, 0), 0);
	ck_assert_uint_eq(console_tail(&con, buf, 1), 0);
	ck_assert_str_eq(buf, "");
}
END_TEST

/* After the ring wraps, the tail is the newest lines and no cut one. */
START_TEST(tail_wrapped)
{
	static char buf[CONSOLE_TAIL_MAX + 16], want[64];
	unsigned i, prev;
	size_t n;

	console_init(&con, -1);
	for (i = 0; i < 1000; i++) {
		snprintf(want, sizeof(want), "line %u\n", i);
		put_str(want);
	}
	put_str(BANNER ": last");
	n = console_tail(&con, buf, sizeof(buf));
	ck_assert_uint_eq(n, strlen(buf));
	ck_assert_uint_le(n, CONSOLE_TAIL_MAX - 1);
	ck_assert_uint_gt(n, CONSOLE_TAIL_MAX - 16);
	ck_assert(!strncmp(buf, "line ", 5));
	ck_assert_ptr_nonnull(strstr(buf, "line 999\n" BANNER ": last"));
	ck_assert_str_eq(buf + n - strlen(BANNER ": last"), BANNER ": last");
	/* Every line in it is whole and in order, up to the last. */
	for (i = 0, prev = 0; buf[0] == 'l'; i++) {
		unsigned a = 0;
		char *nl = strchr(buf, '\n');

		ck_assert_int_eq(sscanf(buf, "line %u", &a), 1);
		if (i)
			ck_assert_uint_eq(a, prev + 1);
		prev = a;
		memmove(buf, nl + 1, strlen(nl + 1) + 1);
	}
	ck_assert_uint_eq(prev, 999);
	ck_assert_uint_gt(i, 300);
}
END_TEST

/* How many kicks the eventfd holds (0: none), leaving it reset. */
static uint64_t kicks(int efd)
{
	uint64_t v = 0;

	if (read(efd, &v, sizeof(v)) != sizeof(v))
		return 0;
	return v;
}

START_TEST(wait_sleeps_until_a_partial_line)
{
	int efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);

	ck_assert_int_ge(efd, 0);
	console_set_kick(&con, efd);
	/* Nothing buffered: the caller's own timeout, or none. */
	ck_assert_int_eq(console_wait_ms(&con, -1), -1);
	ck_assert_int_eq(console_wait_ms(&con, 5000), 5000);
	/* The first byte after the loop went to sleep kicks it, once. */
	put_str("done\n");
	ck_assert_uint_eq(kicks(efd), 1);
	/* Its line was written whole: back to sleep without a timer. */
	ck_assert_int_eq(console_wait_ms(&con, -1), -1);
	/* A prompt: one kick, however many bytes follow. */
	put_str("pass");
	put_str("word: ");
	ck_assert_uint_eq(kicks(efd), 1);
	/* It waits: the loop flushes within CONSOLE_FLUSH_MS, or sooner if asked. */
	ck_assert_int_eq(console_wait_ms(&con, -1), CONSOLE_FLUSH_MS);
	ck_assert_int_eq(console_wait_ms(&con, 3), 3);
	console_flush(&con);
	drain();
	ck_assert_str_eq(out, "done\npassword: ");
	/* Awake (just flushed): no kick until the loop sleeps again. */
	put_str("x");
	ck_assert_uint_eq(kicks(efd), 0);
	console_flush(&con);
	ck_assert_int_eq(console_wait_ms(&con, -1), -1);
	put_str("y");
	ck_assert_uint_eq(kicks(efd), 1);
	console_set_kick(&con, -1);
	close(efd);
}
END_TEST

START_TEST(wait_without_kick_keeps_the_timer)
{
	/* No eventfd to wake the loop: it must look every CONSOLE_FLUSH_MS. */
	ck_assert_int_eq(console_wait_ms(&con, -1), CONSOLE_FLUSH_MS);
	ck_assert_int_eq(console_wait_ms(&con, 60000), CONSOLE_FLUSH_MS);
	ck_assert_int_eq(console_wait_ms(&con, 7), 7);
}
END_TEST

START_TEST(wait_discarded_needs_no_flush)
{
	struct console d;
	int efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);

	console_init(&d, -1);
	console_set_kick(&d, efd);
	console_put(&d, 'a');
	/* The tail and the panic watch already saw the byte: no timer, no kick. */
	ck_assert_int_eq(console_wait_ms(&d, -1), -1);
	console_put(&d, 'b');
	ck_assert_uint_eq(kicks(efd), 0);
	close(efd);
}
END_TEST

Suite *console_suite(void)
{
	Suite *s = suite_create("console");
	TCase *tc = tcase_create("lines");
	TCase *tp = tcase_create("panic");
	TCase *tf = tcase_create("fd");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, init_state);
	tcase_add_test(tc, written_a_line_at_a_time);
	tcase_add_test(tc, log_limit_drops_and_counts);
	tcase_add_test(tc, several_lines);
	tcase_add_test(tc, carriage_return_dropped_but_counted);
	tcase_add_test(tc, lone_carriage_return_not_a_line_end);
	tcase_add_test(tc, flush_writes_partial_line);
	tcase_add_test(tc, flush_empty_writes_nothing);
	tcase_add_test(tc, long_line_flushed_in_pieces);
	tcase_add_test(tc, long_line_keeps_every_byte);
	suite_add_tcase(s, tc);

	tcase_add_checked_fixture(tp, setup, teardown);
	tcase_add_test(tp, panic_detected_on_newline);
	tcase_add_test(tp, panic_seen_once_banner_complete);
	tcase_add_test(tp, panic_detected_on_flush);
	tcase_add_test(tp, panic_line_truncated_to_buffer);
	tcase_add_test(tp, panic_query_without_buffer);
	tcase_add_test(tp, no_panic_without_banner);
	tcase_add_test(tp, first_panic_wins);
	tcase_add_test(tp, panic_banner_split_by_flush);
	tcase_add_test(tp, panic_banner_split_at_line_limit);
	suite_add_tcase(s, tp);

	tcase_add_checked_fixture(tf, setup, teardown);
	tcase_add_test(tf, discard_fd);
	tcase_add_test(tf, tail_short);
	tcase_add_test(tf, tail_wrapped);
	tcase_add_test(tf, closed_reader);
	tcase_add_test(tf, wait_sleeps_until_a_partial_line);
	tcase_add_test(tf, wait_without_kick_keeps_the_timer);
	tcase_add_test(tf, wait_discarded_needs_no_flush);
	suite_add_tcase(s, tf);
	return s;
}
