/*
 * Unit tests for dns, the pure DNS message helpers of the DNS proxy: query
 * parsing (valid, EDNS, truncated, bad counts, long labels and names,
 * compression loops and bad pointers, trailing bytes, escaped bytes),
 * allowlist matching and pattern checks, NXDOMAIN/SERVFAIL building, and
 * answer parsing (A/AAAA with compression, TTL floor and cap, CNAME chains,
 * unrelated records ignored, bogus rdlength, ID and question mismatches),
 * and what the proxy sends upstream instead of the guest's bytes: names
 * back to wire form, the minimal query, the guest's question restored in
 * the answer.
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "net/dns.h"
#include "suites.h"

/* A DNS message under construction. */
struct msg {
	uint8_t b[2048];
	size_t n;
};

static void m_u8(struct msg *m, uint8_t v)
{
	ck_assert_uint_lt(m->n, sizeof(m->b));
	m->b[m->n++] = v;
}

static void m_u16(struct msg *m, uint16_t v)
{
	m_u8(m, v >> 8);
	m_u8(m, v & 0xff);
}

static void m_u32(struct msg *m, uint32_t v)
{
	m_u16(m, v >> 16);
	m_u16(m, v & 0xffff);
}

static void m_hdr(struct msg *m, uint16_t id, uint16_t flags, uint16_t qd, uint16_t an,
		  uint16_t ns, uint16_t ar)
{
	m->n = 0;
	m_u16(m, id);
	m_u16(m, flags);
	m_u16(m, qd);
	m_u16(m, an);
	m_u16(m, ns);
	m_u16(m, ar);
}

/* Plain labels from a dotted name, with the root label. */
static void m_name(struct msg *m, const char *name)
{
	while (*name) {
		const char *dot = strchr(name, '.');
		size_t l = dot ? (size_t)(dot - name) : strlen(name);

		m_u8(m, l);
		memcpy(m->b + m->n, name, l);
		m->n += l;
		name += l + (dot ? 1 : 0);
	}
	m_u8(m, 0);
}

static void m_ptr(struct msg *m, uint16_t off)
{
	m_u16(m, 0xc000 | off);
}

static void m_q(struct msg *m, const char *name, uint16_t type)
{
	m_name(m, name);
	m_u16(m, type);
	m_u16(m, DNS_CLASS_IN);
}

/* Type, class IN, TTL and rdlength, after the owner name. */
static void m_rr(struct msg *m, uint16_t type, uint32_t ttl, uint16_t rdlen)
{
	m_u16(m, type);
	m_u16(m, DNS_CLASS_IN);
	m_u32(m, ttl);
	m_u16(m, rdlen);
}

static void m_a(struct msg *m, uint8_t a, uint8_t b, uint8_t c, uint8_t d)
{
	m_u8(m, a);
	m_u8(m, b);
	m_u8(m, c);
	m_u8(m, d);
}

static struct dns_query q;
static struct dns_answer ans;
static struct msg m;

static int parse(void)
{
	return dns_parse_query(m.b, m.n, &q);
}

/* ---- queries ---- */

START_TEST(query_valid)
{
	m_hdr(&m, 0xbeef, DNS_FLAG_RD, 1, 0, 0, 0);
	m_q(&m, "WWW.Example.COM", DNS_TYPE_AAAA);
	ck_assert_int_eq(parse(), 0);
	ck_assert_uint_eq(q.id, 0xbeef);
	ck_assert_str_eq(q.name, "www.example.com");
	ck_assert_uint_eq(q.qtype, DNS_TYPE_AAAA);
	ck_assert_uint_eq(q.qclass, DNS_CLASS_IN);
	ck_assert_uint_eq(q.qend, m.n);
}
END_TEST

START_TEST(query_edns)
{
	m_hdr(&m, 1, DNS_FLAG_RD, 1, 0, 0, 1);
	m_q(&m, "example.com", DNS_TYPE_A);
	m_u8(&m, 0);		/* OPT: root owner */
	m_u16(&m, DNS_TYPE_OPT);
	m_u16(&m, 1232);
	m_u32(&m, 0);
	m_u16(&m, 0);
	ck_assert_int_eq(parse(), 0);
	ck_assert_str_eq(q.name, "example.com");
	/* The OPT record's rdlength pointing past the end. */
	m.b[m.n - 1] = 4;
	ck_assert_int_eq(parse(), -EBADMSG);
}
END_TEST

START_TEST(query_root)
{
	m_hdr(&m, 1, 0, 1, 0, 0, 0);
	m_q(&m, "", DNS_TYPE_A);
	ck_assert_int_eq(parse(), 0);
	ck_assert_str_eq(q.name, "");
}
END_TEST

START_TEST(query_truncated)
{
	size_t full;

	m_hdr(&m, 1, 0, 1, 0, 0, 0);
	m_q(&m, "example.com", DNS_TYPE_A);
	full = m.n;
	for (m.n = 0; m.n < full; m.n++)
		ck_assert_int_eq(parse(), -EBADMSG);
	m.n = full;
	ck_assert_int_eq(parse(), 0);
}
END_TEST

START_TEST(query_counts)
{
	m_hdr(&m, 1, 0, 0, 0, 0, 0);
	ck_assert_int_eq(parse(), -EBADMSG);
	m_hdr(&m, 1, 0, 2, 0, 0, 0);
	m_q(&m, "a.com", DNS_TYPE_A);
	m_q(&m, "b.com", DNS_TYPE_A);
	ck_assert_int_eq(parse(), -EBADMSG);
	m_hdr(&m, 1, 0, 1, 1, 0, 0);
	m_q(&m, "a.com", DNS_TYPE_A);
	ck_assert_int_eq(parse(), -EBADMSG);
	m_hdr(&m, 1, 0, 1, 0, 0, 9);
	m_q(&m, "a.com", DNS_TYPE_A);
	ck_assert_int_eq(parse(), -EBADMSG);
}
END_TEST

START_TEST(query_flags)
{
	m_hdr(&m, 7, DNS_FLAG_QR, 1, 0, 0, 0);
	m_q(&m, "a.com", DNS_TYPE_A);
	ck_assert_int_eq(parse(), -EBADMSG);
	ck_assert(q.flags & DNS_FLAG_QR);
	m_hdr(&m, 7, 2 << 11, 1, 0, 0, 0);	/* STATUS */
	m_q(&m, "a.com", DNS_TYPE_A);
	ck_assert_int_eq(parse(), -EOPNOTSUPP);
	ck_assert_uint_eq(q.id, 7);
}
END_TEST

START_TEST(query_long_label)
{
	char l63[64];

	memset(l63, 'a', 63);
	l63[63] = '\0';
	m_hdr(&m, 1, 0, 1, 0, 0, 0);
	m_q(&m, l63, DNS_TYPE_A);
	ck_assert_int_eq(parse(), 0);
	ck_assert_uint_eq(strlen(q.name), 63);
	/* Length octet 64 is an (obsolete) extended label type, not a label. */
	m_hdr(&m, 1, 0, 1, 0, 0, 0);
	m_u8(&m, 64);
	memset(m.b + m.n, 'a', 64);
	m.n += 64;
	m_u8(&m, 0);
	m_u16(&m, 1);
	m_u16(&m, 1);
	ck_assert_int_eq(parse(), -EBADMSG);
	m.b[DNS_HDR_LEN] = 0x80;
	ck_assert_int_eq(parse(), -EBADMSG);
}
END_TEST

/* A name of exactly `wire` bytes on the wire (labels of 63 then the rest). */
static void long_name(unsigned wire)
{
	unsigned left = wire - 1;	/* root octet */

	m_hdr(&m, 1, 0, 1, 0, 0, 0);
	while (left) {
		unsigned l = left - 1 > 63 ? 63 : left - 1;

		ck_assert_uint_gt(l, 0);
		m_u8(&m, l);
		memset(m.b + m.n, 'x', l);
		m.n += l;
		left -= l + 1;
	}
	m_u8(&m, 0);
	m_u16(&m, 1);
	m_u16(&m, 1);
}

START_TEST(query_long_name)
{
	long_name(255);
	ck_assert_int_eq(parse(), 0);
	ck_assert_uint_eq(strlen(q.name), 253);
	long_name(256);
	ck_assert_int_eq(parse(), -EBADMSG);
	long_name(400);
	ck_assert_int_eq(parse(), -EBADMSG);
}
END_TEST

START_TEST(query_pointers)
{
	/* A question name can only point backwards into the header: refused. */
	m_hdr(&m, 1, 0, 1, 0, 0, 0);
	m_ptr(&m, 0);
	m_u16(&m, 1);
	m_u16(&m, 1);
	ck_assert_int_eq(parse(), -EBADMSG);
	/* To itself: a loop. */
	m_hdr(&m, 1, 0, 1, 0, 0, 0);
	m_ptr(&m, DNS_HDR_LEN);
	m_u16(&m, 1);
	m_u16(&m, 1);
	ck_assert_int_eq(parse(), -EBADMSG);
	/* Forward, to a label after it. */
	m_hdr(&m, 1, 0, 1, 0, 0, 0);
	m_ptr(&m, DNS_HDR_LEN + 2);
	m_name(&m, "a");
	m_u16(&m, 1);
	m_u16(&m, 1);
	ck_assert_int_eq(parse(), -EBADMSG);
	/* Half a pointer at the end. */
	m_hdr(&m, 1, 0, 1, 0, 0, 0);
	m_u8(&m, 0xc0);
	ck_assert_int_eq(parse(), -EBADMSG);
}
END_TEST

START_TEST(query_trailing)
{
	m_hdr(&m, 1, 0, 1, 0, 0, 0);
	m_q(&m, "example.com", DNS_TYPE_A);
	m_u8(&m, 0);
	ck_assert_int_eq(parse(), -EBADMSG);
}
END_TEST

START_TEST(query_escapes)
{
	/* Label "a.b" (a dot inside a label) and 8-bit and upper-case bytes. */
	m_hdr(&m, 1, 0, 1, 0, 0, 0);
	m_u8(&m, 3);
	m_u8(&m, 'a');
	m_u8(&m, '.');
	m_u8(&m, 'B');
	m_u8(&m, 2);
	m_u8(&m, 0xff);
	m_u8(&m, '\\');
	m_name(&m, "example.com");
	m_u16(&m, 1);
	m_u16(&m, 1);
	ck_assert_int_eq(parse(), 0);
	ck_assert_str_eq(q.name, "a\\046b.\\255\\092.example.com");
	/* Escaped names never match, even under an allowed suffix. */
	ck_assert(!dns_name_match(q.name, "*.example.com"));
}
END_TEST

START_TEST(read_name_compressed)
{
	char out[DNS_NAME_TEXT_MAX];
	size_t off;

	/* body: "example.com" at 12, then "www" + pointer to 12 at 25. */
	m_hdr(&m, 0, 0, 0, 0, 0, 0);
	m_name(&m, "example.com");
	off = m.n;
	m_u8(&m, 3);
	memcpy(m.b + m.n, "www", 3);
	m.n += 3;
	m_ptr(&m, DNS_HDR_LEN);
	m_u8(&m, 0x99);		/* something after the name */
	ck_assert_int_eq(dns_read_name(m.b, m.n, &off, out, sizeof(out)), 0);
	ck_assert_str_eq(out, "www.example.com");
	ck_assert_uint_eq(off, m.n - 1);
	/* Out of range and into a loop between two names. */
	off = 25;
	m.b[30] = 0x07;
	m.b[29] = 0xc7;
	ck_assert_int_eq(dns_read_name(m.b, m.n, &off, out, sizeof(out)), -EBADMSG);
	/* a: "x" -> pointer to b; b: "y" -> pointer to a (loop). */
	m_hdr(&m, 0, 0, 0, 0, 0, 0);
	m_u8(&m, 1);
	m_u8(&m, 'x');
	m_ptr(&m, 16);		/* at 14, points at 16: forward */
	m_u8(&m, 1);
	m_u8(&m, 'y');
	m_ptr(&m, 12);		/* at 18, points back at 12 */
	off = 16;
	ck_assert_int_eq(dns_read_name(m.b, m.n, &off, out, sizeof(out)), -EBADMSG);
	off = 12;
	ck_assert_int_eq(dns_read_name(m.b, m.n, &off, out, sizeof(out)), -EBADMSG);
	/* Output buffer too small. */
	m_hdr(&m, 0, 0, 0, 0, 0, 0);
	m_name(&m, "example.com");
	off = 12;
	ck_assert_int_eq(dns_read_name(m.b, m.n, &off, out, 5), -EBADMSG);
}
END_TEST

/* ---- matching ---- */

START_TEST(match_names)
{
	ck_assert(dns_name_match("example.com", "example.com"));
	ck_assert(dns_name_match("EXAMPLE.com", "example.COM"));
	ck_assert(dns_name_match("example.com.", "example.com"));
	ck_assert(dns_name_match("example.com", "example.com."));
	ck_assert(!dns_name_match("www.example.com", "example.com"));
	ck_assert(!dns_name_match("example.co", "example.com"));
	ck_assert(!dns_name_match("xexample.com", "example.com"));

	ck_assert(dns_name_match("a.example.com", "*.example.com"));
	ck_assert(dns_name_match("a.b.Example.Com.", "*.example.com"));
	ck_assert(!dns_name_match("example.com", "*.example.com"));
	ck_assert(!dns_name_match("evil-example.com", "*.example.com"));
	ck_assert(!dns_name_match("evilexample.com", "*.example.com"));
	ck_assert(!dns_name_match("a.example.com.evil.org", "*.example.com"));
	ck_assert(!dns_name_match(".example.com", "*.example.com"));
	ck_assert(!dns_name_match("a..example.com", "*.example.com"));
	ck_assert(!dns_name_match("", "*.example.com"));
	ck_assert(!dns_name_match("", ""));
	ck_assert(!dns_name_match("a\\046example.com", "*.example.com"));
}
END_TEST

START_TEST(match_list)
{
	static const char *const allow[] = { "pypi.org", "*.pythonhosted.org" };

	ck_assert(dns_name_allowed("pypi.org", allow, 2));
	ck_assert(dns_name_allowed("files.pythonhosted.org", allow, 2));
	ck_assert(!dns_name_allowed("pythonhosted.org", allow, 2));
	ck_assert(!dns_name_allowed("www.pypi.org", allow, 2));
	ck_assert(!dns_name_allowed("pypi.org", allow, 0));
}
END_TEST

START_TEST(pattern_check)
{
	ck_assert_int_eq(dns_pattern_check("example.com"), 0);
	ck_assert_int_eq(dns_pattern_check("*.example.com"), 0);
	ck_assert_int_eq(dns_pattern_check("Example.COM."), 0);
	ck_assert_int_eq(dns_pattern_check("_srv.my-host1"), 0);
	ck_assert_int_eq(dns_pattern_check(""), -EINVAL);
	ck_assert_int_eq(dns_pattern_check("*"), -EINVAL);
	ck_assert_int_eq(dns_pattern_check("*."), -EINVAL);
	ck_assert_int_eq(dns_pattern_check("*.*.com"), -EINVAL);
	ck_assert_int_eq(dns_pattern_check("a*.com"), -EINVAL);
	ck_assert_int_eq(dns_pattern_check("a..com"), -EINVAL);
	ck_assert_int_eq(dns_pattern_check(".com"), -EINVAL);
	ck_assert_int_eq(dns_pattern_check("ex ample.com"), -EINVAL);
	ck_assert_int_eq(dns_pattern_check("1.2.3.4/8"), -EINVAL);
}
END_TEST

/* ---- building errors ---- */

START_TEST(build_errors)
{
	uint8_t out[512];
	int n;

	m_hdr(&m, 0x1234, DNS_FLAG_RD, 1, 0, 0, 0);
	m_q(&m, "evil.org", DNS_TYPE_A);
	ck_assert_int_eq(parse(), 0);
	n = dns_build_error(m.b, &q, 0, DNS_RCODE_NXDOMAIN, out, sizeof(out));
	ck_assert_int_eq(n, (int)m.n);
	ck_assert_uint_eq(out[0] << 8 | out[1], 0x1234);
	ck_assert_uint_eq(out[2] << 8 | out[3],
			  DNS_FLAG_QR | DNS_FLAG_RD | DNS_FLAG_RA | DNS_RCODE_NXDOMAIN);
	ck_assert_uint_eq(out[4] << 8 | out[5], 1);
	ck_assert_mem_eq(out + 6, "\0\0\0\0\0\0", 6);
	ck_assert_mem_eq(out + 12, m.b + 12, m.n - 12);
	/* It parses as a response to that very query. */
	ck_assert_int_eq(dns_parse_response(out, n, 0x1234, &q, 30, 86400, &ans), 0);
	ck_assert_int_eq(ans.rcode, DNS_RCODE_NXDOMAIN);
	ck_assert_uint_eq(ans.naddr, 0);

	n = dns_build_error(m.b, &q, 0, DNS_RCODE_SERVFAIL, out, sizeof(out));
	ck_assert_int_eq(out[3] & 0xf, DNS_RCODE_SERVFAIL);
	ck_assert_int_eq(dns_build_error(m.b, &q, 0, DNS_RCODE_SERVFAIL, out, m.n - 1),
			 -ENOSPC);

	n = dns_build_error(NULL, NULL, 0x4321, DNS_RCODE_FORMERR, out, sizeof(out));
	ck_assert_int_eq(n, DNS_HDR_LEN);
	ck_assert_uint_eq(out[0] << 8 | out[1], 0x4321);
	ck_assert_uint_eq(out[2] << 8 | out[3], DNS_FLAG_QR | DNS_FLAG_RA | DNS_RCODE_FORMERR);
	ck_assert_uint_eq(out[4] << 8 | out[5], 0);
}
END_TEST

/* ---- answers ---- */

/* The query www.example.com/A with ID 0x1111, parsed into q. */
static void make_query(const char *name, uint16_t type)
{
	m_hdr(&m, 0x1111, DNS_FLAG_RD, 1, 0, 0, 0);
	m_q(&m, name, type);
	ck_assert_int_eq(parse(), 0);
}

static int parse_resp(void)
{
	return dns_parse_response(m.b, m.n, 0x1111, &q, 30, 86400, &ans);
}

START_TEST(answer_a_aaaa)
{
	static const uint8_t v6[16] = { 0x20, 0x01, 0x0d, 0xb8, [15] = 1 };

	make_query("www.example.com", DNS_TYPE_A);
	m_hdr(&m, 0x1111, DNS_FLAG_QR | DNS_FLAG_RA, 1, 4, 0, 0);
	m_q(&m, "WWW.example.com", DNS_TYPE_A);	/* 0x20 case echo is fine */
	m_ptr(&m, 12);
	m_rr(&m, DNS_TYPE_A, 300, 4);
	m_a(&m, 93, 184, 216, 34);
	m_ptr(&m, 12);
	m_rr(&m, DNS_TYPE_A, 5, 4);		/* below the floor */
	m_a(&m, 10, 0, 0, 1);
	m_ptr(&m, 12);
	m_rr(&m, DNS_TYPE_AAAA, 0x80000001u, 16);	/* "negative": zero */
	memcpy(m.b + m.n, v6, 16);
	m.n += 16;
	m_ptr(&m, 12);
	m_rr(&m, DNS_TYPE_A, 999999, 4);		/* above the cap */
	m_a(&m, 1, 1, 1, 1);
	ck_assert_int_eq(parse_resp(), 0);
	ck_assert_int_eq(ans.rcode, 0);
	ck_assert_uint_eq(ans.naddr, 4);
	ck_assert_int_eq(ans.addr[0].family, AF_INET);
	ck_assert_mem_eq(ans.addr[0].addr, "\x5d\xb8\xd8\x22", 4);
	ck_assert_uint_eq(ans.addr[0].ttl, 300);
	ck_assert_uint_eq(ans.addr[1].ttl, 30);
	ck_assert_int_eq(ans.addr[2].family, AF_INET6);
	ck_assert_mem_eq(ans.addr[2].addr, v6, 16);
	ck_assert_uint_eq(ans.addr[2].ttl, 30);
	ck_assert_uint_eq(ans.addr[3].ttl, 86400);
}
END_TEST

START_TEST(answer_cname_chain)
{
	size_t cdn;

	make_query("www.example.com", DNS_TYPE_A);
	m_hdr(&m, 0x1111, DNS_FLAG_QR, 1, 5, 0, 0);
	m_q(&m, "www.example.com", DNS_TYPE_A);
	/* Out of order: the A first, then the chain that leads to it. */
	m_name(&m, "edge.cdn.net");
	m_rr(&m, DNS_TYPE_A, 60, 4);
	m_a(&m, 192, 0, 2, 7);
	/* An address for a name off the chain: not reported. */
	m_name(&m, "other.org");
	m_rr(&m, DNS_TYPE_A, 60, 4);
	m_a(&m, 6, 6, 6, 6);
	m_ptr(&m, 12);		/* www.example.com CNAME cdn.com (compressed) */
	m_rr(&m, DNS_TYPE_CNAME, 60, 6);
	cdn = m.n;
	m_u8(&m, 3);
	memcpy(m.b + m.n, "cdn", 3);
	m.n += 3;
	m_ptr(&m, 24);		/* "com" of the question */
	m_ptr(&m, cdn);		/* cdn.com CNAME edge.cdn.net */
	m_rr(&m, DNS_TYPE_CNAME, 60, 14);
	m_name(&m, "edge.cdn.net");
	m_ptr(&m, 12);		/* a direct A for the query name too */
	m_rr(&m, DNS_TYPE_A, 60, 4);
	m_a(&m, 192, 0, 2, 8);
	ck_assert_int_eq(parse_resp(), 0);
	ck_assert_uint_eq(ans.naddr, 2);
	ck_assert_mem_eq(ans.addr[0].addr, "\xc0\x00\x02\x07", 4);
	ck_assert_mem_eq(ans.addr[1].addr, "\xc0\x00\x02\x08", 4);
}
END_TEST

START_TEST(answer_cname_loop)
{
	/* a CNAME b, b CNAME a, no address: terminates, nothing reported. */
	make_query("a.test", DNS_TYPE_A);
	m_hdr(&m, 0x1111, DNS_FLAG_QR, 1, 2, 0, 0);
	m_q(&m, "a.test", DNS_TYPE_A);
	m_ptr(&m, 12);
	m_rr(&m, DNS_TYPE_CNAME, 60, 8);
	m_name(&m, "b.test");
	m_name(&m, "b.test");
	m_rr(&m, DNS_TYPE_CNAME, 60, 2);
	m_ptr(&m, 12);
	ck_assert_int_eq(parse_resp(), 0);
	ck_assert_uint_eq(ans.naddr, 0);
}
END_TEST

START_TEST(answer_bogus)
{
	size_t good;

	make_query("example.com", DNS_TYPE_A);
	m_hdr(&m, 0x1111, DNS_FLAG_QR, 1, 1, 0, 0);
	m_q(&m, "example.com", DNS_TYPE_A);
	m_ptr(&m, 12);
	m_rr(&m, DNS_TYPE_A, 60, 4);
	m_a(&m, 1, 2, 3, 4);
	good = m.n;
	ck_assert_int_eq(parse_resp(), 0);
	ck_assert_uint_eq(ans.naddr, 1);

	/* A record with 5 bytes of rdata. */
	m.b[good - 5] = 5;
	m_u8(&m, 0);
	ck_assert_int_eq(parse_resp(), -EBADMSG);
	/* rdlength past the end. */
	m.n = good;
	m.b[good - 5] = 40;
	ck_assert_int_eq(parse_resp(), -EBADMSG);
	m.b[good - 5] = 4;
	/* Trailing garbage. */
	m_u8(&m, 0);
	ck_assert_int_eq(parse_resp(), -EBADMSG);
	m.n = good;
	/* More records announced than present. */
	m.b[7] = 2;
	ck_assert_int_eq(parse_resp(), -EBADMSG);
	m.b[7] = 1;
	/* Wrong ID, QR clear, question for another name or type. */
	ck_assert_int_eq(dns_parse_response(m.b, m.n, 0x2222, &q, 30, 86400, &ans), -EBADMSG);
	m.b[2] &= ~0x80;
	ck_assert_int_eq(parse_resp(), -EBADMSG);
	m.b[2] |= 0x80;
	m.b[13] = 'X';
	ck_assert_int_eq(parse_resp(), -EBADMSG);
	m.b[13] = 'e';
	m.b[12 + 13 + 1] = DNS_TYPE_AAAA;
	ck_assert_int_eq(parse_resp(), -EBADMSG);
	m.b[12 + 13 + 1] = DNS_TYPE_A;
	ck_assert_int_eq(parse_resp(), 0);
	/* A pointer in an owner name that points forward. */
	m.b[12 + 17 + 1] = 40;
	ck_assert_int_eq(parse_resp(), -EBADMSG);
	/* Too short for a header. */
	ck_assert_int_eq(dns_parse_response(m.b, 11, 0x1111, &q, 30, 86400, &ans), -EBADMSG);
}
END_TEST

START_TEST(answer_nxdomain_authority)
{
	/* NXDOMAIN with an SOA in authority: well-formed, no addresses. */
	make_query("nope.example.com", DNS_TYPE_A);
	m_hdr(&m, 0x1111, DNS_FLAG_QR | DNS_RCODE_NXDOMAIN, 1, 0, 1, 0);
	m_q(&m, "nope.example.com", DNS_TYPE_A);
	m_ptr(&m, 12 + 5);
	m_rr(&m, 6, 60, 4);
	m_a(&m, 0, 0, 0, 0);	/* opaque rdata is just skipped */
	ck_assert_int_eq(parse_resp(), 0);
	ck_assert_int_eq(ans.rcode, DNS_RCODE_NXDOMAIN);
	ck_assert_uint_eq(ans.naddr, 0);
}
END_TEST

START_TEST(answer_many)
{
	unsigned i;

	make_query("big.test", DNS_TYPE_A);
	m_hdr(&m, 0x1111, DNS_FLAG_QR, 1, DNS_ADDR_MAX + 3, 0, 0);
	m_q(&m, "big.test", DNS_TYPE_A);
	for (i = 0; i < DNS_ADDR_MAX + 3; i++) {
		m_ptr(&m, 12);
		m_rr(&m, DNS_TYPE_A, 60, 4);
		m_a(&m, 10, 0, i >> 8, i & 0xff);
	}
	ck_assert_int_eq(parse_resp(), 0);
	ck_assert_uint_eq(ans.naddr, DNS_ADDR_MAX);
	ck_assert_uint_eq(ans.ndropped, 3);
}
END_TEST

/* ---- the query the proxy sends upstream, and the guest's answer ---- */

START_TEST(name_to_wire)
{
	uint8_t w[300];
	char text[DNS_NAME_TEXT_MAX];
	size_t off = 0;
	int n;

	n = dns_name_to_wire("www.example.com", w, sizeof(w));
	ck_assert_int_eq(n, 17);
	ck_assert_mem_eq(w, "\3www\7example\3com\0", 17);
	ck_assert_int_eq(dns_name_to_wire("", w, sizeof(w)), 1);
	ck_assert_uint_eq(w[0], 0);
	/* Escapes come back as the bytes they stand for, and round-trip. */
	n = dns_name_to_wire("a\\046b.\\255\\092.x", w, sizeof(w));
	ck_assert_int_eq(n, 10);
	ck_assert_mem_eq(w, "\3a.b\2\xff\\\1x\0", 10);
	ck_assert_int_eq(dns_read_name(w, n, &off, text, sizeof(text)), 0);
	ck_assert_str_eq(text, "a\\046b.\\255\\092.x");
	/* Not our form: empty labels, a trailing dot, bad escapes, too long. */
	ck_assert_int_eq(dns_name_to_wire("a..b", w, sizeof(w)), -EINVAL);
	ck_assert_int_eq(dns_name_to_wire(".a", w, sizeof(w)), -EINVAL);
	ck_assert_int_eq(dns_name_to_wire("a.", w, sizeof(w)), -EINVAL);
	ck_assert_int_eq(dns_name_to_wire("a\\25", w, sizeof(w)), -EINVAL);
	ck_assert_int_eq(dns_name_to_wire("a\\256", w, sizeof(w)), -EINVAL);
	memset(text, 'a', 64);
	text[64] = '\0';
	ck_assert_int_eq(dns_name_to_wire(text, w, sizeof(w)), -EINVAL);
	text[63] = '\0';
	ck_assert_int_eq(dns_name_to_wire(text, w, sizeof(w)), 65);
	ck_assert_int_eq(dns_name_to_wire(text, w, 10), -ENOSPC);
	for (n = 0; n < 4 * 64; n += 64) {
		memset(text + n, 'b', 63);
		text[n + 63] = '.';
	}
	text[4 * 64 - 1] = '\0';	/* four 63-byte labels: 257 bytes on the wire */
	ck_assert_int_eq(dns_name_to_wire(text, w, sizeof(w)), -EINVAL);
}
END_TEST

START_TEST(build_minimal_query)
{
	struct dns_query q2;
	uint8_t out[600];
	int n;

	/* The guest's: odd flags, mixed case, EDNS and a second additional record. */
	m_hdr(&m, 0x4242, DNS_FLAG_RD | DNS_FLAG_TC | 0x0040 | 0x0020 | 0x0010, 1, 0, 0, 2);
	m_q(&m, "WwW.ExAmple.COM", DNS_TYPE_AAAA);
	m_u8(&m, 0);
	m_u16(&m, DNS_TYPE_OPT);
	m_u16(&m, 4096);
	m_u32(&m, 0x8000);	/* DO */
	m_u16(&m, 4);
	m_u32(&m, 0x000a0000);	/* an (empty) cookie option */
	m_name(&m, "x");
	m_rr(&m, 16, 0, 1);	/* TXT */
	m_u8(&m, 0);
	ck_assert_int_eq(parse(), 0);
	n = dns_build_query(&q, 0x9999, out, sizeof(out));
	ck_assert_int_eq(n, 12 + 17 + 4);
	ck_assert_mem_eq(out, "\x99\x99\x01\x00\0\1\0\0\0\0\0\0", 12);
	ck_assert_mem_eq(out + 12, "\3www\7example\3com\0\0\x1c\0\1", 21);
	ck_assert_int_eq(dns_parse_query(out, n, &q2), 0);
	ck_assert_str_eq(q2.name, q.name);
	ck_assert_int_eq(dns_build_query(&q, 1, out, 20), -ENOSPC);
}
END_TEST

START_TEST(restore_question)
{
	uint8_t guest[600], resp[600];
	size_t glen, rlen;
	struct dns_query gq;
	int n;

	/* The guest asked with 0x20 case and RD clear. */
	m_hdr(&m, 0x7777, 0, 1, 0, 0, 0);
	m_q(&m, "WwW.ExAmple.COM", DNS_TYPE_A);
	ck_assert_int_eq(parse(), 0);
	gq = q;
	memcpy(guest, m.b, m.n);
	glen = m.n;
	/* Upstream answered our lower-case question, pointing into it. */
	m_hdr(&m, 0x9999, DNS_FLAG_QR | DNS_FLAG_RD | DNS_FLAG_RA, 1, 1, 0, 0);
	m_q(&m, "www.example.com", DNS_TYPE_A);
	m_ptr(&m, 12);
	m_rr(&m, DNS_TYPE_A, 60, 4);
	m_a(&m, 192, 0, 2, 7);
	q = gq;
	ck_assert_int_eq(dns_parse_response(m.b, m.n, 0x9999, &q, 30, 86400, &ans), 0);
	memcpy(resp, m.b, m.n);
	rlen = m.n;
	ck_assert_int_eq(dns_restore_question(resp, rlen, guest, &gq), 0);
	ck_assert_uint_eq(resp[0] << 8 | resp[1], 0x7777);
	ck_assert_uint_eq((resp[2] << 8 | resp[3]) & DNS_FLAG_RD, 0);
	ck_assert_uint_ne((resp[2] << 8 | resp[3]) & DNS_FLAG_QR, 0);
	ck_assert_mem_eq(resp + 12, guest + 12, glen - 12);
	/* Still a well-formed answer to the guest's own query. */
	n = dns_parse_response(resp, rlen, 0x7777, &gq, 30, 86400, &ans);
	ck_assert_int_eq(n, 0);
	ck_assert_uint_eq(ans.naddr, 1);
	/* Another question (or a truncated message) is refused. */
	m_hdr(&m, 0x9999, DNS_FLAG_QR, 1, 0, 0, 0);
	m_q(&m, "www.example.org", DNS_TYPE_A);
	ck_assert_int_eq(dns_restore_question(m.b, m.n, guest, &gq), -EBADMSG);
	ck_assert_int_eq(dns_restore_question(resp, 20, guest, &gq), -EBADMSG);
}
END_TEST

Suite *dns_suite(void)
{
	Suite *s = suite_create("dns");
	TCase *tq = tcase_create("query");
	TCase *tm = tcase_create("match");
	TCase *ta = tcase_create("answer");

	tcase_add_test(tq, query_valid);
	tcase_add_test(tq, query_edns);
	tcase_add_test(tq, query_root);
	tcase_add_test(tq, query_truncated);
	tcase_add_test(tq, query_counts);
	tcase_add_test(tq, query_flags);
	tcase_add_test(tq, query_long_label);
	tcase_add_test(tq, query_long_name);
	tcase_add_test(tq, query_pointers);
	tcase_add_test(tq, query_trailing);
	tcase_add_test(tq, query_escapes);
	tcase_add_test(tq, read_name_compressed);
	suite_add_tcase(s, tq);
	tcase_add_test(tm, match_names);
	tcase_add_test(tm, match_list);
	tcase_add_test(tm, pattern_check);
	suite_add_tcase(s, tm);
	tcase_add_test(ta, build_errors);
	tcase_add_test(ta, answer_a_aaaa);
	tcase_add_test(ta, answer_cname_chain);
	tcase_add_test(ta, answer_cname_loop);
	tcase_add_test(ta, answer_bogus);
	tcase_add_test(ta, answer_nxdomain_authority);
	tcase_add_test(ta, answer_many);
	tcase_add_test(ta, name_to_wire);
	tcase_add_test(ta, build_minimal_query);
	tcase_add_test(ta, restore_question);
	suite_add_tcase(s, ta);
	return s;
}
