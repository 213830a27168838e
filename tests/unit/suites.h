/* Unit test suites (Check): one per pure VMM module. */
#ifndef HUSK_TEST_SUITES_H
#define HUSK_TEST_SUITES_H

#include <check.h>
#include <stdbool.h>

/*
 * A check that cannot run here (not root, a host without a feature) calls
 * unit_skip() and returns: the runner counts it as skipped, not passed, and
 * prints "unit: N passed, N failed, N skipped" for tools/test.
 */
void unit_skip(const char *what, const char *why);
/* true when running as root; else records the skip of what and returns false. */
bool unit_need_root(const char *what);

Suite *guest_mem_suite(void);
Suite *loader_suite(void);
Suite *fdt_arm64_suite(void);
Suite *cpu_arm64_suite(void);
Suite *image_arm64_suite(void);
Suite *bootparams_suite(void);
Suite *cmdline_suite(void);
Suite *cpuid_suite(void);
Suite *mptable_suite(void);
Suite *uart_suite(void);
Suite *cli_suite(void);
Suite *cpu_suite(void);
Suite *console_suite(void);
Suite *json_suite(void);
Suite *accounts_suite(void);
Suite *phase_suite(void);
Suite *guest_prof_suite(void);

Suite *virtqueue_suite(void);
Suite *virtio_mmio_suite(void);
Suite *netpool_suite(void);
Suite *virtio_net_suite(void);
Suite *deny_file_suite(void);
Suite *vsock_suite(void);
Suite *proto_suite(void);
Suite *tar_suite(void);
Suite *dns_suite(void);
Suite *dns_proxy_suite(void);
Suite *dns_learn_suite(void);
Suite *dns_helper_suite(void);
Suite *seccomp_suite(void);
Suite *cgroup_suite(void);
Suite *jail_suite(void);
Suite *run_record_suite(void);
Suite *util_suite(void);
Suite *snapshot_suite(void);
Suite *template_suite(void);
Suite *hostfp_suite(void);
Suite *vmstate_suite(void);
Suite *session_suite(void);
Suite *api_suite(void);
Suite *admit_suite(void);
Suite *oci_suite(void);
Suite *layer_suite(void);

#endif
