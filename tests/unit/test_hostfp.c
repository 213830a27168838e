/*
 * Unit tests for the host fingerprints (hostfp_x86, hostfp_arm64) fed a
 * fake KVM host: one CPUID leaf, one capability, one MSR, PVM or the test
 * hook changed makes another fingerprint; what names the CPU an ioctl ran
 * on (APIC IDs) does not. The TSC frequency is no input at all: the
 * tolerance a restore gives it is template_check_fp's (test_template.c).
 */
#include <string.h>

#include "arm64/hostfp_arm64.h"
#include "suites.h"
#include "x86/hostfp_x86.h"

static struct kvm_cpuid_entry2 cpuid[6];
static int32_t caps[16];
static uint32_t msrs[8];
static struct hostfp_x86_in in;

static void entry(unsigned i, uint32_t fn, uint32_t idx, uint32_t eax, uint32_t ebx,
		  uint32_t ecx, uint32_t edx)
{
	memset(&cpuid[i], 0, sizeof(cpuid[i]));
	cpuid[i].function = fn;
	cpuid[i].index = idx;
	cpuid[i].eax = eax;
	cpuid[i].ebx = ebx;
	cpuid[i].ecx = ecx;
	cpuid[i].edx = edx;
}

/* A small Intel-like host: vendor, features, topology, a KVM leaf. */
static void fake_host(void)
{
	static const uint32_t idx[] = { 0x10, 0x1b, 0x3b, 0x174, 0xc0000080, 0x4b564d00,
					0x4b564d01, 0x6e0 };
	unsigned i;

	entry(0, 0, 0, 0x1f, 0x756e6547, 0x6c65746e, 0x49656e69);	/* GenuineIntel */
	entry(1, 1, 0, 0x806f8, 0x00010800, 0xfffab223, 0x0f8bfbff);	/* APIC ID 0 */
	entry(2, 7, 0, 0, 0xf1bf07ab, 0x1b415f6e, 0xbc000410);
	cpuid[2].flags = KVM_CPUID_FLAG_SIGNIFCANT_INDEX;
	entry(3, 0xb, 0, 1, 1, 0x100, 3);				/* x2APIC ID 3 */
	cpuid[3].flags = KVM_CPUID_FLAG_SIGNIFCANT_INDEX;
	entry(4, 0x40000001, 0, 0x01007afb, 0, 0, 0);
	entry(5, 0x8000001e, 0, 6, 0x106, 0, 0);
	for (i = 0; i < hostfp_x86_nr_caps; i++)
		caps[i] = 1;
	memcpy(msrs, idx, sizeof(idx));
	memset(&in, 0, sizeof(in));
	in.cpuid = cpuid;
	in.nent = 6;
	in.caps = caps;
	in.msrs = msrs;
	in.nmsrs = 8;
}

static void fp_x86(uint8_t out[SNAP_SHA256_LEN])
{
	hostfp_x86_digest(&in, out);
}

#define SAME(a, b) ck_assert_int_eq(memcmp(a, b, SNAP_SHA256_LEN), 0)
#define DIFFERENT(a, b) ck_assert_int_ne(memcmp(a, b, SNAP_SHA256_LEN), 0)

START_TEST(x86_inputs_count)
{
	uint8_t base[SNAP_SHA256_LEN], fp[SNAP_SHA256_LEN];

	fake_host();
	fp_x86(base);
	fp_x86(fp);
	SAME(base, fp);				/* a function of its inputs */

	cpuid[2].ebx ^= 1u << 5;		/* one CPUID feature bit (AVX2) */
	fp_x86(fp);
	DIFFERENT(base, fp);
	fake_host();
	in.nent = 5;				/* a leaf the other host lacks */
	fp_x86(fp);
	DIFFERENT(base, fp);

	fake_host();
	caps[2] = 0;				/* KVM_CAP_TSC_DEADLINE_TIMER missing */
	fp_x86(fp);
	DIFFERENT(base, fp);

	fake_host();
	msrs[3] = 0x175;			/* one MSR instead of another */
	fp_x86(fp);
	DIFFERENT(base, fp);
	fake_host();
	in.nmsrs = 7;				/* one MSR fewer */
	fp_x86(fp);
	DIFFERENT(base, fp);

	fake_host();
	in.pvm = true;
	fp_x86(fp);
	DIFFERENT(base, fp);

	fake_host();
	in.extra = "another-host";
	fp_x86(fp);
	DIFFERENT(base, fp);
	in.extra = "";				/* empty: as if unset */
	fp_x86(fp);
	SAME(base, fp);
}
END_TEST

/* What names the CPU the ioctl ran on changes from call to call: it must not count. */
START_TEST(x86_cpu_names_do_not_count)
{
	uint8_t base[SNAP_SHA256_LEN], fp[SNAP_SHA256_LEN];

	fake_host();
	fp_x86(base);
	cpuid[1].ebx |= 5u << 24;		/* leaf 1's initial APIC ID */
	cpuid[3].edx = 7;			/* leaf 0xb's x2APIC ID */
	cpuid[5].eax = 9;			/* AMD's extended APIC ID */
	cpuid[5].ebx = (cpuid[5].ebx & ~0xffu) | 4;	/* and compute unit */
	cpuid[2].padding[0] = 1;		/* padding is no input either */
	fp_x86(fp);
	SAME(base, fp);
	cpuid[1].ebx ^= 1u << 16;		/* but the rest of that register is */
	fp_x86(fp);
	DIFFERENT(base, fp);
}
END_TEST

static void fake_arm64(struct hostfp_arm64_in *a)
{
	unsigned i;

	memset(a, 0, sizeof(*a));
	a->id[0] = 0x413fd0c1;			/* MIDR: Neoverse N1 */
	a->id[1] = 0x1100000011111112ull;
	for (i = 0; i < HOSTFP_ARM64_NR_CAPS; i++)
		a->cap[i] = 1;
}

START_TEST(arm64_inputs_count)
{
	struct hostfp_arm64_in a;
	uint8_t base[32], fp[32];

	fake_arm64(&a);
	hostfp_arm64_digest(&a, base);
	hostfp_arm64_digest(&a, fp);
	SAME(base, fp);
	a.id[0] = 0x414fd0b1;			/* another CPU model */
	hostfp_arm64_digest(&a, fp);
	DIFFERENT(base, fp);
	fake_arm64(&a);
	a.id[3] ^= 1u << 4;			/* one ISAR1 feature field */
	hostfp_arm64_digest(&a, fp);
	DIFFERENT(base, fp);
	fake_arm64(&a);
	a.cap[3] = 0;				/* KVM_CAP_ARM_SVE */
	hostfp_arm64_digest(&a, fp);
	DIFFERENT(base, fp);
	fake_arm64(&a);
	a.pvm = 1;
	hostfp_arm64_digest(&a, fp);
	DIFFERENT(base, fp);
	fake_arm64(&a);
	a.extra = "another-host";
	hostfp_arm64_digest(&a, fp);
	DIFFERENT(base, fp);
}
END_TEST

Suite *hostfp_suite(void)
{
	Suite *s = suite_create("hostfp");
	TCase *tc = tcase_create("fingerprint");

	tcase_add_test(tc, x86_inputs_count);
	tcase_add_test(tc, x86_cpu_names_do_not_count);
	tcase_add_test(tc, arm64_inputs_count);
	suite_add_tcase(s, tc);
	return s;
}
