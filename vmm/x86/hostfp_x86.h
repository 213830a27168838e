/*
 * hostfp_x86: the fingerprint of a KVM host that a template may be restored
 * on: the CPUID KVM offers guests, the KVM capabilities and MSRs a saved
 * vCPU depends on, and whether the host is PVM. Two hosts with the same
 * fingerprint run a restored guest the way it ran when it was saved; any
 * difference refuses the template. What names the host CPU an ioctl ran
 * on (APIC IDs, core numbers) is left out, and the TSC frequency is kept
 * apart (a host reboot recalibrates it by a few kHz): see template.c.
 *
 * hostfp_x86_digest is pure, so a unit test can feed it another host's
 * inputs; hostfp_x86 reads this host's from KVM.
 */
#ifndef HUSK_HOSTFP_X86_H
#define HUSK_HOSTFP_X86_H

#include <linux/kvm.h>
#include <stdbool.h>
#include <stdint.h>

#include "machine/kvm.h"
#include "template/snapshot.h"

/* The capabilities the fingerprint asks KVM about, in hostfp_x86_in.caps order. */
extern const long hostfp_x86_caps[];
extern const unsigned hostfp_x86_nr_caps;

struct hostfp_x86_in {
	const struct kvm_cpuid_entry2 *cpuid;	/* KVM_GET_SUPPORTED_CPUID */
	unsigned nent;
	const int32_t *caps;			/* KVM_CHECK_EXTENSION of each of hostfp_x86_caps */
	const uint32_t *msrs;			/* vmstate_msr_list_x86() */
	unsigned nmsrs;
	bool pvm;
	/*
	 * HUSK_FINGERPRINT_EXTRA, or NULL: tests use it to stand for another
	 * host (it can only make fingerprints differ, never match).
	 */
	const char *extra;
};

/* SHA-256 over the inputs. */
void hostfp_x86_digest(const struct hostfp_x86_in *in, uint8_t out[SNAP_SHA256_LEN]);
/* This host's: its KVM, and HUSK_FINGERPRINT_EXTRA from the environment. -errno. */
int hostfp_x86(const struct kvm_sys *k, uint8_t out[SNAP_SHA256_LEN]);

#endif
