/*
 * virtqueue: device side of a virtio 1.x split ring. See virtqueue.h.
 *
 * The rings live in guest RAM and the guest may rewrite them at any moment,
 * so each descriptor is copied out once and only the copy is trusted; every
 * address is resolved with gmem_ptr() on each use (guest RAM never moves,
 * and this keeps no host pointer that a later check could forget).
 */
#include <errno.h>
#include <string.h>

#include "lib/util.h"
#include "virtio/virtqueue.h"

#define VRING_DESC_F_NEXT 1
#define VRING_DESC_F_WRITE 2
#define VRING_DESC_F_INDIRECT 4
#define VRING_AVAIL_F_NO_INTERRUPT 1

#define DESC_SIZE 16u
#define DESC_ALIGN 16u
#define AVAIL_ALIGN 2u
#define USED_ALIGN 4u

struct vring_desc {
	uint64_t addr;
	uint32_t len;
	uint16_t flags;
	uint16_t next;
};

struct vring_avail {
	uint16_t flags;
	uint16_t idx;
	uint16_t ring[];
};

struct vring_used_elem {
	uint32_t id;
	uint32_t len;
};

struct vring_used {
	uint16_t flags;
	uint16_t idx;
	struct vring_used_elem ring[];
};

/* Ring sizes in bytes, including the event-index word after each ring. */
static uint64_t desc_bytes(uint16_t size)
{
	return (uint64_t)size * DESC_SIZE;
}

static uint64_t avail_bytes(uint16_t size)
{
	return 6 + 2 * (uint64_t)size;
}

static uint64_t used_bytes(uint16_t size)
{
	return 6 + 8 * (uint64_t)size;
}

int vq_validate(const struct virtqueue *vq)
{
	uint16_t n = vq->size;

	if (!vq->mem)
		return husk_seterr(EINVAL, "queue has no guest memory");
	if (n == 0 || n > VQ_MAX_SIZE || (n & (n - 1)))
		return husk_seterr(EINVAL, "queue size %u is not a power of 2 in 1..%u", n,
				   VQ_MAX_SIZE);
	if (vq->desc_gpa % DESC_ALIGN || vq->avail_gpa % AVAIL_ALIGN ||
	    vq->used_gpa % USED_ALIGN)
		return husk_seterr(EINVAL, "queue rings misaligned (desc 0x%llx, avail 0x%llx, "
				   "used 0x%llx)", (unsigned long long)vq->desc_gpa,
				   (unsigned long long)vq->avail_gpa,
				   (unsigned long long)vq->used_gpa);
	if (!gmem_ptr(vq->mem, vq->desc_gpa, desc_bytes(n)))
		return husk_seterr(EINVAL, "descriptor table 0x%llx (%llu bytes) is not in RAM",
				   (unsigned long long)vq->desc_gpa,
				   (unsigned long long)desc_bytes(n));
	if (!gmem_ptr(vq->mem, vq->avail_gpa, avail_bytes(n)))
		return husk_seterr(EINVAL, "avail ring 0x%llx is not in RAM",
				   (unsigned long long)vq->avail_gpa);
	if (!gmem_ptr(vq->mem, vq->used_gpa, used_bytes(n)))
		return husk_seterr(EINVAL, "used ring 0x%llx is not in RAM",
				   (unsigned long long)vq->used_gpa);
	return 0;
}

/* Walk state for one chain: which table we are in and what was seen. */
struct walk {
	const struct vring_desc *table;	/* host view of the current table */
	uint32_t tsize;			/* entries in it */
	bool indirect;
	unsigned count;			/* buffer descriptors so far */
	uint64_t seen[VQ_MAX_SIZE / 64];	/* loop detection, per table */
};

static void seen_reset(struct walk *w)
{
	memset(w->seen, 0, sizeof(w->seen));
}

/* Mark index i visited; false if it already was (a loop). */
static bool seen_mark(struct walk *w, uint32_t i)
{
	uint64_t bit = 1ull << (i % 64);

	if (w->seen[i / 64] & bit)
		return false;
	w->seen[i / 64] |= bit;
	return true;
}

static int enter_indirect(const struct virtqueue *vq, struct walk *w,
			  const struct vring_desc *d)
{
	uint32_t n = d->len / DESC_SIZE;
	const void *t;

	if (w->indirect)
		return husk_seterr(EINVAL, "nested indirect descriptor table");
	if (d->flags & VRING_DESC_F_NEXT)
		return husk_seterr(EINVAL, "indirect descriptor with the NEXT flag");
	if (d->len == 0 || d->len % DESC_SIZE)
		return husk_seterr(EINVAL, "indirect table length %u is not a non-zero "
				   "multiple of %u", d->len, DESC_SIZE);
	if (n > VQ_MAX_CHAIN)
		return husk_seterr(EINVAL, "indirect table of %u entries (limit %d)", n,
				   VQ_MAX_CHAIN);
	if (d->addr % DESC_ALIGN)
		return husk_seterr(EINVAL, "indirect table 0x%llx misaligned",
				   (unsigned long long)d->addr);
	t = gmem_ptr(vq->mem, d->addr, d->len);
	if (!t)
		return husk_seterr(EINVAL, "indirect table 0x%llx (%u bytes) is not in RAM",
				   (unsigned long long)d->addr, d->len);
	w->table = t;
	w->tsize = n;
	w->indirect = true;
	seen_reset(w);
	return 0;
}

static int add_buffer(const struct virtqueue *vq, struct vq_chain *c,
		      const struct vring_desc *d)
{
	struct vq_iov *iov;
	void *p;

	if (!(d->flags & VRING_DESC_F_WRITE) && c->n_in)
		return husk_seterr(EINVAL, "readable descriptor after a writable one");
	if (d->len == 0)
		return 0;	/* allowed, carries nothing */
	p = gmem_ptr(vq->mem, d->addr, d->len);
	if (!p)
		return husk_seterr(EINVAL, "buffer 0x%llx (%u bytes) is not in RAM",
				   (unsigned long long)d->addr, d->len);
	if (d->flags & VRING_DESC_F_WRITE) {
		iov = &c->in[c->n_in++];
		c->in_len += d->len;
	} else {
		iov = &c->out[c->n_out++];
		c->out_len += d->len;
	}
	iov->base = p;
	iov->len = d->len;
	return 0;
}

static int walk_chain(const struct virtqueue *vq, struct vq_chain *c, uint16_t head)
{
	struct walk w;
	struct vring_desc d;
	uint32_t i = head;
	int err;

	w.table = gmem_ptr(vq->mem, vq->desc_gpa, desc_bytes(vq->size));
	if (!w.table)
		return husk_seterr(EINVAL, "descriptor table is not in RAM");
	w.tsize = vq->size;
	w.indirect = false;
	w.count = 0;
	seen_reset(&w);
	if (i >= w.tsize)
		return husk_seterr(EINVAL, "chain head %u out of range (size %u)", i, w.tsize);
	for (;;) {
		if (!seen_mark(&w, i))
			return husk_seterr(EINVAL, "descriptor loop at index %u", i);
		/* One copy: the guest may change the descriptor under us. */
		memcpy(&d, &w.table[i], sizeof(d));
		if (d.flags & VRING_DESC_F_INDIRECT) {
			err = enter_indirect(vq, &w, &d);
			if (err)
				return err;
			i = 0;
			continue;
		}
		if (++w.count > VQ_MAX_CHAIN)
			return husk_seterr(EINVAL, "descriptor chain longer than %d", VQ_MAX_CHAIN);
		err = add_buffer(vq, c, &d);
		if (err)
			return err;
		if (!(d.flags & VRING_DESC_F_NEXT))
			return 0;
		i = d.next;
		if (i >= w.tsize)
			return husk_seterr(EINVAL, "next index %u out of range (table of %u)", i,
					   w.tsize);
	}
}

int vq_pop(struct virtqueue *vq, struct vq_chain *c)
{
	struct vring_avail *avail;
	uint16_t idx, head;
	int err;

	if (!vq->ready)
		return 0;
	avail = gmem_ptr(vq->mem, vq->avail_gpa, avail_bytes(vq->size));
	if (!avail)
		return husk_seterr(EINVAL, "avail ring is not in RAM");
	/* Acquire: the ring entries the driver wrote before idx are visible after. */
	idx = __atomic_load_n(&avail->idx, __ATOMIC_ACQUIRE);
	if (idx == vq->last_avail)
		return 0;
	if ((uint16_t)(idx - vq->last_avail) > vq->size)
		return husk_seterr(EINVAL, "avail idx %u is more than %u ahead of %u", idx,
				   vq->size, vq->last_avail);
	head = __atomic_load_n(&avail->ring[vq->last_avail & (vq->size - 1)],
			       __ATOMIC_RELAXED);
	c->head = head;
	c->n_out = c->n_in = 0;
	c->out_len = c->in_len = 0;
	err = walk_chain(vq, c, head);
	if (err)
		return err;
	vq->last_avail++;
	return 1;
}

int vq_push(struct virtqueue *vq, uint16_t head, uint32_t written)
{
	struct vring_used *used;
	struct vring_used_elem *e;

	if (!vq->ready)
		return husk_seterr(EINVAL, "queue is not ready");
	if (head >= vq->size)
		return husk_seterr(EINVAL, "used id %u out of range", head);
	used = gmem_ptr(vq->mem, vq->used_gpa, used_bytes(vq->size));
	if (!used)
		return husk_seterr(EINVAL, "used ring is not in RAM");
	e = &used->ring[vq->used_idx & (vq->size - 1)];
	__atomic_store_n(&e->id, head, __ATOMIC_RELAXED);
	__atomic_store_n(&e->len, written, __ATOMIC_RELAXED);
	vq->used_idx++;
	/* Release: the element is visible before the index that publishes it. */
	__atomic_store_n(&used->idx, vq->used_idx, __ATOMIC_RELEASE);
	return 0;
}

bool vq_should_notify(const struct virtqueue *vq)
{
	struct vring_avail *avail;

	if (!vq->ready)
		return false;
	avail = gmem_ptr(vq->mem, vq->avail_gpa, avail_bytes(vq->size));
	if (!avail)
		return true;
	/*
	 * Full barrier: our used->idx store must be visible before we read the
	 * flag, or we could miss a driver that just re-enabled interrupts.
	 */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	return !(__atomic_load_n(&avail->flags, __ATOMIC_RELAXED) & VRING_AVAIL_F_NO_INTERRUPT);
}

uint64_t vq_copy_from(const struct vq_iov *iov, unsigned n, uint64_t off, void *dst,
		      uint64_t len)
{
	uint8_t *out = dst;
	uint64_t done = 0, k;
	unsigned i;

	for (i = 0; i < n && done < len; i++) {
		if (off >= iov[i].len) {
			off -= iov[i].len;
			continue;
		}
		k = iov[i].len - off;
		if (k > len - done)
			k = len - done;
		memcpy(out + done, iov[i].base + off, k);
		done += k;
		off = 0;
	}
	return done;
}

uint64_t vq_copy_to(const struct vq_iov *iov, unsigned n, uint64_t off, const void *src,
		    uint64_t len)
{
	const uint8_t *in = src;
	uint64_t done = 0, k;
	unsigned i;

	for (i = 0; i < n && done < len; i++) {
		if (off >= iov[i].len) {
			off -= iov[i].len;
			continue;
		}
		k = iov[i].len - off;
		if (k > len - done)
			k = len - done;
		memcpy(iov[i].base + off, in + done, k);
		done += k;
		off = 0;
	}
	return done;
}
