/*
 * Unit tests for deny_file: the host-wide egress deny file's format (ranges
 * as --deny takes them, comments, blank lines), its errors naming
 * path:line, its limits, and a missing file meaning no ranges. Files are
 * written to a scratch directory; nothing here loads BPF.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "net/deny_file.h"
#include "lib/util.h"
#include "suites.h"

#define MAX_GOT 8

static char dir[] = "/tmp/husk-denyfile-XXXXXX";
static char path[128];
static struct got {
	int family;
	char addr[INET6_ADDRSTRLEN];
	unsigned plen, line;
} got[MAX_GOT];
static unsigned ngot;

static int collect(void *arg, const struct run_deny *d, unsigned line)
{
	struct got *g;

	if (ngot >= MAX_GOT) {
		ngot++;		/* counted, not kept */
		return 0;
	}
	g = &got[ngot++];
	g->family = d->family;
	inet_ntop(d->family, run_cidr_addr(d), g->addr, sizeof(g->addr));
	g->plen = d->prefixlen;
	g->line = line;
	return 0;
}

static void write_file(const char *text)
{
	FILE *f = fopen(path, "w");

	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fputs(text, f) >= 0, 1);
	ck_assert_int_eq(fclose(f), 0);
}

/* Read text as the deny file; returns what deny_file_read returned. */
static int read_text(const char *text)
{
	write_file(text);
	ngot = 0;
	return deny_file_read(path, collect, NULL);
}

static void setup(void)
{
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/egress-deny", dir);
}

static void teardown(void)
{
	unlink(path);
	rmdir(dir);
	memcpy(dir + strlen(dir) - 6, "XXXXXX", 6);
}

START_TEST(ranges_comments_blank_lines)
{
	int n = read_text("# site policy\n"
			  "\n"
			  "198.18.0.0/15\n"
			  "   203.0.113.240/28   # the lab\n"
			  "\t[2001:db8:bad::]/48\r\n"
			  "#[2001:db8::]/32\n"
			  "192.0.2.7/32");	/* no final newline */

	ck_assert_int_eq(n, 4);
	ck_assert_uint_eq(ngot, 4);
	ck_assert_int_eq(got[0].family, AF_INET);
	ck_assert_str_eq(got[0].addr, "198.18.0.0");
	ck_assert_uint_eq(got[0].plen, 15);
	ck_assert_uint_eq(got[0].line, 3);
	ck_assert_str_eq(got[1].addr, "203.0.113.240");
	ck_assert_uint_eq(got[1].plen, 28);
	ck_assert_uint_eq(got[1].line, 4);
	ck_assert_int_eq(got[2].family, AF_INET6);
	ck_assert_str_eq(got[2].addr, "2001:db8:bad::");
	ck_assert_uint_eq(got[2].plen, 48);
	ck_assert_uint_eq(got[2].line, 5);
	ck_assert_str_eq(got[3].addr, "192.0.2.7");
	ck_assert_uint_eq(got[3].line, 7);
}
END_TEST

START_TEST(empty_and_missing_files)
{
	ck_assert_int_eq(read_text(""), 0);
	ck_assert_int_eq(read_text("# nothing yet\n\n   \n"), 0);
	unlink(path);
	ngot = 0;
	ck_assert_int_eq(deny_file_read(path, collect, NULL), 0);
	ck_assert_uint_eq(ngot, 0);
}
END_TEST

/* Every malformed line is an error that names file:line. */
START_TEST(malformed_lines_name_file_and_line)
{
	static const struct {
		const char *text, *want;
		unsigned line;
	} bad[] = {
		{ "10.0.0.0/8\n10.0.0.1/8\n", "host bits set", 2 },
		{ "# x\n\n10.0.0.0\n", "needs a CIDR", 3 },
		{ "2001:db8::/32\n", "brackets", 1 },
		{ "10.0.0.0/33\n", "needs a CIDR", 1 },
		{ "10.0.0.0/8 192.168.0.0/16\n", "one range per line", 1 },
		{ "10.0.0.0/8:tcp\n", "needs a CIDR", 1 },
		{ "example.com\n", "needs a CIDR", 1 },
		{ "[::1]/129\n", "needs a CIDR", 1 },
	};
	char want[256];
	unsigned i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_int_eq(read_text(bad[i].text), -EINVAL);
		snprintf(want, sizeof(want), "%s:%u: ", path, bad[i].line);
		ck_assert_msg(!strncmp(husk_lasterr(), want, strlen(want)),
			      "'%s': message '%s' does not start with '%s'", bad[i].text,
			      husk_lasterr(), want);
		ck_assert_msg(strstr(husk_lasterr(), bad[i].want), "'%s': message '%s'",
			      bad[i].text, husk_lasterr());
	}
	/* Nothing after the bad line is handed on. */
	ck_assert_int_eq(read_text("192.0.2.0/24\nbogus\n198.51.100.0/24\n"), -EINVAL);
	ck_assert_uint_eq(ngot, 1);
}
END_TEST

START_TEST(limits)
{
	char line[DENY_FILE_MAX_LINE + 40], *big;
	size_t n = 0, cap = (DENY_FILE_MAX_RANGES + 1) * 16;
	unsigned i;

	memset(line, ' ', sizeof(line));
	strcpy(line + DENY_FILE_MAX_LINE, "10.0.0.0/8\n");
	ck_assert_int_eq(read_text(line), -EINVAL);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), ":1: line longer than"));

	big = malloc(cap);
	ck_assert_ptr_nonnull(big);
	for (i = 0; i <= DENY_FILE_MAX_RANGES; i++)
		n += snprintf(big + n, cap - n, "10.%u.%u.0/24\n", i >> 8, i & 0xff);
	ck_assert_int_eq(read_text(big), -E2BIG);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "more than"));
	ck_assert_uint_eq(ngot, DENY_FILE_MAX_RANGES);
	free(big);

	write_file("10.0.0.0/8\n");
	ck_assert_int_eq(truncate(path, DENY_FILE_MAX_BYTES + 1), 0);
	ck_assert_int_eq(deny_file_read(path, collect, NULL), -EFBIG);
	unlink(path);
	ck_assert_int_eq(mkdir(path, 0700), 0);
	ck_assert_int_lt(deny_file_read(path, collect, NULL), 0);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), path));
	rmdir(path);
}
END_TEST

START_TEST(path_from_the_environment)
{
	unsetenv(DENY_FILE_ENV);
	ck_assert_str_eq(deny_file_path(), "/etc/husk/egress-deny");
	setenv(DENY_FILE_ENV, "", 1);
	ck_assert_str_eq(deny_file_path(), "/etc/husk/egress-deny");
	setenv(DENY_FILE_ENV, "/srv/husk/deny", 1);
	ck_assert_str_eq(deny_file_path(), "/srv/husk/deny");
	unsetenv(DENY_FILE_ENV);
}
END_TEST

Suite *deny_file_suite(void)
{
	Suite *s = suite_create("deny_file");
	TCase *t = tcase_create("deny_file");

	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, ranges_comments_blank_lines);
	tcase_add_test(t, empty_and_missing_files);
	tcase_add_test(t, malformed_lines_name_file_and_line);
	tcase_add_test(t, limits);
	tcase_add_test(t, path_from_the_environment);
	suite_add_tcase(s, t);
	return s;
}
