/*
 * hostfp_arm64: the fingerprint of an arm64 KVM host that a template may be
 * restored on: the ID registers Linux shows userspace (MIDR and the AA64
 * feature registers), the KVM capabilities a saved vCPU depends on, and
 * whether the host is PVM. Any difference refuses the template; the
 * counter's frequency is kept apart (template.c).
 *
 * Pure: the digest of the inputs, so a unit test can feed it another
 * host's; vmstate_arm64.c reads this host's (hostfp_arm64()).
 */
#ifndef HUSK_HOSTFP_ARM64_H
#define HUSK_HOSTFP_ARM64_H

#include <stdint.h>

#define HOSTFP_ARM64_NR_IDS 6
#define HOSTFP_ARM64_NR_CAPS 6
/* The capabilities, in the order of hostfp_arm64_in.cap. */
extern const long hostfp_arm64_caps[HOSTFP_ARM64_NR_CAPS];

struct hostfp_arm64_in {
	/* MIDR_EL1, ID_AA64PFR0, ID_AA64ISAR0, ID_AA64ISAR1, ID_AA64MMFR0, ID_AA64MMFR1 */
	uint64_t id[HOSTFP_ARM64_NR_IDS];
	int32_t cap[HOSTFP_ARM64_NR_CAPS];	/* KVM_CHECK_EXTENSION's answers */
	int32_t pvm;
	/*
	 * HUSK_FINGERPRINT_EXTRA, or NULL: tests use it to stand for another
	 * host (it can only make fingerprints differ, never match).
	 */
	const char *extra;
};

void hostfp_arm64_digest(const struct hostfp_arm64_in *in, uint8_t fp[32]);

#endif
