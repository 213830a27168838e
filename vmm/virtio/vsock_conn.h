/*
 * vsock_conn: the pure virtio-vsock stream protocol engine: packet headers,
 * the connection table, credit flow control in both directions, shutdown and
 * reset. It owns no fds and touches no virtqueues, so it is unit-tested on
 * its own; virtio_vsock.c moves the packets and the bytes.
 *
 * Naming: "local" is the host side (CID 2), "peer" is the guest. Packets
 * from the guest go through vsock_rx(), which validates every header field
 * and tells the device what to do (struct vsock_rx_result). Packets to the
 * guest come out of vsock_pop_ctrl() (control) and vsock_conn_make_rw()
 * (data read by the device straight into the guest's buffer).
 *
 * Memory is bounded: at most VSOCK_MAX_CONNS connections, each buffering at
 * most VSOCK_BUF_ALLOC bytes of guest data the host socket did not take yet
 * (the credit we advertise guarantees the guest cannot send more), and a
 * fixed ring of VSOCK_ORPHAN_MAX resets for packets that match no
 * connection; when that ring is full further resets are dropped (a guest
 * that floods us with garbage and never drains its rx queue only hurts
 * itself).
 *
 * Not thread-safe: one table is driven by one thread (the event loop).
 */
#ifndef HUSK_VSOCK_CONN_H
#define HUSK_VSOCK_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define VSOCK_HOST_CID 2
#define VSOCK_TYPE_STREAM 1

enum vsock_op {
	VSOCK_OP_INVALID = 0,
	VSOCK_OP_REQUEST = 1,
	VSOCK_OP_RESPONSE = 2,
	VSOCK_OP_RST = 3,
	VSOCK_OP_SHUTDOWN = 4,
	VSOCK_OP_RW = 5,
	VSOCK_OP_CREDIT_UPDATE = 6,
	VSOCK_OP_CREDIT_REQUEST = 7,
};

#define VSOCK_SHUTDOWN_RCV 1u	/* sender will receive no more */
#define VSOCK_SHUTDOWN_SEND 2u	/* sender will send no more */

/* Wire format (little-endian, packed): virtio spec 5.10.6. */
struct vsock_hdr {
	uint64_t src_cid;
	uint64_t dst_cid;
	uint32_t src_port;
	uint32_t dst_port;
	uint32_t len;
	uint16_t type;
	uint16_t op;
	uint32_t flags;
	uint32_t buf_alloc;
	uint32_t fwd_cnt;
} __attribute__((packed));

#define VSOCK_HDR_SIZE 44
_Static_assert(sizeof(struct vsock_hdr) == VSOCK_HDR_SIZE, "virtio_vsock_hdr is 44 bytes");

#define VSOCK_MAX_PAYLOAD (64u * 1024)		/* largest RW payload either way */
#define VSOCK_MAX_CONNS 64
#define VSOCK_BUF_ALLOC (256u * 1024)		/* receive buffer we advertise */
#define VSOCK_CREDIT_THRESH (64u * 1024)	/* credit update granularity */
#define VSOCK_ORPHAN_MAX 64
#define VSOCK_HOST_PORT_BASE 0x40000000u	/* local ports of host-initiated conns */

enum vsock_state {
	VSOCK_FREE = 0,
	VSOCK_HOST_CONNECTING,	/* we sent REQUEST, waiting for RESPONSE/RST */
	VSOCK_GUEST_CONNECTING,	/* guest sent REQUEST, device is connecting */
	VSOCK_REFUSED,		/* guest answered our REQUEST with RST */
	VSOCK_ESTABLISHED,
	VSOCK_DEAD,		/* reset; waiting for vsock_conn_release() */
};

/* Pending control packets of a connection (bit set), sent in this order. */
enum {
	VSOCK_P_REQUEST = 1u << 0,
	VSOCK_P_RESPONSE = 1u << 1,
	VSOCK_P_CREDIT_UPDATE = 1u << 2,
	VSOCK_P_CREDIT_REQUEST = 1u << 3,
	VSOCK_P_SHUTDOWN = 1u << 4,
};

struct vsock_conn {
	enum vsock_state state;
	uint32_t local_port, peer_port;
	unsigned pending;		/* VSOCK_P_* */
	uint32_t shutdown_flags;	/* flags of the pending SHUTDOWN */

	/* Host -> guest: what the guest lets us send. */
	uint32_t peer_buf_alloc, peer_fwd_cnt;
	uint32_t tx_cnt;		/* bytes sent to the guest */
	bool credit_requested;		/* CREDIT_REQUEST sent since last update */

	/* Guest -> host: what we let the guest send. */
	uint32_t rx_cnt;		/* bytes received from the guest */
	uint32_t fwd_cnt;		/* of which consumed by the host socket */
	uint32_t last_fwd_sent;		/* fwd_cnt the guest last heard about */

	uint32_t peer_shut;		/* VSOCK_SHUTDOWN_* received from the guest */
	uint32_t local_shut;		/* VSOCK_SHUTDOWN_* sent (or queued) by us */

	/* Guest bytes the host socket has not taken yet (ring, lazily allocated). */
	uint8_t *buf;
	uint32_t buf_head, buf_used;

	void *priv;			/* device's per-connection state */
};

struct vsock_table {
	uint64_t guest_cid;
	struct vsock_conn conns[VSOCK_MAX_CONNS];
	unsigned nr_conns;
	unsigned rr;			/* round-robin start for fairness */
	uint32_t next_host_port;
	struct vsock_hdr orphan[VSOCK_ORPHAN_MAX];	/* resets without a connection */
	unsigned orphan_head, orphan_len;
	uint64_t dropped;		/* resets lost because the ring was full */
	uint64_t bad_pkts;		/* malformed packets from the guest */
};

/* What the device must do after vsock_rx(). */
enum vsock_event {
	VSOCK_EV_NONE = 0,
	VSOCK_EV_CONNECT,	/* guest connects to host port c->local_port: connect
				 * the socket, then vsock_conn_accept() or
				 * vsock_conn_release(t, c, true) */
	VSOCK_EV_ESTABLISHED,	/* guest accepted our REQUEST */
	VSOCK_EV_REFUSED,	/* guest refused our REQUEST: vsock_conn_retry() or release */
	VSOCK_EV_DATA,		/* hdr.len payload bytes for c: write or vsock_conn_buffer() */
	VSOCK_EV_SHUTDOWN,	/* guest shut down a direction (see c->peer_shut) */
	VSOCK_EV_RESET,		/* c is dead: close the socket, vsock_conn_release(t, c, false) */
};

struct vsock_rx_result {
	enum vsock_event ev;
	struct vsock_conn *c;
	struct vsock_hdr hdr;	/* decoded (host byte order) */
};

void vsock_table_init(struct vsock_table *t, uint64_t guest_cid);
/* Free every buffer and forget all connections (device reset, teardown). */
void vsock_table_reset(struct vsock_table *t);

/* Header encoding; in/out are 44 wire bytes. */
void vsock_hdr_decode(struct vsock_hdr *h, const void *wire);
void vsock_hdr_encode(void *wire, const struct vsock_hdr *h);

/*
 * A packet from the guest: wire header plus payload_avail bytes of payload
 * in the chain (the payload itself is not needed here). Always returns a
 * result; malformed packets are answered with RST or dropped.
 */
struct vsock_rx_result vsock_rx(struct vsock_table *t, const void *wire_hdr,
				uint64_t payload_avail);

/* Next control packet for the guest (host byte order); false when none. */
bool vsock_pop_ctrl(struct vsock_table *t, struct vsock_hdr *h);
bool vsock_has_ctrl(const struct vsock_table *t);

/* Host side opens a connection to guest port; NULL when the table is full. */
struct vsock_conn *vsock_conn_open_host(struct vsock_table *t, uint32_t peer_port);
/* Send the REQUEST again after the guest refused it. */
void vsock_conn_retry(struct vsock_conn *c);
/* The host socket for a guest REQUEST is connected: queue RESPONSE. */
void vsock_conn_accept(struct vsock_conn *c);
/* The device is done with c; with rst the guest is told with an RST. */
void vsock_conn_release(struct vsock_table *t, struct vsock_conn *c, bool rst);

/* Bytes of host data the guest can take now (0 when it must not get data). */
uint32_t vsock_conn_tx_credit(const struct vsock_conn *c);
/* Build the RW header for n bytes (n <= credit) the device placed after it. */
void vsock_conn_make_rw(const struct vsock_table *t, struct vsock_conn *c,
			struct vsock_hdr *h, uint32_t n);
/* Host data is waiting but credit is 0: ask the guest (once per update). */
void vsock_conn_need_credit(struct vsock_conn *c);
/* The host socket reached EOF: tell the guest we send no more. */
void vsock_conn_host_eof(struct vsock_conn *c);

/* The host socket took n bytes of guest data: advance fwd_cnt, maybe update. */
void vsock_conn_consumed(struct vsock_conn *c, uint32_t n);
/* Keep guest bytes the socket would not take; -ENOMEM/-ENOSPC (-> reset). */
int vsock_conn_buffer(struct vsock_conn *c, const void *data, uint32_t n);
/* Contiguous buffered bytes at the front (0 when empty). */
uint32_t vsock_conn_buffered(const struct vsock_conn *c, const uint8_t **p);
/* Drop n front bytes written to the socket (also counts them consumed). */
void vsock_conn_drain(struct vsock_conn *c, uint32_t n);

/* Both directions finished and the buffer flushed: close and RST. */
bool vsock_conn_done(const struct vsock_conn *c);
/* Whether the device should read the host socket for this connection. */
bool vsock_conn_wants_host_data(const struct vsock_conn *c);

struct vsock_conn *vsock_conn_lookup(struct vsock_table *t, uint32_t local_port,
				     uint32_t peer_port);

#endif
