/*
 * Unit tests for cpuid_x86: normalizing a fake KVM_GET_SUPPORTED_CPUID
 * array (Intel and AMD flavours) for one vCPU: hypervisor bit, APIC ID and
 * topology in leaves 1, 4, 0xb/0x1f, 0x80000008 and 0x8000001e, the KVM
 * signature and timing leaves, Intel's TSC crystal leaf 0x15, errors for a
 * full array or bad vCPU numbers, and cpuid_find()'s index matching.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "x86/cpuid_x86.h"
#include "lib/util.h"
#include "suites.h"

#define SIG KVM_CPUID_FLAG_SIGNIFCANT_INDEX

static struct kvm_cpuid_entry2 ents[CPUID_MAX_ENTRIES];
static unsigned nent;

static void add(uint32_t fn, uint32_t idx, uint32_t flags, uint32_t eax, uint32_t ebx,
		uint32_t ecx, uint32_t edx)
{
	struct kvm_cpuid_entry2 *e = &ents[nent++];

	memset(e, 0, sizeof(*e));
	e->function = fn;
	e->index = idx;
	e->flags = flags;
	e->eax = eax;
	e->ebx = ebx;
	e->ecx = ecx;
	e->edx = edx;
}

static uint32_t str4(const char *s)
{
	uint32_t v;

	memcpy(&v, s, 4);
	return v;
}

/* Leaf 4 EAX: type, level, self-initializing, sharing and core fields. */
static uint32_t leaf4(unsigned type, unsigned level, unsigned share, unsigned cores)
{
	return (cores << 26) | (share << 14) | 0x100 | (level << 5) | type;
}

#define L1_EBX_HOST	0x07100800u	/* APIC id 7, 16 logical, CLFLUSH 8 */
#define L1_ECX_HOST	0x00000201u	/* SSE3, SSSE3 */
#define L1_EDX_HOST	(0x0789fbffu | CPUID_1_EDX_HTT)
#define KVM_FEATURES	0x01007afbu

static void base_leaves(const char *vendor)
{
	memset(ents, 0, sizeof(ents));
	nent = 0;
	add(0, 0, 0, 0x16, str4(vendor), str4(vendor + 8), str4(vendor + 4));
	add(1, 0, 0, 0x906ea, L1_EBX_HOST, L1_ECX_HOST, L1_EDX_HOST);
}

static void kvm_leaves(void)
{
	add(KVM_CPUID_SIGNATURE_LEAF, 0, 0, KVM_CPUID_FEATURES_LEAF,
	    str4("KVMK"), str4("VMKV"), str4("M\0\0\0"));
	add(KVM_CPUID_FEATURES_LEAF, 0, 0, KVM_FEATURES, 0, 0, 0);
}

static void setup_intel(void)
{
	base_leaves("GenuineIntel");
	add(4, 0, SIG, leaf4(1, 1, 1, 7), 0x01c0003f, 0x3f, 0);
	add(4, 1, SIG, leaf4(2, 1, 1, 7), 0x01c0003f, 0x3f, 0);
	add(4, 2, SIG, leaf4(3, 2, 1, 7), 0x01c0003f, 0x3ff, 0);
	add(4, 3, SIG, leaf4(3, 3, 15, 7), 0x03c0003f, 0x2fff, 6);
	add(4, 4, SIG, 0, 0, 0, 0);
	add(0xb, 0, SIG, 1, 2, 0x100, 7);
	add(0xb, 1, SIG, 4, 16, 0x201, 7);
	add(0x15, 0, 0, 2, 0xb0, 0, 0);
	kvm_leaves();
	add(0x80000000, 0, 0, 0x80000008, 0, 0, 0);
	add(0x80000008, 0, 0, 0x3027, 0, 0x1234, 0);
}

static void setup_amd(void)
{
	base_leaves("AuthenticAMD");
	add(0x15, 0, 0, 0, 0, 0, 0);
	kvm_leaves();
	add(0x80000000, 0, 0, 0x80000021, 0, 0, 0);
	add(0x80000008, 0, 0, 0x3030, 0, 0x00037f07, 0);
	add(0x8000001e, 0, 0, 5, 0x0105, 0x0300, 0);
}

static struct kvm_cpuid_entry2 *find(uint32_t fn, uint32_t idx)
{
	return cpuid_find(ents, nent, fn, idx);
}

static struct kvm_cpuid_entry2 *must_find(uint32_t fn, uint32_t idx)
{
	struct kvm_cpuid_entry2 *e = find(fn, idx);

	ck_assert_msg(e != NULL, "leaf 0x%x.%u missing", fn, idx);
	return e;
}

static void normalize(unsigned id, unsigned n, uint32_t tsc_khz)
{
	ck_assert_int_eq(cpuid_normalize_x86(ents, &nent, CPUID_MAX_ENTRIES, id, n, tsc_khz), 0);
}

/* ------------------------------------------------------------- leaf 1 -- */

START_TEST(leaf1_hypervisor_bit)
{
	normalize(0, 1, 0);
	ck_assert_uint_eq(must_find(1, 0)->ecx, L1_ECX_HOST | CPUID_1_ECX_HYPERVISOR);
	ck_assert_uint_eq(must_find(1, 0)->eax, 0x906ea);
}
END_TEST

START_TEST(leaf1_apic_id_per_vcpu)
{
	unsigned id = _i;
	struct kvm_cpuid_entry2 *e;

	normalize(id, 4, 0);
	e = must_find(1, 0);
	ck_assert_uint_eq(e->ebx >> 24, id);
	ck_assert_uint_eq((e->ebx >> 16) & 0xff, 4);
	ck_assert_uint_eq(e->ebx & 0xffff, L1_EBX_HOST & 0xffff);
}
END_TEST

START_TEST(leaf1_htt)
{
	normalize(0, 1, 0);
	ck_assert_uint_eq(must_find(1, 0)->edx, L1_EDX_HOST & ~CPUID_1_EDX_HTT);
	ck_assert_uint_eq((must_find(1, 0)->ebx >> 16) & 0xff, 1);
	setup_intel();
	must_find(1, 0)->edx &= ~CPUID_1_EDX_HTT;
	normalize(1, 2, 0);
	ck_assert_uint_eq(must_find(1, 0)->edx, L1_EDX_HOST);
	ck_assert_uint_eq((must_find(1, 0)->ebx >> 16) & 0xff, 2);
}
END_TEST

START_TEST(leaf1_max_vcpus)
{
	normalize(254, 255, 0);
	ck_assert_uint_eq(must_find(1, 0)->ebx >> 24, 254);
	ck_assert_uint_eq((must_find(1, 0)->ebx >> 16) & 0xff, 255);
}
END_TEST

/* ------------------------------------------------------------- leaf 4 -- */

START_TEST(leaf4_cores_and_sharing)
{
	unsigned i;

	normalize(2, 6, 0);	/* 6 cores: 3 bits of core id, field = 7 */
	for (i = 0; i < 4; i++) {
		struct kvm_cpuid_entry2 *e = must_find(4, i);

		ck_assert_uint_eq(e->eax >> 26, 7);
	}
	/* L1/L2 are per core (one thread): nobody shares them. */
	ck_assert_uint_eq((must_find(4, 0)->eax >> 14) & 0xfff, 0);
	ck_assert_uint_eq((must_find(4, 1)->eax >> 14) & 0xfff, 0);
	ck_assert_uint_eq((must_find(4, 2)->eax >> 14) & 0xfff, 0);
	/* L3 is shared by the whole package. */
	ck_assert_uint_eq((must_find(4, 3)->eax >> 14) & 0xfff, 7);
	/* Type and level bits are preserved, other registers too. */
	ck_assert_uint_eq(must_find(4, 0)->eax & 0x3fff, 0x121);
	ck_assert_uint_eq(must_find(4, 3)->eax & 0x3fff, 0x163);
	ck_assert_uint_eq(must_find(4, 3)->ebx, 0x03c0003f);
	ck_assert_uint_eq(must_find(4, 3)->ecx, 0x2fff);
	/* The terminating null subleaf stays null. */
	ck_assert_uint_eq(must_find(4, 4)->eax, 0);
}
END_TEST

START_TEST(leaf4_single_and_power_of_two)
{
	normalize(0, 1, 0);
	ck_assert_uint_eq(must_find(4, 0)->eax >> 26, 0);
	ck_assert_uint_eq((must_find(4, 3)->eax >> 14) & 0xfff, 0);
	setup_intel();
	normalize(0, 8, 0);
	ck_assert_uint_eq(must_find(4, 0)->eax >> 26, 7);
	setup_intel();
	normalize(0, 9, 0);
	ck_assert_uint_eq(must_find(4, 0)->eax >> 26, 15);
	ck_assert_uint_eq((must_find(4, 3)->eax >> 14) & 0xfff, 15);
}
END_TEST

/* ----------------------------------------------------------- leaf 0xb -- */

START_TEST(leaf_b_topology)
{
	struct kvm_cpuid_entry2 *e;
	unsigned i;

	normalize(3, 6, 0);
	e = must_find(0xb, 0);
	ck_assert_uint_eq(e->eax, 0);
	ck_assert_uint_eq(e->ebx, 1);
	ck_assert_uint_eq(e->ecx, 0x100);
	e = must_find(0xb, 1);
	ck_assert_uint_eq(e->eax, 3);
	ck_assert_uint_eq(e->ebx, 6);
	ck_assert_uint_eq(e->ecx, 0x201);
	e = must_find(0xb, 2);	/* added by husk: end of the level list */
	ck_assert_uint_eq(e->eax, 0);
	ck_assert_uint_eq(e->ebx, 0);
	ck_assert_uint_eq(e->ecx, 2);
	ck_assert_uint_eq(e->flags & SIG, SIG);
	for (i = 0; i < 3; i++)
		ck_assert_uint_eq(must_find(0xb, i)->edx, 3);
	ck_assert_ptr_null(find(0xb, 3));
	/* Leaf 0x1f was not reported, so it is not invented. */
	ck_assert_ptr_null(find(0x1f, 0));
}
END_TEST

START_TEST(leaf_b_x2apic_id_per_vcpu)
{
	unsigned id = _i, i;

	normalize(id, 32, 0);
	for (i = 0; i < 3; i++)
		ck_assert_uint_eq(must_find(0xb, i)->edx, id);
	ck_assert_uint_eq(must_find(0xb, 1)->eax, 5);
	ck_assert_uint_eq(must_find(0xb, 1)->ebx, 32);
}
END_TEST

START_TEST(leaf_1f_like_b)
{
	add(0x1f, 0, SIG, 1, 2, 0x100, 7);
	normalize(1, 3, 0);
	ck_assert_uint_eq(must_find(0x1f, 0)->ebx, 1);
	ck_assert_uint_eq(must_find(0x1f, 1)->eax, 2);
	ck_assert_uint_eq(must_find(0x1f, 1)->ebx, 3);
	ck_assert_uint_eq(must_find(0x1f, 1)->ecx, 0x201);
	ck_assert_uint_eq(must_find(0x1f, 2)->ecx, 2);
	ck_assert_uint_eq(must_find(0x1f, 2)->edx, 1);
}
END_TEST

/* --------------------------------------------------------- KVM leaves -- */

START_TEST(kvm_signature_and_timing)
{
	struct kvm_cpuid_entry2 *e;
	char sig[12];

	normalize(0, 2, 2500000);
	e = must_find(KVM_CPUID_SIGNATURE_LEAF, 0);
	memcpy(sig, &e->ebx, 4);
	memcpy(sig + 4, &e->ecx, 4);
	memcpy(sig + 8, &e->edx, 4);
	ck_assert_mem_eq(sig, "KVMKVMKVM\0\0\0", 12);
	ck_assert_uint_eq(e->eax, 0x40000010);
	e = must_find(CPUID_TIMING_LEAF, 0);
	ck_assert_uint_eq(e->eax, 2500000);
	ck_assert_uint_eq(e->ebx, 1000000);
	ck_assert_uint_eq(e->ecx, 0);
	ck_assert_uint_eq(e->edx, 0);
	/* KVM's own feature bits pass through. */
	ck_assert_uint_eq(must_find(KVM_CPUID_FEATURES_LEAF, 0)->eax, KVM_FEATURES);
}
END_TEST

START_TEST(kvm_no_timing_without_tsc)
{
	normalize(0, 2, 0);
	ck_assert_uint_eq(must_find(KVM_CPUID_SIGNATURE_LEAF, 0)->eax, KVM_CPUID_FEATURES_LEAF);
	ck_assert_ptr_null(find(CPUID_TIMING_LEAF, 0));
}
END_TEST

START_TEST(kvm_leaves_added_when_missing)
{
	unsigned before;
	struct kvm_cpuid_entry2 *e;

	base_leaves("GenuineIntel");
	before = nent;
	normalize(0, 1, 1000000);
	ck_assert_uint_eq(nent, before + 3);
	e = must_find(KVM_CPUID_SIGNATURE_LEAF, 0);
	ck_assert_uint_eq(e->eax, CPUID_TIMING_LEAF);
	ck_assert_uint_eq(e->ebx, str4("KVMK"));
	ck_assert_uint_eq(e->ecx, str4("VMKV"));
	ck_assert_uint_eq(e->edx, str4("M\0\0\0"));
	ck_assert_uint_eq(must_find(KVM_CPUID_FEATURES_LEAF, 0)->eax, 0);
	ck_assert_uint_eq(must_find(CPUID_TIMING_LEAF, 0)->eax, 1000000);
}
END_TEST

START_TEST(kvm_normalize_idempotent_count)
{
	unsigned after;

	normalize(0, 2, 1000000);
	after = nent;
	normalize(1, 2, 1000000);
	ck_assert_uint_eq(nent, after);
	ck_assert_uint_eq(must_find(1, 0)->ebx >> 24, 1);
}
END_TEST

/* ---------------------------------------------------------- leaf 0x15 -- */

static void check_crystal(uint32_t tsc_khz)
{
	struct kvm_cpuid_entry2 *e;

	setup_intel();
	normalize(0, 1, tsc_khz);
	e = must_find(0x15, 0);
	ck_assert_uint_ne(e->eax, 0);
	ck_assert_uint_ne(e->ecx, 0);
	ck_assert_uint_eq((uint64_t)e->ecx * e->ebx / e->eax, (uint64_t)tsc_khz * 1000);
}

START_TEST(intel_crystal_leaf)
{
	struct kvm_cpuid_entry2 *e;

	normalize(0, 1, 2999999);
	e = must_find(0x15, 0);
	ck_assert_uint_eq(e->eax, 1);
	ck_assert_uint_eq(e->ebx, 1);
	ck_assert_uint_eq(e->ecx, 2999999000u);
	check_crystal(1);
	check_crystal(4294967);		/* just under 2^32 Hz */
	check_crystal(4294968);		/* just over: needs a multiplier */
	check_crystal(5000000);
	check_crystal(12345678);
}
END_TEST

START_TEST(intel_crystal_untouched_without_tsc)
{
	normalize(0, 1, 0);
	ck_assert_uint_eq(must_find(0x15, 0)->eax, 2);
	ck_assert_uint_eq(must_find(0x15, 0)->ebx, 0xb0);
	ck_assert_uint_eq(must_find(0x15, 0)->ecx, 0);
}
END_TEST

START_TEST(intel_amd_leaves_untouched)
{
	normalize(1, 4, 0);
	ck_assert_uint_eq(must_find(0x80000008, 0)->ecx, 0x1234);
}
END_TEST

/* ---------------------------------------------------------------- AMD -- */

START_TEST(amd_topology)
{
	struct kvm_cpuid_entry2 *e;

	normalize(2, 4, 2000000);
	e = must_find(0x80000008, 0);
	/* NC = 3, ApicIdSize = 2, other bits (PerfTscSize, reserved) kept. */
	ck_assert_uint_eq(e->ecx & 0xff, 3);
	ck_assert_uint_eq((e->ecx >> 12) & 0xf, 2);
	ck_assert_uint_eq(e->ecx, 0x00032f03);
	e = must_find(0x8000001e, 0);
	ck_assert_uint_eq(e->eax, 2);
	ck_assert_uint_eq(e->ebx, 2);
	ck_assert_uint_eq(e->ecx, 0);
	/* Leaf 1 is normalized on AMD too. */
	ck_assert_uint_eq(must_find(1, 0)->ebx >> 24, 2);
	ck_assert_uint_eq(must_find(1, 0)->ecx & CPUID_1_ECX_HYPERVISOR, CPUID_1_ECX_HYPERVISOR);
	/* Intel's crystal leaf is not rewritten on AMD. */
	ck_assert_uint_eq(must_find(0x15, 0)->eax, 0);
	ck_assert_uint_eq(must_find(0x15, 0)->ecx, 0);
	/* The KVM leaves are vendor independent. */
	ck_assert_uint_eq(must_find(CPUID_TIMING_LEAF, 0)->eax, 2000000);
}
END_TEST

START_TEST(amd_single_and_many)
{
	normalize(0, 1, 0);
	ck_assert_uint_eq(must_find(0x80000008, 0)->ecx & 0xf0ff, 0);
	ck_assert_uint_eq(must_find(0x8000001e, 0)->eax, 0);
	setup_amd();
	normalize(31, 32, 0);
	ck_assert_uint_eq(must_find(0x80000008, 0)->ecx & 0xff, 31);
	ck_assert_uint_eq((must_find(0x80000008, 0)->ecx >> 12) & 0xf, 5);
	ck_assert_uint_eq(must_find(0x8000001e, 0)->eax, 31);
	ck_assert_uint_eq(must_find(0x8000001e, 0)->ebx, 31);
}
END_TEST

/* ------------------------------------------------------------- errors -- */

START_TEST(full_array_topology)
{
	unsigned max = nent;

	/* Leaf 0xb subleaf 2 must be added, but there is no room. */
	ck_assert_int_eq(cpuid_normalize_x86(ents, &nent, max, 0, 2, 0), -ENOSPC);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "no room for CPUID topology leaves"));
	ck_assert_uint_eq(nent, max);
}
END_TEST

START_TEST(full_array_kvm_leaves)
{
	unsigned max;

	base_leaves("GenuineIntel");
	kvm_leaves();
	max = nent;
	/* Everything present: nothing needs adding, so a full array is fine. */
	ck_assert_int_eq(cpuid_normalize_x86(ents, &nent, max, 0, 1, 0), 0);
	ck_assert_uint_eq(nent, max);
	/* The timing leaf does not fit. */
	ck_assert_int_eq(cpuid_normalize_x86(ents, &nent, max, 0, 1, 1000000), -ENOSPC);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "no room for KVM CPUID leaves"));
	ck_assert_uint_eq(nent, max);
	/* Without any KVM leaves and one free slot. */
	base_leaves("GenuineIntel");
	max = nent + 1;
	ck_assert_int_eq(cpuid_normalize_x86(ents, &nent, max, 0, 1, 0), -ENOSPC);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "KVM CPUID"));
	ck_assert_uint_le(nent, max);
}
END_TEST

START_TEST(bad_vcpu_ids)
{
	ck_assert_int_eq(cpuid_normalize_x86(ents, &nent, CPUID_MAX_ENTRIES, 0, 0, 0), -EINVAL);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "bad vCPU 0 of 0"));
	ck_assert_int_eq(cpuid_normalize_x86(ents, &nent, CPUID_MAX_ENTRIES, 4, 4, 0), -EINVAL);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "bad vCPU 4 of 4"));
	ck_assert_int_eq(cpuid_normalize_x86(ents, &nent, CPUID_MAX_ENTRIES, 100, 4, 0), -EINVAL);
	ck_assert_int_eq(cpuid_normalize_x86(ents, &nent, CPUID_MAX_ENTRIES, 0, 256, 0), -EINVAL);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "bad vCPU"));
	/* Nothing was modified. */
	ck_assert_uint_eq(must_find(1, 0)->ebx, L1_EBX_HOST);
	ck_assert_uint_eq(must_find(1, 0)->ecx, L1_ECX_HOST);
}
END_TEST

START_TEST(missing_leaf1)
{
	memset(ents, 0, sizeof(ents));
	nent = 0;
	add(0, 0, 0, 0xd, str4("Genu"), str4("ntel"), str4("ineI"));
	ck_assert_int_eq(cpuid_normalize_x86(ents, &nent, CPUID_MAX_ENTRIES, 0, 1, 0), -EINVAL);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "no CPUID leaf 1"));
}
END_TEST

START_TEST(tsc_deadline_bit)
{
	uint32_t ecx;

	memset(ents, 0, sizeof(ents));
	nent = 0;
	add(0, 0, 0, 0xd, str4("Genu"), str4("ntel"), str4("ineI"));
	add(1, 0, 0, 0x806ea, 0, 0x80000001u, 0);
	ecx = find(1, 0)->ecx;
	cpuid_set_tsc_deadline_x86(ents, nent);
	ck_assert_uint_eq(find(1, 0)->ecx, ecx | CPUID_1_ECX_TSC_DEADLINE);
	ck_assert_uint_eq(find(1, 0)->ecx & (1u << 24), 1u << 24);
	/* Without leaf 1 there is nothing to change, and nothing breaks. */
	nent = 1;
	cpuid_set_tsc_deadline_x86(ents, nent);
	ck_assert_uint_eq(find(0, 0)->eax, 0xd);
}
END_TEST

/* ---------------------------------------------------------- cpuid_find -- */

START_TEST(find_significant_index)
{
	memset(ents, 0, sizeof(ents));
	nent = 0;
	add(7, 0, SIG, 0x70, 0, 0, 0);
	add(7, 1, SIG, 0x71, 0, 0, 0);
	add(0x80000001, 3, 0, 0x81, 0, 0, 0);
	add(0xd, 1, SIG, 0xd1, 0, 0, 0);
	ck_assert_uint_eq(must_find(7, 0)->eax, 0x70);
	ck_assert_uint_eq(must_find(7, 1)->eax, 0x71);
	ck_assert_ptr_null(find(7, 2));
	/* Without the flag, the index is ignored. */
	ck_assert_uint_eq(must_find(0x80000001, 0)->eax, 0x81);
	ck_assert_uint_eq(must_find(0x80000001, 3)->eax, 0x81);
	ck_assert_uint_eq(must_find(0x80000001, 0xffffffff)->eax, 0x81);
	ck_assert_ptr_null(find(0xd, 0));
	ck_assert_uint_eq(must_find(0xd, 1)->eax, 0xd1);
	ck_assert_ptr_null(find(0x12345, 0));
	ck_assert_ptr_null(cpuid_find(ents, 0, 7, 0));
	/* Only the first nent entries are searched. */
	ck_assert_ptr_null(cpuid_find(ents, 2, 0x80000001, 0));
}
END_TEST

Suite *cpuid_suite(void)
{
	Suite *s = suite_create("cpuid");
	TCase *tc;

	tc = tcase_create("intel");
	tcase_add_checked_fixture(tc, setup_intel, NULL);
	tcase_add_test(tc, leaf1_hypervisor_bit);
	tcase_add_loop_test(tc, leaf1_apic_id_per_vcpu, 0, 4);
	tcase_add_test(tc, leaf1_htt);
	tcase_add_test(tc, leaf1_max_vcpus);
	tcase_add_test(tc, leaf4_cores_and_sharing);
	tcase_add_test(tc, leaf4_single_and_power_of_two);
	tcase_add_test(tc, leaf_b_topology);
	tcase_add_loop_test(tc, leaf_b_x2apic_id_per_vcpu, 0, 32);
	tcase_add_test(tc, leaf_1f_like_b);
	tcase_add_test(tc, kvm_signature_and_timing);
	tcase_add_test(tc, kvm_no_timing_without_tsc);
	tcase_add_test(tc, kvm_leaves_added_when_missing);
	tcase_add_test(tc, kvm_normalize_idempotent_count);
	tcase_add_test(tc, intel_crystal_leaf);
	tcase_add_test(tc, intel_crystal_untouched_without_tsc);
	tcase_add_test(tc, intel_amd_leaves_untouched);
	tcase_add_test(tc, full_array_topology);
	tcase_add_test(tc, full_array_kvm_leaves);
	tcase_add_test(tc, bad_vcpu_ids);
	tcase_add_test(tc, missing_leaf1);
	tcase_add_test(tc, tsc_deadline_bit);
	tcase_add_test(tc, find_significant_index);
	suite_add_tcase(s, tc);

	tc = tcase_create("amd");
	tcase_add_checked_fixture(tc, setup_amd, NULL);
	tcase_add_test(tc, amd_topology);
	tcase_add_test(tc, amd_single_and_many);
	suite_add_tcase(s, tc);
	return s;
}
