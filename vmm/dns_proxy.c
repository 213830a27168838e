/*
 * dns_proxy: the per-VM allowlisting DNS proxy. See dns_proxy.h.
 *
 * All tables are fixed-size and live in the proxy itself, so a guest that
 * floods queries or opens connections runs into SERVFAIL or a closed socket,
 * never into host memory growth. One timerfd, armed for the earliest
 * deadline, expires upstream queries and idle TCP connections.
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

#include "dns_proxy.h"
#include "util.h"

#define UDP_BATCH	16	/* datagrams per wakeup: the loop serves others too */
#define TCP_BATCH	16	/* messages per wakeup and connection */
/* Queued answers per TCP connection: a guest that never reads gets cut off. */
#define TCP_TX_MAX	(4 * (2 + 65535))
#define DNS_MSG_MAX	65535

/* Where a query came from, so its answer can find the way back. */
struct origin {
	bool tcp;
	struct sockaddr_storage addr;	/* UDP client */
	socklen_t alen;
	unsigned conn;			/* TCP connection slot ... */
	uint32_t gen;			/* ... and its generation when asked */
};

struct pending {
	struct dns_proxy *p;
	bool used;
	int fd;				/* connected upstream socket */
	uint16_t up_id;			/* random ID sent upstream */
	uint64_t deadline_us;
	struct origin from;
	struct dns_query q;
	uint8_t qmsg[DNS_QUERY_MAX];	/* the guest's query, for SERVFAIL */
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
	struct sockaddr_storage up;
	socklen_t ulen;
	dns_addr_cb cb;
	void *arg;
	unsigned query_ms, idle_ms;
	uint16_t port;
	uint32_t id_seq;		/* fallback ID mixing if getrandom fails */
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
	/* Still unpredictable enough with the per-query random source port. */
	return (uint16_t)(now_us() ^ (++p->id_seq * 2654435761u));
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
	uint8_t out[DNS_QUERY_MAX];
	int n = dns_build_error(qmsg, q, q->id, rcode, out, sizeof(out));

	if (n > 0)
		reply(p, o, out, n);
}

/* ---- upstream ---- */

static void pending_done(struct pending *pd)
{
	struct dns_proxy *p = pd->p;

	evloop_del(p->el, pd->fd);
	close(pd->fd);
	pd->fd = -1;
	pd->used = false;
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

static bool same_addr(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return false;
	if (a->ss_family == AF_INET) {
		const struct sockaddr_in *x = (const void *)a, *y = (const void *)b;

		return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
	}
	if (a->ss_family == AF_INET6) {
		const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)b;

		return x->sin6_port == y->sin6_port &&
		       !memcmp(&x->sin6_addr, &y->sin6_addr, sizeof(x->sin6_addr));
	}
	return false;
}

/* One datagram from upstream; true when the query is finished. */
static bool upstream_answer(struct pending *pd, size_t n)
{
	struct dns_proxy *p = pd->p;
	struct dns_answer ans;

	/* A wrong ID is someone guessing: ignore it and keep waiting. */
	if (n < 2 || (p->buf[0] << 8 | p->buf[1]) != pd->up_id) {
		STAT_INC(p, spoofed);
		return false;
	}
	if (dns_parse_response(p->buf, n, pd->up_id, &pd->q, DNS_PROXY_MIN_TTL,
			       DNS_PROXY_MAX_TTL, &ans)) {
		husk_debug("dns proxy: malformed answer for %s", pd->q.name);
		pending_fail(pd);
		return true;
	}
	/* The filter opens before the guest learns the address, never after. */
	if (ans.naddr && p->cb && p->cb(p->arg, pd->q.name, ans.addr, ans.naddr) < 0) {
		pending_fail(pd);
		return true;
	}
	p->buf[0] = pd->q.id >> 8;
	p->buf[1] = pd->q.id & 0xff;
	reply(p, &pd->from, p->buf, n);
	pending_done(pd);
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
		if (n < 0) {
			/* ICMP unreachable and friends: the resolver is not there. */
			husk_debug("dns proxy: upstream: %s", strerror(errno));
			pending_fail(pd);
			return;
		}
		/* The socket is connected, so this is a second line of defence. */
		if (!same_addr(&from, &p->up)) {
			STAT_INC(p, spoofed);
			continue;
		}
		if (upstream_answer(pd, n))
			return;
	}
}

static void forward(struct dns_proxy *p, const struct origin *o, const struct dns_query *q,
		    const uint8_t *msg, size_t len)
{
	struct pending *pd = NULL;
	unsigned i;

	for (i = 0; i < DNS_PROXY_PENDING_MAX && !pd; i++)
		if (!p->pend[i].used)
			pd = &p->pend[i];
	if (!pd) {
		STAT_INC(p, failed);
		reply_error(p, o, msg, q, DNS_RCODE_SERVFAIL);
		return;
	}
	pd->fd = socket(p->up.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (pd->fd < 0)
		goto fail;
	/* Connected: the kernel only delivers datagrams from the resolver's address and port. */
	if (connect(pd->fd, (const struct sockaddr *)&p->up, p->ulen) < 0)
		goto fail;
	pd->p = p;
	pd->q = *q;
	pd->from = *o;
	memcpy(pd->qmsg, msg, len);
	pd->up_id = rand_id(p);
	pd->qmsg[0] = pd->up_id >> 8;
	pd->qmsg[1] = pd->up_id & 0xff;
	if (send(pd->fd, pd->qmsg, len, MSG_DONTWAIT) != (ssize_t)len)
		goto fail;
	/* Back to the guest's ID: pd->qmsg now serves SERVFAIL answers. */
	pd->qmsg[0] = q->id >> 8;
	pd->qmsg[1] = q->id & 0xff;
	if (evloop_add(p->el, pd->fd, EPOLLIN, upstream_cb, pd))
		goto fail;
	pd->used = true;
	pd->deadline_us = now_us() + (uint64_t)p->query_ms * 1000;
	if (o->tcp)
		p->conns[o->conn].inflight++;
	STAT_INC(p, allowed);
	rearm(p);
	return;
fail:
	husk_debug("dns proxy: cannot forward %s: %s", q->name, strerror(errno));
	if (pd->fd >= 0)
		close(pd->fd);
	pd->fd = -1;
	STAT_INC(p, failed);
	reply_error(p, o, msg, q, DNS_RCODE_SERVFAIL);
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
	forward(p, o, &q, msg, len);
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
	unsigned i;
	int fd;

	while ((fd = accept4(p->tcp_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
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
		if (p->pend[i].used && p->pend[i].deadline_us < first)
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
		if (p->pend[i].used && p->pend[i].deadline_us <= now) {
			husk_debug("dns proxy: upstream timeout for %s", p->pend[i].q.name);
			pending_fail(&p->pend[i]);
		}
	}
	for (i = 0; i < DNS_PROXY_TCP_MAX; i++) {
		struct tcp_conn *c = &p->conns[i];

		if (c->fd >= 0 && !c->inflight &&
		    c->last_us + (uint64_t)p->idle_ms * 1000 <= now)
			close_conn(c);
	}
	rearm(p);
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

static uint16_t sa_port(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
	return ntohs(((const struct sockaddr_in *)ss)->sin_port);
}

/*
 * UDP and TCP on the same port. With port 0 the UDP socket picks one and TCP
 * follows; if TCP finds it taken, try again with a fresh pick.
 */
static int bind_listeners(struct dns_proxy *p, const struct sockaddr *addr, socklen_t len)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	int one = 1, tries, fam = addr->sa_family;

	for (tries = 0; tries < 8; tries++) {
		memcpy(&ss, addr, len);
		p->udp_fd = socket(fam, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		p->tcp_fd = socket(fam, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (p->udp_fd < 0 || p->tcp_fd < 0)
			goto err;
		if (bind(p->udp_fd, (struct sockaddr *)&ss, len) < 0)
			goto err;
		sl = sizeof(ss);
		if (getsockname(p->udp_fd, (struct sockaddr *)&ss, &sl) < 0)
			goto err;
		setsockopt(p->tcp_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(p->tcp_fd, (struct sockaddr *)&ss, sl) == 0) {
			if (listen(p->tcp_fd, DNS_PROXY_TCP_MAX) < 0)
				goto err;
			p->port = sa_port(&ss);
			return 0;
		}
		if (errno != EADDRINUSE || sa_port((const struct sockaddr_storage *)addr))
			goto err;
		close(p->udp_fd);
		close(p->tcp_fd);
		p->udp_fd = p->tcp_fd = -1;
	}
	errno = EADDRINUSE;
err:
	return husk_seterr(errno, "dns proxy: cannot listen on port %u: %s",
			   sa_port((const struct sockaddr_storage *)addr), strerror(errno));
}

struct dns_proxy *dns_proxy_new(struct evloop *el, const struct sockaddr *bind_addr,
				socklen_t len, const char *const *allow, unsigned nallow,
				const struct sockaddr *upstream, socklen_t ulen,
				dns_addr_cb cb, void *arg)
{
	struct dns_proxy *p;
	unsigned i;

	if (!bind_addr || len > sizeof(struct sockaddr_storage) || !upstream ||
	    ulen > sizeof(struct sockaddr_storage) ||
	    (bind_addr->sa_family != AF_INET && bind_addr->sa_family != AF_INET6) ||
	    (upstream->sa_family != AF_INET && upstream->sa_family != AF_INET6)) {
		husk_seterr(EINVAL, "dns proxy: bad listen or upstream address");
		return NULL;
	}
	p = calloc(1, sizeof(*p));
	if (!p) {
		husk_seterr(ENOMEM, "dns proxy: out of memory");
		return NULL;
	}
	pthread_mutex_init(&p->lock, NULL);
	p->el = el;
	p->udp_fd = p->tcp_fd = p->timer_fd = -1;
	p->cb = cb;
	p->arg = arg;
	p->query_ms = DNS_PROXY_TIMEOUT_MS;
	p->idle_ms = DNS_PROXY_IDLE_MS;
	memcpy(&p->up, upstream, ulen);
	p->ulen = ulen;
	for (i = 0; i < DNS_PROXY_PENDING_MAX; i++) {
		p->pend[i].p = p;
		p->pend[i].fd = -1;
	}
	for (i = 0; i < DNS_PROXY_TCP_MAX; i++) {
		p->conns[i].p = p;
		p->conns[i].fd = -1;
	}
	if (copy_allowlist(p, allow, nallow) || bind_listeners(p, bind_addr, len))
		goto fail;
	p->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (p->timer_fd < 0) {
		husk_seterr(errno, "dns proxy: timerfd: %s", strerror(errno));
		goto fail;
	}
	if (evloop_add(el, p->timer_fd, EPOLLIN, timer_cb, p))
		goto fail;
	p->timer_reg = true;
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
		if (p->pend[i].used) {
			evloop_del(p->el, p->pend[i].fd);
			close(p->pend[i].fd);
		}
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
