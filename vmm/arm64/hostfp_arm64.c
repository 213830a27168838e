/*
 * hostfp_arm64: the fingerprint of an arm64 KVM host. See hostfp_arm64.h.
 */
#include <linux/kvm.h>
#include <string.h>

#include "arm64/hostfp_arm64.h"
#include "lib/digest.h"

const long hostfp_arm64_caps[HOSTFP_ARM64_NR_CAPS] = {
	KVM_CAP_ARM_PSCI_0_2, KVM_CAP_ARM_PMU_V3, KVM_CAP_ARM_EL1_32BIT,
	KVM_CAP_ARM_SVE, KVM_CAP_ARM_PTRAUTH_ADDRESS, KVM_CAP_ARM_VM_IPA_SIZE,
};

void hostfp_arm64_digest(const struct hostfp_arm64_in *in, uint8_t fp[32])
{
	struct {
		char tag[16];
		uint64_t id[HOSTFP_ARM64_NR_IDS];
		int32_t cap[HOSTFP_ARM64_NR_CAPS];
		int32_t pvm;
	} h;
	uint8_t d[2][32];

	memset(&h, 0, sizeof(h));	/* padding included: the digest is of bytes */
	memcpy(h.tag, "husk-host-a64/1", 15);
	memcpy(h.id, in->id, sizeof(h.id));
	memcpy(h.cap, in->cap, sizeof(h.cap));
	h.pvm = in->pvm;
	digest_sha256(&h, sizeof(h), d[0]);
	if (!in->extra || !*in->extra) {
		memcpy(fp, d[0], 32);
		return;
	}
	digest_sha256(in->extra, strlen(in->extra), d[1]);
	digest_sha256(d, sizeof(d), fp);
}
