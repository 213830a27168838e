/*
 * dns: pure DNS message parsing, building and allowlist matching. See dns.h.
 *
 * Every read is bounds-checked against the message length before it is
 * made; names are decoded with a hard cap on pointers and on the wire length
 * and with pointers that must always go strictly backwards past every
 * segment already read, which is what makes loops impossible rather than
 * merely unlikely.
 */
#include <errno.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "net/dns.h"

/* A resource record's fixed part, located in its message. */
struct dns_rr {
	uint16_t type;
	uint16_t class;
	uint32_t ttl;
	size_t rdoff;
	uint16_t rdlen;
};

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = v >> 8;
	p[1] = v & 0xff;
}

/* Bytes that may appear unescaped in a name's text: hostname characters. */
static bool plain_char(uint8_t c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

static uint8_t lower(uint8_t c)
{
	return c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c;
}

/* Append one label byte to out, escaped when needed; false when out is full. */
static bool put_text(char *out, size_t cap, size_t *o, uint8_t c)
{
	static const char digits[] = "0123456789";

	c = lower(c);
	if (plain_char(c)) {
		if (*o + 1 >= cap)
			return false;
		out[(*o)++] = c;
		return true;
	}
	if (*o + 4 >= cap)
		return false;
	out[(*o)++] = '\\';
	out[(*o)++] = digits[c / 100];
	out[(*o)++] = digits[c / 10 % 10];
	out[(*o)++] = digits[c % 10];
	return true;
}

int dns_read_name(const uint8_t *msg, size_t len, size_t *off, char *out, size_t outcap)
{
	size_t pos = *off, seg = *off, next = 0, o = 0;
	unsigned ptrs = 0, wire = 0, i;
	bool jumped = false;

	if (!outcap)
		return -EBADMSG;
	for (;;) {
		uint8_t c;

		if (pos >= len)
			return -EBADMSG;
		c = msg[pos];
		if ((c & 0xc0) == 0xc0) {
			size_t target;

			if (pos + 1 >= len)
				return -EBADMSG;
			target = (size_t)(c & 0x3f) << 8 | msg[pos + 1];
			if (!jumped) {
				next = pos + 2;
				jumped = true;
			}
			/*
			 * Below every segment read so far: each jump lands
			 * strictly lower than the last, so no loop can form.
			 */
			if (++ptrs > DNS_PTR_MAX || target < DNS_HDR_LEN || target >= seg)
				return -EBADMSG;
			pos = seg = target;
			continue;
		}
		/* 0x40 and 0x80 are the obsolete extended label types: refuse. */
		if (c & 0xc0)
			return -EBADMSG;
		wire += c + 1u;
		if (wire > DNS_NAME_WIRE_MAX)
			return -EBADMSG;
		if (!c) {
			pos++;
			break;
		}
		if (pos + 1 + c > len)
			return -EBADMSG;
		if (o) {
			if (o + 1 >= outcap)
				return -EBADMSG;
			out[o++] = '.';
		}
		for (i = 0; i < c; i++)
			if (!put_text(out, outcap, &o, msg[pos + 1 + i]))
				return -EBADMSG;
		pos += 1 + c;
	}
	out[o] = '\0';
	*off = jumped ? next : pos;
	return 0;
}

/* Read one resource record at *off; owner gets its name (DNS_NAME_TEXT_MAX). */
static int read_rr(const uint8_t *msg, size_t len, size_t *off, char *owner,
		   struct dns_rr *rr)
{
	size_t pos = *off;
	int err;

	err = dns_read_name(msg, len, &pos, owner, DNS_NAME_TEXT_MAX);
	if (err)
		return err;
	if (len - pos < 10)
		return -EBADMSG;
	rr->type = get16(msg + pos);
	rr->class = get16(msg + pos + 2);
	rr->ttl = get32(msg + pos + 4);
	rr->rdlen = get16(msg + pos + 8);
	rr->rdoff = pos + 10;
	if (len - rr->rdoff < rr->rdlen)
		return -EBADMSG;
	*off = rr->rdoff + rr->rdlen;
	return 0;
}

int dns_parse_query(const uint8_t *msg, size_t len, struct dns_query *q)
{
	char owner[DNS_NAME_TEXT_MAX];
	uint16_t qd, an, ns, ar, i;
	struct dns_rr rr;
	size_t off;
	int err;

	memset(q, 0, sizeof(*q));
	if (len < DNS_HDR_LEN)
		return -EBADMSG;
	q->id = get16(msg);
	q->flags = get16(msg + 2);
	qd = get16(msg + 4);
	an = get16(msg + 6);
	ns = get16(msg + 8);
	ar = get16(msg + 10);
	/* A response sent to the proxy is never answered: no reflection loops. */
	if (q->flags & DNS_FLAG_QR)
		return -EBADMSG;
	if (DNS_OPCODE(q->flags))
		return -EOPNOTSUPP;
	/* Additional records are EDNS (and maybe a signature): a few at most. */
	if (qd != 1 || an || ns || ar > 4)
		return -EBADMSG;
	off = DNS_HDR_LEN;
	err = dns_read_name(msg, len, &off, q->name, sizeof(q->name));
	if (err)
		return err;
	if (len - off < 4)
		return -EBADMSG;
	q->qtype = get16(msg + off);
	q->qclass = get16(msg + off + 2);
	off += 4;
	q->qend = off;
	for (i = 0; i < ar; i++)
		if ((err = read_rr(msg, len, &off, owner, &rr)))
			return err;
	return off == len ? 0 : -EBADMSG;
}

int dns_build_error(const uint8_t *qmsg, const struct dns_query *q, uint16_t id,
		    int rcode, uint8_t *out, size_t cap)
{
	size_t qlen = q ? q->qend - DNS_HDR_LEN : 0;
	uint16_t flags = DNS_FLAG_QR | DNS_FLAG_RA | (rcode & 0xf);

	if (cap < DNS_HDR_LEN + qlen)
		return -ENOSPC;
	memset(out, 0, DNS_HDR_LEN);
	if (q) {
		id = q->id;
		/* Echo opcode and RD as RFC 1035 asks; everything else is ours. */
		flags |= q->flags & (0x7800 | DNS_FLAG_RD);
		put16(out + 4, 1);
		memcpy(out + DNS_HDR_LEN, qmsg + DNS_HDR_LEN, qlen);
	}
	put16(out, id);
	put16(out + 2, flags);
	return (int)(DNS_HDR_LEN + qlen);
}

static int digit(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : -1;
}

int dns_name_to_wire(const char *text, uint8_t *out, size_t cap)
{
	size_t o = 0, lab;
	const char *s = text;

	if (!*s) {
		if (!cap)
			return -ENOSPC;
		out[0] = 0;
		return 1;
	}
	for (;;) {
		lab = o++;	/* the length byte, filled in below */
		if (o > cap)
			return -ENOSPC;
		while (*s && *s != '.') {
			int c = (uint8_t)*s++;

			if (c == '\\') {
				int a = digit(s[0]), b = a < 0 ? -1 : digit(s[1]),
				    d = b < 0 ? -1 : digit(s[2]);

				if (d < 0 || a * 100 + b * 10 + d > 255)
					return -EINVAL;
				c = a * 100 + b * 10 + d;
				s += 3;
			}
			if (o - lab > DNS_LABEL_MAX)
				return -EINVAL;
			if (o >= cap)
				return -ENOSPC;
			out[o++] = (uint8_t)c;
		}
		if (o - lab == 1)
			return -EINVAL;		/* empty label */
		out[lab] = (uint8_t)(o - lab - 1);
		if (!*s)
			break;
		s++;
		if (!*s)
			return -EINVAL;		/* a trailing dot is not our form */
	}
	if (o >= cap)
		return -ENOSPC;
	out[o++] = 0;
	return o > DNS_NAME_WIRE_MAX ? -EINVAL : (int)o;
}

int dns_build_query(const struct dns_query *q, uint16_t id, uint8_t *out, size_t cap)
{
	int n;

	if (cap < DNS_HDR_LEN + 4)
		return -ENOSPC;
	n = dns_name_to_wire(q->name, out + DNS_HDR_LEN, cap - DNS_HDR_LEN - 4);
	if (n < 0)
		return n;
	memset(out, 0, DNS_HDR_LEN);
	put16(out, id);
	put16(out + 2, DNS_FLAG_RD);
	put16(out + 4, 1);
	put16(out + DNS_HDR_LEN + n, q->qtype);
	put16(out + DNS_HDR_LEN + n + 2, q->qclass);
	return DNS_HDR_LEN + n + 4;
}

int dns_restore_question(uint8_t *resp, size_t len, const uint8_t *qmsg,
			 const struct dns_query *q)
{
	char name[DNS_NAME_TEXT_MAX];
	size_t off = DNS_HDR_LEN;
	uint16_t flags;

	if (len < DNS_HDR_LEN || q->qend < DNS_HDR_LEN + 5 ||
	    dns_read_name(resp, len, &off, name, sizeof(name)) || len - off < 4 ||
	    off + 4 != q->qend || strcmp(name, q->name))
		return -EBADMSG;
	put16(resp, q->id);
	flags = (get16(resp + 2) & ~DNS_FLAG_RD) | (q->flags & DNS_FLAG_RD);
	put16(resp + 2, flags);
	memcpy(resp + DNS_HDR_LEN, qmsg + DNS_HDR_LEN, q->qend - DNS_HDR_LEN);
	return 0;
}

static bool in_chain(char chain[][DNS_NAME_TEXT_MAX], unsigned n, const char *name)
{
	unsigned i;

	for (i = 0; i < n; i++)
		if (!strcmp(chain[i], name))
			return true;
	return false;
}

/*
 * Grow the CNAME chain from the query name until nothing new is reached or
 * it is full. Records may come in any order, hence the repeated passes; each
 * pass either adds a name or ends the loop, so it runs DNS_CHAIN_MAX times
 * at most.
 */
static int follow_cnames(const uint8_t *msg, size_t len, size_t ans, uint16_t an,
			 char chain[][DNS_NAME_TEXT_MAX], unsigned *nchain)
{
	char owner[DNS_NAME_TEXT_MAX], target[DNS_NAME_TEXT_MAX];
	bool grew = true;
	struct dns_rr rr;
	size_t off, t;
	uint16_t i;
	int err;

	while (grew && *nchain < DNS_CHAIN_MAX) {
		grew = false;
		off = ans;
		for (i = 0; i < an && *nchain < DNS_CHAIN_MAX; i++) {
			if ((err = read_rr(msg, len, &off, owner, &rr)))
				return err;
			if (rr.type != DNS_TYPE_CNAME || !in_chain(chain, *nchain, owner))
				continue;
			t = rr.rdoff;
			if (dns_read_name(msg, len, &t, target, sizeof(target)) ||
			    t != rr.rdoff + rr.rdlen)
				return -EBADMSG;
			if (!in_chain(chain, *nchain, target)) {
				strcpy(chain[(*nchain)++], target);
				grew = true;
			}
		}
	}
	return 0;
}

static void add_addr(struct dns_answer *a, int family, const uint8_t *p, size_t n,
		     uint32_t ttl, uint32_t min_ttl, uint32_t max_ttl)
{
	struct dns_addr *d;

	if (a->naddr == DNS_ADDR_MAX) {
		a->ndropped++;
		return;
	}
	/* RFC 2181 8: a TTL with the top bit set means zero. */
	if (ttl & 0x80000000u)
		ttl = 0;
	if (ttl < min_ttl)
		ttl = min_ttl;
	if (ttl > max_ttl)
		ttl = max_ttl;
	d = &a->addr[a->naddr++];
	memset(d, 0, sizeof(*d));
	d->family = family;
	memcpy(d->addr, p, n);
	d->ttl = ttl;
}

int dns_parse_response(const uint8_t *msg, size_t len, uint16_t id,
		       const struct dns_query *q, uint32_t min_ttl, uint32_t max_ttl,
		       struct dns_answer *a)
{
	char chain[DNS_CHAIN_MAX][DNS_NAME_TEXT_MAX];
	char owner[DNS_NAME_TEXT_MAX];
	uint16_t flags, an, total, i;
	unsigned nchain = 1;
	struct dns_rr rr;
	size_t off, ans;
	int err;

	memset(a, 0, sizeof(*a));
	if (len < DNS_HDR_LEN || get16(msg) != id)
		return -EBADMSG;
	flags = get16(msg + 2);
	if (!(flags & DNS_FLAG_QR) || DNS_OPCODE(flags) || get16(msg + 4) != 1)
		return -EBADMSG;
	a->rcode = DNS_RCODE(flags);
	a->truncated = flags & DNS_FLAG_TC;
	an = get16(msg + 6);
	/* Three 16-bit counts: their sum fits easily in an int, not a u16. */
	if ((unsigned)an + get16(msg + 8) + get16(msg + 10) > 0xffff)
		return -EBADMSG;
	total = an + get16(msg + 8) + get16(msg + 10);

	off = DNS_HDR_LEN;
	if ((err = dns_read_name(msg, len, &off, owner, sizeof(owner))))
		return err;
	if (len - off < 4 || strcmp(owner, q->name) ||
	    get16(msg + off) != q->qtype || get16(msg + off + 2) != q->qclass)
		return -EBADMSG;
	off += 4;
	ans = off;

	/* Structure first: every record of every section, nothing after them. */
	for (i = 0; i < total; i++) {
		if ((err = read_rr(msg, len, &off, owner, &rr)))
			return err;
		if (i >= an || rr.class != DNS_CLASS_IN)
			continue;
		if ((rr.type == DNS_TYPE_A && rr.rdlen != 4) ||
		    (rr.type == DNS_TYPE_AAAA && rr.rdlen != 16))
			return -EBADMSG;
	}
	if (off != len)
		return -EBADMSG;

	strcpy(chain[0], q->name);
	if ((err = follow_cnames(msg, len, ans, an, chain, &nchain)))
		return err;
	off = ans;
	for (i = 0; i < an; i++) {
		read_rr(msg, len, &off, owner, &rr);	/* checked above */
		if (rr.class != DNS_CLASS_IN || !in_chain(chain, nchain, owner))
			continue;
		if (rr.type == DNS_TYPE_A)
			add_addr(a, AF_INET, msg + rr.rdoff, 4, rr.ttl, min_ttl, max_ttl);
		else if (rr.type == DNS_TYPE_AAAA)
			add_addr(a, AF_INET6, msg + rr.rdoff, 16, rr.ttl, min_ttl, max_ttl);
	}
	return 0;
}

/* Length of s without one trailing dot. */
static size_t trim_len(const char *s)
{
	size_t n = strlen(s);

	return n && s[n - 1] == '.' ? n - 1 : n;
}

/* Labels of hostname characters, 1..63 bytes each, no empty ones. */
static bool plain_labels(const char *s, size_t n)
{
	size_t i, lab = 0;

	if (!n)
		return false;
	for (i = 0; i < n; i++) {
		if (s[i] == '.') {
			if (!lab)
				return false;
			lab = 0;
			continue;
		}
		if (!plain_char(lower((uint8_t)s[i])) || ++lab > DNS_LABEL_MAX)
			return false;
	}
	return lab > 0;
}

int dns_pattern_check(const char *pattern)
{
	size_t n = trim_len(pattern);

	if (n >= 2 && pattern[0] == '*' && pattern[1] == '.') {
		pattern += 2;
		n -= 2;
	}
	return n <= 253 && plain_labels(pattern, n) ? 0 : -EINVAL;
}

bool dns_name_match(const char *name, const char *pattern)
{
	size_t n = trim_len(name), p = trim_len(pattern);

	/* Escaped bytes, empty labels: not a name any pattern can mean. */
	if (!plain_labels(name, n))
		return false;
	if (p >= 2 && pattern[0] == '*' && pattern[1] == '.') {
		/* The suffix keeps its leading dot: "evil-example.com" fails. */
		pattern++;
		p--;
		return p > 1 && n > p && !strncasecmp(name + n - p, pattern, p);
	}
	return n == p && !strncasecmp(name, pattern, n);
}

bool dns_name_allowed(const char *name, const char *const *allow, unsigned nallow)
{
	unsigned i;

	for (i = 0; i < nallow; i++)
		if (dns_name_match(name, allow[i]))
			return true;
	return false;
}
