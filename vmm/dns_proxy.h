/*
 * dns_proxy: one VM's DNS resolver at its gateway address, enforcing the
 * domain allowlist (husk run --allow-host NAME).
 *
 * The guest may send DNS (UDP and TCP port 53) only here. Names on the
 * allowlist ("example.com" exactly, "*.example.com" for names below it) are
 * forwarded over UDP to the host's resolver; every other name gets NXDOMAIN
 * without upstream ever seeing it, and is counted and remembered for the
 * report. Each forwarded query gets its own connected upstream socket (the
 * kernel drops datagrams from any other address/port) and a fresh random
 * ID; an answer must match that ID and the question exactly or it is
 * ignored (wrong ID) or turned into SERVFAIL (malformed). Before a good
 * answer is released to the guest, the callback sees every A/AAAA address
 * on the query name's CNAME chain with its TTL, so husk can open the
 * egress filter for exactly those addresses first.
 *
 * Everything runs on the evloop thread. dns_proxy_new() may be called while
 * the loop runs; dns_proxy_free() only when it is stopped (or from a
 * callback on it). dns_proxy_get_stats()/dns_proxy_refused() are safe from
 * any thread.
 */
#ifndef HUSK_DNS_PROXY_H
#define HUSK_DNS_PROXY_H

#include <stdint.h>
#include <sys/socket.h>

#include "dns.h"
#include "evloop.h"

#define DNS_PROXY_PENDING_MAX	64	/* queries in flight upstream */
#define DNS_PROXY_TCP_MAX	16	/* guest TCP connections */
#define DNS_PROXY_TCP_INFLIGHT	4	/* queries in flight per TCP connection */
#define DNS_PROXY_REFUSED_KEEP	16	/* distinct refused names remembered */
#define DNS_PROXY_MIN_TTL	30	/* seconds: allow-map entries live at least this */
#define DNS_PROXY_MAX_TTL	86400
#define DNS_PROXY_TIMEOUT_MS	2000	/* upstream answer deadline, then SERVFAIL */
#define DNS_PROXY_IDLE_MS	10000	/* idle guest TCP connections are closed */

/*
 * Called on the loop thread with the addresses of one answer (n >= 1), before
 * that answer goes to the guest. name is the query name (presentation form,
 * dns.h). A negative return withholds the answer: the guest gets SERVFAIL.
 */
typedef int (*dns_addr_cb)(void *arg, const char *name, const struct dns_addr *addrs,
			   unsigned n);

struct dns_proxy_stats {
	uint64_t queries;	/* well-formed queries received */
	uint64_t allowed;	/* forwarded upstream */
	uint64_t refused;	/* answered NXDOMAIN: name not allowlisted */
	uint64_t failed;	/* answered SERVFAIL: timeout, bad answer, full table, cb */
	uint64_t malformed;	/* queries dropped or answered FORMERR/NOTIMP */
	uint64_t spoofed;	/* upstream datagrams ignored: wrong ID or source */
};

struct dns_proxy;

/*
 * Listen on bind_addr (UDP and TCP; port 0 picks one, see
 * dns_proxy_port()) and forward to upstream. The allowlist is checked
 * (dns_pattern_check) and copied. Returns NULL with husk_lasterr() set.
 */
struct dns_proxy *dns_proxy_new(struct evloop *el, const struct sockaddr *bind_addr,
				socklen_t len, const char *const *allow, unsigned nallow,
				const struct sockaddr *upstream, socklen_t ulen,
				dns_addr_cb cb, void *arg);
void dns_proxy_free(struct dns_proxy *p);

/* Change the timeouts (tests); call before traffic arrives. */
void dns_proxy_set_timeouts(struct dns_proxy *p, unsigned query_ms, unsigned idle_ms);

/* Port the listeners are bound to (host order). */
uint16_t dns_proxy_port(const struct dns_proxy *p);

void dns_proxy_get_stats(struct dns_proxy *p, struct dns_proxy_stats *out);

/*
 * Copy the i-th distinct refused name (in order of first refusal) into out;
 * -ENOENT past the last one.
 */
int dns_proxy_refused(struct dns_proxy *p, unsigned i, char *out, size_t cap);

/*
 * The first "nameserver" line of a resolv.conf file as an address on port
 * 53 (IPv4 or IPv6; a "%scope" suffix is refused). -ENOENT if it has none.
 */
int dns_resolv_conf_upstream(const char *path, struct sockaddr_storage *ss,
			     socklen_t *len);

#endif
