/*
 * Unit test runner: every suite of tier 1 in one binary. Check forks per
 * test, so a crash in one test is reported, not fatal. Check's own
 * CK_RUN_SUITE=name / CK_RUN_CASE=name select a single suite or case.
 *
 * Skips cross the fork through a file: each skipped check appends a line,
 * and the summary counts them apart from the passes.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "suites.h"

static Suite *(*const suites[])(void) = {
	guest_mem_suite, loader_suite, fdt_arm64_suite, cpu_arm64_suite, image_arm64_suite,
	bootparams_suite, cmdline_suite,
	cpuid_suite, mptable_suite, uart_suite, cli_suite,
	cpu_suite, console_suite, json_suite, phase_suite, guest_prof_suite,
	virtqueue_suite, virtio_mmio_suite, vsock_suite, proto_suite, tar_suite,
	netpool_suite, virtio_net_suite, deny_file_suite,
	dns_suite, dns_proxy_suite, dns_learn_suite, dns_helper_suite,
	seccomp_suite,
	cgroup_suite, jail_suite,
	run_record_suite, util_suite, accounts_suite, snapshot_suite, template_suite, hostfp_suite,
	vmstate_suite, session_suite,
	layer_suite, api_suite, admit_suite, oci_suite,
};

static int skip_fd = -1;

void unit_skip(const char *what, const char *why)
{
	char line[512];
	int n = snprintf(line, sizeof(line), "SKIP: %s: %s\n", what, why);

	if (n > (int)sizeof(line) - 1)
		n = sizeof(line) - 1;
	fputs(line, stderr);
	if (skip_fd >= 0 && write(skip_fd, line, n) < 0)
		perror("unit: recording a skip");
}

bool unit_need_root(const char *what)
{
	if (geteuid() == 0)
		return true;
	unit_skip(what, "needs root");
	return false;
}

static unsigned count_skips(void)
{
	char buf[4096];
	unsigned n = 0;
	ssize_t r, i;

	lseek(skip_fd, 0, SEEK_SET);
	while ((r = read(skip_fd, buf, sizeof(buf))) > 0)
		for (i = 0; i < r; i++)
			n += buf[i] == '\n';
	return n;
}

int main(void)
{
	char path[] = "/tmp/husk-unit-skips-XXXXXX";
	SRunner *sr = srunner_create(suites[0]());
	unsigned i, skipped;
	int failed, total;

	/* O_APPEND: the forked checks write whole lines without racing. */
	skip_fd = mkstemp(path);
	if (skip_fd >= 0) {
		unlink(path);
		fcntl(skip_fd, F_SETFL, O_APPEND);
	}
	for (i = 1; i < sizeof(suites) / sizeof(suites[0]); i++)
		srunner_add_suite(sr, suites[i]());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	total = srunner_ntests_run(sr);
	srunner_free(sr);
	skipped = skip_fd >= 0 ? count_skips() : 0;
	printf("unit: %d passed, %d failed, %u skipped\n", total - failed - (int)skipped,
	       failed, skipped);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
