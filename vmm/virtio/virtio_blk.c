/*
 * virtio_blk: a virtio block device on a raw image. See virtio_blk.h.
 *
 * One request queue served on the event loop with synchronous preadv/pwritev
 * straight between the image and the guest's (already validated and mapped)
 * buffers: no bounce copy. A request is a chain of a 16-byte readable header,
 * data, and a one-byte writable status at the very end; the guest may split
 * those across descriptors any way it likes (2.7.4), so data ranges are cut
 * out of the chain by byte offset, not by descriptor.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "lib/util.h"
#include "virtio/virtio_blk.h"
#include "virtio/virtio_mmio.h"

#define VIRTIO_BLK_F_SIZE_MAX 1
#define VIRTIO_BLK_F_SEG_MAX 2
#define VIRTIO_BLK_F_RO 5
#define VIRTIO_BLK_F_BLK_SIZE 6
#define VIRTIO_BLK_F_FLUSH 9

#define VIRTIO_BLK_T_IN 0
#define VIRTIO_BLK_T_OUT 1
#define VIRTIO_BLK_T_FLUSH 4
#define VIRTIO_BLK_T_GET_ID 8

#define VIRTIO_BLK_S_OK 0
#define VIRTIO_BLK_S_IOERR 1
#define VIRTIO_BLK_S_UNSUPP 2

#define SECTOR 512u
#define BLK_QUEUE_SIZE 256
#define BLK_ID_BYTES 20
#define BLK_ID "husk-rootfs"
/* Header and status take two descriptors of a chain; the rest may be data. */
#define BLK_SEG_MAX (VQ_MAX_CHAIN - 2)
#define BLK_SIZE_MAX (1u << 20)

struct blk_req_hdr {
	uint32_t type;
	uint32_t reserved;
	uint64_t sector;
};

/* The config fields we offer features for, in virtio_blk_config layout. */
struct blk_config {
	uint64_t capacity;
	uint32_t size_max;
	uint32_t seg_max;
	struct {
		uint16_t cylinders;
		uint8_t heads;
		uint8_t sectors;
	} geometry;
	uint32_t blk_size;
} __attribute__((packed));

struct blk {
	struct virtio_dev dev;
	struct virtio_dev_ops ops;
	int fd;
	bool read_only;
	uint64_t sectors;
	struct blk_config config;
	struct vq_chain chain;		/* big: not on the loop thread's stack */
	struct iovec iov[VQ_MAX_CHAIN];
};

static void blk_read_config(struct virtio_dev *d, uint32_t off, void *data, unsigned len)
{
	struct blk *b = d->priv;

	memcpy(data, (uint8_t *)&b->config + off, len);
}

/*
 * The iovecs for bytes [from, from + len) of a chain part: the data region
 * between a header and a status byte, whatever the descriptor boundaries.
 */
static unsigned cut_iov(const struct vq_iov *v, unsigned n, uint64_t from, uint64_t len,
			struct iovec *out)
{
	unsigned i, k = 0;
	uint64_t take;

	for (i = 0; i < n && len; i++) {
		if (from >= v[i].len) {
			from -= v[i].len;
			continue;
		}
		take = v[i].len - from;
		if (take > len)
			take = len;
		out[k].iov_base = v[i].base + from;
		out[k].iov_len = take;
		k++;
		len -= take;
		from = 0;
	}
	return k;
}

/* Whole-range positional I/O: short transfers continue, EOF is an error. */
static int blk_rw(struct blk *b, bool write, struct iovec *iov, unsigned n, uint64_t off)
{
	ssize_t r;

	while (n) {
		r = write ? pwritev(b->fd, iov, n, off) : preadv(b->fd, iov, n, off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		off += r;
		while (n && (size_t)r >= iov->iov_len) {
			r -= iov->iov_len;
			iov++;
			n--;
		}
		if (n) {
			iov->iov_base = (uint8_t *)iov->iov_base + r;
			iov->iov_len -= r;
		}
	}
	return 0;
}

/* Sector range check without overflow: [sector, sector + bytes/512) in the disk. */
static bool in_range(const struct blk *b, uint64_t sector, uint64_t bytes)
{
	return bytes % SECTOR == 0 && sector <= b->sectors &&
	       bytes / SECTOR <= b->sectors - sector;
}

/* Serve one request; returns the status byte and the data bytes written. */
static uint8_t blk_request(struct blk *b, const struct vq_chain *c,
			   const struct blk_req_hdr *h, uint32_t *data_written)
{
	uint64_t in_data = c->in_len - 1, out_data = c->out_len - sizeof(*h);
	char id[BLK_ID_BYTES] = BLK_ID;
	unsigned n;

	*data_written = 0;
	switch (h->type) {
	case VIRTIO_BLK_T_IN:
		if (!in_range(b, h->sector, in_data) || in_data > UINT32_MAX)
			return VIRTIO_BLK_S_IOERR;
		n = cut_iov(c->in, c->n_in, 0, in_data, b->iov);
		if (blk_rw(b, false, b->iov, n, h->sector * SECTOR))
			return VIRTIO_BLK_S_IOERR;
		*data_written = in_data;
		return VIRTIO_BLK_S_OK;
	case VIRTIO_BLK_T_OUT:
		/* 5.2.6.2: a device offering VIRTIO_BLK_F_RO fails writes with IOERR. */
		if (b->read_only || !in_range(b, h->sector, out_data))
			return VIRTIO_BLK_S_IOERR;
		n = cut_iov(c->out, c->n_out, sizeof(*h), out_data, b->iov);
		return blk_rw(b, true, b->iov, n, h->sector * SECTOR) ?
			VIRTIO_BLK_S_IOERR : VIRTIO_BLK_S_OK;
	case VIRTIO_BLK_T_FLUSH:
		if (!b->read_only && fdatasync(b->fd) < 0)
			return VIRTIO_BLK_S_IOERR;
		return VIRTIO_BLK_S_OK;
	case VIRTIO_BLK_T_GET_ID:
		*data_written = vq_copy_to(c->in, c->n_in, 0, id,
					   in_data < BLK_ID_BYTES ? in_data : BLK_ID_BYTES);
		return VIRTIO_BLK_S_OK;
	default:
		return VIRTIO_BLK_S_UNSUPP;
	}
}

static void blk_notify(struct virtio_dev *d, unsigned q)
{
	struct blk *b = d->priv;
	struct virtqueue *vq = &d->vq[q];
	struct vq_chain *c = &b->chain;
	struct blk_req_hdr h;
	uint32_t written;
	uint8_t status;
	bool pushed = false;
	int r;

	while ((r = vq_pop(vq, c)) > 0) {
		if (c->out_len < sizeof(h) || c->in_len < 1) {
			virtio_set_broken(d, "request without a header or a status byte");
			return;
		}
		vq_copy_from(c->out, c->n_out, 0, &h, sizeof(h));
		status = blk_request(b, c, &h, &written);
		/* The status is the chain's last writable byte. */
		vq_copy_to(c->in, c->n_in, c->in_len - 1, &status, 1);
		if (vq_push(vq, c->head, written + 1)) {
			virtio_set_broken(d, husk_lasterr());
			return;
		}
		pushed = true;
	}
	if (r < 0)
		virtio_set_broken(d, husk_lasterr());
	if (pushed)
		virtio_notify_used(d, q);
}

static void blk_destroy(struct virtio_dev *d)
{
	struct blk *b = d->priv;

	close(b->fd);
	free(b);
}

static int image_size(int fd, const char *path, uint64_t *bytes)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return husk_seterr(errno, "cannot stat disk image %s: %s", path, strerror(errno));
	if (S_ISREG(st.st_mode)) {
		*bytes = st.st_size;
		return 0;
	}
	if (S_ISBLK(st.st_mode)) {
		if (ioctl(fd, BLKGETSIZE64, bytes) < 0)
			return husk_seterr(errno, "cannot get the size of %s: %s", path,
					   strerror(errno));
		return 0;
	}
	return husk_seterr(EINVAL, "disk image %s is not a regular file or block device", path);
}

int virtio_blk_create(struct vm *vm, const char *path, bool read_only)
{
	return virtio_blk_create_fd(vm, path, -1, read_only);
}

/* The device's own descriptor: a copy of fd, or path opened. */
static int blk_open(const char *path, int fd, bool read_only)
{
	int mode = fd > 0 ? fcntl(fd, F_GETFL) : 0;

	if (fd > 0 && (mode < 0 || (!read_only && (mode & O_ACCMODE) != O_RDWR)))
		return husk_seterr(EBADF, "disk image %s: its descriptor is not open for %s",
				   path, read_only ? "reading" : "reading and writing");
	if (fd > 0)
		fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	else	/* O_NONBLOCK: a FIFO must be refused (image_size), not wait for a writer. */
		fd = open(path, (read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return husk_seterr(errno, "cannot open disk image %s: %s", path, strerror(errno));
	return fd;
}

int virtio_blk_create_fd(struct vm *vm, const char *path, int fd, bool read_only)
{
	struct blk *b;
	uint64_t bytes;
	int err;

	b = calloc(1, sizeof(*b));
	if (!b)
		return husk_seterr(ENOMEM, "out of memory for the disk device");
	b->read_only = read_only;
	b->fd = blk_open(path, fd, read_only);
	if (b->fd < 0) {
		err = b->fd;
		free(b);
		return err;
	}
	err = image_size(b->fd, path, &bytes);
	if (!err && bytes < SECTOR)
		err = husk_seterr(EINVAL, "disk image %s is smaller than one 512-byte sector",
				  path);
	if (err)
		goto fail;
	b->sectors = bytes / SECTOR;
	b->config.capacity = b->sectors;
	b->config.size_max = BLK_SIZE_MAX;
	b->config.seg_max = BLK_SEG_MAX;
	b->config.blk_size = SECTOR;
	b->ops = (struct virtio_dev_ops){
		.name = "blk",
		.device_id = VIRTIO_ID_BLOCK,
		/*
		 * SEG_MAX keeps every request within VQ_MAX_CHAIN descriptors;
		 * without it Linux may build chains as long as the queue.
		 */
		.features = 1ull << VIRTIO_BLK_F_SEG_MAX | 1ull << VIRTIO_BLK_F_SIZE_MAX |
			    1ull << VIRTIO_BLK_F_BLK_SIZE | 1ull << VIRTIO_BLK_F_FLUSH |
			    1ull << VIRTIO_F_INDIRECT_DESC |
			    (read_only ? 1ull << VIRTIO_BLK_F_RO : 0),
		.num_queues = 1,
		.queue_max = BLK_QUEUE_SIZE,
		.config_len = sizeof(b->config),
		.read_config = blk_read_config,
		.notify = blk_notify,
		.destroy = blk_destroy,
	};
	err = virtio_mmio_add(vm, &b->dev, &b->ops, b);
	if (err)
		goto fail;
	husk_debug("virtio-blk: %s, %llu sectors%s", path, (unsigned long long)b->sectors,
		   read_only ? ", read-only" : "");
	return 0;
fail:
	close(b->fd);
	free(b);
	return err;
}
