/*
 * Unit tests for phase.c: marks relative to husk's start, the exec time a
 * spawner reports, what survives the import from a VM process, the JSON.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "machine/phase.h"
#include "suites.h"
#include "lib/util.h"

START_TEST(marks_are_relative_and_moved)
{
	struct phase_log a, b;
	uint64_t t0 = now_us() - 5000;
	volatile unsigned long spin = 0;
	int i;

	phase_init(&a, t0);
	ck_assert_int_eq(a.us[PH_KVM_OPEN], -1);
	phase_mark(PH_KVM_OPEN);
	ck_assert_int_ge(a.us[PH_KVM_OPEN], 5000);
	ck_assert_int_lt(a.us[PH_KVM_OPEN], 5000 + 10000000);
	phase_set(PH_EXEC, -7);
	ck_assert_int_eq(a.us[PH_EXEC], -1);
	phase_set(PH_EXEC, 321);
	/* Moving keeps what was marked and records into the new log only. */
	memset(&b, 0xff, sizeof(b));
	phase_move(&b);
	ck_assert_int_eq(b.us[PH_EXEC], 321);
	ck_assert_int_eq(b.us[PH_KVM_OPEN], a.us[PH_KVM_OPEN]);
	phase_mark(PH_MEMORY);
	ck_assert_int_ge(b.us[PH_MEMORY], 5000);
	ck_assert_int_eq(a.us[PH_MEMORY], -1);
	ck_assert_ptr_eq(phase_current(), &b);
	/* The go and the first KVM_RUN also take the process's CPU time. */
	ck_assert_int_eq(a.cpu_us[PH_CPU_VM], -1);
	phase_mark(PH_SUP_GO);
	for (i = 0; i < 2000000; i++)
		spin += i;
	phase_mark(PH_FIRST_RUN);
	ck_assert_int_gt(b.cpu_us[PH_CPU_SUPERVISOR], 0);
	ck_assert_int_gt(b.cpu_us[PH_CPU_VM], b.cpu_us[PH_CPU_SUPERVISOR]);
	phase_move(NULL);
	phase_mark(PH_VCPUS);	/* no log: nothing happens */
	ck_assert_int_eq(b.us[PH_VCPUS], -1);
	ck_assert_ptr_null(phase_current());
	phase_set(PH_NR, 1);	/* out of range: ignored */
}
END_TEST

START_TEST(exec_from_spawner)
{
	ck_assert_int_eq(phase_exec_us("1000", 1500), 500);
	ck_assert_int_eq(phase_exec_us(NULL, 1500), -1);
	ck_assert_int_eq(phase_exec_us("", 1500), -1);
	ck_assert_int_eq(phase_exec_us("x12", 1500), -1);
	ck_assert_int_eq(phase_exec_us("2000", 1500), -1);	/* later than now */
	ck_assert_int_eq(phase_exec_us("1", 20000000), -1);	/* 20 s before */
	ck_assert_int_eq(phase_exec_us("18446744073709551615", 5), -1);
}
END_TEST

START_TEST(import_clamps)
{
	struct phase_log src, dst;
	int i;

	for (i = 0; i < PH_NR; i++)
		src.us[i] = i * 100;
	src.us[PH_VCPUS] = -5;
	src.us[PH_JAIL] = INT64_MAX;
	src.us[PH_FIRST_RUN] = 1001;
	src.cpu_us[PH_CPU_SUPERVISOR] = 1000 * PHASE_MAX_CPUS;
	src.cpu_us[PH_CPU_VM] = 1000 * PHASE_MAX_CPUS + PHASE_MAX_CPUS;
	phase_import(&dst, &src, 1000);
	ck_assert_int_eq(dst.cpu_us[PH_CPU_SUPERVISOR], 1000 * PHASE_MAX_CPUS);
	ck_assert_int_eq(dst.cpu_us[PH_CPU_VM], -1);	/* more than the CPUs could give */
	src.cpu_us[PH_CPU_VM] = -3;
	phase_import(&dst, &src, 1000);
	ck_assert_int_eq(dst.cpu_us[PH_CPU_VM], -1);
	ck_assert_int_eq(dst.us[PH_KVM_OPEN], PH_KVM_OPEN * 100);
	ck_assert_int_eq(dst.us[PH_VCPUS], -1);
	ck_assert_int_eq(dst.us[PH_JAIL], -1);
	ck_assert_int_eq(dst.us[PH_FIRST_RUN], -1);
	ck_assert_int_eq(dst.us[0], 0);
}
END_TEST

START_TEST(json_names_every_phase)
{
	struct phase_log l;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;
	int i;

	for (i = 0; i < PH_NR; i++)
		l.us[i] = -1;
	l.us[PH_KVM_OPEN] = 42;
	l.cpu_us[PH_CPU_SUPERVISOR] = -1;
	l.cpu_us[PH_CPU_VM] = 7;
	f = open_memstream(&buf, &len);
	phase_json(f, &l);
	fclose(f);
	ck_assert_ptr_nonnull(strstr(buf, "\"kvm_open\":42,"));
	ck_assert_ptr_nonnull(strstr(buf, "\"exec\":null,"));
	ck_assert_ptr_nonnull(strstr(buf, "\"first_kvm_run\":null},"));
	ck_assert_ptr_nonnull(strstr(buf, "\"cpu_us\":{\"supervisor\":null,\"vm\":7}"));
	ck_assert(!strncmp(buf, "\"phases_us\":{", 13));
	for (i = 0; i < PH_NR; i++) {
		ck_assert_str_ne(phase_name(i), "?");
		ck_assert_ptr_nonnull(strstr(buf, phase_name(i)));
	}
	ck_assert_str_eq(phase_name(PH_NR), "?");
	free(buf);
}
END_TEST

Suite *phase_suite(void)
{
	Suite *s = suite_create("phase");
	TCase *c = tcase_create("core");

	tcase_add_test(c, marks_are_relative_and_moved);
	tcase_add_test(c, exec_from_spawner);
	tcase_add_test(c, import_clamps);
	tcase_add_test(c, json_names_every_phase);
	suite_add_tcase(s, c);
	return s;
}
