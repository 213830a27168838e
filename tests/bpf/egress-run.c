/*
 * egress-run: drives the eBPF egress filter with crafted frames.
 *
 * Loads the program through vmm/egress.c (the same code husk uses),
 * configures fake VMs keyed by made-up ifindexes (no tap is needed:
 * BPF_PROG_TEST_RUN takes the ifindex from ctx.ingress_ifindex), runs frames
 * with bpf_prog_test_run_opts and checks the verdict plus which counter
 * moved. Needs root; exits 77 otherwise. With --bench it also times an
 * allowed TCP packet over 1e6 repetitions.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <linux/pkt_cls.h>

#include "egress.h"
#include "util.h"

#define VM_MAIN		4242
#define VM_SYN		4243
#define VM_BULK		4244

#define PASS		TC_ACT_OK
#define SHOT		TC_ACT_SHOT
#define NONE		(-1)

static const uint8_t guest_mac[6] = { 0x02, 0, 0, 0, 0, 0x02 };
static const uint8_t gw_mac[6] = { 0x02, 0, 0, 0, 0, 0x01 };
static const char *guest4 = "10.0.0.2", *gw4 = "10.0.0.1";
static const char *guest6 = "2001:db8:ff::2", *gw6 = "fe80::1";

static int passed, failed, nevents;
static struct egress_event last_event;

struct frame {
	uint8_t b[256];
	size_t len;
};

/* Options for the frame builders: defaults give a well-formed packet. */
struct opt {
	const uint8_t *src_mac;
	const char *src;	/* source IP */
	uint16_t sport;
	uint8_t tcp_flags;
	int ihl;		/* 0 = 5 */
	uint16_t frag;		/* frag_off field, host order */
	int vlan;
	int hop;		/* IPv6 hop limit, 0 = 64 */
	size_t payload;
};

static size_t put_eth(uint8_t *b, const struct opt *o, uint16_t type)
{
	size_t n = 0;

	memcpy(b, gw_mac, 6);
	memcpy(b + 6, o->src_mac ? o->src_mac : guest_mac, 6);
	n = 12;
	if (o->vlan) {
		b[n++] = 0x81;
		b[n++] = 0x00;
		b[n++] = 0x00;
		b[n++] = 0x05;
	}
	b[n++] = type >> 8;
	b[n++] = type & 0xff;
	return n;
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = v >> 8;
	p[1] = v & 0xff;
}

/* Ethernet + IPv4 + TCP/UDP/ICMP header + payload zeros. */
static struct frame ip4(int proto, const char *dst, uint16_t dport,
			const struct opt *o)
{
	struct frame f;
	size_t e, ihl = o->ihl ? (size_t)o->ihl : 5, l4, l4len;
	uint8_t *ip;

	memset(&f, 0, sizeof(f));
	e = put_eth(f.b, o, 0x0800);
	ip = f.b + e;
	l4len = proto == IPPROTO_TCP ? 20 : 8;
	ip[0] = 0x40 | (ihl & 0xf);
	put16(ip + 2, ihl * 4 + l4len + o->payload);
	put16(ip + 6, o->frag);
	ip[8] = 64;
	ip[9] = proto;
	inet_pton(AF_INET, o->src ? o->src : guest4, ip + 12);
	inet_pton(AF_INET, dst, ip + 16);
	l4 = e + ihl * 4;
	if (proto == IPPROTO_ICMP) {
		f.b[l4] = 8;	/* echo request */
	} else {
		put16(f.b + l4, o->sport ? o->sport : 40000);
		put16(f.b + l4 + 2, dport);
		if (proto == IPPROTO_TCP) {
			f.b[l4 + 12] = 5 << 4;
			f.b[l4 + 13] = o->tcp_flags ? o->tcp_flags : 0x02;
		} else {
			put16(f.b + l4 + 4, 8 + o->payload);
		}
	}
	f.len = l4 + l4len + o->payload;
	return f;
}

/* Ethernet + IPv6 + TCP/UDP/ICMPv6 (8 bytes, or an NS with target). */
static struct frame ip6(int proto, const char *dst, uint16_t dport,
			const struct opt *o, int icmp_type, const char *target)
{
	struct frame f;
	size_t e, l4, l4len;
	uint8_t *ip;

	memset(&f, 0, sizeof(f));
	e = put_eth(f.b, o, 0x86dd);
	ip = f.b + e;
	l4 = e + 40;
	l4len = proto == IPPROTO_TCP ? 20 : (target ? 24 : 8);
	ip[0] = 0x60;
	put16(ip + 4, l4len);
	ip[6] = proto;
	ip[7] = o->hop ? o->hop : 64;
	inet_pton(AF_INET6, o->src ? o->src : guest6, ip + 8);
	inet_pton(AF_INET6, dst, ip + 24);
	if (proto == IPPROTO_ICMPV6) {
		f.b[l4] = icmp_type;
		if (target)
			inet_pton(AF_INET6, target, f.b + l4 + 8);
	} else {
		put16(f.b + l4, 40000);
		put16(f.b + l4 + 2, dport);
		if (proto == IPPROTO_TCP) {
			f.b[l4 + 12] = 5 << 4;
			f.b[l4 + 13] = 0x02;
		}
	}
	f.len = l4 + l4len;
	return f;
}

static struct frame arp(int op, const char *spa, const char *tpa,
			const uint8_t *sha)
{
	struct opt o = { 0 };
	struct frame f;
	size_t e;
	uint8_t *a;

	memset(&f, 0, sizeof(f));
	e = put_eth(f.b, &o, 0x0806);
	a = f.b + e;
	put16(a, 1);
	put16(a + 2, 0x0800);
	a[4] = 6;
	a[5] = 4;
	put16(a + 6, op);
	memcpy(a + 8, sha ? sha : guest_mac, 6);
	inet_pton(AF_INET, spa, a + 14);
	inet_pton(AF_INET, tpa, a + 24);
	f.len = e + 28;
	return f;
}

/* Run a frame; returns the program's verdict or -errno from the kernel. */
static int run(int ifindex, const void *data, size_t len, int repeat,
	       unsigned int *ns)
{
	struct __sk_buff ctx = { .ingress_ifindex = ifindex };
	uint8_t out[512];
	LIBBPF_OPTS(bpf_test_run_opts, opts,
		    .data_in = data, .data_size_in = len,
		    .data_out = out, .data_size_out = sizeof(out),
		    .ctx_in = &ctx, .ctx_size_in = sizeof(ctx),
		    .repeat = repeat);
	int err;

	err = bpf_prog_test_run_opts(egress_prog_fd(), &opts);
	if (err)
		return -errno;
	if (ns)
		*ns = opts.duration;
	return opts.retval;
}

static void result(int ok, const char *name, const char *why)
{
	if (ok) {
		passed++;
		printf("ok   - %s\n", name);
	} else {
		failed++;
		printf("FAIL - %s: %s\n", name, why);
	}
}

/* Run f on vm; expect verdict, and for drops that counter reason moved. */
static void expect(const char *name, int vm, const struct frame *f,
		   int verdict, int reason)
{
	struct egress_counters a, b;
	char why[160];
	int r;

	egress_read_counters(vm, &a);
	r = run(vm, f->b, f->len, 1, NULL);
	egress_read_counters(vm, &b);
	if (r != verdict) {
		snprintf(why, sizeof(why), "verdict %d, want %d (%s)", r, verdict,
			 r < 0 ? strerror(-r) : "");
		result(0, name, why);
		return;
	}
	if (verdict == PASS && b.packets != a.packets + 1) {
		result(0, name, "packet counter did not move");
		return;
	}
	if (verdict == SHOT && reason != NONE &&
	    b.drops[reason] != a.drops[reason] + 1) {
		int i;

		for (i = 0; i < EGRESS_DROP__MAX; i++)
			if (b.drops[i] != a.drops[i])
				break;
		snprintf(why, sizeof(why), "dropped as '%s', want '%s'",
			 i < EGRESS_DROP__MAX ? egress_reason_name(i) : "nothing",
			 egress_reason_name(reason));
		result(0, name, why);
		return;
	}
	result(1, name, NULL);
}

static void on_event(const struct egress_event *ev, void *opaque)
{
	nevents++;
	last_event = *ev;
}

static int setup_vm(int vm, uint32_t max_conns, uint64_t max_total)
{
	struct egress_policy p = { 0 };

	memcpy(p.guest_mac, guest_mac, 6);
	inet_pton(AF_INET, guest4, &p.guest_ip4);
	inet_pton(AF_INET, gw4, &p.gateway_ip4);
	p.has_ip6 = true;
	inet_pton(AF_INET6, guest6, &p.guest_ip6);
	inet_pton(AF_INET6, gw6, &p.gateway_ip6);
	p.window_ms = 60000;
	p.max_conns_window = max_conns;
	p.max_bytes_total = max_total;
	return egress_configure(vm, &p);
}

static int allow(int vm, int fam, const char *cidr, unsigned int plen,
		 unsigned int protos, const struct egress_port_range *r, int n)
{
	uint8_t a[16];

	inet_pton(fam, cidr, a);
	return egress_allow_cidr(vm, fam, a, plen, protos, r, n);
}

static void basic_cases(void)
{
	struct opt o = { 0 }, x;
	struct frame f;

	f = ip4(IPPROTO_TCP, "93.184.216.34", 443, &o);
	expect("allowed CIDR + port passes", VM_MAIN, &f, PASS, NONE);
	f = ip4(IPPROTO_TCP, "93.184.216.34", 22, &o);
	expect("allowed CIDR, wrong port", VM_MAIN, &f, SHOT, EGRESS_DROP_PORT);
	f = ip4(IPPROTO_UDP, "93.184.216.34", 443, &o);
	expect("allowed CIDR, wrong protocol", VM_MAIN, &f, SHOT, EGRESS_DROP_PORT);
	f = ip4(IPPROTO_TCP, "1.1.1.1", 443, &o);
	expect("not allowlisted", VM_MAIN, &f, SHOT, EGRESS_DROP_NOT_ALLOWED);
	f = ip4(IPPROTO_TCP, "169.254.169.254", 80, &o);
	expect("169.254.169.254 (metadata)", VM_MAIN, &f, SHOT, EGRESS_DROP_DENY_RANGE);
	f = ip4(IPPROTO_TCP, "192.168.1.1", 443, &o);
	expect("private 192.168/16", VM_MAIN, &f, SHOT, EGRESS_DROP_DENY_RANGE);
	f = ip4(IPPROTO_TCP, "10.0.0.1", 22, &o);
	expect("gateway ssh (10/8)", VM_MAIN, &f, SHOT, EGRESS_DROP_DENY_RANGE);
	f = ip4(IPPROTO_TCP, "172.20.0.5", 443, &o);
	expect("private 172.16/12", VM_MAIN, &f, SHOT, EGRESS_DROP_DENY_RANGE);
	f = ip4(IPPROTO_TCP, "100.64.0.1", 443, &o);
	expect("CGNAT 100.64/10", VM_MAIN, &f, SHOT, EGRESS_DROP_DENY_RANGE);
	f = ip4(IPPROTO_TCP, "127.0.0.1", 443, &o);
	expect("loopback", VM_MAIN, &f, SHOT, EGRESS_DROP_DENY_RANGE);
	f = ip4(IPPROTO_UDP, "255.255.255.255", 67, &o);
	expect("broadcast", VM_MAIN, &f, SHOT, EGRESS_DROP_DENY_RANGE);
	f = ip4(IPPROTO_UDP, "224.0.0.251", 5353, &o);
	expect("multicast", VM_MAIN, &f, SHOT, EGRESS_DROP_DENY_RANGE);
	f = ip4(IPPROTO_TCP, "192.168.77.10", 5432, &o);
	expect("explicit /32 allow inside 192.168/16", VM_MAIN, &f, PASS, NONE);
	f = ip4(IPPROTO_TCP, "198.51.100.7", 443, &o);
	expect("host's own address (deny map)", VM_MAIN, &f, SHOT, EGRESS_DROP_DENY_RANGE);
	f = ip4(IPPROTO_ICMP, "93.184.216.34", 0, &o);
	expect("ICMP to tcp-only prefix", VM_MAIN, &f, SHOT, EGRESS_DROP_PORT);
	f = ip4(IPPROTO_ICMP, "203.0.113.9", 0, &o);
	expect("ICMP to any-protocol prefix", VM_MAIN, &f, PASS, NONE);

	x = o;
	x.src_mac = (const uint8_t[6]){ 0x02, 0, 0, 0, 0, 0x66 };
	f = ip4(IPPROTO_TCP, "93.184.216.34", 443, &x);
	expect("spoofed source MAC", VM_MAIN, &f, SHOT, EGRESS_DROP_SPOOF_MAC);
	x = o;
	x.src = "10.0.0.66";
	f = ip4(IPPROTO_TCP, "93.184.216.34", 443, &x);
	expect("spoofed source IP", VM_MAIN, &f, SHOT, EGRESS_DROP_SPOOF_IP);

	f = ip4(IPPROTO_UDP, "8.8.8.8", 53, &o);
	expect("DNS/udp to allowlisted 8.8.8.8", VM_MAIN, &f, SHOT, EGRESS_DROP_DNS);
	f = ip4(IPPROTO_TCP, "93.184.216.34", 53, &o);
	expect("DNS/tcp to non-gateway", VM_MAIN, &f, SHOT, EGRESS_DROP_DNS);
	f = ip4(IPPROTO_UDP, gw4, 53, &o);
	expect("DNS/udp to gateway", VM_MAIN, &f, PASS, NONE);
	f = ip4(IPPROTO_TCP, gw4, 53, &o);
	expect("DNS/tcp to gateway", VM_MAIN, &f, PASS, NONE);
	f = ip4(IPPROTO_TCP, "8.8.8.8", 853, &o);
	expect("DoT to allowlisted resolver", VM_MAIN, &f, SHOT, EGRESS_DROP_DOT);
	f = ip4(IPPROTO_TCP, gw4, 853, &o);
	expect("DoT to gateway", VM_MAIN, &f, SHOT, EGRESS_DROP_DOT);

	f = arp(1, guest4, gw4, NULL);
	expect("ARP request for gateway", VM_MAIN, &f, PASS, NONE);
	f = arp(2, guest4, gw4, NULL);
	expect("ARP reply to gateway", VM_MAIN, &f, PASS, NONE);
	f = arp(1, guest4, "10.0.0.3", NULL);
	expect("ARP for another host", VM_MAIN, &f, SHOT, EGRESS_DROP_ARP);
	f = arp(1, "10.0.0.66", gw4, NULL);
	expect("ARP with spoofed sender IP", VM_MAIN, &f, SHOT, EGRESS_DROP_SPOOF_IP);
	f = arp(1, guest4, gw4, (const uint8_t[6]){ 2, 0, 0, 0, 0, 0x66 });
	expect("ARP with spoofed sender MAC", VM_MAIN, &f, SHOT, EGRESS_DROP_SPOOF_MAC);

	f = ip6(IPPROTO_TCP, "2001:db8:1::80", 443, &o, 0, NULL);
	expect("IPv6 allowed prefix", VM_MAIN, &f, PASS, NONE);
	f = ip6(IPPROTO_TCP, "2001:db8:2::80", 443, &o, 0, NULL);
	expect("IPv6 outside the /48 (::/0 is udp/5432 only)", VM_MAIN, &f,
	       SHOT, EGRESS_DROP_PORT);
	f = ip6(IPPROTO_TCP, "::1", 443, &o, 0, NULL);
	expect("IPv6 ::1", VM_MAIN, &f, SHOT, EGRESS_DROP_DENY_RANGE);
	f = ip6(IPPROTO_TCP, "fd12::1", 443, &o, 0, NULL);
	expect("IPv6 fc00::/7 under allow ::/0", VM_MAIN, &f, SHOT, EGRESS_DROP_DENY_RANGE);
	f = ip6(IPPROTO_TCP, "fe80::5", 443, &o, 0, NULL);
	expect("IPv6 fe80::/10 (not ND)", VM_MAIN, &f, SHOT, EGRESS_DROP_DENY_RANGE);
	x = o;
	x.src = "2001:db8:ff::66";
	f = ip6(IPPROTO_TCP, "2001:db8:1::80", 443, &x, 0, NULL);
	expect("IPv6 spoofed source", VM_MAIN, &f, SHOT, EGRESS_DROP_SPOOF_IP);
	x = o;
	x.hop = 255;
	x.src = "fe80::2";
	f = ip6(IPPROTO_ICMPV6, "ff02::1:ff00:1", 0, &x, 135, gw6);
	expect("ND: NS for gateway (solicited-node)", VM_MAIN, &f, PASS, NONE);
	f = ip6(IPPROTO_ICMPV6, gw6, 0, &x, 136, NULL);
	expect("ND: NA to gateway", VM_MAIN, &f, PASS, NONE);
	f = ip6(IPPROTO_ICMPV6, "ff02::2", 0, &x, 133, NULL);
	expect("ND: RS to all-routers", VM_MAIN, &f, PASS, NONE);
	f = ip6(IPPROTO_ICMPV6, "ff02::1:ff00:9", 0, &x, 135, "fe80::9");
	expect("ND: NS for another host", VM_MAIN, &f, SHOT, EGRESS_DROP_ND);
	x.hop = 64;
	f = ip6(IPPROTO_ICMPV6, "ff02::1:ff00:1", 0, &x, 135, gw6);
	expect("ND: hop limit != 255", VM_MAIN, &f, SHOT, EGRESS_DROP_ND);
	f = ip6(IPPROTO_UDP, gw6, 53, &o, 0, NULL);
	expect("IPv6 DNS to gateway", VM_MAIN, &f, PASS, NONE);
	f = ip6(IPPROTO_UDP, "2001:db8:1::53", 53, &o, 0, NULL);
	expect("IPv6 DNS elsewhere", VM_MAIN, &f, SHOT, EGRESS_DROP_DNS);

	/* Malformed and deliberately unsupported shapes. */
	f = ip4(IPPROTO_TCP, "93.184.216.34", 443, &o);
	{
		uint8_t tiny[10];
		struct frame t = f;
		int r;

		memcpy(tiny, f.b, sizeof(tiny));
		r = run(VM_MAIN, tiny, sizeof(tiny), 1, NULL);
		/* The kernel refuses test frames < ETH_HLEN; a real tap too. */
		result(r == -EINVAL || r == SHOT,
		       "truncated Ethernet (10 bytes) never passes",
		       "kernel ran it and it passed");
		/*
		 * BPF_PROG_TEST_RUN itself rejects IPv4/IPv6 frames shorter
		 * than their IP header (-EINVAL), so those checks in the
		 * program can only be reached from a real tap; ARP can.
		 */
		t.len = 14;
		r = run(VM_MAIN, t.b, t.len, 1, NULL);
		result(r == -EINVAL || r == SHOT,
		       "Ethernet header only (IPv4 type) never passes", "passed");
		t.len = 14 + 12;
		r = run(VM_MAIN, t.b, t.len, 1, NULL);
		result(r == -EINVAL || r == SHOT,
		       "truncated IPv4 header never passes", "passed");
		t = arp(1, guest4, gw4, NULL);
		t.len = 14 + 10;
		expect("truncated ARP", VM_MAIN, &t, SHOT, EGRESS_DROP_MALFORMED);
		t = ip6(IPPROTO_TCP, "2001:db8:1::80", 443, &o, 0, NULL);
		t.len = 14 + 40 + 12;
		expect("truncated TCP after IPv6", VM_MAIN, &t, SHOT,
		       EGRESS_DROP_MALFORMED);
		t = ip6(IPPROTO_TCP, "2001:db8:1::80", 443, &o, 0, NULL);
		t.b[14 + 6] = 44;	/* fragment header */
		expect("IPv6 fragment header", VM_MAIN, &t, SHOT,
		       EGRESS_DROP_FRAGMENT);
		t.b[14 + 6] = 0;	/* hop-by-hop options */
		expect("IPv6 extension header", VM_MAIN, &t, SHOT,
		       EGRESS_DROP_IP_OPTIONS);
		t = f;
		t.len = 14 + 20 + 10;
		expect("truncated TCP header", VM_MAIN, &t, SHOT,
		       EGRESS_DROP_MALFORMED);
		t = f;
		t.b[14 + 2] = 0x10;	/* tot_len 4096 > frame */
		expect("IPv4 total length beyond frame", VM_MAIN, &t, SHOT,
		       EGRESS_DROP_MALFORMED);
		t = f;
		t.b[14] = 0x43;		/* IHL 3 */
		expect("bad IHL (3)", VM_MAIN, &t, SHOT, EGRESS_DROP_MALFORMED);
	}
	x = o;
	x.ihl = 6;
	f = ip4(IPPROTO_TCP, "93.184.216.34", 443, &x);
	expect("IPv4 options (IHL 6)", VM_MAIN, &f, SHOT, EGRESS_DROP_IP_OPTIONS);
	x = o;
	x.frag = 0x2000;
	f = ip4(IPPROTO_TCP, "93.184.216.34", 443, &x);
	expect("first fragment (MF)", VM_MAIN, &f, SHOT, EGRESS_DROP_FRAGMENT);
	x.frag = 0x0010;
	f = ip4(IPPROTO_TCP, "93.184.216.34", 443, &x);
	expect("later fragment (offset)", VM_MAIN, &f, SHOT, EGRESS_DROP_FRAGMENT);
	x.frag = 0x4000;
	f = ip4(IPPROTO_TCP, "93.184.216.34", 443, &x);
	expect("DF set is fine", VM_MAIN, &f, PASS, NONE);
	x = o;
	x.vlan = 1;
	f = ip4(IPPROTO_TCP, "93.184.216.34", 443, &x);
	expect("802.1Q tagged frame", VM_MAIN, &f, SHOT, EGRESS_DROP_VLAN);
	f = ip4(IPPROTO_TCP, "93.184.216.34", 443, &o);
	f.b[12] = 0x88;
	f.b[13] = 0xcc;		/* LLDP */
	expect("other ethertype", VM_MAIN, &f, SHOT, EGRESS_DROP_ETHERTYPE);
	{
		struct frame t;
		int r;

		t = ip4(IPPROTO_TCP, "93.184.216.34", 443, &o);
		r = run(9999, t.b, t.len, 1, NULL);
		result(r == SHOT, "unconfigured ifindex is denied", "passed");
	}
}

/* New connections over the window threshold: one event, then drops. */
static void syn_flood(void)
{
	struct opt o = { 0 };
	struct egress_counters c;
	struct frame f;
	int i, passes = 0, ev0 = nevents;

	for (i = 0; i < 30; i++) {
		o.sport = 20000 + i;
		f = ip4(IPPROTO_TCP, "93.184.216.34", 443, &o);
		if (run(VM_SYN, f.b, f.len, 1, NULL) == PASS)
			passes++;
	}
	egress_events_poll();
	egress_read_counters(VM_SYN, &c);
	result(passes == 10, "SYN flood: first 10 SYNs pass", "wrong pass count");
	result(nevents - ev0 == 1 && last_event.ifindex == VM_SYN &&
	       (last_event.what & EGRESS_ANOM_CONNS) &&
	       last_event.window_conns == 11,
	       "SYN flood: exactly one ring-buffer event", "event count/content");
	result(c.drops[EGRESS_DROP_ANOMALY] == 20 && c.new_conns == 10,
	       "SYN flood: rest dropped as anomaly", "counters");
	o.sport = 20000;
	o.tcp_flags = 0x10;
	f = ip4(IPPROTO_TCP, "93.184.216.34", 443, &o);
	expect("SYN flood: established flow dropped afterwards", VM_SYN, &f,
	       SHOT, EGRESS_DROP_ANOMALY);
	f = ip4(IPPROTO_TCP, "93.184.216.34", 443, &o);
	expect("non-flooding VM unaffected", VM_MAIN, &f, PASS, NONE);
}

/* Bulk upload over the byte threshold: one event. */
static void bulk(void)
{
	struct opt o = { .tcp_flags = 0x18, .payload = 200 };
	struct frame f;
	int i, passes = 0, ev0 = nevents;

	f = ip4(IPPROTO_TCP, "93.184.216.34", 443, &o);
	for (i = 0; i < 100; i++)
		if (run(VM_BULK, f.b, f.len, 1, NULL) == PASS)
			passes++;
	egress_events_poll();
	result(passes == (int)(10000 / f.len), "bulk: passes up to the byte limit",
	       "wrong pass count");
	result(nevents - ev0 == 1 && last_event.ifindex == VM_BULK &&
	       (last_event.what & EGRESS_ANOM_BYTES_TOTAL) &&
	       last_event.total_bytes > 10000,
	       "bulk: exactly one ring-buffer event", "event count/content");
}

static void detach_case(void)
{
	struct egress_counters c;
	struct frame f;
	struct opt o = { 0 };

	/* No tap behind VM_BULK: detach must still clear its entries. */
	egress_detach(VM_BULK);
	result(egress_read_counters(VM_BULK, &c) == -ENOENT,
	       "detach removes the VM's entries", "counters still there");
	f = ip4(IPPROTO_TCP, "93.184.216.34", 443, &o);
	result(run(VM_BULK, f.b, f.len, 1, NULL) == SHOT,
	       "detached VM is denied", "passed");
}

static void bench(void)
{
	struct opt o = { .tcp_flags = 0x10 };
	struct frame f = ip4(IPPROTO_TCP, "93.184.216.34", 443, &o);
	unsigned int ns = 0;
	int r;

	r = run(VM_MAIN, f.b, f.len, 1000000, &ns);
	if (r == PASS)
		printf("bench: allowed TCP packet: %u ns/packet (1e6 runs)\n", ns);
	else
		printf("bench: run failed (%d)\n", r);
}

int main(int argc, char **argv)
{
	struct egress_port_range web[] = { { 80, 80 }, { 443, 443 } };
	struct egress_port_range pg[] = { { 5432, 5432 } };
	uint8_t host[4];
	int err;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (geteuid() != 0) {
		printf("SKIP: loading BPF programs needs root\n");
		return 77;
	}
	err = egress_open();
	if (err) {
		printf("SKIP: %s\n", husk_lasterr());
		return err == -EPERM || err == -ENOSYS ? 77 : 1;
	}
	egress_set_event_cb(on_event, NULL);
	err = setup_vm(VM_MAIN, 0, 0) ?: setup_vm(VM_SYN, 10, 0) ?:
	      setup_vm(VM_BULK, 0, 10000);
	err = err ?: allow(VM_MAIN, AF_INET, "93.184.216.0", 24, EGRESS_P_TCP, web, 2);
	err = err ?: allow(VM_MAIN, AF_INET, "8.8.8.8", 32, EGRESS_P_ANY, NULL, 0);
	err = err ?: allow(VM_MAIN, AF_INET, "203.0.113.0", 24, EGRESS_P_ANY, NULL, 0);
	err = err ?: allow(VM_MAIN, AF_INET, "192.168.77.10", 32, EGRESS_P_TCP, pg, 1);
	err = err ?: allow(VM_MAIN, AF_INET, "198.51.100.0", 24, EGRESS_P_TCP, NULL, 0);
	err = err ?: allow(VM_MAIN, AF_INET6, "2001:db8:1::", 48, EGRESS_P_TCP, NULL, 0);
	err = err ?: allow(VM_MAIN, AF_INET6, "::", 0, EGRESS_P_UDP, pg, 1);
	err = err ?: allow(VM_SYN, AF_INET, "93.184.216.0", 24, EGRESS_P_TCP, web, 2);
	err = err ?: allow(VM_BULK, AF_INET, "93.184.216.0", 24, EGRESS_P_TCP, web, 2);
	inet_pton(AF_INET, "198.51.100.7", host);
	err = err ?: egress_deny_cidr(0, AF_INET, host, 32);
	if (err) {
		printf("FAIL: setup: %s\n", husk_lasterr());
		return 1;
	}
	basic_cases();
	syn_flood();
	bulk();
	detach_case();
	if (argc > 1 && strcmp(argv[1], "--bench") == 0)
		bench();
	egress_close();
	printf("bpf: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
