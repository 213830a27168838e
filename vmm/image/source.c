/*
 * source: read a container image into verified parts. See source.h.
 *
 * A layout or archive is a "box" of named files: a directory (opened
 * beneath it, never through a symbolic link) or an uncompressed tar whose
 * regular members are indexed once. Every file of a box, a layout
 * directory's too, is copied into an unnamed temporary file while it is
 * hashed, so what is parsed or applied later is exactly what was verified
 * (a file rewritten in place after its hash changes nothing), and nothing
 * is left behind.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <linux/openat2.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <zlib.h>

#include "image/source.h"
#include "image/tool.h"
#include "lib/digest.h"
#include "lib/util.h"

#define MAX_MEMBERS 65536
#define MAX_NAME 4096
#define MAX_PAX (64u << 10)
#define CHUNK (1u << 16)
/* A gzip'd archive inflates to at most this, and this many times its size past the grace. */
#define ARCHIVE_MAX_INFLATED (64ull << 30)
#define ARCHIVE_MAX_RATIO 1000
#define ARCHIVE_RATIO_GRACE (64ull << 20)

struct member {
	char *name;
	uint64_t off, size;
};

struct box {
	int dirfd;		/* a layout directory, or -1 */
	int fd;			/* an archive, or -1 */
	struct member *m;
	size_t n;
	const char *workdir;
};

/* ---- digests and temporary files ---- */

/* "sha256:<hex>" of a raw digest. */
static void digest_name(const uint8_t d[DIGEST_SHA256_LEN], char out[IMAGE_DIGEST_LEN])
{
	memcpy(out, "sha256:", 7);
	digest_hex(d, DIGEST_SHA256_LEN, out + 7);
}

void image_sha256(const void *p, size_t len, char out[IMAGE_DIGEST_LEN])
{
	uint8_t d[DIGEST_SHA256_LEN];

	digest_sha256(p, len, d);
	digest_name(d, out);
}

/* Hash fd's bytes [off, off + len) (len UINT64_MAX: to its end), copying them to out if >= 0. */
static int hash_copy(int fd, uint64_t off, uint64_t len, int out, char digest[IMAGE_DIGEST_LEN])
{
	uint8_t d[DIGEST_SHA256_LEN];
	int err = digest_sha256_fd(fd, off, len, out, d);

	if (!err)
		digest_name(d, digest);
	return err;
}

int image_sha256_fd(int fd, char out[IMAGE_DIGEST_LEN])
{
	return hash_copy(fd, 0, UINT64_MAX, -1, out);
}

/* An unnamed file in dir: gone when its last fd closes. */
static int tmp_file(const char *dir)
{
	char path[PATH_MAX];
	int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);

	if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL))
		goto out;
	snprintf(path, sizeof(path), "%s/.husk-image-XXXXXX", dir);
	fd = mkostemp(path, O_CLOEXEC);
	if (fd >= 0)
		unlink(path);
out:
	if (fd < 0)
		return husk_seterr(errno, "a temporary file in %s: %s", dir, strerror(errno));
	return fd;
}

/* ---- an uncompressed tar archive, indexed ---- */

static int num_field(const unsigned char *f, size_t w, uint64_t *out)
{
	uint64_t v = 0;
	size_t i = 0;

	if (f[0] & 0x80) {	/* base-256 */
		if (f[0] != 0x80)
			return -EINVAL;
		for (i = 1; i < w; i++) {
			if (v >> 56)
				return -ERANGE;
			v = v << 8 | f[i];
		}
		*out = v;
		return 0;
	}
	while (i < w && f[i] == ' ')
		i++;
	for (; i < w && f[i] >= '0' && f[i] <= '7'; i++) {
		if (v >> 60)
			return -ERANGE;
		v = v * 8 + (f[i] - '0');
	}
	if (i < w && f[i] != ' ' && f[i] != '\0')
		return -EINVAL;
	*out = v;
	return 0;
}

static bool header_ok(const unsigned char *h)
{
	unsigned u = 0, i;
	int s = 0;
	uint64_t want;

	for (i = 0; i < 512; i++) {
		unsigned char b = (i >= 148 && i < 156) ? ' ' : h[i];

		u += b;
		s += (signed char)b;
	}
	return !num_field(h + 148, 8, &want) && (want == u || (int64_t)want == s);
}

/* "./a//b" -> "a/b"; false for "", "..", absolute or over-long names. */
static bool clean_name(const char *in, char *out, size_t cap)
{
	size_t o = 0;
	const char *p = in;

	while (*p) {
		const char *e = strchr(p, '/');
		size_t l = e ? (size_t)(e - p) : strlen(p);

		if (l == 2 && !memcmp(p, "..", 2))
			return false;
		if (l && !(l == 1 && *p == '.')) {
			if (o + l + 2 > cap)
				return false;
			if (o)
				out[o++] = '/';
			memcpy(out + o, p, l);
			o += l;
		}
		p += l;
		while (*p == '/')
			p++;
	}
	out[o] = '\0';
	return o > 0 && in[0] != '/';
}

/* The "path" record of a PAX header, if any, into name. */
static int pax_path(const char *p, size_t n, char *name, size_t cap)
{
	size_t off = 0;

	while (off < n) {
		char *sp, *eq;
		unsigned long len = strtoul(p + off, &sp, 10);

		if (sp == p + off || *sp != ' ' || len < 5 || len > n - off || p[off + len - 1] != '\n')
			return -EINVAL;
		eq = memchr(sp, '=', p + off + len - sp);
		if (!eq)
			return -EINVAL;
		if (eq - sp - 1 == 4 && !memcmp(sp + 1, "path", 4)) {
			size_t vl = p + off + len - 1 - (eq + 1);

			if (vl >= cap || memchr(eq + 1, '\0', vl))
				return -EINVAL;
			memcpy(name, eq + 1, vl);
			name[vl] = '\0';
		}
		off += len;
	}
	return 0;
}

static int index_tar(struct box *b)
{
	unsigned char h[512];
	char *pend = NULL, raw[MAX_NAME + 256], name[MAX_NAME];
	uint64_t off = 0, size;
	int err = 0;

	pend = malloc(MAX_PAX + 1);
	if (!pend)
		return husk_seterr(ENOMEM, "out of memory");
	pend[0] = '\0';
	for (;;) {
		err = read_exact_at(b->fd, h, 512, off);
		if (err)
			break;	/* EOF at a header boundary ends the index */
		if (h[0] == '\0') {
			static const unsigned char zero[512];

			if (!memcmp(h, zero, 512))
				break;
		}
		if (!header_ok(h) || num_field(h + 124, 12, &size)) {
			err = husk_seterr(EINVAL, "a damaged tar header at byte %llu",
					  (unsigned long long)off);
			goto out;
		}
		if (h[156] == 'L' || h[156] == 'x') {
			if (size > MAX_PAX) {
				err = husk_seterr(EINVAL, "an oversized long-name header");
				goto out;
			}
			err = read_exact_at(b->fd, pend, size, off + 512);
			if (err)
				goto trunc;
			if (h[156] == 'L') {
				pend[size] = '\0';
			} else {
				char tmp[MAX_NAME];

				tmp[0] = '\0';
				if (pax_path(pend, size, tmp, sizeof(tmp))) {
					err = husk_seterr(EINVAL, "a malformed PAX header");
					goto out;
				}
				strcpy(pend, tmp);
			}
		} else if (h[156] == '0' || h[156] == '\0' || h[156] == '7') {
			if (pend[0]) {
				snprintf(raw, sizeof(raw), "%s", pend);
			} else if (!memcmp(h + 257, "ustar", 5) && h[345]) {
				snprintf(raw, sizeof(raw), "%.155s/%.100s", (char *)h + 345, (char *)h);
			} else {
				snprintf(raw, sizeof(raw), "%.100s", (char *)h);
			}
			pend[0] = '\0';
			if (clean_name(raw, name, sizeof(name))) {
				struct member *m;

				if (b->n == MAX_MEMBERS) {
					err = husk_seterr(E2BIG, "more than %d files in the archive",
							  MAX_MEMBERS);
					goto out;
				}
				m = realloc(b->m, (b->n + 1) * sizeof(*m));
				if (!m || !(m[b->n].name = strdup(name))) {
					if (m)
						b->m = m;
					err = husk_seterr(ENOMEM, "out of memory");
					goto out;
				}
				b->m = m;
				m[b->n].off = off + 512;
				m[b->n].size = size;
				b->n++;
			}
		} else if (h[156] != 'g') {
			pend[0] = '\0';
		}
		if (size > UINT64_MAX - 1024) {
			err = husk_seterr(EINVAL, "a tar member of impossible size");
			goto out;
		}
		off += 512 + ((size + 511) & ~511ull);
	}
	err = 0;
	goto out;
trunc:
	err = husk_seterr(EIO, "the archive ends inside a member");
out:
	free(pend);
	return err;
}

/* ---- the box: files by name ---- */

static int open_beneath(int dirfd, const char *name)
{
	struct open_how how = {
		.flags = O_RDONLY | O_CLOEXEC | O_NOFOLLOW,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	long fd = syscall(SYS_openat2, dirfd, name, &how, sizeof(how));

	return fd < 0 ? -errno : (int)fd;
}

static const struct member *find(const struct box *b, const char *name)
{
	size_t i;

	for (i = b->n; i-- > 0;)	/* a later member of the same name wins */
		if (!strcmp(b->m[i].name, name))
			return &b->m[i];
	return NULL;
}

static bool has(const struct box *b, const char *name)
{
	int fd;

	if (b->dirfd < 0)
		return find(b, name) != NULL;
	fd = open_beneath(b->dirfd, name);
	if (fd >= 0)
		close(fd);
	return fd >= 0;
}

/*
 * A private copy of name, made while its digest is computed; when want is
 * given the digest must match. Returns the copy's fd, positioned at 0: what
 * is parsed or applied later is exactly what was hashed, whoever can write
 * the source meanwhile.
 */
static int fetch(const struct box *b, const char *name, const char *want,
		 char digest[IMAGE_DIGEST_LEN])
{
	const struct member *m = NULL;
	struct stat st;
	int src = -1, fd, err;

	if (b->dirfd >= 0) {
		src = open_beneath(b->dirfd, name);
		if (src < 0)
			return husk_seterr(-src, "%s: %s", name, src == -ELOOP || src == -EXDEV ?
					   "a symbolic link (refused)" : strerror(-src));
		if (fstat(src, &st) || !S_ISREG(st.st_mode)) {
			close(src);
			return husk_seterr(EINVAL, "%s: not a regular file", name);
		}
	} else if (!(m = find(b, name))) {
		return husk_seterr(ENOENT, "%s: not in the archive", name);
	}
	fd = tmp_file(b->workdir);
	if (fd >= 0 && m)
		err = hash_copy(b->fd, m->off, m->size, fd, digest);
	else if (fd >= 0)
		err = hash_copy(src, 0, UINT64_MAX, fd, digest);
	else
		err = fd;
	if (src >= 0)
		close(src);
	if (fd < 0)
		return fd;
	if (err) {
		close(fd);
		return husk_seterr(-err, "%s: %s", name, husk_lasterr());
	}
	if (want && strcmp(want, digest)) {
		close(fd);
		return husk_seterr(EBADMSG, "%s: its content does not match its digest %s",
				   name, want);
	}
	return fd;
}

/* A blob's path in a layout: only "sha256:<64 lower-case hex>". */
static int blob_name(const char *digest, char *out, size_t cap)
{
	size_t i;

	if (!digest || strncmp(digest, "sha256:", 7) || strlen(digest) != 71)
		return husk_seterr(EINVAL, "digest '%s': only sha256 digests are accepted",
				   digest ? digest : "(none)");
	for (i = 7; i < 71; i++)
		if (!((digest[i] >= '0' && digest[i] <= '9') || (digest[i] >= 'a' && digest[i] <= 'f')))
			return husk_seterr(EINVAL, "digest '%s' is not lower-case hex", digest);
	snprintf(out, cap, "blobs/sha256/%s", digest + 7);
	return 0;
}

/* Read a JSON document (at most IMAGE_MAX_JSON bytes) of the box. */
static json_t *load_json(const struct box *b, const char *name, const char *want,
			 char **text, char digest[IMAGE_DIGEST_LEN])
{
	char d[IMAGE_DIGEST_LEN];
	struct stat st;
	json_error_t je;
	json_t *j = NULL;
	char *buf;
	int fd = fetch(b, name, want, digest ? digest : d);

	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) || st.st_size > IMAGE_MAX_JSON) {
		husk_seterr(EFBIG, "%s: larger than %u bytes", name, IMAGE_MAX_JSON);
		goto out;
	}
	buf = malloc(st.st_size + 1);
	if (!buf) {
		husk_seterr(ENOMEM, "out of memory");
		goto out;
	}
	if (read_exact_at(fd, buf, st.st_size, 0)) {
		husk_seterr(EIO, "%s: %s", name, husk_lasterr());
		free(buf);
		goto out;
	}
	buf[st.st_size] = '\0';
	j = json_loadb(buf, st.st_size, JSON_REJECT_DUPLICATES, &je);
	if (!j)
		husk_seterr(EINVAL, "%s: not valid JSON (%s, line %d)", name, je.text, je.line);
	if (j && text)
		*text = buf;
	else
		free(buf);
out:
	close(fd);
	return j;
}

/* ---- OCI image layout ---- */

static bool media_is(const char *mt, const char *a, const char *b)
{
	return mt && ((a && !strcmp(mt, a)) || (b && !strcmp(mt, b)));
}

#define MT_OCI_INDEX "application/vnd.oci.image.index.v1+json"
#define MT_DOCKER_LIST "application/vnd.docker.distribution.manifest.list.v2+json"
#define MT_OCI_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define MT_DOCKER_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"

static bool platform_ok(json_t *d)
{
	json_t *p = json_object_get(d, "platform");
	const char *os, *arch;

	if (!p)
		return true;
	os = json_string_value(json_object_get(p, "os"));
	arch = json_string_value(json_object_get(p, "architecture"));
	return os && arch && !strcmp(os, "linux") && !strcmp(arch, "amd64");
}

/* The manifest descriptor of index (ref: by its ref.name annotation). */
static json_t *pick_manifest(json_t *index, const char *ref, const char *what)
{
	json_t *ms = json_object_get(index, "manifests"), *d, *pick = NULL;
	size_t i, n = 0;

	if (!json_is_array(ms) || !json_array_size(ms)) {
		husk_seterr(EINVAL, "%s lists no manifests", what);
		return NULL;
	}
	json_array_foreach(ms, i, d) {
		const char *name = json_string_value(json_object_get(
			json_object_get(d, "annotations"), "org.opencontainers.image.ref.name"));

		if (!json_is_object(d) || !platform_ok(d))
			continue;
		if (ref && (!name || strcmp(name, ref)))
			continue;
		pick = d;
		n++;
	}
	if (n == 1)
		return pick;
	if (ref)
		husk_seterr(ENOENT, "%s has %s image named '%s'", what, n ? "more than one" : "no", ref);
	else
		husk_seterr(EINVAL, "%s holds %s linux/amd64 images: name one with --ref",
			    what, n ? "several" : "no");
	return NULL;
}

static const char *layer_kind(const char *mt)
{
	static const char *const ok[] = {
		"application/vnd.oci.image.layer.v1.tar",
		"application/vnd.oci.image.layer.v1.tar+gzip",
		"application/vnd.oci.image.layer.nondistributable.v1.tar",
		"application/vnd.oci.image.layer.nondistributable.v1.tar+gzip",
		"application/vnd.docker.image.rootfs.diff.tar.gzip",
		"application/vnd.docker.image.rootfs.diff.tar",
	};
	size_t i;

	if (!mt)
		return "a layer without a media type";
	for (i = 0; i < ARRAY_SIZE(ok); i++)
		if (!strcmp(mt, ok[i]))
			return NULL;
	if (strstr(mt, "zstd"))
		return "a zstd-compressed layer (not supported: re-save the image with gzip layers)";
	return "a layer of an unknown media type";
}

static int oci_layout(struct box *b, const char *ref, struct image_source *s)
{
	char name[128], mdig[IMAGE_DIGEST_LEN];
	json_t *index, *d, *man = NULL, *layers, *l, *cfg;
	const char *mt;
	int depth, err = -EINVAL;
	size_t i;

	index = load_json(b, "index.json", NULL, NULL, NULL);
	if (!index)
		return -EINVAL;
	/* An index may point at a further index (multi-platform images). */
	for (depth = 0; depth < 4; depth++) {
		json_t *next;
		bool nested;

		d = pick_manifest(index, depth ? NULL : ref, depth ? "the image index" : "index.json");
		if (!d)
			goto out;
		mt = json_string_value(json_object_get(d, "mediaType"));
		if (blob_name(json_string_value(json_object_get(d, "digest")), name, sizeof(name)))
			goto out;
		/* mt belongs to index: decide before index goes. */
		nested = media_is(mt, MT_OCI_INDEX, MT_DOCKER_LIST);
		next = load_json(b, name, json_string_value(json_object_get(d, "digest")), NULL, mdig);
		if (!next)
			goto out;
		json_decref(index);
		index = next;
		if (!nested && !media_is(json_string_value(json_object_get(index, "mediaType")),
					 MT_OCI_INDEX, MT_DOCKER_LIST))
			break;
	}
	man = index;
	index = NULL;
	if (!json_is_array(json_object_get(man, "layers")) || !json_is_object(json_object_get(man, "config"))) {
		husk_seterr(EINVAL, "manifest %s has no config or layers", mdig);
		goto out;
	}
	cfg = json_object_get(man, "config");
	if (blob_name(json_string_value(json_object_get(cfg, "digest")), name, sizeof(name)))
		goto out;
	snprintf(s->config_digest, sizeof(s->config_digest), "%s",
		 json_string_value(json_object_get(cfg, "digest")));
	json_decref(load_json(b, name, s->config_digest, &s->config, NULL));
	if (!s->config)
		goto out;
	layers = json_object_get(man, "layers");
	if (json_array_size(layers) > IMAGE_MAX_LAYERS) {
		husk_seterr(E2BIG, "more than %d layers", IMAGE_MAX_LAYERS);
		goto out;
	}
	json_array_foreach(layers, i, l) {
		const char *dg = json_string_value(json_object_get(l, "digest"));
		const char *why = layer_kind(json_string_value(json_object_get(l, "mediaType")));
		int fd;

		if (why) {
			husk_seterr(EINVAL, "layer %zu is %s", i + 1, why);
			goto out;
		}
		if (blob_name(dg, name, sizeof(name)))
			goto out;
		fd = fetch(b, name, dg, s->layers[s->n_layers].digest);
		if (fd < 0)
			goto out;
		s->layers[s->n_layers++].fd = fd;
	}
	err = 0;
out:
	json_decref(index);
	json_decref(man);
	return err;
}

/* ---- docker save ---- */

static bool is_hex64(const char *p)
{
	int i;

	for (i = 0; i < 64; i++)
		if (!((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f')))
			return false;
	return true;
}

/* The digest a docker-archive path names: "blobs/sha256/<hex>" or "<hex>.json". */
static bool named_digest(const char *path, char out[IMAGE_DIGEST_LEN])
{
	const char *base = strrchr(path, '/');
	size_t l;

	base = base ? base + 1 : path;
	l = strlen(base);
	if ((l == 64 || (l == 69 && !strcmp(base + 64, ".json"))) && is_hex64(base)) {
		snprintf(out, IMAGE_DIGEST_LEN, "sha256:%.64s", base);
		return true;
	}
	return false;
}

static int docker_archive(struct box *b, const char *ref, struct image_source *s)
{
	json_t *list, *e, *pick = NULL, *layers, *l, *cfg = NULL, *diffs;
	char want[IMAGE_DIGEST_LEN], name[MAX_NAME];
	const char *path;
	size_t i, j, n = 0;
	int err = -EINVAL;

	list = load_json(b, "manifest.json", NULL, NULL, NULL);
	if (!list)
		return -EINVAL;
	json_array_foreach(list, i, e) {
		json_t *tags = json_object_get(e, "RepoTags"), *t;
		bool match = !ref;

		json_array_foreach(tags, j, t)
			if (ref && json_string_value(t) && !strcmp(json_string_value(t), ref))
				match = true;
		if (match) {
			pick = e;
			n++;
		}
	}
	if (n != 1) {
		if (ref)
			husk_seterr(ENOENT, "manifest.json has %s image tagged '%s'",
				    n ? "more than one" : "no", ref);
		else
			husk_seterr(EINVAL, "manifest.json holds %s images: name one with --ref",
				    n ? "several" : "no");
		goto out;
	}
	path = json_string_value(json_object_get(pick, "Config"));
	if (!path || !clean_name(path, name, sizeof(name))) {
		husk_seterr(EINVAL, "manifest.json: a missing or unsafe Config path");
		goto out;
	}
	cfg = load_json(b, name, named_digest(name, want) ? want : NULL, &s->config, s->config_digest);
	if (!cfg)
		goto out;
	diffs = json_object_get(json_object_get(cfg, "rootfs"), "diff_ids");
	layers = json_object_get(pick, "Layers");
	if (!json_is_array(layers) || json_array_size(layers) != json_array_size(diffs) ||
	    json_array_size(layers) > IMAGE_MAX_LAYERS) {
		husk_seterr(EINVAL, "manifest.json's layers do not match the config's diff_ids");
		goto out;
	}
	json_array_foreach(layers, i, l) {
		const char *diff = json_string_value(json_array_get(diffs, i));
		int fd;

		path = json_string_value(l);
		if (!path || !clean_name(path, name, sizeof(name))) {
			husk_seterr(EINVAL, "manifest.json: an unsafe layer path");
			goto out;
		}
		/*
		 * A layer named by its digest is checked against it; an old-style
		 * "<id>/layer.tar" is an uncompressed tar, checked against the
		 * config's diff_id for it.
		 */
		if (!named_digest(name, want)) {
			if (!diff || strlen(diff) >= sizeof(want)) {
				husk_seterr(EINVAL, "layer %zu has no diff_id to check it against", i + 1);
				goto out;
			}
			strcpy(want, diff);
		}
		fd = fetch(b, name, want, s->layers[s->n_layers].digest);
		if (fd < 0)
			goto out;
		s->layers[s->n_layers++].fd = fd;
	}
	err = 0;
out:
	json_decref(cfg);
	json_decref(list);
	return err;
}

/* ---- an unpacked root directory ---- */

/*
 * The tree as one layer: GNU tar, sorted, numeric owners, as the caller (or
 * as) can read it. Its digest is the import's key, so it holds only what
 * the image keeps: pax headers without atime (which reading the tree
 * changes) and ctime, or an unchanged tree would never be the same image
 * twice. tar run as another user is that user's process, which can reopen
 * its output through /proc while it lives: the layer is then a copy of it
 * made while hashing, as a layout's blobs are.
 */
static int directory(const char *dir, const char *workdir, const struct image_reader *as,
		     struct image_source *s)
{
	char *argv[] = { "tar", "--sort=name", "--numeric-owner", "--format=pax",
			 "--pax-option=delete=atime,delete=ctime", "--no-xattrs",
			 "--one-file-system", "-C", (char *)dir, "-cf", "-", ".", NULL };
	int fd = tmp_file(workdir), copy = -1, err;

	if (fd < 0)
		return fd;
	err = image_tool_run(argv, "tar", fd, as);
	if (err)
		err = husk_seterr(-err, "reading the tree %s: %s", dir, husk_lasterr());
	if (!err && as && (copy = tmp_file(workdir)) < 0)
		err = copy;
	if (!err)
		err = hash_copy(fd, 0, UINT64_MAX, copy, s->layers[0].digest);
	if (copy >= 0) {
		close(fd);
		fd = copy;
	}
	/* tar wrote through a dup of fd: its offset is at the end. */
	if (!err && lseek(fd, 0, SEEK_SET))
		err = husk_seterr(errno, "rewinding the tree's tar: %s", strerror(errno));
	if (err) {
		close(fd);
		return err;
	}
	s->layers[0].fd = fd;
	s->n_layers = 1;
	return 0;
}

/* ---- the whole ---- */

/* A gzip'd archive, inflated into a temporary file. */
static int gunzip_to_tmp(int in, const char *workdir)
{
	unsigned char buf[CHUNK];
	uint64_t off = 0, cap = ARCHIVE_MAX_INFLATED;
	struct stat st;
	gzFile gz;
	int out, n, err = 0, dfd = dup(in);

	if (dfd < 0)
		return husk_seterr(errno, "dup: %s", strerror(errno));
	out = tmp_file(workdir);
	if (out < 0) {
		close(dfd);
		return out;
	}
	lseek(dfd, 0, SEEK_SET);
	/* A gzip bomb must not fill the store's disk: the layers' own caps come later. */
	if (fstat(in, &st) == 0 && st.st_size > 0 &&
	    (uint64_t)st.st_size < ARCHIVE_MAX_INFLATED / ARCHIVE_MAX_RATIO)
		cap = (uint64_t)st.st_size * ARCHIVE_MAX_RATIO;
	if (cap < ARCHIVE_RATIO_GRACE)
		cap = ARCHIVE_RATIO_GRACE;
	gz = gzdopen(dfd, "rb");
	if (!gz) {
		close(dfd);
		close(out);
		return husk_seterr(ENOMEM, "out of memory");
	}
	while ((n = gzread(gz, buf, sizeof(buf))) > 0) {
		if (off + n > cap) {
			err = husk_seterr(EFBIG, "the archive inflates past %llu MiB (%s)",
					  (unsigned long long)(cap >> 20), cap == ARCHIVE_MAX_INFLATED ?
					  "the limit" : "1000 times its size");
			break;
		}
		err = write_all_at(out, buf, n, off);
		if (err)
			break;
		off += n;
	}
	if (n < 0)
		err = husk_seterr(EINVAL, "the archive is not valid gzip");
	else if (err && err != -EFBIG)
		err = husk_seterr(-err, "writing a temporary copy: %s", strerror(-err));
	gzclose(gz);
	if (err) {
		close(out);
		return err;
	}
	return out;
}

static void source_init(struct image_source *s)
{
	memset(s, 0, sizeof(*s));
	for (size_t i = 0; i < IMAGE_MAX_LAYERS; i++)
		s->layers[i].fd = -1;
}

/* The identity: what the image is made of, in order. */
static void source_id(struct image_source *s)
{
	char ids[IMAGE_MAX_LAYERS * IMAGE_DIGEST_LEN + IMAGE_DIGEST_LEN + 32];
	size_t o;

	o = (size_t)snprintf(ids, sizeof(ids), "husk-image-1 %s", s->config ? s->config_digest : "-");
	for (unsigned i = 0; i < s->n_layers; i++)
		o += (size_t)snprintf(ids + o, sizeof(ids) - o, " %s", s->layers[i].digest);
	image_sha256(ids, o, s->id);
}

int image_source_open_tree(const char *dir, const char *workdir, const struct image_reader *as,
			   struct image_source *s)
{
	int err;

	source_init(s);
	s->kind = "directory";
	err = directory(dir, workdir, as, s);
	if (err) {
		image_source_close(s);
		return err;
	}
	source_id(s);
	return 0;
}

int image_source_open(const char *src, const char *ref, const char *workdir,
		      struct image_source *s)
{
	struct box b = { .dirfd = -1, .fd = -1, .workdir = workdir };
	unsigned char magic[2];
	struct stat st;
	size_t i;
	int err;

	source_init(s);
	if (stat(src, &st))
		return husk_seterr(errno, "%s: %s", src, strerror(errno));
	if (S_ISDIR(st.st_mode)) {
		b.dirfd = open(src, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (b.dirfd < 0)
			return husk_seterr(errno, "%s: %s", src, strerror(errno));
		if (has(&b, "oci-layout") && has(&b, "index.json")) {
			s->kind = "oci-layout";
			err = oci_layout(&b, ref, s);
		} else if (has(&b, "manifest.json")) {
			s->kind = "docker-archive";
			err = docker_archive(&b, ref, s);
		} else {
			s->kind = "directory";
			err = ref ? husk_seterr(EINVAL, "--ref: a root directory holds one image")
				  : directory(src, workdir, NULL, s);
		}
	} else if (S_ISREG(st.st_mode)) {
		b.fd = open(src, O_RDONLY | O_CLOEXEC);
		if (b.fd < 0)
			return husk_seterr(errno, "%s: %s", src, strerror(errno));
		if (read_exact_at(b.fd, magic, 2, 0) == 0 && magic[0] == 0x1f && magic[1] == 0x8b) {
			int t = gunzip_to_tmp(b.fd, workdir);

			if (t < 0) {
				close(b.fd);
				return husk_seterr(-t, "%s: %s", src, husk_lasterr());
			}
			close(b.fd);
			b.fd = t;
		}
		err = index_tar(&b);
		if (!err && find(&b, "manifest.json")) {
			s->kind = "docker-archive";
			err = docker_archive(&b, ref, s);
		} else if (!err && find(&b, "oci-layout") && find(&b, "index.json")) {
			s->kind = "oci-archive";
			err = oci_layout(&b, ref, s);
		} else if (!err) {
			err = husk_seterr(EINVAL, "not an image archive (no manifest.json, no "
					  "oci-layout and index.json)");
		}
	} else {
		return husk_seterr(EINVAL, "%s: not a directory or a file", src);
	}
	if (b.dirfd >= 0)
		close(b.dirfd);
	if (b.fd >= 0)
		close(b.fd);
	for (i = 0; i < b.n; i++)
		free(b.m[i].name);
	free(b.m);
	if (err) {
		err = husk_seterr(-err, "%s (%s): %s", src, s->kind ? s->kind : "?", husk_lasterr());
		image_source_close(s);
		return err;
	}
	source_id(s);
	return 0;
}

void image_source_close(struct image_source *s)
{
	unsigned i;

	for (i = 0; i < s->n_layers; i++)
		if (s->layers[i].fd >= 0)
			close(s->layers[i].fd);
	s->n_layers = 0;
	free(s->config);
	s->config = NULL;
}
