/*
 * fuzz_dns: libFuzzer target for vmm/net/dns.c, the DNS parsing the proxy does
 * on the guest's queries and the upstream resolver's answers.
 *
 * Input: a 16-bit big-endian length L, then L bytes of a guest query, then
 * the rest as an upstream response (a query that does not parse is replaced
 * by a fixed one for www.example.com/A, so responses get fuzzed anyway).
 *
 * Checked beyond "no crash, no sanitizer report":
 * - a parsed query's name goes back to wire form with the length it had in
 *   the message, and the minimal query built from it parses to the same
 *   name, type and class, with ID, RD only and one question;
 * - a parsed response reports at most DNS_ADDR_MAX addresses of a known
 *   family with TTLs inside the floor and cap; after dns_restore_question()
 *   with the guest's query it is still a valid response to that query with
 *   the same addresses;
 * - dns_read_name() where the question starts and at an offset the first
 *   two bytes pick, in both parts, into small buffers too, never writes past
 *   its buffer and always NUL-terminates what it accepts;
 * - allowlist matching and pattern checks on the bytes as text.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "net/dns.h"

#define MIN_TTL 30
#define MAX_TTL 86400

static void check(int ok)
{
	if (!ok)
		abort();
}

/* Names at the header's end and at an offset the input picks, into small buffers too. */
static void read_names(const uint8_t *m, size_t len)
{
	static const size_t caps[] = { 2, 17, DNS_NAME_TEXT_MAX };
	char out[DNS_NAME_TEXT_MAX + 1];
	size_t offs[2], o, i, k;

	if (len < 2)
		return;
	offs[0] = DNS_HDR_LEN;
	offs[1] = ((size_t)m[0] << 8 | m[1]) % len;
	for (k = 0; k < 2; k++) {
		for (i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
			o = offs[k];
			out[caps[i]] = 0x5a;	/* canary just past the buffer */
			if (dns_read_name(m, len, &o, out, caps[i]) == 0)
				check(strlen(out) < caps[i] && o > offs[k] && o <= len);
			check(out[caps[i]] == 0x5a);
		}
	}
}

static void query_props(const uint8_t *m, size_t len, const struct dns_query *q)
{
	uint8_t wire[DNS_NAME_WIRE_MAX + 1], out[DNS_HDR_LEN + DNS_NAME_WIRE_MAX + 4];
	struct dns_query q2;
	int n;

	check(q->qend >= DNS_HDR_LEN + 5 && q->qend <= len);
	n = dns_name_to_wire(q->name, wire, sizeof(wire));
	check(n > 0 && (size_t)n == q->qend - DNS_HDR_LEN - 4);
	n = dns_build_query(q, 0x1234, out, sizeof(out));
	check(n == (int)q->qend);
	check(out[0] == 0x12 && out[1] == 0x34 && out[2] == 0x01 && out[3] == 0);
	check(!memcmp(out + 4, "\0\1\0\0\0\0\0\0", 8));
	check(dns_parse_query(out, n, &q2) == 0);
	check(!strcmp(q->name, q2.name) && q->qtype == q2.qtype && q->qclass == q2.qclass);
}

static void response_props(const uint8_t *r, size_t rlen, const uint8_t *qmsg,
			   const struct dns_query *q)
{
	struct dns_answer a, b;
	uint16_t id;
	uint8_t *copy;
	unsigned i;

	if (rlen < 2)
		return;
	id = (uint16_t)(r[0] << 8 | r[1]);
	if (dns_parse_response(r, rlen, id, q, MIN_TTL, MAX_TTL, &a))
		return;
	check(a.naddr <= DNS_ADDR_MAX);
	for (i = 0; i < a.naddr; i++) {
		check(a.addr[i].family == AF_INET || a.addr[i].family == AF_INET6);
		check(a.addr[i].ttl >= MIN_TTL && a.addr[i].ttl <= MAX_TTL);
	}
	/* As the proxy does it: the guest's ID and question, same answer. */
	copy = malloc(rlen);
	if (!copy)
		return;
	memcpy(copy, r, rlen);
	if (qmsg && dns_restore_question(copy, rlen, qmsg, q) == 0) {
		check(dns_parse_response(copy, rlen, q->id, q, MIN_TTL, MAX_TTL, &b) == 0);
		check(b.naddr == a.naddr &&
		      !memcmp(b.addr, a.addr, a.naddr * sizeof(a.addr[0])));
	}
	free(copy);
}

static void text_props(const uint8_t *p, size_t len)
{
	static const char *const allow[] = { "example.com", "*.example.com", "*.a.b", "x" };
	char s[300];
	size_t n = len < sizeof(s) - 1 ? len : sizeof(s) - 1;

	memcpy(s, p, n);
	s[n] = '\0';
	(void)dns_pattern_check(s);
	(void)dns_name_allowed(s, allow, 4);
	(void)dns_name_match("www.example.com", s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint8_t fixed[] = "\x11\x11\x01\x00\0\1\0\0\0\0\0\0"
				       "\3www\7example\3com\0\0\1\0\1";
	const uint8_t *qm = fixed, *r;
	struct dns_query q;
	size_t qlen, rlen;

	if (size < 2)
		return 0;
	qlen = (size_t)data[0] << 8 | data[1];
	if (qlen > size - 2)
		qlen = size - 2;
	r = data + 2 + qlen;
	rlen = size - 2 - qlen;

	read_names(data + 2, qlen);
	read_names(r, rlen);
	text_props(data + 2, qlen);
	if (dns_parse_query(data + 2, qlen, &q) == 0) {
		query_props(data + 2, qlen, &q);
		qm = data + 2;
	} else if (dns_parse_query(fixed, sizeof(fixed) - 1, &q)) {
		abort();
	}
	response_props(r, rlen, qm, &q);
	return 0;
}
