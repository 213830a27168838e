/*
 * netpool: the guest network address plan. Each VM slot gets its own /30
 * inside a pool (default 10.200.0.0/16): .1 of the /30 is the host end of the
 * tap (the guest's gateway), .2 the guest. The guest MAC is derived from the
 * slot too, so a slot's addresses are reproducible and never collide.
 *
 * Pure functions, no I/O: addresses are IPv4 in network byte order.
 */
#ifndef HUSK_NETPOOL_H
#define HUSK_NETPOOL_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>

#define NETPOOL_DEFAULT "10.200.0.0/16"
#define NETPOOL_SUBNET_PREFIX 30

struct netpool {
	struct in_addr base;		/* network address, host bits zero */
	unsigned prefixlen;		/* 0..30 */
};

struct netpool_lease {
	unsigned slot;
	struct in_addr net;		/* the /30's network address */
	struct in_addr host;		/* .1: tap address, guest gateway */
	struct in_addr guest;		/* .2 */
	struct in_addr netmask;		/* 255.255.255.252 */
	unsigned prefixlen;		/* NETPOOL_SUBNET_PREFIX */
	uint8_t mac[6];			/* guest MAC: 06:00:<slot, big endian> */
};

/* Parse "a.b.c.d/len"; host bits must be zero and len <= 30. -EINVAL. */
int netpool_parse(const char *cidr, struct netpool *p);
/* How many /30 slots the pool holds. */
uint32_t netpool_capacity(const struct netpool *p);
/* The addresses of slot (0-based); -ERANGE beyond the pool's capacity. */
int netpool_lease(const struct netpool *p, unsigned slot, struct netpool_lease *l);
/*
 * The guest's static configuration in the kernel's ip= syntax
 * ("ip=<guest>::<gw>:<mask>::<dev>:off"), for guests whose kernel has
 * CONFIG_IP_PNP or whose init parses it. -ENOSPC if buf is too small.
 */
int netpool_ip_param(const struct netpool_lease *l, const char *dev, char *buf, size_t len);

#endif
