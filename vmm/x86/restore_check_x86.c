/*
 * restore_check_x86: what a template's x86 state may ask of KVM. See
 * restore_check_x86.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/util.h"
#include "x86/cpuid_x86.h"
#include "x86/restore_check_x86.h"

enum { EAX, EBX, ECX, EDX };

/* Registers of feature bits: a template may hold only bits the host offers. */
static const struct {
	uint32_t function, index;
	uint8_t reg;
	uint32_t runtime;	/* bits KVM sets itself from the guest's own state */
} features[] = {
	{ 1, 0, ECX, 1u << 27 },		/* OSXSAVE follows CR4.OSXSAVE */
	{ 1, 0, EDX, 1u << 9 },			/* APIC follows the APIC base MSR */
	{ 6, 0, EAX, 0 },
	{ 7, 0, EBX, 0 }, { 7, 0, ECX, 1u << 4 }, { 7, 0, EDX, 0 },	/* OSPKE: CR4.PKE */
	{ 7, 1, EAX, 0 },
	{ 0xd, 0, EAX, 0 }, { 0xd, 0, EDX, 0 },	/* the XCR0 bits */
	{ 0xd, 1, EAX, 0 }, { 0xd, 1, ECX, 0 }, { 0xd, 1, EDX, 0 },
	{ 0x80000001, 0, ECX, 0 }, { 0x80000001, 0, EDX, 0 },
	{ 0x80000007, 0, EDX, 0 },
	{ 0x80000008, 0, EBX, 0 },
	{ 0x80000021, 0, EAX, 0 },
	{ KVM_CPUID_FEATURES_LEAF, 0, EAX, 0 }, { KVM_CPUID_FEATURES_LEAF, 0, EDX, 0 },
};

static uint32_t reg_of(const struct kvm_cpuid_entry2 *e, unsigned r)
{
	const uint32_t v[4] = { e->eax, e->ebx, e->ecx, e->edx };

	return v[r];
}

static int bad_leaf(const struct kvm_cpuid_entry2 *e, unsigned id, const char *why)
{
	return husk_seterr(EINVAL, "vCPU %u: the template's CPUID leaf 0x%x index %u %s", id,
			   e->function, e->index, why);
}

/* Leaf limits, vendor and address widths: no more than the host has. */
static int check_limits(const struct kvm_cpuid_entry2 *t, const struct kvm_cpuid_entry2 *o,
			unsigned id)
{
	switch (t->function) {
	case 0:
		if (t->ebx != o->ebx || t->ecx != o->ecx || t->edx != o->edx)
			return bad_leaf(t, id, "names another CPU vendor than this host's");
		/* fall through */
	case 0x80000000:
		if (t->eax > o->eax)
			return bad_leaf(t, id, "goes beyond this host's highest leaf");
		break;
	case 0x80000008:
		if ((t->eax & 0xff) > (o->eax & 0xff) || (t->eax & 0xff00) > (o->eax & 0xff00))
			return bad_leaf(t, id, "has wider addresses than this host");
		break;
	}
	return 0;
}

static int check_features(const struct kvm_cpuid_entry2 *t, const struct kvm_cpuid_entry2 *o,
			  unsigned id)
{
	unsigned i;

	for (i = 0; i < ARRAY_SIZE(features); i++) {
		uint32_t extra;

		if (features[i].function != t->function ||
		    ((o->flags & KVM_CPUID_FLAG_SIGNIFCANT_INDEX) && features[i].index != t->index))
			continue;
		extra = reg_of(t, features[i].reg) & ~reg_of(o, features[i].reg) &
			~features[i].runtime;
		if (extra)
			return husk_seterr(EINVAL, "vCPU %u: the template's CPUID leaf 0x%x index "
					   "%u sets feature bits 0x%x in E%cX that this host's "
					   "KVM does not offer", id, t->function, t->index, extra,
					   "ABCD"[features[i].reg]);
	}
	return 0;
}

/* Each leaf once: KVM would take the first, a reader the other. */
static bool duplicate(const struct kvm_cpuid_entry2 *e, unsigned i)
{
	unsigned j;

	for (j = 0; j < i; j++)
		if (e[j].function == e[i].function && e[j].index == e[i].index)
			return true;
	return false;
}

int restore_check_cpuid_x86(const struct kvm_cpuid2 *supported, bool tsc_deadline,
			    const struct kvm_cpuid_entry2 *e, unsigned nent, unsigned id,
			    unsigned nr_vcpus)
{
	struct kvm_cpuid_entry2 *offer;
	unsigned n = supported->nent < CPUID_MAX_ENTRIES ? supported->nent : CPUID_MAX_ENTRIES;
	unsigned i;
	int err;

	if (!nent || nent > CPUID_MAX_ENTRIES)
		return husk_seterr(EINVAL, "vCPU %u: the template has %u CPUID leaves", id, nent);
	offer = calloc(CPUID_MAX_ENTRIES, sizeof(*offer));
	if (!offer)
		return husk_seterr(ENOMEM, "out of memory");
	/* What husk gives this vCPU when it boots here (cpu_x86.c: set_cpuid). */
	memcpy(offer, supported->entries, n * sizeof(*offer));
	err = cpuid_normalize_x86(offer, &n, CPUID_MAX_ENTRIES, id, nr_vcpus, 1);
	if (!err && tsc_deadline)
		cpuid_set_tsc_deadline_x86(offer, n);
	for (i = 0; !err && i < nent; i++) {
		const struct kvm_cpuid_entry2 *o = cpuid_find(offer, n, e[i].function,
							      e[i].index);

		if (duplicate(e, i))
			err = bad_leaf(&e[i], id, "is there twice");
		else if (!o)
			err = bad_leaf(&e[i], id, "is not one this host's KVM offers");
		else
			err = check_limits(&e[i], o, id);
		if (!err)
			err = check_features(&e[i], o, id);
	}
	free(offer);
	return err;
}

int restore_check_lapic_x86(const struct kvm_lapic_state *s, unsigned id)
{
	uint32_t apic_id;

	/* KVM reports it in bits 31:24 in xAPIC and (without X2APIC_API) x2APIC mode. */
	memcpy(&apic_id, s->regs + 0x20, sizeof(apic_id));
	if (apic_id != id << 24)
		return husk_seterr(EINVAL, "vCPU %u: the template's local APIC has ID %u", id,
				   apic_id >> 24);
	return 0;
}

int restore_check_mp_state_x86(const struct kvm_mp_state *s, unsigned id)
{
	switch (s->mp_state) {
	case KVM_MP_STATE_RUNNABLE:
	case KVM_MP_STATE_UNINITIALIZED:
	case KVM_MP_STATE_INIT_RECEIVED:
	case KVM_MP_STATE_HALTED:
	case KVM_MP_STATE_SIPI_RECEIVED:
		return 0;
	}
	return husk_seterr(EINVAL, "vCPU %u: the template's MP state %u is not one of an x86 "
			   "vCPU", id, s->mp_state);
}

int restore_check_events_x86(const struct kvm_vcpu_events *e, unsigned id)
{
	if (e->smi.smm || e->smi.pending || e->smi.smm_inside_nmi || e->smi.latched_init)
		return husk_seterr(EINVAL, "vCPU %u: the template puts it in system management "
				   "mode, which husk's guests never enter", id);
	if (e->triple_fault.pending)
		return husk_seterr(EINVAL, "vCPU %u: the template has a triple fault pending", id);
	return 0;
}

int restore_check_irqchip_x86(const struct kvm_irqchip *c)
{
	/* The ELCR bits KVM lets each 8259 have (i8259.c: kvm_pic_init). */
	static const uint8_t elcr_mask[2] = { 0xf8, 0xde };
	const struct kvm_pic_state *p = &c->chip.pic;
	const struct kvm_ioapic_state *io = &c->chip.ioapic;

	switch (c->chip_id) {
	case KVM_IRQCHIP_PIC_MASTER:
	case KVM_IRQCHIP_PIC_SLAVE:
		if (p->elcr_mask != elcr_mask[c->chip_id] || (p->elcr & ~p->elcr_mask))
			return husk_seterr(EINVAL, "the template's 8259 %u has edge/level mask "
					   "0x%x and ELCR 0x%x", c->chip_id, p->elcr_mask, p->elcr);
		return 0;
	case KVM_IRQCHIP_IOAPIC:
		if (io->base_address != 0xfec00000ull || io->id > 0xf)
			return husk_seterr(EINVAL, "the template's IOAPIC sits at 0x%llx with ID "
					   "%u", (unsigned long long)io->base_address, io->id);
		return 0;
	}
	return husk_seterr(EINVAL, "the template names interrupt controller %u", c->chip_id);
}

int restore_check_pit_x86(const struct kvm_pit_state2 *p)
{
	unsigned i;

	if (p->flags & ~(KVM_PIT_FLAGS_HPET_LEGACY | KVM_PIT_FLAGS_SPEAKER_DATA_ON))
		return husk_seterr(EINVAL, "the template's PIT has flags 0x%x", p->flags);
	for (i = 0; i < 3; i++) {
		const struct kvm_pit_channel_state *c = &p->channels[i];

		/* Modes 0-5, or 0xff: never programmed (i8254.c: kvm_pit_reset). */
		if (c->count > 0x10000 || (c->mode > 5 && c->mode != 0xff) || c->rw_mode > 3 ||
		    c->read_state > 4 || c->write_state > 4 || c->count_latched > 3 ||
		    c->status_latched > 1 || c->bcd > 1 || c->gate > 1)
			return husk_seterr(EINVAL, "the template's PIT channel %u is in a state "
					   "an 8254 cannot be programmed into", i);
	}
	return 0;
}
