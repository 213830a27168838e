/*
 * mptable_x86: an Intel MultiProcessor Specification 1.4 table, which is how
 * a Linux guest without ACPI learns its CPUs, the IOAPIC and how ISA IRQs
 * are wired. Written at the start of the EBDA, where Linux looks for it.
 */
#ifndef HUSK_MPTABLE_X86_H
#define HUSK_MPTABLE_X86_H

#include <stdint.h>

#include "machine/guest_mem.h"

#define MPTABLE_MAX_CPUS 32

struct mpf_intel {
	char signature[4];	/* "_MP_" */
	uint32_t physptr;
	uint8_t length;		/* in 16-byte units */
	uint8_t specification;
	uint8_t checksum;
	uint8_t feature1;
	uint8_t feature2;
	uint8_t feature3[3];
} __attribute__((packed));

struct mpc_table {
	char signature[4];	/* "PCMP" */
	uint16_t length;
	uint8_t spec;
	uint8_t checksum;
	char oem[8];
	char productid[12];
	uint32_t oemptr;
	uint16_t oemsize;
	uint16_t oemcount;
	uint32_t lapic;
	uint32_t reserved;
} __attribute__((packed));

struct mpc_cpu {
	uint8_t type;
	uint8_t apicid;
	uint8_t apicver;
	uint8_t cpuflag;
	uint32_t cpufeature;
	uint32_t featureflag;
	uint32_t reserved[2];
} __attribute__((packed));

struct mpc_bus {
	uint8_t type;
	uint8_t busid;
	char bustype[6];
} __attribute__((packed));

struct mpc_ioapic {
	uint8_t type;
	uint8_t apicid;
	uint8_t apicver;
	uint8_t flags;
	uint32_t apicaddr;
} __attribute__((packed));

struct mpc_intsrc {
	uint8_t type;
	uint8_t irqtype;
	uint16_t irqflag;
	uint8_t srcbus;
	uint8_t srcbusirq;
	uint8_t dstapic;
	uint8_t dstirq;
} __attribute__((packed));

enum {
	MP_PROCESSOR = 0, MP_BUS = 1, MP_IOAPIC = 2, MP_INTSRC = 3, MP_LINTSRC = 4,
};
enum { MP_INT = 0, MP_NMI = 1, MP_EXTINT = 3 };
#define MPC_CPU_ENABLED 1
#define MPC_CPU_BSP 2
#define MP_ISA_IRQS 16

/* Bytes the table takes for nr_cpus processors (floating pointer included). */
uint64_t mptable_size_x86(unsigned nr_cpus);
/* Write the table at gpa; nr_cpus in 1..MPTABLE_MAX_CPUS. */
int mptable_write_x86(struct guest_mem *m, uint64_t gpa, unsigned nr_cpus);
/* Two's-complement byte sum used by both MP structures (0 when valid). */
uint8_t mp_checksum(const void *p, uint64_t len);

#endif
