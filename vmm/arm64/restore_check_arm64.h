/*
 * restore_check_arm64: which arm64 registers a template may set, and the
 * GIC registers husk saves. A template's state file is sealed by the
 * template directory's key, but the VM process that wrote it ran a guest:
 * every record is input, checked before any ioctl.
 *
 * vCPU registers (KVM_SET_ONE_REG): only ids the host's KVM_GET_REG_LIST
 * names for the vCPU, and of those only the guest's own state: the core
 * registers (general purpose, SP, PC, PSTATE, FP/SIMD) and the system
 * registers, timers included. Never from a file, because they describe
 * the host or configure KVM rather than hold what the guest did: the
 * firmware pseudo-registers (PSCI version, SMCCC workarounds, the
 * hypercall feature bitmaps), the cache geometry (DEMUX), SVE (husk gives
 * guests none), and the identification registers (op0 3, CRn 0 with op1
 * 0, 1 or 3: MIDR, MPIDR, REVIDR, the ID_* feature registers, CCSIDR,
 * CLIDR, AIDR, CTR_EL0, DCZID_EL0), which KVM sets from the host and
 * which the host's fingerprint already vouches for. Saving keeps the same
 * rule, so every register a template holds is one its restore takes.
 *
 * GIC registers (KVM_SET_DEVICE_ATTR): only the distributor offsets, the
 * redistributor's SGI/PPI offsets and the CPU interface registers husk
 * saves, listed here for both.
 *
 * Pure: ids, offsets and records only, so it is unit-tested on any host.
 * Checks return 0, or -EINVAL with husk_lasterr() naming the record.
 */
#ifndef HUSK_RESTORE_CHECK_ARM64_H
#define HUSK_RESTORE_CHECK_ARM64_H

#include <linux/types.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arm64/layout_arm64.h"

#define ARM64_MAX_REG_BYTES 256	/* the largest register KVM has: an SVE Z register */

/* Whether a template may hold register id (the rule above, host list aside). */
bool restore_reg_allowed_arm64(uint64_t id);
/* Bytes of register id's value (from the id's size field). */
uint64_t restore_reg_size_arm64(uint64_t id);
/*
 * T_A64_REGS records (u64 id, then the value) of vCPU cpu: each id allowed
 * and in host (the vCPU's KVM_GET_REG_LIST, nhost ids, as KVM types them),
 * each value whole.
 */
int restore_check_regs_arm64(const __u64 *host, unsigned nhost, const uint8_t *rec,
			     size_t len, unsigned cpu);

/* The distributor's SPI registers husk saves, IIDR first, CTLR last. */
unsigned restore_gic_dist_offsets_arm64(uint32_t *off, unsigned max);
#define RESTORE_GIC_DIST_MAX (2 + 5 * 4 + ARM64_GIC_NR_IRQS / 4 + ARM64_GIC_NR_IRQS / 16 + \
			      2 * ARM64_GIC_NR_IRQS)
/* A redistributor's SGI/PPI registers and its GICR_CTLR. */
#define RESTORE_GIC_REDIST_MAX 16
unsigned restore_gic_redist_offsets_arm64(uint32_t *off);
/* The CPU interface's registers (KVM_DEV_ARM_VGIC_GRP_CPU_SYSREGS), SRE and CTLR first. */
extern const uint32_t restore_gic_icc_regs_arm64[];
extern const unsigned restore_gic_nr_icc_regs_arm64;

/* Records of u32 offset, u32 value: every offset one of off (n). */
int restore_check_gic_words_arm64(const uint8_t *rec, size_t len, const uint32_t *off,
				  unsigned n, const char *what);
/* Records of u32 register, u64 value: every register a CPU interface one. */
int restore_check_gic_cpu_arm64(const uint8_t *rec, size_t len, unsigned cpu);

#endif
