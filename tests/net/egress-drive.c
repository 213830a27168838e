/*
 * egress-drive: the guest side of tests/net/egress.test.
 *
 * Run inside the test's "host" network namespace, whose veth leads to a
 * fake internet namespace (tests/net/fake-internet.py: HTTP on port 8080
 * everywhere, UDP sinks on port 9999, a DNS server at 203.0.113.53). It sets
 * up what husk run --net egress sets up for slot 0 - the tap husk0 with
 * 10.200.0.1/30 towards the guest 10.200.0.2, the egress filter with rules,
 * the host's own addresses denied, the DNS proxy at the gateway in its
 * confined helper process (dns_helper.h), opening the filter through the
 * supervisor's side (dns_learn.h) for the names it lets through - and then
 * acts as the guest: it writes bare Ethernet frames into the tap fd, as a
 * VMM does, and reads what comes back. A minimal TCP client fetches
 * pages over it.
 *
 * Checked here: allowed TCP/UDP reach the fake internet and are answered;
 * denied destinations, spoofed sources, the host's own address (also one
 * it gains while the "VM" runs), DNS past the gateway are dropped and
 * counted by reason; a name on the allowlist
 * opens its address only after it was resolved, others get NXDOMAIN; the
 * first-denied log and the host->guest counters; the proxy runs in another
 * process, not as root, under seccomp, and ignores queries from any other
 * source than the guest; a flood of new flows fires
 * the anomaly event and cuts the VM off. What the sinks receive is checked
 * by the shell script afterwards (payloads of dropped datagrams must not be
 * there).
 *
 * Exit 0 on success, 1 on a failure, 77 when the filter cannot be loaded.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "net/dns_helper.h"
#include "net/dns_learn.h"
#include "net/egress.h"
#include "sandbox/jail.h"
#include "net/netlink.h"
#include "net/netpool.h"
#include "../proc_status.h"
#include "net/tap.h"
#include "lib/util.h"

#define L2		14
#define SERVER		"203.0.113.10"	/* opened by an --allow rule */
#define NAMED		"203.0.113.20"	/* www.allowed.test */
#define DENIED		"198.51.100.20"	/* no rule at all */
#define RESOLVER	"203.0.113.53"
#define PEER		"192.0.2.2"	/* the fake internet's veth end */
#define HOSTADDR	"192.0.2.1"	/* this namespace's own veth end */
#define LATEADDR	"192.0.2.77"	/* given to the host once the "VM" runs */
#define CONN_RATE	30
#define FLOOD		100

static int tap_fd, ifindex, watch_fd, passed, failed, nevents;
static struct netpool_lease lease;
static uint8_t host_mac[6];
static struct egress_event last_event;

static void check(bool ok, const char *fmt, ...)
{
	va_list ap;

	printf(ok ? "ok   - " : "FAIL - ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	if (ok)
		passed++;
	else
		failed++;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void put16(uint8_t *p, uint16_t v) { p[0] = v >> 8; p[1] = v; }
static void put32(uint8_t *p, uint32_t v) { put16(p, v >> 16); put16(p + 2, v); }
static uint16_t get16(const uint8_t *p) { return p[0] << 8 | p[1]; }
static uint32_t get32(const uint8_t *p) { return (uint32_t)get16(p) << 16 | get16(p + 2); }

static uint32_t sum16(const uint8_t *p, size_t len, uint32_t s)
{
	size_t i;

	for (i = 0; i + 1 < len; i += 2)
		s += p[i] << 8 | p[i + 1];
	if (len & 1)
		s += p[len - 1] << 8;
	return s;
}

static uint16_t fold(uint32_t s)
{
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return ~s & 0xffff;
}

static struct in_addr ip(const char *s)
{
	struct in_addr a;

	inet_pton(AF_INET, s, &a);
	return a;
}

/*
 * One IPv4 frame from the guest (source src) to dst carrying the L4 segment
 * l4 (its checksum field filled here for TCP/UDP). Returns 0 if the tap
 * took it.
 */
static int send_ip(struct in_addr src, struct in_addr dst, uint8_t proto,
		   uint8_t *l4, size_t l4len)
{
	uint8_t f[2048], *iph = f + L2, pseudo[12];
	size_t len = L2 + 20 + l4len;
	int csum_off = proto == IPPROTO_TCP ? 16 : proto == IPPROTO_UDP ? 6 : -1;

	if (len > sizeof(f))
		return -1;
	memset(f, 0, L2 + 20);
	memcpy(f, host_mac, 6);
	memcpy(f + 6, lease.mac, 6);
	put16(f + 12, 0x0800);
	iph[0] = 0x45;
	put16(iph + 2, 20 + l4len);
	iph[6] = 0x40;		/* DF */
	iph[8] = 64;
	iph[9] = proto;
	memcpy(iph + 12, &src, 4);
	memcpy(iph + 16, &dst, 4);
	put16(iph + 10, fold(sum16(iph, 20, 0)));
	if (csum_off >= 0) {
		memcpy(pseudo, &src, 4);
		memcpy(pseudo + 4, &dst, 4);
		pseudo[8] = 0;
		pseudo[9] = proto;
		put16(pseudo + 10, l4len);
		put16(l4 + csum_off, 0);
		put16(l4 + csum_off, fold(sum16(l4, l4len, sum16(pseudo, 12, 0))));
	}
	memcpy(iph + 20, l4, l4len);
	return write(tap_fd, f, len) == (ssize_t)len ? 0 : -1;
}

static int send_udp(struct in_addr src, const char *dst, uint16_t sport, uint16_t dport,
		    const void *data, size_t n)
{
	uint8_t u[1600];

	put16(u, sport);
	put16(u + 2, dport);
	put16(u + 4, 8 + n);
	memcpy(u + 8, data, n);
	return send_ip(src, ip(dst), IPPROTO_UDP, u, 8 + n);
}

#define TCP_FIN 0x01
#define TCP_SYN 0x02
#define TCP_RST 0x04
#define TCP_PSH 0x08
#define TCP_ACK 0x10

static int send_tcp(struct in_addr dst, uint16_t sport, uint16_t dport, uint32_t seq,
		    uint32_t ack, uint8_t flags, const void *data, size_t n)
{
	uint8_t t[1600];

	memset(t, 0, 20);
	put16(t, sport);
	put16(t + 2, dport);
	put32(t + 4, seq);
	put32(t + 8, ack);
	t[12] = 5 << 4;
	t[13] = flags;
	put16(t + 14, 65535);
	memcpy(t + 20, data, n);
	return send_ip(lease.guest, dst, IPPROTO_TCP, t, 20 + n);
}

/* The host asks for the guest's MAC now and then: answer like a guest. */
static void answer_arp(const uint8_t *f, size_t n)
{
	const uint8_t *a = f + L2;
	uint8_t r[L2 + 28], *o = r + L2;

	if (n < L2 + 28 || get16(f + 12) != 0x0806 || get16(a + 6) != 1 ||
	    memcmp(a + 24, &lease.guest, 4))
		return;
	memset(r, 0, sizeof(r));
	memcpy(r, a + 8, 6);
	memcpy(r + 6, lease.mac, 6);
	put16(r + 12, 0x0806);
	memcpy(o, a, 6);		/* htype, ptype, hlen, plen */
	put16(o + 6, 2);
	memcpy(o + 8, lease.mac, 6);
	memcpy(o + 14, &lease.guest, 4);
	memcpy(o + 18, a + 8, 10);	/* their MAC and IP */
	if (write(tap_fd, r, sizeof(r)) != (ssize_t)sizeof(r))
		printf("note: ARP answer not written: %s\n", strerror(errno));
}

/*
 * Read frames for up to ms until match() accepts an IPv4 packet (returns
 * its length from the IP header on) or, without match(), until an ARP frame
 * comes (returns the whole frame's length); -1 when none did.
 */
typedef bool (*match_fn)(const uint8_t *p, size_t n, const void *arg);

static ssize_t receive(uint8_t *buf, size_t cap, int ms, match_fn match, const void *arg)
{
	double end = now_s() + ms / 1e3;
	struct pollfd pfd = { .fd = tap_fd, .events = POLLIN };
	ssize_t n;

	while (now_s() < end) {
		if (poll(&pfd, 1, 20) <= 0)
			continue;
		while ((n = read(tap_fd, buf, cap)) > 0) {
			if ((size_t)n < L2)
				continue;
			answer_arp(buf, n);
			if (match && get16(buf + 12) == 0x0800 &&
			    (size_t)n >= L2 + 20 && match(buf + L2, n - L2, arg))
				return n - L2;
			if (get16(buf + 12) == 0x0806 && match == NULL)
				return n;
		}
	}
	return -1;
}

static bool is_arp_reply(const uint8_t *f, size_t n)
{
	const uint8_t *a = f + 14;

	return n >= 14 + 28 && get16(a + 6) == 2 && !memcmp(a + 14, &lease.host, 4);
}

static void arp_gateway(void)
{
	static const uint8_t bcast[6] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
	uint8_t f[L2 + 28], r[2048], *a = f + L2;
	double end = now_s() + 3;
	ssize_t n;

	memset(f, 0, sizeof(f));
	memcpy(f, bcast, 6);
	memcpy(f + 6, lease.mac, 6);
	put16(f + 12, 0x0806);
	put16(a, 1);
	put16(a + 2, 0x0800);
	a[4] = 6;
	a[5] = 4;
	put16(a + 6, 1);
	memcpy(a + 8, lease.mac, 6);
	memcpy(a + 14, &lease.guest, 4);
	memcpy(a + 24, &lease.host, 4);
	if (write(tap_fd, f, sizeof(f)) != (ssize_t)sizeof(f))
		printf("note: ARP request not written: %s\n", strerror(errno));
	while (now_s() < end) {
		n = receive(r, sizeof(r), 200, NULL, NULL);
		if (n > 0 && is_arp_reply(r, n)) {
			memcpy(host_mac, r + 14 + 8, 6);
			check(true, "ARP: the gateway answers through the filter");
			return;
		}
	}
	check(false, "ARP: no answer from the gateway");
}

/* ---- a TCP client just good enough for one HTTP/1.0 exchange ---- */

struct tuple {
	struct in_addr peer;
	uint16_t sport, dport;
};

static bool is_segment(const uint8_t *p, size_t n, const void *arg)
{
	const struct tuple *t = arg;

	return p[9] == IPPROTO_TCP && n >= 40 && !memcmp(p + 12, &t->peer, 4) &&
	       !memcmp(p + 16, &lease.guest, 4) && get16(p + 20) == t->dport &&
	       get16(p + 22) == t->sport;
}

/*
 * GET / from dst:8080 (source port sport). Returns the bytes of the answer
 * in out, or -1 when no SYN-ACK came within syn_ms.
 */
static int http_get(const char *dst, uint16_t sport, int syn_ms, char *out, size_t cap)
{
	static const char req[] = "GET / HTTP/1.0\r\nHost: it\r\n\r\n";
	struct tuple t = { .peer = ip(dst), .sport = sport, .dport = 8080 };
	uint32_t snd = 0x1000 + sport * 7919u, rcv;
	uint8_t buf[2048];
	size_t got = 0;
	double end;
	ssize_t n;

	send_tcp(t.peer, sport, 8080, snd, 0, TCP_SYN, NULL, 0);
	n = receive(buf, sizeof(buf), syn_ms, is_segment, &t);
	if (n < 0)
		return -1;
	if ((buf[L2 + 33] & (TCP_SYN | TCP_ACK)) != (TCP_SYN | TCP_ACK))
		return -1;
	rcv = get32(buf + L2 + 24) + 1;
	snd++;
	send_tcp(t.peer, sport, 8080, snd, rcv, TCP_ACK | TCP_PSH, req, sizeof(req) - 1);
	snd += sizeof(req) - 1;
	for (end = now_s() + 5; now_s() < end;) {
		const uint8_t *p = buf + L2, *tcp;
		size_t hl, dl;

		n = receive(buf, sizeof(buf), 500, is_segment, &t);
		if (n < 0)
			continue;
		tcp = p + (p[0] & 0xf) * 4;
		hl = (tcp[12] >> 4) * 4;
		dl = get16(p + 2) - (p[0] & 0xf) * 4 - hl;
		if (tcp[13] & TCP_RST)
			break;
		if (get32(tcp + 4) != rcv) {
			send_tcp(t.peer, sport, 8080, snd, rcv, TCP_ACK, NULL, 0);
			continue;	/* a retransmission or out of order */
		}
		if (got + dl < cap) {
			memcpy(out + got, tcp + hl, dl);
			got += dl;
		}
		rcv += dl;
		if (tcp[13] & TCP_FIN) {
			rcv++;
			send_tcp(t.peer, sport, 8080, snd, rcv, TCP_ACK | TCP_FIN, NULL, 0);
			break;
		}
		if (dl)
			send_tcp(t.peer, sport, 8080, snd, rcv, TCP_ACK, NULL, 0);
	}
	out[got < cap ? got : cap - 1] = '\0';
	return got;
}

/* ---- DNS from the guest ---- */

struct dns_wait {
	struct in_addr server;
	uint16_t sport;
};

static bool is_dns_answer(const uint8_t *p, size_t n, const void *arg)
{
	const struct dns_wait *w = arg;

	return p[9] == IPPROTO_UDP && n >= 28 + 12 && !memcmp(p + 12, &w->server, 4) &&
	       get16(p + 20) == 53 && get16(p + 22) == w->sport;
}

/*
 * Ask server for name's A record over UDP, the way a guest's resolver
 * might: AD and CD set, an EDNS record with the DO bit. Returns the rcode
 * (first A record in *a), or -1 when nothing came back within ms.
 */
static int dns_query(const char *server, const char *name, uint16_t id, int ms,
		     struct in_addr *a)
{
	struct dns_wait w = { .server = ip(server), .sport = 30000 + id };
	uint8_t q[300], buf[2048];
	const uint8_t *m;
	size_t n = 12, off, mlen, i, qend;
	const char *l = name;
	uint16_t an;
	ssize_t r;

	memset(q, 0, 12);
	put16(q, id);
	put16(q + 2, 0x0130);	/* RD, AD, CD */
	put16(q + 4, 1);
	put16(q + 10, 1);	/* the OPT record */
	while (*l) {
		size_t len = strcspn(l, ".");

		q[n++] = len;
		memcpy(q + n, l, len);
		n += len;
		l += len + (l[len] == '.');
	}
	q[n++] = 0;
	put16(q + n, 1);
	put16(q + n + 2, 1);
	n += 4;
	qend = n;
	/* OPT: root owner, type 41, 1232-byte payload, DO, no options. */
	memcpy(q + n, "\0\0\x29\x04\xd0\0\0\x80\0\0\0", 11);
	n += 11;
	send_udp(lease.guest, server, w.sport, 53, q, n);
	r = receive(buf, sizeof(buf), ms, is_dns_answer, &w);
	if (r < 0)
		return -1;
	m = buf + L2 + 28;
	mlen = r - 28;
	if (get16(m) != id)
		return -1;
	an = get16(m + 6);
	off = qend;	/* the question is echoed as we sent it */
	a->s_addr = 0;
	for (i = 0; i < an && off + 12 <= mlen; i++) {
		uint16_t type, rdlen;

		if ((m[off] & 0xc0) == 0xc0) {
			off += 2;
		} else {
			while (off < mlen && m[off])
				off += m[off] + 1;
			off++;
		}
		if (off + 10 > mlen)
			break;
		type = get16(m + off);
		rdlen = get16(m + off + 8);
		off += 10;
		if (type == 1 && rdlen == 4 && off + 4 <= mlen) {
			memcpy(a, m + off, 4);
			break;
		}
		off += rdlen;
	}
	return get16(m + 2) & 0xf;
}

/* ---- the husk side ---- */

/* The supervisor's side of the DNS helper, as run_net.c has it. */
static struct dns_helper *helper;
static struct dns_learned learned;
static pthread_t sup_th;
static atomic_bool sup_stop;
static char dns_root[] = "/tmp/husk-dns-root.XXXXXX", uid_dir[] = "/tmp/husk-dns-uid.XXXXXX";
static int uid_lock = -1;

static int learned_open(void *arg, int family, const uint8_t *addr, uint32_t ttl)
{
	return egress_allow_addr_ttl(ifindex, family, addr, ttl, EGRESS_P_ANY, NULL, 0);
}

static int learned_forget(void *arg, int family, const uint8_t *addr, uint64_t now)
{
	return egress_expire_addr(ifindex, family, addr, now);
}

static int on_learn(void *arg, int family, const uint8_t *addr, uint32_t ttl)
{
	return dns_learn_add(&learned, family, addr, ttl, now_us());
}

static void on_tick(void *arg, uint64_t now)
{
	dns_learn_expire(&learned, now);
}

/* The supervisor's loop, as far as DNS goes: poll the helper's fd, handle it. */
static void *supervise(void *arg)
{
	while (!atomic_load(&sup_stop)) {
		struct pollfd p = { .fd = dns_helper_fd(helper), .events = POLLIN };

		if (poll(&p, 1, 50) > 0)
			dns_helper_handle(helper);
	}
	return NULL;
}

static int start_dns(void)
{
	static const char *const allow_hosts[] = { "*.allowed.test" };
	static const struct dns_learn_ops ops = { learned_open, learned_forget, NULL };
	struct sockaddr_in bind_sa = { .sin_family = AF_INET, .sin_port = htons(53) };
	struct sockaddr_in up = { .sin_family = AF_INET, .sin_port = htons(53) };
	struct sockaddr_in guest = { .sin_family = AF_INET };
	struct dns_helper_cfg cfg = { 0 };
	uid_t uid;
	int err;

	/* An empty root and a uid from a lock directory of this test's own. */
	if (!mkdtemp(dns_root) || chmod(dns_root, 0555) || !mkdtemp(uid_dir))
		return husk_seterr(errno, "temporary directories: %s", strerror(errno));
	err = jail_uid_lease_at(uid_dir, 260000, 16, &uid, &uid_lock);
	if (err)
		return err;
	dns_learn_init(&learned, &ops, DNS_LEARN_QUOTA);
	bind_sa.sin_addr = lease.host;
	up.sin_addr = ip(RESOLVER);
	guest.sin_addr = lease.guest;
	cfg.allow = allow_hosts;
	cfg.nallow = 1;
	cfg.bind = (struct sockaddr *)&bind_sa;
	cfg.bind_len = sizeof(bind_sa);
	cfg.guest = (struct sockaddr *)&guest;
	cfg.guest_len = sizeof(guest);
	cfg.upstream = (struct sockaddr *)&up;
	cfg.ulen = sizeof(up);
	cfg.root = dns_root;
	cfg.uid = cfg.gid = uid;
	cfg.learn = on_learn;
	cfg.tick = on_tick;
	err = dns_helper_start(&helper, &cfg);
	if (err)
		return err;
	err = pthread_create(&sup_th, NULL, supervise, NULL);
	return err ? husk_seterr(err, "pthread_create: %s", strerror(err)) : 0;
}

/* Where the proxy runs: not here, not as root, no capabilities, seccomp. */
static void check_helper(void)
{
	pid_t pid = dns_helper_pid(helper);
	char uid[64], caps[64], nnp[16], sec[16];

	proc_status_field(pid, "Uid", uid, sizeof(uid));
	proc_status_field(pid, "CapEff", caps, sizeof(caps));
	proc_status_field(pid, "NoNewPrivs", nnp, sizeof(nnp));
	proc_status_field(pid, "Seccomp", sec, sizeof(sec));
	check(pid > 0 && pid != getpid() && uid[0] && strncmp(uid, "0\t", 2) &&
	      !strcmp(caps, "0000000000000000") && !strcmp(nnp, "1") && !strcmp(sec, "2"),
	      "the DNS proxy runs in process %d (not this one %d): uid %s, CapEff %s, "
	      "NoNewPrivs %s, Seccomp %s", (int)pid, (int)getpid(), uid, caps, nnp, sec);
}

/* A query from the host itself (another source than the guest): no answer. */
static void foreign_query(void)
{
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(53) };
	struct timeval tv = { 0, 500000 };
	uint8_t q[64] = { 0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0 }, r[512];
	size_t n = 12;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	memcpy(q + n, "\3www\7allowed\4test\0\0\1\0\1", 23);
	n += 23;
	to.sin_addr = lease.host;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	sendto(fd, q, n, 0, (struct sockaddr *)&to, sizeof(to));
	check(recv(fd, r, sizeof(r), 0) < 0,
	      "a query to the proxy from the host itself gets no answer");
	close(fd);
}

static void on_event(const struct egress_event *ev, void *opaque)
{
	nevents++;
	last_event = *ev;
}

static int setup(void)
{
	struct egress_port_range ports[] = { { 8080, 8080 }, { 9999, 9999 } };
	struct egress_port_range sink[] = { { 9999, 9999 } };
	struct egress_policy pol = { 0 };
	struct netpool pool;
	char name[IFNAMSIZ];
	struct in_addr a;
	int err;

	if (netpool_parse(NETPOOL_DEFAULT, &pool) || netpool_lease(&pool, 0, &lease))
		return -1;
	tap_fd = tap_open("husk0", name);
	if (tap_fd < 0)
		return tap_fd;
	ifindex = netlink_ifindex(name);
	if (ifindex < 0)
		return ifindex;
	err = netlink_addr_add(ifindex, AF_INET, &lease.host, lease.prefixlen, &lease.guest);
	err = err ?: netlink_link_up(ifindex);
	if (err)
		return err;
	err = egress_open();
	if (err) {
		printf("SKIP: %s\n", husk_lasterr());
		exit(77);
	}
	memcpy(pol.guest_mac, lease.mac, 6);
	pol.guest_ip4 = lease.guest;
	pol.gateway_ip4 = lease.host;
	pol.window_ms = 1000;
	pol.max_conns_window = CONN_RATE;
	pol.max_bytes_total = 64 << 20;
	egress_set_event_cb(on_event, NULL);
	err = egress_attach(ifindex, &pol);
	a = ip(SERVER);
	err = err ?: egress_allow_cidr(ifindex, AF_INET, &a, 32, EGRESS_P_TCP | EGRESS_P_UDP,
				       ports, 2);
	a = ip("192.0.2.0");
	err = err ?: egress_allow_cidr(ifindex, AF_INET, &a, 24, EGRESS_P_UDP, sink, 1);
	if (err)
		return err;
	/* As run_net.c: the whole pool, and the host's addresses as they come. */
	err = netpool_parse(NETPOOL_DEFAULT, &pool) ?:
	      egress_block_cidr(AF_INET, &pool.base, pool.prefixlen);
	if (err)
		return err;
	watch_fd = egress_watch_host_addrs();
	if (watch_fd < 0)
		return watch_fd;

	return start_dns();
}

/* Counters before and after one action: which drop reason moved. */
static struct egress_counters before;

static void mark(void)
{
	egress_read_counters(ifindex, &before);
}

static bool dropped_as(unsigned reason)
{
	struct egress_counters now;

	egress_read_counters(ifindex, &now);
	return now.drops[reason] > before.drops[reason];
}

static bool denied_logged(const struct egress_denied_dst *d, int n, const char *addr,
			  uint8_t proto, uint16_t port, unsigned reason)
{
	struct in_addr a = ip(addr);
	int i;

	for (i = 0; i < n; i++)
		if (d[i].family == 4 && !memcmp(d[i].addr, &a, 4) && d[i].proto == proto &&
		    d[i].port == port && d[i].reason == reason)
			return true;
	return false;
}

/*
 * The host gains an address while the VM runs (as when another VM starts,
 * or a VPN comes up): husk's supervisor polls the watch fd and the address
 * is denied from then on, though it is inside an allowed /24.
 */
static void late_address(void)
{
	struct pollfd pfd = { .fd = watch_fd, .events = POLLIN };
	struct in_addr a = ip(LATEADDR);
	int n = 0, r, tries;

	mark();
	send_udp(lease.guest, LATEADDR, 42001, 9999, "late-before", 11);
	check(!dropped_as(EGRESS_DROP_DENY_RANGE) && !dropped_as(EGRESS_DROP_NOT_ALLOWED),
	      "%s passes while it is not the host's (allowed /24)", LATEADDR);
	if (netlink_addr_add(1, AF_INET, &a, 32, NULL)) {
		check(false, "adding %s to lo: %s", LATEADDR, husk_lasterr());
		return;
	}
	/* What the supervisor's loop does with the fd. */
	for (tries = 0; tries < 20 && n < 1; tries++) {
		if (poll(&pfd, 1, 100) <= 0)
			continue;
		r = egress_watch_poll();
		if (r < 0) {
			check(false, "egress_watch_poll: %s", husk_lasterr());
			return;
		}
		n += r;
	}
	check(n >= 1, "the watch fd announced the new address (%d denied)", n);
	mark();
	send_udp(lease.guest, LATEADDR, 42001, 9999, "late-udp", 8);
	check(dropped_as(EGRESS_DROP_DENY_RANGE),
	      "%s, added to the host after the VM started, dropped: deny-range", LATEADDR);
}

static void traffic(void)
{
	struct egress_denied_dst d[EGRESS_DENIED_MAX];
	struct egress_counters c0, c1;
	struct in_addr a;
	char page[4096];
	int r, i, n;

	/* An --allow rule: TCP is answered by the fake internet. */
	egress_read_counters(ifindex, &c0);
	r = http_get(SERVER, 41000, 2000, page, sizeof(page));
	check(r > 0 && strstr(page, "husk-it-ok from " SERVER),
	      "allowed TCP: HTTP page from %s (%d bytes)", SERVER, r);
	egress_read_counters(ifindex, &c1);
	check(c1.in_packets > c0.in_packets && c1.in_bytes > c0.in_bytes,
	      "host->guest counter: %llu packets, %llu bytes in during the fetch",
	      (unsigned long long)(c1.in_packets - c0.in_packets),
	      (unsigned long long)(c1.in_bytes - c0.in_bytes));
	check(c1.packets > c0.packets && c1.new_conns == c0.new_conns + 1,
	      "guest->host counter: packets out, one new connection");

	/* UDP: the allowed datagram must reach its sink, the others not. */
	send_udp(lease.guest, SERVER, 42000, 9999, "allowed-udp", 11);
	send_udp(lease.guest, PEER, 42000, 9999, "peer-udp", 8);
	mark();
	send_udp(lease.guest, DENIED, 42000, 9999, "denied-udp", 10);
	check(dropped_as(EGRESS_DROP_NOT_ALLOWED), "UDP to %s dropped: not-allowed", DENIED);
	mark();
	send_udp(ip("10.200.0.66"), SERVER, 42000, 9999, "spoofed-udp", 11);
	check(dropped_as(EGRESS_DROP_SPOOF_IP), "spoofed source dropped: spoofed-ip");
	mark();
	send_udp(lease.guest, SERVER, 42000, 9998, "port-udp", 8);
	check(dropped_as(EGRESS_DROP_PORT), "allowed host, other port dropped: port");
	mark();
	send_udp(lease.guest, HOSTADDR, 42000, 9999, "hostaddr-udp", 12);
	check(dropped_as(EGRESS_DROP_DENY_RANGE),
	      "the host's own address %s (inside an allowed /24) dropped: deny-range",
	      HOSTADDR);

	/* A denied TCP destination: no SYN-ACK, a drop. */
	mark();
	r = http_get(DENIED, 41001, 500, page, sizeof(page));
	check(r < 0 && dropped_as(EGRESS_DROP_NOT_ALLOWED),
	      "TCP to %s: no answer, dropped: not-allowed", DENIED);

	/* Names: closed before DNS, open after it; only through the proxy. */
	mark();
	r = http_get(NAMED, 41002, 500, page, sizeof(page));
	check(r < 0 && dropped_as(EGRESS_DROP_NOT_ALLOWED),
	      "%s is closed before its name is resolved", NAMED);
	mark();
	r = dns_query(RESOLVER, "www.allowed.test", 1, 500, &a);
	check(r < 0 && dropped_as(EGRESS_DROP_DNS),
	      "DNS straight to %s dropped: dns", RESOLVER);
	r = dns_query(inet_ntoa(lease.host), "www.allowed.test", 2, 3000, &a);
	check(r == 0 && a.s_addr == ip(NAMED).s_addr,
	      "DNS through the gateway's proxy: www.allowed.test is %s (rcode %d)",
	      inet_ntoa(a), r);
	r = http_get(NAMED, 41003, 2000, page, sizeof(page));
	check(r > 0 && strstr(page, "husk-it-ok from " NAMED),
	      "%s reachable once resolved: HTTP page (%d bytes)", NAMED, r);
	r = dns_query(inet_ntoa(lease.host), "evil.test", 3, 3000, &a);
	check(r == 3, "a name off the allowlist: NXDOMAIN from the proxy (rcode %d)", r);
	mark();
	r = http_get(DENIED, 41004, 500, page, sizeof(page));
	check(r < 0 && dropped_as(EGRESS_DROP_NOT_ALLOWED),
	      "evil.test's address stays closed");

	n = egress_read_denied(ifindex, d, EGRESS_DENIED_MAX);
	check(n >= 5 && denied_logged(d, n, DENIED, IPPROTO_UDP, 9999, EGRESS_DROP_NOT_ALLOWED) &&
	      denied_logged(d, n, HOSTADDR, IPPROTO_UDP, 9999, EGRESS_DROP_DENY_RANGE) &&
	      denied_logged(d, n, DENIED, IPPROTO_TCP, 8080, EGRESS_DROP_NOT_ALLOWED) &&
	      denied_logged(d, n, NAMED, IPPROTO_TCP, 8080, EGRESS_DROP_NOT_ALLOWED) &&
	      denied_logged(d, n, RESOLVER, IPPROTO_UDP, 53, EGRESS_DROP_DNS),
	      "first denied destinations: %d logged with their reasons", n);
	for (i = 0; i < n; i++) {
		char s[INET_ADDRSTRLEN];

		inet_ntop(AF_INET, d[i].addr, s, sizeof(s));
		printf("     denied %s proto %u port %u (%s)\n", s, d[i].proto, d[i].port,
		       egress_reason_name(d[i].reason));
	}

	late_address();

	/* A flood of new flows: one anomaly event, then the VM is cut off. */
	for (i = 0; i < FLOOD; i++) {
		char p[32];

		snprintf(p, sizeof(p), "flood-%d", i);
		send_udp(lease.guest, SERVER, 20000 + i, 9999, p, strlen(p));
	}
	usleep(100000);
	egress_events_poll();
	egress_read_counters(ifindex, &c1);
	check(nevents == 1 && last_event.ifindex == (uint32_t)ifindex &&
	      (last_event.what & EGRESS_ANOM_CONNS),
	      "flood of %d new flows: one anomaly event (%llu new flows in the window)",
	      FLOOD, (unsigned long long)last_event.window_conns);
	check(c1.drops[EGRESS_DROP_ANOMALY] > 0,
	      "flood: %llu datagrams dropped as anomaly",
	      (unsigned long long)c1.drops[EGRESS_DROP_ANOMALY]);
	r = http_get(SERVER, 41005, 500, page, sizeof(page));
	check(r < 0, "after the anomaly even the allowed server is cut off");
	egress_read_counters(ifindex, &c1);
	printf("note: out %llu packets %llu bytes, in %llu packets %llu bytes, "
	       "%llu dropped\n", (unsigned long long)c1.packets,
	       (unsigned long long)c1.bytes, (unsigned long long)c1.in_packets,
	       (unsigned long long)c1.in_bytes, (unsigned long long)c1.dropped);
}

/* Stop the helper; its report must show what the guest did. */
static void stop_dns(void)
{
	static struct dns_helper_report rep;
	unsigned i;
	bool evil = false;

	atomic_store(&sup_stop, true);
	pthread_join(sup_th, NULL);
	dns_helper_stop(helper, &rep);
	helper = NULL;
	for (i = 0; i < rep.nrefused; i++)
		evil |= !strcmp(rep.refused[i], "evil.test");
	check(rep.st.queries >= 2 && rep.st.allowed >= 1 && rep.st.foreign >= 1 && evil &&
	      rep.granted >= 1 && !rep.fault[0] && learned.st.opened >= 1,
	      "DNS report: %llu queries, %llu allowed, %llu foreign, evil.test refused, "
	      "%llu addresses granted, %llu opened, no fault (%s)",
	      (unsigned long long)rep.st.queries, (unsigned long long)rep.st.allowed,
	      (unsigned long long)rep.st.foreign, (unsigned long long)rep.granted,
	      (unsigned long long)learned.st.opened, rep.fault[0] ? rep.fault : "none");
	if (uid_lock >= 0)
		close(uid_lock);
	rm_tree_at(AT_FDCWD, uid_dir);
	rmdir(dns_root);
}

int main(void)
{
	int err;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (geteuid() != 0) {
		printf("SKIP: needs root\n");
		return 77;
	}
	err = setup();
	if (err) {
		printf("FAIL: setup: %s\n", husk_lasterr());
		return 1;
	}
	check_helper();
	arp_gateway();
	if (!failed) {
		foreign_query();
		traffic();
	}
	stop_dns();
	egress_detach(ifindex);
	close(tap_fd);
	egress_close();
	printf("egress: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
