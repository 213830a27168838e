/*
 * hostfp_x86: the fingerprint of a KVM host for templates. See hostfp_x86.h.
 */
#include <nettle/sha2.h>
#include <stdlib.h>
#include <string.h>

#include "x86/hostfp_x86.h"
#include "x86/vmstate_x86.h"
#include "lib/util.h"

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

int hostfp_x86(const struct kvm_sys *k, uint8_t out[SNAP_SHA256_LEN])
{
	static const long caps[] = {
		KVM_CAP_XSAVE, KVM_CAP_XCRS, KVM_CAP_TSC_DEADLINE_TIMER, KVM_CAP_IRQCHIP,
		KVM_CAP_PIT2, KVM_CAP_ADJUST_CLOCK, KVM_CAP_VCPU_EVENTS, KVM_CAP_DEBUGREGS,
		KVM_CAP_KVMCLOCK_CTRL, KVM_CAP_TSC_CONTROL,
#ifdef KVM_CAP_XSAVE2
		KVM_CAP_XSAVE2,
#endif
	};
	uint32_t msrs[256];
	struct sha256_ctx c;
	const char *extra = getenv("HUSK_FINGERPRINT_EXTRA");
	int32_t v;
	unsigned i;
	int n;

	sha256_init(&c);
	sha256_update(&c, 12, (const uint8_t *)"husk-host/1");
	sha256_update(&c, sizeof(k->arch.cpuid->nent), (const uint8_t *)&k->arch.cpuid->nent);
	for (i = 0; i < k->arch.cpuid->nent; i++) {
		struct kvm_cpuid_entry2 e = k->arch.cpuid->entries[i];

		canonical(&e);
		memset(e.padding, 0, sizeof(e.padding));
		sha256_update(&c, sizeof(e), (const uint8_t *)&e);
	}
	for (i = 0; i < ARRAY_SIZE(caps); i++) {
		v = kvm_cap(k, caps[i]);
		sha256_update(&c, sizeof(v), (const uint8_t *)&v);
	}
	n = vmstate_msr_list_x86(k, msrs, ARRAY_SIZE(msrs));
	if (n < 0)
		return n;
	sha256_update(&c, n * sizeof(msrs[0]), (const uint8_t *)msrs);
	v = k->pvm;
	sha256_update(&c, sizeof(v), (const uint8_t *)&v);
	if (extra && *extra)
		sha256_update(&c, strlen(extra), (const uint8_t *)extra);
	sha256_digest(&c, SNAP_SHA256_LEN, out);
	return 0;
}
