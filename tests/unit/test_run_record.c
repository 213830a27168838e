/*
 * Unit tests for run_record: the JSON result record's full shape against
 * golden files (tests/unit/golden/), and the checks on the VM process's
 * report (a VM process the guest took over may write anything there).
 *
 * A change to the record's shape must change a golden file too, and, when
 * a field changes meaning or goes away, RUN_RECORD_SCHEMA.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox/cgroup.h"
#include "run/run_int.h"
#include "suites.h"
#include "lib/util.h"

static char *record(const struct run_result *r)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	ck_assert_ptr_nonnull(f);
	run_record_json(f, r);
	ck_assert_int_eq(fclose(f), 0);
	return buf;
}

static char *golden(const char *name)
{
	const char *top = getenv("top_srcdir");
	char path[4096], *buf;
	long n;
	FILE *f;

	snprintf(path, sizeof(path), "%s/tests/unit/golden/%s", top ? top : ".", name);
	f = fopen(path, "r");
	ck_assert_msg(f != NULL, "cannot open %s", path);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = calloc(1, n + 1);
	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(fread(buf, 1, n, f), n);
	fclose(f);
	return buf;
}

static void assert_golden(const struct run_result *r, const char *name)
{
	char *got = record(r), *want = golden(name);

	ck_assert_msg(!strcmp(got, want), "record differs from %s:\n got: %s\nwant: %s",
		      name, got, want);
	/* One line: consumers take the last line of stdout. */
	ck_assert_ptr_eq(strchr(got, '\n'), got + strlen(got) - 1);
	free(got);
	free(want);
}

static void base(struct run_result *r)
{
	int i;

	memset(r, 0, sizeof(*r));
	r->exit_code = 3;
	r->job_started = r->job_exited = true;
	r->job_code = 3;
	r->user_us = 1200;
	r->sys_us = 800;
	r->maxrss_kib = 4096;
	r->stdout_bytes = 10;
	r->stderr_bytes = 4;
	r->reason = VM_STOP_POWEROFF;
	r->t_first_run = 150000;
	r->t_init = 900000;
	r->t_job_start = 1000000;
	r->t_job_end = 1100000;
	r->t_exit = 1150000;
	r->t_teardown = 1200000;
	r->start_epoch_us = 1700000000000000ull;
	r->t_restore_open = r->t_restore_vm = 12345;	/* not shown for a cold start */
	for (i = 0; i < PH_NR; i++)
		r->phases.us[i] = -1;
	for (i = 0; i < PH_CPU_NR; i++)
		r->phases.cpu_us[i] = -1;
	for (i = 0; i < IS_NR; i++)
		r->guest_steps[i] = -1;
}

START_TEST(record_minimal)
{
	struct run_result r;

	base(&r);
	assert_golden(&r, "run-record-minimal.json");
}
END_TEST

START_TEST(record_full)
{
	struct run_result r;
	unsigned i;

	base(&r);
	r.exit_code = 125;
	r.from_template = true;
	r.t_restore_open = 2000;
	r.t_restore_vm = 40000;
	r.phases.us[PH_OPTIONS] = 80;
	r.phases.us[PH_KVM_OPEN] = 3000;
	r.phases.us[PH_FIRST_RUN] = 150000;
	r.phases.cpu_us[PH_CPU_SUPERVISOR] = 21000;
	r.phases.cpu_us[PH_CPU_VM] = 64000;
	r.guest_steps[IS_KERNEL] = 610000;
	r.guest_steps[IS_JOB_STARTED] = 700000;
	r.job_exited = false;
	r.timed_out = false;
	r.stdout_dropped = 2;
	r.files_committed = false;
	snprintf(r.error, sizeof(r.error), "guest said \"no\"\n\x1b[31m");
	snprintf(r.console_tail, sizeof(r.console_tail), "BUG: oops\nKernel panic\n");
	r.reason = VM_STOP_HOST_ERROR;
	r.jailed = true;
	r.jail_uid = 1879048192;
	r.cg_on = true;
	snprintf(r.cg_mode, sizeof(r.cg_mode), "v2");
	r.cg_have = CGROUP_USAGE_CPU | CGROUP_USAGE_THROTTLED | CGROUP_USAGE_MEM_PEAK |
		    CGROUP_USAGE_OOM;
	r.cg_cpu_us = 5;
	r.cg_throttled_us = 6;
	r.cg_mem_peak = 7;
	r.cg_oom_kills = 1;
	r.net = r.net_counters = true;
	r.net_ctr.packets = 11;
	r.net_ctr.bytes = 12;
	for (i = 0; i < EGRESS_DROP__MAX; i++)
		r.net_ctr.drops[i] = i;
	r.net_ctr.dropped = 13;
	r.net_ctr.in_packets = 14;
	r.net_ctr.in_bytes = 15;
	snprintf(r.anomaly, sizeof(r.anomaly), "too many connections");
	r.nr_denied = 2;
	r.denied[0].family = 4;
	r.denied[0].proto = IPPROTO_TCP;
	r.denied[0].port = 443;
	r.denied[0].reason = 1;
	inet_pton(AF_INET, "192.0.2.1", r.denied[0].addr);
	r.denied[1].family = 6;
	r.denied[1].proto = IPPROTO_UDP;
	r.denied[1].port = 53;
	r.denied[1].reason = 2;
	inet_pton(AF_INET6, "2001:db8::1", r.denied[1].addr);
	r.dns_on = true;
	r.dns.queries = 3;
	r.dns.allowed = 1;
	r.dns.refused = 2;
	r.dns.foreign = 4;
	r.dns_learn.opened = 5;
	r.dns_learn.quota_full = 6;
	snprintf(r.dns_fault, sizeof(r.dns_fault), "the DNS helper sent garbage");
	r.nr_dns_refused = 2;
	snprintf(r.dns_refused[0], sizeof(r.dns_refused[0]), "exfil.example");
	snprintf(r.dns_refused[1], sizeof(r.dns_refused[1]), "a\"b");
	r.policy_changes = 2;
	r.policy_log_full = true;
	snprintf(r.policy_log, sizeof(r.policy_log),
		 "{\"allow\":[\"192.0.2.0/24:tcp:443\"],\"at_ms\":1500}");
	assert_golden(&r, "run-record-full.json");
}
END_TEST

/* What a taken-over VM process can write is clamped on the way in. */
START_TEST(report_import_clamps)
{
	struct run_vm_report v;
	struct run_result r;

	memset(&v, 0xff, sizeof(v));
	memset(&r, 0, sizeof(r));
	run_report_import(&r, &v, 5000000);
	ck_assert(!r.job_exited);
	ck_assert_int_eq(r.job_code, 0);
	ck_assert_int_eq(r.job_signal, 0);
	ck_assert_int_eq(r.reason, VM_STOP_HOST_ERROR);
	ck_assert_int_eq(r.signal, 0);
	ck_assert_uint_le(strlen(r.error), sizeof(r.error) - 1);
	ck_assert_int_eq(r.t_first_run, -1);
	ck_assert_int_eq(r.t_exit, -1);
	ck_assert_int_eq(r.guest_steps[IS_KERNEL], -1);
	ck_assert_int_eq(r.guest_steps[IS_NR - 1], -1);
	ck_assert_uint_le(r.stdout_dropped, r.stdout_bytes);

	/* The error string has no NUL of its own: it is cut, not overrun. */
	memset(&v, 0, sizeof(v));
	memset(&r, 0, sizeof(r));
	memset(v.error, 'e', sizeof(v.error));
	memset(v.console_tail, 'c', sizeof(v.console_tail));
	v.job_started = v.job_exited = 1;
	v.job_code = 255;
	v.job_signal = 0;
	v.t_init = 100;
	v.t_job_end = 6000000;		/* later than the run has lasted */
	v.stdout_bytes = 5;
	v.stdout_dropped = 9;
	v.guest_steps[IS_KERNEL] = 600000;
	v.guest_steps[IS_HELLO] = 3600 * 1000000ll + 1;	/* no step of a start */
	run_report_import(&r, &v, 5000000);
	ck_assert_int_eq(r.guest_steps[IS_KERNEL], 600000);
	ck_assert_int_eq(r.guest_steps[IS_HELLO], -1);
	ck_assert(r.job_exited);
	ck_assert_int_eq(r.job_code, 255);
	ck_assert_uint_eq(strlen(r.error), sizeof(r.error) - 1);
	ck_assert_uint_eq(strlen(r.console_tail), sizeof(r.console_tail) - 1);
	ck_assert_int_eq(r.t_init, 100);
	ck_assert_int_eq(r.t_job_end, -1);
	ck_assert_uint_eq(r.stdout_dropped, 5);

	/* An exit without a start did not happen. */
	memset(&v, 0, sizeof(v));
	v.job_exited = 1;
	memset(&r, 0, sizeof(r));
	run_report_import(&r, &v, 1);
	ck_assert(!r.job_exited);

	/* Impossible exit statuses are an error, not a job result. */
	memset(&v, 0, sizeof(v));
	v.job_started = v.job_exited = 1;
	v.job_code = 300;
	memset(&r, 0, sizeof(r));
	run_report_import(&r, &v, 1);
	ck_assert(!r.job_exited);
	ck_assert_ptr_nonnull(strstr(r.error, "impossible exit status"));
}
END_TEST

/* Channel messages are taken whole or refused, never cut. */
START_TEST(chan_whole_or_refused)
{
	static uint8_t big[RUN_CHAN_MAX + 64], in[RUN_CHAN_MAX];
	int sv[2];

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	ck_assert_int_eq(run_chan_recv(sv[0], in, sizeof(in)), 0);	/* none waiting */
	memset(big, 7, sizeof(big));
	ck_assert_int_eq(send(sv[1], big, RUN_CHAN_MAX, 0), (ssize_t)RUN_CHAN_MAX);
	ck_assert_int_eq(run_chan_recv(sv[0], in, sizeof(in)), (ssize_t)RUN_CHAN_MAX);
	ck_assert_int_eq(in[RUN_CHAN_MAX - 1], 7);
	ck_assert_int_eq(send(sv[1], big, RUN_CHAN_MAX + 1, 0), (ssize_t)RUN_CHAN_MAX + 1);
	ck_assert_int_eq(run_chan_recv(sv[0], in, sizeof(in)), -EMSGSIZE);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "over the"));
	ck_assert_int_eq(send(sv[1], big, 2, 0), 2);
	ck_assert_int_eq(run_chan_recv(sv[0], in, sizeof(in)), -EPROTO);
	/* The refused ones are gone: the next message is read normally. */
	ck_assert_int_eq(send(sv[1], big, 10, 0), 10);
	ck_assert_int_eq(run_chan_recv(sv[0], in, sizeof(in)), 10);
	close(sv[1]);
	ck_assert_int_eq(run_chan_recv(sv[0], in, sizeof(in)), -EPIPE);
	close(sv[0]);

	/* A peer gone with our message unread (a reset) is gone, not a failure. */
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	ck_assert_int_eq(send(sv[0], big, 4, 0), 4);
	close(sv[1]);
	ck_assert_int_eq(run_chan_recv(sv[0], in, sizeof(in)), -EPIPE);
	close(sv[0]);
}
END_TEST

Suite *run_record_suite(void)
{
	Suite *s = suite_create("run_record");
	TCase *tc = tcase_create("record");

	tcase_add_test(tc, record_minimal);
	tcase_add_test(tc, record_full);
	tcase_add_test(tc, report_import_clamps);
	tcase_add_test(tc, chan_whole_or_refused);
	suite_add_tcase(s, tc);
	return s;
}
