/*
 * Unit tests for virtqueue: split rings built by hand in malloc'd "guest
 * RAM" and walked as a hostile guest would shape them: good chains, index
 * wrap-around, indirect tables, and every malformation vq_pop() and
 * vq_validate() must refuse (loops, out-of-range indices, buffers outside or
 * straddling RAM, overflowing gpa + len, bad indirect tables, ordering).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "machine/guest_mem.h"
#include "virtio/virtqueue.h"
#include "suites.h"

#define RAM_SIZE (1u << 20)
#define QSIZE 16
#define DESC_GPA 0x1000u
#define AVAIL_GPA 0x2000u
#define USED_GPA 0x3000u
#define ITABLE_GPA 0x4000u
#define BUF_GPA 0x10000u

#define F_NEXT 1
#define F_WRITE 2
#define F_INDIRECT 4

struct desc {
	uint64_t addr;
	uint32_t len;
	uint16_t flags;
	uint16_t next;
};

static uint8_t *ram;
static struct guest_mem gm;
static struct virtqueue vq;
static struct vq_chain ch;

static void setup(void)
{
	ram = calloc(1, RAM_SIZE);
	ck_assert_ptr_nonnull(ram);
	gmem_init_buffer(&gm, ram, RAM_SIZE);
	memset(&vq, 0, sizeof(vq));
	vq.mem = &gm;
	vq.size = QSIZE;
	vq.desc_gpa = DESC_GPA;
	vq.avail_gpa = AVAIL_GPA;
	vq.used_gpa = USED_GPA;
	vq.ready = true;
	ck_assert_int_eq(vq_validate(&vq), 0);
}

static void teardown(void)
{
	free(ram);
	ram = NULL;
}

static struct desc *table(uint64_t gpa)
{
	return (struct desc *)(ram + gpa);
}

static void set_desc(uint64_t tgpa, unsigned i, uint64_t addr, uint32_t len,
		     uint16_t flags, uint16_t next)
{
	struct desc d = { addr, len, flags, next };

	memcpy(&table(tgpa)[i], &d, sizeof(d));
}

static uint16_t *avail_idx(void)
{
	return (uint16_t *)(ram + AVAIL_GPA + 2);
}

static uint16_t *avail_flags(void)
{
	return (uint16_t *)(ram + AVAIL_GPA);
}

/* Publish head in the avail ring the way a driver does. */
static void offer(uint16_t head)
{
	uint16_t idx = *avail_idx();
	uint16_t *ring = (uint16_t *)(ram + AVAIL_GPA + 4);

	ring[idx % vq.size] = head;
	*avail_idx() = idx + 1;
}

static uint16_t used_idx(void)
{
	return *(uint16_t *)(ram + USED_GPA + 2);
}

static void used_elem(unsigned slot, uint32_t *id, uint32_t *len)
{
	uint32_t *e = (uint32_t *)(ram + USED_GPA + 4 + 8 * slot);

	*id = e[0];
	*len = e[1];
}

START_TEST(pop_empty)
{
	ck_assert_int_eq(vq_pop(&vq, &ch), 0);
}
END_TEST

START_TEST(pop_out_then_in)
{
	set_desc(DESC_GPA, 0, BUF_GPA, 16, F_NEXT, 1);
	set_desc(DESC_GPA, 1, BUF_GPA + 0x100, 32, F_WRITE, 0);
	offer(0);
	ck_assert_int_eq(vq_pop(&vq, &ch), 1);
	ck_assert_uint_eq(ch.head, 0);
	ck_assert_uint_eq(ch.n_out, 1);
	ck_assert_uint_eq(ch.n_in, 1);
	ck_assert_ptr_eq(ch.out[0].base, ram + BUF_GPA);
	ck_assert_uint_eq(ch.out[0].len, 16);
	ck_assert_ptr_eq(ch.in[0].base, ram + BUF_GPA + 0x100);
	ck_assert_uint_eq(ch.in_len, 32);
	ck_assert_uint_eq(ch.out_len, 16);
	ck_assert_uint_eq(vq.last_avail, 1);
	ck_assert_int_eq(vq_pop(&vq, &ch), 0);
}
END_TEST

START_TEST(pop_scattered_chain)
{
	/* 5 -> 2 -> 9 -> 15: out, out, in, in. */
	set_desc(DESC_GPA, 5, BUF_GPA, 10, F_NEXT, 2);
	set_desc(DESC_GPA, 2, BUF_GPA + 0x100, 20, F_NEXT, 9);
	set_desc(DESC_GPA, 9, BUF_GPA + 0x200, 30, F_NEXT | F_WRITE, 15);
	set_desc(DESC_GPA, 15, BUF_GPA + 0x300, 40, F_WRITE, 0);
	offer(5);
	ck_assert_int_eq(vq_pop(&vq, &ch), 1);
	ck_assert_uint_eq(ch.head, 5);
	ck_assert_uint_eq(ch.n_out, 2);
	ck_assert_uint_eq(ch.n_in, 2);
	ck_assert_uint_eq(ch.out_len, 30);
	ck_assert_uint_eq(ch.in_len, 70);
	ck_assert_ptr_eq(ch.in[1].base, ram + BUF_GPA + 0x300);
}
END_TEST

START_TEST(pop_two_chains_in_order)
{
	set_desc(DESC_GPA, 3, BUF_GPA, 8, 0, 0);
	set_desc(DESC_GPA, 7, BUF_GPA + 8, 8, F_WRITE, 0);
	offer(3);
	offer(7);
	ck_assert_int_eq(vq_pop(&vq, &ch), 1);
	ck_assert_uint_eq(ch.head, 3);
	ck_assert_int_eq(vq_pop(&vq, &ch), 1);
	ck_assert_uint_eq(ch.head, 7);
	ck_assert_uint_eq(ch.n_in, 1);
	ck_assert_int_eq(vq_pop(&vq, &ch), 0);
}
END_TEST

START_TEST(pop_indirect)
{
	set_desc(ITABLE_GPA, 0, BUF_GPA, 16, F_NEXT, 2);
	set_desc(ITABLE_GPA, 2, BUF_GPA + 0x100, 512, F_NEXT | F_WRITE, 1);
	set_desc(ITABLE_GPA, 1, BUF_GPA + 0x400, 1, F_WRITE, 0);
	/* The WRITE flag on the indirect descriptor itself is ignored. */
	set_desc(DESC_GPA, 4, ITABLE_GPA, 3 * 16, F_INDIRECT | F_WRITE, 0);
	offer(4);
	ck_assert_int_eq(vq_pop(&vq, &ch), 1);
	ck_assert_uint_eq(ch.head, 4);
	ck_assert_uint_eq(ch.n_out, 1);
	ck_assert_uint_eq(ch.n_in, 2);
	ck_assert_uint_eq(ch.in_len, 513);
	ck_assert_ptr_eq(ch.in[1].base, ram + BUF_GPA + 0x400);
}
END_TEST

START_TEST(pop_direct_then_indirect)
{
	set_desc(ITABLE_GPA, 0, BUF_GPA + 0x100, 4, F_WRITE, 0);
	set_desc(DESC_GPA, 0, BUF_GPA, 16, F_NEXT, 1);
	set_desc(DESC_GPA, 1, ITABLE_GPA, 16, F_INDIRECT, 0);
	offer(0);
	ck_assert_int_eq(vq_pop(&vq, &ch), 1);
	ck_assert_uint_eq(ch.n_out, 1);
	ck_assert_uint_eq(ch.n_in, 1);
}
END_TEST

START_TEST(wrap_avail_and_used_at_65535)
{
	uint32_t id, len;

	vq.last_avail = 65535;
	vq.used_idx = 65535;
	*avail_idx() = 65535;
	set_desc(DESC_GPA, 1, BUF_GPA, 8, F_WRITE, 0);
	set_desc(DESC_GPA, 2, BUF_GPA + 8, 8, F_WRITE, 0);
	offer(1);	/* slot 65535 % 16 = 15, idx -> 0 */
	offer(2);	/* slot 0, idx -> 1 */
	ck_assert_uint_eq(*avail_idx(), 1);
	ck_assert_int_eq(vq_pop(&vq, &ch), 1);
	ck_assert_uint_eq(ch.head, 1);
	ck_assert_uint_eq(vq.last_avail, 0);
	ck_assert_int_eq(vq_push(&vq, ch.head, 8), 0);
	ck_assert_uint_eq(used_idx(), 0);
	used_elem(15, &id, &len);
	ck_assert_uint_eq(id, 1);
	ck_assert_uint_eq(len, 8);
	ck_assert_int_eq(vq_pop(&vq, &ch), 1);
	ck_assert_uint_eq(ch.head, 2);
	ck_assert_int_eq(vq_push(&vq, ch.head, 3), 0);
	ck_assert_uint_eq(used_idx(), 1);
	used_elem(0, &id, &len);
	ck_assert_uint_eq(id, 2);
	ck_assert_uint_eq(len, 3);
	ck_assert_int_eq(vq_pop(&vq, &ch), 0);
}
END_TEST

START_TEST(self_loop)
{
	set_desc(DESC_GPA, 0, BUF_GPA, 8, F_NEXT, 0);
	offer(0);
	ck_assert_int_eq(vq_pop(&vq, &ch), -EINVAL);
}
END_TEST

START_TEST(longer_loop)
{
	set_desc(DESC_GPA, 0, BUF_GPA, 8, F_NEXT, 1);
	set_desc(DESC_GPA, 1, BUF_GPA, 8, F_NEXT, 2);
	set_desc(DESC_GPA, 2, BUF_GPA, 8, F_NEXT, 0);
	offer(0);
	ck_assert_int_eq(vq_pop(&vq, &ch), -EINVAL);
}
END_TEST

START_TEST(loop_in_indirect_table)
{
	set_desc(ITABLE_GPA, 0, BUF_GPA, 8, F_NEXT, 1);
	set_desc(ITABLE_GPA, 1, BUF_GPA, 8, F_NEXT, 0);
	set_desc(DESC_GPA, 0, ITABLE_GPA, 32, F_INDIRECT, 0);
	offer(0);
	ck_assert_int_eq(vq_pop(&vq, &ch), -EINVAL);
}
END_TEST

START_TEST(next_out_of_range)
{
	set_desc(DESC_GPA, 0, BUF_GPA, 8, F_NEXT, QSIZE);
	offer(0);
	ck_assert_int_eq(vq_pop(&vq, &ch), -EINVAL);
}
END_TEST

START_TEST(indirect_next_out_of_range)
{
	set_desc(ITABLE_GPA, 0, BUF_GPA, 8, F_NEXT, 2);	/* table has 2 entries */
	set_desc(DESC_GPA, 0, ITABLE_GPA, 32, F_INDIRECT, 0);
	offer(0);
	ck_assert_int_eq(vq_pop(&vq, &ch), -EINVAL);
}
END_TEST

START_TEST(head_out_of_range)
{
	offer(QSIZE + 3);
	ck_assert_int_eq(vq_pop(&vq, &ch), -EINVAL);
}
END_TEST

/* A queue of 128 with a straight chain of n descriptors from index 0. */
static void long_chain(unsigned n)
{
	unsigned i;

	vq.size = 128;
	ck_assert_int_eq(vq_validate(&vq), 0);
	for (i = 0; i < n; i++)
		set_desc(DESC_GPA, i, BUF_GPA + 16 * i, 16, i + 1 < n ? F_NEXT : 0, i + 1);
	offer(0);
}

START_TEST(chain_of_max_length)
{
	long_chain(VQ_MAX_CHAIN);
	ck_assert_int_eq(vq_pop(&vq, &ch), 1);
	ck_assert_uint_eq(ch.n_out, VQ_MAX_CHAIN);
}
END_TEST

START_TEST(chain_too_long)
{
	long_chain(VQ_MAX_CHAIN + 1);
	ck_assert_int_eq(vq_pop(&vq, &ch), -EINVAL);
}
END_TEST

START_TEST(chain_too_long_through_indirect)
{
	unsigned i;

	/* One direct buffer plus a full indirect table: one over the limit. */
	for (i = 0; i < VQ_MAX_CHAIN; i++)
		set_desc(ITABLE_GPA, i, BUF_GPA, 4, i + 1 < VQ_MAX_CHAIN ? F_NEXT : 0, i + 1);
	set_desc(DESC_GPA, 0, BUF_GPA, 4, F_NEXT, 1);
	set_desc(DESC_GPA, 1, ITABLE_GPA, 16 * VQ_MAX_CHAIN, F_INDIRECT, 0);
	offer(0);
	ck_assert_int_eq(vq_pop(&vq, &ch), -EINVAL);
}
END_TEST

START_TEST(buffer_outside_ram)
{
	set_desc(DESC_GPA, 0, RAM_SIZE, 1, 0, 0);
	offer(0);
	ck_assert_int_eq(vq_pop(&vq, &ch), -EINVAL);
}
END_TEST

START_TEST(buffer_in_mmio_hole)
{
	set_desc(DESC_GPA, 0, 0xd0000000ull, 4, F_WRITE, 0);
	offer(0);
	ck_assert_int_eq(vq_pop(&vq, &ch), -EINVAL);
}
END_TEST

START_TEST(buffer_straddles_ram_end)
{
	set_desc(DESC_GPA, 0, RAM_SIZE - 8, 16, F_WRITE, 0);
	offer(0);
	ck_assert_int_eq(vq_pop(&vq, &ch), -EINVAL);
}
END_TEST

START_TEST(buffer_ends_at_ram_end)
{
	set_desc(DESC_GPA, 0, RAM_SIZE - 16, 16, F_WRITE, 0);
	offer(0);
	ck_assert_int_eq(vq_pop(&vq, &ch), 1);
	ck_assert_ptr_eq(ch.in[0].base, ram + RAM_SIZE - 16);
}
END_TEST

START_TEST(buffer_gpa_len_overflow)
{
	set_desc(DESC_GPA, 0, 0xfffffffffffffff0ull, 0x20, 0, 0);
	offer(0);
	ck_assert_int_eq(vq_pop(&vq, &ch), -EINVAL);
}
END_TEST

START_TEST(zero_length_skipped)
{
	/* A zero-length buffer may point anywhere: it is never mapped. */
	set_desc(DESC_GPA, 0, BUF_GPA, 8, F_NEXT, 1);
	set_desc(DESC_GPA, 1, 0xfffffffffffff000ull, 0, F_NEXT, 2);
	set_desc(DESC_GPA, 2, BUF_GPA + 8, 8, F_WRITE, 0);
	offer(0);
	ck_assert_int_eq(vq_pop(&vq, &ch), 1);
	ck_assert_uint_eq(ch.n_out, 1);
	ck_assert_uint_eq(ch.n_in, 1);
}
END_TEST

START_TEST(indirect_len_not_multiple_of_16)
{
	set_desc(DESC_GPA, 0, ITABLE_GPA, 24, F_INDIRECT, 0);
	offer(0);
	ck_assert_int_eq(vq_pop(&vq, &ch), -EINVAL);
}
END_TEST

START_TEST(indirect_len_zero)
{
	set_desc(DESC_GPA, 0, ITABLE_GPA, 0, F_INDIRECT, 0);
	offer(0);
	ck_assert_int_eq(vq_pop(&vq, &ch), -EINVAL);
}
END_TEST

START_TEST(indirect_too_big)
{
	set_desc(DESC_GPA, 0, ITABLE_GPA, 16 * (VQ_MAX_CHAIN + 1), F_INDIRECT, 0);
	offer(0);
	ck_assert_int_eq(vq_pop(&vq, &ch), -EINVAL);
}
END_TEST

START_TEST(indirect_outside_ram)
{
	set_desc(DESC_GPA, 0, RAM_SIZE - 16, 32, F_INDIRECT, 0);
	offer(0);
	ck_assert_int_eq(vq_pop(&vq, &ch), -EINVAL);
}
END_TEST

START_TEST(indirect_nested)
{
	set_desc(ITABLE_GPA + 0x100, 0, BUF_GPA, 8, 0, 0);
	set_desc(ITABLE_GPA, 0, ITABLE_GPA + 0x100, 16, F_INDIRECT, 0);
	set_desc(DESC_GPA, 0, ITABLE_GPA, 16, F_INDIRECT, 0);
	offer(0);
	ck_assert_int_eq(vq_pop(&vq, &ch), -EINVAL);
}
END_TEST

START_TEST(indirect_with_next)
{
	set_desc(ITABLE_GPA, 0, BUF_GPA, 8, 0, 0);
	set_desc(DESC_GPA, 1, BUF_GPA, 8, F_WRITE, 0);
	set_desc(DESC_GPA, 0, ITABLE_GPA, 16, F_INDIRECT | F_NEXT, 1);
	offer(0);
	ck_assert_int_eq(vq_pop(&vq, &ch), -EINVAL);
}
END_TEST

START_TEST(writable_before_readable)
{
	set_desc(DESC_GPA, 0, BUF_GPA, 8, F_WRITE | F_NEXT, 1);
	set_desc(DESC_GPA, 1, BUF_GPA + 8, 8, 0, 0);
	offer(0);
	ck_assert_int_eq(vq_pop(&vq, &ch), -EINVAL);
}
END_TEST

START_TEST(avail_idx_too_far_ahead)
{
	set_desc(DESC_GPA, 0, BUF_GPA, 8, 0, 0);
	*avail_idx() = QSIZE + 1;
	ck_assert_int_eq(vq_pop(&vq, &ch), -EINVAL);
}
END_TEST

START_TEST(avail_idx_exactly_size_ahead)
{
	unsigned i;

	for (i = 0; i < QSIZE; i++) {
		set_desc(DESC_GPA, i, BUF_GPA, 8, 0, 0);
		offer(i);
	}
	for (i = 0; i < QSIZE; i++)
		ck_assert_int_eq(vq_pop(&vq, &ch), 1);
	ck_assert_int_eq(vq_pop(&vq, &ch), 0);
}
END_TEST

START_TEST(validate_rings_outside_ram)
{
	vq.desc_gpa = RAM_SIZE - 16 * QSIZE + 16;
	ck_assert_int_eq(vq_validate(&vq), -EINVAL);
	vq.desc_gpa = DESC_GPA;
	vq.avail_gpa = RAM_SIZE - 4;
	ck_assert_int_eq(vq_validate(&vq), -EINVAL);
	vq.avail_gpa = AVAIL_GPA;
	vq.used_gpa = RAM_SIZE;
	ck_assert_int_eq(vq_validate(&vq), -EINVAL);
	vq.used_gpa = 0xfffffffffffffffcull;
	ck_assert_int_eq(vq_validate(&vq), -EINVAL);
	vq.used_gpa = USED_GPA;
	ck_assert_int_eq(vq_validate(&vq), 0);
}
END_TEST

START_TEST(validate_misaligned)
{
	vq.desc_gpa = DESC_GPA + 8;
	ck_assert_int_eq(vq_validate(&vq), -EINVAL);
	vq.desc_gpa = DESC_GPA;
	vq.avail_gpa = AVAIL_GPA + 1;
	ck_assert_int_eq(vq_validate(&vq), -EINVAL);
	vq.avail_gpa = AVAIL_GPA + 2;
	ck_assert_int_eq(vq_validate(&vq), 0);
	vq.used_gpa = USED_GPA + 2;
	ck_assert_int_eq(vq_validate(&vq), -EINVAL);
}
END_TEST

START_TEST(validate_sizes)
{
	vq.size = 12;
	ck_assert_int_eq(vq_validate(&vq), -EINVAL);
	vq.size = 0;
	ck_assert_int_eq(vq_validate(&vq), -EINVAL);
	vq.size = 2 * VQ_MAX_SIZE;
	ck_assert_int_eq(vq_validate(&vq), -EINVAL);
	vq.size = 1;
	ck_assert_int_eq(vq_validate(&vq), 0);
	vq.size = VQ_MAX_SIZE;
	ck_assert_int_eq(vq_validate(&vq), 0);
}
END_TEST

START_TEST(push_fills_used_ring)
{
	uint32_t id, len;

	ck_assert_int_eq(vq_push(&vq, 9, 1234), 0);
	ck_assert_int_eq(vq_push(&vq, 3, 0), 0);
	ck_assert_uint_eq(used_idx(), 2);
	ck_assert_uint_eq(vq.used_idx, 2);
	used_elem(0, &id, &len);
	ck_assert_uint_eq(id, 9);
	ck_assert_uint_eq(len, 1234);
	used_elem(1, &id, &len);
	ck_assert_uint_eq(id, 3);
	ck_assert_uint_eq(len, 0);
	/* An id that is no descriptor is refused, the ring is untouched. */
	ck_assert_int_eq(vq_push(&vq, QSIZE, 1), -EINVAL);
	ck_assert_uint_eq(used_idx(), 2);
}
END_TEST

START_TEST(no_interrupt_flag)
{
	ck_assert(vq_should_notify(&vq));
	*avail_flags() = 1;
	ck_assert(!vq_should_notify(&vq));
	*avail_flags() = 0;
	ck_assert(vq_should_notify(&vq));
	vq.ready = false;
	ck_assert(!vq_should_notify(&vq));
}
END_TEST

START_TEST(not_ready_pops_nothing)
{
	set_desc(DESC_GPA, 0, BUF_GPA, 8, 0, 0);
	offer(0);
	vq.ready = false;
	ck_assert_int_eq(vq_pop(&vq, &ch), 0);
}
END_TEST

START_TEST(copy_across_buffers)
{
	uint8_t a[5], b[3], c[8], out[16];
	struct vq_iov iov[3] = { { a, 5 }, { b, 3 }, { c, 8 } };
	unsigned i;

	for (i = 0; i < 16; i++)
		out[i] = i;
	ck_assert_uint_eq(vq_copy_to(iov, 3, 0, out, 16), 16);
	ck_assert_uint_eq(b[0], 5);
	ck_assert_uint_eq(c[7], 15);
	memset(out, 0, sizeof(out));
	ck_assert_uint_eq(vq_copy_from(iov, 3, 4, out, 6), 6);
	for (i = 0; i < 6; i++)
		ck_assert_uint_eq(out[i], 4 + i);
	/* Past the end: only what exists is copied. */
	ck_assert_uint_eq(vq_copy_from(iov, 3, 14, out, 10), 2);
	ck_assert_uint_eq(vq_copy_from(iov, 3, 16, out, 10), 0);
	ck_assert_uint_eq(vq_copy_to(iov, 3, 7, "xyz", 3), 3);
	ck_assert_uint_eq(b[2], 'x');
	ck_assert_uint_eq(c[0], 'y');
}
END_TEST

Suite *virtqueue_suite(void)
{
	Suite *s = suite_create("virtqueue");
	TCase *t = tcase_create("split ring");

	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, pop_empty);
	tcase_add_test(t, pop_out_then_in);
	tcase_add_test(t, pop_scattered_chain);
	tcase_add_test(t, pop_two_chains_in_order);
	tcase_add_test(t, pop_indirect);
	tcase_add_test(t, pop_direct_then_indirect);
	tcase_add_test(t, wrap_avail_and_used_at_65535);
	tcase_add_test(t, self_loop);
	tcase_add_test(t, longer_loop);
	tcase_add_test(t, loop_in_indirect_table);
	tcase_add_test(t, next_out_of_range);
	tcase_add_test(t, indirect_next_out_of_range);
	tcase_add_test(t, head_out_of_range);
	tcase_add_test(t, chain_of_max_length);
	tcase_add_test(t, chain_too_long);
	tcase_add_test(t, chain_too_long_through_indirect);
	tcase_add_test(t, buffer_outside_ram);
	tcase_add_test(t, buffer_in_mmio_hole);
	tcase_add_test(t, buffer_straddles_ram_end);
	tcase_add_test(t, buffer_ends_at_ram_end);
	tcase_add_test(t, buffer_gpa_len_overflow);
	tcase_add_test(t, zero_length_skipped);
	tcase_add_test(t, indirect_len_not_multiple_of_16);
	tcase_add_test(t, indirect_len_zero);
	tcase_add_test(t, indirect_too_big);
	tcase_add_test(t, indirect_outside_ram);
	tcase_add_test(t, indirect_nested);
	tcase_add_test(t, indirect_with_next);
	tcase_add_test(t, writable_before_readable);
	tcase_add_test(t, avail_idx_too_far_ahead);
	tcase_add_test(t, avail_idx_exactly_size_ahead);
	tcase_add_test(t, validate_rings_outside_ram);
	tcase_add_test(t, validate_misaligned);
	tcase_add_test(t, validate_sizes);
	tcase_add_test(t, push_fills_used_ring);
	tcase_add_test(t, no_interrupt_flag);
	tcase_add_test(t, not_ready_pops_nothing);
	tcase_add_test(t, copy_across_buffers);
	suite_add_tcase(s, t);
	return s;
}
