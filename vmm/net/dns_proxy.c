/*
 * dns_proxy: the per-VM allowlisting DNS proxy. See dns_proxy.h.
 *
 * All tables are fixed-size and live in the proxy itself, so a guest that
 * floods queries or opens connections runs into SERVFAIL or a closed socket,
 * never into memory growth. One timerfd, armed for the earliest deadline,
 * expires upstream queries, answers whose addresses were not confirmed in
 * time, and idle TCP connections.
 *
 * A query slot goes FREE -> UPSTREAM (our query sent on the slot's own
 * connected socket) -> LEARN (a good answer held while its addresses are
 * opened) -> FREE. Each use of a slot bumps its generation, which is part
 * of every learn tag, so a late confirmation can never release another
 * query's answer.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "net/dns_proxy.h"
#include "lib/util.h"

#define UDP_BATCH	16	/* datagrams per wakeup: the loop serves others too */
#define TCP_BATCH	16	/* messages per wakeup and connection */
/* Queued answers per TCP connection: a guest that never reads gets cut off. */
#define TCP_TX_MAX	(4 * (2 + 65535))
#define DNS_MSG_MAX	65535
/* The guest's header and question: what its answers and errors echo. */
#define QMSG_MAX	(DNS_HDR_LEN + DNS_NAME_WIRE_MAX + 4)

/* Learn tags: slot, address index, slot generation. */
#define TAG_SLOT_BITS	6
#define TAG_IDX_BITS	6
#define TAG_GEN_MASK	0xfffffu

_Static_assert(DNS_PROXY_PENDING_MAX <= 1u << TAG_SLOT_BITS, "slot in a learn tag");
_Static_assert(DNS_ADDR_MAX <= 1u << TAG_IDX_BITS && DNS_ADDR_MAX <= 64,
	       "address index in a learn tag and the acked bitmap");

/* Where a query came from, so its answer can find the way back. */
struct origin {
	bool tcp;
	struct sockaddr_storage addr;	/* UDP client */
	socklen_t alen;
	unsigned conn;			/* TCP connection slot ... */
	uint32_t gen;			/* ... and its generation when asked */
};

enum pd_state { PD_FREE, PD_UPSTREAM, PD_LEARN };

struct pending {
	struct dns_proxy *p;
	enum pd_state state;
	int fd;				/* connected upstream socket, always open */
	bool reg;			/* fd is on the loop */
	uint32_t gen;
	uint16_t up_id;			/* random ID sent upstream */
	uint64_t deadline_us;
	struct origin from;
	struct dns_query q;
	uint8_t qmsg[QMSG_MAX];		/* the guest's header and question */
	/* PD_LEARN: the answer, held until each address is confirmed. */
	struct dns_answer ans;
	unsigned nsent, ndone, inflight;
	uint64_t acked;			/* bit i: address i confirmed or refused */
	bool refused;
	size_t alen;
	uint8_t answer[DNS_PROXY_ANSWER_MAX];
};

struct tcp_conn {
	struct dns_proxy *p;
	int fd;				/* -1: free slot */
	uint32_t gen;
	unsigned inflight;
	uint64_t last_us;
	bool want_out;
	size_t rxlen;
	uint8_t rx[2 + DNS_QUERY_MAX];
	uint8_t *tx;
	size_t txoff, txlen, txcap;
};

struct dns_proxy {
	struct evloop *el;
	int udp_fd, tcp_fd, timer_fd;
	bool udp_reg, tcp_reg, timer_reg;
	char **allow;
	unsigned nallow;
	struct sockaddr_storage up, guest;
	dns_learn_fn learn;
	void *arg;
	unsigned query_ms, idle_ms;
	uint16_t port;
	uint32_t id_seq;		/* fallback ID mixing if getrandom fails */
	unsigned learn_inflight;	/* learn requests awaiting dns_proxy_learned */
	struct pending pend[DNS_PROXY_PENDING_MAX];
	struct tcp_conn conns[DNS_PROXY_TCP_MAX];
	uint8_t buf[DNS_MSG_MAX + 1];

	pthread_mutex_t lock;		/* stats and refused names vs. readers */
	struct dns_proxy_stats st;
	unsigned nrefused;
	char refused[DNS_PROXY_REFUSED_KEEP][DNS_NAME_TEXT_MAX];
};

#define STAT_INC(p, field) do {				\
	pthread_mutex_lock(&(p)->lock);			\
	(p)->st.field++;				\
	pthread_mutex_unlock(&(p)->lock);		\
} while (0)

static void rearm(struct dns_proxy *p);
static void close_conn(struct tcp_conn *c);
static void conn_cb(void *arg, uint32_t events);

static uint16_t rand_id(struct dns_proxy *p)
{
	uint16_t id;

	if (getrandom(&id, sizeof(id), GRND_NONBLOCK) == sizeof(id))
		return id;
	/* Still unpredictable enough with the per-slot random source port. */
	return (uint16_t)(now_us() ^ (++p->id_seq * 2654435761u));
}

/* Same family and address (the port is not compared). */
static bool same_host(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return false;
	if (a->ss_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
		       ((const struct sockaddr_in *)b)->sin_addr.s_addr;
	if (a->ss_family == AF_INET6)
		return !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
			       &((const struct sockaddr_in6 *)b)->sin6_addr, sizeof(struct in6_addr));
	return false;
}

static uint16_t sa_port(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
	return ntohs(((const struct sockaddr_in *)ss)->sin_port);
}

static bool same_addr(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	return same_host(a, b) && sa_port(a) == sa_port(b);
}

/* ---- answers back to the guest ---- */

static void conn_set_out(struct tcp_conn *c, bool out)
{
	if (c->want_out == out)
		return;
	c->want_out = out;
	evloop_mod(c->p->el, c->fd, EPOLLIN | (out ? EPOLLOUT : 0), conn_cb, c);
}

static void conn_flush(struct tcp_conn *c)
{
	while (c->txoff < c->txlen) {
		ssize_t n = send(c->fd, c->tx + c->txoff, c->txlen - c->txoff,
				 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			break;
		if (n <= 0) {
			close_conn(c);
			return;
		}
		c->txoff += n;
	}
	if (c->txoff == c->txlen)
		c->txoff = c->txlen = 0;
	conn_set_out(c, c->txlen != 0);
}

/* Queue one length-prefixed message; a connection that will not drain is closed. */
static void conn_send(struct tcp_conn *c, const uint8_t *msg, size_t len)
{
	size_t need;

	if (c->txoff) {
		memmove(c->tx, c->tx + c->txoff, c->txlen - c->txoff);
		c->txlen -= c->txoff;
		c->txoff = 0;
	}
	need = c->txlen + 2 + len;
	if (need > TCP_TX_MAX) {
		close_conn(c);
		return;
	}
	if (need > c->txcap) {
		size_t cap = c->txcap ? c->txcap : 1024;
		uint8_t *t;

		while (cap < need)
			cap *= 2;
		t = realloc(c->tx, cap);
		if (!t) {
			close_conn(c);
			return;
		}
		c->tx = t;
		c->txcap = cap;
	}
	c->tx[c->txlen] = len >> 8;
	c->tx[c->txlen + 1] = len & 0xff;
	memcpy(c->tx + c->txlen + 2, msg, len);
	c->txlen = need;
	c->last_us = now_us();
	conn_flush(c);
}

static void reply(struct dns_proxy *p, const struct origin *o, const uint8_t *msg,
		  size_t len)
{
	struct tcp_conn *c;

	if (!o->tcp) {
		/* Best effort, like any UDP answer: the guest retries. */
		if (sendto(p->udp_fd, msg, len, MSG_DONTWAIT,
			   (const struct sockaddr *)&o->addr, o->alen) < 0)
			husk_debug("dns proxy: answer to guest: %s", strerror(errno));
		return;
	}
	c = &p->conns[o->conn];
	if (c->fd >= 0 && c->gen == o->gen)
		conn_send(c, msg, len);
}

static void reply_error(struct dns_proxy *p, const struct origin *o, const uint8_t *qmsg,
			const struct dns_query *q, int rcode)
{
	uint8_t out[QMSG_MAX];
	int n = dns_build_error(qmsg, q, q->id, rcode, out, sizeof(out));

	if (n > 0)
		reply(p, o, out, n);
}

/* ---- query slots ---- */

static void pending_done(struct pending *pd)
{
	struct dns_proxy *p = pd->p;

	/* Confirmations still owed for it are stale now: give their room back. */
	p->learn_inflight -= pd->inflight < p->learn_inflight ? pd->inflight : p->learn_inflight;
	pd->inflight = 0;
	pd->state = PD_FREE;
	if (pd->from.tcp) {
		struct tcp_conn *c = &p->conns[pd->from.conn];

		if (c->fd >= 0 && c->gen == pd->from.gen && c->inflight)
			c->inflight--;
	}
	rearm(p);
}

static void pending_fail(struct pending *pd)
{
	STAT_INC(pd->p, failed);
	reply_error(pd->p, &pd->from, pd->qmsg, &pd->q, DNS_RCODE_SERVFAIL);
	pending_done(pd);
}

/* Every address confirmed, or one refused: release or withhold the answer. */
static void learn_finish(struct pending *pd)
{
	struct dns_proxy *p = pd->p;

	if (pd->refused) {
		STAT_INC(p, withheld);
		pending_fail(pd);
		return;
	}
	if (dns_restore_question(pd->answer, pd->alen, pd->qmsg, &pd->q)) {
		pending_fail(pd);
		return;
	}
	reply(p, &pd->from, pd->answer, pd->alen);
	pending_done(pd);
}

static bool learn_complete(const struct pending *pd)
{
	return pd->refused || pd->ndone == pd->ans.naddr;
}

static uint32_t learn_tag(const struct dns_proxy *p, const struct pending *pd, unsigned i)
{
	return (uint32_t)(pd - p->pend) | (uint32_t)i << TAG_SLOT_BITS |
	       (pd->gen & TAG_GEN_MASK) << (TAG_SLOT_BITS + TAG_IDX_BITS);
}

/* Hand out learn requests while the window has room, slot by slot. */
static void learn_pump(struct dns_proxy *p)
{
	unsigned i;

	for (i = 0; i < DNS_PROXY_PENDING_MAX; i++) {
		struct pending *pd = &p->pend[i];

		while (pd->state == PD_LEARN && !pd->refused && pd->nsent < pd->ans.naddr &&
		       p->learn_inflight < DNS_PROXY_LEARN_WINDOW) {
			unsigned k = pd->nsent++;
			int r = p->learn(p->arg, learn_tag(p, pd, k), pd->q.name, &pd->ans.addr[k]);

			if (r == 0) {
				pd->inflight++;
				p->learn_inflight++;
				continue;
			}
			pd->acked |= 1ull << k;
			pd->ndone++;
			if (r < 0)
				pd->refused = true;
		}
		if (pd->state == PD_LEARN && learn_complete(pd))
			learn_finish(pd);
	}
}

void dns_proxy_learned(struct dns_proxy *p, uint32_t tag, int status)
{
	unsigned slot = tag & ((1u << TAG_SLOT_BITS) - 1);
	unsigned k = tag >> TAG_SLOT_BITS & ((1u << TAG_IDX_BITS) - 1);
	uint32_t gen = tag >> (TAG_SLOT_BITS + TAG_IDX_BITS);
	struct pending *pd;

	if (slot >= DNS_PROXY_PENDING_MAX)
		return;
	pd = &p->pend[slot];
	if (pd->state != PD_LEARN || (pd->gen & TAG_GEN_MASK) != gen || k >= pd->nsent ||
	    (pd->acked & 1ull << k) || !pd->inflight)
		return;
	pd->acked |= 1ull << k;
	pd->ndone++;
	pd->inflight--;
	if (p->learn_inflight)
		p->learn_inflight--;
	if (status < 0) {
		husk_debug("dns proxy: the filter refused an address of %s", pd->q.name);
		pd->refused = true;
	}
	if (learn_complete(pd))
		learn_finish(pd);
	learn_pump(p);
}

/* ---- upstream ---- */

/* One datagram from upstream for a slot waiting on it; true when finished. */
static bool upstream_answer(struct pending *pd, size_t n)
{
	struct dns_proxy *p = pd->p;

	/* A wrong ID is someone guessing: ignore it and keep waiting. */
	if (n < 2 || (p->buf[0] << 8 | p->buf[1]) != pd->up_id) {
		STAT_INC(p, spoofed);
		return false;
	}
	if (n > sizeof(pd->answer) ||
	    dns_parse_response(p->buf, n, pd->up_id, &pd->q, DNS_PROXY_MIN_TTL,
			       DNS_PROXY_MAX_TTL, &pd->ans)) {
		husk_debug("dns proxy: malformed or oversized answer for %s", pd->q.name);
		pending_fail(pd);
		return true;
	}
	memcpy(pd->answer, p->buf, n);
	pd->alen = n;
	pd->nsent = pd->ndone = pd->inflight = 0;
	pd->acked = 0;
	pd->refused = false;
	pd->state = PD_LEARN;
	/* The filter opens before the guest learns the address, never after. */
	if (!pd->ans.naddr)
		learn_finish(pd);
	else
		learn_pump(p);
	return true;
}

static void upstream_cb(void *arg, uint32_t events)
{
	struct pending *pd = arg;
	struct dns_proxy *p = pd->p;
	unsigned i;

	for (i = 0; i < UDP_BATCH; i++) {
		struct sockaddr_storage from;
		socklen_t flen = sizeof(from);
		ssize_t n;

		n = recvfrom(pd->fd, p->buf, sizeof(p->buf), MSG_DONTWAIT,
			     (struct sockaddr *)&from, &flen);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		/* Late answers and errors for a query already finished. */
		if (pd->state != PD_UPSTREAM)
			continue;
		if (n < 0) {
			/* ICMP unreachable and friends: the resolver is not there. */
			husk_debug("dns proxy: upstream: %s", strerror(errno));
			pending_fail(pd);
			continue;
		}
		/* The socket is connected, so this is a second line of defence. */
		if (!same_addr(&from, &p->up)) {
			STAT_INC(p, spoofed);
			continue;
		}
		upstream_answer(pd, n);
	}
}

static void forward(struct dns_proxy *p, const struct origin *o, const struct dns_query *q,
		    const uint8_t *msg)
{
	struct pending *pd = NULL;
	uint8_t out[QMSG_MAX];
	unsigned i;
	int n;

	for (i = 0; i < DNS_PROXY_PENDING_MAX && !pd; i++)
		if (p->pend[i].state == PD_FREE)
			pd = &p->pend[i];
	if (!pd || q->qend > sizeof(pd->qmsg)) {
		STAT_INC(p, failed);
		reply_error(p, o, msg, q, DNS_RCODE_SERVFAIL);
		return;
	}
	/* Whatever came late for the slot's last query goes first. */
	for (i = 0; i < UDP_BATCH; i++)
		if (recv(pd->fd, p->buf, sizeof(p->buf), MSG_DONTWAIT) < 0 && errno == EAGAIN)
			break;
	pd->gen++;
	pd->q = *q;
	pd->from = *o;
	memcpy(pd->qmsg, msg, q->qend);
	pd->up_id = rand_id(p);
	/* Ours, from the parsed question: no byte of the guest's goes upstream. */
	n = dns_build_query(q, pd->up_id, out, sizeof(out));
	if (n < 0 || send(pd->fd, out, n, MSG_DONTWAIT) != n) {
		husk_debug("dns proxy: cannot forward %s: %s", q->name,
			   n < 0 ? "bad name" : strerror(errno));
		STAT_INC(p, failed);
		reply_error(p, o, msg, q, DNS_RCODE_SERVFAIL);
		return;
	}
	pd->state = PD_UPSTREAM;
	pd->deadline_us = now_us() + (uint64_t)p->query_ms * 1000;
	if (o->tcp)
		p->conns[o->conn].inflight++;
	STAT_INC(p, allowed);
	rearm(p);
}

/* ---- queries from the guest ---- */

static void note_refused(struct dns_proxy *p, const char *name)
{
	unsigned i;
	bool fresh = true;

	pthread_mutex_lock(&p->lock);
	p->st.refused++;
	for (i = 0; i < p->nrefused && fresh; i++)
		fresh = strcmp(p->refused[i], name) != 0;
	if (fresh && p->nrefused < DNS_PROXY_REFUSED_KEEP)
		strcpy(p->refused[p->nrefused++], name);
	pthread_mutex_unlock(&p->lock);
	/* The name is escaped printable text (dns.h): safe for a terminal. */
	if (fresh)
		husk_debug("dns proxy: refused %s (not on the allowlist)", name);
}

static void handle_query(struct dns_proxy *p, const struct origin *o, const uint8_t *msg,
			 size_t len)
{
	struct dns_query q;
	uint8_t out[DNS_HDR_LEN];
	int err, n;

	if (len > DNS_QUERY_MAX) {
		STAT_INC(p, malformed);
		return;
	}
	err = dns_parse_query(msg, len, &q);
	if (err) {
		STAT_INC(p, malformed);
		/* Never answer something that claims to be an answer. */
		if (len < DNS_HDR_LEN || (q.flags & DNS_FLAG_QR))
			return;
		n = dns_build_error(NULL, NULL, q.id,
				    err == -EOPNOTSUPP ? DNS_RCODE_NOTIMP : DNS_RCODE_FORMERR,
				    out, sizeof(out));
		if (n > 0)
			reply(p, o, out, n);
		return;
	}
	STAT_INC(p, queries);
	if (!dns_name_allowed(q.name, (const char *const *)p->allow, p->nallow)) {
		note_refused(p, q.name);
		reply_error(p, o, msg, &q, DNS_RCODE_NXDOMAIN);
		return;
	}
	forward(p, o, &q, msg);
}

static void udp_cb(void *arg, uint32_t events)
{
	struct dns_proxy *p = arg;
	unsigned i;

	for (i = 0; i < UDP_BATCH; i++) {
		struct origin o = { .alen = sizeof(o.addr) };
		ssize_t n;

		n = recvfrom(p->udp_fd, p->buf, sizeof(p->buf), MSG_DONTWAIT,
			     (struct sockaddr *)&o.addr, &o.alen);
		if (n < 0)
			return;
		/* Someone else on the host (or another VM): not even parsed. */
		if (o.alen > sizeof(o.addr) || !same_host(&o.addr, &p->guest)) {
			STAT_INC(p, foreign);
			continue;
		}
		handle_query(p, &o, p->buf, n);
	}
}

/* ---- guest TCP connections ---- */

static void close_conn(struct tcp_conn *c)
{
	if (c->fd < 0)
		return;
	evloop_del(c->p->el, c->fd);
	close(c->fd);
	c->fd = -1;
	c->gen++;	/* answers still in flight for it are dropped */
	free(c->tx);
	c->tx = NULL;
	c->txoff = c->txlen = c->txcap = c->rxlen = 0;
	c->inflight = 0;
	c->want_out = false;
}

/* Read what is there; true once rx holds a whole length-prefixed message. */
static bool conn_read(struct tcp_conn *c)
{
	size_t need;
	ssize_t n;

	for (;;) {
		need = 2;
		if (c->rxlen >= 2) {
			size_t mlen = (size_t)c->rx[0] << 8 | c->rx[1];

			/* Queries are small: a big length is abuse, not DNS. */
			if (mlen < DNS_HDR_LEN || mlen > DNS_QUERY_MAX) {
				STAT_INC(c->p, malformed);
				close_conn(c);
				return false;
			}
			need = 2 + mlen;
			if (c->rxlen == need)
				return true;
		}
		n = recv(c->fd, c->rx + c->rxlen, need - c->rxlen, MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return false;
		if (n <= 0) {
			close_conn(c);
			return false;
		}
		c->rxlen += n;
		c->last_us = now_us();
	}
}

static void conn_cb(void *arg, uint32_t events)
{
	struct tcp_conn *c = arg;
	struct dns_proxy *p = c->p;
	uint32_t gen = c->gen;
	unsigned i;

	if (events & EPOLLOUT) {
		conn_flush(c);
		if (c->fd < 0 || c->gen != gen)
			return;
	}
	if (!(events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
		return;
	for (i = 0; i < TCP_BATCH; i++) {
		struct origin o = { .tcp = true, .conn = c - p->conns, .gen = gen };
		size_t mlen;

		if (!conn_read(c))
			return;
		mlen = c->rxlen - 2;
		c->rxlen = 0;
		if (c->inflight >= DNS_PROXY_TCP_INFLIGHT) {
			struct dns_query q;

			/* Pipelining past the bound: answered, not queued. */
			if (!dns_parse_query(c->rx + 2, mlen, &q)) {
				STAT_INC(p, failed);
				reply_error(p, &o, c->rx + 2, &q, DNS_RCODE_SERVFAIL);
			}
		} else {
			handle_query(p, &o, c->rx + 2, mlen);
		}
		if (c->fd < 0 || c->gen != gen)
			return;
	}
}

static void accept_cb(void *arg, uint32_t events)
{
	struct dns_proxy *p = arg;
	struct tcp_conn *c;
	unsigned i, n;
	int fd;

	for (n = 0; n < UDP_BATCH; n++) {
		struct sockaddr_storage from;
		socklen_t flen = sizeof(from);

		fd = accept4(p->tcp_fd, (struct sockaddr *)&from, &flen,
			     SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			break;
		if (flen > sizeof(from) || !same_host(&from, &p->guest)) {
			STAT_INC(p, foreign);
			close(fd);
			continue;
		}
		c = NULL;
		for (i = 0; i < DNS_PROXY_TCP_MAX && !c; i++)
			if (p->conns[i].fd < 0)
				c = &p->conns[i];
		if (!c) {
			close(fd);	/* full: the guest's resolver retries */
			continue;
		}
		c->fd = fd;
		c->last_us = now_us();
		if (evloop_add(p->el, fd, EPOLLIN, conn_cb, c)) {
			close(fd);
			c->fd = -1;
			continue;
		}
	}
	rearm(p);
}

/* ---- deadlines ---- */

static void rearm(struct dns_proxy *p)
{
	struct itimerspec its = { { 0, 0 }, { 0, 0 } };
	uint64_t first = UINT64_MAX, now, d;
	unsigned i;

	for (i = 0; i < DNS_PROXY_PENDING_MAX; i++)
		if (p->pend[i].state != PD_FREE && p->pend[i].deadline_us < first)
			first = p->pend[i].deadline_us;
	for (i = 0; i < DNS_PROXY_TCP_MAX; i++) {
		if (p->conns[i].fd < 0 || p->conns[i].inflight)
			continue;
		d = p->conns[i].last_us + (uint64_t)p->idle_ms * 1000;
		if (d < first)
			first = d;
	}
	if (first != UINT64_MAX) {
		now = now_us();
		/* Already due: fire almost at once (zero would disarm). */
		d = first > now ? first - now : 1;
		its.it_value.tv_sec = d / 1000000;
		its.it_value.tv_nsec = (long)(d % 1000000) * 1000;
		if (!its.it_value.tv_sec && !its.it_value.tv_nsec)
			its.it_value.tv_nsec = 1000;
	}
	timerfd_settime(p->timer_fd, 0, &its, NULL);
}

static void timer_cb(void *arg, uint32_t events)
{
	struct dns_proxy *p = arg;
	uint64_t ticks, now = now_us();
	unsigned i;

	if (read(p->timer_fd, &ticks, sizeof(ticks)) < 0)
		(void)0;	/* EAGAIN: rearmed meanwhile; the scan below is still right */
	for (i = 0; i < DNS_PROXY_PENDING_MAX; i++) {
		struct pending *pd = &p->pend[i];

		if (pd->state != PD_FREE && pd->deadline_us <= now) {
			husk_debug("dns proxy: %s for %s", pd->state == PD_LEARN ?
				   "no word from the filter" : "upstream timeout", pd->q.name);
			pending_fail(pd);
		}
	}
	for (i = 0; i < DNS_PROXY_TCP_MAX; i++) {
		struct tcp_conn *c = &p->conns[i];

		if (c->fd >= 0 && !c->inflight &&
		    c->last_us + (uint64_t)p->idle_ms * 1000 <= now)
			close_conn(c);
	}
	rearm(p);
	/* A timed-out answer freed window room another one may be waiting for. */
	learn_pump(p);
}

/* ---- sockets ---- */

void dns_proxy_close_socks(struct dns_proxy_socks *s)
{
	unsigned i;

	if (s->udp_fd >= 0)
		close(s->udp_fd);
	if (s->tcp_fd >= 0)
		close(s->tcp_fd);
	for (i = 0; i < DNS_PROXY_PENDING_MAX; i++) {
		if (s->up_fd[i] >= 0)
			close(s->up_fd[i]);
		s->up_fd[i] = -1;
	}
	s->udp_fd = s->tcp_fd = -1;
}

/*
 * UDP and TCP on the same port. With port 0 the UDP socket picks one and TCP
 * follows; if TCP finds it taken, try again with a fresh pick.
 */
static int bind_listeners(struct dns_proxy_socks *s, const struct sockaddr *addr,
			  socklen_t len)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	int one = 1, tries, fam = addr->sa_family;

	for (tries = 0; tries < 8; tries++) {
		memcpy(&ss, addr, len);
		s->udp_fd = socket(fam, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		s->tcp_fd = socket(fam, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (s->udp_fd < 0 || s->tcp_fd < 0)
			goto err;
		if (bind(s->udp_fd, (struct sockaddr *)&ss, len) < 0)
			goto err;
		sl = sizeof(ss);
		if (getsockname(s->udp_fd, (struct sockaddr *)&ss, &sl) < 0)
			goto err;
		setsockopt(s->tcp_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(s->tcp_fd, (struct sockaddr *)&ss, sl) == 0) {
			if (listen(s->tcp_fd, DNS_PROXY_TCP_MAX) < 0)
				goto err;
			s->port = sa_port(&ss);
			return 0;
		}
		if (errno != EADDRINUSE || sa_port((const struct sockaddr_storage *)addr))
			goto err;
		close(s->udp_fd);
		close(s->tcp_fd);
		s->udp_fd = s->tcp_fd = -1;
	}
	errno = EADDRINUSE;
err:
	return husk_seterr(errno, "dns proxy: cannot listen on port %u: %s",
			   sa_port((const struct sockaddr_storage *)addr), strerror(errno));
}

static bool sa_ok(const struct sockaddr *sa, socklen_t len)
{
	return sa && len <= sizeof(struct sockaddr_storage) &&
	       ((sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) ||
		(sa->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)));
}

int dns_proxy_open_socks(struct dns_proxy_socks *s, const struct sockaddr *bind_addr,
			 socklen_t len, const struct sockaddr *upstream, socklen_t ulen)
{
	unsigned i;
	int err;

	s->udp_fd = s->tcp_fd = -1;
	s->port = 0;
	for (i = 0; i < DNS_PROXY_PENDING_MAX; i++)
		s->up_fd[i] = -1;
	if (!sa_ok(bind_addr, len) || !sa_ok(upstream, ulen))
		return husk_seterr(EINVAL, "dns proxy: bad listen or upstream address");
	err = bind_listeners(s, bind_addr, len);
	for (i = 0; !err && i < DNS_PROXY_PENDING_MAX; i++) {
		/* Connected: the kernel delivers only the resolver's datagrams. */
		s->up_fd[i] = socket(upstream->sa_family,
				     SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (s->up_fd[i] < 0 || connect(s->up_fd[i], upstream, ulen) < 0)
			err = husk_seterr(errno, "dns proxy: cannot make a socket to the "
					  "upstream resolver: %s", strerror(errno));
	}
	if (err)
		dns_proxy_close_socks(s);
	return err;
}

/* ---- setup ---- */

static int copy_allowlist(struct dns_proxy *p, const char *const *allow, unsigned nallow)
{
	unsigned i;
	size_t n, j;

	p->allow = calloc(nallow ? nallow : 1, sizeof(*p->allow));
	if (!p->allow)
		return husk_seterr(ENOMEM, "dns proxy: out of memory");
	for (i = 0; i < nallow; i++) {
		if (dns_pattern_check(allow[i]))
			return husk_seterr(EINVAL, "allowed host '%s' is not a DNS name or "
					   "*.suffix pattern (letters, digits, '-', '_')",
					   allow[i]);
		n = strlen(allow[i]);
		if (n && allow[i][n - 1] == '.')
			n--;
		p->allow[i] = strndup(allow[i], n);
		if (!p->allow[i])
			return husk_seterr(ENOMEM, "dns proxy: out of memory");
		p->nallow = i + 1;
		for (j = 0; j < n; j++)
			if (p->allow[i][j] >= 'A' && p->allow[i][j] <= 'Z')
				p->allow[i][j] += 'a' - 'A';
	}
	return 0;
}

/* Move every fd of s into the proxy; s is left all -1. */
static void take_socks(struct dns_proxy *p, struct dns_proxy_socks *s)
{
	unsigned i;

	p->udp_fd = s->udp_fd;
	p->tcp_fd = s->tcp_fd;
	p->port = s->port;
	for (i = 0; i < DNS_PROXY_PENDING_MAX; i++) {
		p->pend[i].fd = s->up_fd[i];
		s->up_fd[i] = -1;
	}
	s->udp_fd = s->tcp_fd = -1;
}

struct dns_proxy *dns_proxy_new(struct evloop *el, struct dns_proxy_socks *s,
				const struct dns_proxy_cfg *cfg)
{
	struct dns_proxy *p;
	unsigned i;

	if (!sa_ok(cfg->guest, cfg->guest_len) || !sa_ok(cfg->upstream, cfg->ulen) ||
	    !cfg->learn || s->udp_fd < 0 || s->tcp_fd < 0) {
		dns_proxy_close_socks(s);
		husk_seterr(EINVAL, "dns proxy: bad guest or upstream address, sockets or "
			    "learn function");
		return NULL;
	}
	p = calloc(1, sizeof(*p));
	if (!p) {
		dns_proxy_close_socks(s);
		husk_seterr(ENOMEM, "dns proxy: out of memory");
		return NULL;
	}
	pthread_mutex_init(&p->lock, NULL);
	p->el = el;
	p->timer_fd = -1;
	p->learn = cfg->learn;
	p->arg = cfg->arg;
	p->query_ms = DNS_PROXY_TIMEOUT_MS;
	p->idle_ms = DNS_PROXY_IDLE_MS;
	memcpy(&p->up, cfg->upstream, cfg->ulen);
	memcpy(&p->guest, cfg->guest, cfg->guest_len);
	for (i = 0; i < DNS_PROXY_PENDING_MAX; i++)
		p->pend[i].p = p;
	for (i = 0; i < DNS_PROXY_TCP_MAX; i++) {
		p->conns[i].p = p;
		p->conns[i].fd = -1;
	}
	take_socks(p, s);
	for (i = 0; i < DNS_PROXY_PENDING_MAX; i++) {
		if (p->pend[i].fd < 0) {
			husk_seterr(EINVAL, "dns proxy: upstream socket %u missing", i);
			goto fail;
		}
	}
	if (copy_allowlist(p, cfg->allow, cfg->nallow))
		goto fail;
	p->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (p->timer_fd < 0) {
		husk_seterr(errno, "dns proxy: timerfd: %s", strerror(errno));
		goto fail;
	}
	if (evloop_add(el, p->timer_fd, EPOLLIN, timer_cb, p))
		goto fail;
	p->timer_reg = true;
	for (i = 0; i < DNS_PROXY_PENDING_MAX; i++) {
		if (evloop_add(el, p->pend[i].fd, EPOLLIN, upstream_cb, &p->pend[i]))
			goto fail;
		p->pend[i].reg = true;
	}
	if (evloop_add(el, p->udp_fd, EPOLLIN, udp_cb, p))
		goto fail;
	p->udp_reg = true;
	if (evloop_add(el, p->tcp_fd, EPOLLIN, accept_cb, p))
		goto fail;
	p->tcp_reg = true;
	return p;
fail:
	dns_proxy_free(p);
	return NULL;
}

void dns_proxy_set_timeouts(struct dns_proxy *p, unsigned query_ms, unsigned idle_ms)
{
	p->query_ms = query_ms ? query_ms : 1;
	p->idle_ms = idle_ms ? idle_ms : 1;
}

uint16_t dns_proxy_port(const struct dns_proxy *p)
{
	return p->port;
}

void dns_proxy_get_stats(struct dns_proxy *p, struct dns_proxy_stats *out)
{
	pthread_mutex_lock(&p->lock);
	*out = p->st;
	pthread_mutex_unlock(&p->lock);
}

int dns_proxy_refused(struct dns_proxy *p, unsigned i, char *out, size_t cap)
{
	int err = -ENOENT;

	pthread_mutex_lock(&p->lock);
	if (i < p->nrefused) {
		snprintf(out, cap, "%s", p->refused[i]);
		err = 0;
	}
	pthread_mutex_unlock(&p->lock);
	return err;
}

static void unregister(struct dns_proxy *p, int *fd, bool *reg)
{
	if (*reg)
		evloop_del(p->el, *fd);
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
	*reg = false;
}

void dns_proxy_free(struct dns_proxy *p)
{
	unsigned i;

	if (!p)
		return;
	for (i = 0; i < DNS_PROXY_PENDING_MAX; i++) {
		if (p->pend[i].fd < 0)
			continue;
		if (p->pend[i].reg)
			evloop_del(p->el, p->pend[i].fd);
		close(p->pend[i].fd);
		p->pend[i].fd = -1;
	}
	for (i = 0; i < DNS_PROXY_TCP_MAX; i++)
		close_conn(&p->conns[i]);
	unregister(p, &p->udp_fd, &p->udp_reg);
	unregister(p, &p->tcp_fd, &p->tcp_reg);
	unregister(p, &p->timer_fd, &p->timer_reg);
	for (i = 0; i < p->nallow; i++)
		free(p->allow[i]);
	free(p->allow);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

int dns_resolv_conf_upstream(const char *path, struct sockaddr_storage *ss, socklen_t *len)
{
	char line[512], tok[128];
	FILE *f = fopen(path, "re");
	int err = -ENOENT;

	if (!f)
		return husk_seterr(errno, "cannot read %s: %s", path, strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;

		if (sscanf(line, " nameserver %127[^ \t\r\n#;]", tok) != 1)
			continue;
		memset(ss, 0, sizeof(*ss));
		if (inet_pton(AF_INET, tok, &s4->sin_addr) == 1) {
			s4->sin_family = AF_INET;
			s4->sin_port = htons(53);
			*len = sizeof(*s4);
			err = 0;
		} else if (inet_pton(AF_INET6, tok, &s6->sin6_addr) == 1) {
			s6->sin6_family = AF_INET6;
			s6->sin6_port = htons(53);
			*len = sizeof(*s6);
			err = 0;
		} else {
			err = husk_seterr(EINVAL, "%s: nameserver '%s' is not an IP address",
					  path, tok);
		}
		break;
	}
	fclose(f);
	if (err == -ENOENT)
		husk_seterr(ENOENT, "%s has no nameserver line: give the DNS proxy an upstream",
			    path);
	return err;
}
