/*
 * dns: pure DNS message helpers for the per-VM DNS proxy (dns_proxy.h).
 *
 * Everything here works on byte buffers only: no sockets, no allocation.
 * Queries come from the guest and are hostile; responses come from the
 * host's resolver and are checked just as strictly, because the addresses
 * they carry open holes in the VM's egress filter.
 *
 * Names are handed out in presentation form, lower-cased, without the
 * trailing dot ("" is the root). Every byte outside [a-z0-9-_] inside a
 * label (a '.', '*', '\', control or 8-bit byte) is written as "\DDD", so
 * the text is printable, unambiguous and can never look like an allowlist
 * entry it is not: names holding an escape never match any pattern.
 */
#ifndef HUSK_DNS_H
#define HUSK_DNS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DNS_HDR_LEN		12
#define DNS_NAME_WIRE_MAX	255	/* RFC 1035: labels + length octets + root */
#define DNS_LABEL_MAX		63
/* Worst case: every byte of a 255-byte name escaped as \DDD, plus dots. */
#define DNS_NAME_TEXT_MAX	1024
#define DNS_PTR_MAX		32	/* compression pointers followed per name */
#define DNS_QUERY_MAX		512	/* largest query the proxy accepts */
#define DNS_ADDR_MAX		64	/* addresses kept from one answer */
#define DNS_CHAIN_MAX		8	/* names on a followed CNAME chain */

#define DNS_TYPE_A		1
#define DNS_TYPE_CNAME		5
#define DNS_TYPE_AAAA		28
#define DNS_TYPE_OPT		41
#define DNS_CLASS_IN		1

#define DNS_RCODE_NOERROR	0
#define DNS_RCODE_FORMERR	1
#define DNS_RCODE_SERVFAIL	2
#define DNS_RCODE_NXDOMAIN	3
#define DNS_RCODE_NOTIMP	4
#define DNS_RCODE_REFUSED	5

/* Header flag bits (host order of the 16-bit flags word). */
#define DNS_FLAG_QR		0x8000
#define DNS_FLAG_AA		0x0400
#define DNS_FLAG_TC		0x0200
#define DNS_FLAG_RD		0x0100
#define DNS_FLAG_RA		0x0080
#define DNS_OPCODE(flags)	(((flags) >> 11) & 0xf)
#define DNS_RCODE(flags)	((flags) & 0xf)

struct dns_query {
	uint16_t id;
	uint16_t flags;
	uint16_t qtype;
	uint16_t qclass;
	size_t qend;			/* offset just past the question */
	char name[DNS_NAME_TEXT_MAX];	/* presentation form, see above */
};

struct dns_addr {
	int family;			/* AF_INET or AF_INET6 */
	uint8_t addr[16];		/* network order; 4 bytes used for AF_INET */
	uint32_t ttl;			/* seconds, already floored/capped */
};

struct dns_answer {
	int rcode;
	bool truncated;			/* TC was set */
	unsigned naddr;
	unsigned ndropped;		/* A/AAAA beyond DNS_ADDR_MAX, not reported */
	struct dns_addr addr[DNS_ADDR_MAX];
};

/*
 * Read the (possibly compressed) name at *off of msg into out (presentation
 * form, lower-case) and move *off past it. Compression pointers must point
 * below the start of every name segment read so far and into the message
 * body (never into the header), at most DNS_PTR_MAX of them: loops, forward
 * and out-of-range pointers are all rejected. Returns 0 or -EBADMSG.
 */
int dns_read_name(const uint8_t *msg, size_t len, size_t *off, char *out, size_t outcap);

/*
 * Parse a query from the guest: a standard header with QR clear, exactly one
 * question, no answer or authority records, at most a few additional ones
 * (EDNS), nothing after them. Returns 0, -EBADMSG for a malformed message
 * (shorter than a header, bad counts, bad name, trailing bytes) or
 * -EOPNOTSUPP for a well-formed header with an opcode other than QUERY
 * (q->id and q->flags are set then, so a NOTIMP can be sent back).
 */
int dns_parse_query(const uint8_t *msg, size_t len, struct dns_query *q);

/*
 * Build a response with rcode to the query q whose wire form is qmsg: same
 * ID, RD copied, RA set, the question echoed. With q == NULL (a query too
 * broken to echo) only a header is built, answering ID id. Returns the
 * length written or -ENOSPC.
 */
int dns_build_error(const uint8_t *qmsg, const struct dns_query *q, uint16_t id,
		    int rcode, uint8_t *out, size_t cap);

/*
 * Parse a response from upstream to the query q that was sent with ID id:
 * QR set, same ID, opcode QUERY, one question equal to q's (name compared
 * case-insensitively, type and class exactly), every record of every section
 * well-formed and nothing after them. A and AAAA records of class IN in the
 * answer section are reported when their owner is the query name or a name
 * reached from it through the CNAME records of the answer section; TTLs
 * below min_ttl are raised to it and TTLs above max_ttl cut to it.
 * Returns 0 or -EBADMSG (including a question or ID mismatch).
 */
int dns_parse_response(const uint8_t *msg, size_t len, uint16_t id,
		       const struct dns_query *q, uint32_t min_ttl, uint32_t max_ttl,
		       struct dns_answer *a);

/*
 * The wire form of a name in the presentation form above ("" is the root):
 * labels split at '.', "\DDD" decoded. Returns the length written (the
 * root's zero byte included) or -EINVAL (empty or overlong label, bad
 * escape, over DNS_NAME_WIRE_MAX) / -ENOSPC.
 */
int dns_name_to_wire(const char *text, uint8_t *out, size_t cap);

/*
 * A minimal query for q's question, built from the parsed name, type and
 * class alone: ID id, RD set and no other flag, one question, no answer,
 * authority or additional record (no EDNS). Nothing of the message q was
 * parsed from is copied. Returns the length or -EINVAL/-ENOSPC.
 */
int dns_build_query(const struct dns_query *q, uint16_t id, uint8_t *out, size_t cap);

/*
 * Turn a response to the query dns_build_query() made for q (already
 * checked by dns_parse_response) into the answer to the guest's own query
 * qmsg: the guest's ID, its RD bit, and its question bytes (its spelling of
 * the name) in place of ours. The two questions name the same name, so
 * they have the same length and every compression pointer stays valid.
 * Returns 0 or -EBADMSG.
 */
int dns_restore_question(uint8_t *resp, size_t len, const uint8_t *qmsg,
			 const struct dns_query *q);

/*
 * Check an allowlist pattern: "example.com" or "*.example.com", labels of
 * [A-Za-z0-9-_] (1..63 bytes), at most 253 bytes, one trailing dot allowed.
 * Returns 0 or -EINVAL.
 */
int dns_pattern_check(const char *pattern);

/*
 * Does name match pattern? "example.com" matches that name only;
 * "*.example.com" matches names below it ("a.example.com",
 * "a.b.example.com") but neither "example.com" itself nor
 * "evil-example.com". Case-insensitive; one trailing dot on either side is
 * ignored. Names holding a backslash escape or empty labels never match.
 */
bool dns_name_match(const char *name, const char *pattern);
bool dns_name_allowed(const char *name, const char *const *allow, unsigned nallow);

#endif
