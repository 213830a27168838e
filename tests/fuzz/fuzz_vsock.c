/*
 * fuzz_vsock: libFuzzer target for the pure vsock stream engine
 * (vsock_conn.c), driven in both directions.
 *
 * The input is a script. Each step is one opcode byte (low nibble: action,
 * high nibble: action flags) followed by its
 * arguments: a guest packet (44-byte wire header, optionally with the cids
 * and type forced valid so the fuzzer gets past the cheap checks), a host
 * connect, host data to the guest, host EOF, socket consumption, a drain of
 * the buffered bytes, a host close, or popping control packets. Events are
 * handled the way virtio_vsock.c does. Invariants checked after every step:
 * connection count, bounded buffers and reset ring, sane control headers,
 * and that buffering data accepted by vsock_rx() never overruns the buffer
 * (the credit we advertise must cover it).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "virtio/vsock_conn.h"

#define GUEST_CID 3
#define MAX_STEPS 512

struct in {
	const uint8_t *p;
	size_t left;
};

static uint64_t take(struct in *in, unsigned n)
{
	uint64_t v = 0;
	unsigned i;

	for (i = 0; i < n && in->left; i++, in->p++, in->left--)
		v |= (uint64_t)*in->p << (8 * i);
	return v;
}

static uint8_t payload[VSOCK_MAX_PAYLOAD];

static struct vsock_conn *pick(struct vsock_table *t, uint8_t sel)
{
	unsigned i;

	for (i = 0; i < VSOCK_MAX_CONNS; i++) {
		struct vsock_conn *c = &t->conns[(sel + i) % VSOCK_MAX_CONNS];

		if (c->state != VSOCK_FREE)
			return c;
	}
	return NULL;
}

static void check(const struct vsock_table *t)
{
	unsigned i, n = 0;

	if (t->orphan_len > VSOCK_ORPHAN_MAX || t->orphan_head >= VSOCK_ORPHAN_MAX)
		abort();
	for (i = 0; i < VSOCK_MAX_CONNS; i++) {
		const struct vsock_conn *c = &t->conns[i];

		if (c->state == VSOCK_FREE)
			continue;
		n++;
		if (c->buf_used > VSOCK_BUF_ALLOC || c->buf_head >= VSOCK_BUF_ALLOC)
			abort();
		if (vsock_conn_tx_credit(c) > VSOCK_MAX_PAYLOAD)
			abort();
	}
	if (n != t->nr_conns)
		abort();
}

static void pop_ctrl(struct vsock_table *t, unsigned max)
{
	struct vsock_hdr h;
	uint8_t wire[VSOCK_HDR_SIZE];

	while (max-- && vsock_pop_ctrl(t, &h)) {
		if (h.src_cid != VSOCK_HOST_CID || h.dst_cid != t->guest_cid ||
		    h.type != VSOCK_TYPE_STREAM || h.len != 0 ||
		    h.op < VSOCK_OP_REQUEST || h.op > VSOCK_OP_CREDIT_REQUEST ||
		    h.op == VSOCK_OP_RW)
			abort();
		vsock_hdr_encode(wire, &h);
	}
}

/* Act on vsock_rx() the way the device does. */
static void handle(struct vsock_table *t, struct vsock_rx_result r, uint8_t how)
{
	struct vsock_conn *c = r.c;
	int err;

	switch (r.ev) {
	case VSOCK_EV_NONE:
	case VSOCK_EV_ESTABLISHED:
		break;
	case VSOCK_EV_SHUTDOWN:
		if (vsock_conn_done(c))
			vsock_conn_release(t, c, true);
		break;
	case VSOCK_EV_CONNECT:
		if (how & 1)
			vsock_conn_accept(c);
		else
			vsock_conn_release(t, c, true);
		break;
	case VSOCK_EV_REFUSED:
		if (how & 1)
			vsock_conn_retry(c);
		else
			vsock_conn_release(t, c, false);
		break;
	case VSOCK_EV_RESET:
		vsock_conn_release(t, c, false);
		break;
	case VSOCK_EV_DATA: {
		/* The socket takes part of it (only with nothing buffered). */
		uint32_t wrote = 0;

		if (r.hdr.len > VSOCK_MAX_PAYLOAD)
			abort();
		if (!c->buf_used) {
			wrote = how % 4 == 0 ? r.hdr.len : (how * 257u) % (r.hdr.len + 1);
			vsock_conn_consumed(c, wrote);
		}
		err = vsock_conn_buffer(c, payload, r.hdr.len - wrote);
		/* vsock_rx() accepted it, so our credit must cover it. */
		if (err)
			abort();
		break;
	}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct vsock_table t;
	struct in in = { data, size };
	unsigned step;

	vsock_table_init(&t, GUEST_CID);
	for (step = 0; step < MAX_STEPS && in.left; step++) {
		uint8_t op = take(&in, 1);
		struct vsock_conn *c;
		struct vsock_hdr h;
		uint8_t wire[VSOCK_HDR_SIZE];
		uint32_t n;

		switch ((op & 0x0f) % 10) {
		case 0: case 1: case 2: {	/* guest packet */
			uint64_t avail;
			uint8_t how;

			memset(wire, 0, sizeof(wire));
			n = in.left < VSOCK_HDR_SIZE ? in.left : VSOCK_HDR_SIZE;
			memcpy(wire, in.p, n);
			in.p += n;
			in.left -= n;
			vsock_hdr_decode(&h, wire);
			if (op & 0x10) {
				h.src_cid = GUEST_CID;
				h.dst_cid = VSOCK_HOST_CID;
				h.type = VSOCK_TYPE_STREAM;
			}
			if (op & 0x20) {	/* address an existing connection */
				c = pick(&t, h.src_port);
				if (c) {
					h.src_port = c->peer_port;
					h.dst_port = c->local_port;
				}
			}
			if (op & 0x40)
				h.len %= 4097;
			vsock_hdr_encode(wire, &h);
			avail = (op & 0x80) ? h.len : take(&in, 4);
			how = take(&in, 1);
			handle(&t, vsock_rx(&t, wire, avail), how);
			break;
		}
		case 3:				/* host connects to a guest port */
			(void)vsock_conn_open_host(&t, take(&in, 4));
			break;
		case 4:				/* host data for the guest */
			c = pick(&t, take(&in, 1));
			if (!c)
				break;
			n = vsock_conn_tx_credit(c);
			if (n) {
				uint32_t want = take(&in, 4);

				if (want > n)
					want = n;
				vsock_conn_make_rw(&t, c, &h, want);
				if (h.op != VSOCK_OP_RW || h.len != want ||
				    h.src_cid != VSOCK_HOST_CID)
					abort();
			} else if (vsock_conn_wants_host_data(c)) {
				vsock_conn_need_credit(c);
			}
			break;
		case 5:				/* host socket EOF */
			c = pick(&t, take(&in, 1));
			if (c)
				vsock_conn_host_eof(c);
			break;
		case 6: {			/* buffered bytes written to the socket */
			const uint8_t *p;

			c = pick(&t, take(&in, 1));
			if (!c)
				break;
			n = vsock_conn_buffered(c, &p);
			if (n > c->buf_used || (n && !p))
				abort();
			vsock_conn_drain(c, (uint32_t)take(&in, 4) % (n + 1));
			if (vsock_conn_done(c))
				vsock_conn_release(&t, c, true);
			break;
		}
		case 7:				/* host closes */
			c = pick(&t, take(&in, 1));
			if (c)
				vsock_conn_release(&t, c, op & 0x80);
			break;
		case 8:				/* device sends control packets */
			pop_ctrl(&t, take(&in, 1) % 16);
			break;
		case 9:				/* device reset */
			if ((op & 0xf0) == 0xf0)
				vsock_table_reset(&t);
			else
				(void)vsock_has_ctrl(&t);
			break;
		}
		check(&t);
	}
	pop_ctrl(&t, ~0u);
	vsock_table_reset(&t);
	return 0;
}
