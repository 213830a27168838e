/*
 * virtio_mmio: the virtio-mmio transport, version 2 (virtio 1.x, "modern"),
 * for x86 guests that learn about devices from `virtio_mmio.device=`
 * command-line parameters. The register file is served on vCPU threads (MMIO
 * exits); QueueNotify writes go to ioeventfds and interrupts to irqfds, so the
 * data path never stops a vCPU. Backends implement struct virtio_dev_ops and
 * run their queue work on the VM's event loop.
 *
 * A guest that breaks the rules (bad ring addresses, malformed chains, writes
 * in the wrong state) gets the device marked DEVICE_NEEDS_RESET; husk never
 * aborts because of it.
 */
#ifndef HUSK_VIRTIO_MMIO_H
#define HUSK_VIRTIO_MMIO_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "virtio/virtqueue.h"

#define VIRTIO_MMIO_MAX_DEVICES 8
#define VIRTIO_MMIO_MAX_QUEUES 4
#define VIRTIO_MMIO_SIZE 0x1000

/* Register offsets (virtio 1.x, 4.2.2), shared with the tests that drive them. */
#define VIRTIO_MMIO_MAGIC		0x000
#define VIRTIO_MMIO_VERSION		0x004
#define VIRTIO_MMIO_DEVICE_ID		0x008
#define VIRTIO_MMIO_VENDOR_ID		0x00c
#define VIRTIO_MMIO_DEV_FEATURES	0x010
#define VIRTIO_MMIO_DEV_FEATURES_SEL	0x014
#define VIRTIO_MMIO_DRV_FEATURES	0x020
#define VIRTIO_MMIO_DRV_FEATURES_SEL	0x024
#define VIRTIO_MMIO_QUEUE_SEL		0x030
#define VIRTIO_MMIO_QUEUE_NUM_MAX	0x034
#define VIRTIO_MMIO_QUEUE_NUM		0x038
#define VIRTIO_MMIO_QUEUE_READY		0x044
#define VIRTIO_MMIO_QUEUE_NOTIFY	0x050
#define VIRTIO_MMIO_INT_STATUS		0x060
#define VIRTIO_MMIO_INT_ACK		0x064
#define VIRTIO_MMIO_STATUS		0x070
#define VIRTIO_MMIO_QUEUE_DESC_LO	0x080
#define VIRTIO_MMIO_QUEUE_DESC_HI	0x084
#define VIRTIO_MMIO_QUEUE_DRIVER_LO	0x090
#define VIRTIO_MMIO_QUEUE_DRIVER_HI	0x094
#define VIRTIO_MMIO_QUEUE_DEVICE_LO	0x0a0
#define VIRTIO_MMIO_QUEUE_DEVICE_HI	0x0a4
#define VIRTIO_MMIO_SHM_SEL		0x0ac
#define VIRTIO_MMIO_SHM_LEN_LO		0x0b0
#define VIRTIO_MMIO_SHM_BASE_HI		0x0bc
#define VIRTIO_MMIO_CONFIG_GEN		0x0fc
#define VIRTIO_MMIO_CONFIG		0x100

/* Device n lives at ARCH_VIRTIO_GPA + n * ARCH_VIRTIO_STRIDE on arch_virtio_gsi(n). */
#define VIRTIO_F_VERSION_1 32

#define VIRTIO_ID_NET 1
#define VIRTIO_ID_BLOCK 2
#define VIRTIO_ID_RNG 4
#define VIRTIO_ID_VSOCK 19

struct virtio_dev;
struct vm;
struct snap_writer;
struct snap_section;

#define VIRTIO_F_INDIRECT_DESC 28	/* vq_pop() walks indirect tables */

/* Device status bits (virtio 1.x, 2.1). */
#define VIRTIO_STATUS_ACKNOWLEDGE 1
#define VIRTIO_STATUS_DRIVER 2
#define VIRTIO_STATUS_DRIVER_OK 4
#define VIRTIO_STATUS_FEATURES_OK 8
#define VIRTIO_STATUS_NEEDS_RESET 0x40
#define VIRTIO_STATUS_FAILED 0x80

/* InterruptStatus bits. */
#define VIRTIO_INT_USED 1
#define VIRTIO_INT_CONFIG 2

struct virtio_dev_ops {
	const char *name;
	uint32_t device_id;
	uint64_t features;		/* offered; VERSION_1 is added by the transport */
	unsigned num_queues;
	uint16_t queue_max;
	uint32_t config_len;
	/* Config space access (off + len within config_len), vCPU thread. */
	void (*read_config)(struct virtio_dev *d, uint32_t off, void *data, unsigned len);
	void (*write_config)(struct virtio_dev *d, uint32_t off, const void *data, unsigned len);
	/*
	 * Driver set DRIVER_OK: queues are valid from now on (event-loop thread).
	 * Right after it, notify() is called once for every ready queue, since
	 * the driver may have posted buffers before DRIVER_OK.
	 */
	void (*activate)(struct virtio_dev *d);
	/* Queue q has new buffers (event-loop thread). */
	void (*notify)(struct virtio_dev *d, unsigned q);
	/* Driver reset the device; drop all queue state (vCPU thread). */
	void (*reset)(struct virtio_dev *d);
	/*
	 * Templates (optional): add the device's own elements (tags from
	 * VIRTIO_SNAP_DEV_TAGS up) to its open section; restore them on a VM
	 * that has not run yet, after the transport state and activation.
	 */
	void (*save)(struct virtio_dev *d, struct snap_writer *w);
	/*
	 * Templates (optional): give back what the device took from a queue
	 * and still holds (a popped receive chain) by rewinding the queue, so
	 * the saved ring positions lose no buffer of the guest's.
	 */
	void (*quiesce)(struct virtio_dev *d);
	int (*restore)(struct virtio_dev *d, const struct snap_section *sec);
	/*
	 * VM teardown, after the event loop stopped: close fds, free priv (and
	 * the struct virtio_dev if the backend allocated it: the transport does
	 * not touch d after this returns).
	 */
	void (*destroy)(struct virtio_dev *d);
};

struct virtio_dev {
	const struct virtio_dev_ops *ops;
	void *priv;
	struct vm *vm;
	unsigned index;			/* slot: address and IRQ */
	uint64_t base;			/* MMIO base gpa */
	unsigned irq;			/* GSI */
	int irqfd;			/* eventfd wired with KVM_IRQFD */
	int notify_fd[VIRTIO_MMIO_MAX_QUEUES];	/* ioeventfds on QueueNotify */

	/*
	 * Register state vs. the event loop. Recursive; held by the transport
	 * around read/write_config, reset (vCPU thread) and activate, notify
	 * (loop thread). A backend that touches its queues from its own fd
	 * callbacks should take it too, so a reset cannot run in between.
	 */
	pthread_mutex_t lock;
	uint32_t status;
	uint32_t dev_features_sel, drv_features_sel, queue_sel;
	uint64_t driver_features;
	uint32_t interrupt_status;
	uint32_t config_generation;
	bool broken;
	struct virtqueue vq[VIRTIO_MMIO_MAX_QUEUES];

	/* Transport internals. */
	int work_fd;			/* eventfd: run activate() on the loop */
	bool activate_pending, activated;
	bool features_bad;		/* driver wrote bits beyond the 64 offered */
	unsigned broken_reports;	/* driver errors reported on stderr */
	struct virtio_qctx {
		struct virtio_dev *d;
		unsigned q;
	} qctx[VIRTIO_MMIO_MAX_QUEUES];
};

/*
 * Register a device with the VM: picks the next slot, wires irqfd and
 * ioeventfds, and appends its virtio_mmio.device= parameter to the VM's
 * device command line. Call before the guest is loaded.
 */
int virtio_mmio_add(struct vm *vm, struct virtio_dev *d, const struct virtio_dev_ops *ops,
		    void *priv);
/* MMIO access to [base, base + 0x1000) from a vCPU thread. */
void virtio_mmio_access(struct virtio_dev *d, uint64_t off, bool write, uint8_t *data,
			unsigned len);
/* Used buffers are ready on queue q: raise the interrupt if the driver wants it. */
void virtio_notify_used(struct virtio_dev *d, unsigned q);
/* The driver misbehaved: set DEVICE_NEEDS_RESET, tell it, stop using the queues. */
void virtio_set_broken(struct virtio_dev *d, const char *why);
/* The device changed its config space: bump ConfigGeneration, interrupt. */
void virtio_config_changed(struct virtio_dev *d);
/*
 * Templates: the transport's registers and queue positions, and the
 * device's own state (ops->save), as section SNAP_DEVICE index = slot. Call
 * with the VM paused and the event loop idle.
 */
#define VIRTIO_SNAP_DEV_TAGS 64		/* device-specific tags start here */
void virtio_mmio_save(struct virtio_dev *d, struct snap_writer *w);
/*
 * Restore on a VM that has not run: checks the saved state against this
 * device (id, offered features, queue limits, rings inside RAM), sets it,
 * activates the device if the guest had, then ops->restore. -errno.
 */
int virtio_mmio_restore(struct virtio_dev *d, const struct snap_section *sec);
/* Teardown (after the event loop stopped): transport fds, then ops->destroy. */
void virtio_mmio_destroy(struct virtio_dev *d);
/* The IRQ of slot n (the legacy ISA lines COM1 and the RTC do not use). */
unsigned virtio_mmio_irq(unsigned slot);

#endif
