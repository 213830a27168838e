/*
 * snapshot: a template's state file, written and checked. See snapshot.h.
 */
#include <errno.h>
#include <nettle/hmac.h>
#include <nettle/memops.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "template/snapshot.h"
#include "lib/util.h"

#define SEC_HDR_LEN 16
#define TLV_HDR_LEN 6
/* Header offsets (snapshot.h). */
#define H_SHA 24
#define H_COUNT 56
#define H_SEAL 60		/* it covers the header before it, and the body */
#define H_CRC 92

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = v;
	p[1] = v >> 8;
	p[2] = v >> 16;
	p[3] = v >> 24;
}

static void put64(uint8_t *p, uint64_t v)
{
	put32(p, (uint32_t)v);
	put32(p + 4, (uint32_t)(v >> 32));
}

static uint32_t get32(const uint8_t *p)
{
	return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p)
{
	return get32(p) | (uint64_t)get32(p + 4) << 32;
}

static uint32_t crc(const uint8_t *p, size_t len)
{
	return (uint32_t)crc32(crc32(0, Z_NULL, 0), p, (uInt)len);
}

/* ---- reading ---- */

int snap_parse(const uint8_t *buf, size_t len, struct snap *s)
{
	uint8_t digest[SNAP_SHA256_LEN];
	uint64_t body;
	uint32_t version, hlen, count, i;
	size_t off;

	memset(s, 0, sizeof(*s));
	if (len < SNAP_HEADER_LEN || memcmp(buf, SNAP_MAGIC, 8))
		return husk_seterr(EINVAL, "not a husk template state file (no %s header)",
				   SNAP_MAGIC);
	/*
	 * The version before the checksum: another version's header may be
	 * laid out otherwise (version 1's was 64 bytes, without a seal).
	 */
	version = get32(buf + 8);
	if (version != SNAP_VERSION)
		return husk_seterr(EPROTONOSUPPORT, "the template's state file has format "
				   "version %u; this husk reads version %u: make the template "
				   "again", version, SNAP_VERSION);
	if (get32(buf + H_CRC) != crc(buf, H_CRC))
		return husk_seterr(EBADMSG, "the state file's header is corrupt (checksum)");
	hlen = get32(buf + 12);
	body = get64(buf + 16);
	count = get32(buf + H_COUNT);
	if (hlen != SNAP_HEADER_LEN || len > SNAP_MAX_LEN || body != len - SNAP_HEADER_LEN)
		return husk_seterr(EINVAL, "the state file is %zu bytes, its header says %llu: "
				   "truncated or extended", len,
				   (unsigned long long)(body + SNAP_HEADER_LEN));
	if (count > SNAP_MAX_SECTIONS)
		return husk_seterr(EINVAL, "the state file claims %u sections (limit %d)",
				   count, SNAP_MAX_SECTIONS);
	digest_sha256(buf + SNAP_HEADER_LEN, body, digest);
	if (memcmp(digest, buf + H_SHA, SNAP_SHA256_LEN))
		return husk_seterr(EBADMSG, "the state file's contents do not match its "
				   "digest: it was altered or damaged");
	off = SNAP_HEADER_LEN;
	for (i = 0; i < count; i++) {
		struct snap_section *sec = &s->sec[i];
		size_t padded;

		if (len - off < SEC_HDR_LEN)
			return husk_seterr(EINVAL, "section %u of the state file is cut off", i);
		sec->type = get32(buf + off);
		sec->index = get32(buf + off + 4);
		sec->len = get32(buf + off + 8);
		if (sec->len > SNAP_MAX_PAYLOAD || sec->len > len - off - SEC_HDR_LEN)
			return husk_seterr(EINVAL, "section %u claims %u bytes, more than the "
					   "file holds", i, sec->len);
		sec->data = buf + off + SEC_HDR_LEN;
		if (crc(sec->data, sec->len) != get32(buf + off + 12))
			return husk_seterr(EBADMSG, "section %u (type %u) of the state file is "
					   "corrupt (checksum)", i, sec->type);
		if (snap_find(s, sec->type, sec->index))
			return husk_seterr(EINVAL, "the state file has section type %u index %u "
					   "twice", sec->type, sec->index);
		s->nr = i + 1;
		padded = (sec->len + 7) & ~(size_t)7;
		if (padded > len - off - SEC_HDR_LEN)
			return husk_seterr(EINVAL, "section %u's padding is cut off", i);
		off += SEC_HDR_LEN + padded;
	}
	if (off != len)
		return husk_seterr(EINVAL, "%zu bytes after the last section of the state file",
				   len - off);
	return 0;
}

const struct snap_section *snap_find(const struct snap *s, uint32_t type, uint32_t index)
{
	unsigned i;

	for (i = 0; i < s->nr; i++)
		if (s->sec[i].type == type && s->sec[i].index == index)
			return &s->sec[i];
	return NULL;
}

int snap_get(const struct snap_section *sec, uint16_t tag, struct tlv *t)
{
	struct tlv_iter it;
	int n;

	tlv_iter_init(&it, sec->data, sec->len);
	while ((n = tlv_next(&it, t)) == 1)
		if (t->tag == tag)
			return 1;
	return n;
}

int snap_get_exact(const struct snap_section *sec, uint16_t tag, void *out, size_t len)
{
	struct tlv t;
	int n = snap_get(sec, tag, &t);

	if (n < 0)
		return n;
	if (!n)
		return husk_seterr(ENOENT, "section type %u lacks element %u", sec->type, tag);
	if (t.len != len)
		return husk_seterr(EINVAL, "section type %u element %u has %u bytes, expected %zu",
				   sec->type, tag, t.len, len);
	memcpy(out, t.val, len);
	return 0;
}

int snap_get_u64(const struct snap_section *sec, uint16_t tag, uint64_t *v)
{
	uint8_t b[8];
	int err = snap_get_exact(sec, tag, b, sizeof(b));

	if (!err)
		*v = get64(b);
	return err;
}

/* ---- writing ---- */

void snap_writer_init(struct snap_writer *w)
{
	memset(w, 0, sizeof(*w));
}

void snap_writer_free(struct snap_writer *w)
{
	free(w->data);
	snap_writer_init(w);
}

static uint8_t *grow(struct snap_writer *w, size_t n)
{
	size_t cap;
	uint8_t *p;

	if (w->failed)
		return NULL;
	if (n > SNAP_MAX_LEN || w->len > SNAP_MAX_LEN - n) {
		w->failed = true;
		return NULL;
	}
	if (w->len + n > w->cap) {
		cap = w->cap ? w->cap : 4096;
		while (cap < w->len + n)
			cap *= 2;
		p = realloc(w->data, cap);
		if (!p) {
			w->failed = true;
			return NULL;
		}
		w->data = p;
		w->cap = cap;
	}
	p = w->data + w->len;
	w->len += n;
	return p;
}

void snap_begin(struct snap_writer *w, uint32_t type, uint32_t index)
{
	uint8_t *h;

	if (!w->len && !grow(w, SNAP_HEADER_LEN))
		return;
	if (w->open || w->nr == SNAP_MAX_SECTIONS) {
		w->failed = true;
		return;
	}
	w->sec_off = w->len;
	h = grow(w, SEC_HDR_LEN);
	if (!h)
		return;
	put32(h, type);
	put32(h + 4, index);
	w->open = true;
}

void snap_put(struct snap_writer *w, uint16_t tag, const void *val, uint32_t len)
{
	uint8_t *p;

	if (!w->open) {
		w->failed = true;
		return;
	}
	p = grow(w, TLV_HDR_LEN + (size_t)len);
	if (!p)
		return;
	p[0] = tag;
	p[1] = tag >> 8;
	put32(p + 2, len);
	if (len)
		memcpy(p + TLV_HDR_LEN, val, len);
}

void snap_put_raw(struct snap_writer *w, const void *p, size_t len)
{
	uint8_t *d;

	if (!w->open) {
		w->failed = true;
		return;
	}
	d = grow(w, len);
	if (d && len)
		memcpy(d, p, len);
}

void snap_put_u64(struct snap_writer *w, uint16_t tag, uint64_t v)
{
	uint8_t b[8];

	put64(b, v);
	snap_put(w, tag, b, sizeof(b));
}

void snap_put_str(struct snap_writer *w, uint16_t tag, const char *s)
{
	snap_put(w, tag, s, (uint32_t)strlen(s));
}

void snap_end(struct snap_writer *w)
{
	size_t plen, pad;
	uint8_t *p;

	if (!w->open || w->failed) {
		w->failed = true;
		return;
	}
	plen = w->len - w->sec_off - SEC_HDR_LEN;
	if (plen > SNAP_MAX_PAYLOAD) {
		w->failed = true;
		return;
	}
	pad = (8 - plen % 8) % 8;
	p = grow(w, pad);
	if (pad && !p)
		return;
	if (pad)
		memset(p, 0, pad);
	put32(w->data + w->sec_off + 8, (uint32_t)plen);
	put32(w->data + w->sec_off + 12, crc(w->data + w->sec_off + SEC_HDR_LEN, plen));
	w->open = false;
	w->nr++;
}

int snap_finish(struct snap_writer *w)
{
	uint8_t *h;

	if (!w->len)
		grow(w, SNAP_HEADER_LEN);
	if (w->failed || w->open)
		return husk_seterr(ENOMEM, "cannot build the state file (out of memory, too "
				   "large or unbalanced sections)");
	h = w->data;
	memset(h, 0, SNAP_HEADER_LEN);
	memcpy(h, SNAP_MAGIC, 8);
	put32(h + 8, SNAP_VERSION);
	put32(h + 12, SNAP_HEADER_LEN);
	put64(h + 16, w->len - SNAP_HEADER_LEN);
	digest_sha256(w->data + SNAP_HEADER_LEN, w->len - SNAP_HEADER_LEN, h + H_SHA);
	put32(h + H_COUNT, w->nr);
	put32(h + H_CRC, crc(h, H_CRC));
	return 0;
}

/* ---- the seal ---- */

static void seal_of(const uint8_t *buf, size_t len, const uint8_t key[SNAP_KEY_LEN],
		    uint8_t out[SNAP_SEAL_LEN])
{
	struct hmac_sha256_ctx c;

	hmac_sha256_set_key(&c, SNAP_KEY_LEN, key);
	hmac_sha256_update(&c, H_SEAL, buf);
	hmac_sha256_update(&c, len - SNAP_HEADER_LEN, buf + SNAP_HEADER_LEN);
	hmac_sha256_digest(&c, SNAP_SEAL_LEN, out);
}

void snap_seal(uint8_t *buf, size_t len, const uint8_t key[SNAP_KEY_LEN])
{
	if (len < SNAP_HEADER_LEN)
		return;
	seal_of(buf, len, key, buf + H_SEAL);
	put32(buf + H_CRC, crc(buf, H_CRC));
}

int snap_check_seal(const uint8_t *buf, size_t len, const uint8_t key[SNAP_KEY_LEN])
{
	uint8_t want[SNAP_SEAL_LEN];
	int ok;

	if (len < SNAP_HEADER_LEN)
		return husk_seterr(EBADMSG, "the state file is too short to carry a seal");
	seal_of(buf, len, key, want);
	ok = memeql_sec(want, buf + H_SEAL, SNAP_SEAL_LEN);
	memset(want, 0, sizeof(want));
	if (!ok)
		return husk_seterr(EBADMSG, "the state file was not sealed with this template "
				   "directory's key: it was made elsewhere (or by an older husk), "
				   "or altered; make the template again here");
	return 0;
}
