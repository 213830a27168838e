/*
 * netpool: slot -> /30 and MAC mapping. See netpool.h.
 *
 * Slots are handed out from the bottom of the pool: slot n owns
 * base + 4n .. base + 4n + 3. The MAC carries the slot in its last four
 * bytes, so it is unique for every slot a pool can hold (a /0 pool has 2^30
 * slots, fewer than 2^32); 0x06 in the first byte is a locally administered
 * unicast address that no NIC vendor will ever use.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "net/netpool.h"
#include "lib/util.h"

int netpool_parse(const char *cidr, struct netpool *p)
{
	char addr[INET_ADDRSTRLEN];
	const char *slash;
	uint64_t len;
	uint32_t a, mask;
	size_t n;

	slash = cidr ? strchr(cidr, '/') : NULL;
	if (!slash)
		return husk_seterr(EINVAL, "network pool '%s' is not in a.b.c.d/len form",
				   cidr ? cidr : "");
	n = slash - cidr;
	if (n == 0 || n >= sizeof(addr))
		return husk_seterr(EINVAL, "network pool '%s': bad address", cidr);
	memcpy(addr, cidr, n);
	addr[n] = '\0';
	if (inet_pton(AF_INET, addr, &p->base) != 1)
		return husk_seterr(EINVAL, "network pool '%s': '%s' is not an IPv4 address",
				   cidr, addr);
	if (parse_u64(slash + 1, 0, NETPOOL_SUBNET_PREFIX, &len))
		return husk_seterr(EINVAL, "network pool '%s': prefix length must be 0..%d",
				   cidr, NETPOOL_SUBNET_PREFIX);
	a = ntohl(p->base.s_addr);
	mask = len ? ~0u << (32 - len) : 0;
	if (a & ~mask)
		return husk_seterr(EINVAL, "network pool '%s' has host bits set; "
				   "did you mean %u.%u.%u.%u/%u?", cidr,
				   (a & mask) >> 24, (a & mask) >> 16 & 0xff,
				   (a & mask) >> 8 & 0xff, a & mask & 0xff, (unsigned)len);
	p->prefixlen = len;
	return 0;
}

uint32_t netpool_capacity(const struct netpool *p)
{
	if (p->prefixlen > NETPOOL_SUBNET_PREFIX)
		return 0;
	return (uint32_t)1 << (NETPOOL_SUBNET_PREFIX - p->prefixlen);
}

int netpool_lease(const struct netpool *p, unsigned slot, struct netpool_lease *l)
{
	uint32_t net;

	if (slot >= netpool_capacity(p))
		return husk_seterr(ERANGE, "network slot %u is outside the pool (%u slots)",
				   slot, netpool_capacity(p));
	memset(l, 0, sizeof(*l));
	net = ntohl(p->base.s_addr) + ((uint32_t)slot << 2);
	l->slot = slot;
	l->net.s_addr = htonl(net);
	l->host.s_addr = htonl(net + 1);
	l->guest.s_addr = htonl(net + 2);
	l->netmask.s_addr = htonl(~0u << (32 - NETPOOL_SUBNET_PREFIX));
	l->prefixlen = NETPOOL_SUBNET_PREFIX;
	l->mac[0] = 0x06;
	l->mac[1] = 0x00;
	l->mac[2] = slot >> 24;
	l->mac[3] = slot >> 16;
	l->mac[4] = slot >> 8;
	l->mac[5] = slot;
	return 0;
}

int netpool_ip_param(const struct netpool_lease *l, const char *dev, char *buf, size_t len)
{
	char g[INET_ADDRSTRLEN], h[INET_ADDRSTRLEN], m[INET_ADDRSTRLEN];
	int n;

	inet_ntop(AF_INET, &l->guest, g, sizeof(g));
	inet_ntop(AF_INET, &l->host, h, sizeof(h));
	inet_ntop(AF_INET, &l->netmask, m, sizeof(m));
	n = snprintf(buf, len, "ip=%s::%s:%s::%s:off", g, h, m, dev);
	if (n < 0 || (size_t)n >= len)
		return husk_seterr(ENOSPC, "ip= parameter does not fit in %zu bytes", len);
	return 0;
}
