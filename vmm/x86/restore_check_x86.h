/*
 * restore_check_x86: what a template's x86 state may ask of KVM. The state
 * file is sealed by the template directory's key, but the VM process that
 * saved it ran a guest: treat every structure as input. Each check admits
 * what a guest on this host could have reached through husk's own setup
 * and its own instructions, and refuses the rest before any ioctl:
 *
 *   CPUID        every leaf one husk gives that vCPU on this host
 *                (KVM_GET_SUPPORTED_CPUID, normalized as at boot), the
 *                same vendor, no higher leaf limits or address widths,
 *                and no feature bit this host's KVM does not offer (but
 *                OSXSAVE and OSPKE, which KVM itself sets from CR4)
 *   LAPIC        its APIC ID is the vCPU's index
 *   MP state     one of the states an x86 vCPU takes without SEV
 *   events       nothing of SMM (husk's guests have no SMM handler) and
 *                no pending triple fault
 *   PIC          the edge/level masks KVM gives the 8259s, and an ELCR
 *                inside them
 *   IOAPIC       at its architectural address, with a 4-bit ID
 *   PIT          each channel's counter, mode and access states in the
 *                ranges the 8254's programming interface can produce
 *
 * Pure, for the unit tests: -EINVAL with husk_lasterr() naming what and
 * where, 0 when accepted.
 */
#ifndef HUSK_RESTORE_CHECK_X86_H
#define HUSK_RESTORE_CHECK_X86_H

#include <linux/kvm.h>
#include <stdbool.h>

/*
 * e (nent entries) for vCPU id of nr_vcpus against supported; tsc_deadline:
 * KVM has KVM_CAP_TSC_DEADLINE_TIMER (husk then offers the bit).
 */
int restore_check_cpuid_x86(const struct kvm_cpuid2 *supported, bool tsc_deadline,
			    const struct kvm_cpuid_entry2 *e, unsigned nent, unsigned id,
			    unsigned nr_vcpus);
int restore_check_lapic_x86(const struct kvm_lapic_state *s, unsigned id);
int restore_check_mp_state_x86(const struct kvm_mp_state *s, unsigned id);
int restore_check_events_x86(const struct kvm_vcpu_events *e, unsigned id);
int restore_check_irqchip_x86(const struct kvm_irqchip *c);
int restore_check_pit_x86(const struct kvm_pit_state2 *p);

#endif
