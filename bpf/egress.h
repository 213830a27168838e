/*
 * egress.h: the contract between the tc egress classifier (bpf/egress.bpf.c)
 * and its userspace loader (vmm/net/egress.c): map key/value layouts, drop
 * reasons, anomaly event records.
 *
 * Included by BPF C (clang -target bpf) and by ordinary userspace C, so it
 * uses only <linux/types.h> fixed-width types and explicit padding: both
 * sides must agree on every byte. Addresses are stored in network byte
 * order exactly as they appear on the wire; ports in host byte order.
 *
 * Every map holding per-VM state is keyed by the ifindex of the guest's tap
 * device (at tc ingress skb->ingress_ifindex == skb->ifindex == the tap; at
 * tc egress skb->ifindex is the tap), so one VM's entries can never match
 * another VM's packets.
 */
#ifndef HUSK_BPF_EGRESS_H
#define HUSK_BPF_EGRESS_H

#include <linux/types.h>

#define EGRESS_MAX_VMS		1024	/* config/counter/state entries */
#define EGRESS_MAX_RULES	16384	/* allow/deny LPM entries, all VMs */
#define EGRESS_MAX_BLOCKS	4096	/* absolute-deny LPM entries, per family */
#define EGRESS_MAX_FLOWS	65536	/* LRU flow table, all VMs */
#define EGRESS_MAX_DSTS		65536	/* LRU distinct-destination table */
#define EGRESS_MAX_DYN		16384	/* DNS-learned addresses, all VMs */
#define EGRESS_MAX_PORT_RANGES	8
#define EGRESS_RINGBUF_BYTES	(64 * 1024)
#define EGRESS_DENIED_MAX	8	/* distinct denied destinations kept per VM */
/*
 * A DNS-learned address outlives its TTL while the guest still uses it: an
 * expired entry whose last passed packet is younger than this is kept (see
 * egress_expire() in vmm/net/egress.h).
 */
#define EGRESS_LIVE_SEC		300

/*
 * Why a packet was dropped: index into egress_counters.drops[]. Append only;
 * userspace prints these names (egress_reason_name()).
 */
enum egress_reason {
	EGRESS_DROP_MALFORMED = 0,	/* truncated/inconsistent L2/L3/L4 header */
	EGRESS_DROP_VLAN,		/* 802.1Q/802.1ad tag (in frame or offloaded) */
	EGRESS_DROP_ETHERTYPE,		/* not IPv4/IPv6/ARP, or IPv6 without a guest v6 */
	EGRESS_DROP_SPOOF_MAC,		/* Ethernet/ARP source MAC is not the guest's */
	EGRESS_DROP_SPOOF_IP,		/* IP/ARP source address is not the guest's */
	EGRESS_DROP_ARP,		/* ARP other than request/reply to the gateway */
	EGRESS_DROP_FRAGMENT,		/* IPv4 fragment / IPv6 fragment header */
	EGRESS_DROP_IP_OPTIONS,		/* IPv4 options; IPv6 ext./unknown next header */
	EGRESS_DROP_DENY_RANGE,		/* destination in the deny list */
	EGRESS_DROP_NOT_ALLOWED,	/* destination in no allow prefix */
	EGRESS_DROP_PORT,		/* allowed prefix, but not this protocol/port */
	EGRESS_DROP_DNS,		/* DNS to anything but the gateway */
	EGRESS_DROP_DOT,		/* DNS over TLS/QUIC (port 853) */
	EGRESS_DROP_ND,			/* ICMPv6 ND not addressed to the gateway */
	EGRESS_DROP_ANOMALY,		/* an anomaly threshold fired for this VM */
	EGRESS_DROP__MAX
};

/* egress_config.flags */
#define EGRESS_CF_IPV6		(1u << 0)	/* guest_ip6/gw_ip6 are valid */

/* Per-VM configuration, key: __u32 ifindex. Zero threshold = no limit. */
struct egress_config {
	__u8 guest_mac[6];
	__u16 flags;			/* EGRESS_CF_* */
	__u32 guest_ip4;		/* network order */
	__u32 gw_ip4;			/* network order; DNS proxy listens here */
	__u8 guest_ip6[16];
	__u8 gw_ip6[16];
	__u32 window_ms;		/* anomaly window length, 0 means 1000 */
	__u32 max_conns_window;		/* new connections/flows per window */
	__u32 max_dsts;			/* distinct destination addresses */
	__u32 pad;
	__u64 max_bytes_total;		/* bytes out, whole VM lifetime */
	__u64 max_bytes_window;		/* bytes out per window */
};

/*
 * Per-VM counters, key: __u32 ifindex; per-CPU: userspace sums the CPUs.
 * packets..drops count what the guest sent (tap ingress, egress_filter);
 * in_* what the host handed to the guest (tap egress, egress_count_in).
 */
struct egress_counters {
	__u64 packets;			/* passed */
	__u64 bytes;			/* passed, whole frames */
	__u64 new_conns;		/* TCP SYN without ACK + new UDP/ICMP flows */
	__u64 dropped;			/* sum of drops[] */
	__u64 drops[EGRESS_DROP__MAX];
	__u64 in_packets;		/* host -> guest frames */
	__u64 in_bytes;			/* host -> guest, whole frames */
};

/* Per-VM anomaly state, key: __u32 ifindex (shared by all CPUs). */
struct egress_state {
	__u64 window_start_ns;
	__u64 window_conns;
	__u64 window_bytes;
	__u64 total_bytes;
	__u64 distinct_dsts;
	__u32 fired;			/* 1 once the anomaly event was sent */
	__u32 pad;
};

/* egress_allow.protos */
#define EGRESS_P_TCP		(1u << 0)
#define EGRESS_P_UDP		(1u << 1)
#define EGRESS_P_ICMP		(1u << 2)	/* ICMP or ICMPv6 */
#define EGRESS_P_ANY		(EGRESS_P_TCP | EGRESS_P_UDP | EGRESS_P_ICMP)

struct egress_port_range {
	__u16 lo, hi;			/* inclusive, host order */
};

/*
 * LPM keys. prefixlen counts the 32 ifindex bits too: an entry for
 * 203.0.113.0/24 of VM 7 is {prefixlen = 32 + 24, ifindex = 7, ...}, so a
 * lookup can never match another VM's rules. ifindex 0 in the deny maps
 * holds entries that apply to every VM (the host's own addresses).
 */
struct egress_lpm4 {
	__u32 prefixlen;
	__u32 ifindex;
	__u32 addr;			/* network order */
};

struct egress_lpm6 {
	__u32 prefixlen;
	__u32 ifindex;
	__u8 addr[16];
};

/*
 * Allow rule value. nranges == 0 means every TCP/UDP port; ICMP has no ports.
 * plen is the rule's own prefix length (without the ifindex bits): an allow
 * rule overrides a deny-list range only when it is at least as specific
 * (allow 10.1.2.3/32 opens that host; allow 0.0.0.0/0 opens no private range).
 */
struct egress_allow {
	__u8 protos;			/* EGRESS_P_* */
	__u8 nranges;
	__u8 plen;
	__u8 pad;
	struct egress_port_range ports[EGRESS_MAX_PORT_RANGES];
};

/*
 * Deny rule value: the rule's own prefix length (see egress_allow.plen), or
 * EGRESS_DENY_ABSOLUTE for a range no allow rule may open.
 */
struct egress_deny {
	__u32 plen;
};

#define EGRESS_DENY_ABSOLUTE	255

/*
 * The block maps (egress_block4/6) hold absolute denies for every VM: husk's
 * own address pool (every VM's gateway and guest address but one's own DNS
 * proxy), the host-wide deny file, and in a husk serve worker run for a
 * client that is not an admin the cloud platform endpoints and the host's
 * own addresses (egress_absolute_builtins()). Keys are egress_lpm4/6 with ifindex 0;
 * a destination matching any entry is dropped whatever the allow rules and
 * learned addresses say. They are separate from the deny maps because an
 * LPM lookup returns only the longest match: a host address (/32, which a
 * /32 allow may open) inside an absolute range would otherwise shadow it.
 */

/*
 * Addresses learned from the VM's DNS proxy answers (--allow-host), an exact
 * match per VM: key {ifindex, family (4 or 6), address}. Checked only after
 * the static rules did not pass a packet, and never for a destination inside
 * a deny range: a name that resolves to 127.0.0.1, a private range or the
 * host's own address stays blocked (DNS rebinding).
 */
struct egress_dyn_key {
	__u32 ifindex;
	__u32 family;			/* 4 or 6 */
	__u8 addr[16];			/* IPv4 in the first 4 bytes */
};

struct egress_dyn {
	struct egress_allow rule;	/* protos + ports; plen unused */
	__u32 pad;
	__u64 expires_ns;		/* CLOCK_MONOTONIC; userspace only */
	__u64 last_ns;			/* last packet this entry passed (BPF) */
};

/*
 * The first EGRESS_DENIED_MAX distinct destinations a VM was refused
 * (reasons deny-range, not-allowed, port, dns, dot), key: __u32 ifindex.
 * count is the number of slots claimed (may overshoot the array by racing
 * CPUs: read at most EGRESS_DENIED_MAX); a slot whose family is still 0 is
 * being written.
 */
struct egress_denied_dst {
	__u8 family;			/* 4 or 6; 0 = not written yet */
	__u8 proto;			/* IPPROTO_* */
	__u16 port;			/* destination port, host order; 0 for ICMP */
	__u32 reason;			/* enum egress_reason */
	__u8 addr[16];			/* IPv4 in the first 4 bytes */
};

struct egress_denied_log {
	__u32 count;
	__u32 pad;
	struct egress_denied_dst dst[EGRESS_DENIED_MAX];
};

/* LRU flow table: which 5-tuples were seen, value: __u64 last-seen ns. */
struct egress_flow_key {
	__u32 ifindex;
	__u8 proto;			/* IPPROTO_* */
	__u8 family;			/* 4 or 6 */
	__u16 sport;			/* ICMP: type */
	__u16 dport;			/* ICMP: echo id */
	__u16 pad;
	__u8 daddr[16];			/* IPv4 in the first 4 bytes */
};

/* LRU table of destinations seen, value: __u8 (unused). */
struct egress_dst_key {
	__u32 ifindex;
	__u32 family;
	__u8 addr[16];
};

/* egress_event.what: the thresholds exceeded when the event fired. */
#define EGRESS_ANOM_CONNS	(1u << 0)
#define EGRESS_ANOM_BYTES_TOTAL	(1u << 1)
#define EGRESS_ANOM_BYTES_WINDOW (1u << 2)
#define EGRESS_ANOM_DSTS	(1u << 3)

/* Ring-buffer record: emitted once per VM, then its traffic is dropped. */
struct egress_event {
	__u32 ifindex;
	__u32 what;			/* EGRESS_ANOM_* */
	__u64 ts_ns;			/* bpf_ktime_get_ns() */
	__u64 window_conns;
	__u64 window_bytes;
	__u64 total_bytes;
	__u64 distinct_dsts;
};

#endif
