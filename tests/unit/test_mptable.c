/*
 * Unit tests for mptable_x86: the MP floating pointer and configuration
 * table written at the EBDA for 1, 2 and 32 CPUs, parsed back the way a
 * Linux guest does (signatures, checksums, entry walk by type): processors
 * with APIC IDs 0..n-1, one ISA bus, one IOAPIC, ISA IRQ i on pin i, the
 * LINT0/LINT1 wiring, size bounds, and rejected CPU counts.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "machine/guest_mem.h"
#include "x86/layout_x86.h"
#include "x86/mptable_x86.h"
#include "lib/util.h"
#include "suites.h"

#define RAM_SIZE (1u << 20)

static uint8_t *ram;
static struct guest_mem gm;

static void setup_ram(void)
{
	ram = calloc(1, RAM_SIZE);
	ck_assert_ptr_nonnull(ram);
	gmem_init_buffer(&gm, ram, RAM_SIZE);
}

static void teardown_ram(void)
{
	free(ram);
	ram = NULL;
}

static uint8_t byte_sum(const uint8_t *p, size_t len)
{
	uint8_t s = 0;

	while (len--)
		s += *p++;
	return s;
}

/* What a guest finds when it walks the table. */
struct parsed {
	unsigned cpus, buses, ioapics, intsrcs, lintsrcs, entries;
	struct mpc_cpu cpu[64];
	struct mpc_bus bus;
	struct mpc_ioapic ioapic;
	struct mpc_intsrc intsrc[32];
	struct mpc_intsrc lint[4];
	uint64_t end;		/* first gpa after the configuration table */
};

static void parse(uint64_t gpa, struct parsed *out)
{
	const struct mpf_intel *mpf = (const void *)(ram + gpa);
	const struct mpc_table *mpc;
	const uint8_t *p, *end;

	memset(out, 0, sizeof(*out));
	ck_assert_mem_eq(mpf->signature, "_MP_", 4);
	ck_assert_uint_eq(mpf->length, 1);
	ck_assert_uint_eq(mpf->specification, 4);
	ck_assert_uint_eq(byte_sum((const uint8_t *)mpf, 16), 0);
	ck_assert_uint_eq(mpf->feature1, 0);	/* 0: a configuration table follows */
	ck_assert_uint_ne(mpf->physptr, 0);
	ck_assert_uint_lt(mpf->physptr, RAM_SIZE);

	mpc = (const void *)(ram + mpf->physptr);
	ck_assert_mem_eq(mpc->signature, "PCMP", 4);
	ck_assert_uint_eq(mpc->spec, 4);
	ck_assert_uint_ge(mpc->length, sizeof(*mpc));
	ck_assert_uint_le(mpf->physptr + mpc->length, RAM_SIZE);
	ck_assert_uint_eq(byte_sum((const uint8_t *)mpc, mpc->length), 0);
	ck_assert_uint_eq(mpc->lapic, LAPIC_GPA);
	ck_assert_uint_eq(mpc->oemptr, 0);
	ck_assert_uint_eq(mpc->oemsize, 0);

	p = (const uint8_t *)(mpc + 1);
	end = (const uint8_t *)mpc + mpc->length;
	while (p < end) {
		switch (*p) {
		case MP_PROCESSOR:
			ck_assert(p + sizeof(struct mpc_cpu) <= end);
			ck_assert_uint_lt(out->cpus, 64);
			memcpy(&out->cpu[out->cpus++], p, sizeof(struct mpc_cpu));
			p += sizeof(struct mpc_cpu);
			break;
		case MP_BUS:
			memcpy(&out->bus, p, sizeof(out->bus));
			out->buses++;
			p += 8;
			break;
		case MP_IOAPIC:
			memcpy(&out->ioapic, p, sizeof(out->ioapic));
			out->ioapics++;
			p += 8;
			break;
		case MP_INTSRC:
			ck_assert_uint_lt(out->intsrcs, 32);
			memcpy(&out->intsrc[out->intsrcs++], p, 8);
			p += 8;
			break;
		case MP_LINTSRC:
			ck_assert_uint_lt(out->lintsrcs, 4);
			memcpy(&out->lint[out->lintsrcs++], p, 8);
			p += 8;
			break;
		default:
			ck_abort_msg("unknown MP entry type %u at offset %td", *p,
				     p - (const uint8_t *)mpc);
		}
		out->entries++;
	}
	ck_assert_ptr_eq(p, end);
	ck_assert_uint_eq(mpc->oemcount, out->entries);
	out->end = mpf->physptr + mpc->length;
}

static void check_table(unsigned n)
{
	struct parsed t;
	unsigned i, j;

	ck_assert_int_eq(mptable_write_x86(&gm, EBDA_GPA, n), 0);
	parse(EBDA_GPA, &t);
	ck_assert_uint_eq(t.end - EBDA_GPA, mptable_size_x86(n));

	ck_assert_uint_eq(t.cpus, n);
	for (i = 0; i < n; i++) {
		ck_assert_uint_eq(t.cpu[i].apicid, i);
		ck_assert_uint_eq(t.cpu[i].cpuflag & MPC_CPU_ENABLED, MPC_CPU_ENABLED);
		ck_assert_uint_eq(t.cpu[i].cpuflag & MPC_CPU_BSP, i == 0 ? MPC_CPU_BSP : 0);
		ck_assert_uint_ne(t.cpu[i].apicver, 0);
	}

	ck_assert_uint_eq(t.buses, 1);
	ck_assert_uint_eq(t.bus.busid, 0);
	ck_assert_mem_eq(t.bus.bustype, "ISA   ", 6);

	ck_assert_uint_eq(t.ioapics, 1);
	ck_assert_uint_eq(t.ioapic.apicaddr, IOAPIC_GPA);
	ck_assert_uint_eq(t.ioapic.flags & 1, 1);	/* usable */
	ck_assert_uint_ne(t.ioapic.apicver, 0);
	for (i = 0; i < n; i++)
		ck_assert_uint_ne(t.ioapic.apicid, t.cpu[i].apicid);

	ck_assert_uint_eq(t.intsrcs, MP_ISA_IRQS);
	for (i = 0; i < MP_ISA_IRQS; i++) {
		ck_assert_uint_eq(t.intsrc[i].irqtype, MP_INT);
		ck_assert_uint_eq(t.intsrc[i].srcbus, t.bus.busid);
		ck_assert_uint_eq(t.intsrc[i].srcbusirq, i);
		ck_assert_uint_eq(t.intsrc[i].dstapic, t.ioapic.apicid);
		ck_assert_uint_eq(t.intsrc[i].dstirq, i);
		ck_assert_uint_eq(t.intsrc[i].irqflag, 0);	/* conforms to the bus */
	}
	/* Each ISA IRQ is listed exactly once. */
	for (i = 0; i < MP_ISA_IRQS; i++)
		for (j = i + 1; j < MP_ISA_IRQS; j++)
			ck_assert_uint_ne(t.intsrc[i].srcbusirq, t.intsrc[j].srcbusirq);

	ck_assert_uint_eq(t.lintsrcs, 2);
	ck_assert_uint_eq(t.lint[0].irqtype, MP_EXTINT);
	ck_assert_uint_eq(t.lint[0].dstapic, 0xff);	/* all local APICs */
	ck_assert_uint_eq(t.lint[0].dstirq, 0);		/* LINT0 */
	ck_assert_uint_eq(t.lint[1].irqtype, MP_NMI);
	ck_assert_uint_eq(t.lint[1].dstapic, 0xff);
	ck_assert_uint_eq(t.lint[1].dstirq, 1);		/* LINT1 */

	ck_assert_uint_eq(t.entries, n + 2 + MP_ISA_IRQS + 2);
}

START_TEST(one_cpu)
{
	check_table(1);
	/* The floating pointer is at the EBDA, the table right after it. */
	ck_assert_uint_eq(((struct mpf_intel *)(ram + EBDA_GPA))->physptr, EBDA_GPA + 16);
}
END_TEST

START_TEST(two_cpus)
{
	check_table(2);
}
END_TEST

START_TEST(max_cpus_fit_below_640k)
{
	check_table(MPTABLE_MAX_CPUS);
	ck_assert_uint_le(EBDA_GPA + mptable_size_x86(MPTABLE_MAX_CPUS), 0xa0000);
	/* Nothing written past the table. */
	ck_assert_uint_eq(ram[EBDA_GPA + mptable_size_x86(MPTABLE_MAX_CPUS)], 0);
}
END_TEST

START_TEST(every_cpu_count)
{
	unsigned n;

	for (n = 1; n <= MPTABLE_MAX_CPUS; n++) {
		memset(ram + EBDA_GPA, 0xcc, 0x400);
		check_table(n);
		/* Exactly mptable_size_x86(n) bytes were written, no more. */
		ck_assert_uint_eq(ram[EBDA_GPA + mptable_size_x86(n)], 0xcc);
		ck_assert_uint_eq(ram[EBDA_GPA - 1], 0);
	}
}
END_TEST

START_TEST(size_formula)
{
	ck_assert_uint_eq(sizeof(struct mpf_intel), 16);
	ck_assert_uint_eq(sizeof(struct mpc_table), 44);
	ck_assert_uint_eq(sizeof(struct mpc_cpu), 20);
	ck_assert_uint_eq(sizeof(struct mpc_bus), 8);
	ck_assert_uint_eq(sizeof(struct mpc_ioapic), 8);
	ck_assert_uint_eq(sizeof(struct mpc_intsrc), 8);
	ck_assert_uint_eq(mptable_size_x86(1), 16 + 44 + 20 + 8 + 8 + 18 * 8);
	ck_assert_uint_eq(mptable_size_x86(32) - mptable_size_x86(31), 20);
}
END_TEST

START_TEST(zero_cpus_rejected)
{
	ck_assert_int_eq(mptable_write_x86(&gm, EBDA_GPA, 0), -EINVAL);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "1..32 CPUs, not 0"));
	ck_assert_uint_eq(ram[EBDA_GPA], 0);
}
END_TEST

START_TEST(too_many_cpus_rejected)
{
	ck_assert_int_eq(mptable_write_x86(&gm, EBDA_GPA, MPTABLE_MAX_CPUS + 1), -EINVAL);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "not 33"));
	ck_assert_int_eq(mptable_write_x86(&gm, EBDA_GPA, 255), -EINVAL);
	ck_assert_int_eq(mptable_write_x86(&gm, EBDA_GPA, UINT32_MAX), -EINVAL);
	ck_assert_uint_eq(ram[EBDA_GPA], 0);
}
END_TEST

START_TEST(outside_ram_rejected)
{
	ck_assert_int_eq(mptable_write_x86(&gm, RAM_SIZE - 16, 1), -EFAULT);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "no room for the MP table"));
	ck_assert_int_eq(mptable_write_x86(&gm, GMEM_HOLE_START, 1), -EFAULT);
	ck_assert_uint_eq(ram[RAM_SIZE - 16], 0);
}
END_TEST

START_TEST(other_address)
{
	/* physptr follows the gpa the table is written at. */
	struct parsed t;

	ck_assert_int_eq(mptable_write_x86(&gm, 0xf0000, 4), 0);
	ck_assert_uint_eq(((struct mpf_intel *)(ram + 0xf0000))->physptr, 0xf0010);
	parse(0xf0000, &t);
	ck_assert_uint_eq(t.cpus, 4);
}
END_TEST

START_TEST(checksum_helper)
{
	uint8_t buf[5] = { 1, 2, 3, 0xff, 0 };

	ck_assert_uint_eq(mp_checksum(buf, 0), 0);
	ck_assert_uint_eq(mp_checksum(buf, 3), (uint8_t)-6);
	ck_assert_uint_eq(mp_checksum(buf, 4), (uint8_t)-5);
	buf[4] = mp_checksum(buf, 4);
	ck_assert_uint_eq(mp_checksum(buf, 5), 0);
}
END_TEST

Suite *mptable_suite(void)
{
	Suite *s = suite_create("mptable");
	TCase *tc = tcase_create("mptable");

	tcase_add_checked_fixture(tc, setup_ram, teardown_ram);
	tcase_add_test(tc, one_cpu);
	tcase_add_test(tc, two_cpus);
	tcase_add_test(tc, max_cpus_fit_below_640k);
	tcase_add_test(tc, every_cpu_count);
	tcase_add_test(tc, size_formula);
	tcase_add_test(tc, zero_cpus_rejected);
	tcase_add_test(tc, too_many_cpus_rejected);
	tcase_add_test(tc, outside_ram_rejected);
	tcase_add_test(tc, other_address);
	tcase_add_test(tc, checksum_helper);
	suite_add_tcase(s, tc);
	return s;
}
