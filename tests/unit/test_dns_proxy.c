/*
 * Tests of dns_proxy over loopback (no root): an evloop runs the proxy on
 * 127.0.0.1 with an ephemeral port for the guest 127.0.0.1, a fake resolver
 * thread answers on another one. Checked: an allowed name is answered only
 * after the learn function saw its addresses (TTL floored), and when
 * learning is asynchronous, only once every address was confirmed (a
 * refusal or silence becomes SERVFAIL; at most DNS_PROXY_LEARN_WINDOW
 * requests are outstanding); an unlisted name gets NXDOMAIN without
 * reaching upstream; queries and connections from another source address
 * (127.0.0.2) are dropped unread; upstream sees only the minimal query the
 * proxy builds (fresh ID, RD, one question, no EDNS or other records) and
 * the guest gets its own ID and question back; upstream silence becomes
 * SERVFAIL, spoofed answers (wrong ID, wrong source port) are ignored,
 * malformed answers become SERVFAIL, malformed queries get FORMERR or
 * nothing, TCP works with pipelined queries and drops abusive lengths, and
 * resolv.conf parsing.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "net/dns_proxy.h"
#include "suites.h"
#include "lib/util.h"

enum up_mode { UP_NORMAL, UP_SILENT, UP_SPOOF, UP_BAD, UP_MANY };
#define MANY 40			/* A records in an UP_MANY answer */

/* The fake upstream resolver. */
static struct {
	int fd, alt_fd;			/* alt_fd: same address, another port */
	struct sockaddr_in addr;
	enum up_mode mode;
	atomic_int queries;
	atomic_bool stop;
	pthread_t th;
	pthread_mutex_t lock;
	uint8_t last[1024];		/* the last query as it arrived */
	size_t last_len;
} up;

/*
 * What the learn function saw. ret: what it returns (1 done, 0 pending,
 * < 0 refused); pending tags are confirmed by writing ack_fd, on the loop.
 */
static struct {
	atomic_int calls;
	int ret;
	unsigned n;
	struct dns_addr addr[MANY];
	char name[DNS_NAME_TEXT_MAX];
	pthread_mutex_t lock;
	uint32_t tags[MANY];
	unsigned ntags;
	int ack_fd, ack_status;
} seen;

static struct evloop el;
static struct dns_proxy *proxy;
static struct sockaddr_in proxy_addr;

/* An A answer for query msg (its question up to qend), one address. */
static size_t make_answer(const uint8_t *qmsg, size_t qend, uint16_t id, const uint8_t ip[4],
			  bool bad, unsigned count, uint8_t *out)
{
	size_t n = qend;
	unsigned i;

	memcpy(out, qmsg, qend);
	out[0] = id >> 8;
	out[1] = id & 0xff;
	out[2] = 0x81;		/* QR, RD */
	out[3] = 0x80;		/* RA */
	out[6] = 0;
	out[7] = count;
	out[10] = out[11] = 0;
	for (i = 0; i < count; i++) {
		memcpy(out + n, "\xc0\x0c\x00\x01\x00\x01\x00\x00\x00\x05\x00", 11);
		n += 11;	/* TTL 5 */
		out[n++] = bad ? 5 : 4;
		memcpy(out + n, ip, 4);
		out[n + 3] += i;
		n += 4;
		if (bad)
			out[n++] = 0;
	}
	return n;
}

static void *up_thread(void *arg)
{
	static const uint8_t good[4] = { 10, 0, 0, 1 }, evil[4] = { 6, 6, 6, 6 };
	uint8_t buf[1024], out[2048];

	while (!atomic_load(&up.stop)) {
		struct pollfd pfd = { .fd = up.fd, .events = POLLIN };
		struct sockaddr_in from;
		socklen_t flen = sizeof(from);
		struct dns_query q;
		ssize_t n;
		size_t k;

		if (poll(&pfd, 1, 20) <= 0)
			continue;
		n = recvfrom(up.fd, buf, sizeof(buf), 0, (struct sockaddr *)&from, &flen);
		if (n <= 0)
			continue;
		pthread_mutex_lock(&up.lock);
		memcpy(up.last, buf, n);
		up.last_len = n;
		pthread_mutex_unlock(&up.lock);
		atomic_fetch_add(&up.queries, 1);
		if (up.mode == UP_SILENT || dns_parse_query(buf, n, &q))
			continue;
		if (up.mode == UP_SPOOF) {
			/* Right ID from the wrong port, then wrong ID from the right one. */
			k = make_answer(buf, q.qend, q.id, evil, false, 1, out);
			sendto(up.alt_fd, out, k, 0, (struct sockaddr *)&from, flen);
			k = make_answer(buf, q.qend, q.id ^ 0x5a5a, evil, false, 1, out);
			sendto(up.fd, out, k, 0, (struct sockaddr *)&from, flen);
			usleep(20000);
		}
		k = make_answer(buf, q.qend, q.id, good, up.mode == UP_BAD,
				up.mode == UP_MANY ? MANY : 1, out);
		sendto(up.fd, out, k, 0, (struct sockaddr *)&from, flen);
	}
	return NULL;
}

static int learn_cb(void *arg, uint32_t tag, const char *name, const struct dns_addr *a)
{
	ck_assert_ptr_eq(arg, &seen);
	pthread_mutex_lock(&seen.lock);
	if (seen.n < MANY)
		seen.addr[seen.n++] = *a;
	snprintf(seen.name, sizeof(seen.name), "%s", name);
	if (!seen.ret && seen.ntags < MANY)
		seen.tags[seen.ntags++] = tag;
	pthread_mutex_unlock(&seen.lock);
	atomic_fetch_add(&seen.calls, 1);
	return seen.ret;
}

/* On the loop thread: confirm every pending tag with seen.ack_status. */
static void ack_cb(void *arg, uint32_t events)
{
	uint32_t tags[MANY];
	unsigned i, n;
	uint64_t v;

	ck_assert_int_eq(read(seen.ack_fd, &v, sizeof(v)), sizeof(v));
	pthread_mutex_lock(&seen.lock);
	n = seen.ntags;
	memcpy(tags, seen.tags, n * sizeof(tags[0]));
	seen.ntags = 0;
	pthread_mutex_unlock(&seen.lock);
	for (i = 0; i < n; i++)
		dns_proxy_learned(arg, tags[i], seen.ack_status);
}

static void ack_all(int status)
{
	uint64_t one = 1;

	seen.ack_status = status;
	ck_assert_int_eq(write(seen.ack_fd, &one, sizeof(one)), sizeof(one));
}

static unsigned ntags(void)
{
	unsigned n;

	pthread_mutex_lock(&seen.lock);
	n = seen.ntags;
	pthread_mutex_unlock(&seen.lock);
	return n;
}

static int udp_bound(struct sockaddr_in *sin)
{
	socklen_t len = sizeof(*sin);
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(fd, 0);
	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)sin, sizeof(*sin)), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)sin, &len), 0);
	return fd;
}

static const char *const allow[] = { "*.example.com", "pypi.org." };
static const struct sockaddr_in lo = { .sin_family = AF_INET,
				       .sin_addr = { .s_addr = 0x0100007f } };

static struct dns_proxy *make_proxy(const char *const *list, unsigned n)
{
	struct dns_proxy_cfg cfg = {
		.allow = list, .nallow = n,
		.guest = (const struct sockaddr *)&lo, .guest_len = sizeof(lo),
		.upstream = (const struct sockaddr *)&up.addr, .ulen = sizeof(up.addr),
		.learn = learn_cb, .arg = &seen,
	};
	struct dns_proxy_socks socks;

	ck_assert_msg(dns_proxy_open_socks(&socks, (const struct sockaddr *)&lo, sizeof(lo),
					   (const struct sockaddr *)&up.addr,
					   sizeof(up.addr)) == 0, "%s", husk_lasterr());
	return dns_proxy_new(&el, &socks, &cfg);
}

static void setup(void)
{
	struct sockaddr_in alt;

	memset(&seen, 0, sizeof(seen));
	seen.ret = 1;
	pthread_mutex_init(&seen.lock, NULL);
	pthread_mutex_init(&up.lock, NULL);
	up.mode = UP_NORMAL;
	up.last_len = 0;
	atomic_store(&up.queries, 0);
	atomic_store(&up.stop, false);
	up.fd = udp_bound(&up.addr);
	up.alt_fd = udp_bound(&alt);
	ck_assert_int_eq(pthread_create(&up.th, NULL, up_thread, NULL), 0);

	ck_assert_int_eq(evloop_init(&el), 0);
	proxy = make_proxy(allow, 2);
	ck_assert_msg(proxy != NULL, "%s", husk_lasterr());
	dns_proxy_set_timeouts(proxy, 300, 500);
	proxy_addr = lo;
	proxy_addr.sin_port = htons(dns_proxy_port(proxy));
	ck_assert_uint_ne(dns_proxy_port(proxy), 0);
	seen.ack_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	ck_assert_int_ge(seen.ack_fd, 0);
	ck_assert_int_eq(evloop_add(&el, seen.ack_fd, EPOLLIN, ack_cb, proxy), 0);
	ck_assert_int_eq(evloop_start(&el), 0);
}

static void teardown(void)
{
	evloop_stop(&el);
	evloop_del(&el, seen.ack_fd);
	close(seen.ack_fd);
	dns_proxy_free(proxy);
	evloop_free(&el);
	atomic_store(&up.stop, true);
	pthread_join(up.th, NULL);
	close(up.fd);
	close(up.alt_fd);
}

/* A query for name/A with id; returns its length. */
static size_t make_query(uint8_t *b, uint16_t id, const char *name)
{
	size_t n = DNS_HDR_LEN;

	memset(b, 0, DNS_HDR_LEN);
	b[0] = id >> 8;
	b[1] = id & 0xff;
	b[2] = 0x01;		/* RD */
	b[5] = 1;
	while (*name) {
		const char *dot = strchr(name, '.');
		size_t l = dot ? (size_t)(dot - name) : strlen(name);

		b[n++] = l;
		memcpy(b + n, name, l);
		n += l;
		name += l + (dot ? 1 : 0);
	}
	memcpy(b + n, "\0\0\1\0\1", 5);
	return n + 5;
}

/* A client socket from src (NULL: the guest, 127.0.0.1) to the proxy. */
static int client_from(int type, int timeout_ms, const char *src)
{
	struct timeval tv = { timeout_ms / 1000, timeout_ms % 1000 * 1000 };
	struct sockaddr_in from = { .sin_family = AF_INET };
	int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(fd, 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (src) {
		ck_assert_int_eq(inet_pton(AF_INET, src, &from.sin_addr), 1);
		ck_assert_int_eq(bind(fd, (struct sockaddr *)&from, sizeof(from)), 0);
	}
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&proxy_addr, sizeof(proxy_addr)), 0);
	return fd;
}

static int client(int type, int timeout_ms)
{
	return client_from(type, timeout_ms, NULL);
}

/* Send raw bytes over UDP; the answer's length, or -1 on timeout. */
static ssize_t udp_raw(const uint8_t *q, size_t qlen, uint8_t *resp, int timeout_ms)
{
	int fd = client(SOCK_DGRAM, timeout_ms);
	ssize_t n;

	ck_assert_int_eq(send(fd, q, qlen, 0), (ssize_t)qlen);
	n = recv(fd, resp, 4096, 0);
	close(fd);
	return n;
}

static ssize_t udp_query(const char *name, uint16_t id, uint8_t *resp)
{
	uint8_t q[512];

	return udp_raw(q, make_query(q, id, name), resp, 3000);
}

static unsigned rcode(const uint8_t *r)
{
	return r[3] & 0xf;
}

static unsigned get16(const uint8_t *p)
{
	return p[0] << 8 | p[1];
}

START_TEST(allowed_name)
{
	struct dns_proxy_stats st;
	uint8_t r[4096];
	ssize_t n = udp_query("www.Example.com", 0x4242, r);

	ck_assert_int_gt(n, DNS_HDR_LEN);
	/* The filter was told before the guest could see the answer. */
	ck_assert_int_eq(atomic_load(&seen.calls), 1);
	ck_assert_uint_eq(get16(r), 0x4242);
	ck_assert_uint_eq(rcode(r), 0);
	ck_assert_uint_eq(get16(r + 6), 1);
	ck_assert_mem_eq(r + n - 4, "\x0a\x00\x00\x01", 4);
	ck_assert_str_eq(seen.name, "www.example.com");
	ck_assert_uint_eq(seen.n, 1);
	ck_assert_int_eq(seen.addr[0].family, AF_INET);
	ck_assert_mem_eq(seen.addr[0].addr, "\x0a\x00\x00\x01", 4);
	ck_assert_uint_eq(seen.addr[0].ttl, DNS_PROXY_MIN_TTL);
	/* Exact entry with its trailing dot in the allowlist. */
	ck_assert_int_gt(udp_query("pypi.org", 1, r), 0);
	ck_assert_uint_eq(rcode(r), 0);
	ck_assert_int_eq(atomic_load(&up.queries), 2);
	dns_proxy_get_stats(proxy, &st);
	ck_assert_uint_eq(st.queries, 2);
	ck_assert_uint_eq(st.allowed, 2);
	ck_assert_uint_eq(st.refused + st.failed + st.malformed + st.spoofed, 0);
}
END_TEST

START_TEST(refused_name)
{
	struct dns_proxy_stats st;
	char name[DNS_NAME_TEXT_MAX];
	uint8_t r[4096];

	ck_assert_int_gt(udp_query("evil.org", 7, r), 0);
	ck_assert_uint_eq(get16(r), 7);
	ck_assert_uint_eq(rcode(r), DNS_RCODE_NXDOMAIN);
	ck_assert_uint_eq(get16(r + 4), 1);
	ck_assert_int_gt(udp_query("evil.org", 8, r), 0);
	/* The bare suffix and a look-alike are not under *.example.com. */
	ck_assert_int_gt(udp_query("example.com", 9, r), 0);
	ck_assert_uint_eq(rcode(r), DNS_RCODE_NXDOMAIN);
	ck_assert_int_gt(udp_query("evil-example.com", 10, r), 0);
	ck_assert_uint_eq(rcode(r), DNS_RCODE_NXDOMAIN);
	ck_assert_int_eq(atomic_load(&up.queries), 0);
	ck_assert_int_eq(atomic_load(&seen.calls), 0);
	dns_proxy_get_stats(proxy, &st);
	ck_assert_uint_eq(st.queries, 4);
	ck_assert_uint_eq(st.refused, 4);
	ck_assert_uint_eq(st.allowed, 0);
	ck_assert_int_eq(dns_proxy_refused(proxy, 0, name, sizeof(name)), 0);
	ck_assert_str_eq(name, "evil.org");
	ck_assert_int_eq(dns_proxy_refused(proxy, 1, name, sizeof(name)), 0);
	ck_assert_str_eq(name, "example.com");
	ck_assert_int_eq(dns_proxy_refused(proxy, 2, name, sizeof(name)), 0);
	ck_assert_str_eq(name, "evil-example.com");
	ck_assert_int_eq(dns_proxy_refused(proxy, 3, name, sizeof(name)), -ENOENT);
}
END_TEST

START_TEST(upstream_timeout)
{
	struct dns_proxy_stats st;
	uint8_t r[4096];
	uint64_t t0;

	up.mode = UP_SILENT;
	t0 = now_us();
	ck_assert_int_gt(udp_query("a.example.com", 3, r), 0);
	ck_assert_uint_ge(now_us() - t0, 250000);
	ck_assert_uint_eq(get16(r), 3);
	ck_assert_uint_eq(rcode(r), DNS_RCODE_SERVFAIL);
	ck_assert_int_eq(atomic_load(&seen.calls), 0);
	dns_proxy_get_stats(proxy, &st);
	ck_assert_uint_eq(st.failed, 1);
	ck_assert_uint_eq(st.allowed, 1);
}
END_TEST

START_TEST(spoofed_answers)
{
	struct dns_proxy_stats st;
	uint8_t r[4096];
	ssize_t n;

	up.mode = UP_SPOOF;
	n = udp_query("a.example.com", 0x0102, r);
	ck_assert_int_gt(n, 0);
	ck_assert_uint_eq(rcode(r), 0);
	ck_assert_mem_eq(r + n - 4, "\x0a\x00\x00\x01", 4);
	ck_assert_int_eq(atomic_load(&seen.calls), 1);
	ck_assert_mem_eq(seen.addr[0].addr, "\x0a\x00\x00\x01", 4);
	dns_proxy_get_stats(proxy, &st);
	/* The wrong-port one never got past the connected socket. */
	ck_assert_uint_eq(st.spoofed, 1);
	ck_assert_uint_eq(st.failed, 0);
}
END_TEST

START_TEST(bad_answer)
{
	uint8_t r[4096];

	up.mode = UP_BAD;
	ck_assert_int_gt(udp_query("a.example.com", 5, r), 0);
	ck_assert_uint_eq(rcode(r), DNS_RCODE_SERVFAIL);
	ck_assert_uint_eq(get16(r + 6), 0);
	ck_assert_int_eq(atomic_load(&seen.calls), 0);
}
END_TEST

START_TEST(callback_fails)
{
	uint8_t r[4096];

	seen.ret = -ENOSPC;
	ck_assert_int_gt(udp_query("a.example.com", 5, r), 0);
	ck_assert_uint_eq(rcode(r), DNS_RCODE_SERVFAIL);
	ck_assert_uint_eq(get16(r + 6), 0);
	ck_assert_int_eq(atomic_load(&seen.calls), 1);
}
END_TEST

START_TEST(malformed_queries)
{
	struct dns_proxy_stats st;
	uint8_t q[512], r[4096];
	size_t n;

	ck_assert_int_lt(udp_raw((const uint8_t *)"\1\2\3\4\5", 5, r, 200), 0);
	n = make_query(q, 0x77, "a.example.com");
	q[5] = 2;		/* qdcount 2 */
	ck_assert_int_eq(udp_raw(q, n, r, 2000), DNS_HDR_LEN);
	ck_assert_uint_eq(get16(r), 0x77);
	ck_assert_uint_eq(rcode(r), DNS_RCODE_FORMERR);
	q[5] = 1;
	q[2] |= 0x80;		/* an answer: never replied to */
	ck_assert_int_lt(udp_raw(q, n, r, 200), 0);
	q[2] = 2 << 3;		/* opcode STATUS */
	ck_assert_int_eq(udp_raw(q, n, r, 2000), DNS_HDR_LEN);
	ck_assert_uint_eq(rcode(r), DNS_RCODE_NOTIMP);
	ck_assert_int_eq(atomic_load(&up.queries), 0);
	dns_proxy_get_stats(proxy, &st);
	ck_assert_uint_eq(st.malformed, 4);
	ck_assert_uint_eq(st.queries, 0);
}
END_TEST

static void read_full(int fd, uint8_t *b, size_t n)
{
	while (n) {
		ssize_t k = recv(fd, b, n, 0);

		ck_assert_int_gt(k, 0);
		b += k;
		n -= k;
	}
}

START_TEST(tcp_queries)
{
	uint8_t q[2 + 512], r[4096];
	int fd = client(SOCK_STREAM, 3000), i, ok = 0, nx = 0;
	size_t n, m;

	/* Two pipelined queries in one write: an allowed and a refused one. */
	n = make_query(q + 2, 0x1001, "www.example.com");
	q[0] = 0;
	q[1] = n;
	m = make_query(q + 4 + n, 0x1002, "evil.org");
	q[2 + n] = 0;
	q[3 + n] = m;
	ck_assert_int_eq(send(fd, q, 4 + n + m, 0), (ssize_t)(4 + n + m));
	for (i = 0; i < 2; i++) {
		read_full(fd, r, 2);
		n = get16(r);
		ck_assert_uint_ge(n, DNS_HDR_LEN);
		read_full(fd, r, n);
		if (get16(r) == 0x1001) {
			ck_assert_uint_eq(rcode(r), 0);
			ck_assert_mem_eq(r + n - 4, "\x0a\x00\x00\x01", 4);
			ck_assert_int_eq(atomic_load(&seen.calls), 1);
			ok++;
		} else {
			ck_assert_uint_eq(get16(r), 0x1002);
			ck_assert_uint_eq(rcode(r), DNS_RCODE_NXDOMAIN);
			nx++;
		}
	}
	ck_assert_int_eq(ok, 1);
	ck_assert_int_eq(nx, 1);
	/* Idle past the timeout: the proxy hangs up. */
	ck_assert_int_eq(recv(fd, r, sizeof(r), 0), 0);
	close(fd);
}
END_TEST

START_TEST(tcp_abuse)
{
	uint8_t r[16];
	int fd = client(SOCK_STREAM, 3000);
	ssize_t n;

	/*
	 * A 65535-byte "query": not buffered, the connection is closed (reset,
	 * as bytes we never read are left behind). No timeout: closed at once.
	 */
	ck_assert_int_eq(send(fd, "\xff\xff\0\0", 4, 0), 4);
	n = recv(fd, r, sizeof(r), 0);
	ck_assert_msg(n == 0 || (n < 0 && errno == ECONNRESET), "recv: %zd %s", n,
		      strerror(errno));
	close(fd);
}
END_TEST

START_TEST(bad_allowlist)
{
	static const char *const bad[] = { "ok.com", "bad name" };

	ck_assert_ptr_null(make_proxy(bad, 2));
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "bad name"));
}
END_TEST

/* ---- only the guest, and only our own query upstream ---- */

START_TEST(foreign_source)
{
	struct dns_proxy_stats st;
	uint8_t q[512], r[4096];
	size_t n = make_query(q, 0x3131, "www.example.com");
	int fd;

	/* Another host address (here 127.0.0.2): never answered, never forwarded. */
	fd = client_from(SOCK_DGRAM, 300, "127.0.0.2");
	ck_assert_int_eq(send(fd, q, n, 0), (ssize_t)n);
	ck_assert_int_lt(recv(fd, r, sizeof(r), 0), 0);
	close(fd);
	/* Its TCP connection is accepted and closed at once, unread. */
	fd = client_from(SOCK_STREAM, 2000, "127.0.0.2");
	ck_assert_int_le(recv(fd, r, sizeof(r), 0), 0);
	close(fd);
	ck_assert_int_eq(atomic_load(&up.queries), 0);
	ck_assert_int_eq(atomic_load(&seen.calls), 0);
	dns_proxy_get_stats(proxy, &st);
	ck_assert_uint_eq(st.foreign, 2);
	ck_assert_uint_eq(st.queries + st.malformed, 0);
	/* The guest itself still is. */
	ck_assert_int_gt(udp_query("www.example.com", 5, r), 0);
	ck_assert_uint_eq(rcode(r), 0);
}
END_TEST

START_TEST(minimal_query_upstream)
{
	uint8_t q[512], r[4096], want[64], got[1024];
	size_t n = DNS_HDR_LEN, wlen, glen;
	ssize_t k;

	/* ID 0xabcd, flags: RD clear, AD, CD and the Z bit set. */
	memcpy(q, "\xab\xcd\x00\x70\x00\x01\x00\x00\x00\x00\x00\x02", 12);
	memcpy(q + n, "\3WwW\7ExAmPlE\3cOm\0\0\1\0\1", 21);
	n += 21;
	/* EDNS with a DO bit and an option, then a stray TXT record. */
	memcpy(q + n, "\0\0\x29\x10\0\0\0\x80\0\0\4\0\x0a\0\0", 15);
	n += 15;
	memcpy(q + n, "\1x\0\0\x10\0\1\0\0\0\0\0\2\1z", 15);
	n += 15;
	k = udp_raw(q, n, r, 3000);
	ck_assert_int_gt(k, 12 + 21);
	pthread_mutex_lock(&up.lock);
	glen = up.last_len;
	memcpy(got, up.last, glen);
	pthread_mutex_unlock(&up.lock);
	/* Upstream: our ID, RD only, one question in lower case, nothing else. */
	memcpy(want, "\0\0\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00", 12);
	memcpy(want + 12, "\3www\7example\3com\0\0\1\0\1", 21);
	wlen = 33;
	ck_assert_uint_eq(glen, wlen);
	ck_assert_mem_eq(got + 2, want + 2, wlen - 2);
	ck_assert_uint_ne(get16(got), 0xabcd);	/* a fresh ID (1 in 65536 to fail) */
	/* The guest: its ID, its question as it spelled it, its RD (clear). */
	ck_assert_uint_eq(get16(r), 0xabcd);
	ck_assert_uint_eq(r[2] & 0x81, 0x80);
	ck_assert_uint_eq(rcode(r), 0);
	ck_assert_mem_eq(r + 4, "\0\1\0\1", 4);
	ck_assert_mem_eq(r + 12, q + 12, 21);
	ck_assert_mem_eq(r + k - 4, "\x0a\x00\x00\x01", 4);
}
END_TEST

/* ---- answers held until the filter confirmed their addresses ---- */

static ssize_t recv_within(int fd, uint8_t *r, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	if (poll(&p, 1, ms) <= 0)
		return -1;
	return recv(fd, r, 4096, 0);
}

START_TEST(held_until_confirmed)
{
	struct dns_proxy_stats st;
	uint8_t q[512], r[4096];
	size_t n = make_query(q, 0x5151, "www.example.com");
	int fd = client(SOCK_DGRAM, 3000);

	dns_proxy_set_timeouts(proxy, 2000, 500);
	seen.ret = 0;		/* pending: confirmed by ack_all() */
	ck_assert_int_eq(send(fd, q, n, 0), (ssize_t)n);
	/* Upstream answered and the proxy asked; the guest still has nothing. */
	ck_assert_int_lt(recv_within(fd, r, 300), 0);
	ck_assert_int_eq(atomic_load(&seen.calls), 1);
	ck_assert_uint_eq(ntags(), 1);
	ack_all(0);
	ck_assert_int_gt(recv_within(fd, r, 2000), DNS_HDR_LEN);
	ck_assert_uint_eq(get16(r), 0x5151);
	ck_assert_uint_eq(rcode(r), 0);
	/* Refused: SERVFAIL, counted as withheld. */
	n = make_query(q, 0x5252, "www.example.com");
	ck_assert_int_eq(send(fd, q, n, 0), (ssize_t)n);
	while (!ntags())
		usleep(1000);
	ack_all(-EDQUOT);
	ck_assert_int_gt(recv_within(fd, r, 2000), DNS_HDR_LEN);
	ck_assert_uint_eq(get16(r), 0x5252);
	ck_assert_uint_eq(rcode(r), DNS_RCODE_SERVFAIL);
	ck_assert_uint_eq(get16(r + 6), 0);
	dns_proxy_get_stats(proxy, &st);
	ck_assert_uint_eq(st.withheld, 1);
	ck_assert_uint_eq(st.failed, 1);
	close(fd);
}
END_TEST

START_TEST(never_confirmed)
{
	uint8_t q[512], r[4096];
	size_t n = make_query(q, 0x6161, "www.example.com");
	int fd = client(SOCK_DGRAM, 3000);
	uint64_t t0 = now_us();
	uint32_t stale;

	seen.ret = 0;
	ck_assert_int_eq(send(fd, q, n, 0), (ssize_t)n);
	/* Nobody confirms: SERVFAIL at the query's deadline (300 ms here). */
	ck_assert_int_gt(recv_within(fd, r, 2000), DNS_HDR_LEN);
	ck_assert_uint_ge(now_us() - t0, 250000);
	ck_assert_uint_eq(rcode(r), DNS_RCODE_SERVFAIL);
	/* A late confirmation for it releases nothing, not even the next query's. */
	pthread_mutex_lock(&seen.lock);
	stale = seen.tags[0];
	pthread_mutex_unlock(&seen.lock);
	n = make_query(q, 0x6262, "www.example.com");
	ck_assert_int_eq(send(fd, q, n, 0), (ssize_t)n);
	while (ntags() < 2)
		usleep(1000);
	pthread_mutex_lock(&seen.lock);
	seen.tags[1] = stale;	/* confirm only the stale tag */
	pthread_mutex_unlock(&seen.lock);
	ack_all(0);
	ck_assert_int_gt(recv_within(fd, r, 2000), DNS_HDR_LEN);
	ck_assert_uint_eq(get16(r), 0x6262);
	ck_assert_uint_eq(rcode(r), DNS_RCODE_SERVFAIL);
	close(fd);
}
END_TEST

START_TEST(learn_window)
{
	uint8_t q[512], r[4096];
	size_t n = make_query(q, 0x7171, "www.example.com");
	int fd = client(SOCK_DGRAM, 3000), i;
	ssize_t k;

	dns_proxy_set_timeouts(proxy, 3000, 500);
	up.mode = UP_MANY;
	seen.ret = 0;
	ck_assert_int_eq(send(fd, q, n, 0), (ssize_t)n);
	/* 40 addresses: only the window's worth asked for at first. */
	for (i = 0; i < 200 && ntags() < DNS_PROXY_LEARN_WINDOW; i++)
		usleep(2000);
	usleep(50000);
	ck_assert_uint_eq(ntags(), DNS_PROXY_LEARN_WINDOW);
	ck_assert_int_eq(atomic_load(&seen.calls), DNS_PROXY_LEARN_WINDOW);
	ack_all(0);
	for (i = 0; i < 200 && ntags() < MANY - DNS_PROXY_LEARN_WINDOW; i++)
		usleep(2000);
	ck_assert_int_lt(recv_within(fd, r, 50), 0);	/* 8 still unconfirmed */
	ck_assert_uint_eq(ntags(), MANY - DNS_PROXY_LEARN_WINDOW);
	ack_all(0);
	k = recv_within(fd, r, 2000);
	ck_assert_int_gt(k, DNS_HDR_LEN);
	ck_assert_uint_eq(get16(r + 6), MANY);
	ck_assert_int_eq(atomic_load(&seen.calls), MANY);
	for (i = 0; i < MANY; i++)
		ck_assert_uint_eq(seen.addr[i].addr[3], 1 + i);
	close(fd);
}
END_TEST

START_TEST(resolv_conf)
{
	char path[] = "/tmp/husk-resolv-XXXXXX";
	struct sockaddr_storage ss;
	struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
	socklen_t len;
	int fd = mkstemp(path);
	FILE *f;

	ck_assert_int_ge(fd, 0);
	f = fdopen(fd, "w");
	fputs("# comment\nsearch lan\n  nameserver 127.0.0.53 # stub\nnameserver 9.9.9.9\n", f);
	fclose(f);
	ck_assert_int_eq(dns_resolv_conf_upstream(path, &ss, &len), 0);
	ck_assert_int_eq(ss.ss_family, AF_INET);
	ck_assert_uint_eq(len, sizeof(*s4));
	ck_assert_uint_eq(ntohl(s4->sin_addr.s_addr), 0x7f000035);
	ck_assert_uint_eq(ntohs(s4->sin_port), 53);

	f = fopen(path, "w");
	fputs("nameserver ::1\n", f);
	fclose(f);
	ck_assert_int_eq(dns_resolv_conf_upstream(path, &ss, &len), 0);
	ck_assert_int_eq(ss.ss_family, AF_INET6);
	ck_assert(IN6_IS_ADDR_LOOPBACK(&s6->sin6_addr));

	f = fopen(path, "w");
	fputs("search lan\n", f);
	fclose(f);
	ck_assert_int_eq(dns_resolv_conf_upstream(path, &ss, &len), -ENOENT);
	f = fopen(path, "w");
	fputs("nameserver fe80::1%eth0\n", f);
	fclose(f);
	ck_assert_int_eq(dns_resolv_conf_upstream(path, &ss, &len), -EINVAL);
	unlink(path);
	ck_assert_int_eq(dns_resolv_conf_upstream(path, &ss, &len), -ENOENT);
}
END_TEST

Suite *dns_proxy_suite(void)
{
	Suite *s = suite_create("dns_proxy");
	TCase *tc = tcase_create("loopback");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 10);
	tcase_add_test(tc, allowed_name);
	tcase_add_test(tc, refused_name);
	tcase_add_test(tc, upstream_timeout);
	tcase_add_test(tc, spoofed_answers);
	tcase_add_test(tc, bad_answer);
	tcase_add_test(tc, callback_fails);
	tcase_add_test(tc, malformed_queries);
	tcase_add_test(tc, tcp_queries);
	tcase_add_test(tc, tcp_abuse);
	tcase_add_test(tc, bad_allowlist);
	tcase_add_test(tc, foreign_source);
	tcase_add_test(tc, minimal_query_upstream);
	tcase_add_test(tc, held_until_confirmed);
	tcase_add_test(tc, never_confirmed);
	tcase_add_test(tc, learn_window);
	tcase_add_test(tc, resolv_conf);
	suite_add_tcase(s, tc);
	return s;
}
