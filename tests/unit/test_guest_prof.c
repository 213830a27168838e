/*
 * Unit tests for guest_prof.c: the sample buffer's bounds and its file.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "machine/guest_prof.h"
#include "suites.h"

START_TEST(samples_bounded_and_written)
{
	struct guest_prof p;
	char path[] = "/tmp/husk-prof-XXXXXX", buf[256];
	int fd = mkstemp(path);
	ssize_t n;

	ck_assert_int_ge(fd, 0);
	unlink(path);
	ck_assert_int_lt(guest_prof_init(&p, 0), 0);
	ck_assert_int_lt(guest_prof_init(&p, GUEST_PROF_MAX + 1), 0);
	ck_assert_int_eq(guest_prof_init(&p, 2), 0);
	guest_prof_add(&p, 1500, 0xffffffff81000010ull);
	guest_prof_add(&p, 2500, 0x401000);
	guest_prof_add(&p, 3500, 0xdead);	/* past the cap: dropped */
	ck_assert_uint_eq(p.n, 2);
	ck_assert_int_eq(guest_prof_write(&p, fd), 0);
	n = pread(fd, buf, sizeof(buf) - 1, 0);
	ck_assert_int_gt(n, 0);
	buf[n] = '\0';
	ck_assert_str_eq(buf, "1500 ffffffff81000010\n2500 401000\n");
	guest_prof_free(&p);
	ck_assert_ptr_null(p.rip);
	close(fd);
	/* A writer that fails is an error, not a crash. */
	ck_assert_int_eq(guest_prof_init(&p, 1), 0);
	guest_prof_add(&p, 1, 2);
	ck_assert_int_lt(guest_prof_write(&p, -1), 0);
	guest_prof_free(&p);
}
END_TEST

Suite *guest_prof_suite(void)
{
	Suite *s = suite_create("guest_prof");
	TCase *c = tcase_create("core");

	tcase_add_test(c, samples_bounded_and_written);
	suite_add_tcase(s, c);
	return s;
}
