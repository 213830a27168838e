/*
 * Unit tests for loader_x86: vmlinux ELF and bzImage loading into malloc'd
 * guest RAM. Valid images must land byte-exactly where the boot protocol
 * says (bss zeroed, nothing else touched) with the right entry point and
 * limits; every malformed image (truncated, bad magic, wrong class or
 * machine, absurd sizes and offsets, segments outside RAM or in the boot
 * area) must be refused with -EINVAL and a message saying why, never a
 * crash or a read past the end of the file. Truncation tests put the image
 * right before an inaccessible page so an over-read faults.
 */
#include <elf.h>
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "machine/guest_mem.h"
#include "x86/layout_x86.h"
#include "x86/loader_x86.h"
#include "lib/util.h"
#include "helpers.h"
#include "suites.h"

#define RAM_SIZE (32u << 20)
#define POISON 0xaa

static uint8_t *ram;
static struct guest_mem gm;
static struct kernel_image k;

static void setup_ram(void)
{
	ram = malloc(RAM_SIZE);
	ck_assert_ptr_nonnull(ram);
	memset(ram, POISON, RAM_SIZE);
	gmem_init_buffer(&gm, ram, RAM_SIZE);
	memset(&k, 0x5a, sizeof(k));
}

static void teardown_ram(void)
{
	free(ram);
	ram = NULL;
}

static void assert_err(int ret, const char *needle)
{
	assert_err_msg(ret, EINVAL, needle);
}

/*
 * Guarded copies: the image ends exactly at a PROT_NONE page, and a
 * SIGSEGV handler turns a read past its end into a test failure instead of
 * killing the runner (also with CK_FORK=no).
 */
static sigjmp_buf fault_env;

static void on_segv(int sig)
{
	siglongjmp(fault_env, 1);
}

struct guarded {
	uint8_t *map;
	size_t map_len;
	uint8_t *buf;
};

static void guarded_alloc(struct guarded *g, const uint8_t *src, size_t len)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t data_pages = (len + page - 1) / page;

	g->map_len = (data_pages + 1) * page;
	g->map = mmap(NULL, g->map_len, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(g->map, MAP_FAILED);
	ck_assert_int_eq(mprotect(g->map + data_pages * page, page, PROT_NONE), 0);
	g->buf = g->map + data_pages * page - len;
	if (len)
		memcpy(g->buf, src, len);
}

static void guarded_free(struct guarded *g)
{
	munmap(g->map, g->map_len);
}

typedef int (*load_fn)(struct guest_mem *, const uint8_t *, size_t, struct kernel_image *);

/* Load the first len bytes of img from a guarded copy; fail on a fault. */
static int load_guarded(load_fn fn, const uint8_t *img, size_t len)
{
	struct sigaction sa, old;
	struct guarded g;
	volatile int ret = 0;

	guarded_alloc(&g, img, len);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_segv;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGSEGV, &sa, &old);
	if (sigsetjmp(fault_env, 1) == 0) {
		ret = fn(&gm, g.buf, len, &k);
	} else {
		sigaction(SIGSEGV, &old, NULL);
		guarded_free(&g);
		ck_abort_msg("loader read past the end of a %zu-byte image", len);
	}
	sigaction(SIGSEGV, &old, NULL);
	guarded_free(&g);
	return ret;
}

/* ---------------------------------------------------------------- ELF -- */

/*
 * The standard test vmlinux: a text segment at 2 MiB, a data segment with
 * bss at 4 MiB, and a PT_NOTE in between that the loader must ignore.
 */
#define ELF_LEN		0x5800
#define ELF_NPH		3
#define TEXT_GPA	0x200000ull
#define TEXT_OFF	0x1000
#define TEXT_SZ		0x3000
#define DATA_GPA	0x400000ull
#define DATA_OFF	0x4000
#define DATA_FILESZ	0x1800
#define DATA_MEMSZ	0x5000
#define ELF_ENTRY	(TEXT_GPA + 0x100)

static uint8_t elf[0x10000];

static Elf64_Ehdr *ehdr(void)
{
	return (Elf64_Ehdr *)elf;
}

static Elf64_Phdr *phdr(int i)
{
	return (Elf64_Phdr *)(elf + sizeof(Elf64_Ehdr)) + i;
}

static void build_elf(void)
{
	Elf64_Ehdr *eh = ehdr();
	Elf64_Phdr *ph;
	size_t i;

	memset(elf, 0, sizeof(elf));
	for (i = TEXT_OFF; i < ELF_LEN; i++)
		elf[i] = (uint8_t)(i * 7 + 3) | 1;	/* never 0, never POISON by accident */
	memcpy(eh->e_ident, ELFMAG, SELFMAG);
	eh->e_ident[EI_CLASS] = ELFCLASS64;
	eh->e_ident[EI_DATA] = ELFDATA2LSB;
	eh->e_ident[EI_VERSION] = EV_CURRENT;
	eh->e_type = ET_EXEC;
	eh->e_machine = EM_X86_64;
	eh->e_version = EV_CURRENT;
	eh->e_entry = ELF_ENTRY;
	eh->e_phoff = sizeof(Elf64_Ehdr);
	eh->e_ehsize = sizeof(Elf64_Ehdr);
	eh->e_phentsize = sizeof(Elf64_Phdr);
	eh->e_phnum = ELF_NPH;

	ph = phdr(0);
	ph->p_type = PT_LOAD;
	ph->p_flags = PF_R | PF_X;
	ph->p_offset = TEXT_OFF;
	ph->p_vaddr = 0xffffffff80000000ull + TEXT_GPA;
	ph->p_paddr = TEXT_GPA;
	ph->p_filesz = TEXT_SZ;
	ph->p_memsz = TEXT_SZ;

	ph = phdr(1);
	ph->p_type = PT_NOTE;
	ph->p_offset = TEXT_OFF;
	ph->p_paddr = 0x7000;	/* would be refused if it were loaded */
	ph->p_filesz = 0x10;
	ph->p_memsz = 0x10;

	ph = phdr(2);
	ph->p_type = PT_LOAD;
	ph->p_flags = PF_R | PF_W;
	ph->p_offset = DATA_OFF;
	ph->p_vaddr = 0xffffffff80000000ull + DATA_GPA;
	ph->p_paddr = DATA_GPA;
	ph->p_filesz = DATA_FILESZ;
	ph->p_memsz = DATA_MEMSZ;
}

static void setup_elf(void)
{
	setup_ram();
	build_elf();
}

static int load_elf(void)
{
	return load_elf_x86(&gm, elf, ELF_LEN, &k);
}

START_TEST(elf_valid)
{
	ck_assert_int_eq(load_elf(), 0);
	ck_assert(!k.bzimage);
	ck_assert_uint_eq(k.entry, ELF_ENTRY);
	ck_assert_uint_eq(k.start, TEXT_GPA);
	ck_assert_uint_eq(k.end, DATA_GPA + DATA_MEMSZ);
	ck_assert_uint_eq(k.cmdline_max, CMDLINE_MAX);
	ck_assert_uint_eq(k.initrd_max, 0x7fffffffull);
	ck_assert_uint_eq(k.hdr_len, 0);
}
END_TEST

START_TEST(elf_segments_copied_bss_zeroed)
{
	ck_assert_int_eq(load_elf(), 0);
	ck_assert_mem_eq(ram + TEXT_GPA, elf + TEXT_OFF, TEXT_SZ);
	ck_assert_mem_eq(ram + DATA_GPA, elf + DATA_OFF, DATA_FILESZ);
	ck_assert(all_bytes(ram + DATA_GPA + DATA_FILESZ, DATA_MEMSZ - DATA_FILESZ, 0));
	/* Nothing outside the segments was written. */
	ck_assert_uint_eq(ram[TEXT_GPA - 1], POISON);
	ck_assert_uint_eq(ram[TEXT_GPA + TEXT_SZ], POISON);
	ck_assert_uint_eq(ram[DATA_GPA - 1], POISON);
	ck_assert_uint_eq(ram[DATA_GPA + DATA_MEMSZ], POISON);
	ck_assert(all_bytes(ram, TEXT_GPA, POISON));
	ck_assert(all_bytes(ram + TEXT_GPA + TEXT_SZ, DATA_GPA - TEXT_GPA - TEXT_SZ, POISON));
}
END_TEST

START_TEST(elf_entry_edges)
{
	/* First and last byte of a segment's memory image are valid entries. */
	ehdr()->e_entry = DATA_GPA;
	ck_assert_int_eq(load_elf(), 0);
	ck_assert_uint_eq(k.entry, DATA_GPA);
	ehdr()->e_entry = DATA_GPA + DATA_MEMSZ - 1;
	ck_assert_int_eq(load_elf(), 0);
	ehdr()->e_entry = TEXT_GPA + TEXT_SZ;	/* one past the text segment */
	assert_err(load_elf(), "entry point 0x203000");
	ck_assert_uint_eq(k.entry, 0);
}
END_TEST

START_TEST(elf_64_phdrs_ok)
{
	/* 64 program headers still fit before the data at 0x1000. */
	ehdr()->e_phnum = 64;
	ck_assert_int_eq(load_elf(), 0);
	ck_assert_uint_eq(k.end, DATA_GPA + DATA_MEMSZ);
}
END_TEST

START_TEST(elf_empty_load_segment_ignored)
{
	phdr(1)->p_type = PT_LOAD;
	phdr(1)->p_memsz = 0;
	phdr(1)->p_filesz = 0;
	ck_assert_int_eq(load_elf(), 0);
	ck_assert_uint_eq(k.start, TEXT_GPA);
	ck_assert_uint_eq(ram[0x7000], POISON);
}
END_TEST

START_TEST(elf_truncated_every_length)
{
	size_t hdrs = sizeof(Elf64_Ehdr) + ELF_NPH * sizeof(Elf64_Phdr);
	size_t len;

	for (len = 0; len <= hdrs; len++) {
		int ret = load_guarded(load_elf_x86, elf, len);

		ck_assert_msg(ret == -EINVAL, "length %zu: got %d", len, ret);
		if (len < sizeof(Elf64_Ehdr))
			ck_assert_msg(strstr(husk_lasterr(), "not an ELF file"),
				      "length %zu: '%s'", len, husk_lasterr());
		else if (len < hdrs)
			ck_assert_msg(strstr(husk_lasterr(), "program headers lie outside"),
				      "length %zu: '%s'", len, husk_lasterr());
		else
			ck_assert_msg(strstr(husk_lasterr(), "outside the"),
				      "length %zu: '%s'", len, husk_lasterr());
	}
	/* Nothing may have been copied while the file was cut short. */
	ck_assert(all_bytes(ram + TEXT_GPA, TEXT_SZ, POISON));
}
END_TEST

START_TEST(elf_truncated_segment_data)
{
	/* The data segment's file bytes run past the end of the file. */
	assert_err(load_guarded(load_elf_x86, elf, ELF_LEN - 1), "outside the 22527-byte file");
	assert_err(load_guarded(load_elf_x86, elf, DATA_OFF), "truncated");
	/* The full length still works from a guarded buffer. */
	ck_assert_int_eq(load_guarded(load_elf_x86, elf, ELF_LEN), 0);
}
END_TEST

START_TEST(elf_bad_magic)
{
	elf[1] = 'X';
	assert_err(load_elf(), "bad magic");
	build_elf();
	elf[0] = 0;
	assert_err(load_elf(), "not an ELF");
}
END_TEST

START_TEST(elf_32bit)
{
	ehdr()->e_ident[EI_CLASS] = ELFCLASS32;
	assert_err(load_elf(), "not 64-bit little-endian");
}
END_TEST

START_TEST(elf_big_endian)
{
	ehdr()->e_ident[EI_DATA] = ELFDATA2MSB;
	assert_err(load_elf(), "not 64-bit little-endian");
}
END_TEST

START_TEST(elf_wrong_machine)
{
	ehdr()->e_machine = EM_AARCH64;
	assert_err(load_elf(), "machine 183 is not x86-64");
	ehdr()->e_machine = EM_386;
	assert_err(load_elf(), "machine 3 is not x86-64");
}
END_TEST

START_TEST(elf_not_exec)
{
	ehdr()->e_type = ET_DYN;
	assert_err(load_elf(), "type 3 is not an executable");
	ehdr()->e_type = ET_REL;
	assert_err(load_elf(), "not an executable");
}
END_TEST

START_TEST(elf_bad_phentsize)
{
	ehdr()->e_phentsize = sizeof(Elf64_Phdr) - 1;
	assert_err(load_elf(), "program header size 55 is not 56");
	ehdr()->e_phentsize = sizeof(Elf32_Phdr);
	assert_err(load_elf(), "program header size");
}
END_TEST

START_TEST(elf_bad_phnum)
{
	ehdr()->e_phnum = 0;
	assert_err(load_elf(), "has 0 program headers");
	ehdr()->e_phnum = 65;
	assert_err(load_elf(), "has 65 program headers (expected 1..64)");
	ehdr()->e_phnum = 0xffff;
	assert_err(load_elf(), "program headers");
}
END_TEST

START_TEST(elf_phoff_outside)
{
	ehdr()->e_phoff = ELF_LEN;
	assert_err(load_elf(), "program headers lie outside the file");
	ehdr()->e_phoff = ELF_LEN - sizeof(Elf64_Phdr);	/* 1 of 3 fits */
	assert_err(load_elf(), "program headers lie outside the file");
	ehdr()->e_phoff = UINT64_MAX - 8;
	assert_err(load_elf(), "program headers lie outside the file");
	ehdr()->e_phoff = ELF_LEN + 0x100000;
	assert_err(load_elf(), "program headers lie outside the file");
}
END_TEST

START_TEST(elf_filesz_gt_memsz)
{
	phdr(2)->p_memsz = DATA_FILESZ - 1;
	assert_err(load_elf(), "segment 2: p_filesz 0x1800 exceeds p_memsz 0x17ff");
}
END_TEST

START_TEST(elf_huge_filesz)
{
	phdr(0)->p_filesz = 0xffffffffffffff00ull;
	phdr(0)->p_memsz = 0xffffffffffffff00ull;
	assert_err(load_elf(), "lies outside the");
	ck_assert(all_bytes(ram + TEXT_GPA, 0x1000, POISON));
}
END_TEST

START_TEST(elf_offset_overflow)
{
	/* p_offset + p_filesz wraps around to a small number. */
	phdr(0)->p_offset = 0xffffffffffffff00ull;
	phdr(0)->p_filesz = 0x200;
	phdr(0)->p_memsz = 0x200;
	assert_err(load_elf(), "segment 0: file data");
	build_elf();
	phdr(0)->p_offset = 0x100;
	phdr(0)->p_filesz = UINT64_MAX - 0x80;
	phdr(0)->p_memsz = UINT64_MAX - 0x80;
	assert_err(load_elf(), "segment 0: file data");
	build_elf();
	phdr(2)->p_offset = ELF_LEN - DATA_FILESZ + 1;
	assert_err(load_elf(), "segment 2: file data");
}
END_TEST

START_TEST(elf_segment_outside_ram)
{
	phdr(2)->p_paddr = RAM_SIZE;
	ehdr()->e_entry = TEXT_GPA;
	assert_err(load_elf(), "does not fit in guest RAM (32 MiB)");
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "--mem"));
	build_elf();
	phdr(2)->p_paddr = 0x10000000000ull;	/* 1 TiB */
	assert_err(load_elf(), "does not fit in guest RAM");
}
END_TEST

START_TEST(elf_segment_straddles_ram_end)
{
	/* File bytes fit, but the bss runs past the end of RAM. */
	phdr(2)->p_paddr = RAM_SIZE - DATA_FILESZ;
	assert_err(load_elf(), "does not fit in guest RAM");
	build_elf();
	phdr(2)->p_paddr = RAM_SIZE - DATA_MEMSZ;	/* exactly fits */
	ehdr()->e_entry = TEXT_GPA;
	ck_assert_int_eq(load_elf(), 0);
	ck_assert_uint_eq(k.end, RAM_SIZE);
	ck_assert_uint_eq(ram[RAM_SIZE - 1], 0);
}
END_TEST

START_TEST(elf_segment_in_mmio_hole)
{
	phdr(2)->p_paddr = IOAPIC_GPA;
	assert_err(load_elf(), "does not fit in guest RAM");
	build_elf();
	phdr(2)->p_paddr = GMEM_HOLE_START - 0x1000;
	assert_err(load_elf(), "does not fit in guest RAM");
	build_elf();
	/* A segment whose end wraps past 2^64. */
	phdr(2)->p_paddr = 0xfffffffffffff000ull;
	assert_err(load_elf(), "does not fit in guest RAM");
}
END_TEST

START_TEST(elf_segment_in_boot_area)
{
	phdr(2)->p_paddr = ZERO_PAGE_GPA;
	assert_err(load_elf(), "overlaps the boot area below 1 MiB");
	ck_assert_uint_eq(ram[ZERO_PAGE_GPA], POISON);
	build_elf();
	phdr(0)->p_paddr = 0;
	assert_err(load_elf(), "boot area");
	build_elf();
	/* Starts just below 1 MiB and ends above it. */
	phdr(2)->p_paddr = HIMEM_GPA - 0x10;
	assert_err(load_elf(), "at 0xffff0 overlaps the boot area");
	ck_assert_uint_eq(ram[HIMEM_GPA - 0x10], POISON);
	build_elf();
	phdr(2)->p_paddr = HIMEM_GPA;	/* 1 MiB itself is allowed */
	ehdr()->e_entry = TEXT_GPA;
	ck_assert_int_eq(load_elf(), 0);
	ck_assert_uint_eq(k.start, HIMEM_GPA);
}
END_TEST

START_TEST(elf_entry_outside_segments)
{
	ehdr()->e_entry = 0x300000;
	assert_err(load_elf(), "entry point 0x300000 is not inside a loaded segment");
	ehdr()->e_entry = 0;
	assert_err(load_elf(), "entry point");
	/* Inside the PT_NOTE does not count. */
	ehdr()->e_entry = 0x7008;
	assert_err(load_elf(), "entry point");
}
END_TEST

START_TEST(elf_no_load_segments)
{
	phdr(0)->p_type = PT_NOTE;
	phdr(2)->p_type = PT_DYNAMIC;
	assert_err(load_elf(), "no loadable segments");
	build_elf();
	phdr(0)->p_memsz = 0;
	phdr(0)->p_filesz = 0;
	phdr(2)->p_memsz = 0;
	phdr(2)->p_filesz = 0;
	assert_err(load_elf(), "no loadable segments");
}
END_TEST

/* ------------------------------------------------------------ bzImage -- */

#define BZ_SETUP_SECTS	4
#define BZ_SETUP_LEN	((BZ_SETUP_SECTS + 1) * 512)
#define BZ_KERNEL_LEN	0x4000
#define BZ_LEN		(BZ_SETUP_LEN + BZ_KERNEL_LEN)
#define BZ_PREF		0x1000000ull
#define BZ_INIT_SIZE	0x800000u
#define BZ_HDR_END	(0x1f1 + sizeof(struct setup_header))

static uint8_t bz[BZ_LEN + 0x1000];

static struct setup_header *bzh(void)
{
	return (struct setup_header *)(bz + 0x1f1);
}

static void build_bz(void)
{
	struct setup_header *h = bzh();
	size_t i;

	memset(bz, 0, sizeof(bz));
	for (i = BZ_SETUP_LEN; i < sizeof(bz); i++)
		bz[i] = (uint8_t)(i * 13 + 5) | 1;
	h->setup_sects = BZ_SETUP_SECTS;
	h->syssize = BZ_KERNEL_LEN / 16;
	h->boot_flag = 0xaa55;
	h->jump = 0x6aeb;	/* jmp to 0x26c: the header is all of struct setup_header */
	h->header = 0x53726448;
	h->version = 0x020f;
	h->type_of_loader = 0;
	h->loadflags = LOADED_HIGH | CAN_USE_HEAP;
	h->code32_start = 0x100000;
	h->initrd_addr_max = 0x7fffffff;
	h->kernel_alignment = 0x200000;
	h->relocatable_kernel = 1;
	h->min_alignment = 21;
	h->xloadflags = XLF_KERNEL_64 | XLF_CAN_BE_LOADED_ABOVE_4G;
	h->cmdline_size = 2047;
	h->pref_address = BZ_PREF;
	h->init_size = BZ_INIT_SIZE;
}

static void setup_bz(void)
{
	setup_ram();
	build_bz();
}

static int load_bz(void)
{
	return load_bzimage_x86(&gm, bz, BZ_LEN, &k);
}

START_TEST(bz_layout_sanity)
{
	/* The builder puts the fields where the boot protocol says. */
	ck_assert_uint_eq(bz[0x1f1], BZ_SETUP_SECTS);
	ck_assert_uint_eq(bz[0x1fe], 0x55);
	ck_assert_uint_eq(bz[0x1ff], 0xaa);
	ck_assert_uint_eq(bz[0x201], 0x6a);
	ck_assert_mem_eq(bz + 0x202, "HdrS", 4);
	ck_assert_uint_eq(bz[0x206], 0x0f);
	ck_assert_uint_eq(bz[0x207], 0x02);
	ck_assert_uint_eq(bz[0x211], LOADED_HIGH | CAN_USE_HEAP);
	ck_assert_uint_eq(bz[0x236], XLF_KERNEL_64 | XLF_CAN_BE_LOADED_ABOVE_4G);
	ck_assert_uint_eq(BZ_HDR_END, 0x26c);
}
END_TEST

START_TEST(bz_valid)
{
	ck_assert_int_eq(load_bz(), 0);
	ck_assert(k.bzimage);
	ck_assert_uint_eq(k.entry, 0x100200);
	ck_assert_uint_eq(k.start, BZIMAGE_LOAD_GPA);
	ck_assert_uint_eq(k.end, BZ_PREF + BZ_INIT_SIZE);
	ck_assert_uint_eq(k.cmdline_max, 2048);
	ck_assert_uint_eq(k.initrd_max, 0x7fffffff);
	ck_assert_uint_eq(k.hdr_len, sizeof(struct setup_header));
	ck_assert_mem_eq(k.hdr, bz + 0x1f1, sizeof(struct setup_header));
}
END_TEST

START_TEST(bz_kernel_copied)
{
	ck_assert_int_eq(load_bz(), 0);
	ck_assert_mem_eq(ram + BZIMAGE_LOAD_GPA, bz + BZ_SETUP_LEN, BZ_KERNEL_LEN);
	ck_assert_uint_eq(ram[BZIMAGE_LOAD_GPA - 1], POISON);
	ck_assert_uint_eq(ram[BZIMAGE_LOAD_GPA + BZ_KERNEL_LEN], POISON);
	/* The real-mode setup is not loaded anywhere. */
	ck_assert(all_bytes(ram, BZIMAGE_LOAD_GPA, POISON));
}
END_TEST

START_TEST(bz_setup_sects_zero_means_four)
{
	bzh()->setup_sects = 0;
	ck_assert_int_eq(load_bz(), 0);
	ck_assert_mem_eq(ram + BZIMAGE_LOAD_GPA, bz + BZ_SETUP_LEN, BZ_KERNEL_LEN);
	build_bz();
	bzh()->setup_sects = 1;	/* setup is 1 KiB: kernel part starts at 0x400 */
	ck_assert_int_eq(load_bz(), 0);
	ck_assert_mem_eq(ram + BZIMAGE_LOAD_GPA, bz + 0x400, BZ_LEN - 0x400);
}
END_TEST

START_TEST(bz_end_is_kernel_when_init_size_small)
{
	bzh()->pref_address = 0;
	bzh()->init_size = 0x1000;
	ck_assert_int_eq(load_bz(), 0);
	ck_assert_uint_eq(k.end, BZIMAGE_LOAD_GPA + BZ_KERNEL_LEN);
	bzh()->init_size = 0x200000;
	ck_assert_int_eq(load_bz(), 0);
	ck_assert_uint_eq(k.end, BZIMAGE_LOAD_GPA + 0x200000);
	/* pref_address below 1 MiB: the run area still starts at 1 MiB. */
	bzh()->pref_address = 0x8000;
	ck_assert_int_eq(load_bz(), 0);
	ck_assert_uint_eq(k.end, BZIMAGE_LOAD_GPA + 0x200000);
}
END_TEST

START_TEST(bz_cmdline_max)
{
	bzh()->cmdline_size = 255;
	ck_assert_int_eq(load_bz(), 0);
	ck_assert_uint_eq(k.cmdline_max, 256);
	bzh()->cmdline_size = 2046;
	ck_assert_int_eq(load_bz(), 0);
	ck_assert_uint_eq(k.cmdline_max, 2047);
	bzh()->cmdline_size = 4095;
	ck_assert_int_eq(load_bz(), 0);
	ck_assert_uint_eq(k.cmdline_max, CMDLINE_MAX);
	/* No wrap-around of cmdline_size + 1. */
	bzh()->cmdline_size = 0xffffffff;
	ck_assert_int_eq(load_bz(), 0);
	ck_assert_uint_eq(k.cmdline_max, CMDLINE_MAX);
	bzh()->cmdline_size = 0;
	ck_assert_int_eq(load_bz(), 0);
	ck_assert_uint_eq(k.cmdline_max, 1);
}
END_TEST

START_TEST(bz_initrd_max_from_header)
{
	bzh()->initrd_addr_max = 0x37ffffff;
	ck_assert_int_eq(load_bz(), 0);
	ck_assert_uint_eq(k.initrd_max, 0x37ffffff);
}
END_TEST

START_TEST(bz_hdr_len_from_jump)
{
	/* jmp to 0x262: the header is 0x71 bytes. */
	bz[0x201] = 0x60;
	ck_assert_int_eq(load_bz(), 0);
	ck_assert_uint_eq(k.hdr_len, 0x71);
	ck_assert_mem_eq(k.hdr, bz + 0x1f1, 0x71);
	/* A jump far beyond the header is capped to struct setup_header. */
	bz[0x201] = 0xff;
	ck_assert_int_eq(load_bz(), 0);
	ck_assert_uint_eq(k.hdr_len, sizeof(struct setup_header));
}
END_TEST

START_TEST(bz_old_version)
{
	bzh()->version = 0x020b;
	assert_err(load_bz(), "boot protocol 2.11 is older than 2.12");
	bzh()->version = 0x0100;
	assert_err(load_bz(), "older than 2.12");
	bzh()->version = 0x020c;
	ck_assert_int_eq(load_bz(), 0);
}
END_TEST

START_TEST(bz_no_kernel64)
{
	bzh()->xloadflags = XLF_CAN_BE_LOADED_ABOVE_4G;
	assert_err(load_bz(), "XLF_KERNEL_64");
	ck_assert_uint_eq(ram[BZIMAGE_LOAD_GPA], POISON);
}
END_TEST

START_TEST(bz_not_loaded_high)
{
	bzh()->loadflags = CAN_USE_HEAP;
	assert_err(load_bz(), "not loadable high");
}
END_TEST

START_TEST(bz_bad_magic)
{
	bzh()->boot_flag = 0x55aa;
	assert_err(load_bz(), "bad boot_flag/HdrS magic");
	build_bz();
	memcpy(bz + 0x202, "HdrZ", 4);
	assert_err(load_bz(), "not a bzImage");
}
END_TEST

START_TEST(bz_setup_larger_than_file)
{
	bzh()->setup_sects = 0xff;	/* 128 KiB of setup in a 22 KiB file */
	assert_err(load_bz(), "setup (131072 bytes) is larger than the file");
	/* Setup exactly as long as the file leaves no kernel. */
	build_bz();
	assert_err(load_bzimage_x86(&gm, bz, BZ_SETUP_LEN, &k), "larger than the file");
}
END_TEST

START_TEST(bz_syssize_beyond_file)
{
	bzh()->syssize = BZ_KERNEL_LEN / 16 + 1;
	assert_err(load_bz(), "syssize says 16400 bytes, file has 16384");
	bzh()->syssize = 0xffffffff;
	assert_err(load_bz(), "truncated");
	/* A shorter syssize than the file is fine (trailing data is loaded). */
	bzh()->syssize = 1;
	ck_assert_int_eq(load_bz(), 0);
}
END_TEST

START_TEST(bz_init_size_larger_than_ram)
{
	bzh()->init_size = 0x10000000;	/* 256 MiB in a 32 MiB VM */
	assert_err(load_bz(), "needs RAM up to 0x11000000 to decompress");
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "--mem"));
	bzh()->init_size = 0xffffffff;
	assert_err(load_bz(), "impossible run area");
	/* Exactly up to the end of RAM is fine. */
	bzh()->init_size = RAM_SIZE - BZ_PREF;
	ck_assert_int_eq(load_bz(), 0);
	ck_assert_uint_eq(k.end, RAM_SIZE);
	bzh()->init_size = RAM_SIZE - BZ_PREF + 1;
	assert_err(load_bz(), "to decompress");
}
END_TEST

START_TEST(bz_pref_address_absurd)
{
	bzh()->pref_address = 0xffffffff00000000ull;
	assert_err(load_bz(), "impossible run area (pref_address 0xffffffff00000000");
	bzh()->pref_address = UINT64_MAX;
	assert_err(load_bz(), "impossible run area");
	bzh()->pref_address = IOAPIC_GPA;
	assert_err(load_bz(), "impossible run area");
	bzh()->pref_address = 0x10000000;	/* beyond RAM, below the hole */
	assert_err(load_bz(), "to decompress");
	ck_assert_uint_eq(ram[BZIMAGE_LOAD_GPA], POISON);
}
END_TEST

START_TEST(bz_kernel_larger_than_ram)
{
	struct guest_mem small;

	/* 1 MiB + 8 KiB of RAM: the 16 KiB kernel part cannot fit at 1 MiB. */
	gmem_init_buffer(&small, ram, HIMEM_GPA + 0x2000);
	bzh()->init_size = 0;
	assert_err(load_bzimage_x86(&small, bz, BZ_LEN, &k),
		   "bzImage kernel [0x100000, +0x4000) does not fit in guest RAM (1 MiB)");
}
END_TEST

START_TEST(bz_truncated)
{
	size_t len;

	/* Every cut through the setup, skipping the header tail (see below). */
	for (len = 0; len <= BZ_SETUP_LEN; len++) {
		int ret;

		if (len >= 0x268 && len < BZ_HDR_END)
			continue;
		ret = load_guarded(load_bzimage_x86, bz, len);
		ck_assert_msg(ret == -EINVAL, "length %zu: got %d", len, ret);
		ck_assert_msg(strstr(husk_lasterr(), "truncated") ||
			      strstr(husk_lasterr(), "larger than the file"),
			      "length %zu: '%s'", len, husk_lasterr());
	}
	/* Cut inside the protected-mode kernel: syssize no longer fits. */
	assert_err(load_guarded(load_bzimage_x86, bz, BZ_LEN - 1), "syssize says");
	ck_assert(all_bytes(ram + BZIMAGE_LOAD_GPA, BZ_KERNEL_LEN, POISON));
	ck_assert_int_eq(load_guarded(load_bzimage_x86, bz, BZ_LEN), 0);
}
END_TEST

START_TEST(bz_truncated_in_setup_header)
{
	size_t len;

	/*
	 * A file that ends inside struct setup_header (after init_size but
	 * before its 0x26c end) must be refused without reading past its end.
	 */
	for (len = 0x268; len < BZ_HDR_END; len++) {
		int ret = load_guarded(load_bzimage_x86, bz, len);

		ck_assert_msg(ret == -EINVAL, "length %zu: got %d", len, ret);
	}
}
END_TEST

/* ----------------------------------------------------------- dispatch -- */

START_TEST(dispatch_elf)
{
	build_elf();
	ck_assert_int_eq(load_kernel_x86(&gm, elf, ELF_LEN, &k), 0);
	ck_assert(!k.bzimage);
	ck_assert_uint_eq(k.entry, ELF_ENTRY);
	ck_assert_mem_eq(ram + TEXT_GPA, elf + TEXT_OFF, TEXT_SZ);
}
END_TEST

START_TEST(dispatch_bzimage)
{
	build_bz();
	ck_assert_int_eq(load_kernel_x86(&gm, bz, BZ_LEN, &k), 0);
	ck_assert(k.bzimage);
	ck_assert_uint_eq(k.entry, 0x100200);
	ck_assert_mem_eq(ram + BZIMAGE_LOAD_GPA, bz + BZ_SETUP_LEN, BZ_KERNEL_LEN);
}
END_TEST

START_TEST(dispatch_random_bytes)
{
	static uint8_t junk[0x3000];
	uint32_t x = 0x12345678;
	size_t i;

	for (i = 0; i < sizeof(junk); i++) {
		x = x * 1103515245u + 12345u;
		junk[i] = x >> 24;
	}
	assert_err(load_guarded(load_kernel_x86, junk, sizeof(junk)),
		   "unrecognised kernel format");
	ck_assert_uint_eq(k.entry, 0);
	ck_assert(all_bytes(ram, RAM_SIZE, POISON));
}
END_TEST

START_TEST(dispatch_empty)
{
	static const uint8_t one = 0;

	assert_err(load_kernel_x86(&gm, &one, 0, &k), "unrecognised kernel format");
	assert_err(load_guarded(load_kernel_x86, &one, 0), "vmlinux ELF or a bzImage");
}
END_TEST

START_TEST(dispatch_short_magics)
{
	/* Just the ELF magic: picked as ELF, refused as a truncated ELF. */
	assert_err(load_guarded(load_kernel_x86, (const uint8_t *)ELFMAG, SELFMAG),
		   "not an ELF file");
	assert_err(load_guarded(load_kernel_x86, (const uint8_t *)ELFMAG, SELFMAG - 1),
		   "unrecognised kernel format");
	/* "HdrS" at 0x202 but nothing after it. */
	build_bz();
	assert_err(load_guarded(load_kernel_x86, bz, 0x206), "bzImage is truncated");
	assert_err(load_guarded(load_kernel_x86, bz, 0x205), "unrecognised");
}
END_TEST

Suite *loader_suite(void)
{
	Suite *s = suite_create("loader");
	TCase *tc;

	tc = tcase_create("elf");
	tcase_add_checked_fixture(tc, setup_elf, teardown_ram);
	tcase_add_test(tc, elf_valid);
	tcase_add_test(tc, elf_segments_copied_bss_zeroed);
	tcase_add_test(tc, elf_entry_edges);
	tcase_add_test(tc, elf_64_phdrs_ok);
	tcase_add_test(tc, elf_empty_load_segment_ignored);
	tcase_add_test(tc, elf_truncated_every_length);
	tcase_add_test(tc, elf_truncated_segment_data);
	tcase_add_test(tc, elf_bad_magic);
	tcase_add_test(tc, elf_32bit);
	tcase_add_test(tc, elf_big_endian);
	tcase_add_test(tc, elf_wrong_machine);
	tcase_add_test(tc, elf_not_exec);
	tcase_add_test(tc, elf_bad_phentsize);
	tcase_add_test(tc, elf_bad_phnum);
	tcase_add_test(tc, elf_phoff_outside);
	tcase_add_test(tc, elf_filesz_gt_memsz);
	tcase_add_test(tc, elf_huge_filesz);
	tcase_add_test(tc, elf_offset_overflow);
	tcase_add_test(tc, elf_segment_outside_ram);
	tcase_add_test(tc, elf_segment_straddles_ram_end);
	tcase_add_test(tc, elf_segment_in_mmio_hole);
	tcase_add_test(tc, elf_segment_in_boot_area);
	tcase_add_test(tc, elf_entry_outside_segments);
	tcase_add_test(tc, elf_no_load_segments);
	suite_add_tcase(s, tc);

	tc = tcase_create("bzimage");
	tcase_add_checked_fixture(tc, setup_bz, teardown_ram);
	tcase_add_test(tc, bz_layout_sanity);
	tcase_add_test(tc, bz_valid);
	tcase_add_test(tc, bz_kernel_copied);
	tcase_add_test(tc, bz_setup_sects_zero_means_four);
	tcase_add_test(tc, bz_end_is_kernel_when_init_size_small);
	tcase_add_test(tc, bz_cmdline_max);
	tcase_add_test(tc, bz_initrd_max_from_header);
	tcase_add_test(tc, bz_hdr_len_from_jump);
	tcase_add_test(tc, bz_old_version);
	tcase_add_test(tc, bz_no_kernel64);
	tcase_add_test(tc, bz_not_loaded_high);
	tcase_add_test(tc, bz_bad_magic);
	tcase_add_test(tc, bz_setup_larger_than_file);
	tcase_add_test(tc, bz_syssize_beyond_file);
	tcase_add_test(tc, bz_init_size_larger_than_ram);
	tcase_add_test(tc, bz_pref_address_absurd);
	tcase_add_test(tc, bz_kernel_larger_than_ram);
	tcase_add_test(tc, bz_truncated);
	tcase_add_test(tc, bz_truncated_in_setup_header);
	suite_add_tcase(s, tc);

	tc = tcase_create("dispatch");
	tcase_add_checked_fixture(tc, setup_ram, teardown_ram);
	tcase_add_test(tc, dispatch_elf);
	tcase_add_test(tc, dispatch_bzimage);
	tcase_add_test(tc, dispatch_random_bytes);
	tcase_add_test(tc, dispatch_empty);
	tcase_add_test(tc, dispatch_short_magics);
	suite_add_tcase(s, tc);
	return s;
}
