/*
 * egress: loader for the eBPF egress filter (bpf/egress.bpf.c).
 *
 * The BPF program is loaded once per husk process (egress_open) and attached
 * as a tc direct-action classifier on the ingress of every guest tap
 * (egress_attach). Everything per VM lives in map entries keyed by the tap's
 * ifindex; egress_detach removes the filter and every one of those entries.
 * Policy is deny by default: a VM passes DNS to its gateway, ARP/ND for the
 * gateway, and whatever egress_allow_cidr() opens, minus the deny list.
 *
 * Needs root (CAP_BPF + CAP_NET_ADMIN); failures return -errno with a
 * husk_seterr() message. Not thread-safe: call from the event loop thread.
 */
#ifndef HUSK_EGRESS_H
#define HUSK_EGRESS_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>

#include "../bpf/egress.h"

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
 * Deny addr/prefixlen (the host's own addresses and the like); ifindex 0
 * applies to every VM. Allow rules at least as specific still win.
 */
int egress_deny_cidr(int ifindex, int family, const void *addr,
		     unsigned int prefixlen);

/* Counters of ifindex summed over CPUs; drops[] by enum egress_reason. */
int egress_read_counters(int ifindex, struct egress_counters *out);

/*
 * Anomaly events: egress_events_fd() is an epoll-able fd (readable when
 * events are pending); egress_events_poll() then calls fn once per event.
 * Returns the number of events consumed or -errno.
 */
int egress_set_event_cb(egress_event_fn fn, void *opaque);
int egress_events_fd(void);
int egress_events_poll(void);

/* For tests (BPF_PROG_TEST_RUN): the loaded program's fd. */
int egress_prog_fd(void);

const char *egress_reason_name(unsigned int reason);

#endif
