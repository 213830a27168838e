/* Unit test suites (Check): one per pure VMM module. */
#ifndef HUSK_TEST_SUITES_H
#define HUSK_TEST_SUITES_H

#include <check.h>

Suite *guest_mem_suite(void);
Suite *loader_suite(void);
Suite *bootparams_suite(void);
Suite *cmdline_suite(void);
Suite *cpuid_suite(void);
Suite *mptable_suite(void);
Suite *uart_suite(void);
Suite *cli_suite(void);
Suite *cpu_suite(void);
Suite *console_suite(void);
Suite *json_suite(void);

Suite *virtqueue_suite(void);
Suite *virtio_mmio_suite(void);
Suite *netpool_suite(void);
Suite *virtio_net_suite(void);
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

#endif
