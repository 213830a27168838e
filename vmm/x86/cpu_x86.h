/*
 * cpu_x86: the machine state a 64-bit Linux boot loader hands over: boot
 * GDT and IDT, identity page tables for the low 4 GiB, long-mode segment
 * and control registers, and the general-purpose registers of the 64-bit
 * boot protocol (rip = entry, rsi = zero page).
 *
 * The table and register builders are pure (unit-tested); cpu_setup_x86()
 * applies them to a vCPU fd.
 */
#ifndef HUSK_CPU_X86_H
#define HUSK_CPU_X86_H

#include <linux/kvm.h>
#include <stdbool.h>
#include <stdint.h>

#include "machine/guest_mem.h"

#define BOOT_CS_SEL 0x10	/* Linux's __BOOT_CS */
#define BOOT_DS_SEL 0x18	/* Linux's __BOOT_DS */
#define BOOT_TSS_SEL 0x20
#define BOOT_GDT_ENTRIES 5

#define X86_CR0_PE 0x1ull
#define X86_CR0_MP 0x2ull
#define X86_CR0_ET 0x10ull
#define X86_CR0_NE 0x20ull
#define X86_CR0_PG 0x80000000ull
#define X86_CR4_PAE 0x20ull
#define EFER_LME 0x100ull
#define EFER_LMA 0x400ull

/* Encode a GDT descriptor (flags in the Firecracker/Linux GDT_ENTRY layout). */
uint64_t gdt_entry(uint16_t flags, uint32_t base, uint32_t limit);

/* Write GDT, IDT and identity page tables into low guest memory. */
int boot_tables_write_x86(struct guest_mem *m);
/* Long-mode segments and control registers, on top of KVM's reset sregs. */
void boot_sregs_x86(struct kvm_sregs *s);
void boot_regs_x86(struct kvm_regs *r, uint64_t entry);

/*
 * Configure vCPU id of n: CPUID (from the supported set), MSRs, LAPIC LINT
 * pins and, for the boot CPU, the boot registers. Application processors
 * stay in wait-for-SIPI: Linux starts them through the LAPIC.
 */
struct kvm_cpuid2;
struct cpu_config {
	const struct kvm_cpuid2 *supported;	/* KVM_GET_SUPPORTED_CPUID */
	unsigned nr_vcpus;
	uint32_t tsc_khz;			/* 0: unknown */
	uint64_t entry;				/* boot CPU's rip */
	bool have_xcrs;
	bool tsc_deadline;			/* KVM emulates the TSC-deadline timer */
};
int cpu_setup_x86(int vcpu_fd, unsigned id, const struct cpu_config *cfg);

#endif
