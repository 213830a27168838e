/*
 * hostfp_x86: the fingerprint of a KVM host for templates. See hostfp_x86.h.
 */
#include <nettle/sha2.h>
#include <stdlib.h>
#include <string.h>

#include "x86/hostfp_x86.h"
#include "x86/vmstate_x86.h"
#include "lib/util.h"

const long hostfp_x86_caps[] = {
	KVM_CAP_XSAVE, KVM_CAP_XCRS, KVM_CAP_TSC_DEADLINE_TIMER, KVM_CAP_IRQCHIP,
	KVM_CAP_PIT2, KVM_CAP_ADJUST_CLOCK, KVM_CAP_VCPU_EVENTS, KVM_CAP_DEBUGREGS,
	KVM_CAP_KVMCLOCK_CTRL, KVM_CAP_TSC_CONTROL,
#ifdef KVM_CAP_XSAVE2
	KVM_CAP_XSAVE2,
#endif
};
const unsigned hostfp_x86_nr_caps = ARRAY_SIZE(hostfp_x86_caps);

#define MAX_CAPS 16
#define MAX_MSRS 256
_Static_assert(ARRAY_SIZE(hostfp_x86_caps) <= MAX_CAPS, "room for every capability");

/*
 * Fields that name the host CPU the ioctl ran on (APIC IDs, core numbers)
 * differ from call to call on one host: they are not part of what a guest
 * depends on, and every restored vCPU has its own anyway.
 */
static void canonical(struct kvm_cpuid_entry2 *e)
{
	switch (e->function) {
	case 0x1:
		e->ebx &= 0x00ffffff;
		break;
	case 0xb:
	case 0x1f:
		e->edx = 0;
		break;
	case 0x8000001e:
		e->eax = 0;
		e->ebx &= ~0xffu;
		break;
	}
}

void hostfp_x86_digest(const struct hostfp_x86_in *in, uint8_t out[SNAP_SHA256_LEN])
{
	struct sha256_ctx c;
	uint32_t nent = in->nent;
	int32_t v;
	unsigned i;

	sha256_init(&c);
	sha256_update(&c, 12, (const uint8_t *)"husk-host/1");
	sha256_update(&c, sizeof(nent), (const uint8_t *)&nent);
	for (i = 0; i < in->nent; i++) {
		struct kvm_cpuid_entry2 e = in->cpuid[i];

		canonical(&e);
		memset(e.padding, 0, sizeof(e.padding));
		sha256_update(&c, sizeof(e), (const uint8_t *)&e);
	}
	sha256_update(&c, hostfp_x86_nr_caps * sizeof(in->caps[0]), (const uint8_t *)in->caps);
	sha256_update(&c, in->nmsrs * sizeof(in->msrs[0]), (const uint8_t *)in->msrs);
	v = in->pvm;
	sha256_update(&c, sizeof(v), (const uint8_t *)&v);
	if (in->extra && *in->extra)
		sha256_update(&c, strlen(in->extra), (const uint8_t *)in->extra);
	sha256_digest(&c, SNAP_SHA256_LEN, out);
}

int hostfp_x86(const struct kvm_sys *k, uint8_t out[SNAP_SHA256_LEN])
{
	struct hostfp_x86_in in = {
		.cpuid = k->arch.cpuid->entries, .nent = k->arch.cpuid->nent, .pvm = k->pvm,
		.extra = getenv("HUSK_FINGERPRINT_EXTRA"),
	};
	int32_t caps[MAX_CAPS];
	uint32_t msrs[MAX_MSRS];
	unsigned i;
	int n;

	for (i = 0; i < hostfp_x86_nr_caps; i++)
		caps[i] = kvm_cap(k, hostfp_x86_caps[i]);
	n = vmstate_msr_list_x86(k, msrs, MAX_MSRS);
	if (n < 0)
		return n;
	in.caps = caps;
	in.msrs = msrs;
	in.nmsrs = n;
	hostfp_x86_digest(&in, out);
	return 0;
}
