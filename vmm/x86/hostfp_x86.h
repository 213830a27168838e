/*
 * hostfp_x86: the fingerprint of a KVM host that a template may be restored
 * on: the CPUID KVM offers guests, the KVM capabilities and MSRs a saved
 * vCPU depends on, and whether the host is PVM. Two hosts with the same
 * fingerprint run a restored guest the way it ran when it was saved; any
 * difference refuses the template. The TSC frequency is kept apart
 * (a host reboot recalibrates it by a few kHz): see template.c.
 */
#ifndef HUSK_HOSTFP_X86_H
#define HUSK_HOSTFP_X86_H

#include <stdint.h>

#include "machine/kvm.h"
#include "template/snapshot.h"

/*
 * SHA-256 over the fingerprint's inputs. HUSK_FINGERPRINT_EXTRA, when set,
 * is mixed in: tests use it to stand for another host (it can only make
 * fingerprints differ, never match what would not).
 */
int hostfp_x86(const struct kvm_sys *k, uint8_t out[SNAP_SHA256_LEN]);

#endif
