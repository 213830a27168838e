/*
 * Unit tests for what a template's state may ask of KVM, before any ioctl:
 * on x86 (restore_check_x86) the CPUID against a fake KVM_GET_SUPPORTED_CPUID
 * -- what husk gives a vCPU at boot passes, a leaf, feature bit, vendor or
 * address width the host does not offer is refused -- and the LAPIC, MP
 * state, events, 8259s, IOAPIC and PIT; on arm64 (restore_check_arm64) the
 * register ids a template may set against a fake KVM_GET_REG_LIST
 * (firmware, identification and configuration registers never), and the
 * GIC registers.
 */
#include <errno.h>
#include <string.h>

#include "arm64/cpu_arm64.h"
#include "arm64/restore_check_arm64.h"
#include "lib/util.h"
#include "suites.h"
#include "machine/kvm.h"
#include "template/snapshot.h"
#include "x86/cpuid_x86.h"
#include "x86/restore_check_x86.h"
#include "x86/vmstate_x86.h"

/* ---- x86 ---- */

static struct {
	struct kvm_cpuid2 h;
	struct kvm_cpuid_entry2 e[CPUID_MAX_ENTRIES];
} sup;
static struct kvm_cpuid_entry2 tpl[CPUID_MAX_ENTRIES];
static unsigned ntpl;

static void add(uint32_t fn, uint32_t idx, uint32_t flags, uint32_t eax, uint32_t ebx,
		uint32_t ecx, uint32_t edx)
{
	struct kvm_cpuid_entry2 *e = &sup.e[sup.h.nent++];

	memset(e, 0, sizeof(*e));
	e->function = fn;
	e->index = idx;
	e->flags = flags;
	e->eax = eax;
	e->ebx = ebx;
	e->ecx = ecx;
	e->edx = edx;
}

#define SIG KVM_CPUID_FLAG_SIGNIFCANT_INDEX

/* A host's supported CPUID, and vCPU 1 of 2's as husk's boot path sets it. */
static void fake_host(void)
{
	memset(&sup, 0, sizeof(sup));
	add(0, 0, 0, 0xd, 0x756e6547, 0x6c65746e, 0x49656e69);	/* GenuineIntel */
	add(1, 0, 0, 0x806f8, 0x00010800, 0x76fab223, 0x0f8bfbff);	/* no OSXSAVE, no TSC deadline */
	add(7, 0, SIG, 0, 0xf1bf07ab, 0x1b405f6e, 0xbc000410);	/* no OSPKE */
	add(0xb, 0, SIG, 1, 1, 0x100, 0);
	add(0xb, 1, SIG, 4, 2, 0x201, 0);
	add(0xd, 0, SIG, 0x2e7, 0x2a88, 0x2a88, 0);
	add(0x80000000, 0, 0, 0x80000008, 0, 0, 0);
	add(0x80000001, 0, 0, 0, 0, 0x121, 0x2c100800);
	add(0x80000008, 0, 0, 0x3030, 0x200, 0, 0);
	add(KVM_CPUID_FEATURES_LEAF, 0, 0, 0x01007afb, 0, 0, 0);
	ntpl = sup.h.nent;
	memcpy(tpl, sup.e, ntpl * sizeof(tpl[0]));
	ck_assert_int_eq(cpuid_normalize_x86(tpl, &ntpl, CPUID_MAX_ENTRIES, 1, 2, 2500000), 0);
	cpuid_set_tsc_deadline_x86(tpl, ntpl);
}

static struct kvm_cpuid_entry2 *leaf(uint32_t fn, uint32_t idx)
{
	return cpuid_find(tpl, ntpl, fn, idx);
}

static int check(void)
{
	return restore_check_cpuid_x86(&sup.h, true, tpl, ntpl, 1, 2);
}

START_TEST(cpuid_as_booted_passes)
{
	fake_host();
	ck_assert_msg(check() == 0, "%s", husk_lasterr());
	/* What KVM sets itself from CR4 once the guest ran. */
	leaf(1, 0)->ecx |= 1u << 27;
	leaf(7, 0)->ecx |= 1u << 4;
	ck_assert_msg(check() == 0, "%s", husk_lasterr());
	/* Fewer features than offered is the guest's loss, not a risk. */
	leaf(7, 0)->ebx &= ~1u;
	ck_assert_int_eq(check(), 0);
}
END_TEST

START_TEST(cpuid_beyond_the_host_refused)
{
	fake_host();
	leaf(7, 0)->ebx |= 1u << 2;		/* SGX, which this host does not offer */
	ck_assert_int_eq(check(), -EINVAL);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "feature bits 0x4 in EBX"));

	fake_host();
	leaf(0xd, 0)->eax |= 1u << 17;		/* an XCR0 component (AMX) not offered */
	ck_assert_int_eq(check(), -EINVAL);

	fake_host();
	tpl[ntpl] = *leaf(7, 0);		/* a leaf the host has no entry for */
	tpl[ntpl].function = 0x14;
	ntpl++;
	ck_assert_int_eq(check(), -EINVAL);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "leaf 0x14 index 0 is not one"));

	fake_host();
	tpl[ntpl++] = *leaf(7, 0);		/* the same leaf twice */
	ck_assert_int_eq(check(), -EINVAL);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "twice"));

	fake_host();
	memcpy(&leaf(0, 0)->ebx, "Auth", 4);	/* another vendor */
	ck_assert_int_eq(check(), -EINVAL);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "vendor"));

	fake_host();
	leaf(0, 0)->eax = 0x20;			/* leaves beyond the host's */
	ck_assert_int_eq(check(), -EINVAL);

	fake_host();
	leaf(0x80000008, 0)->eax = 0x3034;	/* 52 physical address bits, host 48 */
	ck_assert_int_eq(check(), -EINVAL);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "wider addresses"));

	fake_host();
	leaf(KVM_CPUID_FEATURES_LEAF, 0)->eax |= 1u << 30;
	ck_assert_int_eq(check(), -EINVAL);

	fake_host();				/* the TSC deadline bit only with the capability */
	ck_assert_int_eq(restore_check_cpuid_x86(&sup.h, false, tpl, ntpl, 1, 2), -EINVAL);
}
END_TEST

/*
 * Through the restore itself, on a vCPU fd that does not exist: a refused
 * CPUID stops it with the reason, an accepted one reaches KVM_SET_CPUID2.
 */
START_TEST(cpuid_checked_before_the_ioctl)
{
	struct kvm_sys k = { .fd = -1 };
	struct snap_writer w;
	struct snap s;

	fake_host();
	k.arch.cpuid = &sup.h;
	cpuid_find(tpl, ntpl, 1, 0)->ecx &= ~CPUID_1_ECX_TSC_DEADLINE;	/* no such cap here */
	snap_writer_init(&w);
	snap_begin(&w, SNAP_VCPU, 1);
	snap_put(&w, T_VCPU_CPUID, tpl, ntpl * sizeof(tpl[0]));
	snap_end(&w);
	leaf(7, 0)->ebx |= 1u << 2;
	snap_begin(&w, SNAP_VCPU, 0);
	snap_put(&w, T_VCPU_CPUID, tpl, ntpl * sizeof(tpl[0]));
	snap_end(&w);
	ck_assert_int_eq(snap_finish(&w), 0);
	ck_assert_int_eq(snap_parse(w.data, w.len, &s), 0);
	ck_assert_int_eq(vmstate_restore_vcpu_x86(&k, -1, 1, 2, snap_find(&s, SNAP_VCPU, 0)),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "does not offer"));
	ck_assert_int_eq(vmstate_restore_vcpu_x86(&k, -1, 1, 2, snap_find(&s, SNAP_VCPU, 1)),
			 -EBADF);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "KVM_SET_CPUID2"));
	snap_writer_free(&w);
}
END_TEST

START_TEST(x86_fixed_structures)
{
	struct kvm_lapic_state lapic;
	struct kvm_mp_state mp = { KVM_MP_STATE_HALTED };
	struct kvm_vcpu_events ev;
	struct kvm_irqchip chip;
	struct kvm_pit_state2 pit;
	uint32_t apic_id = 3u << 24;
	unsigned i;

	memset(&lapic, 0, sizeof(lapic));
	memcpy(lapic.regs + 0x20, &apic_id, 4);
	ck_assert_int_eq(restore_check_lapic_x86(&lapic, 3), 0);
	ck_assert_int_eq(restore_check_lapic_x86(&lapic, 2), -EINVAL);

	ck_assert_int_eq(restore_check_mp_state_x86(&mp, 0), 0);
	mp.mp_state = KVM_MP_STATE_OPERATING;	/* s390's */
	ck_assert_int_eq(restore_check_mp_state_x86(&mp, 0), -EINVAL);

	memset(&ev, 0, sizeof(ev));
	ev.flags = KVM_VCPUEVENT_VALID_SMM | KVM_VCPUEVENT_VALID_SHADOW;
	ev.exception.injected = 1;
	ev.exception.nr = 14;
	ck_assert_int_eq(restore_check_events_x86(&ev, 0), 0);
	ev.smi.smm = 1;
	ck_assert_int_eq(restore_check_events_x86(&ev, 0), -EINVAL);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "system management mode"));
	ev.smi.smm = 0;
	ev.smi.pending = 1;
	ck_assert_int_eq(restore_check_events_x86(&ev, 0), -EINVAL);
	ev.smi.pending = 0;
	ev.triple_fault.pending = 1;
	ck_assert_int_eq(restore_check_events_x86(&ev, 0), -EINVAL);

	memset(&chip, 0, sizeof(chip));
	chip.chip_id = KVM_IRQCHIP_PIC_MASTER;
	chip.chip.pic.elcr_mask = 0xf8;
	chip.chip.pic.elcr = 0x08;
	ck_assert_int_eq(restore_check_irqchip_x86(&chip), 0);
	chip.chip.pic.elcr = 0x01;		/* a bit the mask does not allow */
	ck_assert_int_eq(restore_check_irqchip_x86(&chip), -EINVAL);
	chip.chip.pic.elcr = 0;
	chip.chip.pic.elcr_mask = 0xff;		/* a mask the guest cannot set */
	ck_assert_int_eq(restore_check_irqchip_x86(&chip), -EINVAL);
	chip.chip_id = KVM_IRQCHIP_PIC_SLAVE;
	chip.chip.pic.elcr_mask = 0xde;
	ck_assert_int_eq(restore_check_irqchip_x86(&chip), 0);
	memset(&chip, 0, sizeof(chip));
	chip.chip_id = KVM_IRQCHIP_IOAPIC;
	chip.chip.ioapic.base_address = 0xfec00000;
	ck_assert_int_eq(restore_check_irqchip_x86(&chip), 0);
	chip.chip.ioapic.base_address = 0xd0000000;	/* over the virtio devices */
	ck_assert_int_eq(restore_check_irqchip_x86(&chip), -EINVAL);
	chip.chip_id = 7;
	ck_assert_int_eq(restore_check_irqchip_x86(&chip), -EINVAL);

	memset(&pit, 0, sizeof(pit));
	for (i = 0; i < 3; i++) {
		pit.channels[i].mode = 0xff;	/* never programmed */
		pit.channels[i].gate = i != 2;
	}
	pit.channels[0].mode = 2;
	pit.channels[0].count = 0x10000;
	pit.channels[0].rw_mode = pit.channels[0].read_state = pit.channels[0].write_state = 3;
	pit.flags = KVM_PIT_FLAGS_HPET_LEGACY;
	ck_assert_int_eq(restore_check_pit_x86(&pit), 0);
	pit.channels[1].mode = 6;		/* an 8254 folds 6 and 7 onto 2 and 3 */
	ck_assert_int_eq(restore_check_pit_x86(&pit), -EINVAL);
	pit.channels[1].mode = 0xff;
	pit.channels[0].count = 0x10001;
	ck_assert_int_eq(restore_check_pit_x86(&pit), -EINVAL);
	pit.channels[0].count = 5;
	pit.channels[2].read_state = 9;
	ck_assert_int_eq(restore_check_pit_x86(&pit), -EINVAL);
	pit.channels[2].read_state = 0;
	pit.flags = 0x80;
	ck_assert_int_eq(restore_check_pit_x86(&pit), -EINVAL);
}
END_TEST

/* ---- arm64 ---- */

#define A64_U64 (KVM_REG_ARM64 | KVM_REG_SIZE_U64)
#define SYS(op0, op1, crn, crm, op2) (A64_U64 | 0x0013ull << 16 | \
	(op0) << 14 | (op1) << 11 | (crn) << 7 | (crm) << 3 | (op2))
#define FW(n) (A64_U64 | 0x0014ull << 16 | (n))

START_TEST(arm64_allowed_ids)
{
	ck_assert(restore_reg_allowed_arm64(arm64_core_reg_x(0)));
	ck_assert(restore_reg_allowed_arm64(arm64_core_reg_pc()));
	ck_assert(restore_reg_allowed_arm64(SYS(3, 0, 1, 0, 0)));	/* SCTLR_EL1 */
	ck_assert(restore_reg_allowed_arm64(SYS(3, 2, 0, 0, 0)));	/* CSSELR_EL1 */
	ck_assert(restore_reg_allowed_arm64(SYS(3, 3, 14, 3, 2)));	/* the virtual counter */
	ck_assert(restore_reg_allowed_arm64(SYS(3, 3, 14, 3, 1)));	/* its timer's control */
	ck_assert(!restore_reg_allowed_arm64(SYS(3, 0, 0, 0, 0)));	/* MIDR_EL1 */
	ck_assert(!restore_reg_allowed_arm64(SYS(3, 0, 0, 0, 5)));	/* MPIDR_EL1 */
	ck_assert(!restore_reg_allowed_arm64(SYS(3, 0, 0, 4, 0)));	/* ID_AA64PFR0_EL1 */
	ck_assert(!restore_reg_allowed_arm64(SYS(3, 1, 0, 0, 1)));	/* CLIDR_EL1 */
	ck_assert(!restore_reg_allowed_arm64(SYS(3, 3, 0, 0, 1)));	/* CTR_EL0 */
	ck_assert(!restore_reg_allowed_arm64(FW(0)));			/* PSCI version */
	ck_assert(!restore_reg_allowed_arm64(FW(1)));			/* SMCCC workaround 1 */
	ck_assert(!restore_reg_allowed_arm64(A64_U64 | 0x0016ull << 16));	/* hypercall bitmap */
	ck_assert(!restore_reg_allowed_arm64(KVM_REG_ARM64 | KVM_REG_SIZE_U32 |
					     0x0011ull << 16));		/* DEMUX: CCSIDR */
	ck_assert(!restore_reg_allowed_arm64(KVM_REG_ARM64 | KVM_REG_SIZE_U2048 |
					     0x0015ull << 16));		/* SVE Z0 */
	ck_assert(!restore_reg_allowed_arm64(KVM_REG_X86 | KVM_REG_SIZE_U64 |
					     (arm64_core_reg_x(0) & 0xffffffff)));
}
END_TEST

static size_t rec(uint8_t *p, size_t off, uint64_t id)
{
	memcpy(p + off, &id, 8);
	memset(p + off + 8, 0x5a, restore_reg_size_arm64(id));
	return off + 8 + restore_reg_size_arm64(id);
}

START_TEST(arm64_register_records)
{
	/* The vCPU's KVM_GET_REG_LIST: PSCI's version is listed, TCR_EL1 is not. */
	const __u64 host[] = { arm64_core_reg_x(0), arm64_core_reg_pc(), SYS(3, 0, 1, 0, 0),
				  FW(0) };
	uint8_t r[256];
	size_t n;

	n = rec(r, 0, arm64_core_reg_x(0));
	n = rec(r, n, SYS(3, 0, 1, 0, 0));
	ck_assert_int_eq(restore_check_regs_arm64(host, 4, r, n, 0), 0);
	ck_assert_int_eq(restore_check_regs_arm64(host, 4, r, 0, 0), 0);
	/* Listed, but firmware: never from a file. */
	ck_assert_int_eq(restore_check_regs_arm64(host, 4, r, rec(r, n, FW(0)), 0), -EINVAL);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "husk does not restore"));
	/* Allowed kind, but not this host's. */
	ck_assert_int_eq(restore_check_regs_arm64(host, 4, r, rec(r, n, SYS(3, 0, 2, 0, 2)), 1),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "vCPU 1: the template sets register"));
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "does not list"));
	/* A value cut short, a record cut short. */
	ck_assert_int_eq(restore_check_regs_arm64(host, 4, r, n - 1, 0), -EINVAL);
	ck_assert_int_eq(restore_check_regs_arm64(host, 4, r, n + 4, 0), -EINVAL);
}
END_TEST

START_TEST(arm64_gic_records)
{
	uint32_t off[RESTORE_GIC_DIST_MAX], w[4];
	uint8_t c[12];
	uint64_t v = 0xf0;
	unsigned n = restore_gic_dist_offsets_arm64(off, RESTORE_GIC_DIST_MAX);

	ck_assert_uint_lt(n, RESTORE_GIC_DIST_MAX);
	ck_assert_uint_eq(off[0], 0x0008);		/* IIDR first */
	ck_assert_uint_eq(off[n - 1], 0x0000);		/* CTLR last */
	w[0] = 0x0008;
	w[1] = 0;
	w[2] = 0x6000 + 8 * 40;				/* IROUTER of SPI 40 */
	w[3] = 0;
	ck_assert_int_eq(restore_check_gic_words_arm64((uint8_t *)w, 16, off, n, "d"), 0);
	w[2] = 0xffc0;					/* GICD_PIDR2: not saved */
	ck_assert_int_eq(restore_check_gic_words_arm64((uint8_t *)w, 16, off, n, "d"), -EINVAL);
	ck_assert_int_eq(restore_check_gic_words_arm64((uint8_t *)w, 12, off, n, "d"), -EINVAL);
	n = restore_gic_redist_offsets_arm64(off);
	ck_assert_uint_le(n, RESTORE_GIC_REDIST_MAX);
	w[0] = 0x10100;					/* ISENABLER0 */
	ck_assert_int_eq(restore_check_gic_words_arm64((uint8_t *)w, 8, off, n, "r"), 0);
	w[0] = 0x0014;					/* GICR_WAKER */
	ck_assert_int_eq(restore_check_gic_words_arm64((uint8_t *)w, 8, off, n, "r"), -EINVAL);

	memcpy(c, &restore_gic_icc_regs_arm64[4], 4);	/* ICC_PMR_EL1 */
	memcpy(c + 4, &v, 8);
	ck_assert_int_eq(restore_check_gic_cpu_arm64(c, 12, 0), 0);
	w[0] = 3 << 14 | 4 << 11 | 12 << 7 | 9 << 3 | 5;	/* ICH_VTR_EL2 */
	memcpy(c, w, 4);
	ck_assert_int_eq(restore_check_gic_cpu_arm64(c, 12, 0), -EINVAL);
	ck_assert_int_eq(restore_check_gic_cpu_arm64(c, 8, 0), -EINVAL);
}
END_TEST

Suite *vmstate_suite(void)
{
	Suite *s = suite_create("vmstate");
	TCase *tc = tcase_create("restore");

	tcase_add_test(tc, cpuid_as_booted_passes);
	tcase_add_test(tc, cpuid_beyond_the_host_refused);
	tcase_add_test(tc, cpuid_checked_before_the_ioctl);
	tcase_add_test(tc, x86_fixed_structures);
	tcase_add_test(tc, arm64_allowed_ids);
	tcase_add_test(tc, arm64_register_records);
	tcase_add_test(tc, arm64_gic_records);
	suite_add_tcase(s, tc);
	return s;
}
