/*
 * clients: husk serve's connections. Accepting them (a cap for all, a
 * share per uid), request lines in and answer lines out, each bounded, and
 * the deadlines of connections that hold a slot without using it.
 *
 * One loop serves every client, so none may hold it: a client's requests
 * are read into its buffer as they come, then handled in passes, at most
 * CLIENT_LINES per client and PEER_LINES per uid in each pass, so a
 * flood from one uid (however many connections it has) costs another uid
 * one pass at most. A client whose answers are not read stops being read:
 * past CLIENT_ANSWERS_MAX unsent bytes its requests wait in the socket, and
 * past CLIENT_OUT_HARD (sandboxes' output is held at CLIENT_OUT_MAX) it is
 * closed. A uid's connections together are held the same way past
 * PEER_OUT_MAX unsent and PEER_IN_MAX unhandled bytes, so what one uid makes
 * the daemon hold is bounded however many connections it has.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/accounts.h"
#include "lib/util.h"
#include "serve/serve_int.h"

#define MAX_CLIENTS 1024
#define ROOT_RESERVE 16			/* connections only root may take past MAX_CLIENTS */
#define ACCEPTS_PER_PASS 64
#define READ_CHUNK (64 * 1024)
#define CLIENT_LINES 16			/* requests of one client handled per pass */
#define PEER_LINES 64			/* ... and of one uid, all its connections */
#define PEER_IN_MAX (64u << 20)		/* request bytes of one uid read ahead */

/* ---- peers: the connections of a uid ---- */

static struct peer *peer_get(uid_t uid)
{
	struct peer *p;

	for (p = srv.peers; p; p = p->next)
		if (p->uid == uid)
			return p;
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->uid = uid;
	p->next = srv.peers;
	srv.peers = p;
	return p;
}

static void peer_put(struct peer *p)
{
	struct peer **pp;

	if (p->conns || p->in_bytes || p->out_bytes)
		return;
	for (pp = &srv.peers; *pp; pp = &(*pp)->next) {
		if (*pp == p) {
			*pp = p->next;
			free(p);
			return;
		}
	}
}

/* ---- answers out ---- */

static size_t unsent(const struct client *c)
{
	return c->out_len - c->out_off;
}

bool client_full(const struct client *c)
{
	return unsent(c) > CLIENT_OUT_MAX || c->peer->out_bytes > PEER_OUT_MAX;
}

/* Room for the answers of another request. */
static bool answers_room(const struct client *c)
{
	return unsent(c) <= CLIENT_ANSWERS_MAX && c->peer->out_bytes <= PEER_OUT_MAX;
}

/* Some request read and not handled yet: a complete line in the buffer. */
static bool has_line(struct client *c)
{
	char *nl;

	if (c->in_scan < c->in_off)
		c->in_scan = c->in_off;
	if (c->in_scan == c->in_len)
		return false;
	nl = memchr(c->in + c->in_scan, '\n', c->in_len - c->in_scan);
	if (nl)
		return true;
	c->in_scan = c->in_len;
	return false;
}

/* What epoll watches: requests while there is room for their answers, answers while any wait. */
static void client_arm(struct client *c)
{
	uint32_t ev = 0;

	if (c->gone || c->fd < 0)
		return;
	if (answers_room(c) && !has_line(c) && c->peer->in_bytes < PEER_IN_MAX)
		ev |= EPOLLIN;
	if (unsent(c))
		ev |= EPOLLOUT;
	if (ev != c->ep_events) {
		ep_mod(c->fd, &c->h, ev);
		c->ep_events = ev;
	}
}

static void client_flush(struct client *c)
{
	size_t before = c->out_off;

	while (c->out_off < c->out_len) {
		ssize_t w = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
				 MSG_DONTWAIT | MSG_NOSIGNAL);

		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (w <= 0) {
			c->gone = true;
			return;
		}
		c->out_off += w;
		c->peer->out_bytes -= w;
	}
	if (c->out_off != before) {
		c->t_active = now_us();
		c->t_stall = unsent(c) ? c->t_active : 0;
	}
	if (c->out_off == c->out_len) {
		c->out_off = c->out_len = 0;
		/* Drained: a buffer a burst made large goes back. */
		if (c->out_cap > 4 * READ_CHUNK) {
			free(c->out);
			c->out = NULL;
			c->out_cap = 0;
		}
	}
	client_arm(c);
}

void client_send(struct client *c, char *line)
{
	size_t n;

	if (!line)
		return;
	if (!c || c->gone) {
		free(line);
		return;
	}
	n = strlen(line);
	if (c->out_off && c->out_off == c->out_len)
		c->out_off = c->out_len = 0;
	if (unsent(c) + n > CLIENT_OUT_HARD) {
		/* Not read for that long: the client goes, its answers with it. */
		husk_msg("serve: closing the connection of uid %u (pid %d): %zu bytes of "
			 "answers unread", (unsigned)c->uid, (int)c->pid, unsent(c));
		free(line);
		c->gone = true;
		return;
	}
	if (c->out_len + n > c->out_cap) {
		size_t cap = c->out_cap ? c->out_cap : 4096;
		char *nb;

		if (c->out_off) {
			/* Room at the front first: what was sent is not kept. */
			memmove(c->out, c->out + c->out_off, unsent(c));
			c->out_len -= c->out_off;
			c->out_off = 0;
		}
		while (cap < c->out_len + n)
			cap *= 2;
		nb = cap == c->out_cap ? c->out : realloc(c->out, cap);
		if (!nb) {
			free(line);
			c->gone = true;
			return;
		}
		c->out = nb;
		c->out_cap = cap;
	}
	if (!unsent(c))
		c->t_stall = now_us();
	memcpy(c->out + c->out_len, line, n);
	c->out_len += n;
	c->peer->out_bytes += n;
	free(line);
	client_flush(c);
}

void bind_set(struct bind *b, struct client *c, json_t *re)
{
	bind_clear(b);
	b->c = c;
	b->re = json_incref(re);
	if (c)
		c->binds++;
}

void bind_clear(struct bind *b)
{
	if (b->c)
		b->c->binds--;
	json_decref(b->re);
	b->c = NULL;
	b->re = NULL;
}

void bind_send(struct bind *b, char *line)
{
	client_send(b->c, line);
}

/* ---- requests in ---- */

static void consumed(struct client *c, size_t n)
{
	c->in_off += n;
	c->peer->in_bytes -= n;
}

/* A line too long to be a request: answered once, the rest of it dropped. */
static void too_long(struct client *c)
{
	if (!c->skipping)
		client_send(c, api_error(NULL, E_BAD, "a request line is too long", NULL));
	c->skipping = true;
	consumed(c, c->in_len - c->in_off);
	c->in_off = c->in_scan = c->in_len = 0;
}

/* Read what the socket has, up to a chunk; the lines wait for the next pass. */
static void client_read(struct client *c)
{
	size_t rest = c->in_len - c->in_off;
	ssize_t n;

	if (c->in_off) {
		/* Handled lines go once per read, not once per line. */
		memmove(c->in, c->in + c->in_off, rest);
		c->in_scan -= c->in_off;
		c->in_len = rest;
		c->in_off = 0;
	}
	if (c->in_cap - c->in_len < READ_CHUNK + 1) {
		size_t cap = c->in_len + READ_CHUNK + 1;
		char *nb = realloc(c->in, cap);

		if (!nb) {
			c->gone = true;
			return;
		}
		c->in = nb;
		c->in_cap = cap;
	}
	n = recv(c->fd, c->in + c->in_len, READ_CHUNK, MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		c->gone = true;
		return;
	}
	c->in_len += n;
	c->peer->in_bytes += n;
	c->t_active = now_us();
	if (!c->t_line)
		c->t_line = c->t_active;
	if (!has_line(c) && c->in_len - c->in_off >= API_MAX_LINE)
		too_long(c);
}

/* Handle up to max complete lines; how many were. */
static unsigned client_lines(struct client *c, unsigned max)
{
	unsigned k = 0;
	char *nl;

	while (k < max && !c->gone && answers_room(c) && has_line(c)) {
		char *line = c->in + c->in_off;
		size_t len;

		nl = memchr(c->in + c->in_scan, '\n', c->in_len - c->in_scan);
		len = nl - line;
		consumed(c, len + 1);
		c->in_scan = c->in_off;
		if (!c->skipping && len) {
			serve_request(c, line, len);
			k++;
		}
		c->skipping = false;
	}
	if (!c->gone && !has_line(c) && c->in_len - c->in_off >= API_MAX_LINE)
		too_long(c);
	if (c->in_off == c->in_len) {
		c->in_off = c->in_scan = c->in_len = 0;
		c->t_line = 0;
		/* Keep the buffer small between requests. */
		if (c->in_cap > 4 * READ_CHUNK) {
			free(c->in);
			c->in = NULL;
			c->in_cap = 0;
		}
	} else if (has_line(c)) {
		c->t_line = 0;		/* whole requests waiting: the wait is ours */
	} else if (!c->t_line) {
		c->t_line = now_us();
	}
	return k;
}

void client_event(struct client *c, uint32_t events)
{
	if (events & EPOLLOUT)
		client_flush(c);
	if (c->gone)
		return;
	if (events & EPOLLIN) {
		client_read(c);
	} else if (events & (EPOLLHUP | EPOLLERR)) {
		/* Not read now (answers or lines wait): a peer gone for good is closed. */
		if (unsent(c))
			client_flush(c);
		else if (!has_line(c))
			c->gone = true;
	}
	client_arm(c);
}

/*
 * One pass over the clients with requests waiting: a few lines each, a
 * few per uid, starting where the last pass stopped. True when some are
 * left for the next pass.
 */
bool clients_pass(void)
{
	struct client *c, *start = srv.rr ? srv.rr : srv.clients;
	struct peer *p;
	bool more = false;

	for (p = srv.peers; p; p = p->next)
		p->lines = 0;
	srv.rr = NULL;
	c = start;
	while (c) {
		if (!c->gone && c->fd >= 0) {
			unsigned room = c->peer->lines < PEER_LINES ? PEER_LINES - c->peer->lines : 0;

			if (room && answers_room(c))
				c->peer->lines += client_lines(c, room < CLIENT_LINES ? room : CLIENT_LINES);
			if (!c->gone && answers_room(c) && has_line(c)) {
				more = true;
				if (!srv.rr)
					srv.rr = c;	/* the next pass starts here */
			}
			client_arm(c);
		}
		c = c->next ? c->next : srv.clients;
		if (c == start)
			break;
	}
	return more;
}

/* ---- connections ---- */

static void client_close(struct client *c)
{
	struct sandbox *sb;
	struct queued *q;

	for (sb = srv.sandboxes; sb; sb = sb->next)
		sb_client_gone(sb, c);
	for (q = srv.queue; q; q = q->next)
		if (q->to.c == c)
			bind_clear(&q->to);
	epoll_ctl(srv.epfd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	c->fd = -1;
}

void clients_reap(void)
{
	struct client **pp = &srv.clients, *c;

	while ((c = *pp)) {
		if (c->gone) {
			*pp = c->next;
			if (srv.rr == c)
				srv.rr = NULL;
			if (c->fd >= 0)
				client_close(c);
			srv.nclients--;
			c->peer->conns--;
			c->peer->in_bytes -= c->in_len - c->in_off;
			c->peer->out_bytes -= unsent(c);
			peer_put(c->peer);
			free(c->in);
			free(c->out);
			free(c);
			continue;
		}
		pp = &c->next;
	}
}

/* A connection not taken: the reason in one line, then closed. */
static void refuse(int fd, const char *fmt, unsigned a, unsigned b)
{
	char msg[200], *l;

	snprintf(msg, sizeof(msg), fmt, a, b);
	l = api_error(NULL, E_BUSY, msg, NULL);
	if (l && send(fd, l, strlen(l), MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
		(void)0;	/* it went already: nothing to tell */
	free(l);
	close(fd);
}

/* Whether a connection of uid may be kept: the cap for all, and its share. */
static bool admit_conn(int fd, uid_t uid, struct peer *p)
{
	unsigned cap = MAX_CLIENTS + (uid == 0 ? ROOT_RESERVE : 0);

	if (srv.nclients >= cap) {
		refuse(fd, "husk serve has %u connections, as many as it takes (%u): try "
		       "again later", srv.nclients, cap);
		return false;
	}
	if (uid != 0 && p->conns >= srv.cfg.uid_max_conns) {
		refuse(fd, "uid %u has %u connections open, its share (uid_max_conns): close "
		       "one first", (unsigned)uid, p->conns);
		return false;
	}
	return true;
}

static bool in_group(uid_t uid, gid_t want)
{
	return want != (gid_t)-1 && account_in_group(uid, want);
}

static void listen_pause(bool pause)
{
	struct epoll_event e = { .events = pause ? 0 : EPOLLIN, .data.ptr = srv.hl };

	if (srv.lfd >= 0 && srv.listen_paused != pause)
		epoll_ctl(srv.epfd, EPOLL_CTL_MOD, srv.lfd, &e);
	srv.listen_paused = pause;
}

static void add_client(int fd, const struct ucred *cr, struct peer *p)
{
	struct client *c = calloc(1, sizeof(*c));
	struct epoll_event e = { .events = EPOLLIN };

	if (!c) {
		close(fd);
		return;
	}
	c->fd = fd;
	c->uid = cr->uid;
	c->gid = cr->gid;
	c->pid = cr->pid;
	c->peer = p;
	c->admin = cr->uid == 0 || in_group(cr->uid, srv.cfg.admin_gid);
	c->t_active = now_us();
	c->h.kind = H_CLIENT;
	c->h.p = c;
	e.data.ptr = &c->h;
	if (epoll_ctl(srv.epfd, EPOLL_CTL_ADD, fd, &e) < 0) {
		close(fd);
		free(c);
		return;
	}
	c->ep_events = EPOLLIN;
	c->next = srv.clients;
	srv.clients = c;
	srv.nclients++;
	p->conns++;
}

void clients_accept(void)
{
	struct ucred cr;
	socklen_t len;
	struct peer *p;
	unsigned k;
	int fd;

	for (k = 0; k < ACCEPTS_PER_PASS; k++) {
		fd = accept4(srv.lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd < 0) {
			/* Out of descriptors: stop listening until the tick (no busy loop). */
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
				listen_pause(true);
			return;
		}
		len = sizeof(cr);
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0) {
			close(fd);
			continue;
		}
		p = peer_get(cr.uid);
		if (!p) {
			close(fd);
			continue;
		}
		if (admit_conn(fd, cr.uid, p))
			add_client(fd, &cr, p);
		peer_put(p);
	}
}

/*
 * The deadlines: a partial request line held past line_timeout, answers
 * not taken for conn_idle, and a connection that has nothing open, created
 * no live session and said nothing for conn_idle.
 */
void clients_tick(uint64_t now)
{
	uint64_t line_us = srv.cfg.line_timeout_s * 1000000ull;
	uint64_t idle_us = srv.cfg.conn_idle_s * 1000000ull;
	struct client *c;
	char msg[160];

	listen_pause(false);
	for (c = srv.clients; c; c = c->next) {
		if (c->gone)
			continue;
		if (line_us && c->t_line && now - c->t_line > line_us) {
			snprintf(msg, sizeof(msg), "a request line did not end within %u s: closing "
				 "the connection", srv.cfg.line_timeout_s);
			client_send(c, api_error(NULL, E_BAD, msg, NULL));
			c->gone = true;
		} else if (idle_us && c->t_stall && now - c->t_stall > idle_us) {
			c->gone = true;
		} else if (idle_us && !c->binds && !c->sessions && !unsent(c) &&
			   c->in_len == c->in_off && now - c->t_active > idle_us) {
			c->gone = true;
		}
	}
}
