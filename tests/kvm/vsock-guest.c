/*
 * Test guest: drives husk's virtio-vsock device from ring 0 without an OS.
 * Finds the virtio-mmio device at 0xd0000000, initialises it (virtio 1.x,
 * VERSION_1 only), connects from port 1234 to host CID 2 port 5000, sends
 * "ping\n", waits for "pong\n", shuts the stream down and waits for the
 * host's RST. Powers off with status 0 on success, 1 on any failure.
 *
 * Everything here runs in ring 0, where PVM emulates each instruction
 * (~1 us): no interrupts, and every wait polls the used ring with one MMIO
 * read (an exit to husk, letting its event loop run) per round, bounded.
 */
#include <stdint.h>

#define MMIO_BASE	0xd0000000ul
#define COM1		0x3f8

/* virtio-mmio v2 registers */
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
#define R_INT_STATUS	0x060
#define R_INT_ACK	0x064
#define R_STATUS	0x070
#define R_DESC_LO	0x080
#define R_DESC_HI	0x084
#define R_AVAIL_LO	0x090
#define R_AVAIL_HI	0x094
#define R_USED_LO	0x0a0
#define R_USED_HI	0x0a4
#define R_CONFIG	0x100

#define S_ACK		1
#define S_DRIVER	2
#define S_DRIVER_OK	4
#define S_FEATURES_OK	8

#define QSZ		8
#define RXQ		0
#define TXQ		1
#define EVQ		2
#define NQ		3
#define D_WRITE		2
#define AVAIL_NO_INTR	1

#define GUEST_CID	3
#define HOST_CID	2
#define GUEST_PORT	1234
#define HOST_PORT	5000
#define BUF_ALLOC	4096

enum { OP_REQUEST = 1, OP_RESPONSE, OP_RST, OP_SHUTDOWN, OP_RW, OP_CREDIT_UPDATE,
       OP_CREDIT_REQUEST };

#define POLL_ROUNDS	200000	/* MMIO exits per wait: seconds, not minutes */
#define RXBUF		256

struct hdr {
	uint64_t src_cid, dst_cid;
	uint32_t src_port, dst_port, len;
	uint16_t type, op;
	uint32_t flags, buf_alloc, fwd_cnt;
} __attribute__((packed));

struct desc {
	uint64_t addr;
	uint32_t len;
	uint16_t flags, next;
};

struct vring {
	struct desc desc[QSZ];
	struct {
		uint16_t flags, idx, ring[QSZ], used_event;
	} avail;
	uint8_t pad[64];
	struct {
		uint16_t flags, idx;
		struct { uint32_t id, len; } ring[QSZ];
		uint16_t avail_event;
	} used __attribute__((aligned(8)));
};

static volatile struct vring vq[NQ] __attribute__((aligned(4096)));
static uint16_t avail_idx[NQ], last_used[NQ];
static uint8_t rxbuf[QSZ][RXBUF] __attribute__((aligned(64)));
static uint8_t txbuf[QSZ][64] __attribute__((aligned(64)));
static uint8_t evbuf[8];
static unsigned tx_next;

static char data[64];		/* bytes received from the host */
static uint32_t data_len, fwd_cnt;
static int got_response, got_rst, host_shut;

static inline void outb(uint16_t port, uint8_t v)
{
	__asm__ volatile("outb %0, %1" : : "a"(v), "Nd"(port));
}

static void putstr(const char *s)
{
	while (*s)
		outb(COM1, (uint8_t)*s++);
}

static void putnum(uint32_t v)
{
	char b[11];
	int i = 10;

	b[i] = 0;
	do {
		b[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	putstr(b + i);
}

static uint32_t rd(unsigned off)
{
	return *(volatile uint32_t *)(MMIO_BASE + off);
}

static void wr(unsigned off, uint32_t v)
{
	*(volatile uint32_t *)(MMIO_BASE + off) = v;
}

static int fail(const char *why)
{
	putstr("vsock-guest: FAIL ");
	putstr(why);
	putstr("\n");
	return 1;
}

/* Put descriptor id on queue q's avail ring (device sees it after notify). */
static void post(unsigned q, uint16_t id)
{
	vq[q].avail.ring[avail_idx[q] % QSZ] = id;
	__atomic_thread_fence(__ATOMIC_RELEASE);
	avail_idx[q]++;
	vq[q].avail.idx = avail_idx[q];
}

static int setup_queue(unsigned q)
{
	uint64_t a = (uint64_t)(uintptr_t)&vq[q];

	wr(R_QUEUE_SEL, q);
	if (rd(R_QUEUE_READY) || rd(R_QUEUE_NUM_MAX) < QSZ)
		return -1;
	wr(R_QUEUE_NUM, QSZ);
	wr(R_DESC_LO, (uint32_t)a);
	wr(R_DESC_HI, (uint32_t)(a >> 32));
	a = (uint64_t)(uintptr_t)&vq[q].avail;
	wr(R_AVAIL_LO, (uint32_t)a);
	wr(R_AVAIL_HI, (uint32_t)(a >> 32));
	a = (uint64_t)(uintptr_t)&vq[q].used;
	wr(R_USED_LO, (uint32_t)a);
	wr(R_USED_HI, (uint32_t)(a >> 32));
	vq[q].avail.flags = AVAIL_NO_INTR;
	wr(R_QUEUE_READY, 1);
	return 0;
}

static int init_device(void)
{
	unsigned q, i;

	if (rd(R_MAGIC) != 0x74726976)
		return fail("no virtio-mmio magic at 0xd0000000");
	if (rd(R_VERSION) != 2 || rd(R_DEVICE_ID) != 19)
		return fail("not a virtio-mmio v2 vsock device");
	wr(R_STATUS, 0);
	wr(R_STATUS, S_ACK);
	wr(R_STATUS, S_ACK | S_DRIVER);
	wr(R_DEV_FEAT_SEL, 1);
	if (!(rd(R_DEV_FEAT) & 1))
		return fail("device does not offer VERSION_1");
	wr(R_DRV_FEAT_SEL, 0);
	wr(R_DRV_FEAT, 0);
	wr(R_DRV_FEAT_SEL, 1);
	wr(R_DRV_FEAT, 1);
	wr(R_STATUS, S_ACK | S_DRIVER | S_FEATURES_OK);
	if (!(rd(R_STATUS) & S_FEATURES_OK))
		return fail("FEATURES_OK not accepted");
	if (rd(R_CONFIG) != GUEST_CID || rd(R_CONFIG + 4) != 0)
		return fail("guest_cid in config space is not 3");
	for (q = 0; q < NQ; q++)
		if (setup_queue(q))
			return fail("queue setup");
	for (i = 0; i < QSZ; i++) {
		vq[RXQ].desc[i].addr = (uint64_t)(uintptr_t)rxbuf[i];
		vq[RXQ].desc[i].len = RXBUF;
		vq[RXQ].desc[i].flags = D_WRITE;
		post(RXQ, (uint16_t)i);
	}
	vq[EVQ].desc[0].addr = (uint64_t)(uintptr_t)evbuf;
	vq[EVQ].desc[0].len = sizeof(evbuf);
	vq[EVQ].desc[0].flags = D_WRITE;
	post(EVQ, 0);
	wr(R_STATUS, S_ACK | S_DRIVER | S_FEATURES_OK | S_DRIVER_OK);
	wr(R_QUEUE_NOTIFY, RXQ);
	wr(R_QUEUE_NOTIFY, EVQ);
	putstr("vsock-guest: device ready, guest cid 3\n");
	return 0;
}

static int send_pkt(uint16_t op, uint32_t flags, const char *payload, uint32_t len)
{
	unsigned id = tx_next++ % QSZ;
	struct hdr *h = (struct hdr *)txbuf[id];
	uint32_t i;

	if (tx_next > QSZ && vq[TXQ].used.idx < tx_next - QSZ)
		return fail("tx ring full");
	h->src_cid = GUEST_CID;
	h->dst_cid = HOST_CID;
	h->src_port = GUEST_PORT;
	h->dst_port = HOST_PORT;
	h->len = len;
	h->type = 1;
	h->op = op;
	h->flags = flags;
	h->buf_alloc = BUF_ALLOC;
	h->fwd_cnt = fwd_cnt;
	for (i = 0; i < len; i++)
		txbuf[id][sizeof(*h) + i] = (uint8_t)payload[i];
	vq[TXQ].desc[id].addr = (uint64_t)(uintptr_t)txbuf[id];
	vq[TXQ].desc[id].len = (uint32_t)sizeof(*h) + len;
	vq[TXQ].desc[id].flags = 0;
	post(TXQ, (uint16_t)id);
	wr(R_QUEUE_NOTIFY, TXQ);
	return 0;
}

/* Handle one packet from the host; -1 on protocol failure. */
static int handle(const struct hdr *h, uint32_t used_len)
{
	const uint8_t *p = (const uint8_t *)(h + 1);
	uint32_t i;

	if (used_len < sizeof(*h) || h->len > used_len - sizeof(*h))
		return fail("short rx buffer");
	if (h->src_cid != HOST_CID || h->dst_cid != GUEST_CID || h->src_port != HOST_PORT ||
	    h->dst_port != GUEST_PORT || h->type != 1)
		return fail("packet for another connection");
	switch (h->op) {
	case OP_RESPONSE:
		got_response = 1;
		break;
	case OP_RW:
		for (i = 0; i < h->len && data_len < sizeof(data) - 1; i++)
			data[data_len++] = (char)p[i];
		fwd_cnt += h->len;
		break;
	case OP_RST:
		got_rst = 1;
		break;
	case OP_SHUTDOWN:
		host_shut |= (int)h->flags;
		break;
	case OP_CREDIT_REQUEST:
		return send_pkt(OP_CREDIT_UPDATE, 0, 0, 0) ? -1 : 0;
	case OP_CREDIT_UPDATE:
		break;
	default:
		return fail("unexpected op");
	}
	return 0;
}

static int have_pong(void)
{
	return data_len >= 5 && data[data_len - 5] == 'p' && data[data_len - 4] == 'o' &&
	       data[data_len - 3] == 'n' && data[data_len - 2] == 'g' &&
	       data[data_len - 1] == '\n';
}

/*
 * Process rx packets until *flag (or have_pong() when flag is NULL) holds.
 * Returns 0, 1 on failure, 2 when the rounds ran out.
 */
static int wait_for(int *flag)
{
	unsigned round, rounds = 0;

	for (round = 0; round < POLL_ROUNDS; round++) {
		uint16_t used = vq[RXQ].used.idx;

		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (used != last_used[RXQ]) {
			unsigned slot = last_used[RXQ] % QSZ;
			uint32_t id = vq[RXQ].used.ring[slot].id;
			uint32_t len = vq[RXQ].used.ring[slot].len;

			last_used[RXQ]++;
			if (id >= QSZ)
				return fail("bad used id");
			if (handle((const struct hdr *)rxbuf[id], len))
				return 1;
			post(RXQ, (uint16_t)id);
			wr(R_QUEUE_NOTIFY, RXQ);
			rounds++;
		} else if (flag ? *flag : have_pong()) {
			return 0;
		} else {
			uint32_t isr = rd(R_INT_STATUS);	/* exits to husk */

			if (isr)
				wr(R_INT_ACK, isr);
		}
		if (got_rst && flag != &got_rst)
			return fail("connection reset by the host");
	}
	(void)rounds;
	return 2;
}

int main(void)
{
	int r;

	putstr("vsock-guest: start\n");
	if (init_device())
		return 1;
	if (send_pkt(OP_REQUEST, 0, 0, 0))
		return 1;
	r = wait_for(&got_response);
	if (r)
		return r == 2 ? fail("no RESPONSE") : 1;
	putstr("vsock-guest: connected to host port 5000\n");
	if (send_pkt(OP_RW, 0, "ping\n", 5))
		return 1;
	putstr("vsock-guest: sent ping\n");
	r = wait_for(0);
	if (r)
		return r == 2 ? fail("no pong") : 1;
	putstr("vsock-guest: got pong (");
	putnum(data_len);
	putstr(" bytes)\n");
	if (send_pkt(OP_SHUTDOWN, 3, 0, 0))
		return 1;
	r = wait_for(&got_rst);
	if (r == 1)
		return 1;
	if (r == 2) {
		if (!host_shut)
			return fail("no RST or SHUTDOWN after our SHUTDOWN");
		if (send_pkt(OP_RST, 0, 0, 0))
			return 1;
		putstr("vsock-guest: host shut down, sent RST\n");
	} else {
		putstr("vsock-guest: host reset the closed stream\n");
	}
	putstr("vsock-guest: PASS\n");
	return 0;
}
