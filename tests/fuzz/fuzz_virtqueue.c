/*
 * fuzz_virtqueue: libFuzzer target for the split virtqueue walker.
 *
 * The input is a small header (queue size, ring addresses, a script of
 * device actions) followed by the initial contents of a 64 KiB malloc'd
 * "guest RAM". The harness validates the queue, then pops chains, copies
 * through them, pushes them back and lets the "guest" scribble on RAM
 * between pops, checking that every mapped buffer lies inside RAM and that
 * the chain bookkeeping is consistent.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "machine/guest_mem.h"
#include "virtio/virtqueue.h"

#define RAM_SIZE (64u * 1024)
#define MAX_STEPS 64

struct in {
	const uint8_t *p;
	size_t left;
};

static uint64_t take(struct in *in, unsigned n)
{
	uint64_t v = 0;
	unsigned i;

	for (i = 0; i < n && in->left; i++, in->p++, in->left--)
		v |= (uint64_t)*in->p << (8 * i);
	return v;
}

/* A ring address: mostly inside RAM and aligned, sometimes anything. */
static uint64_t ring_gpa(struct in *in, unsigned align)
{
	uint8_t mode = take(in, 1);
	uint64_t v = take(in, 2);

	if (mode & 0x80)
		return take(in, 8);
	return (v % RAM_SIZE) & ~(uint64_t)(align - 1);
}

static void check_iov(const uint8_t *ram, const struct vq_iov *iov, unsigned n,
		      uint64_t total)
{
	uint64_t sum = 0;
	unsigned i;

	for (i = 0; i < n; i++) {
		if (iov[i].base < ram || iov[i].len == 0 ||
		    (uint64_t)(iov[i].base - ram) + iov[i].len > RAM_SIZE)
			abort();
		sum += iov[i].len;
	}
	if (sum != total)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct vq_chain ch;
	static uint8_t scratch[4096];
	struct in in = { data, size };
	struct guest_mem gm;
	struct virtqueue vq;
	uint8_t *ram, script[MAX_STEPS];
	unsigned steps, i;
	size_t script_len;

	if (size < 16)
		return 0;
	ram = calloc(1, RAM_SIZE);
	if (!ram)
		return 0;
	gmem_init_buffer(&gm, ram, RAM_SIZE);
	memset(&vq, 0, sizeof(vq));
	vq.mem = &gm;
	/* Mostly powers of two up to 256; occasionally a raw 16-bit size. */
	i = take(&in, 1);
	vq.size = (i & 0x80) ? (uint16_t)take(&in, 2) : (uint16_t)(1u << (i % 9));
	vq.desc_gpa = ring_gpa(&in, 16);
	vq.avail_gpa = ring_gpa(&in, 2);
	vq.used_gpa = ring_gpa(&in, 4);
	vq.last_avail = take(&in, 2);
	vq.used_idx = take(&in, 2);
	vq.ready = true;
	script_len = take(&in, 1) % MAX_STEPS;
	memset(script, 0, sizeof(script));
	for (i = 0; i < script_len; i++)
		script[i] = take(&in, 1);
	memcpy(ram, in.p, in.left < RAM_SIZE ? in.left : RAM_SIZE);

	if (vq_validate(&vq))
		goto out;
	steps = script_len ? script_len : 8;
	for (i = 0; i < steps; i++) {
		uint8_t op = script[i];
		int r;

		(void)vq_should_notify(&vq);
		r = vq_pop(&vq, &ch);
		if (r < 0)
			break;
		if (r == 0) {
			/* Guest "publishes" more: bump avail idx by op. */
			uint16_t idx;

			memcpy(&idx, ram + vq.avail_gpa + 2, 2);
			idx += op & 7;
			memcpy(ram + vq.avail_gpa + 2, &idx, 2);
			continue;
		}
		if (ch.n_out > VQ_MAX_CHAIN || ch.n_in > VQ_MAX_CHAIN ||
		    ch.n_out + ch.n_in > VQ_MAX_CHAIN || ch.head >= vq.size)
			abort();
		check_iov(ram, ch.out, ch.n_out, ch.out_len);
		check_iov(ram, ch.in, ch.n_in, ch.in_len);
		/* Device reads the request and writes a response. */
		(void)vq_copy_from(ch.out, ch.n_out, op, scratch, sizeof(scratch));
		if (vq_copy_to(ch.in, ch.n_in, op & 0xf, scratch, sizeof(scratch)) >
		    sizeof(scratch))
			abort();
		if (vq_push(&vq, ch.head, (uint32_t)(ch.in_len < 4096 ? ch.in_len : 4096)))
			abort();	/* head came from a valid chain: must be accepted */
		/* The guest rewrites a descriptor byte between notifications. */
		if (op & 0x80)
			ram[(vq.desc_gpa + op) % RAM_SIZE] ^= op;
	}
out:
	free(ram);
	return 0;
}
