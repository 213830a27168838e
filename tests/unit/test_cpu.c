/*
 * Unit tests for cpu_x86's pure parts: gdt_entry() descriptor encodings and
 * base/limit bit placement, boot_tables_write_x86() (boot GDT and IDT, the
 * PML4/PDPT/PD identity map of the low 4 GiB, stale contents overwritten,
 * -EFAULT without writing past too small guest RAM), boot_sregs_x86() (long
 * mode segments, descriptor tables, control registers, unrelated fields
 * kept) and boot_regs_x86() (64-bit boot protocol registers).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "x86/cpu_x86.h"
#include "x86/layout_x86.h"
#include "machine/guest_mem.h"
#include "suites.h"

#define RAM_SIZE (64u << 20)

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

static uint64_t ram_u64(uint64_t gpa)
{
	uint64_t v;

	memcpy(&v, ram + gpa, sizeof(v));
	return v;
}

/* ---- gdt_entry ---- */

START_TEST(gdt_code64)
{
	ck_assert_uint_eq(gdt_entry(0xa09b, 0, 0xfffff), 0x00af9b000000ffffull);
}
END_TEST

START_TEST(gdt_data)
{
	ck_assert_uint_eq(gdt_entry(0xc093, 0, 0xfffff), 0x00cf93000000ffffull);
}
END_TEST

START_TEST(gdt_tss)
{
	ck_assert_uint_eq(gdt_entry(0x808b, 0, 0xfffff), 0x008f8b000000ffffull);
}
END_TEST

START_TEST(gdt_base_and_limit_placement)
{
	/*
	 * base[15:0] -> bits 16..31, base[23:16] -> 32..39, base[31:24] ->
	 * 56..63; limit[15:0] -> 0..15, limit[19:16] -> 48..51.
	 */
	ck_assert_uint_eq(gdt_entry(0, 0x12345678, 0xabcde), 0x120a00345678bcdeull);
	ck_assert_uint_eq(gdt_entry(0xc093, 0x12345678, 0xabcde), 0x12ca93345678bcdeull);
}
END_TEST

START_TEST(gdt_ignores_out_of_field_bits)
{
	/* Flag bits 8..11 would land on limit[19:16]; limit bits above 19 drop. */
	ck_assert_uint_eq(gdt_entry(0x0f00, 0, 0), 0);
	ck_assert_uint_eq(gdt_entry(0, 0, 0xfff00000u), 0);
	ck_assert_uint_eq(gdt_entry(0xffff, 0xffffffffu, 0xffffffffu), 0xffffffffffffffffull);
}
END_TEST

/* ---- boot_tables_write_x86 ---- */

START_TEST(tables_gdt)
{
	ck_assert_int_eq(boot_tables_write_x86(&gm), 0);
	ck_assert_uint_eq(ram_u64(0x500 + 0), 0);
	ck_assert_uint_eq(ram_u64(0x500 + 8), 0);
	ck_assert_uint_eq(ram_u64(0x500 + BOOT_CS_SEL), 0x00af9b000000ffffull);
	ck_assert_uint_eq(ram_u64(0x500 + BOOT_DS_SEL), 0x00cf93000000ffffull);
	/* The TSS descriptor must survive the IDT write that follows it. */
	ck_assert_uint_eq(ram_u64(0x500 + BOOT_TSS_SEL), 0x008f8b000000ffffull);
}
END_TEST

START_TEST(tables_idt)
{
	memset(ram + BOOT_IDT_GPA, 0xa5, 8);
	ck_assert_int_eq(boot_tables_write_x86(&gm), 0);
	ck_assert_uint_eq(ram_u64(BOOT_IDT_GPA), 0);
}
END_TEST

START_TEST(tables_gdt_and_idt_disjoint)
{
	/* [GDT, GDT + 5 * 8) and [IDT, IDT + 8) must not share a byte. */
	ck_assert_uint_eq(BOOT_GDT_GPA, 0x500);
	ck_assert(BOOT_IDT_GPA >= BOOT_GDT_GPA + BOOT_GDT_ENTRIES * 8 ||
		  BOOT_IDT_GPA + 8 <= BOOT_GDT_GPA);
}
END_TEST

START_TEST(tables_pml4_and_pdpt)
{
	unsigned i;

	ck_assert_int_eq(boot_tables_write_x86(&gm), 0);
	ck_assert_uint_eq(ram_u64(PML4_GPA), 0xa000 | 3);
	for (i = 1; i < 512; i++)
		ck_assert_uint_eq(ram_u64(PML4_GPA + i * 8), 0);
	for (i = 0; i < 4; i++)
		ck_assert_uint_eq(ram_u64(PDPT_GPA + i * 8), (0xb000 + i * 0x1000) | 3);
	for (i = 4; i < 512; i++)
		ck_assert_uint_eq(ram_u64(PDPT_GPA + i * 8), 0);
}
END_TEST

START_TEST(tables_pd_identity_4g)
{
	unsigned i;

	ck_assert_int_eq(boot_tables_write_x86(&gm), 0);
	for (i = 0; i < 2048; i++)
		ck_assert_uint_eq(ram_u64(PD_GPA + i * 8), ((uint64_t)i << 21) | 0x83);
	ck_assert_uint_eq(ram_u64(PD_GPA), 0x83);
	ck_assert_uint_eq(ram_u64(PD_GPA + 2047 * 8), 0xffe00083ull);
	/* Nothing written past the last PD page. */
	ck_assert_uint_eq(ram_u64(PD_GPA + 2048 * 8), 0);
}
END_TEST

START_TEST(tables_overwrite_stale_memory)
{
	unsigned i;

	memset(ram, 0xa5, 0x10000);
	ck_assert_int_eq(boot_tables_write_x86(&gm), 0);
	ck_assert_uint_eq(ram_u64(BOOT_GDT_GPA), 0);
	ck_assert_uint_eq(ram_u64(BOOT_GDT_GPA + 8), 0);
	ck_assert_uint_eq(ram_u64(BOOT_IDT_GPA), 0);
	for (i = 1; i < 512; i++)
		ck_assert_uint_eq(ram_u64(PML4_GPA + i * 8), 0);
	for (i = 4; i < 512; i++)
		ck_assert_uint_eq(ram_u64(PDPT_GPA + i * 8), 0);
	ck_assert_uint_eq(ram_u64(PD_GPA + 5 * 8), (5ull << 21) | 0x83);
	/* Bytes around the tables are left alone. */
	ck_assert_uint_eq(ram[BOOT_GDT_GPA - 1], 0xa5);
	ck_assert_uint_eq(ram[BOOT_IDT_GPA + 8], 0xa5);
	ck_assert_uint_eq(ram[PML4_GPA - 1], 0xa5);
	ck_assert_uint_eq(ram[PD_GPA + 4 * 4096], 0xa5);
}
END_TEST

START_TEST(tables_exact_fit)
{
	/* The last table byte is PD_GPA + 4 pages - 1 = 0xefff. */
	uint8_t *buf = calloc(1, 0xf000);
	struct guest_mem m = { .host = buf, .size = 0xf000, .low_size = 0xf000 };
	uint64_t last;

	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(boot_tables_write_x86(&m), 0);
	memcpy(&last, buf + PD_GPA + 2047 * 8, 8);
	ck_assert_uint_eq(last, 0xffe00083ull);
	free(buf);
}
END_TEST

START_TEST(tables_ram_too_small_for_page_tables)
{
	uint8_t *buf = malloc(0x8000);
	struct guest_mem m = { .host = buf, .size = 0x8000, .low_size = 0x8000 };

	ck_assert_ptr_nonnull(buf);
	memset(buf, 0x5a, 0x8000);
	ck_assert_int_eq(boot_tables_write_x86(&m), -EFAULT);
	free(buf);
}
END_TEST

START_TEST(tables_ram_one_byte_short)
{
	uint8_t *buf = malloc(0xefff);
	struct guest_mem m = { .host = buf, .size = 0xefff, .low_size = 0xefff };
	uint64_t pml4;

	ck_assert_ptr_nonnull(buf);
	memset(buf, 0, 0xefff);
	ck_assert_int_eq(boot_tables_write_x86(&m), -EFAULT);
	/* The page tables are all-or-nothing: PML4 stays untouched. */
	memcpy(&pml4, buf + PML4_GPA, 8);
	ck_assert_uint_eq(pml4, 0);
	free(buf);
}
END_TEST

START_TEST(tables_ram_too_small_for_gdt)
{
	uint8_t *buf = malloc(0x510);
	struct guest_mem m = { .host = buf, .size = 0x510, .low_size = 0x510 };

	ck_assert_ptr_nonnull(buf);
	memset(buf, 0x5a, 0x510);
	ck_assert_int_eq(boot_tables_write_x86(&m), -EFAULT);
	ck_assert_uint_eq(buf[0x50f], 0x5a);
	free(buf);
}
END_TEST

START_TEST(tables_no_ram)
{
	struct guest_mem m;

	memset(&m, 0, sizeof(m));
	ck_assert_int_eq(boot_tables_write_x86(&m), -EFAULT);
}
END_TEST

/* ---- boot_sregs_x86 ---- */

START_TEST(sregs_code_segment)
{
	struct kvm_sregs s;

	memset(&s, 0, sizeof(s));
	boot_sregs_x86(&s);
	ck_assert_uint_eq(s.cs.selector, 0x10);
	ck_assert_uint_eq(s.cs.base, 0);
	ck_assert_uint_eq(s.cs.limit, 0xffffffffu);
	ck_assert_uint_eq(s.cs.type, 0xb);
	ck_assert_uint_eq(s.cs.present, 1);
	ck_assert_uint_eq(s.cs.s, 1);
	ck_assert_uint_eq(s.cs.dpl, 0);
	ck_assert_uint_eq(s.cs.l, 1);
	ck_assert_uint_eq(s.cs.db, 0);
	ck_assert_uint_eq(s.cs.g, 1);
	ck_assert_uint_eq(s.cs.avl, 0);
	ck_assert_uint_eq(s.cs.unusable, 0);
}
END_TEST

static void check_data_seg(const struct kvm_segment *d)
{
	ck_assert_uint_eq(d->selector, 0x18);
	ck_assert_uint_eq(d->base, 0);
	ck_assert_uint_eq(d->limit, 0xffffffffu);
	ck_assert_uint_eq(d->type, 3);
	ck_assert_uint_eq(d->present, 1);
	ck_assert_uint_eq(d->s, 1);
	ck_assert_uint_eq(d->dpl, 0);
	ck_assert_uint_eq(d->l, 0);
	ck_assert_uint_eq(d->db, 1);
	ck_assert_uint_eq(d->g, 1);
	ck_assert_uint_eq(d->unusable, 0);
}

START_TEST(sregs_data_segments)
{
	struct kvm_sregs s;

	memset(&s, 0, sizeof(s));
	boot_sregs_x86(&s);
	check_data_seg(&s.ds);
	check_data_seg(&s.es);
	check_data_seg(&s.fs);
	check_data_seg(&s.gs);
	check_data_seg(&s.ss);
}
END_TEST

START_TEST(sregs_task_register)
{
	struct kvm_sregs s;

	memset(&s, 0, sizeof(s));
	boot_sregs_x86(&s);
	ck_assert_uint_eq(s.tr.selector, 0x20);
	ck_assert_uint_eq(s.tr.base, 0);
	ck_assert_uint_eq(s.tr.type, 0xb);
	ck_assert_uint_eq(s.tr.s, 0);
	ck_assert_uint_eq(s.tr.present, 1);
	ck_assert_uint_eq(s.tr.dpl, 0);
	ck_assert_uint_eq(s.tr.unusable, 0);
}
END_TEST

START_TEST(sregs_descriptor_tables)
{
	struct kvm_sregs s;

	memset(&s, 0, sizeof(s));
	boot_sregs_x86(&s);
	ck_assert_uint_eq(s.gdt.base, 0x500);
	ck_assert_uint_eq(s.gdt.limit, 39);
	ck_assert_uint_eq(s.idt.base, BOOT_IDT_GPA);
	ck_assert_uint_eq(s.idt.limit, 7);
	/* The IDT lies outside the GDT the CPU sees (base..base+limit). */
	ck_assert(s.idt.base > s.gdt.base + s.gdt.limit ||
		  s.idt.base + s.idt.limit < s.gdt.base);
}
END_TEST

START_TEST(sregs_control_registers)
{
	struct kvm_sregs s;

	memset(&s, 0, sizeof(s));
	boot_sregs_x86(&s);
	ck_assert_uint_eq(s.cr0 & (X86_CR0_PE | X86_CR0_PG | X86_CR0_ET | X86_CR0_NE),
			  X86_CR0_PE | X86_CR0_PG | X86_CR0_ET | X86_CR0_NE);
	ck_assert_uint_eq(s.cr0 & (1ull << 30), 0);	/* CD */
	ck_assert_uint_eq(s.cr0 & (1ull << 29), 0);	/* NW */
	ck_assert_uint_eq(s.cr3, 0x9000);
	ck_assert_uint_eq(s.cr4 & X86_CR4_PAE, X86_CR4_PAE);
	ck_assert_uint_eq(s.efer & (EFER_LME | EFER_LMA), EFER_LME | EFER_LMA);
}
END_TEST

START_TEST(sregs_clear_reset_cache_disable)
{
	struct kvm_sregs s;

	/* KVM's reset CR0 is 0x60000010: CD and NW set, must not survive. */
	memset(&s, 0, sizeof(s));
	s.cr0 = 0x60000010;
	boot_sregs_x86(&s);
	ck_assert_uint_eq(s.cr0 & (3ull << 29), 0);
	ck_assert_uint_eq(s.cr0 & X86_CR0_PG, X86_CR0_PG);
}
END_TEST

START_TEST(sregs_keep_unrelated_fields)
{
	struct kvm_sregs s;

	memset(&s, 0, sizeof(s));
	s.apic_base = 0xfee00900;
	s.cr2 = 0x1234;
	s.cr8 = 5;
	s.interrupt_bitmap[1] = 0x8000000000000001ull;
	s.ldt.selector = 0x28;
	s.ldt.type = 2;
	boot_sregs_x86(&s);
	ck_assert_uint_eq(s.apic_base, 0xfee00900);
	ck_assert_uint_eq(s.cr2, 0x1234);
	ck_assert_uint_eq(s.cr8, 5);
	ck_assert_uint_eq(s.interrupt_bitmap[0], 0);
	ck_assert_uint_eq(s.interrupt_bitmap[1], 0x8000000000000001ull);
	ck_assert_uint_eq(s.ldt.selector, 0x28);
	ck_assert_uint_eq(s.ldt.type, 2);
}
END_TEST

/* ---- boot_regs_x86 ---- */

START_TEST(regs_boot_protocol)
{
	struct kvm_regs r;

	memset(&r, 0xff, sizeof(r));
	boot_regs_x86(&r, 0x1000200);
	ck_assert_uint_eq(r.rip, 0x1000200);
	ck_assert_uint_eq(r.rsi, 0x7000);
	ck_assert_uint_eq(r.rsp, 0x8ff0);
	ck_assert_uint_eq(r.rbp, 0x8ff0);
	ck_assert_uint_eq(r.rflags, 2);
	ck_assert_uint_eq(r.rax, 0);
	ck_assert_uint_eq(r.rbx, 0);
	ck_assert_uint_eq(r.rcx, 0);
	ck_assert_uint_eq(r.rdx, 0);
	ck_assert_uint_eq(r.rdi, 0);
	ck_assert_uint_eq(r.r8, 0);
	ck_assert_uint_eq(r.r9, 0);
	ck_assert_uint_eq(r.r10, 0);
	ck_assert_uint_eq(r.r11, 0);
	ck_assert_uint_eq(r.r12, 0);
	ck_assert_uint_eq(r.r13, 0);
	ck_assert_uint_eq(r.r14, 0);
	ck_assert_uint_eq(r.r15, 0);
}
END_TEST

START_TEST(regs_entry_is_passed_through)
{
	struct kvm_regs r;

	boot_regs_x86(&r, 0xffffffff81000000ull);
	ck_assert_uint_eq(r.rip, 0xffffffff81000000ull);
	boot_regs_x86(&r, 0);
	ck_assert_uint_eq(r.rip, 0);
	ck_assert_uint_eq(r.rsi, 0x7000);
}
END_TEST

Suite *cpu_suite(void)
{
	Suite *s = suite_create("cpu");
	TCase *tc = tcase_create("gdt_entry");
	TCase *tt = tcase_create("tables");
	TCase *tr = tcase_create("regs");

	tcase_add_test(tc, gdt_code64);
	tcase_add_test(tc, gdt_data);
	tcase_add_test(tc, gdt_tss);
	tcase_add_test(tc, gdt_base_and_limit_placement);
	tcase_add_test(tc, gdt_ignores_out_of_field_bits);
	suite_add_tcase(s, tc);

	tcase_add_checked_fixture(tt, setup_ram, teardown_ram);
	tcase_add_test(tt, tables_gdt);
	tcase_add_test(tt, tables_idt);
	tcase_add_test(tt, tables_gdt_and_idt_disjoint);
	tcase_add_test(tt, tables_pml4_and_pdpt);
	tcase_add_test(tt, tables_pd_identity_4g);
	tcase_add_test(tt, tables_overwrite_stale_memory);
	tcase_add_test(tt, tables_exact_fit);
	tcase_add_test(tt, tables_ram_too_small_for_page_tables);
	tcase_add_test(tt, tables_ram_one_byte_short);
	tcase_add_test(tt, tables_ram_too_small_for_gdt);
	tcase_add_test(tt, tables_no_ram);
	suite_add_tcase(s, tt);

	tcase_add_test(tr, sregs_code_segment);
	tcase_add_test(tr, sregs_data_segments);
	tcase_add_test(tr, sregs_task_register);
	tcase_add_test(tr, sregs_descriptor_tables);
	tcase_add_test(tr, sregs_control_registers);
	tcase_add_test(tr, sregs_clear_reset_cache_disable);
	tcase_add_test(tr, sregs_keep_unrelated_fields);
	tcase_add_test(tr, regs_boot_protocol);
	tcase_add_test(tr, regs_entry_is_passed_through);
	suite_add_tcase(s, tr);
	return s;
}
