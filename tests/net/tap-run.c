/*
 * tap-run: drives vmm/tap.c and vmm/netlink.c against the real host kernel,
 * the way husk's network device will: open a tap, give the host end
 * 10.200.0.1/30 and bring it up over rtnetlink, then act as the guest
 * (10.200.0.2) by writing frames, each behind a zero 12-byte
 * virtio_net_hdr_v1, into the tap fd and reading the kernel's answers: ARP,
 * ICMP echo, and a UDP burst in each direction for a throughput figure.
 * Also checks name collisions, error messages (EEXIST, ENODEV, EPERM) and
 * that nothing is left when the fd is closed.
 *
 * Run as root inside a scratch network namespace (tests/net/tap.test).
 * Exit 0 on success, 1 on failure, 77 if not root.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "netlink.h"
#include "netpool.h"
#include "tap.h"
#include "util.h"

#define HDR TAP_VNET_HDR_LEN
#define UDP_PORT 5555
#define BURST 20000
#define PAYLOAD 1400

static int failures;
static struct netpool_lease lease;
static uint8_t host_mac[6];

#define CHECK(cond, ...)                                                        \
	do {                                                                    \
		if (!(cond)) {                                                  \
			printf("FAIL %s:%d: ", __FILE__, __LINE__);             \
			printf(__VA_ARGS__);                                    \
			printf("\n");                                           \
			failures++;                                             \
		}                                                               \
	} while (0)

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint16_t csum(const void *p, size_t len)
{
	const uint8_t *b = p;
	uint32_t s = 0;
	size_t i;

	for (i = 0; i + 1 < len; i += 2)
		s += b[i] << 8 | b[i + 1];
	if (len & 1)
		s += b[len - 1] << 8;
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return htons(~s & 0xffff);
}

static void put16(uint8_t *p, uint16_t v) { p[0] = v >> 8; p[1] = v; }
static uint16_t get16(const uint8_t *p) { return p[0] << 8 | p[1]; }

/* Ethernet header after the zero vnet header; returns the payload. */
static uint8_t *eth(uint8_t *f, const uint8_t *dst, uint16_t type)
{
	memset(f, 0, HDR);
	memcpy(f + HDR, dst, 6);
	memcpy(f + HDR + 6, lease.mac, 6);
	put16(f + HDR + 12, type);
	return f + HDR + 14;
}

/* IPv4 header (20 bytes) from guest to dst; returns the L4 payload. */
static uint8_t *ipv4(uint8_t *p, uint8_t proto, struct in_addr src, struct in_addr dst,
		     size_t l4len)
{
	memset(p, 0, 20);
	p[0] = 0x45;
	put16(p + 2, 20 + l4len);
	p[6] = 0x40;		/* DF */
	p[8] = 64;
	p[9] = proto;
	memcpy(p + 12, &src, 4);
	memcpy(p + 16, &dst, 4);
	memcpy(p + 10, &(uint16_t){ csum(p, 20) }, 2);
	return p + 20;
}

/* Read frames until match() accepts one or timeout; returns its length or -1. */
static ssize_t read_until(int fd, uint8_t *buf, size_t cap, int ms,
			  int (*match)(const uint8_t *f, size_t len))
{
	double end = now_s() + ms / 1e3;
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	ssize_t n;

	while (now_s() < end) {
		if (poll(&pfd, 1, 50) <= 0)
			continue;
		n = read(fd, buf, cap);
		if (n < 0)
			continue;
		if ((size_t)n >= HDR + 14 && match(buf, n))
			return n;
	}
	return -1;
}

static int is_arp_reply(const uint8_t *f, size_t n)
{
	const uint8_t *a = f + HDR + 14;

	return n >= HDR + 14 + 28 && get16(f + HDR + 12) == 0x0806 && get16(a + 6) == 2 &&
	       !memcmp(a + 14, &lease.host, 4) && !memcmp(a + 24, &lease.guest, 4);
}

static int is_echo_reply(const uint8_t *f, size_t n)
{
	const uint8_t *ip = f + HDR + 14;

	return n >= HDR + 14 + 28 && get16(f + HDR + 12) == 0x0800 && ip[9] == 1 &&
	       ip[20] == 0 && get16(ip + 24) == 0x4242 && get16(ip + 26) == 1;
}

static int is_udp_to_guest(const uint8_t *f, size_t n)
{
	const uint8_t *ip = f + HDR + 14;

	return n >= HDR + 14 + 28 && get16(f + HDR + 12) == 0x0800 && ip[9] == 17 &&
	       !memcmp(ip + 16, &lease.guest, 4);
}

static void test_arp(int fd)
{
	static const uint8_t bcast[6] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
	uint8_t f[128], r[2048], *a;
	ssize_t n;

	a = eth(f, bcast, 0x0806);
	put16(a, 1);
	put16(a + 2, 0x0800);
	a[4] = 6;
	a[5] = 4;
	put16(a + 6, 1);
	memcpy(a + 8, lease.mac, 6);
	memcpy(a + 14, &lease.guest, 4);
	memset(a + 18, 0, 6);
	memcpy(a + 24, &lease.host, 4);
	CHECK(write(fd, f, HDR + 14 + 28) == HDR + 14 + 28, "ARP write: %s", strerror(errno));
	n = read_until(fd, r, sizeof(r), 3000, is_arp_reply);
	CHECK(n > 0, "no ARP reply from the host");
	if (n <= 0)
		return;
	CHECK(!memcmp(r + HDR, lease.mac, 6), "ARP reply not addressed to the guest MAC");
	memcpy(host_mac, r + HDR + 14 + 8, 6);
	printf("ok: ARP reply, host MAC %02x:%02x:%02x:%02x:%02x:%02x\n", host_mac[0],
	       host_mac[1], host_mac[2], host_mac[3], host_mac[4], host_mac[5]);
}

static void test_ping(int fd)
{
	uint8_t f[256], r[2048], *icmp;
	size_t l4 = 8 + 56;
	ssize_t n;
	unsigned i;

	icmp = ipv4(eth(f, host_mac, 0x0800), 1, lease.guest, lease.host, l4);
	memset(icmp, 0, l4);
	icmp[0] = 8;
	put16(icmp + 4, 0x4242);
	put16(icmp + 6, 1);
	for (i = 8; i < l4; i++)
		icmp[i] = i;
	memcpy(icmp + 2, &(uint16_t){ csum(icmp, l4) }, 2);
	n = HDR + 14 + 20 + l4;
	CHECK(write(fd, f, n) == n, "ICMP write: %s", strerror(errno));
	n = read_until(fd, r, sizeof(r), 3000, is_echo_reply);
	CHECK(n == (ssize_t)(HDR + 14 + 20 + l4), "no (or a wrong-sized) ICMP echo reply: %zd",
	      n);
	if (n <= 0)
		return;
	CHECK(!memcmp(r + HDR + 14 + 20 + 8, icmp + 8, 56), "echo reply payload differs");
	CHECK(csum(r + HDR + 14, 20) == 0, "bad IP checksum in the reply");
	printf("ok: ICMP echo reply from the host\n");
}

/* Guest -> host: UDP frames written to the tap, received on a host socket. */
static void test_tx_throughput(int fd)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(UDP_PORT) };
	uint8_t f[2048], buf[2048], *udp;
	unsigned sent = 0, got = 0, i;
	int s, rcv = 8 << 20;
	size_t len = HDR + 14 + 20 + 8 + PAYLOAD;
	double t0, t;

	sa.sin_addr = lease.host;
	s = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
	setsockopt(s, SOL_SOCKET, SO_RCVBUFFORCE, &rcv, sizeof(rcv));
	CHECK(s >= 0 && bind(s, (struct sockaddr *)&sa, sizeof(sa)) == 0, "UDP bind: %s",
	      strerror(errno));
	udp = ipv4(eth(f, host_mac, 0x0800), 17, lease.guest, lease.host, 8 + PAYLOAD);
	put16(udp, 4000);
	put16(udp + 2, UDP_PORT);
	put16(udp + 4, 8 + PAYLOAD);
	put16(udp + 6, 0);	/* no UDP checksum: allowed on IPv4 */
	memset(udp + 8, 0x5a, PAYLOAD);
	t0 = now_s();
	for (i = 0; i < BURST; i++) {
		if (write(fd, f, len) == (ssize_t)len)
			sent++;
		while (recv(s, buf, sizeof(buf), 0) == PAYLOAD)
			got++;
	}
	for (t = now_s(); now_s() - t < 0.2;)
		while (recv(s, buf, sizeof(buf), 0) == PAYLOAD)
			got++;
	t = now_s() - t0 - 0.2;
	close(s);
	CHECK(got > sent / 2, "host socket received %u of %u frames", got, sent);
	printf("ok: guest->host %u/%u frames of %d bytes in %.3f s: %.0f frames/s, %.1f MB/s\n",
	       got, sent, PAYLOAD, t, got / t, got * (double)PAYLOAD / t / 1e6);
}

/* Host -> guest: a host UDP socket sends to 10.200.0.2, frames read from the tap. */
static void test_rx_throughput(int fd)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(UDP_PORT) };
	uint8_t payload[PAYLOAD], r[2048];
	unsigned sent = 0, got = 0, i;
	ssize_t n;
	double t0, t;
	int s;

	memset(payload, 0x77, sizeof(payload));
	sa.sin_addr = lease.guest;
	s = socket(AF_INET, SOCK_DGRAM, 0);
	CHECK(s >= 0, "UDP socket: %s", strerror(errno));
	t0 = now_s();
	for (i = 0; i < BURST; i++) {
		if (sendto(s, payload, sizeof(payload), 0, (struct sockaddr *)&sa,
			   sizeof(sa)) == PAYLOAD)
			sent++;
		while ((n = read(fd, r, sizeof(r))) > 0)
			if (is_udp_to_guest(r, n))
				got++;
	}
	for (t = now_s(); now_s() - t < 0.2;)
		while ((n = read(fd, r, sizeof(r))) > 0)
			if (is_udp_to_guest(r, n))
				got++;
	t = now_s() - t0 - 0.2;
	close(s);
	CHECK(got > sent / 2, "tap delivered %u of %u frames", got, sent);
	printf("ok: host->guest %u/%u frames of %d bytes in %.3f s: %.0f frames/s, %.1f MB/s\n",
	       got, sent, PAYLOAD, t, got / t, got * (double)PAYLOAD / t / 1e6);
}

static void test_errors(const char *name)
{
	char other[IFNAMSIZ];
	int fd, r;

	r = tap_open(name, NULL);
	CHECK(r == -EBUSY, "second tap_open(%s) gave %d", name, r);
	CHECK(strstr(husk_lasterr(), "already exists") != NULL, "message: %s", husk_lasterr());
	printf("ok: collision: %s\n", husk_lasterr());
	r = tap_open("lo", NULL);
	CHECK(r < 0, "tap_open(lo) succeeded");
	printf("ok: non-tap name: %s\n", husk_lasterr());
	r = tap_open("this-name-is-far-too-long", NULL);
	CHECK(r == -EINVAL, "long name gave %d", r);
	r = netlink_ifindex("husk-nonexist");
	CHECK(r == -ENODEV, "ifindex of a missing interface gave %d", r);
	printf("ok: missing interface: %s\n", husk_lasterr());
	r = netlink_addr_add(netlink_ifindex(name), AF_INET, &lease.host, 30, NULL);
	CHECK(r == -EEXIST, "duplicate address gave %d", r);
	printf("ok: duplicate address: %s\n", husk_lasterr());
	r = netlink_link_up(999999);
	CHECK(r == -ENODEV, "link up on a missing index gave %d", r);

	/* netlink_link_del on a live tap. */
	fd = tap_open("husk-del%d", other);
	CHECK(fd >= 0, "tap_open(husk-del%%d): %s", husk_lasterr());
	if (fd >= 0) {
		CHECK(netlink_ifindex(other) > 0, "%s not there", other);
		r = netlink_link_del(other);
		CHECK(r == 0, "link_del(%s): %s", other, husk_lasterr());
		CHECK(netlink_ifindex(other) == -ENODEV, "%s still there after link_del", other);
		close(fd);
	}
	r = netlink_link_del(other);
	CHECK(r == -ENODEV, "deleting a missing link gave %d", r);
	printf("ok: link_del; again: %s\n", husk_lasterr());
}

/* Without privileges the messages must say what is needed. */
static void test_eperm(int ifindex)
{
	pid_t pid = fork();
	int st, r, bad = 0;

	if (pid == 0) {
		if (setgid(65534) || setuid(65534))
			_exit(2);
		r = tap_open("husk-eperm", NULL);
		/* EACCES when /dev/net/tun itself is closed to the user. */
		if ((r != -EPERM && r != -EACCES) ||
		    !strstr(husk_lasterr(), "needs root or CAP_NET_ADMIN")) {
			printf("FAIL: unprivileged tap_open: %d %s\n", r, husk_lasterr());
			bad = 1;
		} else {
			printf("ok: unprivileged tap: %s\n", husk_lasterr());
		}
		r = netlink_link_up(ifindex);
		if (r != -EPERM || !strstr(husk_lasterr(), "needs root or CAP_NET_ADMIN")) {
			printf("FAIL: unprivileged link up: %d %s\n", r, husk_lasterr());
			bad = 1;
		} else {
			printf("ok: unprivileged netlink: %s\n", husk_lasterr());
		}
		fflush(stdout);
		_exit(bad);
	}
	CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && !WEXITSTATUS(st),
	      "unprivileged checks failed");
}

int main(void)
{
	struct netpool pool;
	char name[IFNAMSIZ];
	int fd, ifindex, fl;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (geteuid() != 0) {
		printf("SKIP: needs root\n");
		return 77;
	}
	if (netpool_parse(NETPOOL_DEFAULT, &pool) || netpool_lease(&pool, 0, &lease))
		return 1;
	fd = tap_open("husk-t%d", name);
	if (fd < 0) {
		printf("FAIL: tap_open: %s\n", husk_lasterr());
		return 1;
	}
	printf("ok: tap %s\n", name);
	fl = fcntl(fd, F_GETFL);
	CHECK(fl & O_NONBLOCK, "tap fd is blocking");
	CHECK(fcntl(fd, F_GETFD) & FD_CLOEXEC, "tap fd lacks close-on-exec");
	ifindex = netlink_ifindex(name);
	CHECK(ifindex > 0 && (unsigned)ifindex == if_nametoindex(name),
	      "netlink_ifindex(%s) = %d, kernel says %u", name, ifindex, if_nametoindex(name));
	CHECK(netlink_addr_add(ifindex, AF_INET, &lease.host, lease.prefixlen, NULL) == 0,
	      "addr add: %s", husk_lasterr());
	CHECK(netlink_link_up(ifindex) == 0, "link up: %s", husk_lasterr());
	if (failures)
		return 1;
	test_arp(fd);
	test_ping(fd);
	if (!failures) {
		test_tx_throughput(fd);
		test_rx_throughput(fd);
	}
	test_errors(name);
	test_eperm(ifindex);
	close(fd);
	/* The tap is not persistent: gone with its fd, and its address with it. */
	CHECK(netlink_ifindex(name) == -ENODEV, "%s still exists after close", name);
	printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
	return failures ? 1 : 0;
}
