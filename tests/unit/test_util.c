/*
 * Unit tests for util's message escaping and host_file: what husk writes for
 * its user is never reached through a link, never a FIFO, and belongs to
 * the right user.
 */
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/host_file.h"
#include "suites.h"
#include "lib/util.h"

START_TEST(escape_controls)
{
	char out[64];

	husk_escape(out, sizeof(out), "plain text: ok");
	ck_assert_str_eq(out, "plain text: ok");
	husk_escape(out, sizeof(out), "a\033[2Jb\007\r\n\x7f\xc3\xa9");
	ck_assert_str_eq(out, "a\\x1b[2Jb\\x07\\x0d\\x0a\\x7f\\xc3\\xa9");
	/* Cut, never overrun, always terminated. */
	husk_escape(out, 8, "\033\033\033\033");
	ck_assert_uint_lt(strlen(out), 8);
	ck_assert_ptr_null(strchr(out, '\033'));
	husk_escape(out, 1, "x");
	ck_assert_str_eq(out, "");
}
END_TEST

static char dir[64];

static void setup(void)
{
	strcpy(dir, "/tmp/husk-hostfile-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

static const char *at(const char *name)
{
	static char p[2][128];
	static int i;

	i ^= 1;
	snprintf(p[i], sizeof(p[i]), "%s/%s", dir, name);
	return p[i];
}

static void put(const char *name, const char *text)
{
	FILE *f = fopen(at(name), "w");

	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

static char *get(const char *name)
{
	static char buf[256];
	FILE *f = fopen(at(name), "r");
	size_t n;

	ck_assert_ptr_nonnull(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

START_TEST(output_creates_and_truncates)
{
	int fd = host_open_output(at("new"), "--result");

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, "one", 3), 3);
	close(fd);
	ck_assert_str_eq(get("new"), "one");
	/* An existing regular file is replaced (truncated), not appended to. */
	fd = host_open_output(at("new"), "--result");
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, "2", 1), 1);
	close(fd);
	ck_assert_str_eq(get("new"), "2");
	ck_assert_int_eq(fcntl(fd = host_open_output(at("new"), "x"), F_GETFD) & FD_CLOEXEC,
			 FD_CLOEXEC);
	close(fd);
}
END_TEST

START_TEST(output_refuses_links_fifos_dirs)
{
	put("victim", "precious");
	ck_assert_int_eq(symlink(at("victim"), at("link")), 0);
	ck_assert_int_eq(host_open_output(at("link"), "--console"), -ELOOP);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "symbolic link"));
	ck_assert_str_eq(get("victim"), "precious");
	/* A dangling link is not created through either. */
	ck_assert_int_eq(symlink(at("nowhere"), at("dangling")), 0);
	ck_assert_int_lt(host_open_output(at("dangling"), "--console"), 0);
	ck_assert_int_eq(access(at("nowhere"), F_OK), -1);
	/* A FIFO: refused at once, never waited on. */
	ck_assert_int_eq(mkfifo(at("fifo"), 0600), 0);
	ck_assert_int_lt(host_open_output(at("fifo"), "--result"), 0);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "not a regular file"));
	/* A hard link to someone's file. */
	ck_assert_int_eq(link(at("victim"), at("hard")), 0);
	ck_assert_int_eq(host_open_output(at("hard"), "--result"), -EPERM);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "hard links"));
	ck_assert_str_eq(get("victim"), "precious");
	/* A directory, and names that are not file names. */
	ck_assert_int_eq(mkdir(at("d"), 0700), 0);
	ck_assert_int_lt(host_open_output(at("d"), "--result"), 0);
	ck_assert_int_lt(host_open_output(at(""), "--result"), 0);
	ck_assert_int_lt(host_open_output("/nonexistent-dir/x", "--result"), 0);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "cannot open its directory"));
}
END_TEST

START_TEST(output_owner)
{
	struct stat st;
	uid_t u;
	gid_t g;
	int fd, dfd;

	if (!unit_need_root("host_file: ownership"))
		return;
	ck_assert_int_eq(chown(dir, 4242, 4343), 0);
	dfd = open(dir, O_RDONLY | O_DIRECTORY);
	unsetenv("SUDO_UID");
	unsetenv("SUDO_GID");
	host_owner(dfd, &u, &g);
	ck_assert_uint_eq(u, 4242);
	ck_assert_uint_eq(g, 4343);
	fd = host_open_output(at("owned"), "--result");
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fstat(fd, &st), 0);
	ck_assert_uint_eq(st.st_uid, 4242);
	close(fd);
	/* Under sudo: the user who ran sudo. Nonsense values are ignored. */
	setenv("SUDO_UID", "4545", 1);
	setenv("SUDO_GID", "4646", 1);
	host_owner(dfd, &u, &g);
	ck_assert_uint_eq(u, 4545);
	ck_assert_uint_eq(g, 4646);
	setenv("SUDO_UID", "0", 1);
	host_owner(dfd, &u, &g);
	ck_assert_uint_eq(u, 4242);
	setenv("SUDO_UID", "12x", 1);
	host_owner(dfd, &u, &g);
	ck_assert_uint_eq(u, 4242);
	unsetenv("SUDO_UID");
	unsetenv("SUDO_GID");
	/* Someone else's existing file is not replaced by root. */
	put("theirs", "theirs");
	ck_assert_int_eq(chown(at("theirs"), 5000, 5000), 0);
	ck_assert_int_eq(host_open_output(at("theirs"), "--result"), -EPERM);
	ck_assert_str_eq(get("theirs"), "theirs");
	close(dfd);
}
END_TEST

/* The directory itself gets the mode asked for; parents it makes, 0755. */
START_TEST(mkdir_p_modes)
{
	char base[] = "/tmp/husk-mkdir-XXXXXX", path[256], mid[256];
	struct stat st;
	mode_t old = umask(0);

	ck_assert_ptr_nonnull(mkdtemp(base));
	snprintf(mid, sizeof(mid), "%s/a", base);
	snprintf(path, sizeof(path), "%s/a/b", base);
	ck_assert_int_eq(mkdir_p(path, 0700), 0);
	ck_assert_int_eq(stat(mid, &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0755);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0700);
	/* Again: what exists is left as it is. */
	ck_assert_int_eq(mkdir_p(path, 0755), 0);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0700);
	umask(old);
	rmdir(path);
	rmdir(mid);
	rmdir(base);
}
END_TEST

/* Sizes as --tmpfs and husk oci update take them. */
START_TEST(sizes)
{
	uint64_t v;

	ck_assert_int_eq(parse_size("4096", 1, &v), 0);
	ck_assert_uint_eq(v, 4096);
	ck_assert_int_eq(parse_size("64m", 1, &v), 0);
	ck_assert_uint_eq(v, 64ull << 20);
	ck_assert_int_eq(parse_size("2K", 1, &v), 0);
	ck_assert_uint_eq(v, 2048);
	ck_assert_int_eq(parse_size("3G", 0, &v), 0);
	ck_assert_uint_eq(v, 3ull << 30);
	ck_assert_int_eq(parse_size("0", 0, &v), 0);
	ck_assert_uint_eq(v, 0);
	ck_assert_int_eq(parse_size("0", 1, &v), -EINVAL);
	ck_assert_int_eq(parse_size("", 0, &v), -EINVAL);
	ck_assert_int_eq(parse_size("k", 0, &v), -EINVAL);
	ck_assert_int_eq(parse_size("1x", 0, &v), -EINVAL);
	ck_assert_int_eq(parse_size("-1", 0, &v), -EINVAL);
	ck_assert_int_eq(parse_size("1mb", 0, &v), -EINVAL);
	ck_assert_int_eq(parse_size("17179869184g", 0, &v), -EINVAL);	/* 2^34 GiB */
	ck_assert_int_eq(parse_size("17179869183g", 0, &v), 0);
	ck_assert_int_eq(parse_size("123456789012345678901234567890123", 0, &v), -EINVAL);
}
END_TEST

/* A husk thread's stack is too small to hold a 2 MiB transparent huge page. */
static void *stack_size_of(void *arg)
{
	pthread_attr_t a;
	size_t *sz = arg;

	if (pthread_getattr_np(pthread_self(), &a) == 0) {
		pthread_attr_getstacksize(&a, sz);
		pthread_attr_destroy(&a);
	}
	return NULL;
}

START_TEST(thread_stack_below_huge_page)
{
	pthread_t t;
	size_t sz = 0;

	ck_assert_int_eq(husk_thread_create(&t, stack_size_of, &sz), 0);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_uint_ge(sz, 256 * 1024);
	ck_assert_uint_lt(sz, 2u << 20);
}
END_TEST

static void *own_tid(void *arg)
{
	*(pid_t *)arg = gettid();
	return NULL;
}

/* Joined and gone: the kernel no longer lists the thread (the jail counts them). */
START_TEST(thread_gone_after_join)
{
	char path[64];
	int i;

	for (i = 0; i < 50; i++) {
		pthread_t t;
		pid_t tid = 0;

		ck_assert_int_eq(husk_thread_create(&t, own_tid, &tid), 0);
		ck_assert_int_eq(pthread_join(t, NULL), 0);
		ck_assert_int_gt(tid, 0);
		husk_thread_gone(tid);
		snprintf(path, sizeof(path), "/proc/self/task/%d", (int)tid);
		ck_assert_msg(access(path, F_OK) < 0 && errno == ENOENT,
			      "thread %d still listed after husk_thread_gone", (int)tid);
	}
}
END_TEST

START_TEST(poll_timeouts)
{
	/* No deadline: wait for an event. Due or past: do not wait. */
	ck_assert_int_eq(ms_until(UINT64_MAX, 5), -1);
	ck_assert_int_eq(ms_until(5, 5), 0);
	ck_assert_int_eq(ms_until(4, 5), 0);
	/* Never wake before due: round up. */
	ck_assert_int_eq(ms_until(6, 5), 1);
	ck_assert_int_eq(ms_until(5 + 1000, 5), 1);
	ck_assert_int_eq(ms_until(5 + 1001, 5), 2);
	/* Far deadlines are checked again within a minute (no int overflow). */
	ck_assert_int_eq(ms_until(UINT64_MAX - 1, 0), 60000);
	ck_assert_int_eq(ms_until(60000000ull, 0), 60000);
}
END_TEST

Suite *util_suite(void)
{
	Suite *s = suite_create("util");
	TCase *e = tcase_create("escape");
	TCase *h = tcase_create("host_file");

	tcase_add_test(e, escape_controls);
	tcase_add_test(e, mkdir_p_modes);
	tcase_add_test(e, sizes);
	tcase_add_test(e, thread_stack_below_huge_page);
	tcase_add_test(e, thread_gone_after_join);
	tcase_add_test(e, poll_timeouts);
	tcase_add_checked_fixture(h, setup, teardown);
	tcase_add_test(h, output_creates_and_truncates);
	tcase_add_test(h, output_refuses_links_fifos_dirs);
	tcase_add_test(h, output_owner);
	suite_add_tcase(s, e);
	suite_add_tcase(s, h);
	return s;
}
