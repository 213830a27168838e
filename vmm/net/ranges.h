/*
 * ranges: the destinations husk's egress policy treats specially, as data
 * for decisions taken outside the filter: the filter's built-in deny
 * ranges (the same table as deny4_builtin()/deny6_builtin() in
 * bpf/egress.bpf.c, which tests/bpf/egress-run.c checks against the loaded
 * program), the cloud platform endpoints among them, and the host's own
 * addresses.
 *
 * Users: husk serve's check of what a client that is not an admin may
 * open (serve/api.c), and the absolute denies and DNS check of a worker
 * run for such a client (net/egress.c, run/run_net.c).
 *
 * Pure, except ranges_is_host_addr(), which lists the host's addresses.
 * Addresses are in network order; an IPv4 address is 4 bytes, IPv6 16.
 */
#ifndef HUSK_RANGES_H
#define HUSK_RANGES_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>

#include "bpf/egress.h"

struct net_range {
	int family;			/* AF_INET or AF_INET6 */
	uint8_t addr[16];		/* IPv4 in the first 4 bytes, host bits zero */
	unsigned plen;
	/*
	 * How the filter denies it: the prefix length an allow rule needs to
	 * open it (plen), or EGRESS_DENY_ABSOLUTE when nothing opens it.
	 */
	unsigned strength;
	bool platform;			/* a cloud platform endpoint (a /32 or /128) */
	const char *what;		/* for messages: "loopback", ... */
};

/* The filter's built-in deny ranges, platform endpoints included. */
extern const struct net_range ranges_builtin[];
extern const unsigned ranges_nr_builtin;

/* Does prefix a/alen lie inside b/blen (same family)? */
bool ranges_within(int family, const void *a, unsigned alen, const void *b, unsigned blen);

/*
 * The filter's built-in deny of address addr: the strongest entry of
 * ranges_builtin that holds it (its strength; *which set when which is
 * not NULL), or 0 when none does. As in the filter, the strongest is the
 * longest prefix, and EGRESS_DENY_ABSOLUTE beats every length.
 */
unsigned ranges_builtin_deny(int family, const void *addr, const struct net_range **which);

/* The narrowest built-in range that holds the whole prefix a/alen, or NULL. */
const struct net_range *ranges_builtin_holding(int family, const void *a, unsigned alen);

/*
 * The network and broadcast addresses of the IPv4 subnet of a/plen, which
 * the kernel treats as the host's own for subnets of /30 and wider (RFC
 * 3021: /31 and /32 have neither). False when it has none.
 */
bool ranges_subnet_ends(const struct in_addr *a, unsigned plen, struct in_addr *net,
			struct in_addr *bcast);

/*
 * Is addr one of the host's own addresses, as egress_deny_host_addrs()
 * denies them: an address of one of its interfaces, or the network or
 * broadcast address of one of its IPv4 subnets? 1 or 0; -errno with a
 * husk_seterr() message when the addresses cannot be listed.
 */
int ranges_is_host_addr(int family, const void *addr);

#endif
