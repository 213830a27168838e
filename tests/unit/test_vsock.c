/*
 * Unit tests for vsock_conn, the pure vsock stream protocol engine: header
 * wire layout, guest- and host-initiated connects (including refusal and
 * retry), data both ways with credit accounting, credit exhaustion and
 * CREDIT_REQUEST/CREDIT_UPDATE, a guest overrunning our credit, SHUTDOWN in
 * both directions, RST from either side, malformed headers (cid, type, op,
 * len), unknown connections, a full table, the bounded reset ring and the
 * per-connection byte buffer.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "suites.h"
#include "virtio/vsock_conn.h"

#define CID 42
#define GPORT 1234
#define HPORT 5000

static struct vsock_table *t;

static void setup(void)
{
	t = malloc(sizeof(*t));
	ck_assert_ptr_nonnull(t);
	vsock_table_init(t, CID);
}

static void teardown(void)
{
	vsock_table_reset(t);
	free(t);
}

/* A packet from the guest. */
static struct vsock_rx_result rx_full(uint64_t src_cid, uint64_t dst_cid, uint32_t sport,
				      uint32_t dport, uint16_t type, uint16_t op,
				      uint32_t len, uint32_t flags, uint32_t buf_alloc,
				      uint32_t fwd_cnt, uint64_t avail)
{
	struct vsock_hdr h = {
		.src_cid = src_cid, .dst_cid = dst_cid, .src_port = sport,
		.dst_port = dport, .len = len, .type = type, .op = op, .flags = flags,
		.buf_alloc = buf_alloc, .fwd_cnt = fwd_cnt,
	};
	uint8_t wire[VSOCK_HDR_SIZE];

	vsock_hdr_encode(wire, &h);
	return vsock_rx(t, wire, avail);
}

static struct vsock_rx_result rx(uint16_t op, uint32_t len, uint32_t flags,
				 uint32_t buf_alloc, uint32_t fwd_cnt)
{
	return rx_full(CID, VSOCK_HOST_CID, GPORT, HPORT, VSOCK_TYPE_STREAM, op, len, flags,
		       buf_alloc, fwd_cnt, len);
}

static void expect_pkt(uint16_t op, uint32_t src_port, uint32_t dst_port)
{
	struct vsock_hdr h;

	ck_assert(vsock_pop_ctrl(t, &h));
	ck_assert_uint_eq(h.op, op);
	ck_assert_uint_eq(h.src_cid, VSOCK_HOST_CID);
	ck_assert_uint_eq(h.dst_cid, CID);
	ck_assert_uint_eq(h.src_port, src_port);
	ck_assert_uint_eq(h.dst_port, dst_port);
	ck_assert_uint_eq(h.type, VSOCK_TYPE_STREAM);
	ck_assert_uint_eq(h.len, 0);
}

static void expect_none(void)
{
	struct vsock_hdr h;

	ck_assert(!vsock_has_ctrl(t));
	ck_assert(!vsock_pop_ctrl(t, &h));
}

/* Guest connects to HPORT with the given receive buffer; host accepts. */
static struct vsock_conn *established(uint32_t guest_buf)
{
	struct vsock_rx_result r = rx(VSOCK_OP_REQUEST, 0, 0, guest_buf, 0);

	ck_assert_int_eq(r.ev, VSOCK_EV_CONNECT);
	vsock_conn_accept(r.c);
	expect_pkt(VSOCK_OP_RESPONSE, HPORT, GPORT);
	expect_none();
	return r.c;
}

START_TEST(header_layout)
{
	struct vsock_hdr h = {
		.src_cid = 0x0102030405060708ull, .dst_cid = 2, .src_port = 0x11223344,
		.dst_port = 5, .len = 6, .type = 1, .op = 5, .flags = 3,
		.buf_alloc = 0x40000, .fwd_cnt = 0xaabbccdd,
	}, back;
	uint8_t w[VSOCK_HDR_SIZE];

	vsock_hdr_encode(w, &h);
	ck_assert_uint_eq(w[0], 0x08);		/* little-endian src_cid */
	ck_assert_uint_eq(w[7], 0x01);
	ck_assert_uint_eq(w[8], 2);		/* dst_cid */
	ck_assert_uint_eq(w[16], 0x44);		/* src_port */
	ck_assert_uint_eq(w[24], 6);		/* len */
	ck_assert_uint_eq(w[28], 1);		/* type */
	ck_assert_uint_eq(w[30], 5);		/* op */
	ck_assert_uint_eq(w[32], 3);		/* flags */
	ck_assert_uint_eq(w[36 + 2], 4);	/* buf_alloc 0x40000 */
	ck_assert_uint_eq(w[40], 0xdd);		/* fwd_cnt */
	vsock_hdr_decode(&back, w);
	ck_assert_mem_eq(&back, &h, sizeof(h));
}
END_TEST

START_TEST(guest_connect_accept)
{
	struct vsock_conn *c = established(4096);

	ck_assert_int_eq(c->state, VSOCK_ESTABLISHED);
	ck_assert_uint_eq(c->local_port, HPORT);
	ck_assert_uint_eq(c->peer_port, GPORT);
	ck_assert_uint_eq(c->peer_buf_alloc, 4096);
	ck_assert_uint_eq(t->nr_conns, 1);
	ck_assert_ptr_eq(vsock_conn_lookup(t, HPORT, GPORT), c);
}
END_TEST

START_TEST(guest_connect_refused_by_host)
{
	struct vsock_rx_result r = rx(VSOCK_OP_REQUEST, 0, 0, 4096, 0);

	ck_assert_int_eq(r.ev, VSOCK_EV_CONNECT);
	/* No Unix socket listening: the device releases with a reset. */
	vsock_conn_release(t, r.c, true);
	expect_pkt(VSOCK_OP_RST, HPORT, GPORT);
	expect_none();
	ck_assert_uint_eq(t->nr_conns, 0);
}
END_TEST

START_TEST(host_connect_response)
{
	struct vsock_conn *c = vsock_conn_open_host(t, 52);
	struct vsock_rx_result r;
	struct vsock_hdr h;

	ck_assert_ptr_nonnull(c);
	ck_assert_uint_ge(c->local_port, VSOCK_HOST_PORT_BASE);
	ck_assert(vsock_pop_ctrl(t, &h));
	ck_assert_uint_eq(h.op, VSOCK_OP_REQUEST);
	ck_assert_uint_eq(h.dst_port, 52);
	ck_assert_uint_eq(h.buf_alloc, VSOCK_BUF_ALLOC);
	expect_none();
	/* No data before the guest answered. */
	ck_assert_uint_eq(vsock_conn_tx_credit(c), 0);
	r = rx_full(CID, 2, 52, c->local_port, 1, VSOCK_OP_RESPONSE, 0, 0, 8192, 0, 0);
	ck_assert_int_eq(r.ev, VSOCK_EV_ESTABLISHED);
	ck_assert_ptr_eq(r.c, c);
	ck_assert_uint_eq(vsock_conn_tx_credit(c), 8192);
	/* A second RESPONSE is a protocol error. */
	r = rx_full(CID, 2, 52, c->local_port, 1, VSOCK_OP_RESPONSE, 0, 0, 8192, 0, 0);
	ck_assert_int_eq(r.ev, VSOCK_EV_RESET);
	ck_assert(vsock_pop_ctrl(t, &h));
	ck_assert_uint_eq(h.op, VSOCK_OP_RST);
}
END_TEST

START_TEST(host_connect_refused_retry)
{
	struct vsock_conn *c = vsock_conn_open_host(t, 52);
	uint32_t lp = c->local_port;
	struct vsock_rx_result r;

	expect_pkt(VSOCK_OP_REQUEST, lp, 52);
	r = rx_full(CID, 2, 52, lp, 1, VSOCK_OP_RST, 0, 0, 0, 0, 0);
	ck_assert_int_eq(r.ev, VSOCK_EV_REFUSED);
	ck_assert_int_eq(c->state, VSOCK_REFUSED);
	/* Never answer a reset with a reset. */
	expect_none();
	vsock_conn_retry(c);
	expect_pkt(VSOCK_OP_REQUEST, lp, 52);
	r = rx_full(CID, 2, 52, lp, 1, VSOCK_OP_RESPONSE, 0, 0, 4096, 0, 0);
	ck_assert_int_eq(r.ev, VSOCK_EV_ESTABLISHED);
	/* Giving up while refused sends nothing (the guest already said no). */
	c = vsock_conn_open_host(t, 53);
	expect_pkt(VSOCK_OP_REQUEST, c->local_port, 53);
	r = rx_full(CID, 2, 53, c->local_port, 1, VSOCK_OP_RST, 0, 0, 0, 0, 0);
	ck_assert_int_eq(r.ev, VSOCK_EV_REFUSED);
	vsock_conn_release(t, c, true);
	expect_none();
	ck_assert_uint_eq(t->nr_conns, 1);
}
END_TEST

START_TEST(host_ports_unique)
{
	struct vsock_conn *a = vsock_conn_open_host(t, 7), *b = vsock_conn_open_host(t, 7);

	ck_assert_uint_ne(a->local_port, b->local_port);
}
END_TEST

START_TEST(guest_data_and_credit_update)
{
	struct vsock_conn *c = established(4096);
	struct vsock_rx_result r;
	struct vsock_hdr h;

	r = rx(VSOCK_OP_RW, 100, 0, 4096, 0);
	ck_assert_int_eq(r.ev, VSOCK_EV_DATA);
	ck_assert_uint_eq(r.hdr.len, 100);
	ck_assert_uint_eq(c->rx_cnt, 100);
	/* Small consumption: the guest still has plenty of credit, stay quiet. */
	vsock_conn_consumed(c, 100);
	ck_assert_uint_eq(c->fwd_cnt, 100);
	expect_none();
	/* Zero-length RW is fine and means nothing. */
	r = rx(VSOCK_OP_RW, 0, 0, 4096, 0);
	ck_assert_int_eq(r.ev, VSOCK_EV_NONE);
	/* Consume a threshold's worth: the guest hears about it. */
	for (int i = 0; i < 2; i++) {
		r = rx(VSOCK_OP_RW, VSOCK_MAX_PAYLOAD / 2, 0, 4096, 0);
		ck_assert_int_eq(r.ev, VSOCK_EV_DATA);
	}
	vsock_conn_consumed(c, VSOCK_MAX_PAYLOAD);
	ck_assert(vsock_pop_ctrl(t, &h));
	ck_assert_uint_eq(h.op, VSOCK_OP_CREDIT_UPDATE);
	ck_assert_uint_eq(h.fwd_cnt, 100 + VSOCK_MAX_PAYLOAD);
	ck_assert_uint_eq(h.buf_alloc, VSOCK_BUF_ALLOC);
	expect_none();
}
END_TEST

START_TEST(guest_overruns_credit)
{
	struct vsock_conn *c = established(4096);
	struct vsock_rx_result r;
	unsigned i;

	/* Exactly the advertised buffer is allowed without any consumption. */
	for (i = 0; i < VSOCK_BUF_ALLOC / VSOCK_MAX_PAYLOAD; i++) {
		r = rx(VSOCK_OP_RW, VSOCK_MAX_PAYLOAD, 0, 4096, 0);
		ck_assert_int_eq(r.ev, VSOCK_EV_DATA);
	}
	ck_assert_uint_eq(c->rx_cnt - c->fwd_cnt, VSOCK_BUF_ALLOC);
	r = rx(VSOCK_OP_RW, 1, 0, 4096, 0);
	ck_assert_int_eq(r.ev, VSOCK_EV_RESET);
	ck_assert_int_eq(c->state, VSOCK_DEAD);
	expect_pkt(VSOCK_OP_RST, HPORT, GPORT);
	expect_none();
	/* Packets for a dead connection are ignored until the device releases it. */
	r = rx(VSOCK_OP_RW, 1, 0, 4096, 0);
	ck_assert_int_eq(r.ev, VSOCK_EV_NONE);
	expect_none();
	vsock_conn_release(t, c, true);
	expect_none();
	ck_assert_uint_eq(t->nr_conns, 0);
}
END_TEST

START_TEST(host_data_credit)
{
	struct vsock_conn *c = established(1000);
	struct vsock_rx_result r;
	struct vsock_hdr h;

	ck_assert_uint_eq(vsock_conn_tx_credit(c), 1000);
	vsock_conn_make_rw(t, c, &h, 600);
	ck_assert_uint_eq(h.op, VSOCK_OP_RW);
	ck_assert_uint_eq(h.len, 600);
	ck_assert_uint_eq(h.dst_cid, CID);
	ck_assert_uint_eq(h.src_port, HPORT);
	ck_assert_uint_eq(h.dst_port, GPORT);
	ck_assert_uint_eq(vsock_conn_tx_credit(c), 400);
	vsock_conn_make_rw(t, c, &h, 400);
	/* Exhausted: nothing more may be sent. */
	ck_assert_uint_eq(vsock_conn_tx_credit(c), 0);
	vsock_conn_need_credit(c);
	vsock_conn_need_credit(c);
	expect_pkt(VSOCK_OP_CREDIT_REQUEST, HPORT, GPORT);
	expect_none();
	/* The guest consumed 700 bytes. */
	r = rx(VSOCK_OP_CREDIT_UPDATE, 0, 0, 1000, 700);
	ck_assert_int_eq(r.ev, VSOCK_EV_NONE);
	ck_assert_uint_eq(vsock_conn_tx_credit(c), 700);
	/* A larger buffer opens more credit; a huge one is capped per packet. */
	rx(VSOCK_OP_CREDIT_UPDATE, 0, 0, 1u << 30, 1000);
	ck_assert_uint_eq(vsock_conn_tx_credit(c), VSOCK_MAX_PAYLOAD);
	/* A guest shrinking its buffer below what is in flight gets 0, not a wrap. */
	vsock_conn_make_rw(t, c, &h, 500);
	rx(VSOCK_OP_CREDIT_UPDATE, 0, 0, 100, 1000);
	ck_assert_uint_eq(vsock_conn_tx_credit(c), 0);
	/* So does a fwd_cnt beyond what we sent. */
	rx(VSOCK_OP_CREDIT_UPDATE, 0, 0, 1000, 5000);
	ck_assert_uint_eq(vsock_conn_tx_credit(c), 0);
}
END_TEST

START_TEST(credit_counters_wrap)
{
	struct vsock_conn *c = established(1000);
	struct vsock_hdr h;

	c->tx_cnt = 0xffffff00u;
	c->peer_fwd_cnt = 0xffffff00u;
	vsock_conn_make_rw(t, c, &h, 0x200);
	ck_assert_uint_eq(c->tx_cnt, 0x100);
	ck_assert_uint_eq(vsock_conn_tx_credit(c), 1000 - 0x200);
}
END_TEST

START_TEST(credit_request_answered)
{
	struct vsock_conn *c = established(4096);
	struct vsock_rx_result r;
	struct vsock_hdr h;

	rx(VSOCK_OP_RW, 10, 0, 4096, 0);
	vsock_conn_consumed(c, 10);
	r = rx(VSOCK_OP_CREDIT_REQUEST, 0, 0, 4096, 0);
	ck_assert_int_eq(r.ev, VSOCK_EV_NONE);
	ck_assert(vsock_pop_ctrl(t, &h));
	ck_assert_uint_eq(h.op, VSOCK_OP_CREDIT_UPDATE);
	ck_assert_uint_eq(h.fwd_cnt, 10);
	ck_assert_uint_eq(h.buf_alloc, VSOCK_BUF_ALLOC);
	expect_none();
}
END_TEST

START_TEST(rw_carries_credit)
{
	struct vsock_conn *c = established(4096);
	struct vsock_hdr h;
	unsigned i;

	for (i = 0; i < 4; i++)
		rx(VSOCK_OP_RW, VSOCK_MAX_PAYLOAD, 0, 4096, 0);
	vsock_conn_consumed(c, VSOCK_MAX_PAYLOAD);
	ck_assert(vsock_has_ctrl(t));
	/* A data packet tells the guest our fwd_cnt: the update is dropped. */
	vsock_conn_make_rw(t, c, &h, 1);
	ck_assert_uint_eq(h.fwd_cnt, VSOCK_MAX_PAYLOAD);
	expect_none();
}
END_TEST

START_TEST(shutdown_guest_then_host)
{
	struct vsock_conn *c = established(4096);
	struct vsock_rx_result r;
	struct vsock_hdr h;

	r = rx(VSOCK_OP_SHUTDOWN, 0, VSOCK_SHUTDOWN_SEND, 4096, 0);
	ck_assert_int_eq(r.ev, VSOCK_EV_SHUTDOWN);
	ck_assert_uint_eq(c->peer_shut, VSOCK_SHUTDOWN_SEND);
	ck_assert(!vsock_conn_done(c));
	/* The host can still send. */
	ck_assert(vsock_conn_wants_host_data(c));
	ck_assert_uint_eq(vsock_conn_tx_credit(c), 4096);
	/* Data after SHUTDOWN(SEND) is a protocol error... checked below. */
	vsock_conn_host_eof(c);
	vsock_conn_host_eof(c);
	ck_assert(vsock_pop_ctrl(t, &h));
	ck_assert_uint_eq(h.op, VSOCK_OP_SHUTDOWN);
	ck_assert_uint_eq(h.flags, VSOCK_SHUTDOWN_SEND);
	expect_none();
	ck_assert(!vsock_conn_wants_host_data(c));
	ck_assert_uint_eq(vsock_conn_tx_credit(c), 0);
	ck_assert(vsock_conn_done(c));
	vsock_conn_release(t, c, true);
	expect_pkt(VSOCK_OP_RST, HPORT, GPORT);
	expect_none();
}
END_TEST

START_TEST(shutdown_host_then_guest_both)
{
	struct vsock_conn *c = established(4096);
	struct vsock_rx_result r;

	vsock_conn_host_eof(c);
	expect_pkt(VSOCK_OP_SHUTDOWN, HPORT, GPORT);
	ck_assert(!vsock_conn_done(c));
	/* Guest data still flows after our SHUTDOWN(SEND). */
	r = rx(VSOCK_OP_RW, 5, 0, 4096, 0);
	ck_assert_int_eq(r.ev, VSOCK_EV_DATA);
	ck_assert_int_eq(vsock_conn_buffer(c, "hello", 5), 0);
	r = rx(VSOCK_OP_SHUTDOWN, 0, VSOCK_SHUTDOWN_SEND | VSOCK_SHUTDOWN_RCV, 4096, 0);
	ck_assert_int_eq(r.ev, VSOCK_EV_SHUTDOWN);
	/* Not done while guest bytes wait for the host socket. */
	ck_assert(!vsock_conn_done(c));
	vsock_conn_drain(c, 5);
	ck_assert(vsock_conn_done(c));
}
END_TEST

START_TEST(shutdown_rcv_stops_host_data)
{
	struct vsock_conn *c = established(4096);

	rx(VSOCK_OP_SHUTDOWN, 0, VSOCK_SHUTDOWN_RCV | 0x80, 4096, 0);
	ck_assert_uint_eq(c->peer_shut, VSOCK_SHUTDOWN_RCV);	/* unknown bits ignored */
	ck_assert(!vsock_conn_wants_host_data(c));
	ck_assert_uint_eq(vsock_conn_tx_credit(c), 0);
	ck_assert(!vsock_conn_done(c));
	rx(VSOCK_OP_SHUTDOWN, 0, VSOCK_SHUTDOWN_SEND, 4096, 0);
	ck_assert(vsock_conn_done(c));
}
END_TEST

START_TEST(rw_after_guest_shutdown_send)
{
	struct vsock_conn *c = established(4096);
	struct vsock_rx_result r;

	rx(VSOCK_OP_SHUTDOWN, 0, VSOCK_SHUTDOWN_SEND, 4096, 0);
	r = rx(VSOCK_OP_RW, 1, 0, 4096, 0);
	ck_assert_int_eq(r.ev, VSOCK_EV_RESET);
	ck_assert_int_eq(c->state, VSOCK_DEAD);
	expect_pkt(VSOCK_OP_RST, HPORT, GPORT);
}
END_TEST

START_TEST(guest_rst)
{
	struct vsock_conn *c = established(4096);
	struct vsock_rx_result r;

	r = rx(VSOCK_OP_RST, 0, 0, 0, 0);
	ck_assert_int_eq(r.ev, VSOCK_EV_RESET);
	ck_assert_ptr_eq(r.c, c);
	ck_assert_int_eq(c->state, VSOCK_DEAD);
	expect_none();
	vsock_conn_release(t, c, false);
	ck_assert_uint_eq(t->nr_conns, 0);
	/* A reset for nothing is ignored, not answered. */
	r = rx(VSOCK_OP_RST, 0, 0, 0, 0);
	ck_assert_int_eq(r.ev, VSOCK_EV_NONE);
	expect_none();
}
END_TEST

START_TEST(host_rst)
{
	struct vsock_conn *c = established(4096);

	vsock_conn_release(t, c, true);
	expect_pkt(VSOCK_OP_RST, HPORT, GPORT);
	expect_none();
	/* The slot is reusable and the old ports are unknown now. */
	ck_assert_ptr_null(vsock_conn_lookup(t, HPORT, GPORT));
	ck_assert_int_eq(rx(VSOCK_OP_RW, 1, 0, 4096, 0).ev, VSOCK_EV_NONE);
	expect_pkt(VSOCK_OP_RST, HPORT, GPORT);
}
END_TEST

START_TEST(bad_cid_dropped)
{
	struct vsock_rx_result r;

	r = rx_full(CID + 1, 2, GPORT, HPORT, 1, VSOCK_OP_REQUEST, 0, 0, 4096, 0, 0);
	ck_assert_int_eq(r.ev, VSOCK_EV_NONE);
	r = rx_full(CID, 3, GPORT, HPORT, 1, VSOCK_OP_REQUEST, 0, 0, 4096, 0, 0);
	ck_assert_int_eq(r.ev, VSOCK_EV_NONE);
	r = rx_full(CID | 1ull << 32, 2, GPORT, HPORT, 1, VSOCK_OP_REQUEST, 0, 0, 4096, 0, 0);
	ck_assert_int_eq(r.ev, VSOCK_EV_NONE);
	expect_none();
	ck_assert_uint_eq(t->nr_conns, 0);
	ck_assert_uint_eq(t->bad_pkts, 3);
}
END_TEST

START_TEST(bad_type_op_len_rst)
{
	struct vsock_rx_result r;

	/* SEQPACKET (2) is not offered. */
	r = rx_full(CID, 2, GPORT, HPORT, 2, VSOCK_OP_REQUEST, 0, 0, 4096, 0, 0);
	ck_assert_int_eq(r.ev, VSOCK_EV_NONE);
	expect_pkt(VSOCK_OP_RST, HPORT, GPORT);
	r = rx_full(CID, 2, GPORT, HPORT, 1, 0, 0, 0, 4096, 0, 0);
	ck_assert_int_eq(r.ev, VSOCK_EV_NONE);
	expect_pkt(VSOCK_OP_RST, HPORT, GPORT);
	r = rx_full(CID, 2, GPORT, HPORT, 1, 8, 0, 0, 4096, 0, 0);
	expect_pkt(VSOCK_OP_RST, HPORT, GPORT);
	/* A reset with a bad type is still not answered. */
	rx_full(CID, 2, GPORT, HPORT, 7, VSOCK_OP_RST, 0, 0, 0, 0, 0);
	expect_none();
	ck_assert_uint_eq(t->nr_conns, 0);

	/* On a live connection the connection dies too. */
	established(4096);
	r = rx_full(CID, 2, GPORT, HPORT, 1, VSOCK_OP_RW, VSOCK_MAX_PAYLOAD + 1, 0, 4096, 0,
		    VSOCK_MAX_PAYLOAD + 1);
	ck_assert_int_eq(r.ev, VSOCK_EV_RESET);
	expect_pkt(VSOCK_OP_RST, HPORT, GPORT);
	vsock_conn_release(t, r.c, true);
	expect_none();

	/* len larger than the buffer the guest actually gave. */
	established(4096);
	r = rx_full(CID, 2, GPORT, HPORT, 1, VSOCK_OP_RW, 100, 0, 4096, 0, 99);
	ck_assert_int_eq(r.ev, VSOCK_EV_RESET);
	expect_pkt(VSOCK_OP_RST, HPORT, GPORT);
	vsock_conn_release(t, r.c, false);

	/* Payload on a control packet. */
	established(4096);
	r = rx_full(CID, 2, GPORT, HPORT, 1, VSOCK_OP_CREDIT_UPDATE, 4, 0, 4096, 0, 4);
	ck_assert_int_eq(r.ev, VSOCK_EV_RESET);
	expect_pkt(VSOCK_OP_RST, HPORT, GPORT);
}
END_TEST

START_TEST(request_on_existing_conn)
{
	struct vsock_rx_result r;

	established(4096);
	r = rx(VSOCK_OP_REQUEST, 0, 0, 4096, 0);
	ck_assert_int_eq(r.ev, VSOCK_EV_RESET);
	expect_pkt(VSOCK_OP_RST, HPORT, GPORT);
	ck_assert_uint_eq(t->nr_conns, 1);	/* until the device releases it */
}
END_TEST

START_TEST(response_to_guest_connect_is_error)
{
	struct vsock_rx_result r;

	established(4096);
	r = rx(VSOCK_OP_RESPONSE, 0, 0, 4096, 0);
	ck_assert_int_eq(r.ev, VSOCK_EV_RESET);
	expect_pkt(VSOCK_OP_RST, HPORT, GPORT);
}
END_TEST

START_TEST(unknown_conn_rst)
{
	static const uint16_t ops[] = {
		VSOCK_OP_RESPONSE, VSOCK_OP_SHUTDOWN, VSOCK_OP_RW,
		VSOCK_OP_CREDIT_UPDATE, VSOCK_OP_CREDIT_REQUEST,
	};
	unsigned i;

	for (i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		struct vsock_rx_result r = rx(ops[i], ops[i] == VSOCK_OP_RW ? 3 : 0, 0, 4096, 0);

		ck_assert_int_eq(r.ev, VSOCK_EV_NONE);
		expect_pkt(VSOCK_OP_RST, HPORT, GPORT);
		expect_none();
	}
	ck_assert_uint_eq(t->nr_conns, 0);
}
END_TEST

START_TEST(table_full_rst)
{
	struct vsock_rx_result r;
	struct vsock_hdr h;
	unsigned i;

	for (i = 0; i < VSOCK_MAX_CONNS; i++) {
		r = rx_full(CID, 2, 2000 + i, HPORT, 1, VSOCK_OP_REQUEST, 0, 0, 4096, 0, 0);
		ck_assert_int_eq(r.ev, VSOCK_EV_CONNECT);
	}
	ck_assert_uint_eq(t->nr_conns, VSOCK_MAX_CONNS);
	r = rx_full(CID, 2, 9999, HPORT, 1, VSOCK_OP_REQUEST, 0, 0, 4096, 0, 0);
	ck_assert_int_eq(r.ev, VSOCK_EV_NONE);
	expect_pkt(VSOCK_OP_RST, HPORT, 9999);
	ck_assert_ptr_null(vsock_conn_open_host(t, 1));
	/* Freeing one slot makes room again. */
	vsock_conn_release(t, vsock_conn_lookup(t, HPORT, 2000), false);
	ck_assert_ptr_nonnull(vsock_conn_open_host(t, 1));
	ck_assert(vsock_pop_ctrl(t, &h));
	ck_assert_uint_eq(h.op, VSOCK_OP_REQUEST);
}
END_TEST

START_TEST(orphan_ring_bounded)
{
	struct vsock_hdr h;
	unsigned i, n = 0;

	for (i = 0; i < 3 * VSOCK_ORPHAN_MAX; i++)
		rx_full(CID, 2, i, HPORT, 1, VSOCK_OP_RW, 0, 0, 0, 0, 0);
	ck_assert_uint_eq(t->dropped, 2 * VSOCK_ORPHAN_MAX);
	while (vsock_pop_ctrl(t, &h)) {
		ck_assert_uint_eq(h.op, VSOCK_OP_RST);
		ck_assert_uint_eq(h.dst_port, n);	/* in order */
		n++;
	}
	ck_assert_uint_eq(n, VSOCK_ORPHAN_MAX);
}
END_TEST

START_TEST(ctrl_round_robin)
{
	struct vsock_rx_result a, b;
	struct vsock_hdr h;

	a = rx_full(CID, 2, 1, HPORT, 1, VSOCK_OP_REQUEST, 0, 0, 4096, 0, 0);
	b = rx_full(CID, 2, 2, HPORT, 1, VSOCK_OP_REQUEST, 0, 0, 4096, 0, 0);
	vsock_conn_accept(a.c);
	vsock_conn_accept(b.c);
	a.c->pending |= VSOCK_P_CREDIT_UPDATE;
	ck_assert(vsock_pop_ctrl(t, &h));
	ck_assert_uint_eq(h.dst_port, 1);
	ck_assert_uint_eq(h.op, VSOCK_OP_RESPONSE);
	/* The other connection gets its turn before a's second packet. */
	ck_assert(vsock_pop_ctrl(t, &h));
	ck_assert_uint_eq(h.dst_port, 2);
	ck_assert(vsock_pop_ctrl(t, &h));
	ck_assert_uint_eq(h.dst_port, 1);
	ck_assert_uint_eq(h.op, VSOCK_OP_CREDIT_UPDATE);
	expect_none();
}
END_TEST

START_TEST(byte_buffer)
{
	struct vsock_conn *c = established(4096);
	static uint8_t in[VSOCK_BUF_ALLOC], out[VSOCK_BUF_ALLOC];
	const uint8_t *p;
	uint32_t n, got = 0, i;

	for (i = 0; i < sizeof(in); i++)
		in[i] = i * 7 + (i >> 8);
	ck_assert_uint_eq(vsock_conn_buffered(c, &p), 0);
	ck_assert_int_eq(vsock_conn_buffer(c, in, 200000), 0);
	n = vsock_conn_buffered(c, &p);
	ck_assert_uint_eq(n, 200000);
	memcpy(out, p, 150000);
	vsock_conn_drain(c, 150000);
	got = 150000;
	ck_assert_uint_eq(c->fwd_cnt, 150000);
	/* Wraps around the end of the ring. */
	ck_assert_int_eq(vsock_conn_buffer(c, in + 200000, 62144), 0);
	ck_assert_int_eq(vsock_conn_buffer(c, in, VSOCK_BUF_ALLOC), -ENOSPC);
	while ((n = vsock_conn_buffered(c, &p))) {
		memcpy(out + got, p, n);
		vsock_conn_drain(c, n);
		got += n;
	}
	ck_assert_uint_eq(got, 262144);
	ck_assert_mem_eq(out, in, 262144);
	ck_assert_uint_eq(c->buf_used, 0);
}
END_TEST

START_TEST(reset_table)
{
	struct vsock_conn *c = established(4096);
	uint32_t port;

	ck_assert_int_eq(vsock_conn_buffer(c, "x", 1), 0);
	port = vsock_conn_open_host(t, 9)->local_port;
	vsock_table_reset(t);
	ck_assert_uint_eq(t->nr_conns, 0);
	expect_none();
	/* Host ports keep increasing across a reset. */
	ck_assert_uint_gt(vsock_conn_open_host(t, 9)->local_port, port);
}
END_TEST

Suite *vsock_suite(void)
{
	Suite *s = suite_create("vsock");
	TCase *tc = tcase_create("conn");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, header_layout);
	tcase_add_test(tc, guest_connect_accept);
	tcase_add_test(tc, guest_connect_refused_by_host);
	tcase_add_test(tc, host_connect_response);
	tcase_add_test(tc, host_connect_refused_retry);
	tcase_add_test(tc, host_ports_unique);
	tcase_add_test(tc, guest_data_and_credit_update);
	tcase_add_test(tc, guest_overruns_credit);
	tcase_add_test(tc, host_data_credit);
	tcase_add_test(tc, credit_counters_wrap);
	tcase_add_test(tc, credit_request_answered);
	tcase_add_test(tc, rw_carries_credit);
	tcase_add_test(tc, shutdown_guest_then_host);
	tcase_add_test(tc, shutdown_host_then_guest_both);
	tcase_add_test(tc, shutdown_rcv_stops_host_data);
	tcase_add_test(tc, rw_after_guest_shutdown_send);
	tcase_add_test(tc, guest_rst);
	tcase_add_test(tc, host_rst);
	tcase_add_test(tc, bad_cid_dropped);
	tcase_add_test(tc, bad_type_op_len_rst);
	tcase_add_test(tc, request_on_existing_conn);
	tcase_add_test(tc, response_to_guest_connect_is_error);
	tcase_add_test(tc, unknown_conn_rst);
	tcase_add_test(tc, table_full_rst);
	tcase_add_test(tc, orphan_ring_bounded);
	tcase_add_test(tc, ctrl_round_robin);
	tcase_add_test(tc, byte_buffer);
	tcase_add_test(tc, reset_table);
	suite_add_tcase(s, tc);
	return s;
}
