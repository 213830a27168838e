/*
 * layer: OCI / Docker layer tar streams applied onto a private staging tree.
 *
 * A layer is read from its fd in 64 KiB chunks, inflated when it is gzip'd,
 * and parsed as ustar / GNU / PAX. Each entry is applied at once, so memory
 * stays bounded by the chunk buffers, the capped extended headers and one
 * small node per entry of the tree.
 *
 * Nothing is ever resolved as a path string. A name is split into
 * components and walked from the root fd with openat(O_DIRECTORY |
 * O_NOFOLLOW), so a symlink or a file where a directory is expected stops
 * the walk with an error instead of leading out of the tree; creations use
 * O_EXCL / mkdirat / symlinkat / linkat relative to the parent's fd.
 *
 * The tree is mirrored in memory: one node per entry on disk, found by a
 * keyed hash of (parent, name) so hostile names cannot make the table
 * degrade. The mirror carries the attributes the image asks for (the staging
 * tree only gets safe modes), tells replacements and whiteouts what exists,
 * and remembers which layer last wrote each entry for opaque directories.
 * Removals go through the fds too (unlinkat, then a directory's content).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "image/layer.h"
#include "lib/util.h"

#define BLOCK 512
#define CHUNK (64 * 1024)	/* read, inflate and write granularity */
#define EXT_MAX (64 * 1024)	/* PAX, GNU long name/link and global payloads */
#define NAME_MAX_LEN 4096	/* a name as given, and a hardlink's target */
#define LINK_MAX_LEN 4095	/* a symlink's target */
#define MAX_DEPTH 256		/* components of one name */
#define COMP_MAX 255		/* bytes of one component (NAME_MAX) */

#define WH ".wh."
#define WH_META ".wh..wh."
#define WH_OPQ ".wh..wh..opq"

/* ---- the mirror of the staging tree ---- */

struct node {
	struct node *parent;
	struct node *kids;		/* first child */
	struct node *next, *prev;	/* siblings */
	struct node *hnext;		/* hash chain */
	uint64_t id;			/* hashed with a child's name */
	uint64_t hash;
	unsigned gen;			/* the layer that last wrote it */
	unsigned swept;			/* the layer whose opaque marker emptied it */
	bool recorded;			/* a header described it */
	struct layer_attr a;
	size_t len;
	char name[];
};

struct layer_tree {
	int root;
	struct layer_limits lim;
	struct layer_stats st;
	uint64_t made;		/* directories made implicitly as parents */
	uint64_t data;		/* entry data consumed: the max_bytes budget */
	unsigned gen;		/* layers begun; nodes carry the one that wrote them */
	int err;		/* sticky: a failed layer leaves the tree unspecified */

	struct node *top;	/* the root directory (not in the hash) */
	struct node **tab;
	size_t mask, nodes;
	uint64_t key[2];
	uint64_t next_id;

	/* The parent directory last walked: consecutive entries of a sorted
	 * layer share it. Dropped when its directory may go away. */
	int cfd;
	struct node *cnode;
	size_t clen;
	char cpath[NAME_MAX_LEN + 1];
};

static const struct layer_attr implicit_dir = { .mode = S_IFDIR | 0755 };

#define ROTL(x, b) (((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND							\
	do {								\
		v0 += v1; v1 = ROTL(v1, 13); v1 ^= v0; v0 = ROTL(v0, 32); \
		v2 += v3; v3 = ROTL(v3, 16); v3 ^= v2;			\
		v0 += v3; v3 = ROTL(v3, 21); v3 ^= v0;			\
		v2 += v1; v1 = ROTL(v1, 17); v1 ^= v2; v2 = ROTL(v2, 32); \
	} while (0)

/* SipHash-2-4: names come from the layer, so the hash is keyed. */
static uint64_t siphash(const uint64_t k[2], const unsigned char *in, size_t len)
{
	uint64_t v0 = 0x736f6d6570736575ull ^ k[0], v1 = 0x646f72616e646f6dull ^ k[1];
	uint64_t v2 = 0x6c7967656e657261ull ^ k[0], v3 = 0x7465646279746573ull ^ k[1];
	uint64_t m, b = (uint64_t)len << 56;
	size_t i, j, end = len & ~(size_t)7;

	for (i = 0; i < end; i += 8) {
		for (m = 0, j = 0; j < 8; j++)
			m |= (uint64_t)in[i + j] << (8 * j);
		v3 ^= m;
		SIPROUND;
		SIPROUND;
		v0 ^= m;
	}
	for (j = 0; j < (len & 7); j++)
		b |= (uint64_t)in[end + j] << (8 * j);
	v3 ^= b;
	SIPROUND;
	SIPROUND;
	v0 ^= b;
	v2 ^= 0xff;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	return v0 ^ v1 ^ v2 ^ v3;
}

static uint64_t node_hash(const struct layer_tree *t, const struct node *parent,
			  const char *name, size_t len)
{
	unsigned char buf[8 + COMP_MAX];
	unsigned i;

	for (i = 0; i < 8; i++)
		buf[i] = parent->id >> (8 * i);
	memcpy(buf + 8, name, len);
	return siphash(t->key, buf, 8 + len);
}

static struct node *node_find(const struct layer_tree *t, const struct node *parent,
			      const char *name, size_t len)
{
	uint64_t h = node_hash(t, parent, name, len);
	struct node *n;

	for (n = t->tab[h & t->mask]; n; n = n->hnext)
		if (n->hash == h && n->parent == parent && n->len == len &&
		    !memcmp(n->name, name, len))
			return n;
	return NULL;
}

/* Double the buckets; without memory the chains just get longer. */
static void tab_grow(struct layer_tree *t)
{
	size_t size = (t->mask + 1) * 2, i;
	struct node **tab = calloc(size, sizeof(*tab)), *n, *next;

	if (!tab)
		return;
	for (i = 0; i <= t->mask; i++)
		for (n = t->tab[i]; n; n = next) {
			next = n->hnext;
			n->hnext = tab[n->hash & (size - 1)];
			tab[n->hash & (size - 1)] = n;
		}
	free(t->tab);
	t->tab = tab;
	t->mask = size - 1;
}

static struct node *node_add(struct layer_tree *t, struct node *parent,
			     const char *name, size_t len)
{
	struct node *n = calloc(1, sizeof(*n) + len + 1);
	size_t b;

	if (!n)
		return NULL;
	memcpy(n->name, name, len);
	n->len = len;
	n->parent = parent;
	n->id = ++t->next_id;
	n->hash = node_hash(t, parent, name, len);
	n->gen = t->gen;
	n->a = implicit_dir;
	if (t->nodes > t->mask)
		tab_grow(t);
	b = n->hash & t->mask;
	n->hnext = t->tab[b];
	t->tab[b] = n;
	n->next = parent->kids;
	if (parent->kids)
		parent->kids->prev = n;
	parent->kids = n;
	t->nodes++;
	return n;
}

static void cache_drop(struct layer_tree *t)
{
	if (t->cfd >= 0)
		close(t->cfd);
	t->cfd = -1;
	t->cnode = NULL;
}

static bool node_under(const struct node *n, const struct node *top)
{
	for (; n; n = n->parent)
		if (n == top)
			return true;
	return false;
}

static void node_free(struct layer_tree *t, struct node *n)
{
	struct node **pp;

	while (n->kids) {
		struct node *k = n->kids;

		n->kids = k->next;
		node_free(t, k);
	}
	for (pp = &t->tab[n->hash & t->mask]; *pp; pp = &(*pp)->hnext)
		if (*pp == n) {
			*pp = n->hnext;
			break;
		}
	t->nodes--;
	free(n);
}

/* Forget n and everything below it (gone from disk already). */
static void node_drop(struct layer_tree *t, struct node *n)
{
	if (t->cnode && node_under(t->cnode, n))
		cache_drop(t);
	if (n->prev)
		n->prev->next = n->next;
	else
		n->parent->kids = n->next;
	if (n->next)
		n->next->prev = n->prev;
	node_free(t, n);
}

/* ---- one layer being applied ---- */

enum gz_state {
	GZ_NONE,	/* a plain tar */
	GZ_MEMBER,	/* inside a gzip member */
	GZ_BETWEEN,	/* a member ended: another one, zeros or EOF follow */
	GZ_PADDING,	/* zeros after the last member, up to EOF */
};

struct entry {
	char type;
	char raw[NAME_MAX_LEN + 1];	/* the name as the layer gave it */
	char name[NAME_MAX_LEN + 1];	/* normalized: components joined by '/' */
	char link[NAME_MAX_LEN + 1];	/* symlink target / hardlink name, as given */
	char lname[NAME_MAX_LEN + 1];	/* a hardlink's target, normalized */
	uint64_t size;			/* data that follows the header */
	bool consumed;			/* that data was read (into a file) */
	struct layer_attr a;
};

struct applier {
	struct layer_tree *t;
	unsigned index;
	int fd;
	uint64_t headers;		/* of this layer, for messages */

	enum gz_state gz;
	z_stream zs;
	bool zinit;
	unsigned char *ibuf;		/* compressed input */
	unsigned char *obuf;		/* bytes for the tar parser */
	size_t opos, olen;
	uint64_t in_total, out_total;

	unsigned char hdr[BLOCK];
	unsigned char *ext;		/* an extended header's payload */

	/* Extended headers (PAX 'x', GNU 'L' / 'K') waiting for their entry. */
	bool pending;
	bool have_path, have_long, have_link, have_longlink;
	bool have_size, have_uid, have_gid, have_mtime;
	uint64_t pax_size;
	uint32_t pax_uid, pax_gid;
	int64_t pax_mtime;
	char pax_path[NAME_MAX_LEN + 1];
	char long_name[NAME_MAX_LEN + 1];
	char pax_link[NAME_MAX_LEN + 1];
	char long_link[NAME_MAX_LEN + 1];

	struct entry e;
	char spath[NAME_MAX_LEN + COMP_MAX + 2];	/* paths while sweeping */
};

/* ---- input: plain or gzip'd, pulled in chunks ---- */

static ssize_t read_some(struct applier *a, void *buf, size_t len)
{
	ssize_t n;

	do
		n = read(a->fd, buf, len);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return husk_seterr(errno, "layer %u: reading the stream: %s", a->index,
				   strerror(errno));
	return n;
}

static bool all_zero(const unsigned char *p, size_t n)
{
	while (n && !*p) {
		p++;
		n--;
	}
	return !n;
}

/* Inflate the next bytes into obuf; their count, 0 at the end, or -errno. */
static ssize_t gz_fill(struct applier *a)
{
	uint64_t max_ratio = a->t->lim.max_ratio;
	size_t made, before;
	ssize_t n;
	int ret;

	for (;;) {
		if (!a->zs.avail_in) {
			n = read_some(a, a->ibuf, CHUNK);
			if (n < 0)
				return n;
			if (!n) {
				if (a->gz == GZ_MEMBER)
					return husk_seterr(EPIPE, "layer %u: truncated gzip stream",
							   a->index);
				return 0;
			}
			a->zs.next_in = a->ibuf;
			a->zs.avail_in = n;
		}
		/* gzip(1) also accepts zero padding after the last member. */
		if (a->gz == GZ_BETWEEN) {
			if (a->zs.next_in[0] && a->zs.next_in[0] != 0x1f)
				return husk_seterr(EINVAL, "layer %u: data after the gzip stream",
						   a->index);
			a->gz = a->zs.next_in[0] ? GZ_MEMBER : GZ_PADDING;
		}
		if (a->gz == GZ_PADDING) {
			if (!all_zero(a->zs.next_in, a->zs.avail_in))
				return husk_seterr(EINVAL, "layer %u: data after the gzip stream",
						   a->index);
			a->zs.avail_in = 0;
			continue;
		}
		a->zs.next_out = a->obuf;
		a->zs.avail_out = CHUNK;
		before = a->zs.avail_in;
		ret = inflate(&a->zs, Z_NO_FLUSH);
		if (ret != Z_OK && ret != Z_STREAM_END && ret != Z_BUF_ERROR)
			return husk_seterr(EINVAL, "layer %u: corrupt gzip stream: %s", a->index,
					   a->zs.msg ? a->zs.msg : "inflate failed");
		made = CHUNK - a->zs.avail_out;
		/* With input and room for output zlib moves; never spin if not. */
		if (!made && ret != Z_STREAM_END && before == a->zs.avail_in)
			return husk_seterr(EINVAL, "layer %u: corrupt gzip stream", a->index);
		a->in_total += before - a->zs.avail_in;
		a->out_total += made;
		if (max_ratio && a->out_total > LAYER_RATIO_GRACE &&
		    a->out_total / max_ratio > a->in_total)
			return husk_seterr(EFBIG, "layer %u: gzip ratio over %llu:1 (%llu bytes "
					   "from %llu): refusing a decompression bomb", a->index,
					   (unsigned long long)max_ratio,
					   (unsigned long long)a->out_total,
					   (unsigned long long)a->in_total);
		if (ret == Z_STREAM_END) {
			inflateReset(&a->zs);
			a->gz = GZ_BETWEEN;
		}
		if (made) {
			a->opos = 0;
			a->olen = made;
			return made;
		}
	}
}

/* Up to max bytes of the tar stream at *p (consumed); 0 at its end. */
static ssize_t src_get(struct applier *a, const unsigned char **p, size_t max)
{
	ssize_t n;

	if (a->opos == a->olen) {
		if (a->gz == GZ_NONE) {
			n = read_some(a, a->obuf, CHUNK);
			a->opos = 0;
			a->olen = n > 0 ? n : 0;
		} else {
			n = gz_fill(a);
		}
		if (n <= 0)
			return n;
	}
	n = a->olen - a->opos < max ? a->olen - a->opos : max;
	*p = a->obuf + a->opos;
	a->opos += n;
	return n;
}

/* Copy (dst) or skip (dst NULL) len bytes; how many there were, or -errno. */
static ssize_t src_read(struct applier *a, unsigned char *dst, size_t len)
{
	const unsigned char *p;
	size_t got = 0;
	ssize_t n;

	while (got < len) {
		n = src_get(a, &p, len - got);
		if (n < 0)
			return n;
		if (!n)
			break;
		if (dst)
			memcpy(dst + got, p, n);
		got += n;
	}
	return got;
}

/*
 * Look at the first bytes: gzip is inflated, a plain tar is read as is, and
 * the compressions husk does not read are named rather than misparsed.
 */
static int src_start(struct applier *a)
{
	static const struct {
		const char *magic;
		size_t len;
		const char *what;
	} refused[] = {
		{ "\x28\xb5\x2f\xfd", 4, "zstd" },
		{ "\xfd" "7zXZ\0", 6, "xz" },
		{ "\x04\x22\x4d\x18", 4, "lz4" },
	};
	const unsigned char *p = a->ibuf;
	size_t got = 0, i;
	ssize_t n;

	while (got < 16) {
		n = read_some(a, a->ibuf + got, CHUNK - got);
		if (n < 0)
			return n;
		if (!n)
			break;
		got += n;
	}
	for (i = 0; i < ARRAY_SIZE(refused); i++)
		if (got >= refused[i].len && !memcmp(a->ibuf, refused[i].magic, refused[i].len))
			return husk_seterr(ENOTSUP, "layer %u: %s-compressed layers are not supported",
					   a->index, refused[i].what);
	/* "BZh" alone could start a file name: bzip2 is its level and block magic. */
	if (got >= 10 && !memcmp(p, "BZh", 3) && p[3] >= '1' && p[3] <= '9' &&
	    (!memcmp(p + 4, "1AY&SY", 6) || !memcmp(p + 4, "\x17rE8P\x90", 6)))
		return husk_seterr(ENOTSUP, "layer %u: bzip2-compressed layers are not supported",
				   a->index);
	if (got >= 2 && a->ibuf[0] == 0x1f && a->ibuf[1] == 0x8b) {
		if (inflateInit2(&a->zs, 15 + 16) != Z_OK)
			return husk_seterr(ENOMEM, "layer %u: inflateInit2 failed", a->index);
		a->zinit = true;
		a->gz = GZ_MEMBER;
		a->zs.next_in = a->ibuf;
		a->zs.avail_in = got;
		return 0;
	}
	a->gz = GZ_NONE;
	memcpy(a->obuf, a->ibuf, got);
	a->olen = got;
	return 0;
}

/* ---- tar fields ---- */

static unsigned header_sum(const unsigned char *b)
{
	unsigned sum = 0, i;

	/* The checksum field itself counts as eight spaces. */
	for (i = 0; i < BLOCK; i++)
		sum += (i >= 148 && i < 156) ? ' ' : b[i];
	return sum;
}

/* Same for historic tars that summed signed chars. */
static int header_sum_signed(const unsigned char *b)
{
	int sum = 0;
	unsigned i;

	for (i = 0; i < BLOCK; i++)
		sum += (i >= 148 && i < 156) ? ' ' : (signed char)b[i];
	return sum;
}

/*
 * A numeric field: octal digits between spaces/NULs (an empty field is 0),
 * or GNU base-256 (high bit set; two's complement when bit 6 is set too).
 */
static int parse_num(const unsigned char *f, size_t width, int64_t *out)
{
	size_t i = 0, end = width;
	uint64_t x = 0;

	if (f[0] & 0x80) {
		unsigned inv = f[0] & 0x40 ? 0xff : 0;

		for (i = 0; i < width; i++) {
			unsigned c = f[i] ^ inv;

			if (!i)
				c &= 0x7f;
			if (x >> 55)
				return -ERANGE;
			x = x << 8 | c;
		}
		*out = inv ? -(int64_t)x - 1 : (int64_t)x;
		return 0;
	}
	while (i < end && (f[i] == ' ' || !f[i]))
		i++;
	while (end > i && (f[end - 1] == ' ' || !f[end - 1]))
		end--;
	for (; i < end; i++) {
		if (f[i] < '0' || f[i] > '7')
			return -EINVAL;
		if (x >> 60)
			return -ERANGE;
		x = x * 8 + (f[i] - '0');
	}
	*out = x;
	return 0;
}

/* A PAX decimal: digits only (mtime: an optional '-' and fraction). */
static int pax_num(const char *v, size_t len, bool time, int64_t *out)
{
	size_t i = 0, start;
	bool neg = false;
	uint64_t x = 0;

	if (time && len && v[0] == '-') {
		neg = true;
		i++;
	}
	for (start = i; i < len && v[i] != '.'; i++) {
		if (v[i] < '0' || v[i] > '9' || x > (uint64_t)INT64_MAX / 10)
			return -EINVAL;
		x = x * 10 + (v[i] - '0');
	}
	if (i == start || x > (uint64_t)INT64_MAX)
		return -EINVAL;
	if (i < len) {
		/* Sub-second precision: checked, then dropped. */
		if (!time || i + 1 == len)
			return -EINVAL;
		for (i++; i < len; i++)
			if (v[i] < '0' || v[i] > '9')
				return -EINVAL;
	}
	*out = neg ? -(int64_t)x : (int64_t)x;
	return 0;
}

/* A name or link from an extended header: no NUL, not over NAME_MAX_LEN. */
static int ext_string(struct applier *a, const char *what, const char *v, size_t len,
		      char *dst, bool *have)
{
	if (memchr(v, '\0', len))
		return husk_seterr(EINVAL, "layer %u: %s with a NUL byte inside", a->index, what);
	if (len > NAME_MAX_LEN)
		return husk_seterr(ENAMETOOLONG, "layer %u: %s of %zu bytes (limit %d)",
				   a->index, what, len, NAME_MAX_LEN);
	memcpy(dst, v, len);
	dst[len] = '\0';
	/* An empty value deletes the field: the header's own applies. */
	*have = len > 0;
	return 0;
}

static int pax_record(struct applier *a, const char *key, size_t klen,
		      const char *v, size_t vlen)
{
	int64_t x;

#define KEY(s) (klen == sizeof(s) - 1 && !memcmp(key, s, klen))
#define PREFIX(s) (klen >= sizeof(s) - 1 && !memcmp(key, s, sizeof(s) - 1))
	if (KEY("path"))
		return ext_string(a, "PAX path", v, vlen, a->pax_path, &a->have_path);
	if (KEY("linkpath"))
		return ext_string(a, "PAX linkpath", v, vlen, a->pax_link, &a->have_link);
	if (KEY("size") || KEY("uid") || KEY("gid") || KEY("mtime")) {
		bool time = KEY("mtime");

		if (!vlen)
			return 0;
		if (pax_num(v, vlen, time, &x) < 0 || (!time && x < 0) ||
		    ((KEY("uid") || KEY("gid")) && x > UINT32_MAX))
			return husk_seterr(EINVAL, "layer %u: bad PAX %.*s \"%.*s\"", a->index,
					   (int)klen, key, (int)(vlen < 64 ? vlen : 64), v);
		if (KEY("size")) {
			a->pax_size = x;
			a->have_size = true;
		} else if (KEY("uid")) {
			a->pax_uid = x;
			a->have_uid = true;
		} else if (KEY("gid")) {
			a->pax_gid = x;
			a->have_gid = true;
		} else {
			a->pax_mtime = x;
			a->have_mtime = true;
		}
		return 0;
	}
	if (PREFIX("SCHILY.xattr.") || PREFIX("LIBARCHIVE.xattr.")) {
		a->t->st.xattrs_ignored++;
		return 0;
	}
	/* Sparse maps would be read as file data: refuse, never misplace bytes. */
	if (PREFIX("GNU.sparse."))
		return husk_seterr(ENOTSUP, "layer %u: GNU sparse files are not supported",
				   a->index);
#undef KEY
#undef PREFIX
	return 0;
}

/* PAX records: "LEN KEY=VALUE\n", LEN counting the whole record. */
static int pax_parse(struct applier *a, const char *p, size_t len)
{
	const char *end = p + len, *rec, *sp, *eq;
	size_t rlen;
	int err;

	while (p < end) {
		rec = p;
		for (rlen = 0; p < end && *p >= '0' && *p <= '9' && p - rec < 8; p++)
			rlen = rlen * 10 + (*p - '0');
		sp = p;
		if (p == rec || p >= end || *p != ' ' || rlen <= (size_t)(sp - rec) + 1 ||
		    rlen > (size_t)(end - rec) || rec[rlen - 1] != '\n')
			return husk_seterr(EINVAL, "layer %u: malformed PAX header record",
					   a->index);
		eq = memchr(sp + 1, '=', rec + rlen - 1 - (sp + 1));
		if (!eq || eq == sp + 1)
			return husk_seterr(EINVAL, "layer %u: malformed PAX header record",
					   a->index);
		err = pax_record(a, sp + 1, eq - (sp + 1), eq + 1, rec + rlen - 1 - (eq + 1));
		if (err)
			return err;
		p = rec + rlen;
	}
	return 0;
}

/* A GNU long name/link: the name, then nothing but NULs. */
static int gnu_long(struct applier *a, const char *what, size_t len, char *dst,
		    bool *have)
{
	const char *p = (const char *)a->ext, *nul = memchr(p, '\0', len);
	size_t n = nul ? (size_t)(nul - p) : len;

	if (nul && !all_zero((const unsigned char *)nul, len - n))
		return husk_seterr(EINVAL, "layer %u: %s with a NUL byte inside", a->index, what);
	return ext_string(a, what, p, n, dst, have);
}

static int skip_padding(struct applier *a, uint64_t size, const char *name)
{
	size_t pad = (BLOCK - size % BLOCK) % BLOCK;
	ssize_t n = pad ? src_read(a, NULL, pad) : 0;

	if (n < 0)
		return n;
	if ((size_t)n < pad)
		return husk_seterr(EPIPE, "layer %u: truncated stream after %.200s", a->index,
				   name);
	return 0;
}

/* Read an extended header's payload (at most EXT_MAX bytes) into ext. */
static int read_ext(struct applier *a, char type, int64_t size)
{
	ssize_t n;

	if (size < 0 || size > EXT_MAX)
		return husk_seterr(EFBIG, "layer %u: extended header '%c' of %lld bytes "
				   "(limit %d)", a->index, type, (long long)size, EXT_MAX);
	n = src_read(a, a->ext, size);
	if (n < 0)
		return n;
	if (n < size)
		return husk_seterr(EPIPE, "layer %u: truncated stream in an extended header",
				   a->index);
	/* 'g': global PAX records describe no entry of ours. */
	a->pending |= type != 'g';
	switch (type) {
	case 'x':
		n = pax_parse(a, (const char *)a->ext, size);
		break;
	case 'L':
		n = gnu_long(a, "GNU long name", size, a->long_name, &a->have_long);
		break;
	case 'K':
		n = gnu_long(a, "GNU long link name", size, a->long_link, &a->have_longlink);
		break;
	default:
		n = 0;
	}
	if (n)
		return n;
	return skip_padding(a, size, "an extended header");
}

static void clear_pending(struct applier *a)
{
	a->pending = false;
	a->have_path = a->have_long = a->have_link = a->have_longlink = false;
	a->have_size = a->have_uid = a->have_gid = a->have_mtime = false;
}

/*
 * Normalize a name: leading "/" and "./" go, empty and "." components
 * collapse, ".." anywhere is refused. The root is "". Returns 0 or -errno
 * with the reason in *why.
 */
static int norm_name(const char *raw, char *out, const char **why)
{
	const char *p = raw, *c;
	size_t len, o = 0;
	unsigned depth = 0;

	if (strlen(raw) > NAME_MAX_LEN)
		return *why = "name too long", -ENAMETOOLONG;
	while (*p) {
		while (*p == '/')
			p++;
		c = p;
		while (*p && *p != '/')
			p++;
		len = p - c;
		if (!len || (len == 1 && c[0] == '.'))
			continue;
		if (len == 2 && c[0] == '.' && c[1] == '.')
			return *why = "\"..\" component", -EPERM;
		if (len > COMP_MAX)
			return *why = "component longer than 255 bytes", -ENAMETOOLONG;
		if (++depth > MAX_DEPTH)
			return *why = "more than 256 components", -ENAMETOOLONG;
		if (o)
			out[o++] = '/';
		memcpy(out + o, c, len);
		o += len;
	}
	out[o] = '\0';
	return 0;
}

static const char *type_desc(char t)
{
	switch (t) {
	case 'S': return " (GNU sparse file)";
	case 'V': return " (GNU volume header)";
	case 'M': return " (GNU multi-volume continuation)";
	case 'D': return " (GNU dumpdir)";
	case 'N': return " (old GNU long names)";
	case 'X': return " (Solaris extended header)";
	default: return "";
	}
}

static bool header_only(char type)
{
	return type >= '1' && type <= '6';
}

/* ---- walking the staging tree ---- */

/*
 * Open the directory component path[start..end) below dfd (node dir),
 * making it when missing and create is set. Returns its fd and node, or
 * -ENOENT without a message when missing, or -errno with one.
 */
static int enter(struct applier *a, int dfd, struct node *dir, const char *path,
		 size_t start, size_t end, bool create, struct node **np)
{
	struct layer_tree *t = a->t;
	size_t len = end - start;
	int shown = end < 200 ? (int)end : 200;
	char comp[COMP_MAX + 1];
	struct node *n;
	struct stat st;
	bool made = false;
	int fd, e;

	memcpy(comp, path + start, len);
	comp[len] = '\0';
	fd = openat(dfd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT && create) {
		/* Each one is an inode: it counts like an entry. */
		if (t->st.entries + t->made >= t->lim.max_entries)
			return husk_seterr(EFBIG, "layer %u: %.200s: more than %llu entries "
					   "(directories made as parents included)", a->index,
					   path, (unsigned long long)t->lim.max_entries);
		if (mkdirat(dfd, comp, 0700) == 0)
			made = true;
		else if (errno != EEXIST)
			return husk_seterr(errno, "layer %u: %.200s: making %.*s: %s", a->index,
					   path, shown, path, strerror(errno));
		fd = openat(dfd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	}
	if (fd < 0) {
		e = errno;
		if (e == ENOENT && !create)
			return -ENOENT;
		if (e == ENOTDIR || e == ELOOP) {
			if (!fstatat(dfd, comp, &st, AT_SYMLINK_NOFOLLOW) && S_ISLNK(st.st_mode))
				return husk_seterr(ELOOP, "layer %u: %.200s goes through a symlink (%.*s)",
						   a->index, path, shown, path);
			return husk_seterr(ENOTDIR, "layer %u: %.200s goes through a non-directory "
					   "(%.*s)", a->index, path, shown, path);
		}
		return husk_seterr(e, "layer %u: %.200s: opening %.*s: %s", a->index, path,
				   shown, path, strerror(e));
	}
	if (made) {
		t->made++;
		/* Explicit: the caller's umask must not decide the tree's modes. */
		if (fchmod(fd, 0755) < 0) {
			e = errno;
			close(fd);
			return husk_seterr(e, "layer %u: %.200s: chmod %.*s: %s", a->index, path,
					   shown, path, strerror(e));
		}
	}
	n = node_find(t, dir, comp, len);
	if (!n && !(n = node_add(t, dir, comp, len))) {
		close(fd);
		return husk_seterr(ENOMEM, "layer %u: out of memory", a->index);
	}
	*np = n;
	return fd;
}

static void cache_set(struct layer_tree *t, int fd, struct node *n, const char *path,
		      size_t len)
{
	if (t->cfd >= 0 && t->cfd != fd)
		close(t->cfd);
	t->cfd = fd;
	t->cnode = n;
	memcpy(t->cpath, path, len);
	t->cpath[len] = '\0';
	t->clen = len;
}

/*
 * The directory holding the last component of path (normalized, not the
 * root): its fd, borrowed (the root's or the cached parent's: valid until
 * the next walk), its node, and the last component in *leafp. create makes
 * missing parents; otherwise a missing one is -ENOENT without a message.
 */
static int walk(struct applier *a, const char *path, bool create, struct node **dirp,
		const char **leafp)
{
	struct layer_tree *t = a->t;
	const char *slash = strrchr(path, '/'), *e;
	size_t plen = slash ? (size_t)(slash - path) : 0, off = 0, end;
	struct node *n = t->top;
	int dfd = t->root, fd;
	bool own = false;

	*leafp = slash ? slash + 1 : path;
	*dirp = t->top;
	if (!slash)
		return t->root;
	if (t->cfd >= 0 && t->clen <= plen && !memcmp(t->cpath, path, t->clen) &&
	    (t->clen == plen || path[t->clen] == '/')) {
		if (t->clen == plen) {
			*dirp = t->cnode;
			return t->cfd;
		}
		dfd = t->cfd;
		n = t->cnode;
		off = t->clen + 1;
	}
	while (off < plen) {
		e = memchr(path + off, '/', plen - off);
		end = e ? (size_t)(e - path) : plen;
		fd = enter(a, dfd, n, path, off, end, create, &n);
		if (own)
			close(dfd);
		if (fd < 0)
			return fd;
		dfd = fd;
		own = true;
		off = end + 1;
	}
	cache_set(t, dfd, n, path, plen);
	*dirp = n;
	return dfd;
}

/* Remove name below dfd, a directory with everything in it; ENOENT is fine. */
static int rm_at(int dfd, const char *name)
{
	struct dirent *de;
	DIR *d;
	int fd, err = 0;

	if (!unlinkat(dfd, name, 0) || errno == ENOENT)
		return 0;
	if (errno != EISDIR)
		return -errno;
	fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	d = fdopendir(fd);
	if (!d) {
		err = -errno;
		close(fd);
		return err;
	}
	while (!err && (errno = 0, de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			err = rm_at(dirfd(d), de->d_name);
	if (!err && errno)
		err = -errno;
	closedir(d);
	if (!err && unlinkat(dfd, name, AT_REMOVEDIR) < 0)
		err = -errno;
	return err;
}

static int remove_entry(struct applier *a, int dfd, struct node *n, const char *path)
{
	int err = rm_at(dfd, n->name);

	if (err)
		return husk_seterr(err, "layer %u: removing %.200s: %s", a->index, path,
				   strerror(-err));
	node_drop(a->t, n);
	return 0;
}

/*
 * Make room for leaf in dfd: what has the name goes, but a directory stays
 * when a directory comes (*keep). The mirror says what is there; should the
 * disk disagree, the O_EXCL creation that follows fails instead.
 */
static int make_room(struct applier *a, int dfd, struct node *dir, const char *leaf,
		     bool is_dir, struct node **keep)
{
	struct node *old = node_find(a->t, dir, leaf, strlen(leaf));

	*keep = NULL;
	if (!old)
		return 0;
	if (is_dir && S_ISDIR(old->a.mode)) {
		*keep = old;
		return 0;
	}
	return remove_entry(a, dfd, old, a->e.name);
}

static struct node *record(struct applier *a, struct node *dir, struct node *n,
			   const char *leaf, const struct layer_attr *attr)
{
	if (!n)
		n = node_add(a->t, dir, leaf, strlen(leaf));
	if (!n) {
		husk_seterr(ENOMEM, "layer %u: out of memory", a->index);
		return NULL;
	}
	n->a = *attr;
	n->recorded = true;
	n->gen = a->t->gen;
	return n;
}

/* ---- entries ---- */

static int put_file(struct applier *a)
{
	struct entry *e = &a->e;
	uint64_t left = e->size;
	const unsigned char *p;
	const char *leaf;
	struct node *dir, *keep;
	ssize_t n;
	int dfd, fd, err;

	dfd = walk(a, e->name, true, &dir, &leaf);
	if (dfd < 0)
		return dfd;
	err = make_room(a, dfd, dir, leaf, false, &keep);
	if (err)
		return err;
	fd = openat(dfd, leaf, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return husk_seterr(errno, "layer %u: creating %.200s: %s", a->index, e->name,
				   strerror(errno));
	err = record(a, dir, NULL, leaf, &e->a) ? 0 : -ENOMEM;
	/* No special bits on the host; the owner can always read it back. */
	if (!err && fchmod(fd, (e->a.mode & 0777) | 0600) < 0)
		err = husk_seterr(errno, "layer %u: chmod %.200s: %s", a->index, e->name,
				  strerror(errno));
	while (!err && left) {
		n = src_get(a, &p, left < CHUNK ? left : CHUNK);
		if (n < 0)
			err = n;
		else if (!n)
			err = husk_seterr(EPIPE, "layer %u: truncated stream in %.200s", a->index,
					  e->name);
		else if ((err = write_all(fd, p, n)) < 0)
			husk_seterr(err, "layer %u: writing %.200s: %s", a->index, e->name,
				    strerror(-err));
		else
			left -= n;
	}
	if (close(fd) < 0 && !err)
		err = husk_seterr(errno, "layer %u: writing %.200s: %s", a->index, e->name,
				  strerror(errno));
	if (err)
		return err;
	e->consumed = true;
	a->t->st.files++;
	a->t->st.bytes += e->size;
	return 0;
}

static int chmod_dir(struct applier *a, int dfd, const char *leaf, unsigned mode)
{
	int fd = openat(dfd, leaf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), err = 0;

	if (fd < 0 || fchmod(fd, (mode & 0777) | 0700) < 0)
		err = husk_seterr(errno, "layer %u: chmod %.200s: %s", a->index,
				  a->e.name[0] ? a->e.name : ".", strerror(errno));
	if (fd >= 0)
		close(fd);
	return err;
}

static int put_dir(struct applier *a)
{
	struct entry *e = &a->e;
	struct node *dir, *keep;
	const char *leaf;
	int dfd, err;

	if (!e->name[0]) {
		/* The root itself: only its attributes can change. */
		record(a, NULL, a->t->top, "", &e->a);
		a->t->st.dirs++;
		return chmod_dir(a, a->t->root, ".", e->a.mode);
	}
	dfd = walk(a, e->name, true, &dir, &leaf);
	if (dfd < 0)
		return dfd;
	err = make_room(a, dfd, dir, leaf, true, &keep);
	if (err)
		return err;
	if (!keep && mkdirat(dfd, leaf, 0700) < 0)
		return husk_seterr(errno, "layer %u: making %.200s: %s", a->index, e->name,
				   strerror(errno));
	if (!record(a, dir, keep, leaf, &e->a))
		return -ENOMEM;
	a->t->st.dirs++;
	return chmod_dir(a, dfd, leaf, e->a.mode);
}

static int put_symlink(struct applier *a)
{
	struct entry *e = &a->e;
	struct layer_attr attr = e->a;
	struct node *dir, *keep;
	const char *leaf;
	size_t len = strlen(e->link);
	int dfd, err;

	if (!len || len > LINK_MAX_LEN)
		return husk_seterr(EINVAL, "layer %u: symlink %.200s: target of %zu bytes "
				   "(1 to %d)", a->index, e->name, len, LINK_MAX_LEN);
	dfd = walk(a, e->name, true, &dir, &leaf);
	if (dfd < 0)
		return dfd;
	err = make_room(a, dfd, dir, leaf, false, &keep);
	if (err)
		return err;
	if (symlinkat(e->link, dfd, leaf) < 0)
		return husk_seterr(errno, "layer %u: symlink %.200s: %s", a->index, e->name,
				   strerror(errno));
	/* What Linux gives every symlink, whatever the header said. */
	attr.mode = S_IFLNK | 0777;
	if (!record(a, dir, NULL, leaf, &attr))
		return -ENOMEM;
	a->t->st.symlinks++;
	return 0;
}

/*
 * A hardlink's target is walked like any name and must be a regular file
 * already in the tree. The link shares its inode, so it takes the target's
 * attributes (the header's own are ignored); each path keeps its own copy
 * in the table, as later layers replace paths, not inodes.
 */
static int put_hardlink(struct applier *a)
{
	struct entry *e = &a->e;
	struct node *tdir, *dir, *tn, *keep;
	struct layer_attr attr = e->a;
	const char *tleaf, *leaf, *why = NULL;
	struct stat st;
	int tfd, dfd, err;

	err = norm_name(e->link, e->lname, &why);
	if (err)
		return husk_seterr(err, "layer %u: hardlink %.200s to \"%.200s\": %s", a->index,
				   e->name, e->link, why);
	if (!e->lname[0])
		return husk_seterr(EPERM, "layer %u: hardlink %.200s to the root directory",
				   a->index, e->name);
	if (!strcmp(e->lname, e->name))
		return husk_seterr(EINVAL, "layer %u: hardlink %.200s to itself", a->index,
				   e->name);
	tfd = walk(a, e->lname, false, &tdir, &tleaf);
	if (tfd == -ENOENT)
		goto missing;
	if (tfd < 0)
		return tfd;
	if (fstatat(tfd, tleaf, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno == ENOENT)
			goto missing;
		return husk_seterr(errno, "layer %u: hardlink %.200s: %.200s: %s", a->index,
				   e->name, e->lname, strerror(errno));
	}
	if (!S_ISREG(st.st_mode))
		return husk_seterr(EPERM, "layer %u: hardlink %.200s to %.200s, which is %s",
				   a->index, e->name, e->lname,
				   S_ISDIR(st.st_mode) ? "a directory" :
				   S_ISLNK(st.st_mode) ? "a symlink" : "not a regular file");
	tn = node_find(a->t, tdir, tleaf, strlen(tleaf));
	if (tn && tn->recorded)
		attr = tn->a;
	else
		attr.mode = S_IFREG | (attr.mode & 07777);
	/* The next walk reuses the borrowed fd: keep one of our own. */
	tfd = fcntl(tfd, F_DUPFD_CLOEXEC, 0);
	if (tfd < 0)
		return husk_seterr(errno, "layer %u: hardlink %.200s: %s", a->index, e->name,
				   strerror(errno));
	dfd = walk(a, e->name, true, &dir, &leaf);
	err = dfd < 0 ? dfd : make_room(a, dfd, dir, leaf, false, &keep);
	if (!err && linkat(tfd, tleaf, dfd, leaf, 0) < 0)
		err = husk_seterr(errno, "layer %u: hardlink %.200s to %.200s: %s", a->index,
				  e->name, e->lname, strerror(errno));
	close(tfd);
	if (err)
		return err;
	if (!record(a, dir, NULL, leaf, &attr))
		return -ENOMEM;
	a->t->st.hardlinks++;
	return 0;
missing:
	return husk_seterr(ENOENT, "layer %u: hardlink %.200s to %.200s, which does not exist",
			   a->index, e->name, e->lname);
}

/* ".wh.NAME": NAME goes, whatever it is; a name already absent is fine. */
static int whiteout(struct applier *a)
{
	struct entry *e = &a->e;
	const char *leaf, *target;
	struct node *dir, *n;
	int dfd;

	dfd = walk(a, e->name, false, &dir, &leaf);
	target = leaf + strlen(WH);
	if (!*target || !strcmp(target, ".") || !strcmp(target, ".."))
		return husk_seterr(EINVAL, "layer %u: whiteout %.200s names no entry", a->index,
				   e->name);
	a->t->st.whiteouts++;
	if (dfd == -ENOENT)
		return 0;
	if (dfd < 0)
		return dfd;
	n = node_find(a->t, dir, target, strlen(target));
	if (!n)
		return 0;
	snprintf(a->spath, sizeof(a->spath), "%.*s%s", (int)(leaf - e->name), e->name,
		 target);
	return remove_entry(a, dfd, n, a->spath);
}

/*
 * Below d (open at dfd, path in spath[0..len)): remove what lower layers
 * made. A lower directory that holds something of this layer stays (and
 * counts as this layer's from now on). *left: something remains in d.
 */
static int sweep(struct applier *a, int dfd, struct node *d, size_t len, bool *left)
{
	unsigned gen = a->t->gen;
	struct node *c, *next;
	bool sub;
	int fd, err;

	*left = false;
	for (c = d->kids; c; c = next) {
		next = c->next;
		snprintf(a->spath + len, sizeof(a->spath) - len, "%s%s", len ? "/" : "",
			 c->name);
		if (S_ISDIR(c->a.mode)) {
			if (c->swept == gen) {
				*left = true;
				continue;
			}
			fd = openat(dfd, c->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (fd < 0)
				return husk_seterr(errno, "layer %u: opaque directory: %.200s: %s",
						   a->index, a->spath, strerror(errno));
			err = sweep(a, fd, c, strlen(a->spath), &sub);
			close(fd);
			if (err)
				return err;
			snprintf(a->spath + len, sizeof(a->spath) - len, "%s%s", len ? "/" : "",
				 c->name);
			if (c->gen == gen || sub) {
				c->gen = gen;
				*left = true;
				continue;
			}
		} else if (c->gen == gen) {
			*left = true;
			continue;
		}
		err = remove_entry(a, dfd, c, a->spath);
		if (err)
			return err;
	}
	d->swept = gen;
	return 0;
}

/*
 * ".wh..wh..opq": the directory shows nothing from lower layers. A directory
 * swept in this layer (or below one) holds nothing lower any more.
 */
static int opaque(struct applier *a)
{
	struct entry *e = &a->e;
	const char *leaf;
	struct node *dir, *n;
	size_t len;
	bool left;
	int dfd;

	a->t->st.whiteouts++;
	dfd = walk(a, e->name, false, &dir, &leaf);
	if (dfd == -ENOENT)
		return 0;
	if (dfd < 0)
		return dfd;
	for (n = dir; n; n = n->parent)
		if (n->swept == a->t->gen)
			return 0;
	len = leaf > e->name ? (size_t)(leaf - e->name - 1) : 0;
	memcpy(a->spath, e->name, len);
	a->spath[len] = '\0';
	return sweep(a, dfd, dir, len, &left);
}

/* Devices and FIFOs are never made; what had the name is gone all the same. */
static int skip_device(struct applier *a)
{
	struct entry *e = &a->e;
	const char *leaf;
	struct node *dir, *n;
	int dfd;

	a->t->st.devices_skipped++;
	dfd = walk(a, e->name, false, &dir, &leaf);
	if (dfd == -ENOENT)
		return 0;
	if (dfd < 0)
		return dfd;
	n = node_find(a->t, dir, leaf, strlen(leaf));
	return n ? remove_entry(a, dfd, n, e->name) : 0;
}

/* True for AUFS metadata (".wh..wh.plnk" and the like): never applied. */
static bool aufs_meta(const char *name)
{
	const char *p = name;

	for (;;) {
		if (!strncmp(p, WH_META, strlen(WH_META)) && strcmp(p, WH_OPQ))
			return true;
		p = strchr(p, '/');
		if (!p)
			return false;
		p++;
	}
}

static int apply_entry(struct applier *a)
{
	struct entry *e = &a->e;
	const char *leaf = strrchr(e->name, '/');

	leaf = leaf ? leaf + 1 : e->name;
	if (aufs_meta(e->name))
		return 0;
	if (!strcmp(leaf, WH_OPQ))
		return opaque(a);
	if (!strncmp(leaf, WH, strlen(WH)))
		return whiteout(a);
	if (!e->name[0] && e->type != '5')
		return husk_seterr(EPERM, "layer %u: entry \"%.200s\" would replace the root "
				   "directory", a->index, e->raw);
	switch (e->type) {
	case '5':
		return put_dir(a);
	case '2':
		return put_symlink(a);
	case '1':
		return put_hardlink(a);
	case '3':
	case '4':
	case '6':
		return skip_device(a);
	default:
		return put_file(a);
	}
}

/* ---- headers ---- */

static int bad_field(struct applier *a, const char *what)
{
	return husk_seterr(EINVAL, "layer %u: %.200s: bad %s field in the header", a->index,
			   a->e.raw, what);
}

/* The entry described by the header in a->hdr and the pending extensions. */
static int build_entry(struct applier *a)
{
	const unsigned char *h = a->hdr;
	struct entry *e = &a->e;
	int64_t mode, uid, gid, mtime, size;
	const char *why = NULL;
	size_t n, p = 0;
	int err;

	e->type = h[156];
	e->consumed = false;
	if (a->have_path) {
		strcpy(e->raw, a->pax_path);
	} else if (a->have_long) {
		strcpy(e->raw, a->long_name);
	} else {
		if (!memcmp(h + 257, "ustar\0", 6) && h[345]) {
			p = strnlen((const char *)h + 345, 155);
			memcpy(e->raw, h + 345, p);
			e->raw[p++] = '/';
		}
		n = strnlen((const char *)h, 100);
		memcpy(e->raw + p, h, n);
		e->raw[p + n] = '\0';
	}
	if (a->have_link) {
		strcpy(e->link, a->pax_link);
	} else if (a->have_longlink) {
		strcpy(e->link, a->long_link);
	} else {
		n = strnlen((const char *)h + 157, 100);
		memcpy(e->link, h + 157, n);
		e->link[n] = '\0';
	}

	if (parse_num(h + 100, 8, &mode) < 0 || mode < 0)
		return bad_field(a, "mode");
	if (parse_num(h + 108, 8, &uid) < 0 || uid < 0 || uid > UINT32_MAX)
		return bad_field(a, "uid");
	if (parse_num(h + 116, 8, &gid) < 0 || gid < 0 || gid > UINT32_MAX)
		return bad_field(a, "gid");
	if (parse_num(h + 124, 12, &size) < 0 || size < 0)
		return bad_field(a, "size");
	if (parse_num(h + 136, 12, &mtime) < 0)
		return bad_field(a, "mtime");
	e->a.uid = a->have_uid ? a->pax_uid : (uint32_t)uid;
	e->a.gid = a->have_gid ? a->pax_gid : (uint32_t)gid;
	e->a.mtime = a->have_mtime ? a->pax_mtime : mtime;
	e->size = a->have_size ? a->pax_size : (uint64_t)size;
	clear_pending(a);

	/* Old tars mark directories with a trailing '/' on a plain entry. */
	n = strlen(e->raw);
	if (e->type == '\0' && n && e->raw[n - 1] == '/')
		e->type = '5';
	switch (e->type) {
	case '0': case '\0': case '7':
		e->a.mode = S_IFREG;
		break;
	case '1': e->a.mode = S_IFREG; break;
	case '2': e->a.mode = S_IFLNK; break;
	case '3': e->a.mode = S_IFCHR; break;
	case '4': e->a.mode = S_IFBLK; break;
	case '5': e->a.mode = S_IFDIR; break;
	case '6': e->a.mode = S_IFIFO; break;
	default:
		if ((unsigned char)e->type > ' ' && (unsigned char)e->type < 0x7f)
			return husk_seterr(EPERM, "layer %u: %.200s: unsupported entry type '%c'%s",
					   a->index, e->raw, e->type, type_desc(e->type));
		return husk_seterr(EPERM, "layer %u: %.200s: unsupported entry type 0x%02x",
				   a->index, e->raw, (unsigned char)e->type);
	}
	e->a.mode |= mode & 07777;
	/* As Go's archive/tar: links, devices and directories carry no data. */
	if (header_only(e->type))
		e->size = 0;
	err = norm_name(e->raw, e->name, &why);
	if (err)
		return husk_seterr(err, "layer %u: entry \"%.200s\": %s", a->index, e->raw, why);
	return 0;
}

/* One header block: an extension, an entry, or the first end block. */
static int header(struct applier *a, bool *end)
{
	struct layer_tree *t = a->t;
	const unsigned char *h = a->hdr;
	struct entry *e = &a->e;
	int64_t sum, size;
	int err;

	if (all_zero(h, BLOCK)) {
		*end = true;
		return 0;
	}
	if (parse_num(h + 148, 8, &sum) < 0 ||
	    (sum != header_sum(h) && sum != header_sum_signed(h))) {
		if (!a->headers)
			return husk_seterr(EINVAL, "layer %u: not a tar archive (bad header checksum; "
					   "starts with %02x %02x %02x %02x)", a->index,
					   h[0], h[1], h[2], h[3]);
		return husk_seterr(EINVAL, "layer %u: bad header checksum after %llu headers",
				   a->index, (unsigned long long)a->headers);
	}
	if (memcmp(h + 257, "ustar", 5) && !all_zero(h + 257, 8))
		return husk_seterr(EINVAL, "layer %u: not a tar header after %llu headers",
				   a->index, (unsigned long long)a->headers);
	a->headers++;
	/* Every header counts, or extensions alone could make a stream endless. */
	if (++t->st.entries + t->made > t->lim.max_entries)
		return husk_seterr(EFBIG, "layer %u: more than %llu entries", a->index,
				   (unsigned long long)t->lim.max_entries);
	switch (h[156]) {
	case 'x': case 'g': case 'L': case 'K':
		if (parse_num(h + 124, 12, &size) < 0)
			return husk_seterr(EINVAL, "layer %u: bad size of an extended header",
					   a->index);
		return read_ext(a, h[156], size);
	}
	err = build_entry(a);
	if (err)
		return err;
	if (e->size > t->lim.max_bytes - t->data)
		return husk_seterr(EFBIG, "layer %u: %.200s: over the limit of %llu bytes of "
				   "files", a->index, e->name,
				   (unsigned long long)t->lim.max_bytes);
	t->data += e->size;
	err = apply_entry(a);
	if (err)
		return err;
	/* Data nobody wrote (whiteouts, ignored entries) is skipped. */
	if (!e->consumed && e->size) {
		ssize_t n = src_read(a, NULL, e->size);

		if (n < 0)
			return n;
		if ((uint64_t)n < e->size)
			return husk_seterr(EPIPE, "layer %u: truncated stream in %.200s",
					   a->index, e->name);
	}
	return skip_padding(a, e->size, e->name);
}

/* After the end blocks: zeros (record padding) up to the end, nothing else. */
static int drain(struct applier *a)
{
	const unsigned char *p;
	ssize_t n;

	while ((n = src_get(a, &p, CHUNK)) > 0)
		if (!all_zero(p, n))
			return husk_seterr(EINVAL, "layer %u: data after the end of the archive",
					   a->index);
	return n;
}

static int apply_stream(struct applier *a)
{
	bool end = false;
	ssize_t n;
	int err;

	for (;;) {
		n = src_read(a, a->hdr, BLOCK);
		if (n < 0)
			return n;
		/* A stream may stop at a header boundary instead of end blocks. */
		if (!n)
			break;
		if (n < BLOCK)
			return husk_seterr(EPIPE, "layer %u: truncated stream in a header",
					   a->index);
		err = header(a, &end);
		if (err)
			return err;
		if (!end)
			continue;
		/* The second end block, or EOF right after the first. */
		n = src_read(a, a->hdr, BLOCK);
		if (n < 0)
			return n;
		if (!all_zero(a->hdr, n))
			return husk_seterr(EINVAL, "layer %u: an entry after a zero block", a->index);
		err = drain(a);
		if (err)
			return err;
		break;
	}
	if (a->pending)
		return husk_seterr(EPIPE, "layer %u: extended header not followed by an entry",
				   a->index);
	return 0;
}

int layer_apply_fd(struct layer_tree *t, int fd, unsigned index)
{
	struct applier *a;
	int err;

	if (t->err)
		return husk_seterr(t->err, "layer %u: not applied: an earlier layer failed",
				   index);
	a = calloc(1, sizeof(*a));
	if (a) {
		a->ibuf = malloc(CHUNK);
		a->obuf = malloc(CHUNK);
		a->ext = malloc(EXT_MAX);
	}
	if (!a || !a->ibuf || !a->obuf || !a->ext) {
		err = husk_seterr(ENOMEM, "layer %u: out of memory", index);
		goto out;
	}
	a->t = t;
	a->index = index;
	a->fd = fd;
	t->gen++;
	err = src_start(a);
	if (!err)
		err = apply_stream(a);
out:
	if (a && a->zinit)
		inflateEnd(&a->zs);
	if (a) {
		free(a->ibuf);
		free(a->obuf);
		free(a->ext);
		free(a);
	}
	if (err)
		t->err = err;
	return err;
}

/* ---- the tree ---- */

static bool dir_empty(int rootfd)
{
	int fd = openat(rootfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct dirent *de;
	bool empty = true;
	DIR *d;

	if (fd < 0)
		return false;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return false;
	}
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			empty = false;
	closedir(d);
	return empty;
}

struct layer_tree *layer_tree_new(int rootfd, const struct layer_limits *lim)
{
	struct layer_tree *t;
	struct timespec ts;

	if (!dir_empty(rootfd)) {
		husk_seterr(EEXIST, "layer: the staging directory is not an empty directory");
		return NULL;
	}
	t = calloc(1, sizeof(*t));
	if (!t || !(t->top = calloc(1, sizeof(*t->top) + 1)) ||
	    !(t->tab = calloc(1024, sizeof(*t->tab)))) {
		if (t)
			free(t->top);
		free(t);
		husk_seterr(ENOMEM, "layer: out of memory");
		return NULL;
	}
	t->root = rootfd;
	t->cfd = -1;
	t->mask = 1023;
	t->top->a = implicit_dir;
	if (lim)
		t->lim = *lim;
	if (!t->lim.max_bytes)
		t->lim.max_bytes = LAYER_DEFAULT_MAX_BYTES;
	if (!t->lim.max_entries)
		t->lim.max_entries = LAYER_DEFAULT_MAX_ENTRIES;
	if (!t->lim.max_ratio)
		t->lim.max_ratio = LAYER_DEFAULT_MAX_RATIO;
	if (getrandom(t->key, sizeof(t->key), GRND_NONBLOCK) != sizeof(t->key)) {
		/* Early boot: a weaker key still beats a fixed one. */
		clock_gettime(CLOCK_MONOTONIC, &ts);
		t->key[0] = (uint64_t)ts.tv_nsec << 32 ^ (uint64_t)ts.tv_sec ^ (uintptr_t)t;
		t->key[1] = (uint64_t)getpid() << 32 ^ (uintptr_t)&ts;
	}
	return t;
}

static int name_cmp(const void *x, const void *y)
{
	return strcmp((*(struct node *const *)x)->name, (*(struct node *const *)y)->name);
}

static int each_node(struct node *n, char *path, size_t len,
		     int (*fn)(void *, const char *, const struct layer_attr *), void *arg)
{
	struct node **kids, *k;
	size_t count = 0, i;
	int ret;

	ret = fn(arg, path, n->recorded ? &n->a : &implicit_dir);
	if (ret || !n->kids)
		return ret;
	for (k = n->kids; k; k = k->next)
		count++;
	kids = malloc(count * sizeof(*kids));
	if (!kids)
		return husk_seterr(ENOMEM, "layer: out of memory listing %s", len ? path : "/");
	for (i = 0, k = n->kids; k; k = k->next)
		kids[i++] = k;
	qsort(kids, count, sizeof(*kids), name_cmp);
	for (i = 0; i < count && !ret; i++) {
		size_t l = len;

		if (l)
			path[l++] = '/';
		memcpy(path + l, kids[i]->name, kids[i]->len + 1);
		ret = each_node(kids[i], path, l + kids[i]->len, fn, arg);
		path[len] = '\0';
	}
	free(kids);
	return ret;
}

int layer_tree_each(struct layer_tree *t,
		    int (*fn)(void *arg, const char *path, const struct layer_attr *a),
		    void *arg)
{
	/* Every node was made from a name of at most NAME_MAX_LEN bytes. */
	char *path = malloc(NAME_MAX_LEN + COMP_MAX + 2);
	int ret;

	if (!path)
		return husk_seterr(ENOMEM, "layer: out of memory");
	path[0] = '\0';
	ret = each_node(t->top, path, 0, fn, arg);
	free(path);
	return ret;
}

const struct layer_stats *layer_tree_stats(const struct layer_tree *t)
{
	return &t->st;
}

void layer_tree_free(struct layer_tree *t)
{
	struct node *n, *next;
	size_t i;

	if (!t)
		return;
	cache_drop(t);
	for (i = 0; i <= t->mask; i++)
		for (n = t->tab[i]; n; n = next) {
			next = n->hnext;
			free(n);
		}
	free(t->tab);
	free(t->top);
	free(t);
}
