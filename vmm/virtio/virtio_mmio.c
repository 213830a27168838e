/*
 * virtio_mmio: the virtio-mmio version 2 transport. See virtio_mmio.h.
 *
 * The register file runs on vCPU threads under d->lock. Queue work runs on
 * the VM's event loop: QueueNotify writes land on one ioeventfd per queue
 * (datamatch = queue index) so they never leave the kernel, and DRIVER_OK
 * is handed to the loop through work_fd. Interrupts go out through an irqfd.
 *
 * Without a KVM VM (vm->fd < 0, the unit tests) no fds exist: notifications
 * and activation run synchronously and interrupts only set InterruptStatus,
 * so the register logic is testable without /dev/kvm.
 */
#include <errno.h>
#include <linux/kvm.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "machine/arch.h"
#include "template/snapshot.h"
#include "lib/util.h"
#include "virtio/virtio_mmio.h"
#include "machine/vm.h"

#define MMIO_MAGIC 0x74726976u		/* "virt" */
#define MMIO_VERSION 2
#define MMIO_VENDOR 0x4b535548u		/* "HUSK" */
#define BROKEN_REPORTS 3		/* then only with --verbose */

unsigned virtio_mmio_irq(unsigned slot)
{
	return slot < VIRTIO_MMIO_MAX_DEVICES ? arch_virtio_gsi(slot) : 0;
}

static uint64_t offered(const struct virtio_dev *d)
{
	return d->ops->features | 1ull << VIRTIO_F_VERSION_1;
}

static uint16_t queue_max(const struct virtio_dev *d)
{
	return d->ops->queue_max > VQ_MAX_SIZE ? VQ_MAX_SIZE : d->ops->queue_max;
}

static void signal_fd(int fd, const char *what)
{
	uint64_t one = 1;

	if (fd >= 0 && write(fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		husk_debug("virtio: %s eventfd write: %s", what, strerror(errno));
}

static void raise_irq(struct virtio_dev *d, uint32_t bits)
{
	__atomic_fetch_or(&d->interrupt_status, bits, __ATOMIC_SEQ_CST);
	signal_fd(d->irqfd, "irqfd");
}

static bool can_serve(const struct virtio_dev *d, unsigned q)
{
	return d->activated && !d->broken && (d->status & VIRTIO_STATUS_DRIVER_OK) &&
	       q < d->ops->num_queues && d->vq[q].ready && d->ops->notify;
}

/* Lock held, loop thread (or the caller's thread without a VM). */
static void do_activate(struct virtio_dev *d)
{
	unsigned q;

	if (!d->activate_pending || d->broken || !(d->status & VIRTIO_STATUS_DRIVER_OK))
		return;
	d->activate_pending = false;
	d->activated = true;
	if (d->ops->activate)
		d->ops->activate(d);
	for (q = 0; q < d->ops->num_queues; q++)
		if (can_serve(d, q))
			d->ops->notify(d, q);
}

static void work_cb(void *arg, uint32_t events)
{
	struct virtio_dev *d = arg;
	uint64_t v;

	if (read(d->work_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		husk_debug("virtio %s: work eventfd: %s", d->ops->name, strerror(errno));
	pthread_mutex_lock(&d->lock);
	do_activate(d);
	pthread_mutex_unlock(&d->lock);
}

static void notify_cb(void *arg, uint32_t events)
{
	struct virtio_qctx *c = arg;
	struct virtio_dev *d = c->d;
	uint64_t v;

	if (read(d->notify_fd[c->q], &v, sizeof(v)) < 0 && errno != EAGAIN)
		husk_debug("virtio %s: notify eventfd: %s", d->ops->name, strerror(errno));
	pthread_mutex_lock(&d->lock);
	if (can_serve(d, c->q))
		d->ops->notify(d, c->q);
	pthread_mutex_unlock(&d->lock);
}

/* A QueueNotify write that exited to us instead of hitting the ioeventfd. */
static void kick(struct virtio_dev *d, uint32_t q)
{
	if (q >= d->ops->num_queues)
		return;
	if (d->notify_fd[q] >= 0)
		signal_fd(d->notify_fd[q], "notify");
	else if (can_serve(d, q))
		d->ops->notify(d, q);
}

static void reset_queue(struct virtio_dev *d, unsigned q)
{
	struct virtqueue *vq = &d->vq[q];

	vq->size = queue_max(d);
	vq->ready = false;
	vq->desc_gpa = vq->avail_gpa = vq->used_gpa = 0;
	vq->last_avail = vq->used_idx = 0;
}

/* Lock held. */
static void reset(struct virtio_dev *d)
{
	unsigned q;

	if (d->ops->reset)
		d->ops->reset(d);
	d->status = 0;
	d->dev_features_sel = d->drv_features_sel = d->queue_sel = 0;
	d->driver_features = 0;
	d->features_bad = false;
	__atomic_store_n(&d->interrupt_status, 0, __ATOMIC_SEQ_CST);
	d->broken = false;
	d->activate_pending = d->activated = false;
	for (q = 0; q < VIRTIO_MMIO_MAX_QUEUES; q++)
		reset_queue(d, q);
}

static bool features_ok(const struct virtio_dev *d)
{
	return !d->features_bad && !(d->driver_features & ~offered(d)) &&
	       (d->driver_features & 1ull << VIRTIO_F_VERSION_1);
}

static void write_status(struct virtio_dev *d, uint32_t v)
{
	uint32_t old = d->status, set;

	if (v == 0) {
		reset(d);
		return;
	}
	/* NEEDS_RESET is the device's bit: the driver can neither set nor clear it. */
	v = (v & 0xff & ~VIRTIO_STATUS_NEEDS_RESET) | (old & VIRTIO_STATUS_NEEDS_RESET);
	set = v & ~old;
	if ((set & VIRTIO_STATUS_FEATURES_OK) && !features_ok(d)) {
		husk_debug("virtio %s: refusing features 0x%llx (offered 0x%llx)", d->ops->name,
			   (unsigned long long)d->driver_features,
			   (unsigned long long)offered(d));
		v &= ~VIRTIO_STATUS_FEATURES_OK;
	}
	d->status = v;
	if (!(set & VIRTIO_STATUS_DRIVER_OK))
		return;
	if (!(v & VIRTIO_STATUS_FEATURES_OK)) {
		virtio_set_broken(d, "DRIVER_OK without FEATURES_OK");
		return;
	}
	d->activate_pending = true;
	if (d->work_fd >= 0)
		signal_fd(d->work_fd, "work");
	else
		do_activate(d);
}

static void queue_ready(struct virtio_dev *d, struct virtqueue *vq, uint32_t v)
{
	char why[300];

	if (!v) {
		vq->ready = false;
		vq->last_avail = vq->used_idx = 0;
		return;
	}
	if (vq->ready)
		return;
	if (vq->size > queue_max(d)) {
		snprintf(why, sizeof(why), "queue %u size %u exceeds QueueNumMax %u",
			 d->queue_sel, vq->size, queue_max(d));
		virtio_set_broken(d, why);
		return;
	}
	if (vq_validate(vq)) {
		snprintf(why, sizeof(why), "queue %u: %s", d->queue_sel, husk_lasterr());
		virtio_set_broken(d, why);
		return;
	}
	vq->last_avail = vq->used_idx = 0;
	vq->ready = true;
}

static void set_half(uint64_t *r, bool high, uint32_t v)
{
	if (high)
		*r = (*r & 0xffffffffull) | (uint64_t)v << 32;
	else
		*r = (*r & ~0xffffffffull) | v;
}

/* Queue configuration is frozen while the queue is enabled. */
static struct virtqueue *cur_queue(struct virtio_dev *d, bool for_write)
{
	struct virtqueue *vq;

	if (d->queue_sel >= d->ops->num_queues)
		return NULL;
	vq = &d->vq[d->queue_sel];
	return for_write && vq->ready ? NULL : vq;
}

static void write_reg(struct virtio_dev *d, uint64_t off, uint32_t v)
{
	struct virtqueue *vq;

	switch (off) {
	case VIRTIO_MMIO_DEV_FEATURES_SEL:
		d->dev_features_sel = v;
		break;
	case VIRTIO_MMIO_DRV_FEATURES:
		if (d->status & VIRTIO_STATUS_FEATURES_OK)
			break;
		if (d->drv_features_sel < 2)
			set_half(&d->driver_features, d->drv_features_sel == 1, v);
		else if (v)
			d->features_bad = true;
		break;
	case VIRTIO_MMIO_DRV_FEATURES_SEL:
		d->drv_features_sel = v;
		break;
	case VIRTIO_MMIO_QUEUE_SEL:
		d->queue_sel = v;
		break;
	case VIRTIO_MMIO_QUEUE_NUM:
		if ((vq = cur_queue(d, true)))
			vq->size = v > 0xffff ? 0 : v;
		break;
	case VIRTIO_MMIO_QUEUE_READY:
		if ((vq = cur_queue(d, false)))
			queue_ready(d, vq, v);
		break;
	case VIRTIO_MMIO_QUEUE_NOTIFY:
		kick(d, v);
		break;
	case VIRTIO_MMIO_INT_ACK:
		__atomic_fetch_and(&d->interrupt_status, ~v, __ATOMIC_SEQ_CST);
		break;
	case VIRTIO_MMIO_STATUS:
		write_status(d, v);
		break;
	case VIRTIO_MMIO_QUEUE_DESC_LO:
	case VIRTIO_MMIO_QUEUE_DESC_HI:
		if ((vq = cur_queue(d, true)))
			set_half(&vq->desc_gpa, off == VIRTIO_MMIO_QUEUE_DESC_HI, v);
		break;
	case VIRTIO_MMIO_QUEUE_DRIVER_LO:
	case VIRTIO_MMIO_QUEUE_DRIVER_HI:
		if ((vq = cur_queue(d, true)))
			set_half(&vq->avail_gpa, off == VIRTIO_MMIO_QUEUE_DRIVER_HI, v);
		break;
	case VIRTIO_MMIO_QUEUE_DEVICE_LO:
	case VIRTIO_MMIO_QUEUE_DEVICE_HI:
		if ((vq = cur_queue(d, true)))
			set_half(&vq->used_gpa, off == VIRTIO_MMIO_QUEUE_DEVICE_HI, v);
		break;
	case VIRTIO_MMIO_SHM_SEL:
		break;
	default:
		husk_debug("virtio %s: write 0x%x to read-only or unknown register 0x%llx",
			   d->ops->name, v, (unsigned long long)off);
	}
}

static uint32_t read_reg(struct virtio_dev *d, uint64_t off)
{
	struct virtqueue *vq = cur_queue(d, false);

	switch (off) {
	case VIRTIO_MMIO_MAGIC:
		return MMIO_MAGIC;
	case VIRTIO_MMIO_VERSION:
		return MMIO_VERSION;
	case VIRTIO_MMIO_DEVICE_ID:
		return d->ops->device_id;
	case VIRTIO_MMIO_VENDOR_ID:
		return MMIO_VENDOR;
	case VIRTIO_MMIO_DEV_FEATURES:
		if (d->dev_features_sel > 1)
			return 0;
		return (uint32_t)(offered(d) >> (32 * d->dev_features_sel));
	case VIRTIO_MMIO_QUEUE_NUM_MAX:
		return vq ? queue_max(d) : 0;
	case VIRTIO_MMIO_QUEUE_READY:
		return vq ? vq->ready : 0;
	case VIRTIO_MMIO_INT_STATUS:
		return __atomic_load_n(&d->interrupt_status, __ATOMIC_SEQ_CST);
	case VIRTIO_MMIO_STATUS:
		return d->status;
	case VIRTIO_MMIO_QUEUE_DESC_LO:
		return vq ? (uint32_t)vq->desc_gpa : 0;
	case VIRTIO_MMIO_QUEUE_DESC_HI:
		return vq ? vq->desc_gpa >> 32 : 0;
	case VIRTIO_MMIO_QUEUE_DRIVER_LO:
		return vq ? (uint32_t)vq->avail_gpa : 0;
	case VIRTIO_MMIO_QUEUE_DRIVER_HI:
		return vq ? vq->avail_gpa >> 32 : 0;
	case VIRTIO_MMIO_QUEUE_DEVICE_LO:
		return vq ? (uint32_t)vq->used_gpa : 0;
	case VIRTIO_MMIO_QUEUE_DEVICE_HI:
		return vq ? vq->used_gpa >> 32 : 0;
	case VIRTIO_MMIO_CONFIG_GEN:
		return d->config_generation;
	default:
		/* No shared memory regions: their length reads as -1 (4.2.2). */
		if (off >= VIRTIO_MMIO_SHM_LEN_LO && off <= VIRTIO_MMIO_SHM_BASE_HI)
			return 0xffffffffu;
		return 0;
	}
}

static void config_access(struct virtio_dev *d, uint64_t off, bool write, uint8_t *data,
			  unsigned len)
{
	uint32_t clen = d->ops->config_len;
	bool ok = (len == 1 || len == 2 || len == 4 || len == 8) && off < clen &&
		  len <= clen - off;

	if (write) {
		if (ok && d->ops->write_config)
			d->ops->write_config(d, off, data, len);
		return;
	}
	memset(data, 0, len);
	if (ok && d->ops->read_config)
		d->ops->read_config(d, off, data, len);
}

void virtio_mmio_access(struct virtio_dev *d, uint64_t off, bool write, uint8_t *data,
			unsigned len)
{
	uint32_t v = 0;

	if (len > 8)
		len = 8;
	pthread_mutex_lock(&d->lock);
	if (off >= VIRTIO_MMIO_CONFIG && off < VIRTIO_MMIO_SIZE) {
		config_access(d, off - VIRTIO_MMIO_CONFIG, write, data, len);
	} else if (off >= VIRTIO_MMIO_SIZE || len != 4 || off % 4) {
		/* Registers are 32-bit only (4.2.2.2); anything else is ignored. */
		husk_debug("virtio %s: bad %u-byte %s at 0x%llx", d->ops->name, len,
			   write ? "write" : "read", (unsigned long long)off);
		if (!write)
			memset(data, 0, len);
	} else if (write) {
		memcpy(&v, data, 4);
		write_reg(d, off, v);
	} else {
		v = read_reg(d, off);
		memcpy(data, &v, 4);
	}
	pthread_mutex_unlock(&d->lock);
}

void virtio_notify_used(struct virtio_dev *d, unsigned q)
{
	bool fire;

	if (q >= VIRTIO_MMIO_MAX_QUEUES)
		return;
	pthread_mutex_lock(&d->lock);
	fire = d->vq[q].ready && vq_should_notify(&d->vq[q]);
	if (fire)
		raise_irq(d, VIRTIO_INT_USED);
	pthread_mutex_unlock(&d->lock);
}

void virtio_config_changed(struct virtio_dev *d)
{
	pthread_mutex_lock(&d->lock);
	d->config_generation++;
	if (d->status & VIRTIO_STATUS_DRIVER_OK)
		raise_irq(d, VIRTIO_INT_CONFIG);
	pthread_mutex_unlock(&d->lock);
}

void virtio_set_broken(struct virtio_dev *d, const char *why)
{
	pthread_mutex_lock(&d->lock);
	if (!d->broken) {
		d->broken = true;
		/* A guest can break and reset a device in a loop: do not flood stderr. */
		if (d->broken_reports++ < BROKEN_REPORTS)
			husk_msg("virtio-%s at 0x%llx: guest driver error: %s; device needs reset",
				 d->ops->name, (unsigned long long)d->base, why);
		else
			husk_debug("virtio-%s: guest driver error: %s", d->ops->name, why);
	}
	d->status |= VIRTIO_STATUS_NEEDS_RESET;
	if (d->status & VIRTIO_STATUS_DRIVER_OK)
		raise_irq(d, VIRTIO_INT_CONFIG);
	pthread_mutex_unlock(&d->lock);
}

static void close_fd(struct vm *vm, int *fd, bool in_loop)
{
	if (*fd < 0)
		return;
	if (in_loop)
		evloop_del(&vm->loop, *fd);
	close(*fd);
	*fd = -1;
}

static void unwire(struct virtio_dev *d, bool in_loop)
{
	unsigned q;

	close_fd(d->vm, &d->irqfd, false);
	close_fd(d->vm, &d->work_fd, in_loop);
	for (q = 0; q < VIRTIO_MMIO_MAX_QUEUES; q++)
		close_fd(d->vm, &d->notify_fd[q], in_loop);
}

static int new_eventfd(int *fd)
{
	*fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (*fd < 0)
		return husk_seterr(errno, "eventfd: %s", strerror(errno));
	return 0;
}

/* irqfd, activation fd and one ioeventfd per queue. */
static int wire(struct virtio_dev *d)
{
	struct vm *vm = d->vm;
	struct kvm_irqfd irqfd = { .gsi = d->irq };
	unsigned q;
	int err;

	if ((err = new_eventfd(&d->irqfd)))
		return err;
	irqfd.fd = d->irqfd;
	if (ioctl(vm->fd, KVM_IRQFD, &irqfd) < 0)
		return husk_seterr(errno, "KVM_IRQFD for %s on IRQ %u: %s", d->ops->name,
				   d->irq, strerror(errno));
	if ((err = new_eventfd(&d->work_fd)) ||
	    (err = evloop_add(&vm->loop, d->work_fd, EPOLLIN, work_cb, d)))
		return err;
	for (q = 0; q < d->ops->num_queues; q++) {
		struct kvm_ioeventfd io = {
			.datamatch = q,
			.addr = d->base + VIRTIO_MMIO_QUEUE_NOTIFY,
			.len = 4,
			.flags = KVM_IOEVENTFD_FLAG_DATAMATCH,
		};

		if ((err = new_eventfd(&d->notify_fd[q])))
			return err;
		io.fd = d->notify_fd[q];
		if (ioctl(vm->fd, KVM_IOEVENTFD, &io) < 0)
			return husk_seterr(errno, "KVM_IOEVENTFD for %s queue %u: %s",
					   d->ops->name, q, strerror(errno));
		if ((err = evloop_add(&vm->loop, d->notify_fd[q], EPOLLIN, notify_cb,
				      &d->qctx[q])))
			return err;
	}
	return 0;
}

int virtio_mmio_add(struct vm *vm, struct virtio_dev *d, const struct virtio_dev_ops *ops,
		    void *priv)
{
	pthread_mutexattr_t attr;
	size_t used = strlen(vm->dev_cmdline);
	unsigned q, slot = vm->nr_virtio;
	int n, err;

	if (slot >= VIRTIO_MMIO_MAX_DEVICES)
		return husk_seterr(ENOSPC, "no free virtio-mmio slot for %s (%d in use)",
				   ops->name, VIRTIO_MMIO_MAX_DEVICES);
	if (ops->num_queues > VIRTIO_MMIO_MAX_QUEUES || !ops->queue_max)
		return husk_seterr(EINVAL, "virtio %s: bad queue layout", ops->name);
	memset(d, 0, sizeof(*d));
	d->ops = ops;
	d->priv = priv;
	d->vm = vm;
	d->index = slot;
	d->base = ARCH_VIRTIO_GPA + (uint64_t)(vm->virtio_first + slot) * ARCH_VIRTIO_STRIDE;
	d->irq = virtio_mmio_irq(slot);
	d->irqfd = d->work_fd = -1;
	for (q = 0; q < VIRTIO_MMIO_MAX_QUEUES; q++) {
		d->notify_fd[q] = -1;
		d->vq[q].mem = &vm->mem;
		d->qctx[q].d = d;
		d->qctx[q].q = q;
		reset_queue(d, q);
	}
	pthread_mutexattr_init(&attr);
	pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
	pthread_mutex_init(&d->lock, &attr);
	pthread_mutexattr_destroy(&attr);

	/*
	 * Where the guest learns of it from its command line (else its device
	 * tree). Inside the if, not a conditional expression: on arm64 gcc
	 * would otherwise see the error path with used == sizeof and warn.
	 */
	if (ARCH_VIRTIO_ON_CMDLINE) {
		n = snprintf(vm->dev_cmdline + used, sizeof(vm->dev_cmdline) - used,
			     " virtio_mmio.device=4K@0x%llx:%u", (unsigned long long)d->base,
			     d->irq);
		if (n < 0 || (size_t)n >= sizeof(vm->dev_cmdline) - used) {
			vm->dev_cmdline[used] = '\0';
			pthread_mutex_destroy(&d->lock);
			return husk_seterr(E2BIG, "virtio device parameters do not fit the "
					   "command line");
		}
	}
	if (vm->fd >= 0 && (err = wire(d))) {
		char msg[256];

		/* Unwiring may fail on fds never registered: keep the real reason. */
		snprintf(msg, sizeof(msg), "%s", husk_lasterr());
		vm->dev_cmdline[used] = '\0';
		unwire(d, true);
		pthread_mutex_destroy(&d->lock);
		return husk_seterr(-err, "%s", msg);
	}
	vm->virtio[vm->nr_virtio++] = d;
	return 0;
}

/* ---- templates ---- */

enum {
	T_DEV_ID = 1, T_DEV_REGS, T_DEV_FEATURES, T_DEV_QUEUE,
};

/* Little-endian on every host: the state file's byte order. */
struct snap_regs {
	uint32_t status, dev_features_sel, drv_features_sel, queue_sel;
	uint32_t interrupt_status, config_generation;
	uint8_t broken, activated, features_bad, pad;
};

struct snap_queue {
	uint32_t index;
	uint16_t size, last_avail, used_idx;
	uint8_t ready, pad;
	uint32_t pad2;			/* the u64s start at 16: no implicit padding */
	uint64_t desc_gpa, avail_gpa, used_gpa;
};

void virtio_mmio_save(struct virtio_dev *d, struct snap_writer *w)
{
	struct snap_regs r;
	unsigned q;

	pthread_mutex_lock(&d->lock);
	if (d->ops->quiesce)
		d->ops->quiesce(d);
	snap_begin(w, SNAP_DEVICE, d->index);
	snap_put_u64(w, T_DEV_ID, d->ops->device_id);
	memset(&r, 0, sizeof(r));
	r.status = d->status;
	r.dev_features_sel = d->dev_features_sel;
	r.drv_features_sel = d->drv_features_sel;
	r.queue_sel = d->queue_sel;
	r.interrupt_status = __atomic_load_n(&d->interrupt_status, __ATOMIC_SEQ_CST);
	r.config_generation = d->config_generation;
	r.broken = d->broken;
	r.activated = d->activated || d->activate_pending;
	r.features_bad = d->features_bad;
	snap_put(w, T_DEV_REGS, &r, sizeof(r));
	snap_put_u64(w, T_DEV_FEATURES, d->driver_features);
	for (q = 0; q < d->ops->num_queues; q++) {
		const struct virtqueue *vq = &d->vq[q];
		struct snap_queue sq = {
			.index = q, .size = vq->size, .last_avail = vq->last_avail,
			.used_idx = vq->used_idx, .ready = vq->ready,
			.desc_gpa = vq->desc_gpa, .avail_gpa = vq->avail_gpa,
			.used_gpa = vq->used_gpa,
		};

		snap_put(w, T_DEV_QUEUE, &sq, sizeof(sq));
	}
	if (d->ops->save)
		d->ops->save(d, w);
	snap_end(w);
	pthread_mutex_unlock(&d->lock);
}

static int restore_queues(struct virtio_dev *d, const struct snap_section *sec)
{
	struct tlv_iter it;
	struct tlv t;
	unsigned seen = 0;
	int n;

	tlv_iter_init(&it, sec->data, sec->len);
	while ((n = tlv_next(&it, &t)) == 1) {
		struct snap_queue sq;
		struct virtqueue *vq;

		if (t.tag != T_DEV_QUEUE)
			continue;
		if (t.len != sizeof(sq))
			return husk_seterr(EINVAL, "a queue record of %u bytes", t.len);
		memcpy(&sq, t.val, sizeof(sq));
		if (sq.index >= d->ops->num_queues || (seen & 1u << sq.index))
			return husk_seterr(EINVAL, "queue %u saved twice or not a queue of "
					   "this device", sq.index);
		seen |= 1u << sq.index;
		vq = &d->vq[sq.index];
		vq->size = sq.size;
		vq->desc_gpa = sq.desc_gpa;
		vq->avail_gpa = sq.avail_gpa;
		vq->used_gpa = sq.used_gpa;
		vq->last_avail = sq.last_avail;
		vq->used_idx = sq.used_idx;
		vq->ready = false;
		if (!sq.ready)
			continue;
		if (sq.size > queue_max(d))
			return husk_seterr(EINVAL, "queue %u was saved with %u entries, this "
					   "device takes at most %u", sq.index, sq.size,
					   queue_max(d));
		if (vq_validate(vq))
			return husk_seterr(EINVAL, "queue %u does not fit this VM: %s",
					   sq.index, husk_lasterr());
		vq->ready = true;
	}
	if (n < 0)
		return n;
	if (seen != (1u << d->ops->num_queues) - 1)
		return husk_seterr(EINVAL, "not every queue was saved");
	return 0;
}

int virtio_mmio_restore(struct virtio_dev *d, const struct snap_section *sec)
{
	struct snap_regs r;
	uint64_t id, features;
	int err;

	err = snap_get_u64(sec, T_DEV_ID, &id);
	if (!err && id != d->ops->device_id)
		err = husk_seterr(EINVAL, "slot %u held device %llu, this VM has %s there",
				  d->index, (unsigned long long)id, d->ops->name);
	if (!err)
		err = snap_get_exact(sec, T_DEV_REGS, &r, sizeof(r));
	if (!err)
		err = snap_get_u64(sec, T_DEV_FEATURES, &features);
	if (!err && (features & ~offered(d)))
		err = husk_seterr(EINVAL, "the driver had features 0x%llx this device does not "
				  "offer", (unsigned long long)features);
	if (!err && (r.status & VIRTIO_STATUS_DRIVER_OK) &&
	    !(r.status & VIRTIO_STATUS_FEATURES_OK) && !r.broken)
		err = husk_seterr(EINVAL, "DRIVER_OK without FEATURES_OK");
	pthread_mutex_lock(&d->lock);
	if (!err)
		err = restore_queues(d, sec);
	if (!err) {
		d->status = r.status & 0xff;
		d->dev_features_sel = r.dev_features_sel;
		d->drv_features_sel = r.drv_features_sel;
		d->queue_sel = r.queue_sel;
		d->driver_features = features;
		d->features_bad = r.features_bad;
		d->config_generation = r.config_generation;
		d->broken = r.broken;
		__atomic_store_n(&d->interrupt_status, r.interrupt_status &
				 (VIRTIO_INT_USED | VIRTIO_INT_CONFIG), __ATOMIC_SEQ_CST);
		/* As the guest left it: serving its queues from the first notification. */
		d->activate_pending = r.activated && (d->status & VIRTIO_STATUS_DRIVER_OK);
		d->activated = false;
		do_activate(d);
		if (d->ops->restore)
			err = d->ops->restore(d, sec);
	}
	pthread_mutex_unlock(&d->lock);
	if (err)
		return husk_seterr(err, "virtio-%s: %s", d->ops->name, husk_lasterr());
	return 0;
}

void virtio_mmio_destroy(struct virtio_dev *d)
{
	/* The loop has stopped: its registrations go with evloop_free(). */
	unwire(d, false);
	pthread_mutex_destroy(&d->lock);
	if (d->ops->destroy)
		d->ops->destroy(d);
}
