/*
 * cpuid_x86: normalize KVM's supported CPUID for one vCPU. See cpuid_x86.h.
 */
#include <errno.h>
#include <string.h>

#include "x86/cpuid_x86.h"
#include "lib/util.h"

struct kvm_cpuid_entry2 *cpuid_find(struct kvm_cpuid_entry2 *e, unsigned nent,
				    uint32_t function, uint32_t index)
{
	unsigned i;

	for (i = 0; i < nent; i++) {
		if (e[i].function != function)
			continue;
		if (!(e[i].flags & KVM_CPUID_FLAG_SIGNIFCANT_INDEX) || e[i].index == index)
			return &e[i];
	}
	return NULL;
}

/* Find the entry or append an empty one; NULL when the array is full. */
static struct kvm_cpuid_entry2 *get_or_add(struct kvm_cpuid_entry2 *e, unsigned *nent,
					   unsigned max, uint32_t function,
					   uint32_t index, uint32_t flags)
{
	struct kvm_cpuid_entry2 *c = cpuid_find(e, *nent, function, index);

	if (c)
		return c;
	if (*nent >= max)
		return NULL;
	c = &e[(*nent)++];
	memset(c, 0, sizeof(*c));
	c->function = function;
	c->index = index;
	c->flags = flags;
	return c;
}

static unsigned order_base_2(unsigned n)
{
	unsigned s = 0;

	while ((1u << s) < n)
		s++;
	return s;
}

static int is_vendor(struct kvm_cpuid_entry2 *e, unsigned nent, const char *v)
{
	struct kvm_cpuid_entry2 *c = cpuid_find(e, nent, 0, 0);
	char id[12];

	if (!c)
		return 0;
	memcpy(id, &c->ebx, 4);
	memcpy(id + 4, &c->edx, 4);
	memcpy(id + 8, &c->ecx, 4);
	return !memcmp(id, v, 12);
}

static void set_leaf1(struct kvm_cpuid_entry2 *c, unsigned id, unsigned n)
{
	c->ecx |= CPUID_1_ECX_HYPERVISOR;
	c->ebx = (c->ebx & 0xffff) | (id << 24) | ((n & 0xff) << 16);
	if (n > 1)
		c->edx |= CPUID_1_EDX_HTT;
	else
		c->edx &= ~CPUID_1_EDX_HTT;
}

/* Intel leaf 4: cores per package, and who shares each cache level. */
static void set_cache_leaves(struct kvm_cpuid_entry2 *e, unsigned nent, unsigned n)
{
	unsigned i, ids = (1u << order_base_2(n)) - 1;

	for (i = 0; i < nent; i++) {
		unsigned level;

		if (e[i].function != 4 || !(e[i].eax & 0x1f))
			continue;
		level = (e[i].eax >> 5) & 7;
		e[i].eax &= 0x3fff;
		e[i].eax |= ids << 26;
		if (level >= 3)
			e[i].eax |= ids << 14;
	}
}

/* x2APIC topology (0xb and 0x1f): one thread per core, n cores. */
static int set_ext_topology(struct kvm_cpuid_entry2 *e, unsigned *nent, unsigned max,
			    uint32_t leaf, unsigned id, unsigned n)
{
	unsigned sub;

	if (!cpuid_find(e, *nent, leaf, 0))
		return 0;
	for (sub = 0; sub < 3; sub++) {
		struct kvm_cpuid_entry2 *c = get_or_add(e, nent, max, leaf, sub,
							KVM_CPUID_FLAG_SIGNIFCANT_INDEX);

		if (!c)
			return -ENOSPC;
		c->edx = id;
		switch (sub) {
		case 0:		/* SMT level */
			c->eax = 0;
			c->ebx = 1;
			c->ecx = (1 << 8) | sub;
			break;
		case 1:		/* core level */
			c->eax = order_base_2(n);
			c->ebx = n;
			c->ecx = (2 << 8) | sub;
			break;
		default:	/* end of list */
			c->eax = 0;
			c->ebx = 0;
			c->ecx = sub;
		}
	}
	return 0;
}

static void set_amd_topology(struct kvm_cpuid_entry2 *e, unsigned nent,
			     unsigned id, unsigned n)
{
	struct kvm_cpuid_entry2 *c;

	c = cpuid_find(e, nent, 0x80000008, 0);
	if (c)
		c->ecx = (c->ecx & ~0xf0ffu) | (order_base_2(n) << 12) | (n - 1);
	c = cpuid_find(e, nent, 0x8000001e, 0);
	if (c) {
		c->eax = id;		/* extended APIC ID */
		c->ebx = id & 0xff;	/* compute unit id, one thread per unit */
		c->ecx = 0;		/* node 0, one node */
	}
}

static int set_kvm_leaves(struct kvm_cpuid_entry2 *e, unsigned *nent, unsigned max,
			  uint32_t tsc_khz)
{
	struct kvm_cpuid_entry2 *c;

	c = get_or_add(e, nent, max, KVM_CPUID_SIGNATURE_LEAF, 0, 0);
	if (!c)
		return -ENOSPC;
	c->eax = tsc_khz ? CPUID_TIMING_LEAF : KVM_CPUID_FEATURES_LEAF;
	memcpy(&c->ebx, "KVMK", 4);
	memcpy(&c->ecx, "VMKV", 4);
	memcpy(&c->edx, "M\0\0\0", 4);
	if (!get_or_add(e, nent, max, KVM_CPUID_FEATURES_LEAF, 0, 0))
		return -ENOSPC;
	if (!tsc_khz)
		return 0;
	c = get_or_add(e, nent, max, CPUID_TIMING_LEAF, 0, 0);
	if (!c)
		return -ENOSPC;
	c->eax = tsc_khz;
	c->ebx = KVM_APIC_BUS_KHZ;
	c->ecx = c->edx = 0;
	return 0;
}

int cpuid_normalize_x86(struct kvm_cpuid_entry2 *e, unsigned *nent, unsigned max,
			unsigned vcpu_id, unsigned nr_vcpus, uint32_t tsc_khz)
{
	struct kvm_cpuid_entry2 *c;
	int err;

	if (!nr_vcpus || vcpu_id >= nr_vcpus || nr_vcpus > 255)
		return husk_seterr(EINVAL, "bad vCPU %u of %u", vcpu_id, nr_vcpus);
	c = cpuid_find(e, *nent, 1, 0);
	if (!c)
		return husk_seterr(EINVAL, "KVM reported no CPUID leaf 1");
	set_leaf1(c, vcpu_id, nr_vcpus);
	set_cache_leaves(e, *nent, nr_vcpus);
	err = set_ext_topology(e, nent, max, 0xb, vcpu_id, nr_vcpus);
	if (!err)
		err = set_ext_topology(e, nent, max, 0x1f, vcpu_id, nr_vcpus);
	if (err)
		return husk_seterr(err, "no room for CPUID topology leaves");
	if (is_vendor(e, *nent, "AuthenticAMD"))
		set_amd_topology(e, *nent, vcpu_id, nr_vcpus);

	/* Intel's crystal leaf: numerator/denominator 1, crystal = TSC. */
	c = cpuid_find(e, *nent, 0x15, 0);
	if (c && tsc_khz && is_vendor(e, *nent, "GenuineIntel")) {
		uint64_t hz = (uint64_t)tsc_khz * 1000u;
		uint32_t mul = 1;

		while (hz / mul > UINT32_MAX)
			mul++;
		c->eax = 1;
		c->ebx = mul;
		c->ecx = hz / mul;
	}
	err = set_kvm_leaves(e, nent, max, tsc_khz);
	if (err)
		return husk_seterr(err, "no room for KVM CPUID leaves");
	return 0;
}

void cpuid_set_tsc_deadline_x86(struct kvm_cpuid_entry2 *e, unsigned nent)
{
	struct kvm_cpuid_entry2 *c = cpuid_find(e, nent, 1, 0);

	if (c)
		c->ecx |= CPUID_1_ECX_TSC_DEADLINE;
}
