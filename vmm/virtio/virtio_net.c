/*
 * virtio_net: a virtio-net device backed by a tap fd. See virtio_net.h.
 *
 * The guest's side of the wire puts a 12-byte virtio_net_hdr_v1 before
 * every frame; the tap's side carries bare Ethernet frames (vmm/net/tap.h: no
 * IFF_VNET_HDR). The header is the device model's business alone.
 *
 * Transmit: each chain on the tx queue is one frame behind the guest's
 * header. The header is skipped, never read: with no offloads negotiated
 * it has nothing to say, and whatever GSO or checksum flags a hostile guest
 * puts there cannot reach the host kernel, which only ever sees the frame.
 * Chains of impossible size are dropped and counted.
 *
 * Receive: the tap is polled (EPOLLIN) only while the guest has receive
 * buffers. One chain is popped and held, then readv() fills it directly
 * from byte 12 on, with a scratch buffer behind it, so a frame longer than
 * the guest's buffer is detected and dropped instead of silently
 * truncated; the held chain then waits for the next frame. The header
 * before the frame is written by husk: all zero but num_buffers = 1. When
 * the rx ring is empty the tap is dropped from the event loop until the
 * guest posts buffers and notifies: no busy loop, no queue in husk.
 *
 * All queue work runs on the event loop under d->lock; the transport takes
 * it around notify/reset, the tap callback takes it itself.
 */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/uio.h>
#include <unistd.h>

#include "machine/evloop.h"
#include "net/tap.h"
#include "lib/util.h"
#include "virtio/virtio_mmio.h"
#include "virtio/virtio_net.h"
#include "machine/vm.h"

#define VIRTIO_NET_F_MAC 5
#define VIRTIO_NET_F_STATUS 16
#define VIRTIO_NET_S_LINK_UP 1

#define NET_RX 0
#define NET_TX 1
#define NET_QUEUE_SIZE 256
#define NET_HDR_LEN 12			/* virtio_net_hdr_v1, guest side only */
#define NET_NUM_BUFFERS_OFF 10		/* le16 num_buffers in virtio_net_hdr_v1 */
/* A frame: at least an Ethernet header, at most a 64 KiB IP packet. */
#define NET_ETH_MIN 14
#define NET_ETH_MAX 65538
/* The same with the guest's header in front, as chains carry them. */
#define NET_FRAME_MIN (NET_HDR_LEN + NET_ETH_MIN)
#define NET_FRAME_MAX (NET_HDR_LEN + NET_ETH_MAX)
/* Frames per tap callback, so one busy tap cannot starve the other devices. */
#define NET_RX_BUDGET 64
#define NET_REPORTS 3

struct net_config {
	uint8_t mac[6];
	uint16_t status;
} __attribute__((packed));

struct net {
	struct virtio_dev dev;
	int fd;
	struct net_config config;
	bool polling;			/* fd registered with the loop for EPOLLIN */
	bool rx_held;			/* rx_chain popped and waiting for a frame */
	unsigned errors_reported;
	struct virtio_net_stats st;
	uint8_t *scratch;		/* NET_ETH_MAX: tail that catches overlong frames */
	struct vq_chain rx_chain, tx_chain;	/* big: not on the loop's stack */
	struct iovec iov[VQ_MAX_CHAIN + 1];
};

static void net_report(struct net *n, const char *what, int err)
{
	if (n->errors_reported++ < NET_REPORTS || husk_verbose)
		husk_msg("virtio-net: %s: %s", what, strerror(err));
}

/* What the guest finds before each received frame. */
static const uint8_t rx_hdr[NET_HDR_LEN] = { [NET_NUM_BUFFERS_OFF] = 1 };

static void net_read_config(struct virtio_dev *d, uint32_t off, void *data, unsigned len)
{
	struct net *n = d->priv;

	memcpy(data, (uint8_t *)&n->config + off, len);
}

static void tap_cb(void *arg, uint32_t events);

/* Start or stop watching the tap for frames; d->lock held. */
static void rx_set_polling(struct net *n, bool on)
{
	struct evloop *el = &n->dev.vm->loop;
	int err;

	if (n->polling == on)
		return;
	/* A VM without an event loop (unit tests) is served from notify() only. */
	if (!el->inited) {
		n->polling = on;
		return;
	}
	err = on ? evloop_add(el, n->fd, EPOLLIN, tap_cb, n) : evloop_del(el, n->fd);
	if (err) {
		husk_msg("virtio-net: %s", husk_lasterr());
		return;
	}
	n->polling = on;
}

static bool rx_ready(const struct virtio_dev *d)
{
	return d->activated && !d->broken && (d->status & VIRTIO_STATUS_DRIVER_OK) &&
	       d->vq[NET_RX].ready;
}

/*
 * iovecs for a chain's buffers (v, n) from byte skip on, at most cap bytes
 * (their total in *len): the frame behind the guest's header, wherever the
 * descriptor boundaries fall.
 */
static unsigned chain_iov(const struct vq_iov *v, unsigned n, uint64_t skip, uint64_t cap,
			  struct iovec *out, uint64_t *len)
{
	unsigned i, k = 0;
	uint64_t take;

	*len = 0;
	for (i = 0; i < n && *len < cap; i++) {
		if (skip >= v[i].len) {
			skip -= v[i].len;
			continue;
		}
		take = v[i].len - skip;
		if (take > cap - *len)
			take = cap - *len;
		out[k].iov_base = v[i].base + skip;
		out[k].iov_len = take;
		k++;
		*len += take;
		skip = 0;
	}
	return k;
}

/* Deliver up to NET_RX_BUDGET frames from the tap; d->lock held. */
static void rx_process(struct net *n)
{
	struct virtio_dev *d = &n->dev;
	struct virtqueue *vq = &d->vq[NET_RX];
	struct vq_chain *c = &n->rx_chain;
	unsigned budget, k;
	uint64_t room;
	bool pushed = false;
	ssize_t r;
	int ret;

	if (!rx_ready(d)) {
		rx_set_polling(n, false);
		return;
	}
	for (budget = NET_RX_BUDGET; budget; budget--) {
		if (!n->rx_held) {
			ret = vq_pop(vq, c);
			if (ret < 0) {
				virtio_set_broken(d, husk_lasterr());
				rx_set_polling(n, false);
				goto out;
			}
			if (ret == 0) {
				/* Out of buffers: the guest's next notify resumes us. */
				rx_set_polling(n, false);
				goto out;
			}
			n->rx_held = true;
		}
		if (c->in_len < NET_HDR_LEN) {
			/* Cannot even hold a header: give it back unused. */
			n->rx_held = false;
			if (vq_push(vq, c->head, 0))
				goto broken;
			pushed = true;
			continue;
		}
		/*
		 * The frame goes after the header's 12 bytes, wherever the
		 * guest's descriptors put them. Only NET_ETH_MAX bytes of its
		 * buffers are offered, so a guest describing gigabytes cannot
		 * push readv() past SSIZE_MAX.
		 */
		k = chain_iov(c->in, c->n_in, NET_HDR_LEN, NET_ETH_MAX, n->iov, &room);
		n->iov[k].iov_base = n->scratch;
		n->iov[k++].iov_len = NET_ETH_MAX;
		r = readv(n->fd, n->iov, k);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {
				rx_set_polling(n, true);
				goto out;
			}
			/* Persistent tap trouble: wait for the guest rather than spin. */
			net_report(n, "tap read", errno);
			rx_set_polling(n, false);
			goto out;
		}
		if (r < NET_ETH_MIN || (uint64_t)r > room) {
			/* Runt, or longer than the guest's buffer: keep the chain. */
			n->st.rx_dropped++;
			continue;
		}
		/* Without MRG_RXBUF num_buffers is 1; nothing else is offloaded. */
		vq_copy_to(c->in, c->n_in, 0, rx_hdr, sizeof(rx_hdr));
		n->rx_held = false;
		if (vq_push(vq, c->head, NET_HDR_LEN + r))
			goto broken;
		pushed = true;
		n->st.rx_frames++;
		n->st.rx_bytes += r;
	}
	/* Budget spent with frames possibly left: level-triggered epoll calls again. */
	rx_set_polling(n, true);
	goto out;
broken:
	virtio_set_broken(d, husk_lasterr());
	rx_set_polling(n, false);
out:
	if (pushed)
		virtio_notify_used(d, NET_RX);
}

static void tap_cb(void *arg, uint32_t events)
{
	struct net *n = arg;

	pthread_mutex_lock(&n->dev.lock);
	rx_process(n);
	pthread_mutex_unlock(&n->dev.lock);
}

static void tx_process(struct net *n)
{
	struct virtio_dev *d = &n->dev;
	struct virtqueue *vq = &d->vq[NET_TX];
	struct vq_chain *c = &n->tx_chain;
	bool pushed = false;
	uint64_t len;
	unsigned k;
	ssize_t r;
	int ret;

	while ((ret = vq_pop(vq, c)) > 0) {
		if (c->out_len < NET_FRAME_MIN || c->out_len > NET_FRAME_MAX) {
			n->st.tx_dropped++;
		} else {
			/* The frame only: the guest's header stays behind. */
			k = chain_iov(c->out, c->n_out, NET_HDR_LEN, NET_ETH_MAX, n->iov, &len);
			do
				r = writev(n->fd, n->iov, k);
			while (r < 0 && errno == EINTR);
			if (r < 0) {
				/* Full or down: a NIC drops too. */
				if (errno != EAGAIN && errno != ENOBUFS)
					net_report(n, "tap write", errno);
				n->st.tx_dropped++;
			} else {
				n->st.tx_frames++;
				n->st.tx_bytes += len;
			}
		}
		/* Transmit buffers are read-only: nothing written back. */
		if (vq_push(vq, c->head, 0)) {
			virtio_set_broken(d, husk_lasterr());
			return;
		}
		pushed = true;
	}
	if (ret < 0)
		virtio_set_broken(d, husk_lasterr());
	if (pushed)
		virtio_notify_used(d, NET_TX);
}

static void net_notify(struct virtio_dev *d, unsigned q)
{
	struct net *n = d->priv;

	if (q == NET_RX)
		rx_process(n);
	else if (q == NET_TX)
		tx_process(n);
}

/* vCPU thread, d->lock held: forget the held chain, stop reading the tap. */
static void net_reset(struct virtio_dev *d)
{
	struct net *n = d->priv;

	n->rx_held = false;
	rx_set_polling(n, false);
}

static void net_destroy(struct virtio_dev *d)
{
	struct net *n = d->priv;

	husk_debug("virtio-net: rx %llu frames %llu bytes %llu dropped, "
		   "tx %llu frames %llu bytes %llu dropped",
		   (unsigned long long)n->st.rx_frames, (unsigned long long)n->st.rx_bytes,
		   (unsigned long long)n->st.rx_dropped, (unsigned long long)n->st.tx_frames,
		   (unsigned long long)n->st.tx_bytes, (unsigned long long)n->st.tx_dropped);
	/* The loop has stopped; its registration goes with evloop_free(). */
	close(n->fd);
	free(n->scratch);
	free(n);
}

/* The held rx chain was the last one popped: un-pop it for the template. */
static void net_quiesce(struct virtio_dev *d)
{
	struct net *n = d->priv;

	if (n->rx_held) {
		d->vq[NET_RX].last_avail--;
		n->rx_held = false;
	}
}

static const struct virtio_dev_ops net_ops = {
	.name = "net",
	.device_id = VIRTIO_ID_NET,
	.features = 1ull << VIRTIO_NET_F_MAC | 1ull << VIRTIO_NET_F_STATUS |
		    1ull << VIRTIO_F_INDIRECT_DESC,
	.num_queues = 2,
	.queue_max = NET_QUEUE_SIZE,
	.config_len = sizeof(struct net_config),
	.read_config = net_read_config,
	/* No write_config: the MAC is read-only in virtio 1.x. */
	.notify = net_notify,
	.reset = net_reset,
	.quiesce = net_quiesce,
	.destroy = net_destroy,
};

void virtio_net_stats(struct virtio_dev *d, struct virtio_net_stats *s)
{
	struct net *n = d->priv;

	pthread_mutex_lock(&d->lock);
	*s = n->st;
	pthread_mutex_unlock(&d->lock);
}

int virtio_net_create(struct vm *vm, int tap_fd, const uint8_t mac[6])
{
	struct net *n;
	int err;

	n = calloc(1, sizeof(*n));
	if (n)
		n->scratch = malloc(NET_ETH_MAX);
	if (!n || !n->scratch) {
		err = husk_seterr(ENOMEM, "out of memory for the network device");
		goto fail;
	}
	n->fd = tap_fd;
	/* A tap handed over with IFF_VNET_HDR would misread every frame. */
	if ((err = tap_check_bare(tap_fd)))
		goto fail;
	memcpy(n->config.mac, mac, sizeof(n->config.mac));
	n->config.status = htole16(VIRTIO_NET_S_LINK_UP);
	if ((err = virtio_mmio_add(vm, &n->dev, &net_ops, n)))
		goto fail;
	husk_debug("virtio-net: mac %02x:%02x:%02x:%02x:%02x:%02x", mac[0], mac[1], mac[2],
		   mac[3], mac[4], mac[5]);
	return 0;
fail:
	close(tap_fd);
	if (n)
		free(n->scratch);
	free(n);
	return err;
}
