/*
 * tap-run: drives vmm/net/tap.c and vmm/net/netlink.c against the real host kernel,
 * the way husk's network device will: open a tap, give the host end
 * 10.200.0.1/30 and bring it up over rtnetlink, then act as the guest
 * (10.200.0.2) by writing bare Ethernet frames into the tap fd and reading
 * the kernel's answers: ARP, ICMP echo, and a UDP burst in each direction
 * for a throughput figure. Also checks that the tap carries no virtio-net
 * header (no IFF_VNET_HDR, no offloads) and that one that does is refused,
 * name collisions, error messages (EEXIST, ENODEV, EPERM) and
 * that nothing is left when the fd is closed; the sweep of stale taps
 * (netlink_del_stale_taps: only unlocked husk<slot> taps go); and that the
 * egress filter's maps and programs die with a husk that is killed, or,
 * when its tap survives it, with that tap.
 *
 * Run as root inside a scratch network namespace (tests/net/tap.test).
 * Exit 0 on success, 1 on failure, 77 if not root.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "net/egress.h"
#include "net/netlink.h"
#include "net/netpool.h"
#include "net/tap.h"
#include "lib/util.h"

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

/* The frame's Ethernet header; returns the payload. */
static uint8_t *eth(uint8_t *f, const uint8_t *dst, uint16_t type)
{
	memcpy(f, dst, 6);
	memcpy(f + 6, lease.mac, 6);
	put16(f + 12, type);
	return f + 14;
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
		if ((size_t)n >= 14 && match(buf, n))
			return n;
	}
	return -1;
}

static int is_arp_reply(const uint8_t *f, size_t n)
{
	const uint8_t *a = f + 14;

	return n >= 14 + 28 && get16(f + 12) == 0x0806 && get16(a + 6) == 2 &&
	       !memcmp(a + 14, &lease.host, 4) && !memcmp(a + 24, &lease.guest, 4);
}

static int is_echo_reply(const uint8_t *f, size_t n)
{
	const uint8_t *ip = f + 14;

	return n >= 14 + 28 && get16(f + 12) == 0x0800 && ip[9] == 1 &&
	       ip[20] == 0 && get16(ip + 24) == 0x4242 && get16(ip + 26) == 1;
}

static int is_udp_to_guest(const uint8_t *f, size_t n)
{
	const uint8_t *ip = f + 14;

	return n >= 14 + 28 && get16(f + 12) == 0x0800 && ip[9] == 17 &&
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
	CHECK(write(fd, f, 14 + 28) == 14 + 28, "ARP write: %s", strerror(errno));
	n = read_until(fd, r, sizeof(r), 3000, is_arp_reply);
	CHECK(n > 0, "no ARP reply from the host");
	if (n <= 0)
		return;
	CHECK(!memcmp(r, lease.mac, 6), "ARP reply not addressed to the guest MAC");
	memcpy(host_mac, r + 14 + 8, 6);
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
	n = 14 + 20 + l4;
	CHECK(write(fd, f, n) == n, "ICMP write: %s", strerror(errno));
	n = read_until(fd, r, sizeof(r), 3000, is_echo_reply);
	CHECK(n == (ssize_t)(14 + 20 + l4), "no (or a wrong-sized) ICMP echo reply: %zd",
	      n);
	if (n <= 0)
		return;
	CHECK(!memcmp(r + 14 + 20 + 8, icmp + 8, 56), "echo reply payload differs");
	CHECK(csum(r + 14, 20) == 0, "bad IP checksum in the reply");
	printf("ok: ICMP echo reply from the host\n");
}

/* Guest -> host: UDP frames written to the tap, received on a host socket. */
static void test_tx_throughput(int fd)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(UDP_PORT) };
	uint8_t f[2048], buf[2048], *udp;
	unsigned sent = 0, got = 0, i;
	int s, rcv = 8 << 20;
	size_t len = 14 + 20 + 8 + PAYLOAD;
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

/*
 * husk's tap carries bare frames: no IFF_VNET_HDR, so no guest-written
 * virtio_net_hdr reaches the tun driver's GSO/checksum parsing; and a tap fd
 * opened with one by someone else is refused rather than misread.
 */
static void test_bare_frames(int fd)
{
	struct ifreq ifr;
	int vfd;

	memset(&ifr, 0, sizeof(ifr));
	CHECK(ioctl(fd, TUNGETIFF, &ifr) == 0, "TUNGETIFF: %s", strerror(errno));
	CHECK(!(ifr.ifr_flags & IFF_VNET_HDR), "tap opened with IFF_VNET_HDR (flags 0x%x)",
	      ifr.ifr_flags);
	CHECK((ifr.ifr_flags & (IFF_TAP | IFF_NO_PI)) == (IFF_TAP | IFF_NO_PI),
	      "tap flags 0x%x", ifr.ifr_flags);
	CHECK(tap_check_bare(fd) == 0, "tap_check_bare on our tap: %s", husk_lasterr());
	vfd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, IFNAMSIZ, "husk-vnet");
	ifr.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR;
	CHECK(vfd >= 0 && ioctl(vfd, TUNSETIFF, &ifr) == 0, "vnet tap: %s", strerror(errno));
	CHECK(tap_check_bare(vfd) == -EINVAL && strstr(husk_lasterr(), "IFF_VNET_HDR"),
	      "a tap with IFF_VNET_HDR was not refused: %s", husk_lasterr());
	printf("ok: bare frames; a vnet-header tap is refused: %s\n", husk_lasterr());
	if (vfd >= 0)
		close(vfd);
}

/* A persistent tap (outlives its fd), as a crashed or foreign owner leaves. */
static int make_persistent(const char *name)
{
	struct ifreq ifr;
	int fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, IFNAMSIZ, "%s", name);
	ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
	if (ioctl(fd, TUNSETIFF, &ifr) < 0 || ioctl(fd, TUNSETPERSIST, 1) < 0) {
		int err = -errno;

		close(fd);
		return err;
	}
	close(fd);
	return netlink_ifindex(name);
}

static int lock_slot(const char *dir, unsigned slot)
{
	char path[256];
	int fd;

	snprintf(path, sizeof(path), "%s/%u.lock", dir, slot);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static int exists(const char *name)
{
	return netlink_ifindex(name) > 0;
}

/* netlink_del_stale_taps: only husk<slot> taps whose slot lock is free go. */
static void test_stale(void)
{
	char dir[] = "/tmp/husk-stale-XXXXXX", path[300], live[IFNAMSIZ];
	int pipefd[2], live_fd, own_lock, n, veth;
	pid_t holder;
	char c;

	CHECK(mkdtemp(dir) != NULL, "mkdtemp: %s", strerror(errno));
	veth = exists("husk8");	/* tap.test makes a veth of that name */
	CHECK(make_persistent("husk5") > 0, "persistent husk5");
	CHECK(make_persistent("husk6") > 0, "persistent husk6");
	CHECK(make_persistent("husk7") > 0, "persistent husk7");
	CHECK(make_persistent("husk-x") > 0, "persistent husk-x");
	CHECK(make_persistent("husk012") > 0, "persistent husk012");
	/* A live husk: its tap open, its slot locked (here, on another fd). */
	live_fd = tap_open("husk3", live);
	CHECK(live_fd >= 0, "tap_open(husk3): %s", husk_lasterr());
	own_lock = lock_slot(dir, 3);
	CHECK(own_lock >= 0, "lock slot 3");
	/* Slot 6 locked by another process; slot 7's lock file exists, free. */
	CHECK(pipe(pipefd) == 0, "pipe");
	holder = fork();
	if (holder == 0) {
		int fd = lock_slot(dir, 6);

		c = fd >= 0 ? 'y' : 'n';
		if (write(pipefd[1], &c, 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	CHECK(read(pipefd[0], &c, 1) == 1 && c == 'y', "holder did not lock slot 6");
	close(lock_slot(dir, 7));

	n = netlink_del_stale_taps("husk", dir);
	CHECK(n == 2, "first sweep deleted %d, want 2 (%s)", n, husk_lasterr());
	CHECK(!exists("husk5"), "husk5 (no lock file) survived");
	CHECK(!exists("husk7"), "husk7 (free lock) survived");
	CHECK(exists("husk6"), "husk6 (locked by a live process) deleted");
	CHECK(exists("husk3"), "husk3 (live tap, locked) deleted");
	CHECK(exists("husk-x") && exists("husk012"), "a non-slot name was deleted");
	CHECK(!veth || exists("husk8"), "the veth husk8 (not a tap) was deleted");
	snprintf(path, sizeof(path), "%s/5.lock", dir);
	CHECK(access(path, F_OK) == 0, "the sweep did not take slot 5's lock file");

	/* The holder dies: its lock goes with it, and so does its tap now. */
	kill(holder, SIGKILL);
	waitpid(holder, NULL, 0);
	n = netlink_del_stale_taps("husk", dir);
	CHECK(n == 1 && !exists("husk6"), "second sweep deleted %d, want husk6", n);
	n = netlink_del_stale_taps("husk", dir);
	CHECK(n == 0, "third sweep deleted %d", n);
	CHECK(netlink_del_stale_taps("", dir) == -EINVAL, "empty prefix accepted");
	printf("ok: stale taps: only unlocked husk<slot> taps swept\n");

	close(live_fd);
	close(own_lock);
	close(pipefd[0]);
	close(pipefd[1]);
	netlink_link_del("husk-x");
	netlink_link_del("husk012");
	for (n = 0; n < 10; n++) {
		snprintf(path, sizeof(path), "%s/%d.lock", dir, n);
		unlink(path);
	}
	rmdir(dir);
}

/* The ids of the filter program, the counter program and their maps. */
struct bpf_ids {
	uint32_t prog[2];
	uint32_t map[16];
	uint32_t nmaps;
};

static int prog_ids(int prog_fd, uint32_t *prog, uint32_t *maps, uint32_t *nmaps)
{
	struct bpf_prog_info info;
	uint32_t len = sizeof(info);

	memset(&info, 0, sizeof(info));
	info.nr_map_ids = *nmaps;
	info.map_ids = (uint64_t)(unsigned long)maps;
	if (bpf_obj_get_info_by_fd(prog_fd, &info, &len))
		return -errno;
	*prog = info.id;
	*nmaps = info.nr_map_ids < *nmaps ? info.nr_map_ids : *nmaps;
	return 0;
}

/*
 * A child that loads the filter, attaches it to ifindex (or to a tap of its
 * own when ifindex is 0) and is then SIGKILLed: no cleanup at all.
 */
static int crashing_husk(int ifindex, struct bpf_ids *ids)
{
	int p[2], st;
	pid_t pid;

	if (pipe(p))
		return -1;
	pid = fork();
	if (pid == 0) {
		struct egress_policy pol = { 0 };
		struct bpf_ids me = { .nmaps = 16 };
		uint32_t n2 = 16, m2[16];
		char name[IFNAMSIZ];

		close(p[0]);
		if (!ifindex) {
			if (tap_open("husk-m%d", name) < 0)
				_exit(1);
			ifindex = netlink_ifindex(name);
		}
		memcpy(pol.guest_mac, lease.mac, 6);
		if (egress_open() || egress_attach(ifindex, &pol) ||
		    prog_ids(egress_prog_fd(), &me.prog[0], me.map, &me.nmaps) ||
		    prog_ids(egress_count_prog_fd(), &me.prog[1], m2, &n2))
			_exit(1);
		if (write(p[1], &me, sizeof(me)) != sizeof(me))
			_exit(1);
		raise(SIGKILL);
	}
	close(p[1]);
	st = read(p[0], ids, sizeof(*ids)) == sizeof(*ids) ? 0 : -1;
	close(p[0]);
	waitpid(pid, NULL, 0);
	return st;
}

/* How many of the ids still name a live program or map. */
static int alive(const struct bpf_ids *ids)
{
	uint32_t i;
	int n = 0, fd;

	for (i = 0; i < 2; i++)
		if ((fd = bpf_prog_get_fd_by_id(ids->prog[i])) >= 0) {
			close(fd);
			n++;
		}
	for (i = 0; i < ids->nmaps; i++)
		if ((fd = bpf_map_get_fd_by_id(ids->map[i])) >= 0) {
			close(fd);
			n++;
		}
	return n;
}

/* The kernel frees programs and maps after an RCU grace period: wait a bit. */
static int alive_after(const struct bpf_ids *ids, int ms)
{
	int n;

	while ((n = alive(ids)) && ms > 0) {
		usleep(20000);
		ms -= 20;
	}
	return n;
}

/* "Stale map entries are not an issue": nothing outlives the process. */
static void test_maps_die(void)
{
	char dir[] = "/tmp/husk-maps-XXXXXX";
	struct bpf_ids ids;
	int ifi, n;

	if (crashing_husk(0, &ids)) {
		CHECK(0, "child could not load and attach the egress filter");
		return;
	}
	CHECK(ids.nmaps >= 8, "the filter uses only %u maps?", ids.nmaps);
	n = alive_after(&ids, 3000);
	CHECK(n == 0, "%d programs/maps outlived a killed husk and its tap", n);
	printf("ok: killed husk: its %u maps and 2 programs are gone\n", ids.nmaps);

	/* Its tap survives it (persistent): the tc filters keep them alive... */
	CHECK(mkdtemp(dir) != NULL, "mkdtemp");
	ifi = make_persistent("husk9");
	CHECK(ifi > 0, "persistent husk9");
	if (ifi <= 0 || crashing_husk(ifi, &ids)) {
		CHECK(0, "child could not attach to husk9");
		netlink_link_del("husk9");
		return;
	}
	usleep(300000);
	n = alive(&ids);
	CHECK(n == (int)ids.nmaps + 2, "with its tap alive %d of %u objects live", n,
	      ids.nmaps + 2);
	/* ... until the stale sweep deletes that tap. */
	CHECK(netlink_del_stale_taps("husk", dir) == 1, "sweep: %s", husk_lasterr());
	n = alive_after(&ids, 3000);
	CHECK(n == 0, "%d programs/maps outlived the swept tap", n);
	printf("ok: a surviving tap keeps them until the sweep deletes it\n");
	snprintf(dir + strlen(dir), 8, "/9.lock");
	unlink(dir);
	*strrchr(dir, '/') = '\0';
	rmdir(dir);
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
	test_bare_frames(fd);
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
	test_stale();
	test_maps_die();
	close(fd);
	/* The tap is not persistent: gone with its fd, and its address with it. */
	CHECK(netlink_ifindex(name) == -ENODEV, "%s still exists after close", name);
	printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
	return failures ? 1 : 0;
}
