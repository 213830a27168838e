/*
 * cpuid_x86: turn KVM_GET_SUPPORTED_CPUID into what one vCPU of this VM
 * should see: the hypervisor bit, KVM's signature and feature leaves, the
 * TSC frequency (so the guest need not calibrate it against a timer that
 * runs slowly under emulation), and a topology of N single-thread cores
 * in one package with APIC ID = vCPU index.
 *
 * Pure: works on an entry array with spare capacity, so it is unit-tested
 * without /dev/kvm.
 */
#ifndef HUSK_CPUID_X86_H
#define HUSK_CPUID_X86_H

#include <linux/kvm.h>
#include <stdint.h>

#define CPUID_MAX_ENTRIES 256

#define KVM_CPUID_SIGNATURE_LEAF 0x40000000u
#define KVM_CPUID_FEATURES_LEAF 0x40000001u
#define CPUID_TIMING_LEAF 0x40000010u	/* EAX TSC kHz, EBX APIC bus kHz */
#define KVM_APIC_BUS_KHZ 1000000u		/* KVM's LAPIC timer runs at 1 GHz */
#define CPUID_1_ECX_HYPERVISOR (1u << 31)
#define CPUID_1_EDX_HTT (1u << 28)
#define CPUID_1_ECX_TSC_DEADLINE (1u << 24)

/*
 * Advertise the LAPIC TSC-deadline timer, which KVM emulates when it has
 * KVM_CAP_TSC_DEADLINE_TIMER but leaves out of the supported CPUID. With it
 * Linux skips its 100 ms LAPIC timer calibration at boot.
 */
void cpuid_set_tsc_deadline_x86(struct kvm_cpuid_entry2 *e, unsigned nent);

struct kvm_cpuid_entry2 *cpuid_find(struct kvm_cpuid_entry2 *e, unsigned nent,
				    uint32_t function, uint32_t index);

/*
 * Normalize in place for vCPU vcpu_id of nr_vcpus. *nent may grow up to max
 * (missing KVM leaves are added). tsc_khz 0 means unknown: no timing leaf.
 */
int cpuid_normalize_x86(struct kvm_cpuid_entry2 *e, unsigned *nent, unsigned max,
			unsigned vcpu_id, unsigned nr_vcpus, uint32_t tsc_khz);

#endif
