/*
 * vmstate_arm64: KVM state of a paused arm64 VM to and from template
 * sections (snapshot.h), and the fingerprint of the host it depends on.
 *
 * Per vCPU: the registers KVM lists (KVM_GET_REG_LIST) that hold the
 * guest's own state (core, FP/SIMD, system registers with the architected
 * timer; not the firmware, identification or configuration ones: see
 * restore_check_arm64.h) and the MP state (a secondary may be powered off); its redistributor's
 * SGI/PPI state and its GIC CPU interface registers. Per VM: the
 * distributor's SPI state. GICv3 only: a GICv2 host's VM is refused, saying
 * so.
 *
 * Save a vCPU only once it is out of KVM_RUN with its MMIO finished
 * (vm_vcpu_finish_io). Restore runs on a VM built the same way (vCPUs
 * initialised, the GIC initialised, nothing run): the GIC first, with
 * GICD_IIDR before anything else as KVM asks, then each vCPU's registers.
 *
 * A template's state file is checked by its checksums and seal, but still
 * parsed as untrusted: every record, its length and what it names, is
 * checked for every vCPU before the first ioctl that sets anything.
 */
#ifndef HUSK_VMSTATE_ARM64_H
#define HUSK_VMSTATE_ARM64_H

#include <stdint.h>

/* Section tags: SNAP_VCPU (T_A64_REGS..T_A64_GIC_CPU), SNAP_VM (T_A64_GIC_DIST). */
enum {
	T_A64_REGS = 1,		/* records of u64 id, then the register's bytes */
	T_A64_MP_STATE,		/* struct kvm_mp_state */
	T_A64_GIC_REDIST,	/* records of u32 offset, u32 value */
	T_A64_GIC_CPU,		/* records of u32 instr, u64 value */
	T_A64_GIC_DIST,		/* records of u32 offset, u32 value */
};

struct kvm_sys;
struct snap_writer;
struct vm;
struct vm_restore;

int vmstate_save_arm64(struct vm *vm, struct snap_writer *w);
int vmstate_restore_arm64(struct vm *vm, const struct vm_restore *r);
/* What a template's state depends on in this host (32 bytes). */
int hostfp_arm64(const struct kvm_sys *k, uint8_t fp[32]);

#endif
