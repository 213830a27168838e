/*
 * egress.bpf.c: deny-by-default egress filter for guest traffic.
 *
 * A tc direct-action classifier on the ingress of each guest's tap device:
 * what the guest transmits arrives there. One loaded program serves every
 * VM; per-VM configuration, rules, counters and anomaly state are map
 * entries keyed by the tap's ifindex (layouts in egress.h). A frame from a
 * tap without a configuration entry is dropped: nothing passes by default.
 *
 * Order of checks for a frame:
 *   1. L2: no VLAN tags, source MAC == guest MAC; ARP only to the gateway.
 *   2. L3: well-formed header, source address == guest address; IPv4
 *      fragments and options, IPv6 extension headers dropped (see below).
 *   3. L4: full TCP/UDP/ICMP header present; ports read.
 *   4. DoT (853) always dropped; DNS (53) passes only to the gateway where
 *      husk's DNS proxy listens, and is dropped to anything else even when an
 *      allow rule covers it (the proxy is where names are policed).
 *   5. Absolute denies (built-in ranges such as loopback, and the block
 *      maps: husk's whole address pool, the host-wide deny file, for a
 *      husk serve client's VM also the platform endpoints and the host's
 *      addresses), which nothing opens; then the deny list (built-in ranges, the cloud
 *      platform endpoints, the host's own addresses, the VM's --deny
 *      prefixes), then the VM's allow LPM trie (protocol + port ranges). An
 *      allow rule overrides a deny range only if it is at least as specific
 *      (egress.h). Only then, and only outside every deny range, the VM's
 *      DNS-learned addresses (exact match, --allow-host).
 *   6. Flow tracking and anomaly thresholds; past the first threshold the VM
 *      gets one ring-buffer event and all its traffic is dropped.
 * A packet refused in step 4 or 5 has its destination noted in the VM's
 * "first denied destinations" log.
 *
 * A second, much smaller program (egress_count_in) sits on the tap's egress,
 * where the host hands frames to the guest, and only counts them.
 *
 * Why IPv4 fragments are dropped: a non-first fragment has no L4 header, so
 * its ports cannot be checked, and a first fragment can be cut short so the
 * ports/flags live in a later one (tiny/overlapping fragment attacks). The
 * guest's MTU is the tap's, its stack does path MTU discovery, so legitimate
 * traffic never needs to leave the guest fragmented. Why IPv4 options are
 * dropped: nothing legitimate from a job needs them, source-route options
 * would let a packet name hops beyond its destination, and a fixed 20-byte
 * header keeps every later offset constant. IPv6 extension headers (incl.
 * the fragment header) are dropped for the same reasons.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "egress.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Deny-range "prefix length" that no allow rule can override. */
#define DENY_HARD	EGRESS_DENY_ABSOLUTE

#define ETH_P_8021Q_	0x8100
#define ETH_P_8021AD_	0x88a8
#define ETH_P_QINQ1_	0x9100

#define IP_MF_		0x2000
#define IP_OFFSET_	0x1fff

#define TCP_SYN_	0x02
#define TCP_ACK_	0x10

#define ICMPV6_RS	133
#define ICMPV6_NS	135
#define ICMPV6_NA	136

/* How much of the frame we want in the linear area: eth + ipv6 + NS. */
#define PULL_LEN	(14 + 40 + 24)

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, EGRESS_MAX_VMS);
	__type(key, __u32);
	__type(value, struct egress_config);
} egress_cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, EGRESS_MAX_VMS);
	__type(key, __u32);
	__type(value, struct egress_counters);
} egress_counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, EGRESS_MAX_VMS);
	__type(key, __u32);
	__type(value, struct egress_state);
} egress_state SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, EGRESS_MAX_RULES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct egress_lpm4);
	__type(value, struct egress_allow);
} egress_allow4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, EGRESS_MAX_RULES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct egress_lpm6);
	__type(value, struct egress_allow);
} egress_allow6 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, EGRESS_MAX_RULES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct egress_lpm4);
	__type(value, struct egress_deny);
} egress_deny4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, EGRESS_MAX_RULES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct egress_lpm6);
	__type(value, struct egress_deny);
} egress_deny6 SEC(".maps");

/* Absolute denies for every VM: a match drops, whatever the allow rules. */
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, EGRESS_MAX_BLOCKS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct egress_lpm4);
	__type(value, struct egress_deny);
} egress_block4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, EGRESS_MAX_BLOCKS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct egress_lpm6);
	__type(value, struct egress_deny);
} egress_block6 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, EGRESS_MAX_FLOWS);
	__type(key, struct egress_flow_key);
	__type(value, __u64);
} egress_flows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, EGRESS_MAX_DSTS);
	__type(key, struct egress_dst_key);
	__type(value, __u8);
} egress_dsts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, EGRESS_MAX_DYN);
	__type(key, struct egress_dyn_key);
	__type(value, struct egress_dyn);
} egress_dyn SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, EGRESS_MAX_VMS);
	__type(key, __u32);
	__type(value, struct egress_denied_log);
} egress_denied SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, EGRESS_RINGBUF_BYTES);
} egress_events SEC(".maps");

/* ARP for IPv4 over Ethernet: the fixed header plus its addresses. */
struct arp4 {
	__be16 htype;
	__be16 ptype;
	__u8 hlen;
	__u8 plen;
	__be16 op;
	__u8 sha[6];
	__u8 spa[4];
	__u8 tha[6];
	__u8 tpa[4];
} __attribute__((packed));

/* What the L3/L4 parse found, handed to the policy stage. */
struct pkt {
	__u8 family;		/* 4 or 6 */
	__u8 proto;		/* IPPROTO_TCP/UDP/ICMP/ICMPV6 */
	__u8 tcp_flags;
	__u8 pad;
	__u16 sport, dport;	/* host order; ICMP: type, echo id */
	__u32 daddr4;		/* network order */
	__u8 daddr6[16];
};

static __always_inline int drop(struct egress_counters *c, __u32 reason)
{
	/* Per-CPU value: plain increments are race-free. */
	if (reason < EGRESS_DROP__MAX) {
		c->drops[reason]++;
		c->dropped++;
	}
	return TC_ACT_SHOT;
}

static __always_inline int mac_eq(const __u8 *a, const __u8 *b)
{
	return a[0] == b[0] && a[1] == b[1] && a[2] == b[2] &&
	       a[3] == b[3] && a[4] == b[4] && a[5] == b[5];
}

static __always_inline int ip6_eq(const __u8 *a, const __u8 *b)
{
	const __u32 *x = (const __u32 *)a, *y = (const __u32 *)b;

	return x[0] == y[0] && x[1] == y[1] && x[2] == y[2] && x[3] == y[3];
}

/*
 * Built-in IPv4 deny ranges; returns the range's prefix length (DENY_HARD for
 * ranges no rule may open) or 0. d is in host order. vmm/net/ranges.c has
 * the same ranges as a table, for decisions taken outside the filter:
 * change both together (tests/bpf/egress-run.c compares them).
 */
static __always_inline __u32 deny4_builtin(__u32 d)
{
	__u32 a = d >> 24;

	if (a == 127 || a == 0 || a >= 224)
		return DENY_HARD;	/* loopback, "this network", mcast, bcast */
	/*
	 * Cloud platform endpoints: only an allow of exactly that address
	 * opens one. Several sit inside wider ranges below (169.254/16,
	 * 100.64/10), which an allow of such a range would open; listed here
	 * they stay closed unless named themselves.
	 */
	switch (d) {
	case 0xa9fea9feu:	/* 169.254.169.254: AWS, GCP, Azure, OCI... metadata */
	case 0xa9feaa02u:	/* 169.254.170.2: AWS ECS task metadata, credentials */
	case 0xa9feaa17u:	/* 169.254.170.23: AWS EKS Pod Identity credentials */
	case 0xa83f8110u:	/* 168.63.129.16: Azure WireServer (a public address) */
	case 0x646464c8u:	/* 100.100.100.200: Alibaba Cloud metadata */
	case 0xc00000c0u:	/* 192.0.0.192: Oracle Cloud Classic metadata */
		return 32;
	}
	if (a == 10)
		return 8;
	if ((d >> 20) == 0xac1)
		return 12;		/* 172.16/12 */
	if ((d >> 16) == 0xc0a8)
		return 16;		/* 192.168/16 */
	if ((d >> 16) == 0xa9fe)
		return 16;		/* 169.254/16 link-local */
	if ((d >> 22) == 0x191)
		return 10;		/* 100.64/10 CGNAT */
	return 0;
}

/*
 * Built-in IPv6 deny ranges, as deny4_builtin(). Besides the local scopes
 * (loopback, link-local, unique-local, multicast) these are the prefixes
 * that carry an IPv4 address a relay or translator would deliver to: they
 * could reach the IPv4 deny ranges through the back door, so only an allow
 * rule at least as specific as the whole translation prefix opens them.
 */
static __always_inline __u32 deny6_builtin(const __u8 *a)
{
	const __u32 *w = (const __u32 *)a;

	if (a[0] == 0xff)
		return DENY_HARD;	/* multicast */
	if (w[0] == 0 && w[1] == 0) {
		if (w[2] == 0 && (w[3] == 0 || w[3] == bpf_htonl(1)))
			return DENY_HARD;	/* :: and ::1 */
		if (w[2] == bpf_htonl(0xffff))
			return DENY_HARD;	/* v4-mapped: not for the wire */
		if (w[2] == 0)
			return 96;	/* ::/96 IPv4-compatible (deprecated) */
	}
	if (w[1] == 0 && w[2] == 0) {
		/* IPv6 cloud platform endpoints, as in deny4_builtin(). */
		if (w[0] == bpf_htonl(0xfd000ec2) &&
		    (w[3] == bpf_htonl(0x254) || w[3] == bpf_htonl(0x23)))
			return 128;	/* fd00:ec2::254 AWS IMDS, ::23 EKS Pod Identity */
		if (w[0] == bpf_htonl(0xfd2000ce) && w[3] == bpf_htonl(0x254))
			return 128;	/* fd20:ce::254 GCP metadata */
		if (w[0] == bpf_htonl(0xfd0000c1) && w[3] == bpf_htonl(0xa9fea9fe))
			return 128;	/* fd00:c1::a9fe:a9fe Oracle Cloud metadata */
	}
	if ((a[0] & 0xfe) == 0xfc)
		return 7;		/* fc00::/7 ULA */
	if (a[0] == 0xfe && (a[1] & 0xc0) == 0x80)
		return 10;		/* fe80::/10 link-local */
	if (a[0] == 0xfe && (a[1] & 0xc0) == 0xc0)
		return 10;		/* fec0::/10 site-local (deprecated) */
	if (w[0] == bpf_htonl(0x0064ff9b)) {
		if (w[1] == 0 && w[2] == 0)
			return 96;	/* 64:ff9b::/96 NAT64 well-known prefix */
		if (a[4] == 0 && a[5] == 1)
			return 48;	/* 64:ff9b:1::/48 local-use NAT64 */
	}
	if (w[0] == bpf_htonl(0x01000000) && w[1] == 0)
		return 64;		/* 100::/64 discard-only */
	if (a[0] == 0x20 && a[1] == 0x02)
		return 16;		/* 2002::/16 6to4 */
	if (w[0] == bpf_htonl(0x20010000))
		return 32;		/* 2001::/32 Teredo */
	return 0;
}

static __always_inline int ports_ok(const struct egress_allow *al, __u16 port)
{
	__u32 i, n = al->nranges;

	if (n == 0)
		return 1;
	if (n > EGRESS_MAX_PORT_RANGES)
		n = EGRESS_MAX_PORT_RANGES;
#pragma unroll
	for (i = 0; i < EGRESS_MAX_PORT_RANGES; i++) {
		if (i >= n)
			break;
		if (port >= al->ports[i].lo && port <= al->ports[i].hi)
			return 1;
	}
	return 0;
}

/* The allow rule's protocol/port check; al is the LPM match. */
static __always_inline int rule_ok(const struct egress_allow *al,
				   const struct pkt *p)
{
	switch (p->proto) {
	case IPPROTO_TCP:
		return (al->protos & EGRESS_P_TCP) && ports_ok(al, p->dport);
	case IPPROTO_UDP:
		return (al->protos & EGRESS_P_UDP) && ports_ok(al, p->dport);
	default:
		return !!(al->protos & EGRESS_P_ICMP);
	}
}

/*
 * Deny list + allow trie + DNS-learned addresses. Returns -1 when the packet
 * may pass, else the drop reason.
 */
static __always_inline int policy(__u32 ifindex, const struct pkt *p)
{
	struct egress_dyn_key dk = { .ifindex = ifindex, .family = p->family };
	struct egress_allow *al;
	struct egress_deny *dn;
	struct egress_dyn *dyn;
	__u32 deny;

	if (p->family == 4) {
		struct egress_lpm4 k = { .prefixlen = 64, .ifindex = ifindex,
					 .addr = p->daddr4 };

		deny = deny4_builtin(bpf_ntohl(p->daddr4));
		if (deny == DENY_HARD)
			return EGRESS_DROP_DENY_RANGE;
		dn = bpf_map_lookup_elem(&egress_deny4, &k);
		if (dn && dn->plen > deny)
			deny = dn->plen;
		k.ifindex = 0;
		if (bpf_map_lookup_elem(&egress_block4, &k))
			return EGRESS_DROP_DENY_RANGE;
		dn = bpf_map_lookup_elem(&egress_deny4, &k);
		if (dn && dn->plen > deny)
			deny = dn->plen;
		k.ifindex = ifindex;
		al = bpf_map_lookup_elem(&egress_allow4, &k);
		__builtin_memcpy(dk.addr, &p->daddr4, 4);
	} else {
		struct egress_lpm6 k = { .prefixlen = 160, .ifindex = ifindex };

		__builtin_memcpy(k.addr, p->daddr6, 16);
		deny = deny6_builtin(p->daddr6);
		if (deny == DENY_HARD)
			return EGRESS_DROP_DENY_RANGE;
		dn = bpf_map_lookup_elem(&egress_deny6, &k);
		if (dn && dn->plen > deny)
			deny = dn->plen;
		k.ifindex = 0;
		if (bpf_map_lookup_elem(&egress_block6, &k))
			return EGRESS_DROP_DENY_RANGE;
		dn = bpf_map_lookup_elem(&egress_deny6, &k);
		if (dn && dn->plen > deny)
			deny = dn->plen;
		k.ifindex = ifindex;
		al = bpf_map_lookup_elem(&egress_allow6, &k);
		__builtin_memcpy(dk.addr, p->daddr6, 16);
	}
	if (deny && (!al || al->plen < deny))
		return EGRESS_DROP_DENY_RANGE;
	if (al && rule_ok(al, p))
		return -1;
	/*
	 * A DNS-learned address never opens anything inside a deny range,
	 * not even next to a static rule that opened part of that range for
	 * other ports: only an explicit --allow may reach private space.
	 */
	dyn = deny ? NULL : bpf_map_lookup_elem(&egress_dyn, &dk);
	if (dyn && rule_ok(&dyn->rule, p)) {
		dyn->last_ns = bpf_ktime_get_ns();
		return -1;
	}
	if (!al && !dyn)
		return EGRESS_DROP_NOT_ALLOWED;
	return EGRESS_DROP_PORT;
}

/*
 * Note a refused destination in the VM's log if it is new and there is room.
 * Two CPUs refusing the same new destination at once may both note it;
 * userspace folds such duplicates when it reads the log.
 */
static __always_inline void note_denied(__u32 ifindex, const struct pkt *p,
					__u32 reason)
{
	struct egress_denied_log *log;
	struct egress_denied_dst *d;
	__u16 port = 0;
	__u32 i, n, slot;
	__u8 addr[16] __attribute__((aligned(4))) = {};

	log = bpf_map_lookup_elem(&egress_denied, &ifindex);
	if (!log)
		return;
	n = log->count;
	if (n >= EGRESS_DENIED_MAX)
		return;
	if (p->proto == IPPROTO_TCP || p->proto == IPPROTO_UDP)
		port = p->dport;
	if (p->family == 4)
		__builtin_memcpy(addr, &p->daddr4, 4);
	else
		__builtin_memcpy(addr, p->daddr6, 16);
	for (i = 0; i < EGRESS_DENIED_MAX; i++) {
		if (i >= n)
			break;
		d = &log->dst[i];
		if (d->family == p->family && d->proto == p->proto &&
		    d->port == port && ip6_eq(d->addr, addr))
			return;
	}
	slot = __sync_fetch_and_add(&log->count, 1);
	if (slot >= EGRESS_DENIED_MAX)
		return;
	d = &log->dst[slot];
	d->proto = p->proto;
	d->port = port;
	d->reason = reason;
	__builtin_memcpy(d->addr, addr, 16);
	d->family = p->family;	/* last: marks the slot complete */
}

/*
 * Flow tracking and anomaly thresholds for a packet that passed policy.
 * Returns 0 to pass, 1 to drop (the VM's anomaly has fired).
 */
static __always_inline int track(__u32 ifindex, const struct egress_config *cfg,
				 struct egress_counters *c, const struct pkt *p,
				 __u64 len)
{
	struct egress_flow_key fk = {};
	struct egress_dst_key dk = {};
	struct egress_state *st;
	struct egress_event *ev;
	__u64 now = bpf_ktime_get_ns(), win, conns, wbytes, total, dsts;
	__u64 *seen;
	__u32 what = 0;
	int is_new = 0;
	__u8 one = 1;

	st = bpf_map_lookup_elem(&egress_state, &ifindex);
	if (!st)
		return 1;
	if (st->fired)
		return 1;

	fk.ifindex = ifindex;
	fk.proto = p->proto;
	fk.family = p->family;
	fk.sport = p->sport;
	fk.dport = p->dport;
	dk.ifindex = ifindex;
	dk.family = p->family;
	if (p->family == 4) {
		__builtin_memcpy(fk.daddr, &p->daddr4, 4);
		__builtin_memcpy(dk.addr, &p->daddr4, 4);
	} else {
		__builtin_memcpy(fk.daddr, p->daddr6, 16);
		__builtin_memcpy(dk.addr, p->daddr6, 16);
	}

	/*
	 * A TCP connection is new when the guest sends SYN without ACK (a
	 * retransmitted SYN counts again: conservative). Other protocols have
	 * no handshake, so a 5-tuple missing from the LRU table is a new flow.
	 */
	seen = bpf_map_lookup_elem(&egress_flows, &fk);
	if (p->proto == IPPROTO_TCP)
		is_new = (p->tcp_flags & (TCP_SYN_ | TCP_ACK_)) == TCP_SYN_;
	else
		is_new = !seen;
	if (seen)
		*seen = now;
	else
		bpf_map_update_elem(&egress_flows, &fk, &now, BPF_ANY);

	/*
	 * The window is reset by whichever CPU notices it expired; two CPUs
	 * racing on the reset can lose a few counts of one window, which only
	 * delays detection by a packet or two.
	 */
	win = (__u64)(cfg->window_ms ? cfg->window_ms : 1000) * 1000000ull;
	if (now - st->window_start_ns >= win) {
		st->window_start_ns = now;
		st->window_conns = 0;
		st->window_bytes = 0;
	}
	if (is_new) {
		conns = __sync_add_and_fetch(&st->window_conns, 1);
	} else {
		conns = st->window_conns;
	}
	wbytes = __sync_add_and_fetch(&st->window_bytes, len);
	total = __sync_add_and_fetch(&st->total_bytes, len);
	/*
	 * Look before inserting: an LRU map's update takes a node off its
	 * free list before it finds the key exists, which costs more than the
	 * lookup that almost every packet of a known destination needs.
	 */
	if (!bpf_map_lookup_elem(&egress_dsts, &dk) &&
	    bpf_map_update_elem(&egress_dsts, &dk, &one, BPF_NOEXIST) == 0)
		dsts = __sync_add_and_fetch(&st->distinct_dsts, 1);
	else
		dsts = st->distinct_dsts;

	if (cfg->max_conns_window && conns > cfg->max_conns_window)
		what |= EGRESS_ANOM_CONNS;
	if (cfg->max_bytes_total && total > cfg->max_bytes_total)
		what |= EGRESS_ANOM_BYTES_TOTAL;
	if (cfg->max_bytes_window && wbytes > cfg->max_bytes_window)
		what |= EGRESS_ANOM_BYTES_WINDOW;
	if (cfg->max_dsts && dsts > cfg->max_dsts)
		what |= EGRESS_ANOM_DSTS;
	if (!what) {
		/* Counted only once let through: the figure users read. */
		if (is_new)
			c->new_conns++;
		return 0;
	}

	/* Exactly one CPU wins the 0 -> 1 transition and reports. */
	if (__sync_val_compare_and_swap(&st->fired, 0, 1) != 0)
		return 1;
	ev = bpf_ringbuf_reserve(&egress_events, sizeof(*ev), 0);
	if (ev) {
		ev->ifindex = ifindex;
		ev->what = what;
		ev->ts_ns = now;
		ev->window_conns = conns;
		ev->window_bytes = wbytes;
		ev->total_bytes = total;
		ev->distinct_dsts = dsts;
		bpf_ringbuf_submit(ev, 0);
	}
	return 1;
}

/* ARP: only a request for, or a reply to, the gateway from the guest. */
static __always_inline int do_arp(void *data, void *data_end,
				  const struct egress_config *cfg,
				  struct egress_counters *c, const __u8 *eth_src)
{
	struct arp4 *a = data + sizeof(struct ethhdr);

	if ((void *)(a + 1) > data_end)
		return drop(c, EGRESS_DROP_MALFORMED);
	if (a->htype != bpf_htons(1) || a->ptype != bpf_htons(ETH_P_IP) ||
	    a->hlen != 6 || a->plen != 4)
		return drop(c, EGRESS_DROP_ARP);
	if (a->op != bpf_htons(1) && a->op != bpf_htons(2))
		return drop(c, EGRESS_DROP_ARP);
	if (!mac_eq(a->sha, cfg->guest_mac) || !mac_eq(eth_src, cfg->guest_mac))
		return drop(c, EGRESS_DROP_SPOOF_MAC);
	if (__builtin_memcmp(a->spa, &cfg->guest_ip4, 4) != 0)
		return drop(c, EGRESS_DROP_SPOOF_IP);
	if (__builtin_memcmp(a->tpa, &cfg->gw_ip4, 4) != 0)
		return drop(c, EGRESS_DROP_ARP);
	return -1;
}

/* Read the L4 header at l4 (l4len bytes left in the IP datagram) into p. */
static __always_inline int parse_l4(void *l4, void *data_end, __u32 l4len,
				    struct pkt *p)
{
	__u8 *b = l4;

	switch (p->proto) {
	case IPPROTO_TCP:
		if (l4 + 20 > data_end || l4len < 20 || (b[12] >> 4) < 5)
			return EGRESS_DROP_MALFORMED;
		p->sport = ((__u16)b[0] << 8) | b[1];
		p->dport = ((__u16)b[2] << 8) | b[3];
		p->tcp_flags = b[13];
		return -1;
	case IPPROTO_UDP:
		if (l4 + 8 > data_end || l4len < 8)
			return EGRESS_DROP_MALFORMED;
		p->sport = ((__u16)b[0] << 8) | b[1];
		p->dport = ((__u16)b[2] << 8) | b[3];
		return -1;
	case IPPROTO_ICMP:
	case IPPROTO_ICMPV6:
		if (l4 + 8 > data_end || l4len < 8)
			return EGRESS_DROP_MALFORMED;
		p->sport = b[0];			/* type */
		p->dport = ((__u16)b[4] << 8) | b[5];	/* echo id */
		return -1;
	}
	return EGRESS_DROP_IP_OPTIONS;	/* unknown protocol / ext. header */
}

/* IPv4 header checks; fills p. Returns -1 when well-formed. */
static __always_inline int do_ip4(void *data, void *data_end, __u32 frame_len,
				  const struct egress_config *cfg, struct pkt *p)
{
	struct iphdr *ip = data + sizeof(struct ethhdr);
	__u32 tot;

	if ((void *)(ip + 1) > data_end)
		return EGRESS_DROP_MALFORMED;
	if (ip->version != 4 || ip->ihl < 5)
		return EGRESS_DROP_MALFORMED;
	if (ip->ihl != 5)
		return EGRESS_DROP_IP_OPTIONS;
	tot = bpf_ntohs(ip->tot_len);
	if (tot < 20 || tot > frame_len - sizeof(struct ethhdr))
		return EGRESS_DROP_MALFORMED;
	if (ip->saddr != cfg->guest_ip4)
		return EGRESS_DROP_SPOOF_IP;
	if (ip->frag_off & bpf_htons(IP_MF_ | IP_OFFSET_))
		return EGRESS_DROP_FRAGMENT;
	p->family = 4;
	p->proto = ip->protocol;
	p->daddr4 = ip->daddr;
	if (p->proto != IPPROTO_TCP && p->proto != IPPROTO_UDP &&
	    p->proto != IPPROTO_ICMP)
		return EGRESS_DROP_NOT_ALLOWED;
	return parse_l4((void *)(ip + 1), data_end, tot - 20, p);
}

/*
 * ICMPv6 neighbour discovery to the gateway: router solicitation, neighbour
 * solicitation for the gateway's address, neighbour advertisement to the
 * gateway. Hop limit must be 255 (RFC 4861: proves it was not routed). The
 * source may be the guest's address, a link-local address (the kernel uses
 * its fe80:: for ND) or :: (duplicate address detection).
 * Returns -1 to pass, a drop reason, or -2 when this is not ND at all.
 */
static __always_inline int do_nd(struct ipv6hdr *ip6, void *data_end,
				 const struct egress_config *cfg)
{
	__u8 *icmp = (__u8 *)(ip6 + 1);
	__u8 *src = ip6->saddr.in6_u.u6_addr8;
	__u8 *dst = ip6->daddr.in6_u.u6_addr8;
	const __u8 *gw = cfg->gw_ip6;
	int to_gw, to_gw_snm;
	__u8 type;

	if ((void *)(icmp + 8) > data_end)
		return EGRESS_DROP_MALFORMED;
	type = icmp[0];
	if (type != ICMPV6_RS && type != ICMPV6_NS && type != ICMPV6_NA)
		return -2;
	if (ip6->hop_limit != 255)
		return EGRESS_DROP_ND;
	if (!ip6_eq(src, cfg->guest_ip6) &&
	    !(src[0] == 0xfe && (src[1] & 0xc0) == 0x80)) {
		const __u32 *w = (const __u32 *)src;

		if (w[0] | w[1] | w[2] | w[3])
			return EGRESS_DROP_SPOOF_IP;
	}
	to_gw = ip6_eq(dst, gw);
	/* Solicited-node multicast ff02::1:ffXX:XXXX of the gateway. */
	to_gw_snm = dst[0] == 0xff && dst[1] == 0x02 && dst[11] == 0x01 &&
		    dst[12] == 0xff && dst[13] == gw[13] && dst[14] == gw[14] &&
		    dst[15] == gw[15];
	if (to_gw_snm) {
		const __u32 *w = (const __u32 *)dst;

		to_gw_snm = w[1] == 0 && dst[2] == 0 && dst[3] == 0 &&
			    dst[8] == 0 && dst[9] == 0 && dst[10] == 0;
	}
	switch (type) {
	case ICMPV6_RS: {
		/* ff02::2 all-routers, or the gateway itself. */
		const __u32 *w = (const __u32 *)dst;

		if (to_gw || (w[0] == bpf_htonl(0xff020000) && w[1] == 0 &&
			      w[2] == 0 && w[3] == bpf_htonl(2)))
			return -1;
		return EGRESS_DROP_ND;
	}
	case ICMPV6_NS:
		if ((void *)(icmp + 24) > data_end)
			return EGRESS_DROP_MALFORMED;
		if (!ip6_eq(icmp + 8, gw))
			return EGRESS_DROP_ND;
		return (to_gw || to_gw_snm) ? -1 : EGRESS_DROP_ND;
	default:	/* NA */
		return to_gw ? -1 : EGRESS_DROP_ND;
	}
}

/* IPv6 header checks; fills p. Returns -1 to go on, -3 for passing ND. */
static __always_inline int do_ip6(void *data, void *data_end, __u32 frame_len,
				  const struct egress_config *cfg, struct pkt *p)
{
	struct ipv6hdr *ip6 = data + sizeof(struct ethhdr);
	__u32 plen;
	int r;

	if (!(cfg->flags & EGRESS_CF_IPV6))
		return EGRESS_DROP_ETHERTYPE;
	if ((void *)(ip6 + 1) > data_end)
		return EGRESS_DROP_MALFORMED;
	if (ip6->version != 6)
		return EGRESS_DROP_MALFORMED;
	plen = bpf_ntohs(ip6->payload_len);
	if (plen > frame_len - sizeof(struct ethhdr) - sizeof(*ip6))
		return EGRESS_DROP_MALFORMED;
	if (ip6->nexthdr == 44)
		return EGRESS_DROP_FRAGMENT;
	if (ip6->nexthdr == IPPROTO_ICMPV6) {
		r = do_nd(ip6, data_end, cfg);
		if (r == -1)
			return -3;
		if (r != -2)
			return r;
	}
	if (!ip6_eq(ip6->saddr.in6_u.u6_addr8, cfg->guest_ip6))
		return EGRESS_DROP_SPOOF_IP;
	p->family = 6;
	p->proto = ip6->nexthdr;
	__builtin_memcpy(p->daddr6, ip6->daddr.in6_u.u6_addr8, 16);
	return parse_l4((void *)(ip6 + 1), data_end, plen, p);
}

SEC("tc")
int egress_filter(struct __sk_buff *skb)
{
	/*
	 * At tc ingress skb->ingress_ifindex is the tap the frame came in on;
	 * BPF_PROG_TEST_RUN lets tests set it directly (skb->ifindex there is
	 * always a real device such as loopback).
	 */
	__u32 ifindex = skb->ingress_ifindex;
	struct egress_config *cfg;
	struct egress_counters *c;
	struct pkt p = {};
	void *data, *data_end;
	struct ethhdr *eth;
	__u16 proto;
	int r;

	cfg = bpf_map_lookup_elem(&egress_cfg, &ifindex);
	c = bpf_map_lookup_elem(&egress_counters, &ifindex);
	if (!cfg || !c)
		return TC_ACT_SHOT;	/* not a configured VM: deny */

	/* Headers may sit in paged data (tun pages the tail of large frames). */
	if (skb->data_end - skb->data < PULL_LEN)
		bpf_skb_pull_data(skb, skb->len < PULL_LEN ? skb->len : PULL_LEN);
	data = (void *)(long)skb->data;
	data_end = (void *)(long)skb->data_end;
	eth = data;
	if ((void *)(eth + 1) > data_end)
		return drop(c, EGRESS_DROP_MALFORMED);

	/*
	 * VLAN tags are dropped: the guest has no business on other VLANs, and
	 * a tag would hide the real ethertype from the checks below. The stack
	 * strips a tag into skb->vlan_tci before tc ingress, so look there too.
	 */
	proto = bpf_ntohs(eth->h_proto);
	if (skb->vlan_present || proto == ETH_P_8021Q_ ||
	    proto == ETH_P_8021AD_ || proto == ETH_P_QINQ1_)
		return drop(c, EGRESS_DROP_VLAN);
	if (!mac_eq(eth->h_source, cfg->guest_mac))
		return drop(c, EGRESS_DROP_SPOOF_MAC);

	switch (proto) {
	case ETH_P_ARP:
		r = do_arp(data, data_end, cfg, c, eth->h_source);
		if (r != -1)
			return r;
		goto pass;	/* ARP is not subject to the flow anomalies */
	case ETH_P_IP:
		r = do_ip4(data, data_end, skb->len, cfg, &p);
		break;
	case ETH_P_IPV6:
		r = do_ip6(data, data_end, skb->len, cfg, &p);
		if (r == -3)
			goto pass;
		break;
	default:
		return drop(c, EGRESS_DROP_ETHERTYPE);
	}
	if (r != -1)
		return drop(c, r);

	if (p.proto == IPPROTO_TCP || p.proto == IPPROTO_UDP) {
		if (p.dport == 853) {
			r = EGRESS_DROP_DOT;
			goto refused;
		}
		if (p.dport == 53) {
			int to_gw = p.family == 4 ? p.daddr4 == cfg->gw_ip4 :
					ip6_eq(p.daddr6, cfg->gw_ip6);

			if (!to_gw) {
				r = EGRESS_DROP_DNS;
				goto refused;
			}
			goto track;
		}
	}
	r = policy(ifindex, &p);
	if (r != -1)
		goto refused;
track:
	if (track(ifindex, cfg, c, &p, skb->len))
		return drop(c, EGRESS_DROP_ANOMALY);
pass:
	c->packets++;
	c->bytes += skb->len;
	return TC_ACT_OK;
refused:
	note_denied(ifindex, &p, r);
	return drop(c, r);
}

/*
 * On the tap's egress: frames the host hands to the guest. Only counted,
 * never dropped here (what reaches the tap was routed to the guest's /30).
 * skb->ifindex is the tap at tc egress; BPF_PROG_TEST_RUN sets it from
 * ctx.ifindex (a real device).
 */
SEC("tc")
int egress_count_in(struct __sk_buff *skb)
{
	__u32 ifindex = skb->ifindex;
	struct egress_counters *c;

	c = bpf_map_lookup_elem(&egress_counters, &ifindex);
	if (c) {
		c->in_packets++;
		c->in_bytes += skb->len;
	}
	return TC_ACT_OK;
}
