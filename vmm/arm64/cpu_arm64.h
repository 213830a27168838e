/*
 * cpu_arm64: how an arm64 vCPU is brought up for a direct kernel boot
 * (Linux's Documentation/arch/arm64/booting.rst): the features asked of
 * KVM_ARM_VCPU_INIT and the core registers vCPU 0 starts with. Secondary
 * vCPUs start powered off and are started by the guest through PSCI
 * CPU_ON, which KVM serves in the kernel.
 *
 * Pure: register ids and values only, so the same code is checked on any
 * host. linux/kvm.h gives the generic id bits; the arm64 core-register
 * index (a 32-bit word offset into struct kvm_regs) is spelled out here,
 * because an x86 host has no arm64 uapi headers.
 */
#ifndef HUSK_CPU_ARM64_H
#define HUSK_CPU_ARM64_H

#include <stdbool.h>
#include <stdint.h>

/* KVM_ARM_VCPU_INIT feature bits (arch/arm64/include/uapi/asm/kvm.h). */
#define ARM64_VCPU_POWER_OFF	0	/* start powered off: a secondary */
#define ARM64_VCPU_PSCI_0_2	2	/* PSCI 0.2 or later, in the kernel */

/* PSTATE at entry: EL1 with SP_EL1, debug, SError, IRQ and FIQ masked. */
#define ARM64_PSTATE_BOOT	0x3c5ull

struct arm64_reg {
	uint64_t id;		/* for KVM_SET_ONE_REG */
	uint64_t val;
};

/* The id of core register Xn (0..30), or of SP, PC and PSTATE. */
uint64_t arm64_core_reg_x(unsigned n);
uint64_t arm64_core_reg_pc(void);
uint64_t arm64_core_reg_pstate(void);

/* features[0] of KVM_ARM_VCPU_INIT for vCPU cpu (0: the boot vCPU). */
uint32_t arm64_vcpu_features(unsigned cpu);

/*
 * The registers the boot vCPU starts with: PC at the kernel's entry, x0
 * the device tree's gpa, x1..x3 zero (reserved), PSTATE as above. Fills
 * out (room for ARM64_BOOT_REGS) and returns how many.
 */
#define ARM64_BOOT_REGS 6
unsigned arm64_boot_regs(uint64_t entry, uint64_t fdt_gpa, struct arm64_reg *out);

#endif
