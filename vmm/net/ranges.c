/*
 * ranges: the special destinations of the egress policy, as data. See
 * ranges.h.
 *
 * The table mirrors deny4_builtin() and deny6_builtin() in
 * bpf/egress.bpf.c entry for entry: the program decides with a few
 * comparisons per packet, this side with a loop over the table. A change
 * to one is a change to the other (tests/bpf/egress-run.c runs every entry
 * through the loaded program).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <string.h>
#include <sys/socket.h>

#include "lib/util.h"
#include "net/ranges.h"

#define ABS EGRESS_DENY_ABSOLUTE
#define V4(a, b, c, d) { a, b, c, d }

const struct net_range ranges_builtin[] = {
	{ AF_INET, V4(0, 0, 0, 0), 8, ABS, false, "\"this network\" (0/8)" },
	{ AF_INET, V4(127, 0, 0, 0), 8, ABS, false, "loopback" },
	{ AF_INET, V4(224, 0, 0, 0), 3, ABS, false, "multicast, reserved or broadcast" },
	{ AF_INET, V4(10, 0, 0, 0), 8, 8, false, "a private network (RFC 1918)" },
	{ AF_INET, V4(172, 16, 0, 0), 12, 12, false, "a private network (RFC 1918)" },
	{ AF_INET, V4(192, 168, 0, 0), 16, 16, false, "a private network (RFC 1918)" },
	{ AF_INET, V4(169, 254, 0, 0), 16, 16, false, "link-local" },
	{ AF_INET, V4(100, 64, 0, 0), 10, 10, false, "shared address space (CGNAT)" },
	{ AF_INET, V4(169, 254, 169, 254), 32, 32, true, "a cloud platform endpoint "
	  "(instance metadata)" },
	{ AF_INET, V4(169, 254, 170, 2), 32, 32, true, "a cloud platform endpoint "
	  "(AWS ECS task metadata)" },
	{ AF_INET, V4(169, 254, 170, 23), 32, 32, true, "a cloud platform endpoint "
	  "(AWS EKS Pod Identity)" },
	{ AF_INET, V4(168, 63, 129, 16), 32, 32, true, "a cloud platform endpoint "
	  "(Azure WireServer)" },
	{ AF_INET, V4(100, 100, 100, 200), 32, 32, true, "a cloud platform endpoint "
	  "(Alibaba Cloud metadata)" },
	{ AF_INET, V4(192, 0, 0, 192), 32, 32, true, "a cloud platform endpoint "
	  "(Oracle Cloud Classic metadata)" },
	{ AF_INET6, { 0xff }, 8, ABS, false, "multicast" },
	{ AF_INET6, { 0 }, 128, ABS, false, "the unspecified address" },
	{ AF_INET6, { [15] = 1 }, 128, ABS, false, "loopback" },
	{ AF_INET6, { [10] = 0xff, [11] = 0xff }, 96, ABS, false, "IPv4-mapped" },
	{ AF_INET6, { 0 }, 96, 96, false, "IPv4-compatible (::/96)" },
	{ AF_INET6, { 0xfd, 0x00, 0x0e, 0xc2, [14] = 0x02, 0x54 }, 128, 128, true,
	  "a cloud platform endpoint (AWS instance metadata)" },
	{ AF_INET6, { 0xfd, 0x00, 0x0e, 0xc2, [15] = 0x23 }, 128, 128, true,
	  "a cloud platform endpoint (AWS EKS Pod Identity)" },
	{ AF_INET6, { 0xfd, 0x20, 0x00, 0xce, [14] = 0x02, 0x54 }, 128, 128, true,
	  "a cloud platform endpoint (GCP metadata)" },
	{ AF_INET6, { 0xfd, 0x00, 0x00, 0xc1, [12] = 0xa9, 0xfe, 0xa9, 0xfe }, 128, 128, true,
	  "a cloud platform endpoint (Oracle Cloud metadata)" },
	{ AF_INET6, { 0xfc }, 7, 7, false, "unique local (fc00::/7)" },
	{ AF_INET6, { 0xfe, 0x80 }, 10, 10, false, "link-local" },
	{ AF_INET6, { 0xfe, 0xc0 }, 10, 10, false, "site-local" },
	{ AF_INET6, { 0x00, 0x64, 0xff, 0x9b }, 96, 96, false, "NAT64 (64:ff9b::/96)" },
	{ AF_INET6, { 0x00, 0x64, 0xff, 0x9b, 0x00, 0x01 }, 48, 48, false,
	  "local-use NAT64 (64:ff9b:1::/48)" },
	{ AF_INET6, { 0x01 }, 64, 64, false, "discard-only (100::/64)" },
	{ AF_INET6, { 0x20, 0x02 }, 16, 16, false, "6to4 (2002::/16)" },
	{ AF_INET6, { 0x20, 0x01 }, 32, 32, false, "Teredo (2001::/32)" },
};

const unsigned ranges_nr_builtin = sizeof(ranges_builtin) / sizeof(ranges_builtin[0]);

bool ranges_within(int family, const void *a, unsigned alen, const void *b, unsigned blen)
{
	const uint8_t *x = a, *y = b;
	unsigned i;

	if (alen < blen || blen > (family == AF_INET ? 32u : 128u))
		return false;
	for (i = 0; i < blen / 8; i++)
		if (x[i] != y[i])
			return false;
	return blen % 8 == 0 || !((x[i] ^ y[i]) & (0xff00u >> (blen % 8)));
}

unsigned ranges_builtin_deny(int family, const void *addr, const struct net_range **which)
{
	unsigned i, best = 0, max = family == AF_INET ? 32 : 128;

	if (which)
		*which = NULL;
	for (i = 0; i < ranges_nr_builtin; i++) {
		const struct net_range *r = &ranges_builtin[i];

		if (r->family != family || r->strength <= best ||
		    !ranges_within(family, addr, max, r->addr, r->plen))
			continue;
		best = r->strength;
		if (which)
			*which = r;
	}
	return best;
}

const struct net_range *ranges_builtin_holding(int family, const void *a, unsigned alen)
{
	const struct net_range *best = NULL;
	unsigned i;

	for (i = 0; i < ranges_nr_builtin; i++) {
		const struct net_range *r = &ranges_builtin[i];

		if (r->family == family && ranges_within(family, a, alen, r->addr, r->plen) &&
		    (!best || r->plen > best->plen))
			best = r;
	}
	return best;
}

bool ranges_subnet_ends(const struct in_addr *a, unsigned plen, struct in_addr *net,
			struct in_addr *bcast)
{
	uint32_t mask;

	if (plen >= 31)
		return false;
	mask = htonl(plen ? ~0u << (32 - plen) : 0);
	net->s_addr = a->s_addr & mask;
	bcast->s_addr = net->s_addr | ~mask;
	return true;
}

/* One address of the host's list: addr itself, or its subnet's ends. */
static bool host_match(const struct ifaddrs *i, int family, const void *addr)
{
	const struct sockaddr_in *s4 = (const struct sockaddr_in *)i->ifa_addr;
	const struct sockaddr_in *m4 = (const struct sockaddr_in *)i->ifa_netmask;
	struct in_addr net, bcast;

	if (family == AF_INET6)
		return !memcmp(&((const struct sockaddr_in6 *)i->ifa_addr)->sin6_addr, addr, 16);
	if (!memcmp(&s4->sin_addr, addr, 4))
		return true;
	if (!m4 || !ranges_subnet_ends(&s4->sin_addr,
				       __builtin_popcount(m4->sin_addr.s_addr), &net, &bcast))
		return false;
	return !memcmp(&net, addr, 4) || !memcmp(&bcast, addr, 4);
}

int ranges_is_host_addr(int family, const void *addr)
{
	struct ifaddrs *ifa, *i;
	int found = 0;

	if (family != AF_INET && family != AF_INET6)
		return husk_seterr(EAFNOSUPPORT, "address family %d", family);
	if (getifaddrs(&ifa) < 0)
		return husk_seterr(errno, "listing the host's addresses: %s", strerror(errno));
	for (i = ifa; i && !found; i = i->ifa_next)
		found = i->ifa_addr && i->ifa_addr->sa_family == family &&
			host_match(i, family, addr);
	freeifaddrs(ifa);
	return found;
}
