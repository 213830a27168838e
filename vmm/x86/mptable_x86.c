/*
 * mptable_x86: Intel MP Specification 1.4 table for CPUs, IOAPIC and IRQs.
 */
#include <errno.h>
#include <string.h>

#include "x86/layout_x86.h"
#include "x86/mptable_x86.h"
#include "lib/util.h"

#define APIC_VERSION 0x14
#define IOAPIC_VERSION 0x11
/* CPUID signature and feature flags (FPU, APIC) the table advertises. */
#define CPU_SIGNATURE 0x600
#define CPU_FEATURES 0x201

uint8_t mp_checksum(const void *p, uint64_t len)
{
	const uint8_t *b = p;
	uint8_t sum = 0;

	while (len--)
		sum += *b++;
	return (uint8_t)-sum;
}

uint64_t mptable_size_x86(unsigned nr_cpus)
{
	return sizeof(struct mpf_intel) + sizeof(struct mpc_table) +
	       nr_cpus * sizeof(struct mpc_cpu) + sizeof(struct mpc_bus) +
	       sizeof(struct mpc_ioapic) +
	       (MP_ISA_IRQS + 2) * sizeof(struct mpc_intsrc);
}

static uint8_t *put(uint8_t *p, const void *e, size_t len)
{
	memcpy(p, e, len);
	return p + len;
}

int mptable_write_x86(struct guest_mem *m, uint64_t gpa, unsigned nr_cpus)
{
	uint64_t size = mptable_size_x86(nr_cpus);
	struct mpf_intel *mpf;
	struct mpc_table *mpc;
	uint8_t *base, *p;
	unsigned i, entries = 0;
	uint8_t ioapic_id = nr_cpus + 1;

	if (nr_cpus < 1 || nr_cpus > MPTABLE_MAX_CPUS)
		return husk_seterr(EINVAL, "MP table supports 1..%d CPUs, not %u",
				   MPTABLE_MAX_CPUS, nr_cpus);
	base = gmem_ptr(m, gpa, size);
	if (!base)
		return husk_seterr(EFAULT, "no room for the MP table at 0x%llx",
				   (unsigned long long)gpa);
	memset(base, 0, size);

	mpf = (struct mpf_intel *)base;
	mpc = (struct mpc_table *)(base + sizeof(*mpf));
	p = (uint8_t *)(mpc + 1);

	for (i = 0; i < nr_cpus; i++) {
		struct mpc_cpu c = {
			.type = MP_PROCESSOR, .apicid = i, .apicver = APIC_VERSION,
			.cpuflag = MPC_CPU_ENABLED | (i == 0 ? MPC_CPU_BSP : 0),
			.cpufeature = CPU_SIGNATURE, .featureflag = CPU_FEATURES,
		};
		p = put(p, &c, sizeof(c));
		entries++;
	}
	{
		struct mpc_bus b = { .type = MP_BUS, .busid = 0 };
		struct mpc_ioapic io = {
			.type = MP_IOAPIC, .apicid = ioapic_id, .apicver = IOAPIC_VERSION,
			.flags = 1, .apicaddr = IOAPIC_GPA,
		};

		memcpy(b.bustype, "ISA   ", 6);
		p = put(p, &b, sizeof(b));
		p = put(p, &io, sizeof(io));
		entries += 2;
	}
	/* ISA IRQ n is wired to IOAPIC pin n, as KVM's default GSI routing has it. */
	for (i = 0; i < MP_ISA_IRQS; i++) {
		struct mpc_intsrc s = {
			.type = MP_INTSRC, .irqtype = MP_INT, .srcbus = 0,
			.srcbusirq = i, .dstapic = ioapic_id, .dstirq = i,
		};
		p = put(p, &s, sizeof(s));
		entries++;
	}
	{
		/* LINT0 takes the 8259's ExtINT, LINT1 the NMI, on every CPU. */
		struct mpc_intsrc l0 = {
			.type = MP_LINTSRC, .irqtype = MP_EXTINT, .dstapic = 0xff, .dstirq = 0,
		};
		struct mpc_intsrc l1 = {
			.type = MP_LINTSRC, .irqtype = MP_NMI, .dstapic = 0xff, .dstirq = 1,
		};
		p = put(p, &l0, sizeof(l0));
		p = put(p, &l1, sizeof(l1));
		entries += 2;
	}

	memcpy(mpc->signature, "PCMP", 4);
	mpc->length = p - (uint8_t *)mpc;
	mpc->spec = 4;
	memcpy(mpc->oem, "HUSK    ", 8);
	memcpy(mpc->productid, "MICROVM     ", 12);
	mpc->oemcount = entries;
	mpc->lapic = LAPIC_GPA;
	mpc->checksum = mp_checksum(mpc, mpc->length);

	memcpy(mpf->signature, "_MP_", 4);
	mpf->physptr = gpa + sizeof(*mpf);
	mpf->length = 1;
	mpf->specification = 4;
	mpf->checksum = mp_checksum(mpf, sizeof(*mpf));
	return 0;
}
