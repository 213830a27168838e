/*
 * egress: loader for the eBPF egress filter (bpf/egress.bpf.c).
 *
 * The BPF programs are loaded once per husk process (egress_open) and
 * attached as tc direct-action classifiers on every guest tap
 * (egress_attach): the filter on the tap's ingress (what the guest sends),
 * a counter on its egress (what the guest receives). Everything per VM
 * lives in map entries keyed by the tap's ifindex; egress_detach removes
 * both programs from the tap and every one of those entries.
 * Policy is deny by default: a VM passes DNS to its gateway, ARP/ND for the
 * gateway, and whatever egress_allow_cidr() and egress_allow_addr_ttl()
 * open, minus the deny list and, whatever they open, the absolute denies
 * (egress_block_cidr()).
 *
 * Nothing is pinned in bpffs: the maps and programs live as long as this
 * process holds their fds or a tc filter on some tap still refers to the
 * programs. A husk that dies loses its fds; its tap (not persistent) goes
 * with its last fd and takes the filters along, so no map entry outlives
 * the VM (tests/net/tap-run.c checks both halves of this).
 *
 * Needs root (CAP_BPF + CAP_NET_ADMIN); failures return -errno with a
 * husk_seterr() message. Not thread-safe: call from the event loop thread.
 */
#ifndef HUSK_EGRESS_H
#define HUSK_EGRESS_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>

#include "bpf/egress.h"

struct egress_policy {
	uint8_t guest_mac[6];
	struct in_addr guest_ip4;
	struct in_addr gateway_ip4;	/* DNS (53) is allowed only to this */
	bool has_ip6;
	struct in6_addr guest_ip6;
	struct in6_addr gateway_ip6;	/* DNS + neighbour discovery target */
	/* Anomaly thresholds; 0 = no limit. Exceeding one stops the VM's traffic. */
	uint32_t window_ms;		/* 0 means 1000 */
	uint32_t max_conns_window;	/* new connections per window */
	uint64_t max_bytes_window;	/* bytes out per window */
	uint64_t max_bytes_total;	/* bytes out, lifetime */
	uint32_t max_dsts;		/* distinct destination addresses */
};

typedef void (*egress_event_fn)(const struct egress_event *ev, void *opaque);

/* Load the program and create its maps (idempotent). */
int egress_open(void);
/* Detach nothing, just unload: filters on live taps stay until they vanish. */
void egress_close(void);

/* Fill the config/counter/state entries for ifindex, no tc attach. */
int egress_configure(int ifindex, const struct egress_policy *pol);
/* egress_configure + clsact hook on the tap + attach on its ingress. */
int egress_attach(int ifindex, const struct egress_policy *pol);
/* Remove the tc filter (tap may already be gone) and all entries of ifindex. */
int egress_detach(int ifindex);

/*
 * Allow traffic to addr/prefixlen (family AF_INET or AF_INET6, addr a
 * struct in_addr / in6_addr) for protos (EGRESS_P_*), on the given port
 * ranges (nranges 0 = every port, at most EGRESS_MAX_PORT_RANGES). One rule
 * per prefix: a second call for the same prefix replaces the first.
 */
int egress_allow_cidr(int ifindex, int family, const void *addr,
		      unsigned int prefixlen, unsigned int protos,
		      const struct egress_port_range *ranges, unsigned int nranges);
/*
 * Deny addr/prefixlen (the host's own addresses, --deny); ifindex 0
 * applies to every VM. Allow rules at least as specific still win;
 * learned addresses (egress_allow_addr_ttl) never do.
 */
int egress_deny_cidr(int ifindex, int family, const void *addr,
		     unsigned int prefixlen);
/*
 * Remove the allow (deny false) or deny rule of ifindex for exactly
 * addr/prefixlen, as egress_allow_cidr/egress_deny_cidr made it; a rule
 * that is not there is no error. The filter keeps no connection state: a
 * removed allow stops every packet to it, open connections included.
 */
int egress_remove_cidr(int ifindex, bool deny, int family, const void *addr,
		       unsigned int prefixlen);
/*
 * Deny addr/prefixlen for every VM, absolutely: no allow rule, however
 * specific, and no learned address opens it (husk's own address pool, the
 * host-wide deny file, and with egress_absolute_builtins() the platform
 * endpoints and the host's addresses). DNS to a VM's own gateway, ARP and ND with it are
 * decided before any deny and still pass. Up to EGRESS_MAX_BLOCKS ranges
 * per address family.
 */
int egress_block_cidr(int family, const void *addr, unsigned int prefixlen);

/*
 * Close, for every VM of this process, what husk serve keeps closed to a
 * client that is not an admin whatever its rules say: each cloud platform
 * endpoint (ranges.h) becomes an absolute deny (egress_block_cidr), and so
 * does each host address that egress_deny_host_addrs() and
 * egress_watch_poll() deny from now on (call this first). Without it an
 * allow of exactly such an address opens it. Until egress_close().
 */
int egress_absolute_builtins(void);

/*
 * Deny every address of the host itself, for every VM (ifindex 0 entries):
 * the addresses on all its interfaces (including each VM's gateway address
 * on its tap) and the network and broadcast addresses of its IPv4 subnets
 * of /30 and wider. DNS, ARP and ND to a VM's own gateway still pass
 * (checked before the deny list); an explicit allow of the exact /32 or
 * /128 still opens one, unless egress_absolute_builtins() made them
 * absolute. A snapshot: egress_watch_host_addrs() keeps it up to date.
 * Returns how many addresses were denied, or -errno.
 */
int egress_deny_host_addrs(void);
/*
 * Keep the host's addresses denied while VMs run: subscribe to the host's
 * address announcements (rtnetlink, IPv4 and IPv6), then deny the current
 * addresses (egress_deny_host_addrs), in that order so that none added in
 * between is missed. Returns an fd that is readable when the host's
 * addresses changed (the same fd on later calls), or -errno; egress_close()
 * closes it.
 *
 * egress_watch_poll(), when the fd is readable: deny each address the host
 * gained, as egress_deny_host_addrs() would, reading a bounded number of
 * announcements per call (poll again while the fd stays readable). When
 * the kernel had to drop announcements, the host's addresses are listed
 * anew. Addresses the host loses stay denied (they may still be on another
 * interface; denying a stale one is safe). Returns how many addresses were
 * denied, or -errno: then a new host address may be open to the VMs, and
 * the caller should stop them.
 */
int egress_watch_host_addrs(void);
int egress_watch_poll(void);

/*
 * Allow one address learned from a DNS answer (the DNS proxy's callback)
 * for ttl_sec seconds, to the VM of ifindex only: an exact match, checked
 * after the VM's static rules and never inside a deny range (a name that
 * resolves to a private, loopback or host address stays blocked). protos
 * and ranges as for egress_allow_cidr. The same address again (another
 * name, a fresh answer) merges: protocols and port ranges are united
 * (-E2BIG beyond EGRESS_MAX_PORT_RANGES), the later expiry wins.
 */
int egress_allow_addr_ttl(int ifindex, int family, const void *addr,
			  unsigned int ttl_sec, unsigned int protos,
			  const struct egress_port_range *ranges,
			  unsigned int nranges);
/*
 * Would the filter keep addr closed to ifindex's VM if it were learned
 * (egress_allow_addr_ttl)? 1 when it is inside an absolute deny, or inside
 * a deny range (built-in, the host's addresses, the VM's --deny) that no
 * allow rule of the VM opens; 0 when a learned entry could pass it, or a
 * static rule already does; -errno when the maps cannot be read.
 */
int egress_learn_closed(int ifindex, int family, const void *addr);
/*
 * Remove the learned addresses of ifindex (0: of every VM) whose TTL ran out
 * by now (CLOCK_MONOTONIC microseconds, util.h now_us()), except those still
 * live: the filter passed a packet through the entry within the last
 * EGRESS_LIVE_SEC seconds, so an open connection is not cut when its name's
 * TTL ends. Call it every few seconds. Returns how many were removed.
 */
int egress_expire(int ifindex, uint64_t now);

/*
 * Counters of ifindex summed over CPUs; drops[] by enum egress_reason,
 * in_packets/in_bytes what the host sent to the guest.
 */
int egress_read_counters(int ifindex, struct egress_counters *out);

/*
 * The first distinct destinations (address, protocol, port, reason) the
 * filter refused for ifindex, in order, at most min(n, EGRESS_DENIED_MAX).
 * Returns how many were copied to out, or -errno.
 */
int egress_read_denied(int ifindex, struct egress_denied_dst *out, unsigned int n);

/*
 * Anomaly events: egress_events_fd() is an epoll-able fd (readable when
 * events are pending); egress_events_poll() then calls fn once per event.
 * Returns the number of events consumed or -errno.
 */
int egress_set_event_cb(egress_event_fn fn, void *opaque);
int egress_events_fd(void);
int egress_events_poll(void);

/* For tests (BPF_PROG_TEST_RUN): the loaded programs' fds. */
int egress_prog_fd(void);
int egress_count_prog_fd(void);

const char *egress_reason_name(unsigned int reason);

/*
 * One learned address of ifindex (the DNS proxy's per-VM table keeps
 * them): remove it if it is past its TTL and not live, as egress_expire()
 * would, without walking the map. Returns 1 when removed, 0 when it is
 * still needed, -ENOENT when it is not there, other -errno on failure.
 */
int egress_expire_addr(int ifindex, int family, const void *addr, uint64_t now);

#endif
