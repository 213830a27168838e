/*
 * dns_proxy: one VM's DNS resolver at its gateway address, enforcing the
 * domain allowlist (husk run --allow-host NAME). In husk it runs inside the
 * confined DNS helper process (dns_helper.h), never in the supervisor: every
 * byte the guest or the upstream resolver sends is parsed here.
 *
 * The guest may send DNS (UDP and TCP port 53) only here, and only the
 * VM's own guest address is served: UDP queries and TCP connections from
 * any other source are dropped unread and counted (foreign). Names on the
 * allowlist ("example.com" exactly, "*.example.com" for names below it) are
 * resolved over UDP by the host's resolver, with a query the proxy builds
 * itself from the parsed question (dns_build_query: one question, a fresh
 * random ID, RD; no EDNS, no other record, none of the guest's bytes); every
 * other name gets NXDOMAIN without upstream ever seeing it, and is counted
 * and remembered for the report. An answer must match the ID and the
 * question exactly or it is ignored (wrong ID) or turned into SERVFAIL
 * (malformed). The guest's answer carries its own ID and question.
 *
 * Before a good answer is released to the guest, each A/AAAA address on
 * the query name's CNAME chain is handed to the learn function, which opens
 * the egress filter for it (in husk: a request to the supervisor). At most
 * DNS_PROXY_LEARN_WINDOW of them are outstanding at once; the answer is
 * held until every one of its addresses was confirmed, and becomes
 * SERVFAIL if any was refused or the query's deadline passes first. So the
 * filter opens before the guest learns an address, never after.
 *
 * The sockets are made beforehand (dns_proxy_open_socks, by whoever may
 * bind port 53), so the proxy itself never creates a socket: upstream
 * queries go out through a fixed pool of sockets connected to the resolver
 * (the kernel drops datagrams from any other address or port), one per
 * query slot, each on its own random ephemeral port.
 *
 * Everything runs on the evloop thread. dns_proxy_free() only when the loop
 * is stopped (or from a callback on it). dns_proxy_get_stats() and
 * dns_proxy_refused() are safe from any thread.
 */
#ifndef HUSK_DNS_PROXY_H
#define HUSK_DNS_PROXY_H

#include <stdint.h>
#include <sys/socket.h>

#include "net/dns.h"
#include "machine/evloop.h"

#define DNS_PROXY_PENDING_MAX	64	/* queries in flight upstream (and upstream sockets) */
#define DNS_PROXY_TCP_MAX	16	/* guest TCP connections */
#define DNS_PROXY_TCP_INFLIGHT	4	/* queries in flight per TCP connection */
#define DNS_PROXY_REFUSED_KEEP	16	/* distinct refused names remembered */
#define DNS_PROXY_MIN_TTL	30	/* seconds: allow-map entries live at least this */
#define DNS_PROXY_MAX_TTL	86400
#define DNS_PROXY_TIMEOUT_MS	2000	/* deadline for upstream and the filter, then SERVFAIL */
#define DNS_PROXY_IDLE_MS	10000	/* idle guest TCP connections are closed */
/* Largest upstream answer relayed: our queries offer no EDNS, so 512 is the rule. */
#define DNS_PROXY_ANSWER_MAX	4096
#define DNS_PROXY_LEARN_WINDOW	32	/* learn requests outstanding at once */

/*
 * Open the filter for one address of an answer to name (presentation form,
 * dns.h), on the loop thread, before that answer goes to the guest. Returns
 * 1 when done, 0 when pending (dns_proxy_learned(tag) will follow), or
 * -errno to refuse it: the guest then gets SERVFAIL.
 */
typedef int (*dns_learn_fn)(void *arg, uint32_t tag, const char *name,
			    const struct dns_addr *addr);

struct dns_proxy_stats {
	uint64_t queries;	/* well-formed queries received */
	uint64_t allowed;	/* resolved upstream */
	uint64_t refused;	/* answered NXDOMAIN: name not allowlisted */
	uint64_t failed;	/* answered SERVFAIL: timeout, bad answer, full table, filter */
	uint64_t malformed;	/* queries dropped or answered FORMERR/NOTIMP */
	uint64_t spoofed;	/* upstream datagrams ignored: wrong ID or source */
	uint64_t foreign;	/* queries and connections from another source: dropped */
	uint64_t withheld;	/* of failed: an address of the answer was not opened */
};

/* The proxy's sockets, made before it runs (port 53 needs privilege). */
struct dns_proxy_socks {
	int udp_fd, tcp_fd;			/* listening on the gateway */
	int up_fd[DNS_PROXY_PENDING_MAX];	/* connected to the upstream resolver */
	uint16_t port;				/* of the listeners, host order */
};

struct dns_proxy_cfg {
	const char *const *allow;	/* allowlist patterns (dns_pattern_check) */
	unsigned nallow;
	const struct sockaddr *guest;	/* the only source served (port ignored) */
	socklen_t guest_len;
	const struct sockaddr *upstream;	/* what up_fd are connected to */
	socklen_t ulen;
	dns_learn_fn learn;
	void *arg;
};

/*
 * Listen on bind_addr (UDP and TCP; port 0 picks one) and connect the
 * upstream pool to upstream. On failure nothing is left open.
 */
int dns_proxy_open_socks(struct dns_proxy_socks *s, const struct sockaddr *bind_addr,
			 socklen_t len, const struct sockaddr *upstream, socklen_t ulen);
/* Close whatever of s is open; sets every fd to -1. */
void dns_proxy_close_socks(struct dns_proxy_socks *s);

/*
 * Serve on s, which the proxy takes over (every fd in s is -1 afterwards,
 * on failure too: then they are closed). The allowlist is checked and
 * copied. Returns NULL with husk_lasterr() set.
 */
struct dns_proxy *dns_proxy_new(struct evloop *el, struct dns_proxy_socks *s,
				const struct dns_proxy_cfg *cfg);
void dns_proxy_free(struct dns_proxy *p);

/*
 * The outcome of a pending learn request (status 0: opened, -errno:
 * refused). Unknown, stale or repeated tags are ignored.
 */
void dns_proxy_learned(struct dns_proxy *p, uint32_t tag, int status);

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
