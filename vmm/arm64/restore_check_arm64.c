/*
 * restore_check_arm64: which arm64 registers a template may set. See
 * restore_check_arm64.h.
 */
#include <errno.h>
#include <linux/kvm.h>
#include <string.h>

#include "arm64/layout_arm64.h"
#include "arm64/restore_check_arm64.h"
#include "lib/util.h"

/*
 * The register class in bits 16..27 of an arm64 id
 * (arch/arm64/include/uapi/asm/kvm.h, which an x86 host does not have).
 */
#define COPROC(id)	(((id) >> 16) & 0xfff)
#define COPROC_CORE	0x0010
#define COPROC_SYSREG	0x0013
/* A system register's encoding in the low 16 bits. */
#define SYS_OP0(id)	(((id) >> 14) & 3)
#define SYS_OP1(id)	(((id) >> 11) & 7)
#define SYS_CRN(id)	(((id) >> 7) & 0xf)

#define SYSREG(op0, op1, crn, crm, op2) \
	((op0) << 14 | (op1) << 11 | (crn) << 7 | (crm) << 3 | (op2))

uint64_t restore_reg_size_arm64(uint64_t id)
{
	return 1ull << ((id & KVM_REG_SIZE_MASK) >> KVM_REG_SIZE_SHIFT);
}

/* MIDR, MPIDR, REVIDR, ID_*; CCSIDR, CLIDR, AIDR; CTR_EL0, DCZID_EL0 (not CSSELR). */
static bool id_register(uint64_t id)
{
	unsigned op1 = SYS_OP1(id);

	return SYS_OP0(id) == 3 && SYS_CRN(id) == 0 && (op1 == 0 || op1 == 1 || op1 == 3);
}

bool restore_reg_allowed_arm64(uint64_t id)
{
	if ((id & KVM_REG_ARCH_MASK) != KVM_REG_ARM64)
		return false;
	switch (COPROC(id)) {
	case COPROC_CORE:
		return true;
	case COPROC_SYSREG:
		return !id_register(id);
	default:	/* DEMUX, firmware, SVE, hypercall bitmaps, whatever comes next */
		return false;
	}
}

static bool listed(const __u64 *host, unsigned n, uint64_t id)
{
	unsigned i;

	for (i = 0; i < n; i++)
		if (host[i] == id)
			return true;
	return false;
}

int restore_check_regs_arm64(const __u64 *host, unsigned nhost, const uint8_t *rec,
			     size_t len, unsigned cpu)
{
	size_t i;
	uint64_t id;

	for (i = 0; i < len; i += 8 + restore_reg_size_arm64(id)) {
		if (len - i < 8)
			return husk_seterr(EINVAL, "vCPU %u: the template's registers are "
					   "malformed", cpu);
		memcpy(&id, rec + i, 8);
		if (restore_reg_size_arm64(id) > ARM64_MAX_REG_BYTES ||
		    len - i - 8 < restore_reg_size_arm64(id))
			return husk_seterr(EINVAL, "vCPU %u: the template's register 0x%llx is "
					   "malformed", cpu, (unsigned long long)id);
		if (!restore_reg_allowed_arm64(id))
			return husk_seterr(EINVAL, "vCPU %u: the template sets register 0x%llx, "
					   "which husk does not restore (firmware, identification "
					   "or configuration)", cpu, (unsigned long long)id);
		if (!listed(host, nhost, id))
			return husk_seterr(EINVAL, "vCPU %u: the template sets register 0x%llx, "
					   "which this host's KVM does not list", cpu,
					   (unsigned long long)id);
	}
	return 0;
}

/* ---- the GIC ---- */

unsigned restore_gic_dist_offsets_arm64(uint32_t *off, unsigned max)
{
	static const uint32_t bit_regs[] = { 0x080, 0x100, 0x200, 0x300, 0xd00 };
	uint32_t all[RESTORE_GIC_DIST_MAX];
	unsigned n = 0, i, k;

	all[n++] = 0x0008;				/* GICD_IIDR */
	for (i = 0; i < ARRAY_SIZE(bit_regs); i++)	/* IGROUPR, ISENABLER, ISPENDR, ISACTIVER, IGRPMODR */
		for (k = 1; k < ARM64_GIC_NR_IRQS / 32; k++)
			all[n++] = bit_regs[i] + 4 * k;
	for (k = 32 / 4; k < ARM64_GIC_NR_IRQS / 4; k++)	/* IPRIORITYR: 4 per register */
		all[n++] = 0x400 + 4 * k;
	for (k = 32 / 16; k < ARM64_GIC_NR_IRQS / 16; k++)	/* ICFGR: 16 per register */
		all[n++] = 0xc00 + 4 * k;
	for (k = 32; k < ARM64_GIC_NR_IRQS; k++) {	/* IROUTER: 64-bit, two halves */
		all[n++] = 0x6000 + 8 * k;
		all[n++] = 0x6000 + 8 * k + 4;
	}
	all[n++] = 0x0000;				/* GICD_CTLR */
	if (n > max)
		n = max;
	memcpy(off, all, n * sizeof(off[0]));
	return n;
}

unsigned restore_gic_redist_offsets_arm64(uint32_t *off)
{
	static const uint32_t sgi[] = {
		0x080, 0x100, 0x200, 0x300,		/* IGROUPR0, ISENABLER0, ISPENDR0, ISACTIVER0 */
		0x400, 0x404, 0x408, 0x40c, 0x410, 0x414, 0x418, 0x41c,	/* IPRIORITYR0..7 */
		0xc00, 0xc04, 0xd00,			/* ICFGR0, ICFGR1, IGRPMODR0 */
	};
	unsigned n = 0, i;

	for (i = 0; i < ARRAY_SIZE(sgi); i++)
		off[n++] = 0x10000 + sgi[i];		/* the SGI/PPI frame, at +64 KiB */
	off[n++] = 0x0000;				/* GICR_CTLR */
	return n;
}

const uint32_t restore_gic_icc_regs_arm64[] = {
	SYSREG(3, 0, 12, 12, 5),	/* ICC_SRE_EL1 */
	SYSREG(3, 0, 12, 12, 4),	/* ICC_CTLR_EL1 */
	SYSREG(3, 0, 12, 12, 6),	/* ICC_IGRPEN0_EL1 */
	SYSREG(3, 0, 12, 12, 7),	/* ICC_IGRPEN1_EL1 */
	SYSREG(3, 0, 4, 6, 0),		/* ICC_PMR_EL1 */
	SYSREG(3, 0, 12, 8, 3),		/* ICC_BPR0_EL1 */
	SYSREG(3, 0, 12, 12, 3),	/* ICC_BPR1_EL1 */
	SYSREG(3, 0, 12, 8, 4), SYSREG(3, 0, 12, 8, 5),		/* ICC_AP0R0..3_EL1 */
	SYSREG(3, 0, 12, 8, 6), SYSREG(3, 0, 12, 8, 7),
	SYSREG(3, 0, 12, 9, 0), SYSREG(3, 0, 12, 9, 1),		/* ICC_AP1R0..3_EL1 */
	SYSREG(3, 0, 12, 9, 2), SYSREG(3, 0, 12, 9, 3),
};
const unsigned restore_gic_nr_icc_regs_arm64 = ARRAY_SIZE(restore_gic_icc_regs_arm64);

static bool in(const uint32_t *set, unsigned n, uint32_t v)
{
	unsigned i;

	for (i = 0; i < n; i++)
		if (set[i] == v)
			return true;
	return false;
}

int restore_check_gic_words_arm64(const uint8_t *rec, size_t len, const uint32_t *off,
				  unsigned n, const char *what)
{
	uint32_t o;
	size_t i;

	if (len % 8)
		return husk_seterr(EINVAL, "the template's GIC %s state is malformed", what);
	for (i = 0; i < len; i += 8) {
		memcpy(&o, rec + i, 4);
		if (!in(off, n, o))
			return husk_seterr(EINVAL, "the template sets GIC %s register 0x%x, which "
					   "husk does not restore", what, o);
	}
	return 0;
}

int restore_check_gic_cpu_arm64(const uint8_t *rec, size_t len, unsigned cpu)
{
	uint32_t r;
	size_t i;

	if (len % 12)
		return husk_seterr(EINVAL, "vCPU %u: the template's GIC CPU state is malformed",
				   cpu);
	for (i = 0; i < len; i += 12) {
		memcpy(&r, rec + i, 4);
		if (!in(restore_gic_icc_regs_arm64, restore_gic_nr_icc_regs_arm64, r))
			return husk_seterr(EINVAL, "vCPU %u: the template sets GIC CPU register "
					   "0x%x, which husk does not restore", cpu, r);
	}
	return 0;
}
