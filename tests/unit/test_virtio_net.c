/*
 * Unit tests for virtio-net, driven through the virtio-mmio registers on
 * malloc'd guest RAM like test_virtio_mmio.c, with a SOCK_DGRAM socketpair
 * standing in for the tap (one datagram = one bare Ethernet frame, as a tap
 * without IFF_VNET_HDR carries them; the guest's 12-byte header is the
 * device's business and must never show up on that side). The VM has
 * no KVM fd, so queue notifications run synchronously; the event loop is
 * initialised but only started in the test of the tap callback, and its
 * epoll set shows whether the device is polling the "tap".
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "machine/evloop.h"
#include "virtio/virtio_mmio.h"
#include "virtio/virtio_net.h"
#include "machine/vm.h"
#include "suites.h"

#define RAM_SIZE (1u << 20)
#define QSIZE 16
#define BUF_GPA 0x10000u


#define HDR 12			/* virtio_net_hdr_v1 */

#define F_MAC (1ull << 5)
#define F_STATUS (1ull << 16)

#define VRING_DESC_F_NEXT 1
#define VRING_DESC_F_WRITE 2

static uint8_t *ram;
static struct vm *vm;
static struct virtio_dev *net;
static int peer;			/* the "host" end of the fake tap */
static int dev_fd;			/* the device's end */
static const uint8_t test_mac[6] = { 0x06, 0x00, 0x00, 0x00, 0x00, 0x07 };

/* Queue q: descriptors at 0x1000 + 0x1000q, avail +0x200, used +0x400. */
static uint64_t desc_gpa(unsigned q) { return 0x1000 + 0x1000 * q; }
static uint16_t *avail_idx(unsigned q) { return (uint16_t *)(ram + desc_gpa(q) + 0x202); }
static uint16_t *avail_ring(unsigned q) { return (uint16_t *)(ram + desc_gpa(q) + 0x204); }
static uint16_t used_idx(unsigned q)
{
	return __atomic_load_n((uint16_t *)(ram + desc_gpa(q) + 0x402), __ATOMIC_ACQUIRE);
}

static void used_elem(unsigned q, unsigned i, uint32_t *id, uint32_t *len)
{
	uint8_t *e = ram + desc_gpa(q) + 0x404 + 8 * (i % QSIZE);

	memcpy(id, e, 4);
	memcpy(len, e + 4, 4);
}

static uint32_t rd(uint64_t off)
{
	uint32_t v;

	virtio_mmio_access(net, off, false, (uint8_t *)&v, 4);
	return v;
}

static void wr(uint64_t off, uint32_t v)
{
	virtio_mmio_access(net, off, true, (uint8_t *)&v, 4);
}

static void put_desc(unsigned q, unsigned i, uint64_t addr, uint32_t len, uint16_t flags,
		     uint16_t next)
{
	uint8_t *d = ram + desc_gpa(q) + 16 * i;

	memcpy(d, &addr, 8);
	memcpy(d + 8, &len, 4);
	memcpy(d + 12, &flags, 2);
	memcpy(d + 14, &next, 2);
}

static void post(unsigned q, uint16_t head)
{
	avail_ring(q)[*avail_idx(q) % QSIZE] = head;
	__atomic_store_n(avail_idx(q), *avail_idx(q) + 1, __ATOMIC_RELEASE);
}

static void kick(unsigned q)
{
	wr(VIRTIO_MMIO_QUEUE_NOTIFY, q);
}

static void setup(void)
{
	int sv[2];

	ram = calloc(1, RAM_SIZE);
	vm = calloc(1, sizeof(*vm));
	ck_assert_ptr_nonnull(ram);
	ck_assert_ptr_nonnull(vm);
	vm->fd = -1;
	gmem_init_buffer(&vm->mem, ram, RAM_SIZE);
	ck_assert_int_eq(evloop_init(&vm->loop), 0);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv),
			 0);
	peer = sv[1];
	dev_fd = sv[0];
	ck_assert_int_eq(virtio_net_create(vm, sv[0], test_mac), 0);
	net = vm->virtio[0];
}

static void teardown(void)
{
	evloop_stop(&vm->loop);
	virtio_mmio_destroy(net);
	evloop_free(&vm->loop);
	close(peer);
	free(vm);
	free(ram);
}

static void bring_up(void)
{
	uint64_t f = 1ull << VIRTIO_F_VERSION_1 | F_MAC | F_STATUS;
	unsigned q;

	wr(VIRTIO_MMIO_STATUS, VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER);
	wr(VIRTIO_MMIO_DRV_FEATURES_SEL, 0);
	wr(VIRTIO_MMIO_DRV_FEATURES, (uint32_t)f);
	wr(VIRTIO_MMIO_DRV_FEATURES_SEL, 1);
	wr(VIRTIO_MMIO_DRV_FEATURES, f >> 32);
	wr(VIRTIO_MMIO_STATUS, VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER |
	   VIRTIO_STATUS_FEATURES_OK);
	ck_assert(rd(VIRTIO_MMIO_STATUS) & VIRTIO_STATUS_FEATURES_OK);
	for (q = 0; q < 2; q++) {
		wr(VIRTIO_MMIO_QUEUE_SEL, q);
		wr(VIRTIO_MMIO_QUEUE_NUM, QSIZE);
		wr(VIRTIO_MMIO_QUEUE_DESC_LO, desc_gpa(q));
		wr(VIRTIO_MMIO_QUEUE_DRIVER_LO, desc_gpa(q) + 0x200);
		wr(VIRTIO_MMIO_QUEUE_DEVICE_LO, desc_gpa(q) + 0x400);
		wr(VIRTIO_MMIO_QUEUE_READY, 1);
	}
	wr(VIRTIO_MMIO_STATUS, rd(VIRTIO_MMIO_STATUS) | VIRTIO_STATUS_DRIVER_OK);
	ck_assert(!(rd(VIRTIO_MMIO_STATUS) & VIRTIO_STATUS_NEEDS_RESET));
}

/* Is the device watching its fd (registered with the not-started loop)? */
static bool polling(void)
{
	struct evloop *el = &vm->loop;

	return (unsigned)dev_fd < el->nregs && el->regs[dev_fd].used;
}

/* A bare frame of len bytes from the "host", every byte fill. */
static void send_frame(size_t len, uint8_t fill)
{
	uint8_t buf[2048];

	ck_assert_uint_le(len, sizeof(buf));
	memset(buf, fill, len);
	ck_assert_int_eq(send(peer, buf, len, 0), (ssize_t)len);
}

/*
 * A guest header that asks for every offload there is: NEEDS_CSUM with a
 * checksum start/offset, GSO TCPv4 with ECN, header length and segment
 * size. With no offload features negotiated the device must ignore it.
 */
static void put_hostile_hdr(uint8_t *h)
{
	h[0] = 0x01;				/* flags: NEEDS_CSUM */
	h[1] = 0x81;				/* gso_type: TCPV4 | ECN */
	h[2] = 54; h[3] = 0;			/* hdr_len */
	h[4] = 0xa8; h[5] = 0x05;		/* gso_size 1448 */
	h[6] = 34; h[7] = 0;			/* csum_start */
	h[8] = 16; h[9] = 0;			/* csum_offset */
	h[10] = 0xff; h[11] = 0xff;		/* num_buffers */
}

/* One device-writable rx buffer of len bytes as descriptor i. */
static void post_rx(unsigned i, uint32_t len)
{
	put_desc(0, i, BUF_GPA + 0x1000 * i, len, VRING_DESC_F_WRITE, 0);
	post(0, i);
}

START_TEST(identity_and_config)
{
	uint8_t cfg[8];
	unsigned i;
	uint32_t lo;

	ck_assert_uint_eq(rd(VIRTIO_MMIO_DEVICE_ID), VIRTIO_ID_NET);
	wr(VIRTIO_MMIO_DEV_FEATURES_SEL, 0);
	lo = rd(VIRTIO_MMIO_DEV_FEATURES);
	ck_assert_uint_eq(lo & (F_MAC | F_STATUS), F_MAC | F_STATUS);
	/* No offloads: CSUM (0), GUEST_CSUM (1), TSO/UFO (7..14), MRG_RXBUF (15). */
	ck_assert_uint_eq(lo & 0xff83, 0);
	wr(VIRTIO_MMIO_DEV_FEATURES_SEL, 1);
	ck_assert(rd(VIRTIO_MMIO_DEV_FEATURES) & 1);	/* VERSION_1 */
	for (i = 0; i < sizeof(cfg); i++)
		virtio_mmio_access(net, VIRTIO_MMIO_CONFIG + i, false, cfg + i, 1);
	ck_assert_mem_eq(cfg, test_mac, 6);
	ck_assert_uint_eq(cfg[6] | cfg[7] << 8, 1);	/* LINK_UP */
	ck_assert_str_eq(vm->dev_cmdline, " virtio_mmio.device=4K@0xd0000000:5");
}
END_TEST

START_TEST(tx_guest_header_never_reaches_tap)
{
	struct virtio_net_stats st;
	uint8_t got[256];
	uint32_t id, len;
	unsigned i;

	bring_up();
	/* Hostile header, split mid-frame over 3 descriptors. */
	put_hostile_hdr(ram + BUF_GPA);
	for (i = 0; i < 60; i++)
		ram[BUF_GPA + 0x100 + i] = i;
	put_desc(1, 0, BUF_GPA, 12, VRING_DESC_F_NEXT, 1);
	put_desc(1, 1, BUF_GPA + 0x100, 20, VRING_DESC_F_NEXT, 2);
	put_desc(1, 2, BUF_GPA + 0x100 + 20, 40, 0, 0);
	post(1, 0);
	kick(1);
	/* Exactly the frame: no header in front, nothing added. */
	ck_assert_int_eq(recv(peer, got, sizeof(got), MSG_DONTWAIT), 60);
	for (i = 0; i < 60; i++)
		ck_assert_uint_eq(got[i], i);
	ck_assert_uint_eq(used_idx(1), 1);
	used_elem(1, 0, &id, &len);
	ck_assert_uint_eq(id, 0);
	ck_assert_uint_eq(len, 0);
	virtio_net_stats(net, &st);
	ck_assert_uint_eq(st.tx_frames, 1);
	ck_assert_uint_eq(st.tx_bytes, 60);
	ck_assert_uint_eq(st.tx_dropped, 0);
}
END_TEST

/* Header and frame in one buffer, and the header itself split in two. */
START_TEST(tx_header_anywhere_in_the_chain)
{
	uint8_t got[256];
	unsigned i;

	bring_up();
	put_hostile_hdr(ram + BUF_GPA);
	for (i = 0; i < 100; i++)
		ram[BUF_GPA + HDR + i] = 0x80 + i;
	put_desc(1, 0, BUF_GPA, HDR + 100, 0, 0);
	post(1, 0);
	put_hostile_hdr(ram + BUF_GPA + 0x1000);
	for (i = 0; i < 64; i++)
		ram[BUF_GPA + 0x1000 + HDR + i] = 0xc0 ^ i;
	put_desc(1, 1, BUF_GPA + 0x1000, 5, VRING_DESC_F_NEXT, 2);
	put_desc(1, 2, BUF_GPA + 0x1000 + 5, HDR - 5 + 64, 0, 0);
	post(1, 1);
	kick(1);
	ck_assert_int_eq(recv(peer, got, sizeof(got), MSG_DONTWAIT), 100);
	for (i = 0; i < 100; i++)
		ck_assert_uint_eq(got[i], 0x80 + i);
	ck_assert_int_eq(recv(peer, got, sizeof(got), MSG_DONTWAIT), 64);
	for (i = 0; i < 64; i++)
		ck_assert_uint_eq(got[i], 0xc0 ^ i);
	ck_assert_uint_eq(used_idx(1), 2);
}
END_TEST

START_TEST(tx_bad_sizes_dropped)
{
	struct virtio_net_stats st;
	uint8_t got[64];

	bring_up();
	put_desc(1, 0, BUF_GPA, 25, 0, 0);		/* runt: header + 13 bytes */
	put_desc(1, 1, BUF_GPA, 65551, 0, 0);		/* over 65550 */
	post(1, 0);
	post(1, 1);
	kick(1);
	ck_assert_int_eq(recv(peer, got, sizeof(got), MSG_DONTWAIT), -1);
	ck_assert_int_eq(errno, EAGAIN);
	ck_assert_uint_eq(used_idx(1), 2);
	virtio_net_stats(net, &st);
	ck_assert_uint_eq(st.tx_dropped, 2);
	ck_assert_uint_eq(st.tx_frames, 0);
	ck_assert(!(rd(VIRTIO_MMIO_STATUS) & VIRTIO_STATUS_NEEDS_RESET));
}
END_TEST

START_TEST(rx_frame_into_buffer)
{
	struct virtio_net_stats st;
	uint8_t frame[88];
	uint32_t id, len;
	unsigned i;

	bring_up();
	memset(ram + BUF_GPA, 0x55, 2048);
	put_hostile_hdr(ram + BUF_GPA);	/* stale bytes where the header goes */
	post_rx(0, 1526);
	kick(0);
	ck_assert(polling());		/* buffer held, waiting for a frame */
	ck_assert_uint_eq(used_idx(0), 0);
	for (i = 0; i < sizeof(frame); i++)
		frame[i] = 3 * i + 1;
	ck_assert_int_eq(send(peer, frame, sizeof(frame), 0), (ssize_t)sizeof(frame));
	kick(0);			/* synchronous stand-in for the tap callback */
	ck_assert_uint_eq(used_idx(0), 1);
	used_elem(0, 0, &id, &len);
	ck_assert_uint_eq(id, 0);
	ck_assert_uint_eq(len, HDR + sizeof(frame));
	/* The header is husk's: zero, but num_buffers = 1 (le16). */
	for (i = 0; i < HDR; i++)
		ck_assert_uint_eq(ram[BUF_GPA + i], i == 10 ? 1 : 0);
	ck_assert_mem_eq(ram + BUF_GPA + HDR, frame, sizeof(frame));
	ck_assert_uint_eq(ram[BUF_GPA + HDR + sizeof(frame)], 0x55);
	/* No buffers left: the fd must not be polled although data may come. */
	ck_assert(!polling());
	virtio_net_stats(net, &st);
	ck_assert_uint_eq(st.rx_frames, 1);
	ck_assert_uint_eq(st.rx_bytes, sizeof(frame));
}
END_TEST

/* A receive buffer that splits the header: header and frame land right. */
START_TEST(rx_header_split_over_descriptors)
{
	uint8_t frame[200];
	uint32_t id, len;
	unsigned i;

	bring_up();
	memset(ram + BUF_GPA, 0xee, 0x2000);
	put_desc(0, 0, BUF_GPA, 7, VRING_DESC_F_WRITE | VRING_DESC_F_NEXT, 1);
	put_desc(0, 1, BUF_GPA + 0x1000, 1519, VRING_DESC_F_WRITE, 0);
	post(0, 0);
	for (i = 0; i < sizeof(frame); i++)
		frame[i] = i ^ 0x5a;
	ck_assert_int_eq(send(peer, frame, sizeof(frame), 0), (ssize_t)sizeof(frame));
	kick(0);
	ck_assert_uint_eq(used_idx(0), 1);
	used_elem(0, 0, &id, &len);
	ck_assert_uint_eq(len, HDR + sizeof(frame));
	for (i = 0; i < 7; i++)
		ck_assert_uint_eq(ram[BUF_GPA + i], 0);
	for (i = 7; i < HDR; i++)
		ck_assert_uint_eq(ram[BUF_GPA + 0x1000 + i - 7], i == 10 ? 1 : 0);
	ck_assert_mem_eq(ram + BUF_GPA + 0x1000 + HDR - 7, frame, sizeof(frame));
	ck_assert_uint_eq(ram[BUF_GPA + 7], 0xee);	/* nothing past the first buffer */
}
END_TEST

START_TEST(rx_waits_for_buffers_without_polling)
{
	unsigned i;

	bring_up();
	ck_assert(!polling());
	for (i = 0; i < 3; i++)
		send_frame(60 + i, i + 1);
	kick(0);			/* no buffers posted */
	ck_assert(!polling());
	ck_assert_uint_eq(used_idx(0), 0);
	post_rx(0, 1526);
	post_rx(1, 1526);
	kick(0);
	ck_assert_uint_eq(used_idx(0), 2);
	ck_assert_uint_eq(ram[BUF_GPA + HDR], 1);
	ck_assert_uint_eq(ram[BUF_GPA + 0x1000 + HDR], 2);
	ck_assert(!polling());		/* a third frame waits in the socket */
	post_rx(2, 1526);
	post_rx(3, 1526);
	kick(0);
	ck_assert_uint_eq(used_idx(0), 3);
	ck_assert_uint_eq(ram[BUF_GPA + 0x2000 + HDR], 3);
	ck_assert(polling());		/* buffer left over: watch the fd again */
}
END_TEST

START_TEST(rx_oversized_and_runt_dropped)
{
	struct virtio_net_stats st;
	uint32_t id, len;

	bring_up();
	post_rx(0, 200);
	send_frame(300, 0x11);		/* longer than the buffer */
	send_frame(5, 0x22);		/* shorter than an Ethernet header */
	send_frame(189, 0x44);		/* one byte more than fits behind the header */
	send_frame(150, 0x33);
	kick(0);
	ck_assert_uint_eq(used_idx(0), 1);
	used_elem(0, 0, &id, &len);
	ck_assert_uint_eq(id, 0);
	ck_assert_uint_eq(len, HDR + 150);
	ck_assert_uint_eq(ram[BUF_GPA + HDR], 0x33);
	virtio_net_stats(net, &st);
	ck_assert_uint_eq(st.rx_dropped, 3);
	ck_assert_uint_eq(st.rx_frames, 1);
}
END_TEST

START_TEST(rx_bad_descriptor_breaks_device)
{
	bring_up();
	put_desc(0, 0, RAM_SIZE - 8, 1526, VRING_DESC_F_WRITE, 0);	/* runs off RAM */
	post(0, 0);
	send_frame(60, 1);
	kick(0);
	ck_assert(rd(VIRTIO_MMIO_STATUS) & VIRTIO_STATUS_NEEDS_RESET);
	ck_assert_uint_eq(used_idx(0), 0);
	ck_assert(!polling());
	/* Further notifications and frames are ignored, not crashed on. */
	kick(0);
	kick(1);
}
END_TEST

START_TEST(reset_drops_held_buffer)
{
	bring_up();
	post_rx(0, 1526);
	kick(0);
	ck_assert(polling());
	wr(VIRTIO_MMIO_STATUS, 0);
	ck_assert(!polling());
	send_frame(60, 9);
	/* Reinitialise and the device works again from a clean ring. */
	memset(ram + desc_gpa(0), 0, 0x1000);
	memset(ram + desc_gpa(1), 0, 0x1000);
	bring_up();
	post_rx(0, 1526);
	kick(0);
	ck_assert_uint_eq(used_idx(0), 1);
	ck_assert_uint_eq(ram[BUF_GPA + HDR], 9);
}
END_TEST

START_TEST(rx_from_event_loop)
{
	struct timespec ts = { 0, 1000000 };
	unsigned i, n = 20;

	bring_up();
	for (i = 0; i < n && i < QSIZE; i++)
		post_rx(i, 1526);
	kick(0);
	ck_assert_int_eq(evloop_start(&vm->loop), 0);
	for (i = 0; i < QSIZE; i++)
		send_frame(64, 0x40 + i);
	for (i = 0; i < 2000 && used_idx(0) < QSIZE; i++)
		nanosleep(&ts, NULL);
	ck_assert_uint_eq(used_idx(0), QSIZE);
	for (i = 0; i < QSIZE; i++)
		ck_assert_uint_eq(ram[BUF_GPA + 0x1000 * i + HDR], 0x40 + i);
	/* Ring full of used buffers: the loop must go idle, not spin. */
	send_frame(64, 0x99);
	nanosleep(&ts, NULL);
	ck_assert_uint_eq(used_idx(0), QSIZE);
}
END_TEST

Suite *virtio_net_suite(void)
{
	Suite *s = suite_create("virtio_net");
	TCase *t = tcase_create("net");

	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, identity_and_config);
	tcase_add_test(t, tx_guest_header_never_reaches_tap);
	tcase_add_test(t, tx_header_anywhere_in_the_chain);
	tcase_add_test(t, tx_bad_sizes_dropped);
	tcase_add_test(t, rx_frame_into_buffer);
	tcase_add_test(t, rx_header_split_over_descriptors);
	tcase_add_test(t, rx_waits_for_buffers_without_polling);
	tcase_add_test(t, rx_oversized_and_runt_dropped);
	tcase_add_test(t, rx_bad_descriptor_breaks_device);
	tcase_add_test(t, reset_drops_held_buffer);
	tcase_add_test(t, rx_from_event_loop);
	suite_add_tcase(s, t);
	return s;
}
