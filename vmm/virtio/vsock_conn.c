/*
 * vsock_conn: the pure virtio-vsock stream protocol engine (see vsock_conn.h).
 *
 * Everything that arrives from the guest is decoded field by field from the
 * wire bytes and checked before it changes any state. Counters are uint32_t
 * and compared by difference, exactly like the spec's free-running buf_alloc
 * / fwd_cnt arithmetic, so wrap-around after 4 GiB is harmless; a guest that
 * reports impossible values only lowers the credit it gets (clamped to 0).
 */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "virtio/vsock_conn.h"

void vsock_hdr_decode(struct vsock_hdr *h, const void *wire)
{
	struct vsock_hdr w;

	memcpy(&w, wire, sizeof(w));
	h->src_cid = le64toh(w.src_cid);
	h->dst_cid = le64toh(w.dst_cid);
	h->src_port = le32toh(w.src_port);
	h->dst_port = le32toh(w.dst_port);
	h->len = le32toh(w.len);
	h->type = le16toh(w.type);
	h->op = le16toh(w.op);
	h->flags = le32toh(w.flags);
	h->buf_alloc = le32toh(w.buf_alloc);
	h->fwd_cnt = le32toh(w.fwd_cnt);
}

void vsock_hdr_encode(void *wire, const struct vsock_hdr *h)
{
	struct vsock_hdr w;

	w.src_cid = htole64(h->src_cid);
	w.dst_cid = htole64(h->dst_cid);
	w.src_port = htole32(h->src_port);
	w.dst_port = htole32(h->dst_port);
	w.len = htole32(h->len);
	w.type = htole16(h->type);
	w.op = htole16(h->op);
	w.flags = htole32(h->flags);
	w.buf_alloc = htole32(h->buf_alloc);
	w.fwd_cnt = htole32(h->fwd_cnt);
	memcpy(wire, &w, sizeof(w));
}

void vsock_table_init(struct vsock_table *t, uint64_t guest_cid)
{
	memset(t, 0, sizeof(*t));
	t->guest_cid = guest_cid;
	t->next_host_port = VSOCK_HOST_PORT_BASE;
}

void vsock_table_reset(struct vsock_table *t)
{
	uint64_t cid = t->guest_cid;
	uint32_t port = t->next_host_port;
	unsigned i;

	for (i = 0; i < VSOCK_MAX_CONNS; i++)
		free(t->conns[i].buf);
	vsock_table_init(t, cid);
	/* Keep handing out fresh ports: a late guest packet must not hit a new conn. */
	t->next_host_port = port;
}

struct vsock_conn *vsock_conn_lookup(struct vsock_table *t, uint32_t local_port,
				     uint32_t peer_port)
{
	unsigned i;

	for (i = 0; i < VSOCK_MAX_CONNS; i++) {
		struct vsock_conn *c = &t->conns[i];

		if (c->state != VSOCK_FREE && c->local_port == local_port &&
		    c->peer_port == peer_port)
			return c;
	}
	return NULL;
}

static struct vsock_conn *conn_alloc(struct vsock_table *t, uint32_t local_port,
				     uint32_t peer_port, enum vsock_state st)
{
	unsigned i;

	if (t->nr_conns >= VSOCK_MAX_CONNS)
		return NULL;
	for (i = 0; i < VSOCK_MAX_CONNS; i++) {
		struct vsock_conn *c = &t->conns[i];

		if (c->state != VSOCK_FREE)
			continue;
		memset(c, 0, sizeof(*c));
		c->state = st;
		c->local_port = local_port;
		c->peer_port = peer_port;
		t->nr_conns++;
		return c;
	}
	return NULL;
}

/* Queue a reset that belongs to no (live) connection; dropped when full. */
static void orphan_rst(struct vsock_table *t, uint32_t local_port, uint32_t peer_port)
{
	struct vsock_hdr *h;

	if (t->orphan_len >= VSOCK_ORPHAN_MAX) {
		t->dropped++;
		return;
	}
	h = &t->orphan[(t->orphan_head + t->orphan_len) % VSOCK_ORPHAN_MAX];
	memset(h, 0, sizeof(*h));
	h->src_cid = VSOCK_HOST_CID;
	h->dst_cid = t->guest_cid;
	h->src_port = local_port;
	h->dst_port = peer_port;
	h->type = VSOCK_TYPE_STREAM;
	h->op = VSOCK_OP_RST;
	t->orphan_len++;
}

/* Protocol error on a live connection: reset it on both sides. */
static struct vsock_rx_result conn_kill(struct vsock_table *t, struct vsock_conn *c,
					struct vsock_rx_result r)
{
	t->bad_pkts++;
	orphan_rst(t, c->local_port, c->peer_port);
	c->state = VSOCK_DEAD;
	c->pending = 0;
	r.ev = VSOCK_EV_RESET;
	r.c = c;
	return r;
}

static bool conn_live(const struct vsock_conn *c)
{
	return c && c->state != VSOCK_FREE && c->state != VSOCK_DEAD &&
	       c->state != VSOCK_REFUSED;
}

static bool op_known(uint16_t op)
{
	return op >= VSOCK_OP_REQUEST && op <= VSOCK_OP_CREDIT_REQUEST;
}

static struct vsock_rx_result rx_rw(struct vsock_table *t, struct vsock_conn *c,
				    struct vsock_rx_result r)
{
	uint32_t held = c->rx_cnt - c->fwd_cnt;

	if (c->state != VSOCK_ESTABLISHED || (c->peer_shut & VSOCK_SHUTDOWN_SEND))
		return conn_kill(t, c, r);
	/* More than the credit we granted: the guest broke flow control. */
	if (held > VSOCK_BUF_ALLOC || r.hdr.len > VSOCK_BUF_ALLOC - held)
		return conn_kill(t, c, r);
	if (r.hdr.len == 0)
		return r;
	c->rx_cnt += r.hdr.len;
	r.ev = VSOCK_EV_DATA;
	return r;
}

static struct vsock_rx_result rx_conn(struct vsock_table *t, struct vsock_conn *c,
				      struct vsock_rx_result r)
{
	r.c = c;
	c->peer_buf_alloc = r.hdr.buf_alloc;
	c->peer_fwd_cnt = r.hdr.fwd_cnt;
	if (vsock_conn_tx_credit(c))
		c->credit_requested = false;

	switch (r.hdr.op) {
	case VSOCK_OP_RESPONSE:
		if (c->state != VSOCK_HOST_CONNECTING)
			return conn_kill(t, c, r);
		c->state = VSOCK_ESTABLISHED;
		c->pending &= ~VSOCK_P_REQUEST;
		r.ev = VSOCK_EV_ESTABLISHED;
		return r;
	case VSOCK_OP_RW:
		return rx_rw(t, c, r);
	case VSOCK_OP_CREDIT_UPDATE:
		/* Credit already recorded; the device retries its sends. */
		return r;
	case VSOCK_OP_CREDIT_REQUEST:
		if (c->state == VSOCK_ESTABLISHED)
			c->pending |= VSOCK_P_CREDIT_UPDATE;
		return r;
	case VSOCK_OP_SHUTDOWN:
		if (c->state != VSOCK_ESTABLISHED)
			return conn_kill(t, c, r);
		c->peer_shut |= r.hdr.flags & (VSOCK_SHUTDOWN_RCV | VSOCK_SHUTDOWN_SEND);
		r.ev = VSOCK_EV_SHUTDOWN;
		return r;
	default:
		/* REQUEST on an existing connection. */
		return conn_kill(t, c, r);
	}
}

struct vsock_rx_result vsock_rx(struct vsock_table *t, const void *wire_hdr,
				uint64_t payload_avail)
{
	struct vsock_rx_result r = { .ev = VSOCK_EV_NONE };
	struct vsock_conn *c;

	vsock_hdr_decode(&r.hdr, wire_hdr);
	/* Spoofed or misdirected: there is nobody sensible to answer. */
	if (r.hdr.src_cid != t->guest_cid || r.hdr.dst_cid != VSOCK_HOST_CID) {
		t->bad_pkts++;
		return r;
	}
	c = vsock_conn_lookup(t, r.hdr.dst_port, r.hdr.src_port);

	/* Never answer a reset with a reset (no ping-pong). */
	if (r.hdr.op == VSOCK_OP_RST) {
		if (!conn_live(c))
			return r;
		r.c = c;
		c->pending = 0;
		if (c->state == VSOCK_HOST_CONNECTING) {
			c->state = VSOCK_REFUSED;
			r.ev = VSOCK_EV_REFUSED;
		} else {
			c->state = VSOCK_DEAD;
			r.ev = VSOCK_EV_RESET;
		}
		return r;
	}

	if (r.hdr.type != VSOCK_TYPE_STREAM || !op_known(r.hdr.op) ||
	    r.hdr.len > VSOCK_MAX_PAYLOAD || r.hdr.len > payload_avail ||
	    (r.hdr.op != VSOCK_OP_RW && r.hdr.len != 0)) {
		if (conn_live(c))
			return conn_kill(t, c, r);
		t->bad_pkts++;
		orphan_rst(t, r.hdr.dst_port, r.hdr.src_port);
		return r;
	}

	if (!c) {
		if (r.hdr.op != VSOCK_OP_REQUEST) {
			orphan_rst(t, r.hdr.dst_port, r.hdr.src_port);
			return r;
		}
		c = conn_alloc(t, r.hdr.dst_port, r.hdr.src_port, VSOCK_GUEST_CONNECTING);
		if (!c) {
			orphan_rst(t, r.hdr.dst_port, r.hdr.src_port);
			return r;
		}
		c->peer_buf_alloc = r.hdr.buf_alloc;
		c->peer_fwd_cnt = r.hdr.fwd_cnt;
		r.c = c;
		r.ev = VSOCK_EV_CONNECT;
		return r;
	}
	/* Dead or refused: a reset is already on its way or was received. */
	if (!conn_live(c))
		return r;
	return rx_conn(t, c, r);
}

static void conn_hdr(const struct vsock_table *t, struct vsock_conn *c,
		     struct vsock_hdr *h, uint16_t op)
{
	memset(h, 0, sizeof(*h));
	h->src_cid = VSOCK_HOST_CID;
	h->dst_cid = t->guest_cid;
	h->src_port = c->local_port;
	h->dst_port = c->peer_port;
	h->type = VSOCK_TYPE_STREAM;
	h->op = op;
	h->buf_alloc = VSOCK_BUF_ALLOC;
	h->fwd_cnt = c->fwd_cnt;
	/* Every packet tells the guest our fwd_cnt. */
	c->last_fwd_sent = c->fwd_cnt;
}

bool vsock_has_ctrl(const struct vsock_table *t)
{
	unsigned i;

	if (t->orphan_len)
		return true;
	for (i = 0; i < VSOCK_MAX_CONNS; i++)
		if (t->conns[i].pending && conn_live(&t->conns[i]))
			return true;
	return false;
}

bool vsock_pop_ctrl(struct vsock_table *t, struct vsock_hdr *h)
{
	static const struct {
		unsigned bit;
		uint16_t op;
	} order[] = {
		{ VSOCK_P_REQUEST, VSOCK_OP_REQUEST },
		{ VSOCK_P_RESPONSE, VSOCK_OP_RESPONSE },
		{ VSOCK_P_CREDIT_UPDATE, VSOCK_OP_CREDIT_UPDATE },
		{ VSOCK_P_CREDIT_REQUEST, VSOCK_OP_CREDIT_REQUEST },
		{ VSOCK_P_SHUTDOWN, VSOCK_OP_SHUTDOWN },
	};
	unsigned i, k;

	if (t->orphan_len) {
		*h = t->orphan[t->orphan_head];
		t->orphan_head = (t->orphan_head + 1) % VSOCK_ORPHAN_MAX;
		t->orphan_len--;
		return true;
	}
	for (i = 0; i < VSOCK_MAX_CONNS; i++) {
		unsigned idx = (t->rr + i) % VSOCK_MAX_CONNS;
		struct vsock_conn *c = &t->conns[idx];

		if (!c->pending || !conn_live(c))
			continue;
		for (k = 0; k < sizeof(order) / sizeof(order[0]); k++) {
			if (!(c->pending & order[k].bit))
				continue;
			c->pending &= ~order[k].bit;
			conn_hdr(t, c, h, order[k].op);
			if (order[k].op == VSOCK_OP_SHUTDOWN)
				h->flags = c->shutdown_flags;
			t->rr = (idx + 1) % VSOCK_MAX_CONNS;
			return true;
		}
	}
	return false;
}

struct vsock_conn *vsock_conn_open_host(struct vsock_table *t, uint32_t peer_port)
{
	struct vsock_conn *c;
	uint32_t port;
	unsigned tries;

	/* At most VSOCK_MAX_CONNS ports can be taken, so this terminates. */
	for (tries = 0; tries <= VSOCK_MAX_CONNS; tries++) {
		port = t->next_host_port++;
		if (t->next_host_port < VSOCK_HOST_PORT_BASE)
			t->next_host_port = VSOCK_HOST_PORT_BASE;
		if (!vsock_conn_lookup(t, port, peer_port))
			break;
	}
	c = conn_alloc(t, port, peer_port, VSOCK_HOST_CONNECTING);
	if (c)
		c->pending = VSOCK_P_REQUEST;
	return c;
}

void vsock_conn_retry(struct vsock_conn *c)
{
	if (c->state != VSOCK_REFUSED)
		return;
	c->state = VSOCK_HOST_CONNECTING;
	c->pending = VSOCK_P_REQUEST;
}

void vsock_conn_accept(struct vsock_conn *c)
{
	if (c->state != VSOCK_GUEST_CONNECTING)
		return;
	c->state = VSOCK_ESTABLISHED;
	c->pending |= VSOCK_P_RESPONSE;
}

void vsock_conn_release(struct vsock_table *t, struct vsock_conn *c, bool rst)
{
	if (c->state == VSOCK_FREE)
		return;
	if (rst && c->state != VSOCK_DEAD && c->state != VSOCK_REFUSED)
		orphan_rst(t, c->local_port, c->peer_port);
	free(c->buf);
	memset(c, 0, sizeof(*c));
	t->nr_conns--;
}

uint32_t vsock_conn_tx_credit(const struct vsock_conn *c)
{
	uint32_t inflight = c->tx_cnt - c->peer_fwd_cnt;
	uint32_t credit;

	if (c->state != VSOCK_ESTABLISHED || (c->pending & VSOCK_P_RESPONSE) ||
	    (c->local_shut & VSOCK_SHUTDOWN_SEND) || (c->peer_shut & VSOCK_SHUTDOWN_RCV))
		return 0;
	if (inflight >= c->peer_buf_alloc)
		return 0;
	credit = c->peer_buf_alloc - inflight;
	return credit > VSOCK_MAX_PAYLOAD ? VSOCK_MAX_PAYLOAD : credit;
}

void vsock_conn_make_rw(const struct vsock_table *t, struct vsock_conn *c,
			struct vsock_hdr *h, uint32_t n)
{
	conn_hdr(t, c, h, VSOCK_OP_RW);
	h->len = n;
	/* This packet carries our fwd_cnt: a pending update is redundant. */
	c->pending &= ~VSOCK_P_CREDIT_UPDATE;
	c->tx_cnt += n;
}

void vsock_conn_need_credit(struct vsock_conn *c)
{
	if (c->state != VSOCK_ESTABLISHED || c->credit_requested)
		return;
	c->credit_requested = true;
	c->pending |= VSOCK_P_CREDIT_REQUEST;
}

void vsock_conn_host_eof(struct vsock_conn *c)
{
	if (c->state != VSOCK_ESTABLISHED || (c->local_shut & VSOCK_SHUTDOWN_SEND))
		return;
	c->local_shut |= VSOCK_SHUTDOWN_SEND;
	c->shutdown_flags |= VSOCK_SHUTDOWN_SEND;
	c->pending |= VSOCK_P_SHUTDOWN;
}

void vsock_conn_consumed(struct vsock_conn *c, uint32_t n)
{
	uint32_t unsent, inflight, perceived;

	c->fwd_cnt += n;
	if (c->state != VSOCK_ESTABLISHED || (c->peer_shut & VSOCK_SHUTDOWN_SEND))
		return;
	unsent = c->fwd_cnt - c->last_fwd_sent;
	if (!unsent)
		return;
	/* What the guest believes it may still send, from the last fwd_cnt it saw. */
	inflight = c->rx_cnt - c->last_fwd_sent;
	perceived = inflight >= VSOCK_BUF_ALLOC ? 0 : VSOCK_BUF_ALLOC - inflight;
	if (unsent >= VSOCK_CREDIT_THRESH || perceived < VSOCK_CREDIT_THRESH)
		c->pending |= VSOCK_P_CREDIT_UPDATE;
}

int vsock_conn_buffer(struct vsock_conn *c, const void *data, uint32_t n)
{
	const uint8_t *src = data;
	uint32_t tail, first;

	if (n > VSOCK_BUF_ALLOC - c->buf_used)
		return -ENOSPC;
	if (!n)
		return 0;
	if (!c->buf) {
		c->buf = malloc(VSOCK_BUF_ALLOC);
		if (!c->buf)
			return -ENOMEM;
		c->buf_head = 0;
	}
	tail = (c->buf_head + c->buf_used) % VSOCK_BUF_ALLOC;
	first = VSOCK_BUF_ALLOC - tail;
	if (first > n)
		first = n;
	memcpy(c->buf + tail, src, first);
	memcpy(c->buf, src + first, n - first);
	c->buf_used += n;
	return 0;
}

uint32_t vsock_conn_buffered(const struct vsock_conn *c, const uint8_t **p)
{
	uint32_t run;

	if (!c->buf_used) {
		*p = NULL;
		return 0;
	}
	run = VSOCK_BUF_ALLOC - c->buf_head;
	*p = c->buf + c->buf_head;
	return run < c->buf_used ? run : c->buf_used;
}

void vsock_conn_drain(struct vsock_conn *c, uint32_t n)
{
	if (n > c->buf_used)
		n = c->buf_used;
	c->buf_head = (c->buf_head + n) % VSOCK_BUF_ALLOC;
	c->buf_used -= n;
	if (!c->buf_used)
		c->buf_head = 0;
	vsock_conn_consumed(c, n);
}

bool vsock_conn_done(const struct vsock_conn *c)
{
	return c->state == VSOCK_ESTABLISHED && (c->peer_shut & VSOCK_SHUTDOWN_SEND) &&
	       c->buf_used == 0 &&
	       ((c->local_shut & VSOCK_SHUTDOWN_SEND) || (c->peer_shut & VSOCK_SHUTDOWN_RCV));
}

bool vsock_conn_wants_host_data(const struct vsock_conn *c)
{
	return c->state == VSOCK_ESTABLISHED && !(c->local_shut & VSOCK_SHUTDOWN_SEND) &&
	       !(c->peer_shut & VSOCK_SHUTDOWN_RCV);
}
