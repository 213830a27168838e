/*
 * cpu_arm64: vCPU features and boot registers. See cpu_arm64.h.
 */
#include <linux/kvm.h>

#include "arm64/cpu_arm64.h"

/* KVM_REG_ARM_CORE: the register class in bits 16..27 of an arm64 reg id. */
#define REG_ARM_CORE		(0x0010ull << 16)
/*
 * struct kvm_regs begins with struct user_pt_regs { u64 regs[31], sp, pc,
 * pstate; }, and a core register's index is its offset in 32-bit words.
 */
#define CORE_WORD(u64_index)	((u64_index) * 2ull)

static uint64_t core(unsigned u64_index)
{
	return KVM_REG_ARM64 | KVM_REG_SIZE_U64 | REG_ARM_CORE | CORE_WORD(u64_index);
}

uint64_t arm64_core_reg_x(unsigned n)
{
	return core(n);
}

uint64_t arm64_core_reg_pc(void)
{
	return core(32);
}

uint64_t arm64_core_reg_pstate(void)
{
	return core(33);
}

uint32_t arm64_vcpu_features(unsigned cpu)
{
	uint32_t f = 1u << ARM64_VCPU_PSCI_0_2;

	return cpu ? f | 1u << ARM64_VCPU_POWER_OFF : f;
}

unsigned arm64_boot_regs(uint64_t entry, uint64_t fdt_gpa, struct arm64_reg *out)
{
	unsigned n = 0, i;

	out[n++] = (struct arm64_reg){ arm64_core_reg_pstate(), ARM64_PSTATE_BOOT };
	out[n++] = (struct arm64_reg){ arm64_core_reg_pc(), entry };
	out[n++] = (struct arm64_reg){ arm64_core_reg_x(0), fdt_gpa };
	for (i = 1; i <= 3; i++)
		out[n++] = (struct arm64_reg){ arm64_core_reg_x(i), 0 };
	return n;
}
