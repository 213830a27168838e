/*
 * Tests of dns_proxy over loopback (no root): an evloop runs the proxy on
 * 127.0.0.1 with an ephemeral port, a fake resolver thread answers on
 * another one. Checked: an allowed name is answered only after the address
 * callback saw its addresses (TTL floored), an unlisted name gets NXDOMAIN
 * without reaching upstream, upstream silence becomes SERVFAIL, spoofed
 * answers (wrong ID, wrong source port) are ignored, malformed answers and
 * a failing callback become SERVFAIL, malformed queries get FORMERR or
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
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "dns_proxy.h"
#include "suites.h"
#include "util.h"

enum up_mode { UP_NORMAL, UP_SILENT, UP_SPOOF, UP_BAD };

/* The fake upstream resolver. */
static struct {
	int fd, alt_fd;			/* alt_fd: same address, another port */
	struct sockaddr_in addr;
	enum up_mode mode;
	atomic_int queries;
	atomic_bool stop;
	pthread_t th;
} up;

/* What the address callback saw. */
static struct {
	atomic_int calls;
	int ret;
	unsigned n;
	struct dns_addr addr[DNS_ADDR_MAX];
	char name[DNS_NAME_TEXT_MAX];
} seen;

static struct evloop el;
static struct dns_proxy *proxy;
static struct sockaddr_in proxy_addr;

/* An A answer for query msg (its question up to qend), one address. */
static size_t make_answer(const uint8_t *qmsg, size_t qend, uint16_t id, const uint8_t ip[4],
			  bool bad, uint8_t *out)
{
	size_t n = qend;

	memcpy(out, qmsg, qend);
	out[0] = id >> 8;
	out[1] = id & 0xff;
	out[2] = 0x81;		/* QR, RD */
	out[3] = 0x80;		/* RA */
	out[6] = 0;
	out[7] = 1;		/* one answer */
	out[10] = out[11] = 0;
	memcpy(out + n, "\xc0\x0c\x00\x01\x00\x01\x00\x00\x00\x05\x00", 11);	/* TTL 5 */
	n += 11;
	out[n++] = bad ? 5 : 4;
	memcpy(out + n, ip, 4);
	n += 4;
	if (bad)
		out[n++] = 0;
	return n;
}

static void *up_thread(void *arg)
{
	static const uint8_t good[4] = { 10, 0, 0, 1 }, evil[4] = { 6, 6, 6, 6 };
	uint8_t buf[1024], out[1200];

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
		atomic_fetch_add(&up.queries, 1);
		if (up.mode == UP_SILENT || dns_parse_query(buf, n, &q))
			continue;
		if (up.mode == UP_SPOOF) {
			/* Right ID from the wrong port, then wrong ID from the right one. */
			k = make_answer(buf, q.qend, q.id, evil, false, out);
			sendto(up.alt_fd, out, k, 0, (struct sockaddr *)&from, flen);
			k = make_answer(buf, q.qend, q.id ^ 0x5a5a, evil, false, out);
			sendto(up.fd, out, k, 0, (struct sockaddr *)&from, flen);
			usleep(20000);
		}
		k = make_answer(buf, q.qend, q.id, good, up.mode == UP_BAD, out);
		sendto(up.fd, out, k, 0, (struct sockaddr *)&from, flen);
	}
	return NULL;
}

static int addr_cb(void *arg, const char *name, const struct dns_addr *a, unsigned n)
{
	ck_assert_ptr_eq(arg, &seen);
	seen.n = n;
	memcpy(seen.addr, a, n * sizeof(*a));
	snprintf(seen.name, sizeof(seen.name), "%s", name);
	atomic_fetch_add(&seen.calls, 1);
	return seen.ret;
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

static void setup(void)
{
	static const char *const allow[] = { "*.example.com", "pypi.org." };
	struct sockaddr_in any = { .sin_family = AF_INET };
	struct sockaddr_in alt;

	memset(&seen, 0, sizeof(seen));
	up.mode = UP_NORMAL;
	atomic_store(&up.queries, 0);
	atomic_store(&up.stop, false);
	up.fd = udp_bound(&up.addr);
	up.alt_fd = udp_bound(&alt);
	ck_assert_int_eq(pthread_create(&up.th, NULL, up_thread, NULL), 0);

	ck_assert_int_eq(evloop_init(&el), 0);
	any.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	proxy = dns_proxy_new(&el, (struct sockaddr *)&any, sizeof(any), allow, 2,
			      (struct sockaddr *)&up.addr, sizeof(up.addr), addr_cb, &seen);
	ck_assert_msg(proxy != NULL, "%s", husk_lasterr());
	dns_proxy_set_timeouts(proxy, 300, 500);
	proxy_addr = any;
	proxy_addr.sin_port = htons(dns_proxy_port(proxy));
	ck_assert_uint_ne(dns_proxy_port(proxy), 0);
	ck_assert_int_eq(evloop_start(&el), 0);
}

static void teardown(void)
{
	evloop_stop(&el);
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

static int client(int type, int timeout_ms)
{
	struct timeval tv = { timeout_ms / 1000, timeout_ms % 1000 * 1000 };
	int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(fd, 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&proxy_addr, sizeof(proxy_addr)), 0);
	return fd;
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
	static const char *const allow[] = { "ok.com", "bad name" };
	struct sockaddr_in any = { .sin_family = AF_INET };

	any.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_ptr_null(dns_proxy_new(&el, (struct sockaddr *)&any, sizeof(any), allow, 2,
					 (struct sockaddr *)&up.addr, sizeof(up.addr),
					 addr_cb, &seen));
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "bad name"));
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
	tcase_add_test(tc, resolv_conf);
	suite_add_tcase(s, tc);
	return s;
}
