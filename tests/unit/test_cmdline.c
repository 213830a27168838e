/*
 * Unit tests for cmdline: joining parameters with single spaces, the exact
 * length limit (max - 1 characters plus the NUL), leaving the line unchanged
 * when an append fails, and refusing control characters.
 */
#include <errno.h>
#include <string.h>

#include "machine/cmdline.h"
#include "lib/util.h"
#include "suites.h"

START_TEST(init_empty)
{
	char buf[16];
	struct cmdline c;

	memset(buf, 'z', sizeof(buf));
	cmdline_init(&c, buf, sizeof(buf));
	ck_assert_str_eq(buf, "");
	ck_assert_uint_eq(c.len, 0);
	ck_assert_uint_eq(c.max, sizeof(buf));
	ck_assert_ptr_eq(c.buf, buf);
}
END_TEST

START_TEST(init_zero_max_untouched)
{
	char buf[1] = { 'z' };
	struct cmdline c;

	cmdline_init(&c, buf, 0);
	ck_assert_int_eq(buf[0], 'z');
	ck_assert_int_eq(cmdline_append(&c, "a"), -E2BIG);
	ck_assert_int_eq(buf[0], 'z');
}
END_TEST

START_TEST(join_single_spaces)
{
	char buf[128];
	struct cmdline c;

	cmdline_init(&c, buf, sizeof(buf));
	ck_assert_int_eq(cmdline_append(&c, "console=ttyS0 reboot=k panic=-1"), 0);
	ck_assert_str_eq(buf, "console=ttyS0 reboot=k panic=-1");
	ck_assert_int_eq(cmdline_append(&c, "root=/dev/vda"), 0);
	ck_assert_int_eq(cmdline_append(&c, "init=/sbin/init quiet"), 0);
	ck_assert_str_eq(buf, "console=ttyS0 reboot=k panic=-1 "
			 "root=/dev/vda init=/sbin/init quiet");
	ck_assert_uint_eq(c.len, strlen(buf));
}
END_TEST

START_TEST(first_append_no_leading_space)
{
	char buf[16];
	struct cmdline c;

	cmdline_init(&c, buf, sizeof(buf));
	ck_assert_int_eq(cmdline_append(&c, "a"), 0);
	ck_assert_str_eq(buf, "a");
	ck_assert_int_eq(cmdline_append(&c, "b"), 0);
	ck_assert_str_eq(buf, "a b");
	ck_assert_uint_eq(c.len, 3);
}
END_TEST

START_TEST(empty_append_noop)
{
	char buf[16];
	struct cmdline c;

	cmdline_init(&c, buf, sizeof(buf));
	ck_assert_int_eq(cmdline_append(&c, ""), 0);
	ck_assert_str_eq(buf, "");
	ck_assert_uint_eq(c.len, 0);
	ck_assert_int_eq(cmdline_append(&c, "x"), 0);
	ck_assert_int_eq(cmdline_append(&c, ""), 0);
	ck_assert_str_eq(buf, "x");	/* no trailing space */
	ck_assert_uint_eq(c.len, 1);
	ck_assert_int_eq(cmdline_append(&c, "y"), 0);
	ck_assert_str_eq(buf, "x y");
}
END_TEST

START_TEST(exact_fit_first)
{
	char buf[8];
	struct cmdline c;

	cmdline_init(&c, buf, sizeof(buf));
	ck_assert_int_eq(cmdline_append(&c, "abcdefgh"), -E2BIG);	/* 8 = max */
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "would be 8 bytes; the limit is 7"));
	ck_assert_str_eq(buf, "");
	ck_assert_uint_eq(c.len, 0);
	ck_assert_int_eq(cmdline_append(&c, "abcdefg"), 0);		/* 7 = max - 1 */
	ck_assert_str_eq(buf, "abcdefg");
	ck_assert_uint_eq(c.len, 7);
	/* Full: not even one more character. */
	ck_assert_int_eq(cmdline_append(&c, "h"), -E2BIG);
	ck_assert_str_eq(buf, "abcdefg");
}
END_TEST

START_TEST(exact_fit_with_separator)
{
	char buf[8];
	struct cmdline c;

	cmdline_init(&c, buf, sizeof(buf));
	ck_assert_int_eq(cmdline_append(&c, "abc"), 0);
	/* "abc" + " " + "defg" = 8 characters: one too many. */
	ck_assert_int_eq(cmdline_append(&c, "defg"), -E2BIG);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "would be 8 bytes"));
	ck_assert_str_eq(buf, "abc");
	ck_assert_uint_eq(c.len, 3);
	/* "abc def" = 7: exactly fits. */
	ck_assert_int_eq(cmdline_append(&c, "def"), 0);
	ck_assert_str_eq(buf, "abc def");
	ck_assert_uint_eq(c.len, 7);
}
END_TEST

START_TEST(unchanged_on_failure)
{
	char buf[32], before[32];
	struct cmdline c;

	memset(buf, '#', sizeof(buf));
	cmdline_init(&c, buf, sizeof(buf));
	ck_assert_int_eq(cmdline_append(&c, "console=ttyS0"), 0);
	memcpy(before, buf, sizeof(buf));
	ck_assert_int_eq(cmdline_append(&c, "a-very-long-parameter=xxxxxxxxxxxxxx"), -E2BIG);
	ck_assert_mem_eq(buf, before, sizeof(buf));
	ck_assert_uint_eq(c.len, 13);
	ck_assert_int_eq(cmdline_append(&c, "ok\tno"), -EINVAL);
	ck_assert_mem_eq(buf, before, sizeof(buf));
	ck_assert_uint_eq(c.len, 13);
}
END_TEST

START_TEST(control_characters_rejected)
{
	static const char *const bad[] = {
		"a\nb", "\tx", "x\r", "esc\x1b[0m", "del\x7f", "\x01",
		"init=/bin/sh\n", "x\x1f",
	};
	char buf[64];
	struct cmdline c;
	unsigned i;

	cmdline_init(&c, buf, sizeof(buf));
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(cmdline_append(&c, bad[i]) == -EINVAL, "case %u accepted", i);
		ck_assert_ptr_nonnull(strstr(husk_lasterr(), "control character"));
		ck_assert_str_eq(buf, "");
		ck_assert_uint_eq(c.len, 0);
	}
	ck_assert_int_eq(cmdline_append(&c, "a\nb"), -EINVAL);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "(0x0a)"));
	ck_assert_int_eq(cmdline_append(&c, "del\x7f"), -EINVAL);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "(0x7f)"));
}
END_TEST

START_TEST(control_check_before_length)
{
	/* A control character is reported even when the text is also too long. */
	char buf[4];
	struct cmdline c;

	cmdline_init(&c, buf, sizeof(buf));
	ck_assert_int_eq(cmdline_append(&c, "toolong\n"), -EINVAL);
}
END_TEST

START_TEST(printable_and_high_bytes_ok)
{
	char buf[64];
	struct cmdline c;

	cmdline_init(&c, buf, sizeof(buf));
	ck_assert_int_eq(cmdline_append(&c, "a=\"b c\" ~!@#$%^&*()"), 0);
	ck_assert_int_eq(cmdline_append(&c, "caf\xc3\xa9"), 0);	/* UTF-8 is not control */
	ck_assert_str_eq(buf, "a=\"b c\" ~!@#$%^&*() caf\xc3\xa9");
}
END_TEST

START_TEST(kernel_limit_2048)
{
	static char buf[2048];
	char part[1100];
	struct cmdline c;

	cmdline_init(&c, buf, sizeof(buf));
	memset(part, 'p', sizeof(part));
	part[1023] = '\0';
	ck_assert_int_eq(cmdline_append(&c, part), 0);		/* 1023 */
	ck_assert_int_eq(cmdline_append(&c, part), 0);		/* + 1 + 1023 = 2047 */
	ck_assert_uint_eq(c.len, 2047);
	ck_assert_uint_eq(strlen(buf), 2047);
	ck_assert_int_eq(buf[1023], ' ');
	ck_assert_int_eq(cmdline_append(&c, "q"), -E2BIG);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "the limit is 2047"));
}
END_TEST

Suite *cmdline_suite(void)
{
	Suite *s = suite_create("cmdline");
	TCase *tc = tcase_create("cmdline");

	tcase_add_test(tc, init_empty);
	tcase_add_test(tc, init_zero_max_untouched);
	tcase_add_test(tc, join_single_spaces);
	tcase_add_test(tc, first_append_no_leading_space);
	tcase_add_test(tc, empty_append_noop);
	tcase_add_test(tc, exact_fit_first);
	tcase_add_test(tc, exact_fit_with_separator);
	tcase_add_test(tc, unchanged_on_failure);
	tcase_add_test(tc, control_characters_rejected);
	tcase_add_test(tc, control_check_before_length);
	tcase_add_test(tc, printable_and_high_bytes_ok);
	tcase_add_test(tc, kernel_limit_2048);
	suite_add_tcase(s, tc);
	return s;
}
