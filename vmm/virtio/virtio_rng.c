/*
 * virtio_rng: entropy device. See virtio_rng.h.
 *
 * One queue of device-writable buffers, each filled from getrandom(). A
 * request is capped (RNG_MAX_PER_CHAIN) so a guest posting gigabyte buffers
 * cannot park the event loop; it gets what was written and asks again.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "lib/util.h"
#include "virtio/virtio_mmio.h"
#include "virtio/virtio_rng.h"

#define RNG_QUEUE_SIZE 64
#define RNG_MAX_PER_CHAIN (64u << 10)

struct rng {
	struct virtio_dev dev;
	struct vq_chain chain;
};

/* Fill len bytes at p; returns how many were filled. */
static uint32_t fill(uint8_t *p, uint32_t len)
{
	uint32_t done = 0;
	ssize_t r;

	while (done < len) {
		r = getrandom(p + done, len - done, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		done += r;
	}
	return done;
}

static void rng_notify(struct virtio_dev *d, unsigned q)
{
	struct rng *r = d->priv;
	struct vq_chain *c = &r->chain;
	struct virtqueue *vq = &d->vq[q];
	bool pushed = false;
	uint32_t written, room, k;
	unsigned i;
	int ret;

	while ((ret = vq_pop(vq, c)) > 0) {
		written = 0;
		/* Readable buffers mean nothing to this device: ignore them. */
		for (i = 0; i < c->n_in && written < RNG_MAX_PER_CHAIN; i++) {
			room = RNG_MAX_PER_CHAIN - written;
			k = fill(c->in[i].base, c->in[i].len < room ? c->in[i].len : room);
			written += k;
			if (k < c->in[i].len)
				break;
		}
		if (vq_push(vq, c->head, written)) {
			virtio_set_broken(d, husk_lasterr());
			return;
		}
		pushed = true;
	}
	if (ret < 0)
		virtio_set_broken(d, husk_lasterr());
	if (pushed)
		virtio_notify_used(d, q);
}

static void rng_destroy(struct virtio_dev *d)
{
	free(d->priv);
}

static const struct virtio_dev_ops rng_ops = {
	.name = "rng",
	.device_id = VIRTIO_ID_RNG,
	.features = 0,
	.num_queues = 1,
	.queue_max = RNG_QUEUE_SIZE,
	.config_len = 0,
	.notify = rng_notify,
	.destroy = rng_destroy,
};

int virtio_rng_create(struct vm *vm)
{
	struct rng *r = calloc(1, sizeof(*r));
	int err;

	if (!r)
		return husk_seterr(ENOMEM, "out of memory for the rng device");
	err = virtio_mmio_add(vm, &r->dev, &rng_ops, r);
	if (err)
		free(r);
	return err;
}
