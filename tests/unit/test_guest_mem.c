/*
 * Unit tests for guest_mem: the bounds of gmem_ptr() in the low region, the
 * 32-bit MMIO hole and the high region above 4 GiB, overflow-proof range
 * checks, gmem_read()/gmem_write() and the size rules of gmem_alloc().
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "machine/guest_mem.h"
#include "lib/util.h"
#include "suites.h"

#define RAM_SIZE (16u << 20)

static uint8_t *ram;
static struct guest_mem gm;

static void setup_low(void)
{
	ram = calloc(1, RAM_SIZE);
	ck_assert_ptr_nonnull(ram);
	gmem_init_buffer(&gm, ram, RAM_SIZE);
}

static void teardown_low(void)
{
	free(ram);
	ram = NULL;
}

START_TEST(init_buffer_splits_small_ram)
{
	ck_assert_ptr_eq(gm.host, ram);
	ck_assert_uint_eq(gm.size, RAM_SIZE);
	ck_assert_uint_eq(gm.low_size, RAM_SIZE);
	ck_assert_uint_eq(gm.high_size, 0);
	ck_assert(!gm.mapped);
}
END_TEST

START_TEST(init_buffer_splits_large_ram)
{
	struct guest_mem m;
	uint8_t dummy;

	/* Only the arithmetic is checked: nothing dereferences the buffer. */
	gmem_init_buffer(&m, &dummy, 5ull << 30);
	ck_assert_uint_eq(m.low_size, 3ull << 30);
	ck_assert_uint_eq(m.high_size, 2ull << 30);
	gmem_init_buffer(&m, &dummy, 3ull << 30);
	ck_assert_uint_eq(m.low_size, 3ull << 30);
	ck_assert_uint_eq(m.high_size, 0);
}
END_TEST

START_TEST(ptr_inside_low)
{
	ck_assert_ptr_eq(gmem_ptr(&gm, 0, 1), ram);
	ck_assert_ptr_eq(gmem_ptr(&gm, 0x1234, 100), ram + 0x1234);
	ck_assert_ptr_eq(gmem_ptr(&gm, 0, RAM_SIZE), ram);
}
END_TEST

START_TEST(ptr_last_byte)
{
	ck_assert_ptr_eq(gmem_ptr(&gm, RAM_SIZE - 1, 1), ram + RAM_SIZE - 1);
	ck_assert_ptr_eq(gmem_ptr(&gm, RAM_SIZE - 16, 16), ram + RAM_SIZE - 16);
}
END_TEST

START_TEST(ptr_one_past_end)
{
	ck_assert_ptr_null(gmem_ptr(&gm, RAM_SIZE, 1));
	ck_assert_ptr_null(gmem_ptr(&gm, RAM_SIZE - 1, 2));
	ck_assert_ptr_null(gmem_ptr(&gm, RAM_SIZE - 16, 17));
	ck_assert_ptr_null(gmem_ptr(&gm, 0, RAM_SIZE + 1));
}
END_TEST

START_TEST(ptr_len_zero_at_edges)
{
	ck_assert_ptr_eq(gmem_ptr(&gm, 0, 0), ram);
	ck_assert_ptr_eq(gmem_ptr(&gm, RAM_SIZE - 1, 0), ram + RAM_SIZE - 1);
	/* The first address past RAM is not RAM, even for an empty range. */
	ck_assert_ptr_null(gmem_ptr(&gm, RAM_SIZE, 0));
}
END_TEST

START_TEST(ptr_gap_below_hole)
{
	/* Between the end of small RAM and the hole nothing is mapped either. */
	ck_assert_ptr_null(gmem_ptr(&gm, 0x80000000ull, 1));
	ck_assert_ptr_null(gmem_ptr(&gm, GMEM_HOLE_START - 1, 1));
}
END_TEST

START_TEST(ptr_null_host)
{
	struct guest_mem m;

	memset(&m, 0, sizeof(m));
	m.size = m.low_size = RAM_SIZE;
	ck_assert_ptr_null(gmem_ptr(&m, 0, 1));
}
END_TEST

/* A hand-built layout: 1 MiB low, 1 MiB high, over a 2 MiB buffer. */
#define SMALL_LOW (1u << 20)
#define SMALL_HIGH (1u << 20)

static void setup_split(void)
{
	ram = calloc(1, SMALL_LOW + SMALL_HIGH);
	ck_assert_ptr_nonnull(ram);
	memset(&gm, 0, sizeof(gm));
	gm.host = ram;
	gm.size = SMALL_LOW + SMALL_HIGH;
	gm.low_size = SMALL_LOW;
	gm.high_size = SMALL_HIGH;
}

START_TEST(ptr_high_region)
{
	ck_assert_ptr_eq(gmem_ptr(&gm, GMEM_HOLE_END, 1), ram + SMALL_LOW);
	ck_assert_ptr_eq(gmem_ptr(&gm, GMEM_HOLE_END + 0x1000, 0x10), ram + SMALL_LOW + 0x1000);
	ck_assert_ptr_eq(gmem_ptr(&gm, GMEM_HOLE_END, SMALL_HIGH), ram + SMALL_LOW);
	ck_assert_ptr_eq(gmem_ptr(&gm, GMEM_HOLE_END + SMALL_HIGH - 1, 1),
			 ram + SMALL_LOW + SMALL_HIGH - 1);
	ck_assert_ptr_null(gmem_ptr(&gm, GMEM_HOLE_END + SMALL_HIGH, 1));
	ck_assert_ptr_null(gmem_ptr(&gm, GMEM_HOLE_END + SMALL_HIGH - 1, 2));
	ck_assert_ptr_null(gmem_ptr(&gm, GMEM_HOLE_END, SMALL_HIGH + 1));
	ck_assert_ptr_null(gmem_ptr(&gm, GMEM_HOLE_END + SMALL_HIGH, 0));
}
END_TEST

START_TEST(ptr_range_never_spans_regions)
{
	/* Low RAM end to the hole: not contiguous in guest-physical space. */
	ck_assert_ptr_null(gmem_ptr(&gm, SMALL_LOW - 1, 2));
	ck_assert_ptr_null(gmem_ptr(&gm, 0, SMALL_LOW + SMALL_HIGH));
	ck_assert_ptr_null(gmem_ptr(&gm, SMALL_LOW, 1));
}
END_TEST

START_TEST(ptr_mmio_hole)
{
	ck_assert_ptr_null(gmem_ptr(&gm, GMEM_HOLE_START, 1));
	ck_assert_ptr_null(gmem_ptr(&gm, 0xfec00000ull, 4));
	ck_assert_ptr_null(gmem_ptr(&gm, GMEM_HOLE_END - 1, 1));
	ck_assert_ptr_null(gmem_ptr(&gm, GMEM_HOLE_END - 1, 2));
	ck_assert_ptr_null(gmem_ptr(&gm, GMEM_HOLE_START, 0));
}
END_TEST

START_TEST(ptr_overflow)
{
	ck_assert_ptr_null(gmem_ptr(&gm, UINT64_MAX - 1, 16));
	ck_assert_ptr_null(gmem_ptr(&gm, UINT64_MAX, 1));
	ck_assert_ptr_null(gmem_ptr(&gm, 0, UINT64_MAX));
	ck_assert_ptr_null(gmem_ptr(&gm, 1, UINT64_MAX));
	ck_assert_ptr_null(gmem_ptr(&gm, GMEM_HOLE_END, UINT64_MAX));
	ck_assert_ptr_null(gmem_ptr(&gm, GMEM_HOLE_END + 16, UINT64_MAX - 8));
	/* gpa + len would wrap around to inside the low region. */
	ck_assert_ptr_null(gmem_ptr(&gm, 0x100, UINT64_MAX - 0x80));
}
END_TEST

START_TEST(read_write_roundtrip)
{
	const char msg[] = "hello, guest";
	char back[sizeof(msg)];

	ck_assert_int_eq(gmem_write(&gm, 0x2000, msg, sizeof(msg)), 0);
	ck_assert_mem_eq(ram + 0x2000, msg, sizeof(msg));
	memset(back, 0, sizeof(back));
	ck_assert_int_eq(gmem_read(&gm, 0x2000, back, sizeof(back)), 0);
	ck_assert_str_eq(back, msg);

	ck_assert_int_eq(gmem_write(&gm, GMEM_HOLE_END + 0x10, msg, sizeof(msg)), 0);
	ck_assert_mem_eq(ram + SMALL_LOW + 0x10, msg, sizeof(msg));
	memset(back, 0, sizeof(back));
	ck_assert_int_eq(gmem_read(&gm, GMEM_HOLE_END + 0x10, back, sizeof(back)), 0);
	ck_assert_str_eq(back, msg);
}
END_TEST

START_TEST(read_write_efault)
{
	uint8_t buf[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	uint8_t copy[8];

	memcpy(copy, buf, sizeof(buf));
	ck_assert_int_eq(gmem_write(&gm, SMALL_LOW - 4, buf, 8), -EFAULT);
	ck_assert_int_eq(gmem_write(&gm, GMEM_HOLE_START, buf, 8), -EFAULT);
	ck_assert_int_eq(gmem_write(&gm, UINT64_MAX - 1, buf, 8), -EFAULT);
	ck_assert_int_eq(gmem_read(&gm, SMALL_LOW - 4, buf, 8), -EFAULT);
	ck_assert_int_eq(gmem_read(&gm, GMEM_HOLE_END + SMALL_HIGH - 4, buf, 8), -EFAULT);
	/* A failed read leaves the destination alone, a failed write the RAM. */
	ck_assert_mem_eq(buf, copy, sizeof(buf));
	ck_assert_uint_eq(ram[SMALL_LOW - 4], 0);
	ck_assert_uint_eq(ram[SMALL_LOW + SMALL_HIGH - 4], 0);
}
END_TEST

START_TEST(alloc_rejects_too_small)
{
	struct guest_mem m;

	m.host = (void *)1;
	ck_assert_int_eq(gmem_alloc(&m, GMEM_MIN_SIZE - 4096, true), -EINVAL);
	ck_assert_ptr_null(m.host);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "guest memory size"));
	ck_assert_int_eq(gmem_alloc(&m, 0, true), -EINVAL);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "16 MiB"));
}
END_TEST

START_TEST(alloc_rejects_unaligned)
{
	struct guest_mem m;

	ck_assert_int_eq(gmem_alloc(&m, (64u << 20) + 1, true), -EINVAL);
	ck_assert_ptr_null(m.host);
	ck_assert_int_eq(gmem_alloc(&m, (64u << 20) - 2048, true), -EINVAL);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "guest memory size"));
}
END_TEST

START_TEST(alloc_rejects_too_large)
{
	struct guest_mem m;

	ck_assert_int_eq(gmem_alloc(&m, GMEM_MAX_SIZE + 4096, true), -EINVAL);
	ck_assert_ptr_null(m.host);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "65536 MiB"));
	ck_assert_int_eq(gmem_alloc(&m, UINT64_MAX & ~0xfffull, true), -EINVAL);
}
END_TEST

START_TEST(alloc_64m)
{
	struct guest_mem m;
	uint32_t v = 0xdeadbeef, back = 0;

	ck_assert_int_eq(gmem_alloc(&m, 64u << 20, true), 0);
	ck_assert_ptr_nonnull(m.host);
	ck_assert(m.mapped);
	ck_assert_uint_eq(m.size, 64u << 20);
	ck_assert_uint_eq(m.low_size, 64u << 20);
	ck_assert_uint_eq(m.high_size, 0);
	/* Anonymous memory starts zeroed. */
	ck_assert_uint_eq(*(uint8_t *)gmem_ptr(&m, (64u << 20) - 1, 1), 0);
	ck_assert_int_eq(gmem_write(&m, (64u << 20) - 4, &v, 4), 0);
	ck_assert_int_eq(gmem_read(&m, (64u << 20) - 4, &back, 4), 0);
	ck_assert_uint_eq(back, 0xdeadbeef);
	ck_assert_ptr_null(gmem_ptr(&m, 64u << 20, 1));
	gmem_free(&m);
	ck_assert_ptr_null(m.host);
	ck_assert_uint_eq(m.size, 0);
	ck_assert(!m.mapped);
}
END_TEST

START_TEST(alloc_min_and_1g)
{
	struct guest_mem m;

	ck_assert_int_eq(gmem_alloc(&m, GMEM_MIN_SIZE, true), 0);
	ck_assert_uint_eq(m.low_size, GMEM_MIN_SIZE);
	gmem_free(&m);
	/* MAP_NORESERVE: a gigabyte of address space costs nothing until touched. */
	ck_assert_int_eq(gmem_alloc(&m, 1ull << 30, true), 0);
	ck_assert_ptr_nonnull(gmem_ptr(&m, (1ull << 30) - 1, 1));
	gmem_free(&m);
}
END_TEST

/* The hint a host's THP setting reads from /proc/self/smaps for a mapping. */
static bool smaps_flag(const void *addr, const char *flag)
{
	char line[512], want[32];
	unsigned long lo, hi, a = (unsigned long)addr;
	bool in = false, found = false;
	FILE *f = fopen("/proc/self/smaps", "r");

	ck_assert_ptr_nonnull(f);
	snprintf(want, sizeof(want), " %s", flag);
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' '))
			in = a >= lo && a < hi;
		else if (in && !strncmp(line, "VmFlags:", 8))
			found = strstr(line, want) != NULL;
	}
	fclose(f);
	return found;
}

/*
 * 2 MiB aligned, so KVM can map huge pages of it; the hint follows the
 * argument (hg: MADV_HUGEPAGE, nh: MADV_NOHUGEPAGE).
 */
START_TEST(alloc_huge_aligned)
{
	struct guest_mem m;

	ck_assert_int_eq(gmem_alloc(&m, 64u << 20, true), 0);
	ck_assert_uint_eq((uintptr_t)m.host & ((2u << 20) - 1), 0);
	ck_assert(smaps_flag(m.host, "hg"));
	ck_assert(!smaps_flag(m.host, "nh"));
	gmem_free(&m);
	ck_assert_int_eq(gmem_alloc(&m, (64u << 20) + 4096, false), 0);
	ck_assert_uint_eq((uintptr_t)m.host & ((2u << 20) - 1), 0);
	ck_assert(smaps_flag(m.host, "nh"));
	ck_assert(!smaps_flag(m.host, "hg"));
	ck_assert_ptr_nonnull(gmem_ptr(&m, 64u << 20, 4096));
	gmem_free(&m);
}
END_TEST

START_TEST(free_buffer_does_not_unmap)
{
	/* gmem_free() of caller-owned memory only forgets it. */
	gmem_free(&gm);
	ck_assert_ptr_null(gm.host);
	ram[0] = 1;	/* still ours; teardown frees it */
	ck_assert_ptr_null(gmem_ptr(&gm, 0, 1));
}
END_TEST

/* A RAM image round trip: sparse on disk, copy on write when mapped back. */
START_TEST(image_save_and_map)
{
	char path[] = "/tmp/husk-gmem-XXXXXX";
	struct guest_mem m, r;
	uint64_t data = 0;
	struct stat st;
	uint8_t *p;
	int fd;

	ck_assert_int_eq(gmem_alloc(&m, 32 << 20, true), 0);
	p = gmem_ptr(&m, 0x1000, 4096);
	memset(p, 0xaa, 4096);
	p = gmem_ptr(&m, (32 << 20) - 4096, 4096);
	p[100] = 0x55;
	/* Touched but zero: no data either. */
	memset(gmem_ptr(&m, 0x100000, 4096), 0, 4096);
	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	unlink(path);
	ck_assert_int_eq(gmem_save(&m, fd, &data), 0);
	ck_assert_uint_eq(data, 2 * 4096);
	ck_assert_int_eq(fstat(fd, &st), 0);
	ck_assert_int_eq(st.st_size, 32 << 20);
	ck_assert_int_le(st.st_blocks * 512, 64 * 1024);	/* holes, not zeros */

	ck_assert_int_eq(gmem_map_file(&r, fd, 32 << 20), 0);
	ck_assert_int_eq(((uint8_t *)gmem_ptr(&r, 0x1000, 1))[4095], 0xaa);
	ck_assert_int_eq(((uint8_t *)gmem_ptr(&r, (32 << 20) - 4096, 4096))[100], 0x55);
	ck_assert_int_eq(((uint8_t *)gmem_ptr(&r, 0x200000, 1))[0], 0);
	/* Writes stay in the mapping; the image is never changed. */
	memset(gmem_ptr(&r, 0x1000, 4096), 0x11, 4096);
	ck_assert_int_eq(pread(fd, p, 1, 0x1000), 1);
	ck_assert_int_eq(p[0], 0xaa);
	gmem_free(&r);
	/* A file of another size is refused. */
	ck_assert_int_eq(ftruncate(fd, 16 << 20), 0);
	ck_assert_int_eq(gmem_map_file(&r, fd, 32 << 20), -EINVAL);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "truncated"));
	close(fd);
	gmem_free(&m);
}
END_TEST

Suite *guest_mem_suite(void)
{
	Suite *s = suite_create("guest_mem");
	TCase *tc;

	tc = tcase_create("low");
	tcase_add_checked_fixture(tc, setup_low, teardown_low);
	tcase_add_test(tc, init_buffer_splits_small_ram);
	tcase_add_test(tc, init_buffer_splits_large_ram);
	tcase_add_test(tc, ptr_inside_low);
	tcase_add_test(tc, ptr_last_byte);
	tcase_add_test(tc, ptr_one_past_end);
	tcase_add_test(tc, ptr_len_zero_at_edges);
	tcase_add_test(tc, ptr_gap_below_hole);
	tcase_add_test(tc, ptr_null_host);
	tcase_add_test(tc, free_buffer_does_not_unmap);
	suite_add_tcase(s, tc);

	tc = tcase_create("split");
	tcase_add_checked_fixture(tc, setup_split, teardown_low);
	tcase_add_test(tc, ptr_high_region);
	tcase_add_test(tc, ptr_range_never_spans_regions);
	tcase_add_test(tc, ptr_mmio_hole);
	tcase_add_test(tc, ptr_overflow);
	tcase_add_test(tc, read_write_roundtrip);
	tcase_add_test(tc, read_write_efault);
	suite_add_tcase(s, tc);

	tc = tcase_create("alloc");
	tcase_add_test(tc, alloc_rejects_too_small);
	tcase_add_test(tc, alloc_rejects_unaligned);
	tcase_add_test(tc, alloc_rejects_too_large);
	tcase_add_test(tc, alloc_64m);
	tcase_add_test(tc, alloc_min_and_1g);
	tcase_add_test(tc, alloc_huge_aligned);
	tcase_add_test(tc, image_save_and_map);
	suite_add_tcase(s, tc);
	return s;
}
