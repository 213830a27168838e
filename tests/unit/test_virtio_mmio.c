/*
 * Unit tests for the virtio-mmio transport's register file, driven through
 * virtio_mmio_access() like a guest driver would, with a fake backend that
 * counts its callbacks; and virtio-blk requests (reads, refused writes,
 * out-of-range sectors, GET_ID, unknown types) served from a temporary image. The VM has no KVM fd, so no irqfd/ioeventfd exist:
 * notifications and activation run synchronously and interrupts show only in
 * InterruptStatus.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "template/snapshot.h"
#include "lib/util.h"
#include "virtio/virtio_blk.h"
#include "virtio/virtio_mmio.h"
#include "machine/vm.h"
#include "suites.h"

#define RAM_SIZE (1u << 20)
#define DESC_GPA 0x1000u
#define AVAIL_GPA 0x2000u
#define USED_GPA 0x3000u


#define FAKE_FEATURES (1ull << 3 | 1ull << 35)

static uint8_t *ram;
static struct vm *vm;
static struct virtio_dev dev;
static struct {
	unsigned activate, reset, read_config, write_config, destroy;
	unsigned notify[VIRTIO_MMIO_MAX_QUEUES];
	uint8_t config[12];
} fake;

static void fake_read_config(struct virtio_dev *d, uint32_t off, void *data, unsigned len)
{
	fake.read_config++;
	memcpy(data, fake.config + off, len);
}

static void fake_write_config(struct virtio_dev *d, uint32_t off, const void *data,
			      unsigned len)
{
	fake.write_config++;
	memcpy(fake.config + off, data, len);
}

static void fake_activate(struct virtio_dev *d)
{
	fake.activate++;
}

static void fake_notify(struct virtio_dev *d, unsigned q)
{
	fake.notify[q]++;
}

static void fake_reset(struct virtio_dev *d)
{
	fake.reset++;
}

static void fake_destroy(struct virtio_dev *d)
{
	fake.destroy++;
}

static const struct virtio_dev_ops fake_ops = {
	.name = "fake",
	.device_id = VIRTIO_ID_RNG,
	.features = FAKE_FEATURES,
	.num_queues = 2,
	.queue_max = 64,
	.config_len = sizeof(fake.config),
	.read_config = fake_read_config,
	.write_config = fake_write_config,
	.activate = fake_activate,
	.notify = fake_notify,
	.reset = fake_reset,
	.destroy = fake_destroy,
};

static void setup(void)
{
	unsigned i;

	memset(&fake, 0, sizeof(fake));
	for (i = 0; i < sizeof(fake.config); i++)
		fake.config[i] = 0xa0 + i;
	ram = calloc(1, RAM_SIZE);
	vm = calloc(1, sizeof(*vm));
	ck_assert_ptr_nonnull(ram);
	ck_assert_ptr_nonnull(vm);
	vm->fd = -1;
	gmem_init_buffer(&vm->mem, ram, RAM_SIZE);
	ck_assert_int_eq(virtio_mmio_add(vm, &dev, &fake_ops, &fake), 0);
}

static void teardown(void)
{
	free(vm);
	free(ram);
}

static uint32_t rd(uint64_t off)
{
	uint32_t v;

	virtio_mmio_access(&dev, off, false, (uint8_t *)&v, 4);
	return v;
}

static void wr(uint64_t off, uint32_t v)
{
	virtio_mmio_access(&dev, off, true, (uint8_t *)&v, 4);
}

/* ACKNOWLEDGE, DRIVER, features with VERSION_1 (plus extra), FEATURES_OK. */
static uint32_t negotiate(uint64_t extra)
{
	uint64_t f = 1ull << VIRTIO_F_VERSION_1 | extra;

	wr(VIRTIO_MMIO_STATUS, VIRTIO_STATUS_ACKNOWLEDGE);
	wr(VIRTIO_MMIO_STATUS, VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER);
	wr(VIRTIO_MMIO_DRV_FEATURES_SEL, 0);
	wr(VIRTIO_MMIO_DRV_FEATURES, (uint32_t)f);
	wr(VIRTIO_MMIO_DRV_FEATURES_SEL, 1);
	wr(VIRTIO_MMIO_DRV_FEATURES, f >> 32);
	wr(VIRTIO_MMIO_STATUS, VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER |
	   VIRTIO_STATUS_FEATURES_OK);
	return rd(VIRTIO_MMIO_STATUS);
}

static void setup_queue(unsigned q, uint32_t num, uint64_t desc)
{
	wr(VIRTIO_MMIO_QUEUE_SEL, q);
	wr(VIRTIO_MMIO_QUEUE_NUM, num);
	wr(VIRTIO_MMIO_QUEUE_DESC_LO, (uint32_t)desc);
	wr(VIRTIO_MMIO_QUEUE_DESC_HI, desc >> 32);
	wr(VIRTIO_MMIO_QUEUE_DRIVER_LO, AVAIL_GPA + 0x400 * q);
	wr(VIRTIO_MMIO_QUEUE_DEVICE_LO, USED_GPA + 0x800 * q);
	wr(VIRTIO_MMIO_QUEUE_READY, 1);
}

static void driver_ok(void)
{
	ck_assert(negotiate(0) & VIRTIO_STATUS_FEATURES_OK);
	setup_queue(0, 64, DESC_GPA);
	wr(VIRTIO_MMIO_STATUS, rd(VIRTIO_MMIO_STATUS) | VIRTIO_STATUS_DRIVER_OK);
}

/* ---- templates ---- */

/* The device as the guest left it, saved, then restored into a fresh VM. */
START_TEST(snapshot_round_trip)
{
	struct virtio_dev back;
	struct snap_writer w;
	struct snap s;
	const struct snap_section *sec;
	struct vm *vm2 = calloc(1, sizeof(*vm2));

	driver_ok();
	setup_queue(1, 32, DESC_GPA + 0x800);
	dev.vq[0].last_avail = 7;
	dev.vq[0].used_idx = 5;
	wr(VIRTIO_MMIO_QUEUE_SEL, 1);
	snap_writer_init(&w);
	virtio_mmio_save(&dev, &w);
	ck_assert_int_eq(snap_finish(&w), 0);
	ck_assert_int_eq(snap_parse(w.data, w.len, &s), 0);
	sec = snap_find(&s, SNAP_DEVICE, 0);
	ck_assert_ptr_nonnull(sec);

	vm2->fd = -1;
	gmem_init_buffer(&vm2->mem, ram, RAM_SIZE);
	ck_assert_int_eq(virtio_mmio_add(vm2, &back, &fake_ops, &fake), 0);
	fake.activate = fake.notify[0] = 0;
	ck_assert_int_eq(virtio_mmio_restore(&back, sec), 0);
	ck_assert_uint_eq(back.status, dev.status);
	ck_assert(back.status & VIRTIO_STATUS_DRIVER_OK);
	ck_assert_uint_eq(back.driver_features, dev.driver_features);
	ck_assert_uint_eq(back.queue_sel, 1);
	ck_assert(back.vq[0].ready && back.vq[1].ready);
	ck_assert_uint_eq(back.vq[0].last_avail, 7);
	ck_assert_uint_eq(back.vq[0].used_idx, 5);
	ck_assert_uint_eq(back.vq[1].size, 32);
	ck_assert_uint_eq(back.vq[1].desc_gpa, DESC_GPA + 0x800);
	/* The backend serves again, as it did before the snapshot. */
	ck_assert(back.activated);
	ck_assert_uint_eq(fake.activate, 1);
	ck_assert_uint_eq(fake.notify[0], 1);
	snap_writer_free(&w);
	free(vm2);
}
END_TEST

/* A state that does not fit the device or RAM is refused, not guessed at. */
START_TEST(snapshot_refused)
{
	struct virtio_dev back;
	struct snap_writer w;
	struct snap s;
	struct vm *vm2 = calloc(1, sizeof(*vm2));
	static const struct virtio_dev_ops other_ops = {
		.name = "other", .device_id = VIRTIO_ID_BLOCK, .num_queues = 2, .queue_max = 64,
	};
	static const struct virtio_dev_ops small_ops = {
		.name = "small", .device_id = VIRTIO_ID_RNG, .features = FAKE_FEATURES,
		.num_queues = 2, .queue_max = 16,
	};

	vm2->fd = -1;
	gmem_init_buffer(&vm2->mem, ram, RAM_SIZE);
	driver_ok();
	setup_queue(1, 32, DESC_GPA + 0x800);
	snap_writer_init(&w);
	virtio_mmio_save(&dev, &w);
	ck_assert_int_eq(snap_finish(&w), 0);
	ck_assert_int_eq(snap_parse(w.data, w.len, &s), 0);

	/* Another device in that slot. */
	ck_assert_int_eq(virtio_mmio_add(vm2, &back, &other_ops, NULL), 0);
	ck_assert_int_eq(virtio_mmio_restore(&back, snap_find(&s, SNAP_DEVICE, 0)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "slot 0 held device"));
	/* Queues bigger than this device allows. */
	vm2->nr_virtio = 0;
	vm2->dev_cmdline[0] = '\0';
	ck_assert_int_eq(virtio_mmio_add(vm2, &back, &small_ops, NULL), 0);
	ck_assert_int_eq(virtio_mmio_restore(&back, snap_find(&s, SNAP_DEVICE, 0)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "queue 0 was saved with 64 entries, "
				     "this device takes at most 16"));
	ck_assert_ptr_null(strstr(husk_lasterr(), "slot 0 held"));
	ck_assert(!back.vq[0].ready);
	/* Rings outside this VM's RAM. */
	vm2->nr_virtio = 0;
	vm2->dev_cmdline[0] = '\0';
	gmem_init_buffer(&vm2->mem, ram, 0x2000);
	ck_assert_int_eq(virtio_mmio_add(vm2, &back, &fake_ops, &fake), 0);
	ck_assert_int_eq(virtio_mmio_restore(&back, snap_find(&s, SNAP_DEVICE, 0)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "queue 0 does not fit this VM: "
				     "avail ring 0x2000 is not in RAM"));
	ck_assert(!(back.status & VIRTIO_STATUS_DRIVER_OK));
	snap_writer_free(&w);
	free(vm2);
}
END_TEST

START_TEST(identity_registers)
{
	ck_assert_uint_eq(rd(VIRTIO_MMIO_MAGIC), 0x74726976);
	ck_assert_uint_eq(rd(VIRTIO_MMIO_VERSION), 2);
	ck_assert_uint_eq(rd(VIRTIO_MMIO_DEVICE_ID), VIRTIO_ID_RNG);
	ck_assert_uint_eq(rd(VIRTIO_MMIO_VENDOR_ID), 0x4b535548);
	ck_assert_uint_eq(rd(VIRTIO_MMIO_SHM_LEN_LO), 0xffffffffu);
	ck_assert_uint_eq(dev.base, 0xd0000000ull);
	ck_assert_uint_eq(dev.irq, 5);
}
END_TEST

START_TEST(cmdline_and_slots)
{
	struct virtio_dev more[VIRTIO_MMIO_MAX_DEVICES];
	unsigned i;

	ck_assert_str_eq(vm->dev_cmdline, " virtio_mmio.device=4K@0xd0000000:5");
	ck_assert_int_eq(virtio_mmio_add(vm, &more[0], &fake_ops, NULL), 0);
	ck_assert_str_eq(vm->dev_cmdline, " virtio_mmio.device=4K@0xd0000000:5"
			 " virtio_mmio.device=4K@0xd0001000:6");
	for (i = 1; i < VIRTIO_MMIO_MAX_DEVICES - 1; i++)
		ck_assert_int_eq(virtio_mmio_add(vm, &more[i], &fake_ops, NULL), 0);
	ck_assert_uint_eq(more[VIRTIO_MMIO_MAX_DEVICES - 2].irq, 14);
	ck_assert_int_eq(virtio_mmio_add(vm, &more[i], &fake_ops, NULL), -ENOSPC);
	ck_assert_uint_eq(vm->nr_virtio, VIRTIO_MMIO_MAX_DEVICES);
	ck_assert_uint_eq(virtio_mmio_irq(2), 7);
	ck_assert_uint_eq(virtio_mmio_irq(3), 9);
}
END_TEST

START_TEST(device_feature_selects)
{
	wr(VIRTIO_MMIO_DEV_FEATURES_SEL, 0);
	ck_assert_uint_eq(rd(VIRTIO_MMIO_DEV_FEATURES), (uint32_t)FAKE_FEATURES);
	wr(VIRTIO_MMIO_DEV_FEATURES_SEL, 1);
	ck_assert_uint_eq(rd(VIRTIO_MMIO_DEV_FEATURES), 1u << (VIRTIO_F_VERSION_1 - 32) | 1u << 3);
	wr(VIRTIO_MMIO_DEV_FEATURES_SEL, 2);
	ck_assert_uint_eq(rd(VIRTIO_MMIO_DEV_FEATURES), 0);
}
END_TEST

START_TEST(features_ok_accepted)
{
	ck_assert(negotiate(FAKE_FEATURES) & VIRTIO_STATUS_FEATURES_OK);
	ck_assert_uint_eq(dev.driver_features, FAKE_FEATURES | 1ull << VIRTIO_F_VERSION_1);
	/* Frozen once FEATURES_OK is set. */
	wr(VIRTIO_MMIO_DRV_FEATURES_SEL, 0);
	wr(VIRTIO_MMIO_DRV_FEATURES, 0);
	ck_assert_uint_eq(dev.driver_features, FAKE_FEATURES | 1ull << VIRTIO_F_VERSION_1);
}
END_TEST

START_TEST(features_ok_refused_without_version_1)
{
	wr(VIRTIO_MMIO_STATUS, VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER);
	wr(VIRTIO_MMIO_DRV_FEATURES_SEL, 0);
	wr(VIRTIO_MMIO_DRV_FEATURES, 1u << 3);
	wr(VIRTIO_MMIO_STATUS, VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER |
	   VIRTIO_STATUS_FEATURES_OK);
	ck_assert(!(rd(VIRTIO_MMIO_STATUS) & VIRTIO_STATUS_FEATURES_OK));
	ck_assert_uint_eq(rd(VIRTIO_MMIO_STATUS), VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER);
}
END_TEST

START_TEST(features_ok_refused_for_unoffered_bit)
{
	ck_assert(!(negotiate(1ull << 4) & VIRTIO_STATUS_FEATURES_OK));
}
END_TEST

START_TEST(features_ok_refused_for_bits_beyond_64)
{
	wr(VIRTIO_MMIO_DRV_FEATURES_SEL, 2);
	wr(VIRTIO_MMIO_DRV_FEATURES, 1);
	ck_assert(!(negotiate(0) & VIRTIO_STATUS_FEATURES_OK));
}
END_TEST

START_TEST(driver_ok_without_features_ok_breaks)
{
	wr(VIRTIO_MMIO_STATUS, VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER |
	   VIRTIO_STATUS_DRIVER_OK);
	ck_assert(rd(VIRTIO_MMIO_STATUS) & VIRTIO_STATUS_NEEDS_RESET);
	ck_assert(dev.broken);
	ck_assert_uint_eq(fake.activate, 0);
}
END_TEST

START_TEST(queue_config_and_ready)
{
	wr(VIRTIO_MMIO_QUEUE_SEL, 0);
	ck_assert_uint_eq(rd(VIRTIO_MMIO_QUEUE_NUM_MAX), 64);
	wr(VIRTIO_MMIO_QUEUE_SEL, 1);
	ck_assert_uint_eq(rd(VIRTIO_MMIO_QUEUE_NUM_MAX), 64);
	wr(VIRTIO_MMIO_QUEUE_SEL, 2);
	ck_assert_uint_eq(rd(VIRTIO_MMIO_QUEUE_NUM_MAX), 0);
	ck_assert_uint_eq(rd(VIRTIO_MMIO_QUEUE_READY), 0);

	negotiate(0);
	setup_queue(1, 32, DESC_GPA + 0x800);
	ck_assert_uint_eq(rd(VIRTIO_MMIO_QUEUE_READY), 1);
	ck_assert(dev.vq[1].ready);
	ck_assert_uint_eq(dev.vq[1].size, 32);
	ck_assert_uint_eq(dev.vq[1].desc_gpa, DESC_GPA + 0x800);
	ck_assert_uint_eq(dev.vq[1].avail_gpa, AVAIL_GPA + 0x400);
	ck_assert_uint_eq(dev.vq[1].used_gpa, USED_GPA + 0x800);
	ck_assert_ptr_eq(dev.vq[1].mem, &vm->mem);
	/* Frozen while ready. */
	wr(VIRTIO_MMIO_QUEUE_NUM, 16);
	wr(VIRTIO_MMIO_QUEUE_DESC_LO, 0x5000);
	ck_assert_uint_eq(dev.vq[1].size, 32);
	ck_assert_uint_eq(dev.vq[1].desc_gpa, DESC_GPA + 0x800);
	/* Disable: configurable again. */
	wr(VIRTIO_MMIO_QUEUE_READY, 0);
	ck_assert_uint_eq(rd(VIRTIO_MMIO_QUEUE_READY), 0);
	wr(VIRTIO_MMIO_QUEUE_NUM, 16);
	ck_assert_uint_eq(dev.vq[1].size, 16);
	ck_assert(!dev.broken);
}
END_TEST

START_TEST(queue_outside_ram_breaks)
{
	negotiate(0);
	setup_queue(0, 64, RAM_SIZE - 0x100);
	ck_assert_uint_eq(rd(VIRTIO_MMIO_QUEUE_READY), 0);
	ck_assert(dev.broken);
	ck_assert(rd(VIRTIO_MMIO_STATUS) & VIRTIO_STATUS_NEEDS_RESET);
}
END_TEST

START_TEST(queue_bigger_than_max_breaks)
{
	negotiate(0);
	setup_queue(0, 128, DESC_GPA);
	ck_assert_uint_eq(rd(VIRTIO_MMIO_QUEUE_READY), 0);
	ck_assert(dev.broken);
}
END_TEST

START_TEST(queue_size_not_power_of_2_breaks)
{
	negotiate(0);
	setup_queue(0, 48, DESC_GPA);
	ck_assert_uint_eq(rd(VIRTIO_MMIO_QUEUE_READY), 0);
	ck_assert(dev.broken);
}
END_TEST

START_TEST(driver_ok_activates_and_notifies)
{
	driver_ok();
	ck_assert(rd(VIRTIO_MMIO_STATUS) & VIRTIO_STATUS_DRIVER_OK);
	ck_assert_uint_eq(fake.activate, 1);
	/* One catch-up notify for the ready queue 0, none for unready queue 1. */
	ck_assert_uint_eq(fake.notify[0], 1);
	ck_assert_uint_eq(fake.notify[1], 0);
	wr(VIRTIO_MMIO_QUEUE_NOTIFY, 0);
	ck_assert_uint_eq(fake.notify[0], 2);
	wr(VIRTIO_MMIO_QUEUE_NOTIFY, 1);	/* not ready */
	wr(VIRTIO_MMIO_QUEUE_NOTIFY, 7);	/* no such queue */
	ck_assert_uint_eq(fake.notify[1], 0);
	ck_assert_uint_eq(fake.notify[0], 2);
}
END_TEST

START_TEST(notify_before_driver_ok_ignored)
{
	negotiate(0);
	setup_queue(0, 64, DESC_GPA);
	wr(VIRTIO_MMIO_QUEUE_NOTIFY, 0);
	ck_assert_uint_eq(fake.notify[0], 0);
}
END_TEST

START_TEST(reset_clears_state)
{
	driver_ok();
	virtio_notify_used(&dev, 0);
	ck_assert_uint_ne(rd(VIRTIO_MMIO_INT_STATUS), 0);
	wr(VIRTIO_MMIO_STATUS, 0);
	ck_assert_uint_eq(fake.reset, 1);
	ck_assert_uint_eq(rd(VIRTIO_MMIO_STATUS), 0);
	ck_assert_uint_eq(rd(VIRTIO_MMIO_INT_STATUS), 0);
	ck_assert_uint_eq(dev.driver_features, 0);
	wr(VIRTIO_MMIO_QUEUE_SEL, 0);
	ck_assert_uint_eq(rd(VIRTIO_MMIO_QUEUE_READY), 0);
	ck_assert_uint_eq(dev.vq[0].desc_gpa, 0);
	ck_assert_uint_eq(dev.vq[0].avail_gpa, 0);
	ck_assert_uint_eq(dev.vq[0].used_gpa, 0);
	ck_assert_uint_eq(dev.vq[0].last_avail, 0);
	ck_assert_uint_eq(dev.vq[0].size, 64);
	wr(VIRTIO_MMIO_QUEUE_NOTIFY, 0);
	ck_assert_uint_eq(fake.notify[0], 1);	/* only the catch-up one from before */
}
END_TEST

START_TEST(reset_clears_broken)
{
	negotiate(0);
	setup_queue(0, 64, RAM_SIZE);
	ck_assert(dev.broken);
	wr(VIRTIO_MMIO_STATUS, 0);
	ck_assert(!dev.broken);
	ck_assert_uint_eq(rd(VIRTIO_MMIO_STATUS), 0);
	driver_ok();
	ck_assert_uint_eq(fake.activate, 1);
}
END_TEST

START_TEST(needs_reset_sticky)
{
	driver_ok();
	virtio_set_broken(&dev, "test");
	ck_assert(rd(VIRTIO_MMIO_STATUS) & VIRTIO_STATUS_NEEDS_RESET);
	/* The driver cannot clear it by rewriting the status... */
	wr(VIRTIO_MMIO_STATUS, VIRTIO_STATUS_ACKNOWLEDGE);
	ck_assert(rd(VIRTIO_MMIO_STATUS) & VIRTIO_STATUS_NEEDS_RESET);
	/* ...the device told it through a config interrupt, and stops serving. */
	ck_assert(rd(VIRTIO_MMIO_INT_STATUS) & VIRTIO_INT_CONFIG);
	wr(VIRTIO_MMIO_QUEUE_NOTIFY, 0);
	ck_assert_uint_eq(fake.notify[0], 1);
}
END_TEST

START_TEST(config_space_bounds)
{
	uint8_t b[8];
	uint64_t q;
	uint16_t w;

	virtio_mmio_access(&dev, VIRTIO_MMIO_CONFIG + 1, false, b, 1);
	ck_assert_uint_eq(b[0], 0xa1);
	virtio_mmio_access(&dev, VIRTIO_MMIO_CONFIG + 2, false, (uint8_t *)&w, 2);
	ck_assert_uint_eq(w, 0xa3a2);
	virtio_mmio_access(&dev, VIRTIO_MMIO_CONFIG + 4, false, (uint8_t *)&q, 8);
	ck_assert_uint_eq(q, 0xabaaa9a8a7a6a5a4ull);
	ck_assert_uint_eq(fake.read_config, 3);
	/* Crossing the end of the 12-byte space: zeros, backend not asked. */
	memset(b, 0x55, sizeof(b));
	virtio_mmio_access(&dev, VIRTIO_MMIO_CONFIG + 8, false, b, 8);
	ck_assert_uint_eq(b[0], 0);
	ck_assert_uint_eq(b[7], 0);
	virtio_mmio_access(&dev, VIRTIO_MMIO_CONFIG + 0x200, false, b, 4);
	ck_assert_uint_eq(b[0], 0);
	ck_assert_uint_eq(fake.read_config, 3);
	/* Odd width: refused. */
	virtio_mmio_access(&dev, VIRTIO_MMIO_CONFIG, false, b, 3);
	ck_assert_uint_eq(fake.read_config, 3);
	/* Writes within go to the backend, beyond are dropped. */
	b[0] = 0x11;
	virtio_mmio_access(&dev, VIRTIO_MMIO_CONFIG + 11, true, b, 1);
	ck_assert_uint_eq(fake.config[11], 0x11);
	virtio_mmio_access(&dev, VIRTIO_MMIO_CONFIG + 11, true, b, 2);
	ck_assert_uint_eq(fake.write_config, 1);
}
END_TEST

START_TEST(interrupt_status_and_ack)
{
	uint16_t *avail_flags = (uint16_t *)(ram + AVAIL_GPA);

	driver_ok();
	ck_assert_uint_eq(rd(VIRTIO_MMIO_INT_STATUS), 0);
	virtio_notify_used(&dev, 0);
	ck_assert_uint_eq(rd(VIRTIO_MMIO_INT_STATUS), VIRTIO_INT_USED);
	virtio_config_changed(&dev);
	ck_assert_uint_eq(rd(VIRTIO_MMIO_INT_STATUS), VIRTIO_INT_USED | VIRTIO_INT_CONFIG);
	ck_assert_uint_eq(rd(VIRTIO_MMIO_CONFIG_GEN), 1);
	wr(VIRTIO_MMIO_INT_ACK, VIRTIO_INT_USED);
	ck_assert_uint_eq(rd(VIRTIO_MMIO_INT_STATUS), VIRTIO_INT_CONFIG);
	wr(VIRTIO_MMIO_INT_ACK, VIRTIO_INT_CONFIG);
	ck_assert_uint_eq(rd(VIRTIO_MMIO_INT_STATUS), 0);
	/* The driver suppressed interrupts: none raised. */
	*avail_flags = 1;
	virtio_notify_used(&dev, 0);
	ck_assert_uint_eq(rd(VIRTIO_MMIO_INT_STATUS), 0);
	/* Queue 1 is not ready: nothing either. */
	*avail_flags = 0;
	virtio_notify_used(&dev, 1);
	ck_assert_uint_eq(rd(VIRTIO_MMIO_INT_STATUS), 0);
}
END_TEST

START_TEST(register_width_enforced)
{
	uint8_t b[2] = { 0x12, 0x34 };
	uint16_t w = 0xffff;

	virtio_mmio_access(&dev, VIRTIO_MMIO_MAGIC, false, (uint8_t *)&w, 2);
	ck_assert_uint_eq(w, 0);
	virtio_mmio_access(&dev, VIRTIO_MMIO_STATUS, true, b, 1);
	ck_assert_uint_eq(rd(VIRTIO_MMIO_STATUS), 0);
	/* Unaligned 32-bit access inside the register file. */
	virtio_mmio_access(&dev, VIRTIO_MMIO_STATUS + 1, true, (uint8_t *)&w, 4);
	ck_assert_uint_eq(rd(VIRTIO_MMIO_STATUS), 0);
	/* Reads of write-only or unknown registers are zero. */
	ck_assert_uint_eq(rd(VIRTIO_MMIO_QUEUE_NOTIFY), 0);
	ck_assert_uint_eq(rd(0x0f0), 0);
}
END_TEST

START_TEST(destroy_calls_backend)
{
	virtio_mmio_destroy(&dev);
	ck_assert_uint_eq(fake.destroy, 1);
}
END_TEST

/* ---- virtio-blk through the transport, synchronous without KVM ---- */

#define BLK_SECTORS 8
#define REQ_HDR_GPA 0x8000u
#define REQ_DATA_GPA 0x9000u
#define REQ_STATUS_GPA 0xa000u

static char img_path[64];
static struct virtio_dev *blk;

static void blk_setup(void)
{
	uint8_t sector[512];
	unsigned i;
	int fd;

	ram = calloc(1, RAM_SIZE);
	vm = calloc(1, sizeof(*vm));
	ck_assert_ptr_nonnull(ram);
	ck_assert_ptr_nonnull(vm);
	vm->fd = -1;
	gmem_init_buffer(&vm->mem, ram, RAM_SIZE);
	strcpy(img_path, "/tmp/husk-blk-test.XXXXXX");
	fd = mkstemp(img_path);
	ck_assert_int_ge(fd, 0);
	/* Sector n is filled with byte n; plus a partial sector that must not show. */
	for (i = 0; i < BLK_SECTORS; i++) {
		memset(sector, i, sizeof(sector));
		ck_assert_int_eq(write(fd, sector, sizeof(sector)), sizeof(sector));
	}
	ck_assert_int_eq(write(fd, sector, 100), 100);
	close(fd);
	ck_assert_int_eq(virtio_blk_create(vm, img_path, true), 0);
	blk = vm->virtio[0];
}

static void blk_teardown(void)
{
	virtio_mmio_destroy(blk);
	unlink(img_path);
	free(vm);
	free(ram);
}

static uint32_t brd(uint64_t off)
{
	uint32_t v;

	virtio_mmio_access(blk, off, false, (uint8_t *)&v, 4);
	return v;
}

static void bwr(uint64_t off, uint32_t v)
{
	virtio_mmio_access(blk, off, true, (uint8_t *)&v, 4);
}

static void blk_up(void)
{
	uint32_t f0, f1;

	bwr(VIRTIO_MMIO_STATUS, VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER);
	bwr(VIRTIO_MMIO_DEV_FEATURES_SEL, 0);
	f0 = brd(VIRTIO_MMIO_DEV_FEATURES);
	bwr(VIRTIO_MMIO_DEV_FEATURES_SEL, 1);
	f1 = brd(VIRTIO_MMIO_DEV_FEATURES);
	ck_assert(f0 & 1u << 5);	/* VIRTIO_BLK_F_RO */
	ck_assert(f1 & 1u << (VIRTIO_F_VERSION_1 - 32));
	bwr(VIRTIO_MMIO_DRV_FEATURES_SEL, 0);
	bwr(VIRTIO_MMIO_DRV_FEATURES, f0);
	bwr(VIRTIO_MMIO_DRV_FEATURES_SEL, 1);
	bwr(VIRTIO_MMIO_DRV_FEATURES, f1);
	bwr(VIRTIO_MMIO_STATUS, VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER |
	    VIRTIO_STATUS_FEATURES_OK);
	bwr(VIRTIO_MMIO_QUEUE_SEL, 0);
	bwr(VIRTIO_MMIO_QUEUE_NUM, 16);
	bwr(VIRTIO_MMIO_QUEUE_DESC_LO, DESC_GPA);
	bwr(VIRTIO_MMIO_QUEUE_DRIVER_LO, AVAIL_GPA);
	bwr(VIRTIO_MMIO_QUEUE_DEVICE_LO, USED_GPA);
	bwr(VIRTIO_MMIO_QUEUE_READY, 1);
	bwr(VIRTIO_MMIO_STATUS, brd(VIRTIO_MMIO_STATUS) | VIRTIO_STATUS_DRIVER_OK);
	ck_assert_uint_eq(brd(VIRTIO_MMIO_STATUS) & VIRTIO_STATUS_NEEDS_RESET, 0);
}

static void put_desc(unsigned i, uint64_t addr, uint32_t len, uint16_t flags, uint16_t next)
{
	uint8_t *d = ram + DESC_GPA + 16 * i;

	memcpy(d, &addr, 8);
	memcpy(d + 8, &len, 4);
	memcpy(d + 12, &flags, 2);
	memcpy(d + 14, &next, 2);
}

/* Post header + data (in or out) + status as descriptors 0..2; returns status. */
static uint8_t blk_req(uint32_t type, uint64_t sector, uint32_t data_len, bool data_in,
		       uint32_t *used_len)
{
	uint16_t *avail_idx = (uint16_t *)(ram + AVAIL_GPA + 2);
	uint16_t *ring = (uint16_t *)(ram + AVAIL_GPA + 4);
	uint16_t used_before = *(uint16_t *)(ram + USED_GPA + 2);
	uint32_t hdr[4] = { type, 0, (uint32_t)sector, (uint32_t)(sector >> 32) };

	memcpy(ram + REQ_HDR_GPA, hdr, sizeof(hdr));
	ram[REQ_STATUS_GPA] = 0xee;
	put_desc(0, REQ_HDR_GPA, 16, 1, 1);
	put_desc(1, REQ_DATA_GPA, data_len, 1 | (data_in ? 2 : 0), 2);
	put_desc(2, REQ_STATUS_GPA, 1, 2, 0);
	ring[*avail_idx % 16] = 0;
	(*avail_idx)++;
	bwr(VIRTIO_MMIO_QUEUE_NOTIFY, 0);
	ck_assert_uint_eq(*(uint16_t *)(ram + USED_GPA + 2), (uint16_t)(used_before + 1));
	memcpy(used_len, ram + USED_GPA + 4 + 8 * (used_before % 16) + 4, 4);
	return ram[REQ_STATUS_GPA];
}

START_TEST(blk_capacity_and_read)
{
	uint64_t cap;
	uint32_t len;

	virtio_mmio_access(blk, VIRTIO_MMIO_CONFIG, false, (uint8_t *)&cap, 8);
	ck_assert_uint_eq(cap, BLK_SECTORS);
	ck_assert_uint_eq(brd(VIRTIO_MMIO_DEVICE_ID), VIRTIO_ID_BLOCK);
	blk_up();
	ck_assert_uint_eq(blk_req(0, 3, 1024, true, &len), 0);
	ck_assert_uint_eq(len, 1025);
	ck_assert_uint_eq(ram[REQ_DATA_GPA], 3);
	ck_assert_uint_eq(ram[REQ_DATA_GPA + 1023], 4);
	ck_assert(brd(VIRTIO_MMIO_INT_STATUS) & VIRTIO_INT_USED);
}
END_TEST

START_TEST(blk_out_of_range)
{
	uint32_t len;

	blk_up();
	/* Last sector is fine, one past it, huge and wrapping sectors are not. */
	ck_assert_uint_eq(blk_req(0, BLK_SECTORS - 1, 512, true, &len), 0);
	ck_assert_uint_eq(blk_req(0, BLK_SECTORS - 1, 1024, true, &len), 1);
	ck_assert_uint_eq(len, 1);
	ck_assert_uint_eq(blk_req(0, BLK_SECTORS, 512, true, &len), 1);
	ck_assert_uint_eq(blk_req(0, UINT64_MAX, 512, true, &len), 1);
	ck_assert_uint_eq(blk_req(0, UINT64_MAX / 512 + 1, 512, true, &len), 1);
	/* Not a whole number of sectors. */
	ck_assert_uint_eq(blk_req(0, 0, 100, true, &len), 1);
	ck_assert_uint_eq(brd(VIRTIO_MMIO_STATUS) & VIRTIO_STATUS_NEEDS_RESET, 0);
}
END_TEST

START_TEST(blk_write_refused_read_only)
{
	uint32_t len;

	blk_up();
	memset(ram + REQ_DATA_GPA, 0x77, 512);
	ck_assert_uint_eq(blk_req(1, 0, 512, false, &len), 1);	/* IOERR */
	ck_assert_uint_eq(len, 1);
	ck_assert_uint_eq(blk_req(0, 0, 512, true, &len), 0);
	ck_assert_uint_eq(ram[REQ_DATA_GPA], 0);	/* image unchanged */
	ck_assert_uint_eq(blk_req(4, 0, 0, false, &len), 0);	/* flush: OK */
}
END_TEST

START_TEST(blk_get_id_and_unsupported)
{
	uint32_t len;

	blk_up();
	ck_assert_uint_eq(blk_req(8, 0, 20, true, &len), 0);
	ck_assert_uint_eq(len, 21);
	ck_assert_str_eq((char *)ram + REQ_DATA_GPA, "husk-rootfs");
	ck_assert_uint_eq(blk_req(99, 0, 512, true, &len), 2);	/* UNSUPP */
}
END_TEST

START_TEST(blk_malformed_request_breaks)
{
	uint16_t *avail_idx = (uint16_t *)(ram + AVAIL_GPA + 2);
	uint16_t *ring = (uint16_t *)(ram + AVAIL_GPA + 4);

	blk_up();
	/* A lone 8-byte readable buffer: no full header, no status byte. */
	put_desc(0, REQ_HDR_GPA, 8, 0, 0);
	ring[0] = 0;
	*avail_idx = 1;
	bwr(VIRTIO_MMIO_QUEUE_NOTIFY, 0);
	ck_assert(brd(VIRTIO_MMIO_STATUS) & VIRTIO_STATUS_NEEDS_RESET);
	/* A driver reset brings it back. */
	bwr(VIRTIO_MMIO_STATUS, 0);
	memset(ram + AVAIL_GPA, 0, 64);
	memset(ram + USED_GPA, 0, 64);
	blk_up();
}
END_TEST

START_TEST(blk_missing_image)
{
	ck_assert_int_lt(virtio_blk_create(vm, "/nonexistent/husk.img", true), 0);
	ck_assert_uint_eq(vm->nr_virtio, 1);
}
END_TEST

Suite *virtio_mmio_suite(void)
{
	Suite *s = suite_create("virtio_mmio");
	TCase *t = tcase_create("registers");

	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, identity_registers);
	tcase_add_test(t, snapshot_round_trip);
	tcase_add_test(t, snapshot_refused);
	tcase_add_test(t, cmdline_and_slots);
	tcase_add_test(t, device_feature_selects);
	tcase_add_test(t, features_ok_accepted);
	tcase_add_test(t, features_ok_refused_without_version_1);
	tcase_add_test(t, features_ok_refused_for_unoffered_bit);
	tcase_add_test(t, features_ok_refused_for_bits_beyond_64);
	tcase_add_test(t, driver_ok_without_features_ok_breaks);
	tcase_add_test(t, queue_config_and_ready);
	tcase_add_test(t, queue_outside_ram_breaks);
	tcase_add_test(t, queue_bigger_than_max_breaks);
	tcase_add_test(t, queue_size_not_power_of_2_breaks);
	tcase_add_test(t, driver_ok_activates_and_notifies);
	tcase_add_test(t, notify_before_driver_ok_ignored);
	tcase_add_test(t, reset_clears_state);
	tcase_add_test(t, reset_clears_broken);
	tcase_add_test(t, needs_reset_sticky);
	tcase_add_test(t, config_space_bounds);
	tcase_add_test(t, interrupt_status_and_ack);
	tcase_add_test(t, register_width_enforced);
	tcase_add_test(t, destroy_calls_backend);
	suite_add_tcase(s, t);

	t = tcase_create("virtio-blk");
	tcase_add_checked_fixture(t, blk_setup, blk_teardown);
	tcase_add_test(t, blk_capacity_and_read);
	tcase_add_test(t, blk_out_of_range);
	tcase_add_test(t, blk_write_refused_read_only);
	tcase_add_test(t, blk_get_id_and_unsupported);
	tcase_add_test(t, blk_malformed_request_breaks);
	tcase_add_test(t, blk_missing_image);
	suite_add_tcase(s, t);
	return s;
}
