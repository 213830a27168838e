/*
 * cpu_arm64: the ids of KVM_SET_ONE_REG for arm64 core registers (against
 * the values KVM documents for them), the vCPU features, and the boot
 * registers booting.rst asks for.
 */
#include <check.h>

#include "arm64/cpu_arm64.h"
#include "suites.h"

START_TEST(core_register_ids)
{
	/* As Documentation/virt/kvm/api.rst and KVM's selftests spell them. */
	ck_assert_uint_eq(arm64_core_reg_x(0), 0x6030000000100000ull);
	ck_assert_uint_eq(arm64_core_reg_x(1), 0x6030000000100002ull);
	ck_assert_uint_eq(arm64_core_reg_x(30), 0x603000000010003cull);
	ck_assert_uint_eq(arm64_core_reg_pc(), 0x6030000000100040ull);
	ck_assert_uint_eq(arm64_core_reg_pstate(), 0x6030000000100042ull);
}
END_TEST

START_TEST(features_and_boot_registers)
{
	struct arm64_reg r[ARM64_BOOT_REGS];
	unsigned n, i;
	bool pc = false, x0 = false, ps = false;

	ck_assert_uint_eq(arm64_vcpu_features(0), 1u << 2);
	ck_assert_uint_eq(arm64_vcpu_features(1), 1u << 2 | 1u);
	ck_assert_uint_eq(arm64_vcpu_features(7), 1u << 2 | 1u);
	n = arm64_boot_regs(0x80080000ull, 0x8fe00000ull, r);
	ck_assert_uint_eq(n, ARM64_BOOT_REGS);
	for (i = 0; i < n; i++) {
		if (r[i].id == arm64_core_reg_pc()) {
			pc = true;
			ck_assert_uint_eq(r[i].val, 0x80080000ull);
		} else if (r[i].id == arm64_core_reg_x(0)) {
			x0 = true;
			ck_assert_uint_eq(r[i].val, 0x8fe00000ull);
		} else if (r[i].id == arm64_core_reg_pstate()) {
			ps = true;
			/* EL1h (mode 5), D, A, I and F masked. */
			ck_assert_uint_eq(r[i].val & 0xf, 5);
			ck_assert_uint_eq(r[i].val & 0x3c0, 0x3c0);
		} else {
			ck_assert(r[i].id == arm64_core_reg_x(1) || r[i].id == arm64_core_reg_x(2) ||
				  r[i].id == arm64_core_reg_x(3));
			ck_assert_uint_eq(r[i].val, 0);
		}
	}
	ck_assert(pc && x0 && ps);
}
END_TEST

Suite *cpu_arm64_suite(void)
{
	Suite *s = suite_create("cpu_arm64");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, core_register_ids);
	tcase_add_test(tc, features_and_boot_registers);
	suite_add_tcase(s, tc);
	return s;
}
