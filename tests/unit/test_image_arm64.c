/*
 * Unit tests for image_arm64: the arm64 kernel Image loader, run on any host
 * against malloc'd "guest RAM" that stands for [ram_base, ram_base + size).
 *
 * A valid Image must land byte-exactly at its 2 MiB-aligned base +
 * text_offset, with nothing else in RAM written (not even its bss: the
 * kernel clears that itself). Every malformed header (truncated, bad magic,
 * big-endian, pre-3.17, bad text_offset, a file longer than image_size) and
 * every RAM that is too small must be refused with its own message, also
 * when the 64-bit fields are chosen to overflow. The initrd goes page
 * aligned right below the device tree, or -ENOSPC saying how much room
 * there is. Truncated Images sit right before an inaccessible page so that
 * an over-read faults instead of passing unnoticed.
 */
#include <endian.h>
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "arm64/image_arm64.h"
#include "arm64/layout_arm64.h"
#include "lib/util.h"
#include "helpers.h"
#include "suites.h"

#define MIB		(1ull << 20)
#define RAM_BASE	ARM64_RAM_BASE
#define RAM_SIZE	(8 * MIB)
#define RAM_ALLOC	(RAM_SIZE + 0x1000)	/* a poisoned tail past the RAM's end */
#define POISON		0xaa

/* The standard test Image: classic text_offset, a body, and some bss. */
#define IMG_LEN		0x3000
#define TEXT_OFF	0x80000ull
#define IMG_SIZE	0x10000ull

static uint8_t *ram;
static uint8_t img[IMG_LEN];
static struct arm64_image k;

static void put32(size_t off, uint32_t v)
{
	v = htole32(v);
	memcpy(img + off, &v, sizeof(v));
}

static void put64(size_t off, uint64_t v)
{
	v = htole64(v);
	memcpy(img + off, &v, sizeof(v));
}

static void set_text_offset(uint64_t v)	{ put64(8, v); }
static void set_image_size(uint64_t v)	{ put64(16, v); }
static void set_flags(uint64_t v)	{ put64(24, v); }

static void build_img(void)
{
	size_t i;

	for (i = 0; i < IMG_LEN; i++)
		img[i] = (uint8_t)(i * 7 + 3) | 1;	/* never 0, never POISON */
	put32(0, 0x91005a4d);	/* code0: what a real Image has there, unused */
	put32(4, 0x14000000);
	set_text_offset(TEXT_OFF);
	set_image_size(IMG_SIZE);
	set_flags(0x2);		/* 4 KiB pages, base close to the start of RAM */
	put64(32, 0);
	put64(40, 0);
	put64(48, 0);
	put32(56, ARM64_IMAGE_MAGIC);
	put32(60, 0);
}

static void setup(void)
{
	ram = malloc(RAM_ALLOC);
	ck_assert_ptr_nonnull(ram);
	memset(ram, POISON, RAM_ALLOC);
	build_img();
	memset(&k, 0x5a, sizeof(k));
}

static void teardown(void)
{
	free(ram);
	ram = NULL;
}

static int parse(size_t len, uint64_t ram_base, uint64_t ram_size)
{
	return image_arm64_parse(img, len, ram_base, ram_size, &k);
}

static int parse_std(void)
{
	return parse(IMG_LEN, RAM_BASE, RAM_SIZE);
}

static int load_std(void)
{
	return image_arm64_load(ram, RAM_BASE, RAM_SIZE, img, IMG_LEN, &k);
}

#define assert_err assert_err_msg

static void assert_k_zero(void)
{
	static const struct arm64_image zero;

	ck_assert_mem_eq(&k, &zero, sizeof(k));
}

/*
 * Guarded copies: the Image ends exactly at a PROT_NONE page, and a SIGSEGV
 * handler turns a read past its end into a test failure instead of killing
 * the runner (also with CK_FORK=no).
 */
static sigjmp_buf fault_env;

static void on_segv(int sig)
{
	siglongjmp(fault_env, 1);
}

/* image_arm64_load() of the first len bytes of img from a guarded copy. */
static int load_guarded(size_t len)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t data_len = (len + page - 1) / page * page;
	struct sigaction sa, old;
	uint8_t *map, *buf;
	volatile int ret = 0;
	volatile int faulted = 0;

	map = mmap(NULL, data_len + page, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(map, MAP_FAILED);
	ck_assert_int_eq(mprotect(map + data_len, page, PROT_NONE), 0);
	buf = map + data_len - len;
	memcpy(buf, img, len);

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_segv;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGSEGV, &sa, &old);
	if (sigsetjmp(fault_env, 1) == 0)
		ret = image_arm64_load(ram, RAM_BASE, RAM_SIZE, buf, len, &k);
	else
		faulted = 1;
	sigaction(SIGSEGV, &old, NULL);
	munmap(map, data_len + page);
	ck_assert_msg(!faulted, "loader read past the end of a %zu-byte Image", len);
	return ret;
}

/* -------------------------------------------------------------- parse -- */

START_TEST(parse_valid)
{
	ck_assert_int_eq(parse_std(), 0);
	ck_assert_uint_eq(k.text_offset, TEXT_OFF);
	ck_assert_uint_eq(k.image_size, IMG_SIZE);
	ck_assert_uint_eq(k.flags, 0x2);
	ck_assert_uint_eq(k.load, RAM_BASE + TEXT_OFF);
	ck_assert_uint_eq(k.end, RAM_BASE + TEXT_OFF + IMG_SIZE);
}
END_TEST

START_TEST(parse_text_offset_zero)
{
	/* Linux 5.8 and later. */
	set_text_offset(0);
	ck_assert_int_eq(parse_std(), 0);
	ck_assert_uint_eq(k.load, RAM_BASE);
	ck_assert_uint_eq(k.end, RAM_BASE + IMG_SIZE);
	/* The largest page-aligned offset still below 2 MiB. */
	set_text_offset(ARM64_KERNEL_ALIGN - 0x1000);
	ck_assert_int_eq(parse_std(), 0);
	ck_assert_uint_eq(k.load, RAM_BASE + ARM64_KERNEL_ALIGN - 0x1000);
}
END_TEST

START_TEST(parse_flags_accepted)
{
	uint64_t f;

	/* Placement bit 3 either way, any page size, reserved bits: same place. */
	for (f = 0; f < 16; f += 2) {
		set_flags(f);
		ck_assert_msg(parse_std() == 0, "flags 0x%llx: %s",
			      (unsigned long long)f, husk_lasterr());
		ck_assert_uint_eq(k.flags, f);
		ck_assert_uint_eq(k.load, RAM_BASE + TEXT_OFF);
	}
	set_flags(1ull << 3);
	ck_assert_int_eq(parse_std(), 0);
	set_flags(0);
	ck_assert_int_eq(parse_std(), 0);
	set_flags(0xfffffffffffffff0ull);
	ck_assert_int_eq(parse_std(), 0);
}
END_TEST

START_TEST(parse_ram_base_unaligned)
{
	static const uint64_t off[] = { 1, 0x1000, 0x100000, ARM64_KERNEL_ALIGN - 1 };
	size_t i;

	for (i = 0; i < ARRAY_SIZE(off); i++) {
		ck_assert_int_eq(parse(IMG_LEN, RAM_BASE + off[i], RAM_SIZE), 0);
		ck_assert_uint_eq(k.load, RAM_BASE + ARM64_KERNEL_ALIGN + TEXT_OFF);
		ck_assert_uint_eq(k.end, k.load + IMG_SIZE);
	}
	/* Already aligned: no rounding. */
	ck_assert_int_eq(parse(IMG_LEN, RAM_BASE + ARM64_KERNEL_ALIGN, RAM_SIZE), 0);
	ck_assert_uint_eq(k.load, RAM_BASE + ARM64_KERNEL_ALIGN + TEXT_OFF);
	ck_assert_int_eq(parse(IMG_LEN, 0, RAM_SIZE), 0);
	ck_assert_uint_eq(k.load, TEXT_OFF);
}
END_TEST

START_TEST(parse_truncated_every_length)
{
	size_t len;

	for (len = 0; len < ARM64_IMAGE_HDR_LEN; len++) {
		int ret = load_guarded(len);

		ck_assert_msg(ret == -EINVAL, "length %zu: got %d", len, ret);
		ck_assert_msg(strstr(husk_lasterr(), "truncated") &&
			      strstr(husk_lasterr(), "shorter than its 64-byte header"),
			      "length %zu: '%s'", len, husk_lasterr());
		assert_k_zero();
	}
	ck_assert(all_bytes(ram, RAM_ALLOC, POISON));
	/* Just the header: a valid (if useless) Image. */
	ck_assert_int_eq(load_guarded(ARM64_IMAGE_HDR_LEN), 0);
	ck_assert_int_eq(load_guarded(IMG_LEN), 0);
}
END_TEST

START_TEST(parse_bad_magic)
{
	size_t i;

	/* Any single byte of the magic wrong. */
	for (i = 56; i < 60; i++) {
		build_img();
		img[i] ^= 0x20;
		assert_err(parse_std(), EINVAL, "not an arm64 Image");
		assert_k_zero();
	}
	/* A vmlinux ELF, or all zeroes. */
	memset(img, 0, sizeof(img));
	memcpy(img, "\x7f" "ELF", 4);
	assert_err(parse_std(), EINVAL, "no \"ARM\\x64\" magic at offset 56");
	memset(img, 0, sizeof(img));
	assert_err(parse_std(), EINVAL, "not an arm64 Image");
	/* The magic byte-swapped, as a big-endian reader would have it. */
	build_img();
	put32(56, 0x41524d64);
	assert_err(parse_std(), EINVAL, "not an arm64 Image");
}
END_TEST

START_TEST(parse_big_endian)
{
	set_flags(0x1);
	assert_err(parse_std(), EINVAL, "big-endian kernel");
	assert_k_zero();
	set_flags(0xf);
	assert_err(parse_std(), EINVAL, "husk guests are little-endian");
}
END_TEST

START_TEST(parse_image_size_zero)
{
	set_image_size(0);
	assert_err(parse_std(), EINVAL, "image_size 0: a kernel older than Linux 3.17");
	assert_k_zero();
	/* Even one that would fit everywhere. */
	set_text_offset(0);
	assert_err(parse(ARM64_IMAGE_HDR_LEN, RAM_BASE, RAM_SIZE), EINVAL, "3.17");
}
END_TEST

START_TEST(parse_text_offset_unaligned)
{
	set_text_offset(TEXT_OFF + 1);
	assert_err(parse_std(), EINVAL, "text_offset 0x80001 is not a multiple of 4 KiB");
	set_text_offset(0x800);
	assert_err(parse_std(), EINVAL, "not a multiple of 4 KiB");
	set_text_offset(0xfff);
	assert_err(parse_std(), EINVAL, "not a multiple of 4 KiB");
	set_text_offset(UINT64_MAX);
	assert_err(parse_std(), EINVAL, "not a multiple of 4 KiB");
	assert_k_zero();
}
END_TEST

START_TEST(parse_text_offset_too_large)
{
	set_text_offset(ARM64_KERNEL_ALIGN);
	assert_err(parse_std(), EINVAL, "text_offset 0x200000 is not below 2 MiB");
	set_text_offset(64 * MIB);
	assert_err(parse_std(), EINVAL, "not below 2 MiB");
	set_text_offset(UINT64_MAX & ~0xfffull);
	assert_err(parse_std(), EINVAL, "text_offset 0xfffffffffffff000 is not below 2 MiB");
	assert_k_zero();
}
END_TEST

START_TEST(parse_file_longer_than_image_size)
{
	set_image_size(IMG_LEN - 1);
	assert_err(parse_std(), EINVAL, "is 12288 bytes but its header says image_size is 12287");
	set_image_size(ARM64_IMAGE_HDR_LEN);
	assert_err(parse_std(), EINVAL, "image_size is 64");
	assert_k_zero();
	/* A file exactly as long as image_size: no bss, fine. */
	set_image_size(IMG_LEN);
	ck_assert_int_eq(parse_std(), 0);
	ck_assert_uint_eq(k.end, k.load + IMG_LEN);
}
END_TEST

START_TEST(parse_ram_too_small)
{
	uint64_t need = TEXT_OFF + 5 * MIB;	/* 5.5 MiB */

	set_image_size(5 * MIB);
	assert_err(parse(IMG_LEN, RAM_BASE, 4 * MIB), ENOSPC,
		   "needs 6 MiB of RAM (image_size 5242880 bytes at 0x80080000), the VM has 4 MiB");
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "--mem"));
	assert_k_zero();
	assert_err(parse(IMG_LEN, RAM_BASE, need - 1), ENOSPC, "needs 6 MiB");
	assert_err(parse(IMG_LEN, RAM_BASE, 0), ENOSPC, "the VM has 0 MiB");
	/* Exactly enough: the kernel claims the last byte of RAM. */
	ck_assert_int_eq(parse(IMG_LEN, RAM_BASE, need), 0);
	ck_assert_uint_eq(k.end, RAM_BASE + need);
}
END_TEST

START_TEST(parse_ram_too_small_after_rounding)
{
	/* RAM one page past a 2 MiB boundary loses 2 MiB - 4 KiB to alignment. */
	uint64_t base = RAM_BASE + 0x1000;
	uint64_t need = ARM64_KERNEL_ALIGN - 0x1000 + TEXT_OFF + IMG_SIZE;

	assert_err(parse(IMG_LEN, base, need - 1), ENOSPC, "at 0x80280000");
	ck_assert_int_eq(parse(IMG_LEN, base, need), 0);
	ck_assert_uint_eq(k.load, RAM_BASE + ARM64_KERNEL_ALIGN + TEXT_OFF);
	ck_assert_uint_eq(k.end, base + need);
	/* Less RAM than the gap up to the boundary. */
	assert_err(parse(IMG_LEN, base, 0x1000), ENOSPC, "needs 3 MiB");
}
END_TEST

START_TEST(parse_overflow)
{
	/* base + text_offset + image_size wraps past 2^64. */
	set_image_size(UINT64_MAX);
	assert_err(parse_std(), EINVAL, "impossible image_size 0xffffffffffffffff");
	set_image_size(UINT64_MAX - TEXT_OFF + 1);
	assert_err(parse_std(), EINVAL, "impossible image_size");
	assert_err(parse(IMG_LEN, RAM_BASE + 0x1000, RAM_SIZE), EINVAL, "impossible");
	/* One byte short of wrapping: a plain "too small". */
	set_image_size(UINT64_MAX - TEXT_OFF);
	assert_err(parse_std(), ENOSPC, "needs 17592186044416 MiB");
	assert_k_zero();
}
END_TEST

START_TEST(parse_ram_at_top_of_address_space)
{
	uint64_t top2m = 0ull - ARM64_KERNEL_ALIGN;

	/* RAM that wraps around 2^64. */
	assert_err(parse(IMG_LEN, UINT64_MAX - 0xfff, 0x1000), EINVAL, "wraps around");
	assert_err(parse(IMG_LEN, 1, UINT64_MAX), EINVAL, "wraps around");
	/* Rounding up to 2 MiB would wrap: no boundary at all. */
	assert_err(parse(IMG_LEN, top2m + 1, 0x1000), ENOSPC, "no 2 MiB boundary");
	assert_err(parse(IMG_LEN, UINT64_MAX, 0), ENOSPC, "no 2 MiB boundary");
	/* The last 2 MiB of the address space (minus its last byte) is fine. */
	ck_assert_int_eq(parse(IMG_LEN, top2m, ARM64_KERNEL_ALIGN - 1), 0);
	ck_assert_uint_eq(k.load, top2m + TEXT_OFF);
	ck_assert_uint_eq(k.end, top2m + TEXT_OFF + IMG_SIZE);
	set_image_size(ARM64_KERNEL_ALIGN - TEXT_OFF);	/* would end at 2^64 */
	assert_err(parse(IMG_LEN, top2m, ARM64_KERNEL_ALIGN - 1), ENOSPC, "needs 2 MiB");
}
END_TEST

/* --------------------------------------------------------------- load -- */

START_TEST(load_copied_exactly)
{
	ck_assert_int_eq(load_std(), 0);
	ck_assert_uint_eq(k.load, RAM_BASE + TEXT_OFF);
	ck_assert_mem_eq(ram + TEXT_OFF, img, IMG_LEN);
	/* Nothing else written: not below, not the bss, not past RAM. */
	ck_assert(all_bytes(ram, TEXT_OFF, POISON));
	ck_assert(all_bytes(ram + TEXT_OFF + IMG_LEN, RAM_ALLOC - TEXT_OFF - IMG_LEN, POISON));
}
END_TEST

START_TEST(load_ram_base_unaligned)
{
	/* The host buffer starts at gpa RAM_BASE + 4 KiB. */
	uint64_t at = ARM64_KERNEL_ALIGN - 0x1000 + TEXT_OFF;

	ck_assert_int_eq(image_arm64_load(ram, RAM_BASE + 0x1000, RAM_SIZE, img, IMG_LEN, &k), 0);
	ck_assert_uint_eq(k.load, RAM_BASE + ARM64_KERNEL_ALIGN + TEXT_OFF);
	ck_assert_mem_eq(ram + at, img, IMG_LEN);
	ck_assert(all_bytes(ram, at, POISON));
	ck_assert(all_bytes(ram + at + IMG_LEN, RAM_ALLOC - at - IMG_LEN, POISON));
}
END_TEST

START_TEST(load_at_end_of_ram)
{
	/* No bss, RAM ends with the Image's last byte. */
	uint64_t size = TEXT_OFF + IMG_LEN;

	set_image_size(IMG_LEN);
	ck_assert_int_eq(image_arm64_load(ram, RAM_BASE, size, img, IMG_LEN, &k), 0);
	ck_assert_mem_eq(ram + TEXT_OFF, img, IMG_LEN);
	ck_assert(all_bytes(ram + size, RAM_ALLOC - size, POISON));
	/* One byte less RAM: refused, nothing written. */
	memset(ram, POISON, RAM_ALLOC);
	assert_err(image_arm64_load(ram, RAM_BASE, size - 1, img, IMG_LEN, &k), ENOSPC,
		   "needs 1 MiB");
	ck_assert(all_bytes(ram, RAM_ALLOC, POISON));
}
END_TEST

START_TEST(load_refused_writes_nothing)
{
	img[56] = 0;
	assert_err(load_std(), EINVAL, "not an arm64 Image");
	build_img();
	set_image_size(RAM_SIZE);
	assert_err(load_std(), ENOSPC, "needs 9 MiB");
	build_img();
	set_image_size(IMG_LEN - 1);
	assert_err(load_std(), EINVAL, "header says image_size");
	build_img();
	set_text_offset(ARM64_KERNEL_ALIGN);
	assert_err(load_std(), EINVAL, "text_offset");
	ck_assert(all_bytes(ram, RAM_ALLOC, POISON));
	assert_k_zero();
}
END_TEST

/* ------------------------------------------------------------- initrd -- */

#define VM_RAM		(64 * MIB)
#define FDT_GPA		(RAM_BASE + VM_RAM - ARM64_FDT_MAX)

static void setup_initrd(void)
{
	setup();
	/* A kernel that ends off a page boundary. */
	set_image_size(IMG_SIZE + 0x123);
	ck_assert_int_eq(parse(IMG_LEN, RAM_BASE, VM_RAM), 0);
	ck_assert_uint_eq(k.end, RAM_BASE + TEXT_OFF + IMG_SIZE + 0x123);
}

START_TEST(initrd_below_fdt)
{
	uint64_t gpa = 0;

	ck_assert_int_eq(image_arm64_initrd_addr(&k, FDT_GPA, 0x1234, &gpa), 0);
	ck_assert_uint_eq(gpa, FDT_GPA - 0x2000);
	ck_assert_uint_eq(gpa & 0xfff, 0);
	ck_assert_uint_le(gpa + 0x1234, FDT_GPA);
	ck_assert_uint_ge(gpa, k.end);
	/* Whole pages end exactly at the device tree. */
	ck_assert_int_eq(image_arm64_initrd_addr(&k, FDT_GPA, 16 * MIB, &gpa), 0);
	ck_assert_uint_eq(gpa, FDT_GPA - 16 * MIB);
}
END_TEST

START_TEST(initrd_fills_the_room)
{
	/* The first page at or above the kernel's end. */
	uint64_t first = (k.end + 0xfff) & ~0xfffull;
	uint64_t room = FDT_GPA - first, gpa = 0;
	char msg[128];

	ck_assert_int_eq(image_arm64_initrd_addr(&k, FDT_GPA, room, &gpa), 0);
	ck_assert_uint_eq(gpa, first);
	gpa = 1;
	snprintf(msg, sizeof(msg), "initrd (%llu bytes) does not fit", (unsigned long long)room + 1);
	assert_err(image_arm64_initrd_addr(&k, FDT_GPA, room + 1, &gpa), ENOSPC, msg);
	snprintf(msg, sizeof(msg), "device tree at 0x%llx: %llu bytes of room",
		 (unsigned long long)FDT_GPA, (unsigned long long)room);
	ck_assert_msg(strstr(husk_lasterr(), msg), "'%s' lacks '%s'", husk_lasterr(), msg);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "--mem"));
	ck_assert_uint_eq(gpa, 1);	/* untouched on failure */
}
END_TEST

START_TEST(initrd_too_large)
{
	uint64_t gpa = 1;

	assert_err(image_arm64_initrd_addr(&k, FDT_GPA, VM_RAM, &gpa), ENOSPC, "does not fit");
	assert_err(image_arm64_initrd_addr(&k, FDT_GPA, UINT64_MAX, &gpa), ENOSPC,
		   "initrd (18446744073709551615 bytes)");
	assert_err(image_arm64_initrd_addr(&k, FDT_GPA, FDT_GPA + 1, &gpa), ENOSPC,
		   "does not fit");
	ck_assert_uint_eq(gpa, 1);
}
END_TEST

START_TEST(initrd_empty)
{
	uint64_t gpa = 1;

	ck_assert_int_eq(image_arm64_initrd_addr(&k, FDT_GPA, 0, &gpa), 0);
	ck_assert_uint_eq(gpa, FDT_GPA);
}
END_TEST

START_TEST(initrd_kernel_reaches_fdt)
{
	struct arm64_image kk = { .end = FDT_GPA + 1 };
	uint64_t gpa = 1;

	assert_err(image_arm64_initrd_addr(&kk, FDT_GPA, 0, &gpa), ENOSPC,
		   "runs into the device tree at 0x83e00000");
	assert_err(image_arm64_initrd_addr(&kk, FDT_GPA, 0x1000, &gpa), ENOSPC,
		   "no room for an initrd");
	/* Ending one byte below it leaves no whole page: only len 0 fits. */
	kk.end = FDT_GPA - 1;
	assert_err(image_arm64_initrd_addr(&kk, FDT_GPA, 1, &gpa), ENOSPC, "0 bytes of room");
	ck_assert_uint_eq(gpa, 1);
	ck_assert_int_eq(image_arm64_initrd_addr(&kk, FDT_GPA, 0, &gpa), 0);
	ck_assert_uint_eq(gpa, FDT_GPA);
	/* Ending exactly at it, and a page below it. */
	kk.end = FDT_GPA;
	ck_assert_int_eq(image_arm64_initrd_addr(&kk, FDT_GPA, 0, &gpa), 0);
	assert_err(image_arm64_initrd_addr(&kk, FDT_GPA, 1, &gpa), ENOSPC, "0 bytes of room");
	kk.end = FDT_GPA - 0x1000;
	ck_assert_int_eq(image_arm64_initrd_addr(&kk, FDT_GPA, 0x1000, &gpa), 0);
	ck_assert_uint_eq(gpa, kk.end);
}
END_TEST

START_TEST(initrd_extremes)
{
	struct arm64_image kk = { .end = UINT64_MAX };
	uint64_t gpa = 1;

	/* Rounding the kernel's end up to a page must not wrap. */
	assert_err(image_arm64_initrd_addr(&kk, UINT64_MAX, 0, &gpa), ENOSPC, "runs into");
	kk.end = UINT64_MAX - 0x1fff;
	ck_assert_int_eq(image_arm64_initrd_addr(&kk, UINT64_MAX, 0x1000, &gpa), 0);
	ck_assert_uint_eq(gpa, kk.end);	/* its end may not pass fdt_gpa */
	kk.end = 0;
	ck_assert_int_eq(image_arm64_initrd_addr(&kk, 0, 0, &gpa), 0);
	ck_assert_uint_eq(gpa, 0);
	assert_err(image_arm64_initrd_addr(&kk, 0, 1, &gpa), ENOSPC, "0 bytes of room");
}
END_TEST

Suite *image_arm64_suite(void)
{
	Suite *s = suite_create("image_arm64");
	TCase *tc;

	tc = tcase_create("parse");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, parse_valid);
	tcase_add_test(tc, parse_text_offset_zero);
	tcase_add_test(tc, parse_flags_accepted);
	tcase_add_test(tc, parse_ram_base_unaligned);
	tcase_add_test(tc, parse_truncated_every_length);
	tcase_add_test(tc, parse_bad_magic);
	tcase_add_test(tc, parse_big_endian);
	tcase_add_test(tc, parse_image_size_zero);
	tcase_add_test(tc, parse_text_offset_unaligned);
	tcase_add_test(tc, parse_text_offset_too_large);
	tcase_add_test(tc, parse_file_longer_than_image_size);
	tcase_add_test(tc, parse_ram_too_small);
	tcase_add_test(tc, parse_ram_too_small_after_rounding);
	tcase_add_test(tc, parse_overflow);
	tcase_add_test(tc, parse_ram_at_top_of_address_space);
	suite_add_tcase(s, tc);

	tc = tcase_create("load");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, load_copied_exactly);
	tcase_add_test(tc, load_ram_base_unaligned);
	tcase_add_test(tc, load_at_end_of_ram);
	tcase_add_test(tc, load_refused_writes_nothing);
	suite_add_tcase(s, tc);

	tc = tcase_create("initrd");
	tcase_add_checked_fixture(tc, setup_initrd, teardown);
	tcase_add_test(tc, initrd_below_fdt);
	tcase_add_test(tc, initrd_fills_the_room);
	tcase_add_test(tc, initrd_too_large);
	tcase_add_test(tc, initrd_empty);
	tcase_add_test(tc, initrd_kernel_reaches_fdt);
	tcase_add_test(tc, initrd_extremes);
	suite_add_tcase(s, tc);
	return s;
}
