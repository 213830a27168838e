/*
 * Unit tests for accounts: /etc/passwd and /etc/group read as files, with
 * the lines real hosts have (comments, blanks, NIS "+" entries, groups
 * with many members) and files that are missing.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/accounts.h"
#include "suites.h"

static char passwd[64], group[64];

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	ck_assert_int_eq(fclose(f), 0);
}

static void setup(void)
{
	int fd;

	strcpy(passwd, "/tmp/husk-passwd-XXXXXX");
	strcpy(group, "/tmp/husk-group-XXXXXX");
	fd = mkstemp(passwd);
	ck_assert_int_ge(fd, 0);
	close(fd);
	fd = mkstemp(group);
	ck_assert_int_ge(fd, 0);
	close(fd);
	write_file(passwd, "root:x:0:0:root:/root:/bin/bash\n"
		   "daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n"
		   "\n"
		   "this line is not an entry\n"
		   "alice:x:1000:1000:Alice:/home/alice:/bin/bash\n"
		   "bob:x:1001:2000::/home/bob:/bin/sh\n");
	write_file(group, "root:x:0:\n"
		   "daemon:x:1:\n"
		   "alice:x:1000:\n"
		   "staff:x:2000:\n"
		   "kvm:x:106:alice,carol\n");
	accounts_passwd_path = passwd;
	accounts_group_path = group;
}

static void teardown(void)
{
	unlink(passwd);
	unlink(group);
	accounts_passwd_path = "/etc/passwd";
	accounts_group_path = "/etc/group";
}

START_TEST(taken_ids)
{
	ck_assert(account_uid_taken(0));
	ck_assert(account_uid_taken(1001));
	ck_assert(!account_uid_taken(1002));
	ck_assert(!account_uid_taken(1879048192));
	ck_assert(account_gid_taken(106));
	ck_assert(!account_gid_taken(1001));	/* bob's uid, but no group 1001 */
}
END_TEST

START_TEST(group_by_name)
{
	gid_t g = 7;

	ck_assert_int_eq(account_group_gid("kvm", &g), 0);
	ck_assert_uint_eq(g, 106);
	ck_assert_int_eq(account_group_gid("wheel", &g), -ENOENT);
	ck_assert_int_eq(account_group_gid("kv", &g), -ENOENT);
	ck_assert_int_eq(account_group_gid("", &g), -ENOENT);
}
END_TEST

START_TEST(membership)
{
	/* The passwd primary group, a member list. */
	ck_assert(account_in_group(1001, 2000));
	ck_assert(account_in_group(1000, 106));
	ck_assert(!account_in_group(1001, 106));
	/* carol is listed in kvm but has no passwd entry: her uid is unknown. */
	ck_assert(!account_in_group(1002, 106));
}
END_TEST

START_TEST(own_gid_is_not_membership)
{
	/*
	 * A process running with the group's gid (setgid, or given it) is not
	 * a member: uid 4242 is nobody's, bob's primary group is 2000.
	 */
	ck_assert(!account_in_group(4242, 106));
	ck_assert(!account_in_group(1001, 106));
	ck_assert(!account_in_group(0, 106));
}
END_TEST

START_TEST(long_group_line)
{
	size_t n = 4000, i;
	char *text = malloc(n * 8 + 64), *p = text;

	ck_assert_ptr_nonnull(text);
	p += sprintf(p, "crowd:x:3000:");
	for (i = 0; i < n; i++)
		p += sprintf(p, "%su%zu", i ? "," : "", i);
	strcpy(p, ",alice\nafter:x:3001:\n");
	write_file(group, text);
	free(text);
	/* Far longer than the first buffer: read again, not cut or skipped. */
	ck_assert(account_in_group(1000, 3000));
	ck_assert(account_gid_taken(3001));
}
END_TEST

START_TEST(missing_files)
{
	gid_t g;

	accounts_passwd_path = "/nonexistent/passwd";
	accounts_group_path = "/nonexistent/group";
	ck_assert(!account_uid_taken(0));
	ck_assert(!account_gid_taken(0));
	ck_assert_int_eq(account_group_gid("root", &g), -ENOENT);
	ck_assert(!account_in_group(0, 0));
	ck_assert(!account_in_group(0, 5));
}
END_TEST

Suite *accounts_suite(void)
{
	Suite *s = suite_create("accounts");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, taken_ids);
	tcase_add_test(tc, group_by_name);
	tcase_add_test(tc, membership);
	tcase_add_test(tc, own_gid_is_not_membership);
	tcase_add_test(tc, long_group_line);
	tcase_add_test(tc, missing_files);
	suite_add_tcase(s, tc);
	return s;
}
