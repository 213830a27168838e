/*
 * net-bench: guest -> host throughput and round-trip latency through a tap,
 * with and without husk's eBPF egress filter (tools/bench-net runs it).
 *
 * Sets up a tap the way husk run --net egress does for slot 0 (husk0,
 * 10.200.0.1/30 towards the guest 10.200.0.2) and plays the guest as a VMM
 * would: bare Ethernet frames written to and read from the tap fd. The host side is an ordinary UDP socket on
 * 10.200.0.1. Run in a scratch network namespace: it creates a tap and
 * needs root.
 *
 * Throughput: a burst of UDP datagrams guest -> host, counted by a receiver
 * thread; frames/s and payload MB/s of what arrived. Latency: a UDP echo,
 * guest -> host socket -> back to the guest, timed from the tap write to
 * the tap read of the answer. Each measurement runs several times, bare and
 * with the filter attached (ingress filter + egress counter, an allow rule
 * for the host socket, the host's addresses denied), alternating, and the
 * medians are compared.
 *
 *   net-bench [--runs N] [--frames N] [--pings N]
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "net/egress.h"
#include "net/netlink.h"
#include "net/netpool.h"
#include "net/tap.h"
#include "lib/util.h"

#define L2		14
#define SINK_PORT	5555
#define ECHO_PORT	5556
#define GUEST_PORT	4000
#define MAX_RUNS	15

static int tap_fd, ifindex;
static struct netpool_lease lease;
static uint8_t host_mac[6];
static atomic_ulong received;
static atomic_bool stop;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void put16(uint8_t *p, uint16_t v) { p[0] = v >> 8; p[1] = v; }
static uint16_t get16(const uint8_t *p) { return p[0] << 8 | p[1]; }

static uint16_t csum(const uint8_t *p, size_t len)
{
	uint32_t s = 0;
	size_t i;

	for (i = 0; i + 1 < len; i += 2)
		s += p[i] << 8 | p[i + 1];
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return ~s & 0xffff;
}

/* A UDP frame guest:GUEST_PORT -> host:dport with payload bytes (no UDP csum). */
static size_t udp_frame(uint8_t *f, uint16_t dport, size_t payload)
{
	uint8_t *ip = f + L2, *u = ip + 20;

	memset(f, 0, L2 + 28);
	memcpy(f, host_mac, 6);
	memcpy(f + 6, lease.mac, 6);
	put16(f + 12, 0x0800);
	ip[0] = 0x45;
	put16(ip + 2, 28 + payload);
	ip[6] = 0x40;
	ip[8] = 64;
	ip[9] = IPPROTO_UDP;
	memcpy(ip + 12, &lease.guest, 4);
	memcpy(ip + 16, &lease.host, 4);
	put16(ip + 10, csum(ip, 20));
	put16(u, GUEST_PORT);
	put16(u + 2, dport);
	put16(u + 4, 8 + payload);
	memset(u + 8, 0x5a, payload);
	return L2 + 28 + payload;
}

/* Keep the host's neighbour entry for the guest fresh. */
static void answer_arp(const uint8_t *f, ssize_t n)
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
	memcpy(o, a, 6);
	put16(o + 6, 2);
	memcpy(o + 8, lease.mac, 6);
	memcpy(o + 14, &lease.guest, 4);
	memcpy(o + 18, a + 8, 10);
	if (write(tap_fd, r, sizeof(r)) < 0)
		perror("net-bench: ARP answer");
}

static int learn_host_mac(void)
{
	uint8_t f[L2 + 28], r[2048], *a = f + L2;
	struct pollfd pfd = { .fd = tap_fd, .events = POLLIN };
	double end = now_s() + 3;
	ssize_t n;

	memset(f, 0, sizeof(f));
	memset(f, 0xff, 6);
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
		return -1;
	while (now_s() < end) {
		if (poll(&pfd, 1, 100) <= 0)
			continue;
		while ((n = read(tap_fd, r, sizeof(r))) > 0)
			if (n >= L2 + 28 && get16(r + 12) == 0x0806 &&
			    get16(r + L2 + 6) == 2) {
				memcpy(host_mac, r + L2 + 8, 6);
				return 0;
			}
	}
	return -1;
}

static void *receiver(void *arg)
{
	int s = *(int *)arg;
	char buf[2048];

	while (!atomic_load(&stop))
		if (recv(s, buf, sizeof(buf), 0) > 0)
			atomic_fetch_add(&received, 1);
	return NULL;
}

/* One burst of n frames; returns frames/s that arrived at the host socket. */
static double burst(int sink, size_t payload, unsigned n, double *mbs)
{
	uint8_t f[2048];
	size_t len = udp_frame(f, SINK_PORT, payload);
	unsigned long before, got = 0, last = ~0ul;
	pthread_t t;
	double t0, t1;
	unsigned i;

	atomic_store(&stop, false);
	before = atomic_load(&received);
	pthread_create(&t, NULL, receiver, &sink);
	t0 = now_s();
	for (i = 0; i < n; i++)
		while (write(tap_fd, f, len) != (ssize_t)len)
			if (errno != EAGAIN && errno != ENOBUFS)
				break;
	/* Until the receiver stops seeing new datagrams. */
	while (got != last) {
		last = got;
		usleep(20000);
		got = atomic_load(&received) - before;
	}
	t1 = now_s() - 0.02;
	atomic_store(&stop, true);
	pthread_join(t, NULL);
	*mbs = got * (double)payload / (t1 - t0) / 1e6;
	return got / (t1 - t0);
}

static bool is_echo(const uint8_t *f, ssize_t n)
{
	const uint8_t *ip = f + L2;

	return n >= L2 + 28 && get16(f + 12) == 0x0800 && ip[9] == IPPROTO_UDP &&
	       get16(ip + 20) == ECHO_PORT && get16(ip + 22) == GUEST_PORT;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* n UDP round trips; fills p50/p99 in microseconds. Returns 0 or -1. */
static int echo(int es, unsigned n, double *p50, double *p99)
{
	struct pollfd pfd = { .fd = tap_fd, .events = POLLIN };
	struct sockaddr_in from;
	socklen_t fl;
	uint8_t f[256], r[2048], buf[256];
	size_t len = udp_frame(f, ECHO_PORT, 32);
	double *rtt = calloc(n, sizeof(double)), t0, end;
	unsigned i, lost = 0;
	ssize_t m;

	if (!rtt)
		return -1;
	for (i = 0; i < n; i++) {
		bool done = false;

		t0 = now_s();
		if (write(tap_fd, f, len) != (ssize_t)len)
			return -1;
		fl = sizeof(from);
		m = recvfrom(es, buf, sizeof(buf), 0, (struct sockaddr *)&from, &fl);
		if (m <= 0 || sendto(es, buf, m, 0, (struct sockaddr *)&from, fl) != m) {
			lost++;
			continue;
		}
		for (end = t0 + 1; !done && now_s() < end;) {
			if (poll(&pfd, 1, 100) <= 0)
				continue;
			while (!done && (m = read(tap_fd, r, sizeof(r))) > 0) {
				answer_arp(r, m);
				done = is_echo(r, m);
			}
		}
		if (!done) {
			lost++;
			continue;
		}
		rtt[i - lost] = (now_s() - t0) * 1e6;
	}
	n -= lost;
	if (!n) {
		free(rtt);
		return -1;
	}
	qsort(rtt, n, sizeof(double), cmp_double);
	*p50 = rtt[n / 2];
	*p99 = rtt[n * 99 / 100];
	free(rtt);
	return 0;
}

static int udp_socket(uint16_t port, int rcvbuf, int timeout_ms)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	struct timeval tv = { .tv_sec = timeout_ms / 1000,
			      .tv_usec = (timeout_ms % 1000) * 1000 };
	int s = socket(AF_INET, SOCK_DGRAM, 0);

	sa.sin_addr = lease.host;
	if (s < 0 || bind(s, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return -1;
	if (rcvbuf)
		setsockopt(s, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof(rcvbuf));
	setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return s;
}

static int filter_on(void)
{
	struct egress_policy pol = { 0 };
	struct egress_port_range ports[] = { { SINK_PORT, ECHO_PORT } };
	int err;

	memcpy(pol.guest_mac, lease.mac, 6);
	pol.guest_ip4 = lease.guest;
	pol.gateway_ip4 = lease.host;
	pol.window_ms = 1000;	/* no thresholds: a benchmark floods on purpose */
	err = egress_attach(ifindex, &pol);
	err = err ?: egress_allow_cidr(ifindex, AF_INET, &lease.host, 32, EGRESS_P_UDP,
				       ports, 1);
	if (!err && egress_deny_host_addrs() < 0)
		err = -1;
	return err;
}

/* The kernel's own run-time accounting of a program (BPF_ENABLE_STATS). */
static int prog_stats(int fd, uint64_t *ns, uint64_t *cnt)
{
	struct bpf_prog_info info;
	uint32_t len = sizeof(info);

	memset(&info, 0, sizeof(info));
	if (bpf_obj_get_info_by_fd(fd, &info, &len))
		return -1;
	*ns = info.run_time_ns;
	*cnt = info.run_cnt;
	return 0;
}

static double median(double *v, int n)
{
	qsort(v, n, sizeof(double), cmp_double);
	return n & 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv)
{
	static const size_t sizes[] = { 64, 1400 };
	unsigned frames = 200000, pings = 20000;
	int runs = 5, i, mode, sink, es, k;
	double pps[2][2][MAX_RUNS], mbs[2][2][MAX_RUNS], p50[2][MAX_RUNS], p99[2][MAX_RUNS];
	struct egress_counters c;
	struct netpool pool;
	char name[IFNAMSIZ];
	uint64_t fns = 0, fcnt = 0, cns = 0, ccnt = 0;
	int stats_fd;

	for (i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--runs"))
			runs = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--frames"))
			frames = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--pings"))
			pings = atoi(argv[i + 1]);
	}
	if (runs < 1 || runs > MAX_RUNS || !frames || !pings || i != argc) {
		fprintf(stderr, "usage: net-bench [--runs 1..%d] [--frames N] [--pings N]\n",
			MAX_RUNS);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (netpool_parse(NETPOOL_DEFAULT, &pool) || netpool_lease(&pool, 0, &lease))
		return 1;
	tap_fd = tap_open("husk0", name);
	ifindex = tap_fd >= 0 ? netlink_ifindex(name) : tap_fd;
	if (ifindex < 0 ||
	    netlink_addr_add(ifindex, AF_INET, &lease.host, lease.prefixlen, &lease.guest) ||
	    netlink_link_up(ifindex) || egress_open()) {
		fprintf(stderr, "net-bench: %s\n", husk_lasterr());
		return 1;
	}
	sink = udp_socket(SINK_PORT, 16 << 20, 200);
	es = udp_socket(ECHO_PORT, 0, 1000);
	if (sink < 0 || es < 0 || learn_host_mac()) {
		fprintf(stderr, "net-bench: socket or ARP setup failed\n");
		return 1;
	}
	/* Per-run accounting of BPF programs while this fd is open. */
	stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
	/* Warm up caches, neighbour entries and the page allocator. */
	burst(sink, 1400, frames / 10, &p50[0][0]);
	for (i = 0; i < runs; i++) {
		for (mode = 0; mode < 2; mode++) {
			if (mode && filter_on()) {
				fprintf(stderr, "net-bench: %s\n", husk_lasterr());
				return 1;
			}
			for (k = 0; k < 2; k++)
				pps[mode][k][i] = burst(sink, sizes[k], frames,
							&mbs[mode][k][i]);
			if (echo(es, pings, &p50[mode][i], &p99[mode][i])) {
				fprintf(stderr, "net-bench: echo failed\n");
				return 1;
			}
			if (mode) {
				egress_read_counters(ifindex, &c);
				if (c.dropped)
					printf("note: the filter dropped %llu frames\n",
					       (unsigned long long)c.dropped);
				egress_detach(ifindex);
			}
		}
	}
	if (stats_fd >= 0) {
		prog_stats(egress_prog_fd(), &fns, &fcnt);
		prog_stats(egress_count_prog_fd(), &cns, &ccnt);
		close(stats_fd);
	}
	printf("net-bench: guest -> host through a tap, %d runs each, medians; "
	       "filter = egress filter + in-counter attached\n", runs);
	/*
	 * Ratios are the medians of each run's own ratio: bare and filtered
	 * ran back to back, so load that comes and goes on the machine cancels
	 * out better than in a ratio of overall medians.
	 */
	for (k = 0; k < 2; k++) {
		double r[MAX_RUNS];

		for (i = 0; i < runs; i++)
			r[i] = pps[1][k][i] / pps[0][k][i];
		printf("  UDP %4zu B payload, %u frames: no filter %8.0f frames/s %7.1f MB/s | "
		       "filter %8.0f frames/s %7.1f MB/s | ratio %.3f\n", sizes[k], frames,
		       median(pps[0][k], runs), median(mbs[0][k], runs),
		       median(pps[1][k], runs), median(mbs[1][k], runs), median(r, runs));
	}
	{
		double r50[MAX_RUNS], r99[MAX_RUNS];

		for (i = 0; i < runs; i++) {
			r50[i] = p50[1][i] / p50[0][i];
			r99[i] = p99[1][i] / p99[0][i];
		}
		printf("  UDP echo RTT, %u round trips: no filter p50 %.1f us p99 %.1f us | "
		       "filter p50 %.1f us p99 %.1f us | ratio p50 %.3f p99 %.3f\n", pings,
		       median(p50[0], runs), median(p99[0], runs), median(p50[1], runs),
		       median(p99[1], runs), median(r50, runs), median(r99, runs));
	}
	if (fcnt && ccnt)
		printf("  in the stack (kernel BPF stats): filter %.0f ns/packet over %llu "
		       "packets, in-counter %.0f ns/packet over %llu\n", (double)fns / fcnt,
		       (unsigned long long)fcnt, (double)cns / ccnt, (unsigned long long)ccnt);
	close(sink);
	close(es);
	close(tap_fd);
	egress_close();
	return 0;
}
