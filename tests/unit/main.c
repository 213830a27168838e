/*
 * Unit test runner: every suite of tier 1 in one binary. Check forks per
 * test, so a crash in one test is reported, not fatal. Check's own
 * CK_RUN_SUITE=name / CK_RUN_CASE=name select a single suite or case.
 */
#include <stdlib.h>

#include "suites.h"

static Suite *(*const suites[])(void) = {
	guest_mem_suite, loader_suite, bootparams_suite, cmdline_suite,
	cpuid_suite, mptable_suite, uart_suite, cli_suite,
	cpu_suite, console_suite, json_suite,
	virtqueue_suite, virtio_mmio_suite, vsock_suite, proto_suite, tar_suite,
	netpool_suite, virtio_net_suite,
	dns_suite, dns_proxy_suite, dns_learn_suite, dns_helper_suite,
	seccomp_suite,
	cgroup_suite, jail_suite,
};

int main(void)
{
	SRunner *sr = srunner_create(suites[0]());
	unsigned i;
	int failed;

	for (i = 1; i < sizeof(suites) / sizeof(suites[0]); i++)
		srunner_add_suite(sr, suites[i]());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
