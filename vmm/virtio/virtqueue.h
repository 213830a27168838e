/*
 * virtqueue: the device side of a virtio 1.x split virtqueue, walked in
 * guest memory that the guest controls. Every descriptor is validated: table
 * index in range, chains bounded (VQ_MAX_CHAIN) and loop-free, indirect
 * tables inside RAM with a sane length and no nesting, and every buffer
 * resolved through gmem_ptr() with overflow-safe arithmetic. A malformed
 * queue is reported as -EINVAL; the device then marks itself broken.
 *
 * Not thread-safe: each queue is served by one thread (the event loop).
 */
#ifndef HUSK_VIRTQUEUE_H
#define HUSK_VIRTQUEUE_H

#include <stdbool.h>
#include <stdint.h>

#include "machine/guest_mem.h"

#define VQ_MAX_SIZE 1024	/* largest queue size a device offers */
#define VQ_MAX_CHAIN 64		/* longest descriptor chain accepted */

/* One validated buffer of a chain, already mapped to host memory. */
struct vq_iov {
	uint8_t *base;
	uint32_t len;
};

struct vq_chain {
	uint16_t head;			/* id to hand back to vq_push() */
	unsigned n_out, n_in;		/* device-readable, then device-writable */
	struct vq_iov out[VQ_MAX_CHAIN];
	struct vq_iov in[VQ_MAX_CHAIN];
	uint64_t out_len, in_len;	/* byte totals */
};

struct virtqueue {
	const struct guest_mem *mem;
	uint16_t size;			/* negotiated queue size (power of 2) */
	bool ready;
	uint64_t desc_gpa, avail_gpa, used_gpa;
	uint16_t last_avail;		/* next avail ring slot to consume */
	uint16_t used_idx;		/* next used ring slot to fill */
};

/* Check the ring addresses and size once the driver sets QueueReady. */
int vq_validate(const struct virtqueue *vq);
/*
 * Take the next available chain: 1 popped, 0 queue empty, -EINVAL malformed
 * (husk_lasterr() says how).
 */
int vq_pop(struct virtqueue *vq, struct vq_chain *c);
/* Return a chain to the driver with written bytes in its writable part. */
int vq_push(struct virtqueue *vq, uint16_t head, uint32_t written);
/* Whether the driver wants an interrupt (VRING_AVAIL_F_NO_INTERRUPT clear). */
bool vq_should_notify(const struct virtqueue *vq);

/* Gather/scatter helpers over a chain's readable or writable buffers. */
uint64_t vq_copy_from(const struct vq_iov *iov, unsigned n, uint64_t off, void *dst,
		      uint64_t len);
uint64_t vq_copy_to(const struct vq_iov *iov, unsigned n, uint64_t off, const void *src,
		    uint64_t len);

#endif
