/*
 * vmstate_x86: what KVM holds of a paused x86 VM, saved into and restored
 * from template sections (snapshot.h): per vCPU the registers, special
 * registers, FPU/XSAVE, XCRs, debug registers, LAPIC, MSRs (kvm-clock and
 * TSC included), MP state, pending events and CPUID; per VM the kvm-clock,
 * both PICs, the IOAPIC and the PIT.
 *
 * Save a vCPU only once it is out of KVM_RUN with its pending I/O finished
 * (vm_vcpu_finish_io). Restore follows the order KVM needs: per vCPU
 * CPUID, MP state, registers, special registers, XSAVE, XCRs, debug
 * registers, LAPIC, MSRs (TSC before TSC_DEADLINE), events; then for the VM
 * PIT, interrupt controllers, clock and TSCs. Every element must be present and
 * of the exact size this KVM uses; nothing missing is guessed. MSRs outside
 * the allow list are refused, and the CPUID, LAPIC, MP state, events,
 * 8259s, IOAPIC and PIT are checked before KVM gets them
 * (restore_check_x86.h).
 */
#ifndef HUSK_VMSTATE_X86_H
#define HUSK_VMSTATE_X86_H

#include <linux/kvm.h>

#include "machine/kvm.h"
#include "template/snapshot.h"

/* Tags of a SNAP_VCPU section. */
enum {
	T_VCPU_REGS = 1, T_VCPU_SREGS, T_VCPU_XSAVE, T_VCPU_XCRS, T_VCPU_DEBUGREGS,
	T_VCPU_LAPIC, T_VCPU_MSRS, T_VCPU_MP_STATE, T_VCPU_EVENTS, T_VCPU_CPUID,
};
/* Tags of the SNAP_VM section. */
enum {
	T_VM_CLOCK = 1, T_VM_PIC_MASTER, T_VM_PIC_SLAVE, T_VM_IOAPIC, T_VM_PIT,
	T_VM_TSC,		/* every vCPU's TSC and TSC deadline, read with the clock */
};
#define VM_STATE_MAX_VCPUS 32

/*
 * MSRs worth saving: those of the allow list (timekeeping, syscall entry,
 * segment bases, PAT/MTRRs, SPEC_CTRL, the KVM paravirtual range) that this
 * KVM reports in KVM_GET_MSR_INDEX_LIST, TSC_DEADLINE last. Fills idx (at
 * most max) and returns the count, or -errno.
 */
int vmstate_msr_list_x86(const struct kvm_sys *k, uint32_t *idx, unsigned max);
/* Whether index is on the allow list (pure, for the unit tests). */
int vmstate_msr_allowed_x86(uint32_t index);


int vmstate_save_vcpu_x86(const struct kvm_sys *k, int vcpu_fd, unsigned id,
			  struct snap_writer *w);
/* vCPU id of nr_vcpus; what KVM is given is checked first (restore_check_x86.h). */
int vmstate_restore_vcpu_x86(const struct kvm_sys *k, int vcpu_fd, unsigned id,
			     unsigned nr_vcpus, const struct snap_section *sec);
/*
 * The VM: kvm-clock and every vCPU's TSC read together (before the vCPUs
 * are saved, so no save work runs between them), PICs, IOAPIC, PIT. Restore
 * after the vCPUs: PIT, interrupt controllers, then the clock and at once
 * every TSC and deadline, so kvm-clock and TSC agree as they did.
 */
int vmstate_save_vm_x86(int vm_fd, const int *vcpu_fds, unsigned n, struct snap_writer *w);
int vmstate_restore_vm_x86(int vm_fd, const int *vcpu_fds, unsigned n,
			   const struct snap_section *sec);

/* Bytes of the XSAVE area this KVM uses (KVM_CAP_XSAVE2, else 4096). */
size_t vmstate_xsave_size_x86(const struct kvm_sys *k);

#endif
