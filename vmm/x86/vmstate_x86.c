/*
 * vmstate_x86: KVM state of a paused x86 VM to and from template sections.
 * See vmstate_x86.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include "x86/cpuid_x86.h"
#include "lib/util.h"
#include "x86/restore_check_x86.h"
#include "x86/vmstate_x86.h"

#define MAX_MSRS 256
#define MSR_TSC 0x10
#define MSR_TSC_DEADLINE 0x6e0

static int vcpu_io(int fd, unsigned long req, void *arg, const char *name, unsigned id)
{
	if (ioctl(fd, req, arg) < 0)
		return husk_seterr(errno, "%s on vCPU %u: %s", name, id, strerror(errno));
	return 0;
}

/* ---- MSRs ---- */

int vmstate_msr_allowed_x86(uint32_t i)
{
	static const struct { uint32_t lo, hi; } ranges[] = {
		{ 0x10, 0x10 },			/* TSC */
		{ 0x11, 0x12 },			/* kvm-clock, old numbers */
		{ 0x1b, 0x1b },			/* APIC base */
		{ 0x3b, 0x3b },			/* TSC_ADJUST */
		{ 0x48, 0x48 },			/* SPEC_CTRL */
		{ 0x174, 0x176 },		/* SYSENTER_CS/ESP/EIP */
		{ 0x1a0, 0x1a0 },		/* MISC_ENABLE */
		{ 0x200, 0x20f },		/* variable MTRRs */
		{ 0x250, 0x250 }, { 0x258, 0x259 }, { 0x268, 0x26f },	/* fixed MTRRs */
		{ 0x277, 0x277 },		/* PAT */
		{ 0x2ff, 0x2ff },		/* MTRR default type */
		{ 0x6e0, 0x6e0 },		/* TSC_DEADLINE */
		{ 0xc0000080, 0xc0000084 },	/* EFER, STAR, LSTAR, CSTAR, SFMASK */
		{ 0xc0000100, 0xc0000103 },	/* FS/GS/KERNEL_GS base, TSC_AUX */
		{ 0x4b564d00, 0x4b564dff },	/* KVM paravirtual MSRs */
	};
	unsigned r;

	for (r = 0; r < ARRAY_SIZE(ranges); r++)
		if (i >= ranges[r].lo && i <= ranges[r].hi)
			return 1;
	return 0;
}

int vmstate_msr_list_x86(const struct kvm_sys *k, uint32_t *idx, unsigned max)
{
	struct kvm_msr_list probe = { .nmsrs = 0 }, *l;
	unsigned i, n = 0;
	bool deadline = false;

	/* The first call fails with E2BIG and says how many there are. */
	if (ioctl(k->fd, KVM_GET_MSR_INDEX_LIST, &probe) < 0 && errno != E2BIG)
		return husk_seterr(errno, "KVM_GET_MSR_INDEX_LIST: %s", strerror(errno));
	l = calloc(1, sizeof(*l) + probe.nmsrs * sizeof(l->indices[0]));
	if (!l)
		return husk_seterr(ENOMEM, "out of memory");
	l->nmsrs = probe.nmsrs;
	if (ioctl(k->fd, KVM_GET_MSR_INDEX_LIST, l) < 0) {
		free(l);
		return husk_seterr(errno, "KVM_GET_MSR_INDEX_LIST: %s", strerror(errno));
	}
	/* TSC first; TSC_DEADLINE last, so it is armed against the restored TSC. */
	for (i = 0; i < l->nmsrs; i++)
		if (l->indices[i] == MSR_TSC && n < max)
			idx[n++] = MSR_TSC;
	for (i = 0; i < l->nmsrs && n < max; i++) {
		if (l->indices[i] == MSR_TSC || !vmstate_msr_allowed_x86(l->indices[i]))
			continue;
		if (l->indices[i] == MSR_TSC_DEADLINE) {
			deadline = true;
			continue;
		}
		idx[n++] = l->indices[i];
	}
	if (deadline && n < max)
		idx[n++] = MSR_TSC_DEADLINE;
	free(l);
	return n;
}

static int save_msrs(const struct kvm_sys *k, int fd, unsigned id, struct snap_writer *w)
{
	uint32_t idx[MAX_MSRS];
	struct {
		struct kvm_msrs h;
		struct kvm_msr_entry e[MAX_MSRS];
	} *m;
	int n, i, got;

	n = vmstate_msr_list_x86(k, idx, MAX_MSRS);
	if (n < 0)
		return n;
	m = calloc(1, sizeof(*m));
	if (!m)
		return husk_seterr(ENOMEM, "out of memory");
	m->h.nmsrs = n;
	for (i = 0; i < n; i++)
		m->e[i].index = idx[i];
	got = ioctl(fd, KVM_GET_MSRS, m);
	if (got < 0 || got != n) {
		int err = got < 0 ? errno : EIO;

		free(m);
		return husk_seterr(err, "KVM_GET_MSRS on vCPU %u: %s", id, got < 0 ?
				   strerror(err) : "an MSR of the index list could not be read");
	}
	snap_put(w, T_VCPU_MSRS, m->e, n * sizeof(m->e[0]));
	free(m);
	return 0;
}

static int restore_msrs(int fd, unsigned id, const struct snap_section *sec)
{
	struct {
		struct kvm_msrs h;
		struct kvm_msr_entry e[MAX_MSRS];
	} *m;
	struct tlv t;
	unsigned n, i;
	int got;

	if (snap_get(sec, T_VCPU_MSRS, &t) != 1 || t.len % sizeof(struct kvm_msr_entry) ||
	    t.len / sizeof(struct kvm_msr_entry) > MAX_MSRS)
		return husk_seterr(EINVAL, "vCPU %u: no usable MSR list in the template", id);
	n = t.len / sizeof(struct kvm_msr_entry);
	m = calloc(1, sizeof(*m));
	if (!m)
		return husk_seterr(ENOMEM, "out of memory");
	memcpy(m->e, t.val, t.len);
	for (i = 0; i < n; i++) {
		if (!vmstate_msr_allowed_x86(m->e[i].index)) {
			uint32_t bad = m->e[i].index;

			free(m);
			return husk_seterr(EINVAL, "vCPU %u: the template sets MSR 0x%x, which "
					   "husk does not restore", id, bad);
		}
		m->e[i].reserved = 0;
	}
	m->h.nmsrs = n;
	got = ioctl(fd, KVM_SET_MSRS, m);
	if (got < 0 || (unsigned)got != n) {
		int err = got < 0 ? errno : EINVAL;
		uint32_t bad = got >= 0 && (unsigned)got < n ? m->e[got].index : 0;

		free(m);
		return husk_seterr(err, "KVM_SET_MSRS on vCPU %u: %s (MSR 0x%x)", id,
				   err == EINVAL ? "refused" : strerror(err), bad);
	}
	free(m);
	return 0;
}

/* ---- XSAVE, CPUID ---- */

size_t vmstate_xsave_size_x86(const struct kvm_sys *k)
{
#ifdef KVM_CAP_XSAVE2
	int n = kvm_cap(k, KVM_CAP_XSAVE2);

	if (n > (int)sizeof(struct kvm_xsave))
		return n;
#endif
	return sizeof(struct kvm_xsave);
}

static int save_xsave(const struct kvm_sys *k, int fd, unsigned id, struct snap_writer *w)
{
	size_t size = vmstate_xsave_size_x86(k);
	void *x = calloc(1, size);
	int err;

	if (!x)
		return husk_seterr(ENOMEM, "out of memory");
#ifdef KVM_GET_XSAVE2
	if (size > sizeof(struct kvm_xsave))
		err = vcpu_io(fd, KVM_GET_XSAVE2, x, "KVM_GET_XSAVE2", id);
	else
#endif
		err = vcpu_io(fd, KVM_GET_XSAVE, x, "KVM_GET_XSAVE", id);
	if (!err)
		snap_put(w, T_VCPU_XSAVE, x, size);
	free(x);
	return err;
}

static int restore_xsave(const struct kvm_sys *k, int fd, unsigned id,
			 const struct snap_section *sec)
{
	size_t size = vmstate_xsave_size_x86(k);
	void *x = calloc(1, size);
	int err;

	if (!x)
		return husk_seterr(ENOMEM, "out of memory");
	err = snap_get_exact(sec, T_VCPU_XSAVE, x, size);
	if (err)
		err = husk_seterr(err, "vCPU %u: the template's XSAVE area does not fit this "
				  "host (%s)", id, husk_lasterr());
	else
		err = vcpu_io(fd, KVM_SET_XSAVE, x, "KVM_SET_XSAVE", id);
	free(x);
	return err;
}

/*
 * The entries husk set, exactly. Linux 6.1's KVM_GET_CPUID2 never says how
 * many there are (it keeps nent as it was on success and does not copy it
 * back on E2BIG), but it fails with E2BIG for any nent below the count:
 * the count is the least nent that succeeds.
 */
static int save_cpuid(int fd, unsigned id, struct snap_writer *w)
{
	struct kvm_cpuid2 *c = calloc(1, sizeof(*c) + CPUID_MAX_ENTRIES * sizeof(c->entries[0]));
	unsigned lo = 1, hi = CPUID_MAX_ENTRIES;
	int err;

	if (!c)
		return husk_seterr(ENOMEM, "out of memory");
	c->nent = hi;
	err = vcpu_io(fd, KVM_GET_CPUID2, c, "KVM_GET_CPUID2", id);
	while (!err && lo < hi) {
		c->nent = lo + (hi - lo) / 2;
		if (ioctl(fd, KVM_GET_CPUID2, c) == 0)
			hi = c->nent;
		else if (errno == E2BIG)
			lo = c->nent + 1;
		else
			err = husk_seterr(errno, "KVM_GET_CPUID2 on vCPU %u: %s", id, strerror(errno));
	}
	c->nent = hi;
	if (!err)
		err = vcpu_io(fd, KVM_GET_CPUID2, c, "KVM_GET_CPUID2", id);
	if (!err)
		snap_put(w, T_VCPU_CPUID, c->entries, hi * sizeof(c->entries[0]));
	free(c);
	return err;
}

/* Only what husk would give this vCPU on this host (restore_check_x86.h). */
static int restore_cpuid(const struct kvm_sys *k, int fd, unsigned id, unsigned nr_vcpus,
			 const struct snap_section *sec)
{
	struct kvm_cpuid2 *c;
	struct tlv t;
	int err;

	if (snap_get(sec, T_VCPU_CPUID, &t) != 1 || !t.len ||
	    t.len % sizeof(struct kvm_cpuid_entry2) ||
	    t.len / sizeof(struct kvm_cpuid_entry2) > CPUID_MAX_ENTRIES)
		return husk_seterr(EINVAL, "vCPU %u: no usable CPUID in the template", id);
	c = calloc(1, sizeof(*c) + t.len);
	if (!c)
		return husk_seterr(ENOMEM, "out of memory");
	c->nent = t.len / sizeof(struct kvm_cpuid_entry2);
	memcpy(c->entries, t.val, t.len);
	err = restore_check_cpuid_x86(k->arch.cpuid,
				      kvm_cap(k, KVM_CAP_TSC_DEADLINE_TIMER) > 0, c->entries,
				      c->nent, id, nr_vcpus);
	if (!err)
		err = vcpu_io(fd, KVM_SET_CPUID2, c, "KVM_SET_CPUID2", id);
	free(c);
	return err;
}

/* ---- vCPUs ---- */

/* A fixed-size KVM structure, read by ioctl into a section element. */
#define SAVE_FIXED(tag, type, req) do {					\
		type v_;						\
		memset(&v_, 0, sizeof(v_));				\
		err = vcpu_io(fd, req, &v_, #req, id);			\
		if (err)						\
			return err;					\
		snap_put(w, tag, &v_, sizeof(v_));			\
	} while (0)

/* The same back, after check(&value) (0 accepts) when there is one. */
#define RESTORE_FIXED(tag, type, req, check) do {			\
		type v_;						\
		err = snap_get_exact(sec, tag, &v_, sizeof(v_));	\
		if (err)						\
			return husk_seterr(err, "vCPU %u: %s", id, husk_lasterr()); \
		err = check;						\
		if (!err)						\
			err = vcpu_io(fd, req, &v_, #req, id);		\
		if (err)						\
			return err;					\
	} while (0)

/* AMD (and Hygon): CPUID vendor "AuthenticAMD"/"HygonGenuine". */
static bool amd_host(const struct kvm_sys *k)
{
	unsigned i;

	for (i = 0; i < k->arch.cpuid->nent; i++) {
		const struct kvm_cpuid_entry2 *e = &k->arch.cpuid->entries[i];

		if (e->function == 0)
			return (e->ebx == 0x68747541 && e->edx == 0x69746e65) ||	/* "Auth" "enti" */
			       (e->ebx == 0x6f677948 && e->edx == 0x6e65476e);	/* "Hygo" "nGen" */
	}
	return false;
}

static int restore_sregs(const struct kvm_sys *k, int fd, unsigned id,
			 const struct snap_section *sec)
{
	struct kvm_sregs sr;
	int err = snap_get_exact(sec, T_VCPU_SREGS, &sr, sizeof(sr));

	if (err)
		return husk_seterr(err, "vCPU %u: %s", id, husk_lasterr());
	/*
	 * SVM keeps no busy bit for TR: KVM adds it when it reports TR (for
	 * VMX, whose VM entry insists on it). Written back busy, an emulated
	 * SVM (QEMU's, which our test host runs) fails every ring-3 port
	 * access against the TSS I/O bitmap, since its own LTR leaves the
	 * hidden type "available". AMD's VMRUN takes either; give it what SVM
	 * held. Intel hosts get the saved value, busy, as VMX requires.
	 */
	if (amd_host(k) && sr.tr.type == 11)
		sr.tr.type = 9;
	return vcpu_io(fd, KVM_SET_SREGS, &sr, "KVM_SET_SREGS", id);
}

int vmstate_save_vcpu_x86(const struct kvm_sys *k, int fd, unsigned id, struct snap_writer *w)
{
	int err;

	snap_begin(w, SNAP_VCPU, id);
	err = save_cpuid(fd, id, w);
	if (err)
		return err;
	SAVE_FIXED(T_VCPU_MP_STATE, struct kvm_mp_state, KVM_GET_MP_STATE);
	SAVE_FIXED(T_VCPU_REGS, struct kvm_regs, KVM_GET_REGS);
	SAVE_FIXED(T_VCPU_SREGS, struct kvm_sregs, KVM_GET_SREGS);

	err = save_xsave(k, fd, id, w);
	if (err)
		return err;
	if (k->arch.have_xcrs)
		SAVE_FIXED(T_VCPU_XCRS, struct kvm_xcrs, KVM_GET_XCRS);
	SAVE_FIXED(T_VCPU_DEBUGREGS, struct kvm_debugregs, KVM_GET_DEBUGREGS);
	SAVE_FIXED(T_VCPU_LAPIC, struct kvm_lapic_state, KVM_GET_LAPIC);
	err = save_msrs(k, fd, id, w);
	if (err)
		return err;
	/* Last: reading the others must not change what is pending. */
	SAVE_FIXED(T_VCPU_EVENTS, struct kvm_vcpu_events, KVM_GET_VCPU_EVENTS);
	snap_end(w);
	return 0;
}

int vmstate_restore_vcpu_x86(const struct kvm_sys *k, int fd, unsigned id, unsigned nr_vcpus,
			     const struct snap_section *sec)
{
	int err;

	err = restore_cpuid(k, fd, id, nr_vcpus, sec);
	if (err)
		return err;
	RESTORE_FIXED(T_VCPU_MP_STATE, struct kvm_mp_state, KVM_SET_MP_STATE,
		      restore_check_mp_state_x86(&v_, id));
	/* Registers, XSAVE, XCRs, debug registers: KVM checks them as the guest's own. */
	RESTORE_FIXED(T_VCPU_REGS, struct kvm_regs, KVM_SET_REGS, 0);
	err = restore_sregs(k, fd, id, sec);
	if (err)
		return err;
	err = restore_xsave(k, fd, id, sec);
	if (err)
		return err;
	if (k->arch.have_xcrs)
		RESTORE_FIXED(T_VCPU_XCRS, struct kvm_xcrs, KVM_SET_XCRS, 0);
	RESTORE_FIXED(T_VCPU_DEBUGREGS, struct kvm_debugregs, KVM_SET_DEBUGREGS, 0);
	RESTORE_FIXED(T_VCPU_LAPIC, struct kvm_lapic_state, KVM_SET_LAPIC,
		      restore_check_lapic_x86(&v_, id));
	err = restore_msrs(fd, id, sec);
	if (err)
		return err;
	RESTORE_FIXED(T_VCPU_EVENTS, struct kvm_vcpu_events, KVM_SET_VCPU_EVENTS,
		      restore_check_events_x86(&v_, id));
	return 0;
}

/* ---- the VM ---- */

static int vm_io(int fd, unsigned long req, void *arg, const char *name)
{
	if (ioctl(fd, req, arg) < 0)
		return husk_seterr(errno, "%s: %s", name, strerror(errno));
	return 0;
}

static const struct { uint32_t chip; uint16_t tag; } chips[] = {
	{ KVM_IRQCHIP_PIC_MASTER, T_VM_PIC_MASTER },
	{ KVM_IRQCHIP_PIC_SLAVE, T_VM_PIC_SLAVE },
	{ KVM_IRQCHIP_IOAPIC, T_VM_IOAPIC },
};

/* Each vCPU's TSC and TSC deadline: le64 pairs in vCPU order. */
struct tsc_pair {
	uint64_t tsc, deadline;
};

static int tsc_io(int fd, unsigned id, struct tsc_pair *p, bool set)
{
	struct {
		struct kvm_msrs h;
		struct kvm_msr_entry e[2];
	} m;
	int n;

	memset(&m, 0, sizeof(m));
	m.h.nmsrs = 2;
	m.e[0].index = MSR_TSC;
	m.e[1].index = MSR_TSC_DEADLINE;
	m.e[0].data = p->tsc;
	m.e[1].data = p->deadline;
	n = ioctl(fd, set ? KVM_SET_MSRS : KVM_GET_MSRS, &m);
	if (n != 2)
		return husk_seterr(n < 0 ? errno : EIO, "%s TSC on vCPU %u: %s",
				   set ? "KVM_SET_MSRS" : "KVM_GET_MSRS", id,
				   n < 0 ? strerror(errno) : "refused");
	p->tsc = m.e[0].data;
	p->deadline = m.e[1].data;
	return 0;
}

int vmstate_save_vm_x86(int fd, const int *vcpu_fds, unsigned n, struct snap_writer *w)
{
	struct tsc_pair tsc[VM_STATE_MAX_VCPUS];
	struct kvm_clock_data clock;
	struct kvm_pit_state2 pit;
	struct kvm_irqchip chip;
	unsigned i;
	int err;

	if (n > VM_STATE_MAX_VCPUS)
		return husk_seterr(EINVAL, "%u vCPUs", n);
	/*
	 * The clock and every TSC together, first: restored the same way, no
	 * time passes between them for the guest, whatever the rest costs.
	 */
	memset(&clock, 0, sizeof(clock));
	err = vm_io(fd, KVM_GET_CLOCK, &clock, "KVM_GET_CLOCK");
	for (i = 0; !err && i < n; i++)
		err = tsc_io(vcpu_fds[i], i, &tsc[i], false);
	if (err)
		return err;
	snap_begin(w, SNAP_VM, 0);
	snap_put(w, T_VM_CLOCK, &clock, sizeof(clock));
	snap_put(w, T_VM_TSC, tsc, n * sizeof(tsc[0]));
	for (i = 0; i < ARRAY_SIZE(chips); i++) {
		memset(&chip, 0, sizeof(chip));
		chip.chip_id = chips[i].chip;
		err = vm_io(fd, KVM_GET_IRQCHIP, &chip, "KVM_GET_IRQCHIP");
		if (err)
			return err;
		snap_put(w, chips[i].tag, &chip, sizeof(chip));
	}
	memset(&pit, 0, sizeof(pit));
	err = vm_io(fd, KVM_GET_PIT2, &pit, "KVM_GET_PIT2");
	if (err)
		return err;
	snap_put(w, T_VM_PIT, &pit, sizeof(pit));
	snap_end(w);
	return 0;
}

int vmstate_restore_vm_x86(int fd, const int *vcpu_fds, unsigned n,
			   const struct snap_section *sec)
{
	struct tsc_pair tsc[VM_STATE_MAX_VCPUS];
	struct kvm_clock_data clock;
	struct kvm_pit_state2 pit;
	struct kvm_irqchip chip;
	unsigned i;
	int err;

	if (n > VM_STATE_MAX_VCPUS)
		return husk_seterr(EINVAL, "%u vCPUs", n);
	err = snap_get_exact(sec, T_VM_PIT, &pit, sizeof(pit));
	if (!err)
		err = restore_check_pit_x86(&pit);
	if (!err) {
		memset(pit.reserved, 0, sizeof(pit.reserved));
		err = vm_io(fd, KVM_SET_PIT2, &pit, "KVM_SET_PIT2");
	}
	if (!err)
		err = snap_get_exact(sec, T_VM_CLOCK, &clock, sizeof(clock));
	if (!err)
		err = snap_get_exact(sec, T_VM_TSC, tsc, n * sizeof(tsc[0]));
	for (i = 0; !err && i < ARRAY_SIZE(chips); i++) {
		err = snap_get_exact(sec, chips[i].tag, &chip, sizeof(chip));
		if (!err && chip.chip_id != chips[i].chip)
			err = husk_seterr(EINVAL, "the template's interrupt controller %u is "
					  "labelled %u", chips[i].chip, chip.chip_id);
		if (!err)
			err = restore_check_irqchip_x86(&chip);
		if (!err)
			err = vm_io(fd, KVM_SET_IRQCHIP, &chip, "KVM_SET_IRQCHIP");
	}
	if (err)
		return err;
	/*
	 * flags 0: the guest's kvm-clock goes on from the value it had, not
	 * from the host's realtime clock (which would jump it by the
	 * template's age); the wall clock is set by guest-init from the job.
	 * Then each TSC, at once, as saved with it, and its deadline after it.
	 */
	clock.flags = 0;
	memset(clock.pad, 0, sizeof(clock.pad));
	err = vm_io(fd, KVM_SET_CLOCK, &clock, "KVM_SET_CLOCK");
	for (i = 0; !err && i < n; i++)
		err = tsc_io(vcpu_fds[i], i, &tsc[i], true);
	return err;
}
