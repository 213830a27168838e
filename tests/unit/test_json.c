/*
 * Unit tests for json: json_put_string() written into an open_memstream FILE.
 * Covers quoting of plain ASCII, escaping of '"' and '\\', \n and \t, other
 * control bytes and DEL as \u00XX, bytes >= 0x80 as \u00XX (guest text is
 * not trusted to be UTF-8), the empty string, and a guest panic line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/json.h"
#include "suites.h"

static char *buf;
static size_t size;

/* json_put_string(s) as a malloc'd C string in buf. */
static const char *enc(const char *s)
{
	FILE *f;

	free(buf);
	buf = NULL;
	f = open_memstream(&buf, &size);
	ck_assert_ptr_nonnull(f);
	json_put_string(f, s);
	ck_assert_int_eq(fclose(f), 0);
	ck_assert_uint_eq(strlen(buf), size);
	return buf;
}

static void teardown(void)
{
	free(buf);
	buf = NULL;
}

START_TEST(plain_ascii)
{
	ck_assert_str_eq(enc("guest powered off (status 0)"),
			 "\"guest powered off (status 0)\"");
	ck_assert_str_eq(enc("~!@#$%^&*()_+{}|:<>?/'`"), "\"~!@#$%^&*()_+{}|:<>?/'`\"");
}
END_TEST

START_TEST(empty_string)
{
	ck_assert_str_eq(enc(""), "\"\"");
	ck_assert_uint_eq(size, 2);
}
END_TEST

START_TEST(quote_and_backslash)
{
	ck_assert_str_eq(enc("say \"hi\""), "\"say \\\"hi\\\"\"");
	ck_assert_str_eq(enc("C:\\dir\\"), "\"C:\\\\dir\\\\\"");
	ck_assert_str_eq(enc("\\\""), "\"\\\\\\\"\"");
}
END_TEST

START_TEST(newline_and_tab)
{
	ck_assert_str_eq(enc("a\nb\tc"), "\"a\\nb\\tc\"");
	ck_assert_str_eq(enc("\n\n"), "\"\\n\\n\"");
}
END_TEST

START_TEST(other_control_bytes)
{
	ck_assert_str_eq(enc("\x01"), "\"\\u0001\"");
	ck_assert_str_eq(enc("\r"), "\"\\u000d\"");
	ck_assert_str_eq(enc("\b\f"), "\"\\u0008\\u000c\"");
	ck_assert_str_eq(enc("\x1b[0m"), "\"\\u001b[0m\"");
	ck_assert_str_eq(enc("\x1f"), "\"\\u001f\"");
	ck_assert_str_eq(enc("\x7f"), "\"\\u007f\"");
	/* The neighbours of the escaped ranges pass through. */
	ck_assert_str_eq(enc(" ~"), "\" ~\"");
}
END_TEST

START_TEST(high_bytes)
{
	ck_assert_str_eq(enc("\x80"), "\"\\u0080\"");
	ck_assert_str_eq(enc("\xff"), "\"\\u00ff\"");
	/* UTF-8 "é" is two bytes, each escaped on its own. */
	ck_assert_str_eq(enc("caf\xc3\xa9"), "\"caf\\u00c3\\u00a9\"");
}
END_TEST

START_TEST(panic_detail)
{
	ck_assert_str_eq(enc("guest kernel panic: [    1.5] Kernel panic - not syncing: "
			     "\"init\"\tfailed\x07\xfe\\"),
			 "\"guest kernel panic: [    1.5] Kernel panic - not syncing: "
			 "\\\"init\\\"\\tfailed\\u0007\\u00fe\\\\\"");
}
END_TEST

START_TEST(appends_to_stream)
{
	FILE *f;

	free(buf);
	buf = NULL;
	f = open_memstream(&buf, &size);
	ck_assert_ptr_nonnull(f);
	fputs("{\"detail\":", f);
	json_put_string(f, "x\ny");
	fputc('}', f);
	ck_assert_int_eq(fclose(f), 0);
	ck_assert_str_eq(buf, "{\"detail\":\"x\\ny\"}");
}
END_TEST

Suite *json_suite(void)
{
	Suite *s = suite_create("json");
	TCase *tc = tcase_create("string");

	tcase_add_checked_fixture(tc, NULL, teardown);
	tcase_add_test(tc, plain_ascii);
	tcase_add_test(tc, empty_string);
	tcase_add_test(tc, quote_and_backslash);
	tcase_add_test(tc, newline_and_tab);
	tcase_add_test(tc, other_control_bytes);
	tcase_add_test(tc, high_bytes);
	tcase_add_test(tc, panic_detail);
	tcase_add_test(tc, appends_to_stream);
	suite_add_tcase(s, tc);
	return s;
}
