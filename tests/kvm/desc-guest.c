/*
 * Test guest: a hostile virtio driver without an OS, for husk's audit of
 * descriptor handling (`husk boot --kernel desc-guest.elf --disk IMG
 * --vsock PATH --mem 64`). It finds the virtio-blk and virtio-vsock devices
 * among the virtio-mmio slots at 0xd0000000 and, one case at a time, hands
 * them rings that loop, point outside guest RAM, or lie about their size:
 *
 *   vsock tx queue: a two-descriptor loop, a descriptor chained to itself,
 *     a next index past the table, a head index past the table, a buffer
 *     far above RAM, a buffer on the device's own MMIO page, a chain longer
 *     than husk accepts;
 *   blk queue: a loop, a data buffer running past the end of RAM, a
 *     descriptor table and a used ring outside RAM (refused when the queue
 *     is made ready), a nested indirect table, a looping indirect table.
 *
 * After each case husk must have set DEVICE_NEEDS_RESET in the status
 * register (it marks the device broken and carries on); the guest then
 * resets the device (status 0) for the next case. Finally it drives the
 * blk device properly and reads sector 0, which must start with
 * "HUSKDESC": the device works again after all that, and husk is alive.
 * Prints one line per case; powers off with status 0 when every case
 * passed, 1 otherwise.
 *
 * Ring 0 only (PVM emulates each instruction), everything bounded: each
 * wait is at most POLL_ROUNDS status reads, each an exit to husk.
 */
#include <stdint.h>

#define MMIO_BASE	0xd0000000ul
#define MMIO_SLOTS	8
#define COM1		0x3f8
#define RAM_END		(64ul << 20)	/* run with --mem 64 */

#define R_MAGIC		0x000
#define R_VERSION	0x004
#define R_DEVICE_ID	0x008
#define R_DEV_FEAT	0x010
#define R_DEV_FEAT_SEL	0x014
#define R_DRV_FEAT	0x020
#define R_DRV_FEAT_SEL	0x024
#define R_QUEUE_SEL	0x030
#define R_QUEUE_NUM_MAX	0x034
#define R_QUEUE_NUM	0x038
#define R_QUEUE_READY	0x044
#define R_QUEUE_NOTIFY	0x050
#define R_STATUS	0x070
#define R_DESC_LO	0x080
#define R_DESC_HI	0x084
#define R_AVAIL_LO	0x090
#define R_AVAIL_HI	0x094
#define R_USED_LO	0x0a0
#define R_USED_HI	0x0a4

#define S_ACK		1
#define S_DRIVER	2
#define S_DRIVER_OK	4
#define S_FEATURES_OK	8
#define S_NEEDS_RESET	0x40

#define ID_BLOCK	2
#define ID_VSOCK	19
#define VSOCK_TXQ	1
#define BLK_Q		0

#define F_INDIRECT	28	/* feature bit, low word */
#define D_NEXT		1
#define D_WRITE		2
#define D_INDIRECT	4
#define AVAIL_NO_INTR	1

#define QSZ		128
#define POLL_ROUNDS	20000

struct desc {
	uint64_t addr;
	uint32_t len;
	uint16_t flags, next;
};

static volatile struct desc descs[QSZ] __attribute__((aligned(4096)));
static volatile struct {
	uint16_t flags, idx, ring[QSZ], used_event;
} avail __attribute__((aligned(4096)));
static volatile struct {
	uint16_t flags, idx;
	struct { uint32_t id, len; } ring[QSZ];
	uint16_t avail_event;
} used __attribute__((aligned(4096)));
static volatile struct desc itable[4] __attribute__((aligned(64)));
static volatile uint8_t buf[2][512] __attribute__((aligned(512)));
static volatile struct {
	uint32_t type, reserved;
	uint64_t sector;
} blk_hdr __attribute__((aligned(16)));
static volatile uint8_t blk_status;
static uint16_t avail_idx;
static int failures;

static inline void outb(uint16_t port, uint8_t v)
{
	__asm__ volatile("outb %0, %1" : : "a"(v), "Nd"(port));
}

static void putstr(const char *s)
{
	while (*s)
		outb(COM1, (uint8_t)*s++);
}

static uint32_t rd(uint64_t base, unsigned off)
{
	return *(volatile uint32_t *)(base + off);
}

static void wr(uint64_t base, unsigned off, uint32_t v)
{
	*(volatile uint32_t *)(base + off) = v;
}

static uint64_t find(uint32_t id)
{
	unsigned i;

	for (i = 0; i < MMIO_SLOTS; i++) {
		uint64_t b = MMIO_BASE + i * 0x1000ul;

		if (rd(b, R_MAGIC) == 0x74726976 && rd(b, R_VERSION) == 2 &&
		    rd(b, R_DEVICE_ID) == id)
			return b;
	}
	return 0;
}

static void clear_rings(void)
{
	unsigned i;

	for (i = 0; i < QSZ; i++) {
		descs[i].addr = 0;
		descs[i].len = 0;
		descs[i].flags = 0;
		descs[i].next = 0;
		avail.ring[i] = 0;
		used.ring[i].id = 0;
		used.ring[i].len = 0;
	}
	avail.idx = 0;
	avail.flags = AVAIL_NO_INTR;
	used.idx = 0;
	used.flags = 0;
	avail_idx = 0;
}

/* Reset and negotiate (VERSION_1, and INDIRECT_DESC when asked and offered). */
static int negotiate(uint64_t b, int indirect)
{
	uint32_t lo;

	wr(b, R_STATUS, 0);
	if (rd(b, R_STATUS) != 0)
		return -1;
	wr(b, R_STATUS, S_ACK);
	wr(b, R_STATUS, S_ACK | S_DRIVER);
	wr(b, R_DEV_FEAT_SEL, 0);
	lo = rd(b, R_DEV_FEAT);
	wr(b, R_DEV_FEAT_SEL, 1);
	if (!(rd(b, R_DEV_FEAT) & 1))
		return -1;
	if (indirect && !(lo & (1u << F_INDIRECT)))
		return -2;
	wr(b, R_DRV_FEAT_SEL, 0);
	wr(b, R_DRV_FEAT, indirect ? 1u << F_INDIRECT : 0);
	wr(b, R_DRV_FEAT_SEL, 1);
	wr(b, R_DRV_FEAT, 1);
	wr(b, R_STATUS, S_ACK | S_DRIVER | S_FEATURES_OK);
	if (!(rd(b, R_STATUS) & S_FEATURES_OK))
		return -1;
	return 0;
}

/* Queue q on our rings, or on the given (possibly hostile) addresses. */
static void queue(uint64_t b, unsigned q, uint64_t d, uint64_t a, uint64_t u)
{
	wr(b, R_QUEUE_SEL, q);
	wr(b, R_QUEUE_NUM, QSZ);
	wr(b, R_DESC_LO, (uint32_t)d);
	wr(b, R_DESC_HI, (uint32_t)(d >> 32));
	wr(b, R_AVAIL_LO, (uint32_t)a);
	wr(b, R_AVAIL_HI, (uint32_t)(a >> 32));
	wr(b, R_USED_LO, (uint32_t)u);
	wr(b, R_USED_HI, (uint32_t)(u >> 32));
	wr(b, R_QUEUE_READY, 1);
}

static int setup(uint64_t b, unsigned q, int indirect)
{
	int r;

	clear_rings();
	r = negotiate(b, indirect);
	if (r)
		return r;
	wr(b, R_QUEUE_SEL, q);
	if (rd(b, R_QUEUE_READY) || rd(b, R_QUEUE_NUM_MAX) < QSZ)
		return -1;
	queue(b, q, (uint64_t)(uintptr_t)descs, (uint64_t)(uintptr_t)&avail,
	      (uint64_t)(uintptr_t)&used);
	wr(b, R_STATUS, S_ACK | S_DRIVER | S_FEATURES_OK | S_DRIVER_OK);
	return 0;
}

static void post(uint64_t b, unsigned q, uint16_t head)
{
	avail.ring[avail_idx % QSZ] = head;
	__atomic_thread_fence(__ATOMIC_RELEASE);
	avail_idx++;
	avail.idx = avail_idx;
	wr(b, R_QUEUE_NOTIFY, q);
}

static int wait_needs_reset(uint64_t b)
{
	unsigned i;

	for (i = 0; i < POLL_ROUNDS; i++)
		if (rd(b, R_STATUS) & S_NEEDS_RESET)
			return 1;
	return 0;
}

static void expect_broken(uint64_t b, const char *dev, const char *what)
{
	putstr("desc-guest: ");
	putstr(dev);
	putstr(" ");
	putstr(what);
	if (wait_needs_reset(b)) {
		putstr(": NEEDS_RESET\n");
	} else {
		putstr(": FAIL device still in service\n");
		failures++;
	}
}

static void d(unsigned i, uint64_t addr, uint32_t len, uint16_t flags, uint16_t next)
{
	descs[i].addr = addr;
	descs[i].len = len;
	descs[i].flags = flags;
	descs[i].next = next;
}

#define A(p) ((uint64_t)(uintptr_t)(p))

static void vsock_cases(uint64_t v)
{
	unsigned i;

	if (setup(v, VSOCK_TXQ, 0)) {
		putstr("desc-guest: FAIL vsock setup\n");
		failures++;
		return;
	}
	d(0, A(buf[0]), 44, D_NEXT, 1);
	d(1, A(buf[1]), 44, D_NEXT, 0);
	post(v, VSOCK_TXQ, 0);
	expect_broken(v, "vsock", "two-descriptor loop");

	setup(v, VSOCK_TXQ, 0);
	d(5, A(buf[0]), 44, D_NEXT, 5);
	post(v, VSOCK_TXQ, 5);
	expect_broken(v, "vsock", "descriptor chained to itself");

	setup(v, VSOCK_TXQ, 0);
	d(0, A(buf[0]), 44, D_NEXT, 200);
	post(v, VSOCK_TXQ, 0);
	expect_broken(v, "vsock", "next index past the table");

	setup(v, VSOCK_TXQ, 0);
	post(v, VSOCK_TXQ, 500);
	expect_broken(v, "vsock", "head index past the table");

	setup(v, VSOCK_TXQ, 0);
	d(0, 0x7fff00000000ul, 44, 0, 0);
	post(v, VSOCK_TXQ, 0);
	expect_broken(v, "vsock", "buffer far above RAM");

	setup(v, VSOCK_TXQ, 0);
	d(0, v, 64, 0, 0);
	post(v, VSOCK_TXQ, 0);
	expect_broken(v, "vsock", "buffer on the device's MMIO page");

	setup(v, VSOCK_TXQ, 0);
	for (i = 0; i < 100; i++)
		d(i, A(buf[0]), 1, D_NEXT, (uint16_t)(i + 1));
	d(100, A(buf[0]), 44, 0, 0);
	post(v, VSOCK_TXQ, 0);
	expect_broken(v, "vsock", "chain of 101 descriptors");
	wr(v, R_STATUS, 0);
}

static void blk_request(unsigned first, uint64_t data, uint32_t len)
{
	blk_hdr.type = 0;	/* VIRTIO_BLK_T_IN */
	blk_hdr.reserved = 0;
	blk_hdr.sector = 0;
	blk_status = 0xff;
	d(first, A(&blk_hdr), 16, D_NEXT, (uint16_t)(first + 1));
	d(first + 1, data, len, D_NEXT | D_WRITE, (uint16_t)(first + 2));
	d(first + 2, A(&blk_status), 1, D_WRITE, 0);
}

static void blk_cases(uint64_t b)
{
	int r;
	unsigned i;

	setup(b, BLK_Q, 0);
	blk_request(0, A(buf[0]), 512);
	descs[2].flags = D_WRITE | D_NEXT;
	descs[2].next = 0;	/* status -> header: a loop */
	post(b, BLK_Q, 0);
	expect_broken(b, "blk", "request chain looping back to its head");

	setup(b, BLK_Q, 0);
	blk_request(0, RAM_END - 256, 512);
	post(b, BLK_Q, 0);
	expect_broken(b, "blk", "data buffer running past the end of RAM");

	clear_rings();
	negotiate(b, 0);
	queue(b, BLK_Q, 0x7fff00000000ul, A(&avail), A(&used));
	expect_broken(b, "blk", "descriptor table outside RAM");

	clear_rings();
	negotiate(b, 0);
	queue(b, BLK_Q, A(descs), A(&avail), 0xfee00000ul);
	expect_broken(b, "blk", "used ring on the local APIC page");

	r = setup(b, BLK_Q, 1);
	if (r == -2) {
		putstr("desc-guest: blk does not offer INDIRECT_DESC: indirect cases skipped\n");
	} else {
		itable[0].addr = A(itable);
		itable[0].len = 32;
		itable[0].flags = D_INDIRECT;
		itable[0].next = 0;
		d(0, A(itable), 32, D_INDIRECT, 0);
		post(b, BLK_Q, 0);
		expect_broken(b, "blk", "nested indirect table");

		setup(b, BLK_Q, 1);
		itable[0].addr = A(&blk_hdr);
		itable[0].len = 16;
		itable[0].flags = D_NEXT;
		itable[0].next = 1;
		itable[1].addr = A(buf[0]);
		itable[1].len = 512;
		itable[1].flags = D_NEXT | D_WRITE;
		itable[1].next = 0;
		d(0, A(itable), 32, D_INDIRECT, 0);
		post(b, BLK_Q, 0);
		expect_broken(b, "blk", "looping indirect table");
	}

	/* Recovery: a proper read of sector 0. */
	setup(b, BLK_Q, 0);
	for (i = 0; i < 512; i++)
		buf[0][i] = 0;
	blk_request(0, A(buf[0]), 512);
	post(b, BLK_Q, 0);
	for (i = 0; i < POLL_ROUNDS && used.idx == 0; i++)
		(void)rd(b, R_STATUS);	/* an exit: husk's loop runs */
	if (used.idx == 1 && blk_status == 0 && buf[0][0] == 'H' && buf[0][1] == 'U' &&
	    buf[0][2] == 'S' && buf[0][3] == 'K' && buf[0][4] == 'D' && buf[0][5] == 'E' &&
	    buf[0][6] == 'S' && buf[0][7] == 'C' && !(rd(b, R_STATUS) & S_NEEDS_RESET)) {
		putstr("desc-guest: blk works again after reset: read HUSKDESC from sector 0\n");
	} else {
		putstr("desc-guest: FAIL blk read after reset\n");
		failures++;
	}
	wr(b, R_STATUS, 0);
}

int main(void)
{
	uint64_t blk, vsock;

	putstr("desc-guest: start\n");
	blk = find(ID_BLOCK);
	vsock = find(ID_VSOCK);
	if (!blk || !vsock) {
		putstr("desc-guest: FAIL need a blk (--disk) and a vsock (--vsock) device\n");
		return 1;
	}
	vsock_cases(vsock);
	blk_cases(blk);
	if (failures) {
		putstr("desc-guest: FAIL\n");
		return 1;
	}
	putstr("desc-guest: PASS\n");
	return 0;
}
