/*
 * virtio_vsock: userspace virtio-vsock device bridged to Unix sockets
 * (Firecracker's hybrid model). See virtio_vsock.h for the host protocol.
 *
 * Queues: rx (0) carries packets to the guest, tx (1) packets from it, event
 * (2) is never used (we never reset the transport under the guest's feet).
 * The protocol itself (headers, credit, shutdown) lives in vsock_conn.c;
 * this file moves packets between the rings and the host sockets.
 *
 * Everything runs on the VM's event loop under d->lock, which the transport
 * also holds around notify/activate/reset, so a driver reset can never land
 * in the middle of queue work. reset() runs on a vCPU thread, where freeing
 * socket state would race with a callback already dispatched for it, so it
 * only flags the reset; the loop tears down before doing anything else.
 *
 * Data paths never buffer unboundedly: host bytes are read straight into
 * the guest's rx buffer, and only as many as the guest's credit allows;
 * guest bytes the host socket does not take are kept up to the credit we
 * granted (VSOCK_BUF_ALLOC per connection) and the tx queue keeps moving,
 * so one slow host reader never stalls other connections.
 */
#include <endian.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "template/snapshot.h"
#include "lib/util.h"
#include "virtio/virtio_mmio.h"
#include "virtio/virtio_vsock.h"
#include "machine/vm.h"
#include "virtio/vsock_conn.h"

#define VS_QUEUE_SIZE 256
#define VS_RXQ 0
#define VS_TXQ 1
#define VS_EVQ 2

#define VS_LINE_MAX 32			/* "CONNECT 4294967295\n" fits easily */
#define VS_MAX_PENDING 16		/* host clients that have not sent CONNECT yet */
#define VS_RETRY_US 50000		/* guest refused: REQUEST again after this */
#define VS_CONNECT_DEADLINE_US 10000000	/* ... until this long after CONNECT */
#define VS_TICK_NS 50000000
#define VS_BATCH 512			/* chains per queue pass before yielding */

enum vs_kind {
	VS_LINE,	/* host client, reading its CONNECT line */
	VS_WAIT,	/* host client, REQUEST sent to the guest */
	VS_BRIDGE,	/* bytes flow both ways */
};

struct vsock_dev;

struct vs_sock {
	struct vsock_dev *dev;
	struct vs_sock *next;
	int fd;
	enum vs_kind kind;
	struct vsock_conn *c;
	uint32_t guest_port;
	uint64_t deadline, retry_at;
	char line[VS_LINE_MAX];
	unsigned line_len;
	bool readable;		/* the socket may have data we did not read */
	bool wr_shut;		/* shutdown(SHUT_WR) done */
	uint32_t ev_mask;	/* registered events, 0 = not registered */
};

struct vsock_dev {
	struct virtio_dev d;
	struct vm *vm;
	struct vsock_table t;
	uint8_t config[8];	/* le64 guest_cid */
	char *uds_path;
	int listen_fd, timer_fd, kick_fd;
	bool timer_armed;
	bool reset_pending;
	struct vs_sock *socks;
	unsigned nr_socks, nr_line;
	struct vq_chain rx_chain;	/* popped rx buffer waiting for a packet */
	bool rx_held;
	struct vq_chain tx_chain;
	uint8_t scratch[VSOCK_MAX_PAYLOAD];
};

static void rx_fill(struct vsock_dev *v);

/* ---- helpers ---- */

static bool queue_ok(struct vsock_dev *v, unsigned q)
{
	return v->d.activated && !v->d.broken && v->d.vq[q].ready;
}

static void kick(struct vsock_dev *v)
{
	uint64_t one = 1;

	if (write(v->kick_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		husk_debug("vsock: kick eventfd: %s", strerror(errno));
}

/* Best effort, to a socket that just connected or is about to be closed. */
static void say(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(int fd, const char *fmt, ...)
{
	char msg[96];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (n > 0 && (size_t)n < sizeof(msg) &&
	    send(fd, msg, n, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
		husk_debug("vsock: host client: %s", strerror(errno));
}

static void sock_cb(void *arg, uint32_t events);

/* Register exactly the events this socket needs now (none: unregistered). */
static void sock_update(struct vs_sock *s)
{
	struct evloop *el = &s->dev->vm->loop;
	uint32_t want = 0;
	int err = 0;

	if (s->kind == VS_LINE)
		want = EPOLLIN;
	else if (s->kind == VS_BRIDGE) {
		if (!s->readable && vsock_conn_wants_host_data(s->c))
			want |= EPOLLIN;
		if (s->c->buf_used)
			want |= EPOLLOUT;
	}
	if (want == s->ev_mask)
		return;
	/*
	 * Unregister rather than register with no events: epoll reports
	 * EPOLLHUP regardless, which would spin on a socket we ignore.
	 */
	if (!want)
		err = evloop_del(el, s->fd);
	else if (!s->ev_mask)
		err = evloop_add(el, s->fd, want, sock_cb, s);
	else
		err = evloop_mod(el, s->fd, want, sock_cb, s);
	if (err)
		husk_debug("vsock: %s", husk_lasterr());
	s->ev_mask = want;
}

static struct vs_sock *sock_new(struct vsock_dev *v, int fd, enum vs_kind kind)
{
	struct vs_sock *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->dev = v;
	s->fd = fd;
	s->kind = kind;
	s->next = v->socks;
	v->socks = s;
	v->nr_socks++;
	if (kind == VS_LINE)
		v->nr_line++;
	return s;
}

/* Close the host side; with rst the guest gets a reset for the connection. */
static void sock_close(struct vs_sock *s, bool rst)
{
	struct vsock_dev *v = s->dev;
	struct vs_sock **pp;

	if (s->ev_mask)
		evloop_del(&v->vm->loop, s->fd);
	close(s->fd);
	if (s->c) {
		s->c->priv = NULL;
		vsock_conn_release(&v->t, s->c, rst);
	}
	if (s->kind == VS_LINE)
		v->nr_line--;
	for (pp = &v->socks; *pp; pp = &(*pp)->next)
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	v->nr_socks--;
	free(s);
}

/* Teardown: the loop has stopped and its registrations go with it. */
static void close_all(struct vsock_dev *v)
{
	while (v->socks) {
		struct vs_sock *s = v->socks;

		s->ev_mask = 0;
		if (s->kind != VS_BRIDGE)
			say(s->fd, "ERR the VM stopped\n");
		sock_close(s, false);
	}
}

/* The guest reset the device: forget every connection (loop thread). */
static void check_reset(struct vsock_dev *v)
{
	struct vs_sock *s, *next;

	if (!v->reset_pending)
		return;
	v->reset_pending = false;
	v->rx_held = false;
	/*
	 * Bridged connections die with the driver's state. Host clients still
	 * waiting for the guest survive: the driver resets the device while it
	 * probes, and a client that connected during boot must not fail for it.
	 * Their REQUEST is simply sent again on the fresh table.
	 */
	for (s = v->socks; s; s = next) {
		next = s->next;
		if (s->kind == VS_BRIDGE)
			sock_close(s, false);
		else if (s->c) {
			s->c->priv = NULL;
			s->c = NULL;
		}
	}
	vsock_table_reset(&v->t);
	for (s = v->socks; s; s = next) {
		next = s->next;
		if (s->kind != VS_WAIT)
			continue;
		s->c = vsock_conn_open_host(&v->t, s->guest_port);
		if (!s->c) {
			say(s->fd, "ERR too many vsock connections (%u)\n", VSOCK_MAX_CONNS);
			sock_close(s, false);
			continue;
		}
		s->c->priv = s;
	}
}

static void timer_arm(struct vsock_dev *v, bool on)
{
	struct itimerspec its = { 0 };

	if (on == v->timer_armed)
		return;
	if (on) {
		its.it_value.tv_nsec = VS_TICK_NS;
		its.it_interval.tv_nsec = VS_TICK_NS;
	}
	if (timerfd_settime(v->timer_fd, 0, &its, NULL) < 0)
		husk_debug("vsock: timerfd_settime: %s", strerror(errno));
	v->timer_armed = on;
}

/* Both directions finished: close the socket and reset the connection. */
static bool sock_check_done(struct vs_sock *s)
{
	if (s->kind != VS_BRIDGE || !vsock_conn_done(s->c))
		return false;
	sock_close(s, true);
	return true;
}

/* Guest stopped sending and everything it sent is written: half-close. */
static void sock_maybe_shut_wr(struct vs_sock *s)
{
	if (s->wr_shut || !(s->c->peer_shut & VSOCK_SHUTDOWN_SEND) || s->c->buf_used)
		return;
	if (shutdown(s->fd, SHUT_WR) < 0)
		husk_debug("vsock: shutdown: %s", strerror(errno));
	s->wr_shut = true;
}

/* ---- guest -> host ---- */

/* Write buffered guest bytes; false when the socket was closed. */
static bool sock_flush(struct vs_sock *s)
{
	const uint8_t *p;
	uint32_t n;
	ssize_t w;

	while ((n = vsock_conn_buffered(s->c, &p))) {
		w = send(s->fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (w <= 0) {
			sock_close(s, true);
			return false;
		}
		vsock_conn_drain(s->c, w);
	}
	sock_maybe_shut_wr(s);
	if (sock_check_done(s))
		return false;
	sock_update(s);
	return true;
}

/* hdr_len payload bytes at offset 44 of the tx chain, for connection s. */
static void deliver(struct vsock_dev *v, struct vs_sock *s, const struct vq_chain *ch,
		    uint32_t len)
{
	struct iovec iov[VQ_MAX_CHAIN];
	struct msghdr msg = { .msg_iov = iov };
	uint64_t off = VSOCK_HDR_SIZE, left = len;
	unsigned i;
	ssize_t w = 0;

	/* Straight from guest memory when nothing is queued ahead of it. */
	if (!s->c->buf_used) {
		for (i = 0; i < ch->n_out && left; i++) {
			uint64_t blen = ch->out[i].len;

			if (off >= blen) {
				off -= blen;
				continue;
			}
			iov[msg.msg_iovlen].iov_base = ch->out[i].base + off;
			iov[msg.msg_iovlen].iov_len = blen - off < left ? blen - off : left;
			left -= iov[msg.msg_iovlen].iov_len;
			msg.msg_iovlen++;
			off = 0;
		}
		do
			w = sendmsg(s->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
		while (w < 0 && errno == EINTR);
		if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
			sock_close(s, true);
			return;
		}
		if (w < 0)
			w = 0;
		vsock_conn_consumed(s->c, w);
	}
	if ((uint32_t)w < len) {
		uint32_t rest = len - w;

		vq_copy_from(ch->out, ch->n_out, VSOCK_HDR_SIZE + w, v->scratch, rest);
		/* Cannot overflow: vsock_rx() checked the credit we granted. */
		if (vsock_conn_buffer(s->c, v->scratch, rest)) {
			sock_close(s, true);
			return;
		}
	}
	sock_update(s);
}

/* Guest REQUEST to host port P: connect to <uds_path>_<P>. */
static void guest_connect(struct vsock_dev *v, struct vsock_conn *c)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct vs_sock *s;
	int fd, n;

	n = snprintf(sa.sun_path, sizeof(sa.sun_path), "%s_%u", v->uds_path, c->local_port);
	if (n < 0 || (size_t)n >= sizeof(sa.sun_path))
		goto refuse;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		goto refuse;
	/* Unix sockets connect at once or fail (EAGAIN: backlog full). */
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 && errno != EINPROGRESS) {
		husk_debug("vsock: guest connect to %s: %s", sa.sun_path, strerror(errno));
		close(fd);
		goto refuse;
	}
	s = sock_new(v, fd, VS_BRIDGE);
	if (!s) {
		close(fd);
		goto refuse;
	}
	s->c = c;
	c->priv = s;
	vsock_conn_accept(c);
	sock_update(s);
	return;
refuse:
	vsock_conn_release(&v->t, c, true);
}

static void on_established(struct vs_sock *s)
{
	char ok[32];
	int n = snprintf(ok, sizeof(ok), "OK %u\n", s->c->local_port);

	/* A fresh socket has room for a few bytes; anything else is a dead client. */
	if (send(s->fd, ok, n, MSG_NOSIGNAL | MSG_DONTWAIT) != n) {
		sock_close(s, true);
		return;
	}
	s->kind = VS_BRIDGE;
	s->readable = false;
	sock_update(s);
}

static void on_refused(struct vs_sock *s)
{
	uint64_t now = now_us();

	if (now >= s->deadline) {
		say(s->fd, "ERR connection refused by guest port %u\n", s->guest_port);
		sock_close(s, false);
		return;
	}
	s->retry_at = now + VS_RETRY_US;
	timer_arm(s->dev, true);
}

static void handle_rx_result(struct vsock_dev *v, struct vsock_rx_result *r,
			     const struct vq_chain *ch)
{
	struct vs_sock *s = r->c ? r->c->priv : NULL;

	if (r->ev == VSOCK_EV_CONNECT) {
		guest_connect(v, r->c);
		return;
	}
	if (r->ev == VSOCK_EV_NONE)
		return;
	if (!s) {
		/* Cannot happen: every other conn has a socket. Be safe anyway. */
		vsock_conn_release(&v->t, r->c, true);
		return;
	}
	switch (r->ev) {
	case VSOCK_EV_ESTABLISHED:
		on_established(s);
		break;
	case VSOCK_EV_REFUSED:
		on_refused(s);
		break;
	case VSOCK_EV_DATA:
		deliver(v, s, ch, r->hdr.len);
		break;
	case VSOCK_EV_SHUTDOWN:
		sock_maybe_shut_wr(s);
		if (!sock_check_done(s))
			sock_update(s);
		break;
	case VSOCK_EV_RESET:
		if (s->kind == VS_WAIT)
			say(s->fd, "ERR connection reset by guest port %u\n", s->guest_port);
		sock_close(s, false);
		break;
	default:
		break;
	}
}

static void tx_process(struct vsock_dev *v)
{
	struct virtqueue *vq = &v->d.vq[VS_TXQ];
	struct vq_chain *ch = &v->tx_chain;
	uint8_t wire[VSOCK_HDR_SIZE];
	struct vsock_rx_result r;
	unsigned done = 0;
	int ret = 0;

	if (!queue_ok(v, VS_TXQ))
		return;
	while (done < VS_BATCH && (ret = vq_pop(vq, ch)) > 0) {
		if (ch->out_len >= VSOCK_HDR_SIZE) {
			vq_copy_from(ch->out, ch->n_out, 0, wire, VSOCK_HDR_SIZE);
			r = vsock_rx(&v->t, wire, ch->out_len - VSOCK_HDR_SIZE);
			handle_rx_result(v, &r, ch);
		} else {
			/* Too short to even answer: drop it. */
			v->t.bad_pkts++;
		}
		if (vq_push(vq, ch->head, 0)) {
			virtio_set_broken(&v->d, husk_lasterr());
			return;
		}
		done++;
	}
	if (ret < 0) {
		virtio_set_broken(&v->d, husk_lasterr());
		return;
	}
	if (done)
		virtio_notify_used(&v->d, VS_TXQ);
	/* More may be waiting: come back after other fds had their turn. */
	if (done == VS_BATCH)
		kick(v);
	rx_fill(v);
}

/* ---- host -> guest ---- */

/* Put one 44-byte header at the start of the held rx chain and return it. */
static bool rx_push(struct vsock_dev *v, const struct vsock_hdr *h, uint32_t data_len)
{
	uint8_t wire[VSOCK_HDR_SIZE];

	vsock_hdr_encode(wire, h);
	vq_copy_to(v->rx_chain.in, v->rx_chain.n_in, 0, wire, VSOCK_HDR_SIZE);
	v->rx_held = false;
	if (vq_push(&v->d.vq[VS_RXQ], v->rx_chain.head, VSOCK_HDR_SIZE + data_len)) {
		virtio_set_broken(&v->d, husk_lasterr());
		return false;
	}
	return true;
}

static bool sock_can_send(struct vs_sock *s)
{
	return s->kind == VS_BRIDGE && s->readable && vsock_conn_wants_host_data(s->c);
}

/*
 * Read host data for s straight into the held chain. 1: packet pushed,
 * 0: nothing (try others), -1: queue broken.
 */
static int rx_data(struct vsock_dev *v, struct vs_sock *s)
{
	struct vq_chain *ch = &v->rx_chain;
	struct iovec iov[VQ_MAX_CHAIN];
	uint64_t off = VSOCK_HDR_SIZE, room;
	uint32_t credit = vsock_conn_tx_credit(s->c);
	struct vsock_hdr h;
	unsigned i, n = 0;
	ssize_t r;

	if (!credit) {
		vsock_conn_need_credit(s->c);
		return 0;
	}
	room = ch->in_len - VSOCK_HDR_SIZE;
	if (room > credit)
		room = credit;
	for (i = 0; i < ch->n_in && room; i++) {
		uint64_t blen = ch->in[i].len;

		if (off >= blen) {
			off -= blen;
			continue;
		}
		iov[n].iov_base = ch->in[i].base + off;
		iov[n].iov_len = blen - off < room ? blen - off : room;
		room -= iov[n].iov_len;
		n++;
		off = 0;
	}
	if (!n)
		return 0;
	do
		r = readv(s->fd, iov, n);
	while (r < 0 && errno == EINTR);
	if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
		s->readable = false;
		sock_update(s);
		return 0;
	}
	if (r < 0) {
		sock_close(s, true);
		return 0;
	}
	if (r == 0) {
		s->readable = false;
		vsock_conn_host_eof(s->c);
		if (!sock_check_done(s))
			sock_update(s);
		return 0;
	}
	vsock_conn_make_rw(&v->t, s->c, &h, r);
	return rx_push(v, &h, r) ? 1 : -1;
}

/* The socket before next in the list (the one rx_data() just served). */
static struct vs_sock *served_sock(struct vsock_dev *v, struct vs_sock *next)
{
	struct vs_sock *s;

	for (s = v->socks; s; s = s->next)
		if (s->next == next)
			return s;
	return NULL;
}

static void sock_to_tail(struct vsock_dev *v, struct vs_sock *s)
{
	struct vs_sock **pp;

	if (!s || !s->next)
		return;
	for (pp = &v->socks; *pp != s; pp = &(*pp)->next)
		;
	*pp = s->next;
	while (*pp)
		pp = &(*pp)->next;
	*pp = s;
	s->next = NULL;
}

static bool any_data(struct vsock_dev *v)
{
	struct vs_sock *s;

	for (s = v->socks; s; s = s->next)
		if (sock_can_send(s) && vsock_conn_tx_credit(s->c))
			return true;
	return false;
}

static void rx_fill(struct vsock_dev *v)
{
	struct virtqueue *vq = &v->d.vq[VS_RXQ];
	struct vsock_hdr h;
	struct vs_sock *s, *next;
	unsigned pushed = 0, rounds = 0;
	int ret, got;

	if (!queue_ok(v, VS_RXQ))
		return;
	while (pushed < VS_BATCH && rounds++ < 4 * VS_BATCH) {
		if (!v->rx_held) {
			if (!vsock_has_ctrl(&v->t) && !any_data(v))
				break;
			ret = vq_pop(vq, &v->rx_chain);
			if (ret < 0) {
				virtio_set_broken(&v->d, husk_lasterr());
				return;
			}
			if (ret == 0)
				break;
			v->rx_held = true;
			if (v->rx_chain.in_len < VSOCK_HDR_SIZE) {
				/* Useless buffer: hand it back empty. */
				v->rx_held = false;
				if (vq_push(vq, v->rx_chain.head, 0)) {
					virtio_set_broken(&v->d, husk_lasterr());
					return;
				}
				pushed++;
				continue;
			}
		}
		if (vsock_pop_ctrl(&v->t, &h)) {
			if (!rx_push(v, &h, 0))
				return;
			pushed++;
			continue;
		}
		got = 0;
		for (s = v->socks; s && !got; s = next) {
			next = s->next;
			if (sock_can_send(s))
				got = rx_data(v, s);
		}
		if (got < 0)
			return;
		if (got) {
			/* The socket just served goes last, so busy ones take turns. */
			sock_to_tail(v, served_sock(v, next));
			pushed++;
			continue;
		}
		/* Nothing sendable now; control packets may have appeared (EOF). */
		if (!vsock_has_ctrl(&v->t))
			break;
	}
	if (pushed)
		virtio_notify_used(&v->d, VS_RXQ);
	if (pushed >= VS_BATCH)
		kick(v);
}

/* ---- host side: listener, CONNECT lines, timers ---- */

static int parse_connect(const char *line, unsigned len, uint32_t *port)
{
	static const char pfx[] = "CONNECT ";
	uint64_t p = 0;
	unsigned i = sizeof(pfx) - 1;

	if (len <= i || memcmp(line, pfx, i))
		return -EINVAL;
	if (len - i > 10)
		return -ERANGE;
	for (; i < len; i++) {
		if (line[i] < '0' || line[i] > '9')
			return -EINVAL;
		p = p * 10 + (line[i] - '0');
	}
	if (p > UINT32_MAX)
		return -ERANGE;
	*port = p;
	return 0;
}

static void line_done(struct vs_sock *s)
{
	struct vsock_dev *v = s->dev;
	unsigned len = s->line_len;
	uint32_t port;

	if (len && s->line[len - 1] == '\r')
		len--;
	if (parse_connect(s->line, len, &port)) {
		say(s->fd, "ERR expected \"CONNECT <port>\\n\" with a decimal port\n");
		sock_close(s, false);
		return;
	}
	s->c = vsock_conn_open_host(&v->t, port);
	if (!s->c) {
		say(s->fd, "ERR too many vsock connections (%u)\n", VSOCK_MAX_CONNS);
		sock_close(s, false);
		return;
	}
	s->c->priv = s;
	s->kind = VS_WAIT;
	v->nr_line--;
	s->guest_port = port;
	s->deadline = now_us() + VS_CONNECT_DEADLINE_US;
	timer_arm(v, true);
	sock_update(s);
	rx_fill(v);
}

/* Byte by byte: nothing after the newline may be taken from the stream. */
static void line_read(struct vs_sock *s)
{
	char ch;
	ssize_t r;

	for (;;) {
		r = recv(s->fd, &ch, 1, MSG_DONTWAIT);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (r <= 0) {
			sock_close(s, false);
			return;
		}
		if (ch == '\n') {
			line_done(s);
			return;
		}
		if (s->line_len >= VS_LINE_MAX) {
			say(s->fd, "ERR CONNECT line longer than %u bytes\n", VS_LINE_MAX);
			sock_close(s, false);
			return;
		}
		s->line[s->line_len++] = ch;
	}
}

static void sock_cb(void *arg, uint32_t events)
{
	struct vs_sock *s = arg;
	struct vsock_dev *v = s->dev;

	pthread_mutex_lock(&v->d.lock);
	if (v->reset_pending) {
		/* s may be among the sockets torn down here: do not touch it. */
		check_reset(v);
		goto out;
	}
	if (s->kind == VS_LINE) {
		line_read(s);
		goto out;
	}
	if (s->kind != VS_BRIDGE)
		goto out;
	if (events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) {
		if (s->c->buf_used && !sock_flush(s))
			goto done;
	}
	if (events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
		s->readable = true;
		sock_update(s);
	}
done:
	rx_fill(v);
out:
	pthread_mutex_unlock(&v->d.lock);
}

static void listen_cb(void *arg, uint32_t events)
{
	struct vsock_dev *v = arg;
	struct vs_sock *s;
	unsigned i;
	int fd;

	pthread_mutex_lock(&v->d.lock);
	check_reset(v);
	for (i = 0; i < VS_MAX_PENDING; i++) {
		fd = accept4(v->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			break;
		if (v->nr_line >= VS_MAX_PENDING ||
		    v->nr_socks >= VSOCK_MAX_CONNS + VS_MAX_PENDING) {
			say(fd, "ERR too many host connections\n");
			close(fd);
			continue;
		}
		s = sock_new(v, fd, VS_LINE);
		if (!s) {
			close(fd);
			continue;
		}
		s->deadline = now_us() + VS_CONNECT_DEADLINE_US;
		timer_arm(v, true);
		sock_update(s);
	}
	pthread_mutex_unlock(&v->d.lock);
}

static void timer_cb(void *arg, uint32_t events)
{
	struct vsock_dev *v = arg;
	struct vs_sock *s, *next;
	uint64_t ticks, now = now_us();
	bool need = false;

	if (read(v->timer_fd, &ticks, sizeof(ticks)) < 0)
		(void)0;
	pthread_mutex_lock(&v->d.lock);
	check_reset(v);
	for (s = v->socks; s; s = next) {
		next = s->next;
		if (s->kind == VS_LINE) {
			if (now >= s->deadline) {
				say(s->fd, "ERR no CONNECT line within %u s\n",
				    VS_CONNECT_DEADLINE_US / 1000000);
				sock_close(s, false);
				continue;
			}
			need = true;
		} else if (s->kind == VS_WAIT) {
			if (s->c->state == VSOCK_REFUSED) {
				if (now >= s->deadline) {
					on_refused(s);
					continue;
				}
				if (now >= s->retry_at)
					vsock_conn_retry(s->c);
			} else if (now >= s->deadline) {
				say(s->fd, "ERR guest port %u did not answer\n", s->guest_port);
				sock_close(s, true);
				continue;
			}
			need = true;
		}
	}
	timer_arm(v, need);
	rx_fill(v);
	pthread_mutex_unlock(&v->d.lock);
}

static void kick_cb(void *arg, uint32_t events)
{
	struct vsock_dev *v = arg;
	uint64_t val;

	if (read(v->kick_fd, &val, sizeof(val)) < 0)
		(void)0;
	pthread_mutex_lock(&v->d.lock);
	check_reset(v);
	tx_process(v);
	rx_fill(v);
	pthread_mutex_unlock(&v->d.lock);
}

/* ---- virtio ops ---- */

static void vs_read_config(struct virtio_dev *d, uint32_t off, void *data, unsigned len)
{
	struct vsock_dev *v = d->priv;

	if (off < sizeof(v->config) && len <= sizeof(v->config) - off)
		memcpy(data, v->config + off, len);
	else
		memset(data, 0, len);
}

static void vs_activate(struct virtio_dev *d)
{
	check_reset(d->priv);
}

static void vs_notify(struct virtio_dev *d, unsigned q)
{
	struct vsock_dev *v = d->priv;

	check_reset(v);
	if (q == VS_TXQ)
		tx_process(v);
	else if (q == VS_RXQ)
		rx_fill(v);
	/* Event queue buffers stay with us until a restore sends its transport reset. */
}

/*
 * A restored VM: the guest's connections belonged to another VM process and
 * are gone. VIRTIO_VSOCK_EVENT_TRANSPORT_RESET (5.10.6.5) makes the guest
 * drop them at once, so its sockets fail with ECONNRESET and guest-init
 * connects again, to us.
 */
static int vs_restore(struct virtio_dev *d, const struct snap_section *sec)
{
	static const uint32_t transport_reset = 0;	/* le32 event id */
	struct vsock_dev *v = d->priv;
	struct virtqueue *vq = &d->vq[VS_EVQ];
	struct vq_chain c;
	int n;

	(void)sec;
	if (!queue_ok(v, VS_EVQ))
		return 0;	/* the guest never set up its driver: nothing to reset */
	n = vq_pop(vq, &c);
	if (n < 0)
		return husk_seterr(EINVAL, "the restored event queue is malformed: %s",
				   husk_lasterr());
	if (n == 0 || c.in_len < sizeof(transport_reset))
		return husk_seterr(ENOSPC, "the guest left no buffer in its vsock event queue "
				   "for the transport reset");
	vq_copy_to(c.in, c.n_in, 0, &transport_reset, sizeof(transport_reset));
	if (vq_push(vq, c.head, sizeof(transport_reset)))
		return husk_seterr(EINVAL, "cannot return the vsock event buffer");
	virtio_notify_used(d, VS_EVQ);
	return 0;
}

/* The held rx chain was the last one popped: un-pop it for the template. */
static void vs_quiesce(struct virtio_dev *d)
{
	struct vsock_dev *v = d->priv;

	if (v->rx_held) {
		d->vq[VS_RXQ].last_avail--;
		v->rx_held = false;
	}
}

static void vs_reset(struct virtio_dev *d)
{
	struct vsock_dev *v = d->priv;

	/* vCPU thread: the loop tears down (see the file comment). */
	v->reset_pending = true;
	v->rx_held = false;
	kick(v);
}

static void vs_destroy(struct virtio_dev *d)
{
	struct vsock_dev *v = d->priv;

	close_all(v);
	vsock_table_reset(&v->t);
	if (v->listen_fd >= 0) {
		close(v->listen_fd);
		unlink(v->uds_path);
	}
	if (v->timer_fd >= 0)
		close(v->timer_fd);
	if (v->kick_fd >= 0)
		close(v->kick_fd);
	free(v->uds_path);
	free(v);
}

static const struct virtio_dev_ops vsock_ops = {
	.name = "vsock",
	.device_id = VIRTIO_ID_VSOCK,
	.features = 1ull << VIRTIO_F_VERSION_1,
	.num_queues = 3,
	.queue_max = VS_QUEUE_SIZE,
	.config_len = 8,
	.read_config = vs_read_config,
	.activate = vs_activate,
	.notify = vs_notify,
	.reset = vs_reset,
	.quiesce = vs_quiesce,
	.restore = vs_restore,
	.destroy = vs_destroy,
};

/* A leftover socket file nobody listens on may go; a live one may not. */
static int claim_path(const struct sockaddr_un *sa)
{
	struct stat st;
	int fd, err;

	if (lstat(sa->sun_path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISSOCK(st.st_mode))
		return -EEXIST;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	err = connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) < 0 ? errno : 0;
	close(fd);
	if (err != ECONNREFUSED)
		return -EADDRINUSE;
	return unlink(sa->sun_path) < 0 ? -errno : 0;
}

static int open_listener(struct vsock_dev *v)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int err;

	/* Room for "_<port>" of guest-initiated connections too. */
	if (strlen(v->uds_path) + 12 > sizeof(sa.sun_path))
		return husk_seterr(ENAMETOOLONG, "vsock socket path %s is too long (at most %zu "
				   "bytes)", v->uds_path, sizeof(sa.sun_path) - 12);
	strcpy(sa.sun_path, v->uds_path);
	if ((err = claim_path(&sa)))
		return husk_seterr(err, "vsock socket path %s: %s; remove it or pick another "
				   "path", v->uds_path, strerror(-err));
	v->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (v->listen_fd < 0)
		return husk_seterr(errno, "vsock: socket: %s", strerror(errno));
	if (bind(v->listen_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(v->listen_fd, VS_MAX_PENDING) < 0) {
		err = husk_seterr(errno, "vsock: cannot listen on %s: %s", v->uds_path,
				  strerror(errno));
		close(v->listen_fd);
		v->listen_fd = -1;
		return err;
	}
	return 0;
}

int virtio_vsock_create(struct vm *vm, uint32_t guest_cid, const char *uds_path)
{
	struct vsock_dev *v;
	uint64_t cid = guest_cid;
	int err;

	if (guest_cid < 3 || guest_cid == UINT32_MAX)
		return husk_seterr(EINVAL, "vsock guest CID %u is reserved; use 3 or more",
				   guest_cid);
	v = calloc(1, sizeof(*v));
	if (!v)
		return husk_seterr(ENOMEM, "out of memory for the vsock device");
	v->vm = vm;
	v->listen_fd = v->timer_fd = v->kick_fd = -1;
	vsock_table_init(&v->t, guest_cid);
	cid = htole64(cid);
	memcpy(v->config, &cid, sizeof(v->config));
	v->uds_path = strdup(uds_path);
	if (!v->uds_path) {
		free(v);
		return husk_seterr(ENOMEM, "out of memory for the vsock device");
	}
	if ((err = open_listener(v)))
		goto fail;
	v->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	v->kick_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (v->timer_fd < 0 || v->kick_fd < 0) {
		err = husk_seterr(errno, "vsock: timerfd/eventfd: %s", strerror(errno));
		goto fail;
	}
	if ((err = virtio_mmio_add(vm, &v->d, &vsock_ops, v)))
		goto fail;
	/*
	 * After virtio_mmio_add (which initialises d->lock) and before the guest
	 * runs. On failure here the device stays registered and vm_destroy
	 * frees it through vs_destroy.
	 */
	if ((err = evloop_add(&vm->loop, v->listen_fd, EPOLLIN, listen_cb, v)) ||
	    (err = evloop_add(&vm->loop, v->timer_fd, EPOLLIN, timer_cb, v)) ||
	    (err = evloop_add(&vm->loop, v->kick_fd, EPOLLIN, kick_cb, v)))
		return err;
	return 0;
fail:
	if (v->listen_fd >= 0) {
		close(v->listen_fd);
		unlink(v->uds_path);
	}
	if (v->timer_fd >= 0)
		close(v->timer_fd);
	if (v->kick_fd >= 0)
		close(v->kick_fd);
	free(v->uds_path);
	free(v);
	return err;
}
