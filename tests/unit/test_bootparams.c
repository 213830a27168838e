/*
 * Unit tests for bootparams_x86: the e820 map (pure arithmetic on the RAM
 * layout, including RAM above the 4 GiB hole and the entry limit), initrd
 * placement at the top of allowed low RAM, and the zero page and command
 * line written for ELF and bzImage kernels, read back as struct boot_params.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "x86/bootparams_x86.h"
#include "machine/guest_mem.h"
#include "x86/layout_x86.h"
#include "x86/loader_x86.h"
#include "lib/util.h"
#include "suites.h"

#define MIB (1ull << 20)
#define GIB (1ull << 30)
#define RAM_SIZE (32 * MIB)

static uint8_t *ram;
static struct guest_mem gm;
static struct kernel_image k;

static void setup_ram(void)
{
	ram = malloc(RAM_SIZE);
	ck_assert_ptr_nonnull(ram);
	memset(ram, 0xaa, RAM_SIZE);
	gmem_init_buffer(&gm, ram, RAM_SIZE);
	/* What load_elf_x86() reports for a vmlinux ending at 4 MiB. */
	memset(&k, 0, sizeof(k));
	k.entry = 0x200000;
	k.start = 0x200000;
	k.end = 0x400000;
	k.cmdline_max = CMDLINE_MAX;
	k.initrd_max = 0x7fffffff;
}

static void teardown_ram(void)
{
	free(ram);
	ram = NULL;
}

static void assert_e820(const struct boot_e820_entry *e, uint64_t addr, uint64_t size,
			uint32_t type)
{
	ck_assert_uint_eq(e->addr, addr);
	ck_assert_uint_eq(e->size, size);
	ck_assert_uint_eq(e->type, type);
}

/* ---------------------------------------------------------------- e820 -- */

START_TEST(e820_64m)
{
	struct boot_e820_entry tab[8];
	struct guest_mem m;
	uint8_t dummy;

	memset(tab, 0xee, sizeof(tab));
	gmem_init_buffer(&m, &dummy, 64 * MIB);
	ck_assert_int_eq(e820_build_x86(&m, tab, 8), 3);
	assert_e820(&tab[0], 0, 0x9fc00, E820_TYPE_RAM);
	assert_e820(&tab[1], 0x9fc00, 0x100000 - 0x9fc00, E820_TYPE_RESERVED);
	assert_e820(&tab[2], 0x100000, 63 * MIB, E820_TYPE_RAM);
	/* Nothing written past the count. */
	ck_assert_uint_eq(tab[3].type, 0xeeeeeeee);
}
END_TEST

START_TEST(e820_high_memory)
{
	struct boot_e820_entry tab[8];
	struct guest_mem m;
	uint8_t dummy;

	/* Hand-built layout; e820 never touches the memory itself. */
	memset(&m, 0, sizeof(m));
	m.host = &dummy;
	m.low_size = 3 * GIB;
	m.high_size = 5 * GIB;
	m.size = 8 * GIB;
	ck_assert_int_eq(e820_build_x86(&m, tab, 8), 4);
	assert_e820(&tab[0], 0, 0x9fc00, E820_TYPE_RAM);
	assert_e820(&tab[1], 0x9fc00, 0x60400, E820_TYPE_RESERVED);
	assert_e820(&tab[2], MIB, 3 * GIB - MIB, E820_TYPE_RAM);
	assert_e820(&tab[3], 4 * GIB, 5 * GIB, E820_TYPE_RAM);
	/* No RAM entry may overlap the MMIO hole. */
	ck_assert_uint_le(tab[2].addr + tab[2].size, GMEM_HOLE_START);
	ck_assert_uint_ge(tab[3].addr, GMEM_HOLE_END);
}
END_TEST

START_TEST(e820_from_init_buffer_split)
{
	struct boot_e820_entry tab[8];
	struct guest_mem m;
	uint8_t dummy;

	gmem_init_buffer(&m, &dummy, 4 * GIB + 12 * MIB);
	ck_assert_int_eq(e820_build_x86(&m, tab, 8), 4);
	assert_e820(&tab[2], MIB, 3 * GIB - MIB, E820_TYPE_RAM);
	assert_e820(&tab[3], 4 * GIB, GIB + 12 * MIB, E820_TYPE_RAM);
}
END_TEST

START_TEST(e820_max_entries)
{
	struct boot_e820_entry tab[4];
	struct guest_mem m;
	uint8_t dummy;

	memset(&m, 0, sizeof(m));
	m.host = &dummy;
	m.low_size = 3 * GIB;
	m.high_size = GIB;
	m.size = 4 * GIB;
	memset(tab, 0xee, sizeof(tab));
	ck_assert_int_eq(e820_build_x86(&m, tab, 2), 2);
	assert_e820(&tab[0], 0, 0x9fc00, E820_TYPE_RAM);
	assert_e820(&tab[1], 0x9fc00, 0x60400, E820_TYPE_RESERVED);
	ck_assert_uint_eq(tab[2].type, 0xeeeeeeee);
	ck_assert_uint_eq(tab[2].addr, 0xeeeeeeeeeeeeeeeeull);
	ck_assert_int_eq(e820_build_x86(&m, tab, 3), 3);
	ck_assert_uint_eq(tab[3].type, 0xeeeeeeee);
	memset(tab, 0xee, sizeof(tab));
	ck_assert_int_eq(e820_build_x86(&m, tab, 0), 0);
	ck_assert_uint_eq(tab[0].type, 0xeeeeeeee);
}
END_TEST

/* -------------------------------------------------------------- initrd -- */

static uint8_t *make_initrd(size_t len)
{
	uint8_t *d = malloc(len);
	size_t i;

	ck_assert_ptr_nonnull(d);
	for (i = 0; i < len; i++)
		d[i] = (uint8_t)(i * 31 + 7);
	return d;
}

START_TEST(initrd_top_of_ram)
{
	size_t len = 0x1801;
	uint8_t *d = make_initrd(len);
	uint64_t gpa = 0;

	ck_assert_int_eq(initrd_place_x86(&gm, &k, d, len, &gpa), 0);
	ck_assert_uint_eq(gpa, 0x1ffe000);
	ck_assert_uint_eq(gpa & 0xfff, 0);
	ck_assert_uint_le(gpa + len, RAM_SIZE);
	ck_assert_uint_ge(gpa, k.end);
	ck_assert_mem_eq(ram + gpa, d, len);
	ck_assert_uint_eq(ram[gpa - 1], 0xaa);
	ck_assert_uint_eq(ram[gpa + len], 0xaa);
	free(d);
}
END_TEST

START_TEST(initrd_page_multiple)
{
	size_t len = 0x3000;
	uint8_t *d = make_initrd(len);
	uint64_t gpa = 0;

	ck_assert_int_eq(initrd_place_x86(&gm, &k, d, len, &gpa), 0);
	ck_assert_uint_eq(gpa, RAM_SIZE - 0x3000);
	ck_assert_mem_eq(ram + gpa, d, len);
	free(d);
}
END_TEST

START_TEST(initrd_below_initrd_max)
{
	size_t len = 0x1801;
	uint8_t *d = make_initrd(len);
	uint64_t gpa = 0;

	k.initrd_max = 16 * MIB - 1;
	ck_assert_int_eq(initrd_place_x86(&gm, &k, d, len, &gpa), 0);
	ck_assert_uint_eq(gpa, 0xffe000);
	ck_assert_uint_le(gpa + len - 1, k.initrd_max);
	ck_assert_mem_eq(ram + gpa, d, len);
	/* An initrd_max that is not page-aligned minus one. */
	k.initrd_max = 0xabcdef;
	ck_assert_int_eq(initrd_place_x86(&gm, &k, d, len, &gpa), 0);
	ck_assert_uint_eq(gpa, 0xabb000);
	ck_assert_uint_le(gpa + len - 1, k.initrd_max);
	free(d);
}
END_TEST

START_TEST(initrd_exact_fit)
{
	size_t len = RAM_SIZE - 0x400000;
	uint8_t *d = make_initrd(len);
	uint64_t gpa = 0;

	ck_assert_int_eq(initrd_place_x86(&gm, &k, d, len, &gpa), 0);
	ck_assert_uint_eq(gpa, k.end);
	ck_assert_mem_eq(ram + gpa, d, len);
	free(d);
}
END_TEST

START_TEST(initrd_too_large)
{
	size_t len = RAM_SIZE - 0x400000 + 1;
	uint8_t *d = make_initrd(len);
	uint64_t gpa = 0x1234;

	ck_assert_int_eq(initrd_place_x86(&gm, &k, d, len, &gpa), -ENOSPC);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "does not fit between the kernel "
				     "(ends at 0x400000) and 0x2000000"));
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "--mem"));
	ck_assert_uint_eq(gpa, 0x1234);
	ck_assert_uint_eq(ram[RAM_SIZE - 1], 0xaa);
	ck_assert_uint_eq(ram[k.end], 0xaa);
	free(d);
}
END_TEST

START_TEST(initrd_larger_than_ram)
{
	static const uint8_t byte = 1;
	uint64_t gpa = 0;

	/* len > top must not wrap around in top - len. */
	ck_assert_int_eq(initrd_place_x86(&gm, &k, &byte, RAM_SIZE + 1, &gpa), -ENOSPC);
	ck_assert_int_eq(initrd_place_x86(&gm, &k, &byte, SIZE_MAX, &gpa), -ENOSPC);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "initrd"));
}
END_TEST

START_TEST(initrd_max_below_kernel)
{
	static const uint8_t data[16];
	uint64_t gpa = 0;

	k.initrd_max = 0x3fffff;	/* everything allowed is under the kernel */
	ck_assert_int_eq(initrd_place_x86(&gm, &k, data, sizeof(data), &gpa), -ENOSPC);
	k.initrd_max = 0;
	ck_assert_int_eq(initrd_place_x86(&gm, &k, data, sizeof(data), &gpa), -ENOSPC);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "does not fit"));
}
END_TEST

START_TEST(initrd_empty)
{
	static const uint8_t data[1];
	uint64_t gpa = 7;

	ck_assert_int_eq(initrd_place_x86(&gm, &k, data, 0, &gpa), -EINVAL);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "initrd is empty"));
	ck_assert_uint_eq(gpa, 7);
}
END_TEST

/* ----------------------------------------------------------- zero page -- */

static void read_zero_page(struct boot_params *bp)
{
	ck_assert_int_eq(gmem_read(&gm, ZERO_PAGE_GPA, bp, sizeof(*bp)), 0);
}

START_TEST(zero_page_elf)
{
	const char *cl = "console=ttyS0 reboot=k panic=-1 root=/dev/vda";
	struct boot_params bp;
	uint8_t zeros[sizeof(bp.screen_info)];

	ck_assert_int_eq(bootparams_write_x86(&gm, &k, cl, 0x1ffe000, 0x1801, NULL, 0), 0);
	read_zero_page(&bp);
	ck_assert_uint_eq(bp.hdr.boot_flag, 0xaa55);
	ck_assert_uint_eq(bp.hdr.header, 0x53726448);
	ck_assert_uint_ge(bp.hdr.version, 0x020c);
	ck_assert_uint_eq(bp.hdr.type_of_loader, 0xff);
	ck_assert_uint_eq(bp.hdr.cmd_line_ptr, CMDLINE_GPA);
	ck_assert_uint_eq(bp.ext_cmd_line_ptr, 0);
	ck_assert_str_eq((char *)ram + CMDLINE_GPA, cl);
	ck_assert_uint_eq(bp.hdr.ramdisk_image, 0x1ffe000);
	ck_assert_uint_eq(bp.hdr.ramdisk_size, 0x1801);
	ck_assert_uint_eq(bp.ext_ramdisk_image, 0);
	ck_assert_uint_eq(bp.ext_ramdisk_size, 0);
	/* The rest of the page is zeroed, not left as it was. */
	memset(zeros, 0, sizeof(zeros));
	ck_assert_mem_eq(&bp.screen_info, zeros, sizeof(zeros));
	ck_assert_uint_eq(bp.hdr.setup_sects, 0);
	ck_assert_uint_eq(bp.hdr.loadflags, 0);
	/* Just after the zero page is untouched. */
	ck_assert_uint_eq(ram[ZERO_PAGE_GPA + sizeof(bp)], 0xaa);
}
END_TEST

START_TEST(zero_page_e820)
{
	struct boot_params bp;

	ck_assert_int_eq(bootparams_write_x86(&gm, &k, "", 0, 0, NULL, 0), 0);
	read_zero_page(&bp);
	ck_assert_uint_eq(bp.e820_entries, 3);
	assert_e820(&bp.e820_table[0], 0, EBDA_GPA, E820_TYPE_RAM);
	assert_e820(&bp.e820_table[1], EBDA_GPA, HIMEM_GPA - EBDA_GPA, E820_TYPE_RESERVED);
	assert_e820(&bp.e820_table[2], HIMEM_GPA, RAM_SIZE - HIMEM_GPA, E820_TYPE_RAM);
	assert_e820(&bp.e820_table[3], 0, 0, 0);
}
END_TEST

START_TEST(zero_page_no_initrd)
{
	struct boot_params bp;

	ck_assert_int_eq(bootparams_write_x86(&gm, &k, "quiet", 0x1ffe000, 0, NULL, 0), 0);
	read_zero_page(&bp);
	ck_assert_uint_eq(bp.hdr.ramdisk_image, 0);
	ck_assert_uint_eq(bp.hdr.ramdisk_size, 0);
	ck_assert_str_eq((char *)ram + CMDLINE_GPA, "quiet");
}
END_TEST

START_TEST(zero_page_empty_cmdline)
{
	struct boot_params bp;

	ck_assert_int_eq(bootparams_write_x86(&gm, &k, "", 0, 0, NULL, 0), 0);
	read_zero_page(&bp);
	ck_assert_uint_eq(bp.hdr.cmd_line_ptr, CMDLINE_GPA);
	ck_assert_uint_eq(ram[CMDLINE_GPA], 0);
	ck_assert_uint_eq(ram[CMDLINE_GPA + 1], 0xaa);
}
END_TEST

/* A bzImage setup header as load_bzimage_x86() saves it. */
static void bz_kernel(size_t hdr_len)
{
	struct setup_header h;

	memset(&h, 0, sizeof(h));
	h.setup_sects = 27;
	h.syssize = 0x12345;
	h.boot_flag = 0xaa55;
	h.jump = 0x6aeb;
	h.header = 0x53726448;
	h.version = 0x020f;
	h.type_of_loader = 0x21;
	h.loadflags = LOADED_HIGH | CAN_USE_HEAP;
	h.code32_start = 0x100000;
	h.initrd_addr_max = 0x7fffffff;
	h.kernel_alignment = 0x200000;
	h.relocatable_kernel = 1;
	h.min_alignment = 21;
	h.xloadflags = XLF_KERNEL_64 | XLF_CAN_BE_LOADED_ABOVE_4G;
	h.cmdline_size = 2047;
	h.payload_offset = 0x3a5;
	h.payload_length = 0x4c0000;
	h.pref_address = 0x1000000;
	h.init_size = 0x2000000;
	h.handover_offset = 0x190;
	h.kernel_info_offset = 0x4c01e0;
	k.bzimage = true;
	k.entry = 0x100200;
	k.start = 0x100000;
	k.end = 0x3000000;
	k.initrd_max = 0x7fffffff;
	memcpy(k.hdr, &h, sizeof(h));
	k.hdr_len = hdr_len;
}

START_TEST(zero_page_bzimage_hdr_preserved)
{
	struct boot_params bp;

	bz_kernel(sizeof(struct setup_header));
	ck_assert_int_eq(bootparams_write_x86(&gm, &k, "console=ttyS0", 0x2000000, 0x1000, NULL, 0), 0);
	read_zero_page(&bp);
	ck_assert_uint_eq(bp.hdr.setup_sects, 27);
	ck_assert_uint_eq(bp.hdr.syssize, 0x12345);
	ck_assert_uint_eq(bp.hdr.boot_flag, 0xaa55);
	ck_assert_uint_eq(bp.hdr.version, 0x020f);
	ck_assert_uint_eq(bp.hdr.loadflags, LOADED_HIGH | CAN_USE_HEAP);
	ck_assert_uint_eq(bp.hdr.kernel_alignment, 0x200000);
	ck_assert_uint_eq(bp.hdr.relocatable_kernel, 1);
	ck_assert_uint_eq(bp.hdr.xloadflags, XLF_KERNEL_64 | XLF_CAN_BE_LOADED_ABOVE_4G);
	ck_assert_uint_eq(bp.hdr.payload_offset, 0x3a5);
	ck_assert_uint_eq(bp.hdr.pref_address, 0x1000000);
	ck_assert_uint_eq(bp.hdr.init_size, 0x2000000);
	ck_assert_uint_eq(bp.hdr.handover_offset, 0x190);
	ck_assert_uint_eq(bp.hdr.kernel_info_offset, 0x4c01e0);
	/* ...except the fields the boot loader owns. */
	ck_assert_uint_eq(bp.hdr.type_of_loader, 0xff);
	ck_assert_uint_eq(bp.hdr.cmd_line_ptr, CMDLINE_GPA);
	ck_assert_uint_eq(bp.hdr.ramdisk_image, 0x2000000);
	ck_assert_uint_eq(bp.hdr.ramdisk_size, 0x1000);
	ck_assert_str_eq((char *)ram + CMDLINE_GPA, "console=ttyS0");
	ck_assert_uint_eq(bp.e820_entries, 3);
}
END_TEST

START_TEST(zero_page_bzimage_short_hdr)
{
	struct boot_params bp;

	/* An older header ending at 0x262: later fields stay zero. */
	bz_kernel(0x71);
	ck_assert_int_eq(bootparams_write_x86(&gm, &k, "", 0, 0, NULL, 0), 0);
	read_zero_page(&bp);
	ck_assert_uint_eq(bp.hdr.pref_address, 0x1000000);
	ck_assert_uint_eq(bp.hdr.handover_offset, 0);
	ck_assert_uint_eq(bp.hdr.kernel_info_offset, 0);
	ck_assert_uint_eq(bp.hdr.version, 0x020f);
}
END_TEST

START_TEST(cmdline_too_long)
{
	char line[CMDLINE_MAX + 1];
	struct boot_params bp;

	memset(line, 'x', CMDLINE_MAX);
	line[CMDLINE_MAX] = '\0';	/* 2048 characters: one too many */
	ck_assert_int_eq(bootparams_write_x86(&gm, &k, line, 0, 0, NULL, 0), -E2BIG);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "command line is 2048 bytes"));
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "at most 2047"));
	/* Nothing written on failure. */
	ck_assert_uint_eq(ram[CMDLINE_GPA], 0xaa);
	ck_assert_uint_eq(ram[ZERO_PAGE_GPA], 0xaa);

	line[CMDLINE_MAX - 1] = '\0';	/* 2047: exactly fits */
	ck_assert_int_eq(bootparams_write_x86(&gm, &k, line, 0, 0, NULL, 0), 0);
	ck_assert_str_eq((char *)ram + CMDLINE_GPA, line);
	read_zero_page(&bp);
	ck_assert_uint_eq(bp.hdr.cmd_line_ptr, CMDLINE_GPA);
}
END_TEST

START_TEST(cmdline_bzimage_limit)
{
	/* A kernel with cmdline_size 255 accepts at most 255 characters. */
	char line[257];

	bz_kernel(sizeof(struct setup_header));
	k.cmdline_max = 256;
	memset(line, 'y', 256);
	line[256] = '\0';
	ck_assert_int_eq(bootparams_write_x86(&gm, &k, line, 0, 0, NULL, 0), -E2BIG);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "at most 255"));
	line[255] = '\0';
	ck_assert_int_eq(bootparams_write_x86(&gm, &k, line, 0, 0, NULL, 0), 0);
	ck_assert_uint_eq(strlen((char *)ram + CMDLINE_GPA), 255);
}
END_TEST

START_TEST(no_room_in_tiny_ram)
{
	struct guest_mem tiny;

	/* 64 KiB of RAM ends below the command line at 0x20000. */
	gmem_init_buffer(&tiny, ram, 0x10000);
	ck_assert_int_eq(bootparams_write_x86(&tiny, &k, "x", 0, 0, NULL, 0), -EFAULT);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "command line"));
}
END_TEST

/* ------------------------------------------------------------ RNG seed -- */

static const uint8_t seed32[32] = {
	1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
	17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32,
};

START_TEST(rng_seed_entry)
{
	struct boot_params bp;
	struct setup_data sd;

	ck_assert_int_eq(bootparams_write_x86(&gm, &k, "quiet", 0, 0, seed32, sizeof(seed32)), 0);
	read_zero_page(&bp);
	ck_assert_uint_eq(bp.hdr.setup_data, RNG_SEED_GPA);
	ck_assert_int_eq(gmem_read(&gm, RNG_SEED_GPA, &sd, sizeof(sd)), 0);
	ck_assert_uint_eq(sd.next, 0);
	ck_assert_uint_eq(sd.type, SETUP_RNG_SEED);
	ck_assert_uint_eq(sd.len, sizeof(seed32));
	ck_assert_mem_eq(ram + RNG_SEED_GPA + sizeof(sd), seed32, sizeof(seed32));
	/* Nothing past the seed is written. */
	ck_assert_uint_eq(ram[RNG_SEED_GPA + sizeof(sd) + sizeof(seed32)], 0xaa);
	/* Below the command line, above the boot page tables. */
	ck_assert_uint_le(RNG_SEED_GPA + sizeof(sd) + RNG_SEED_MAX, CMDLINE_GPA);
	ck_assert_uint_ge(RNG_SEED_GPA, PD_GPA + PD_PAGES * 0x1000);
}
END_TEST

START_TEST(rng_seed_none)
{
	struct boot_params bp;

	ck_assert_int_eq(bootparams_write_x86(&gm, &k, "", 0, 0, NULL, 32), 0);
	read_zero_page(&bp);
	ck_assert_uint_eq(bp.hdr.setup_data, 0);
	ck_assert_uint_eq(ram[RNG_SEED_GPA], 0xaa);
}
END_TEST

START_TEST(rng_seed_too_long)
{
	uint8_t big[RNG_SEED_MAX + 1];

	memset(big, 7, sizeof(big));
	ck_assert_int_eq(bootparams_write_x86(&gm, &k, "", 0, 0, big, sizeof(big)), -E2BIG);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "RNG seed"));
	ck_assert_uint_eq(ram[RNG_SEED_GPA], 0xaa);
}
END_TEST

/* Boot protocol 2.08 has no setup_data field: the seed is left out. */
START_TEST(rng_seed_old_protocol)
{
	struct setup_header *h = (struct setup_header *)k.hdr;
	struct boot_params bp;

	bz_kernel(sizeof(struct setup_header));
	h->version = 0x0208;
	ck_assert_int_eq(bootparams_write_x86(&gm, &k, "", 0, 0, seed32, sizeof(seed32)), 0);
	read_zero_page(&bp);
	ck_assert_uint_eq(bp.hdr.setup_data, 0);
	ck_assert_uint_eq(ram[RNG_SEED_GPA], 0xaa);
}
END_TEST

Suite *bootparams_suite(void)
{
	Suite *s = suite_create("bootparams");
	TCase *tc;

	tc = tcase_create("e820");
	tcase_add_test(tc, e820_64m);
	tcase_add_test(tc, e820_high_memory);
	tcase_add_test(tc, e820_from_init_buffer_split);
	tcase_add_test(tc, e820_max_entries);
	suite_add_tcase(s, tc);

	tc = tcase_create("initrd");
	tcase_add_checked_fixture(tc, setup_ram, teardown_ram);
	tcase_add_test(tc, initrd_top_of_ram);
	tcase_add_test(tc, initrd_page_multiple);
	tcase_add_test(tc, initrd_below_initrd_max);
	tcase_add_test(tc, initrd_exact_fit);
	tcase_add_test(tc, initrd_too_large);
	tcase_add_test(tc, initrd_larger_than_ram);
	tcase_add_test(tc, initrd_max_below_kernel);
	tcase_add_test(tc, initrd_empty);
	suite_add_tcase(s, tc);

	tc = tcase_create("zero_page");
	tcase_add_checked_fixture(tc, setup_ram, teardown_ram);
	tcase_add_test(tc, zero_page_elf);
	tcase_add_test(tc, zero_page_e820);
	tcase_add_test(tc, zero_page_no_initrd);
	tcase_add_test(tc, zero_page_empty_cmdline);
	tcase_add_test(tc, zero_page_bzimage_hdr_preserved);
	tcase_add_test(tc, zero_page_bzimage_short_hdr);
	tcase_add_test(tc, cmdline_too_long);
	tcase_add_test(tc, cmdline_bzimage_limit);
	tcase_add_test(tc, no_room_in_tiny_ram);
	tcase_add_test(tc, rng_seed_entry);
	tcase_add_test(tc, rng_seed_none);
	tcase_add_test(tc, rng_seed_too_long);
	tcase_add_test(tc, rng_seed_old_protocol);
	suite_add_tcase(s, tc);
	return s;
}
