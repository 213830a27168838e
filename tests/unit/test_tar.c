/*
 * Unit tests for tar: hostile streams built by hand (a small ustar + gzip
 * writer below, independent of the module's own writer) must be refused
 * with nothing created outside the target directory, and trees must
 * survive tar_create -> tar_extract unchanged.
 *
 * Every test works in its own mkdtemp directory under /tmp:
 *   base/t        the extraction target
 *   base/         must hold nothing but t afterwards (escapes land here)
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <zlib.h>

#include "suites.h"
#include "job/tar.h"
#include "lib/util.h"

/* ---- a minimal ustar + gzip builder for crafting streams ---- */

struct buf {
	unsigned char *p;
	size_t len, cap;
};

static void buf_put(struct buf *b, const void *data, size_t len)
{
	if (b->len + len > b->cap) {
		b->cap = (b->len + len) * 2 + 4096;
		b->p = realloc(b->p, b->cap);
		ck_assert_ptr_nonnull(b->p);
	}
	if (data)
		memcpy(b->p + b->len, data, len);
	else
		memset(b->p + b->len, 0, len);
	b->len += len;
}

/* Header with any type, name and size; chk_delta corrupts the checksum. */
static void tb_header(struct buf *b, const char *name, char type, unsigned mode,
		      unsigned long long size, const char *link, int chk_delta)
{
	unsigned char h[512];
	unsigned sum = 0, i;

	memset(h, 0, sizeof(h));
	strncpy((char *)h, name, 100);
	snprintf((char *)h + 100, 8, "%07o", mode);
	snprintf((char *)h + 108, 8, "%07o", 0);
	snprintf((char *)h + 116, 8, "%07o", 0);
	snprintf((char *)h + 124, 12, "%011llo", size);
	snprintf((char *)h + 136, 12, "%011o", 1700000000);
	h[156] = type;
	if (link)
		strncpy((char *)h + 157, link, 100);
	memcpy(h + 257, "ustar", 6);
	memcpy(h + 263, "00", 2);
	memset(h + 148, ' ', 8);
	for (i = 0; i < 512; i++)
		sum += h[i];
	snprintf((char *)h + 148, 8, "%06o", sum + chk_delta);
	h[155] = ' ';
	buf_put(b, h, sizeof(h));
}

static void tb_pad(struct buf *b, size_t size)
{
	if (size % 512)
		buf_put(b, NULL, 512 - size % 512);
}

static void tb_file(struct buf *b, const char *name, unsigned mode,
		    const void *data, size_t size)
{
	tb_header(b, name, '0', mode, size, NULL, 0);
	buf_put(b, data, size);
	tb_pad(b, size);
}

static void tb_dir(struct buf *b, const char *name, unsigned mode)
{
	tb_header(b, name, '5', mode, 0, NULL, 0);
}

static void tb_end(struct buf *b)
{
	buf_put(b, NULL, 1024);
}

static struct buf gz(const void *data, size_t len)
{
	struct buf out = { 0 };
	z_stream zs = { 0 };

	ck_assert_int_eq(deflateInit2(&zs, 9, Z_DEFLATED, 15 + 16, 8,
				      Z_DEFAULT_STRATEGY), Z_OK);
	out.cap = deflateBound(&zs, len) + 64;
	out.p = malloc(out.cap);
	ck_assert_ptr_nonnull(out.p);
	zs.next_in = (Bytef *)data;
	zs.avail_in = len;
	zs.next_out = out.p;
	zs.avail_out = out.cap;
	ck_assert_int_eq(deflate(&zs, Z_FINISH), Z_STREAM_END);
	out.len = out.cap - zs.avail_out;
	deflateEnd(&zs);
	return out;
}

/* ---- scratch directories ---- */

static char base[64];
static char target[80];

static void setup(void)
{
	strcpy(base, "/tmp/husk-tar-test-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(base));
	snprintf(target, sizeof(target), "%s/t", base);
	ck_assert_int_eq(mkdir(target, 0755), 0);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
	/* Make directories writable again (tests create read-only ones). */
	if (flag == FTW_DP)
		chmod(path, 0700);
	return remove(path);
}

static void rm_tree(const char *path)
{
	nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void teardown(void)
{
	rm_tree(base);
}

/* Number of entries in dir (without . and ..). */
static int count_dir(const char *dir)
{
	char cmd[256];
	int n = 0;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "find '%s' -mindepth 1 -maxdepth 1 | wc -l", dir);
	f = popen(cmd, "r");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fscanf(f, "%d", &n), 1);
	pclose(f);
	return n;
}

/* Nothing escaped the target: base holds exactly "t". */
static void assert_contained(void)
{
	ck_assert_int_eq(count_dir(base), 1);
}

static int exists_at(const char *rel)
{
	char p[256];
	struct stat st;

	snprintf(p, sizeof(p), "%s/%s", target, rel);
	return lstat(p, &st) == 0;
}

/* Feed a gzip'd stream in chunks of `chunk`; first error or 0. */
static int extract_into(const char *dir, const void *data, size_t len,
			const struct tar_limits *lim, size_t chunk)
{
	struct tar_extract *x;
	size_t off = 0, n;
	int dfd, err = 0;

	dfd = open(dir, O_RDONLY | O_DIRECTORY);
	ck_assert_int_ge(dfd, 0);
	x = tar_extract_new(dfd, lim);
	ck_assert_ptr_nonnull(x);
	while (off < len && !err) {
		n = len - off < chunk ? len - off : chunk;
		err = tar_extract_feed(x, (const char *)data + off, n);
		off += n;
	}
	if (!err)
		err = tar_extract_finish(x);
	tar_extract_free(x);
	close(dfd);
	return err;
}

/* Compress raw tar bytes and extract them into the target. */
static int extract_raw(struct buf *raw, const struct tar_limits *lim)
{
	struct buf z = gz(raw->p, raw->len);
	int err = extract_into(target, z.p, z.len, lim, 4096);

	free(z.p);
	free(raw->p);
	memset(raw, 0, sizeof(*raw));
	return err;
}

/* A single hostile entry, then a well-formed end. */
static int extract_one(const char *name, char type, const char *link)
{
	struct buf b = { 0 };

	tb_header(&b, name, type, 0644, 0, link, 0);
	tb_end(&b);
	return extract_raw(&b, NULL);
}

static void write_file(const char *path, const void *data, size_t len, mode_t mode);

/* ---- refusals ---- */

START_TEST(rejects_dotdot)
{
	ck_assert_int_lt(extract_one("../x", '0', NULL), 0);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "../x"));
	assert_contained();
	ck_assert_int_eq(count_dir(target), 0);
}
END_TEST

START_TEST(rejects_inner_dotdot)
{
	ck_assert_int_lt(extract_one("a/../../x", '0', NULL), 0);
	assert_contained();
	ck_assert_int_eq(count_dir(target), 0);
}
END_TEST

START_TEST(rejects_absolute)
{
	char abs[128];
	struct stat st;

	/* An absolute name that would land next to the target. */
	snprintf(abs, sizeof(abs), "%s/x", base);
	ck_assert_int_eq(extract_one(abs, '0', NULL), -EPERM);
	ck_assert_int_ne(lstat(abs, &st), 0);
	ck_assert_int_lt(extract_one("/etc/husk-tar-test-x", '0', NULL), 0);
	ck_assert_int_ne(lstat("/etc/husk-tar-test-x", &st), 0);
	assert_contained();
}
END_TEST

START_TEST(rejects_odd_names)
{
	static const char *const bad[] = { "", "a//b", "./a", "a/./b", "." };
	unsigned i;

	for (i = 0; i < ARRAY_SIZE(bad); i++)
		ck_assert_msg(extract_one(bad[i], '0', NULL) < 0, "accepted \"%s\"", bad[i]);
	ck_assert_int_eq(count_dir(target), 0);
	assert_contained();
}
END_TEST

START_TEST(rejects_symlink)
{
	ck_assert_int_eq(extract_one("l", '2', "/etc/passwd"), -EPERM);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "symbolic link"));
	ck_assert(!exists_at("l"));
	assert_contained();
}
END_TEST

START_TEST(rejects_symlink_then_file)
{
	struct buf b = { 0 };

	tb_header(&b, "l", '2', 0777, 0, base, 0);
	tb_file(&b, "l/x", 0644, "pwn", 3);
	tb_end(&b);
	ck_assert_int_lt(extract_raw(&b, NULL), 0);
	ck_assert(!exists_at("l"));
	assert_contained();
}
END_TEST

START_TEST(rejects_file_through_existing_symlink)
{
	char l[128];
	struct buf b = { 0 };

	/* The target already holds a symlink out: never written through. */
	snprintf(l, sizeof(l), "%s/l", target);
	ck_assert_int_eq(symlink(base, l), 0);
	tb_file(&b, "l/x", 0644, "pwn", 3);
	tb_end(&b);
	ck_assert_int_lt(extract_raw(&b, NULL), 0);
	assert_contained();

	/* Nor replaced by, or opened as, a file of the same name. */
	tb_file(&b, "l", 0644, "pwn", 3);
	tb_end(&b);
	ck_assert_int_eq(extract_raw(&b, NULL), -EEXIST);
	assert_contained();

	/* A symlink to a file outside: the file is not written through it. */
	{
		char victim[128], v[128], got[8] = { 0 };
		int fd;

		snprintf(victim, sizeof(victim), "%s/victim", base);
		snprintf(v, sizeof(v), "%s/v", target);
		write_file(victim, "safe", 4, 0644);
		ck_assert_int_eq(symlink(victim, v), 0);
		tb_file(&b, "v", 0644, "pwned", 5);
		tb_end(&b);
		ck_assert_int_eq(extract_raw(&b, NULL), -EEXIST);
		fd = open(victim, O_RDONLY);
		ck_assert_int_eq(read(fd, got, sizeof(got)), 4);
		ck_assert_str_eq(got, "safe");
		close(fd);
	}
}
END_TEST

START_TEST(rejects_hardlink)
{
	struct buf b = { 0 };

	tb_file(&b, "a", 0644, "x", 1);
	tb_header(&b, "b", '1', 0644, 0, "a", 0);
	tb_end(&b);
	ck_assert_int_eq(extract_raw(&b, NULL), -EPERM);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "hard link"));
	ck_assert(!exists_at("b"));
	assert_contained();
}
END_TEST

START_TEST(rejects_special_types)
{
	/* char, block, FIFO, contiguous, pax, GNU long link, unknown. */
	static const char types[] = { '3', '4', '6', '7', 'x', 'g', 'K', 'V', 'Z', 1 };
	unsigned i;

	for (i = 0; i < sizeof(types); i++)
		ck_assert_msg(extract_one("dev", types[i], NULL) == -EPERM,
			      "type '%c' accepted", types[i]);
	ck_assert(!exists_at("dev"));
	assert_contained();
}
END_TEST

START_TEST(rejects_chardev_and_fifo_by_name)
{
	ck_assert_int_eq(extract_one("null", '3', NULL), -EPERM);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "character device"));
	ck_assert_int_eq(extract_one("pipe", '6', NULL), -EPERM);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "FIFO"));
	ck_assert_int_eq(count_dir(target), 0);
}
END_TEST

START_TEST(rejects_over_max_bytes)
{
	struct tar_limits lim = { .max_bytes = 1000, .max_entries = 10 };
	static char data[2000];
	struct buf b = { 0 };

	tb_file(&b, "small", 0644, data, 600);
	tb_file(&b, "big", 0644, data, 600);
	tb_end(&b);
	ck_assert_int_eq(extract_raw(&b, &lim), -EFBIG);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "big"));
	ck_assert(exists_at("small"));
	ck_assert(!exists_at("big"));

	/* A header claiming a huge size is refused before any data arrives. */
	tb_header(&b, "huge", '0', 0644, 077777777777ull, NULL, 0);
	ck_assert_int_eq(extract_raw(&b, NULL), -EFBIG);
	ck_assert(!exists_at("huge"));
}
END_TEST

START_TEST(rejects_too_many_entries)
{
	struct tar_limits lim = { .max_entries = 5 };
	struct buf b = { 0 };
	char name[16];
	int i;

	for (i = 0; i < 6; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		tb_file(&b, name, 0644, "", 0);
	}
	tb_end(&b);
	ck_assert_int_eq(extract_raw(&b, &lim), -EFBIG);
	ck_assert_int_eq(count_dir(target), 5);
}
END_TEST

START_TEST(rejects_gzip_bomb)
{
	struct tar_limits lim = { .max_ratio = 100, .ratio_grace = 1 << 20 };
	size_t size = 16 << 20;
	char *zeros = calloc(1, size);
	struct buf b = { 0 };

	tb_file(&b, "bomb", 0644, zeros, size);
	tb_end(&b);
	free(zeros);
	ck_assert_int_eq(extract_raw(&b, &lim), -EFBIG);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "ratio"));
	/* The half-written file is removed. */
	ck_assert(!exists_at("bomb"));
}
END_TEST

/* GNU long-name headers count as entries: alone they could go on forever. */
START_TEST(long_names_count_as_entries)
{
	struct tar_limits lim = { .max_entries = 100 };
	char name[300];
	struct buf b = { 0 };
	int i;

	memset(name, 'n', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	for (i = 0; i < 200; i++) {
		tb_header(&b, "././@LongLink", 'L', 0644, sizeof(name), NULL, 0);
		buf_put(&b, name, sizeof(name));
		tb_pad(&b, sizeof(name));
	}
	tb_end(&b);
	ck_assert_int_eq(extract_raw(&b, &lim), -EFBIG);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "more than 100 entries"));
	assert_contained();
	ck_assert_int_eq(count_dir(target), 0);
}
END_TEST

/* Padding, headers and data all count toward the inflated total. */
START_TEST(rejects_over_max_inflated)
{
	struct tar_limits lim = { .max_inflated = 64 << 10 };
	static char data[48 << 10];
	struct buf b = { 0 };

	tb_file(&b, "a", 0644, data, sizeof(data));
	tb_file(&b, "b", 0644, data, sizeof(data));
	tb_end(&b);
	ck_assert_int_eq(extract_raw(&b, &lim), -EFBIG);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "inflates past"));

	/* The default allows what max_bytes and max_entries allow, no more. */
	b.len = 0;
	tb_file(&b, "c", 0644, data, sizeof(data));
	tb_end(&b);
	lim = (struct tar_limits){ .max_bytes = sizeof(data), .max_entries = 1 };
	ck_assert_int_eq(extract_raw(&b, &lim), 0);
	ck_assert(exists_at("c"));
	b.len = 0;
	tb_end(&b);
	buf_put(&b, NULL, 60 << 10);	/* zero padding after the end: allowed */
	lim = (struct tar_limits){ .max_bytes = 1, .max_entries = 1 };
	ck_assert_int_eq(extract_raw(&b, &lim), 0);
	free(b.p);
}
END_TEST

/* With lim.only, nothing but that name and what lies below it lands. */
START_TEST(only_the_requested_name)
{
	struct tar_limits lim = { .only = "out" };
	const char *const planted[] = { ".bash_profile", "outside", "ou", ".ssh/authorized_keys",
					"cron.d/x", "out2/x" };
	struct buf b = { 0 };
	unsigned i;

	for (i = 0; i < ARRAY_SIZE(planted); i++) {
		b.len = 0;
		tb_dir(&b, "out/", 0755);
		tb_file(&b, "out/ok", 0644, "x", 1);
		tb_file(&b, planted[i], 0644, "evil", 4);
		tb_end(&b);
		ck_assert_int_eq(extract_raw(&b, &lim), -EPERM);
		ck_assert_ptr_nonnull(strstr(husk_lasterr(), "is not \"out\" or inside it"));
		ck_assert(!exists_at(planted[i]));
		rm_tree(target);
		ck_assert_int_eq(mkdir(target, 0755), 0);
	}
	/* The name itself, as a file or a tree, and a nested request. */
	b.len = 0;
	tb_file(&b, "out", 0644, "x", 1);
	tb_end(&b);
	ck_assert_int_eq(extract_raw(&b, &lim), 0);
	ck_assert(exists_at("out"));
	b.len = 0;
	tb_dir(&b, "a/", 0755);
	tb_dir(&b, "a/b/", 0755);
	tb_file(&b, "a/b/out/f", 0644, "x", 1);
	tb_end(&b);
	lim.only = "a/b/out";
	ck_assert_int_eq(extract_raw(&b, &lim), -EPERM);	/* "a/" is not inside */
	b.len = 0;
	tb_file(&b, "a/b/out/f", 0644, "x", 1);
	tb_end(&b);
	ck_assert_int_eq(extract_raw(&b, &lim), 0);
	ck_assert(exists_at("a/b/out/f"));
	free(b.p);
}
END_TEST

/* strip_exec: no execute bits on files; directories stay enterable. */
START_TEST(strip_exec_bits)
{
	struct tar_limits lim = { .strip_exec = true };
	struct buf b = { 0 };
	struct stat st;
	char p[256];

	tb_dir(&b, "d/", 0755);
	tb_file(&b, "d/run.sh", 0755, "#!/bin/sh\n", 10);
	tb_end(&b);
	ck_assert_int_eq(extract_raw(&b, &lim), 0);
	snprintf(p, sizeof(p), "%s/d/run.sh", target);
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0644);
	snprintf(p, sizeof(p), "%s/d", target);
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0755);
	rm_tree(target);
	ck_assert_int_eq(mkdir(target, 0755), 0);
	tb_dir(&b, "d/", 0755);
	tb_file(&b, "d/run.sh", 0755, "#!/bin/sh\n", 10);
	tb_end(&b);
	ck_assert_int_eq(extract_raw(&b, NULL), 0);
	snprintf(p, sizeof(p), "%s/d/run.sh", target);
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0755);
	free(b.p);
}
END_TEST

/* Bounded feeding: many small steps give the same result as one big feed. */
START_TEST(feed_some_is_bounded)
{
	size_t size = 4 << 20, off = 0;
	char *zeros = calloc(1, size), p[256];
	struct buf b = { 0 }, z;
	struct tar_extract *x;
	struct stat st;
	unsigned calls = 0;
	int dfd;

	tb_file(&b, "big", 0644, zeros, size);
	tb_end(&b);
	free(zeros);
	z = gz(b.p, b.len);
	free(b.p);
	dfd = open(target, O_RDONLY | O_DIRECTORY);
	ck_assert_int_ge(dfd, 0);
	x = tar_extract_new(dfd, NULL);
	ck_assert_ptr_nonnull(x);
	/* The whole stream at once, 64 KiB of inflated work per call. */
	while (off < z.len || tar_extract_busy(x)) {
		ssize_t n = tar_extract_feed_some(x, z.p + off, z.len - off, 64 << 10);

		ck_assert_int_ge(n, 0);
		off += n;
		ck_assert_uint_le(++calls, 1000);
	}
	ck_assert_uint_ge(calls, (4u << 20) / (128u << 10));
	ck_assert_int_eq(tar_extract_finish(x), 0);
	tar_extract_free(x);
	close(dfd);
	snprintf(p, sizeof(p), "%s/big", target);
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert_int_eq(st.st_size, 4 << 20);
	free(z.p);
}
END_TEST

START_TEST(rejects_bad_checksum)
{
	struct buf b = { 0 };

	tb_header(&b, "f", '0', 0644, 0, NULL, 1);
	tb_end(&b);
	ck_assert_int_eq(extract_raw(&b, NULL), -EINVAL);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "checksum"));
	ck_assert(!exists_at("f"));
}
END_TEST

START_TEST(rejects_truncation)
{
	static char data[3000] = "data";
	struct buf b = { 0 }, z;
	size_t full;
	int i;

	tb_file(&b, "a", 0644, data, sizeof(data));
	tb_end(&b);
	full = b.len;

	/* In the header of the first entry, in its data, in the end blocks. */
	for (i = 0; i < 3; i++) {
		size_t cut = i == 0 ? 300 : i == 1 ? 2000 : full - 700;

		z = gz(b.p, cut);
		ck_assert_int_eq(extract_into(target, z.p, z.len, NULL, 512), -EPIPE);
		/* A half-written file is removed; a complete one stays. */
		ck_assert(exists_at("a") == (i == 2));
		free(z.p);
		rm_tree(target);
		mkdir(target, 0755);
	}

	/* A complete tar whose gzip stream stops short. */
	z = gz(b.p, b.len);
	ck_assert_int_eq(extract_into(target, z.p, z.len - 9, NULL, 512), -EPIPE);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "gzip"));
	rm_tree(target);
	mkdir(target, 0755);
	ck_assert_int_eq(extract_into(target, z.p, z.len, NULL, 512), 0);
	ck_assert(exists_at("a"));
	free(z.p);
	free(b.p);
}
END_TEST

START_TEST(rejects_trailing_garbage)
{
	struct buf b = { 0 }, z;
	unsigned char *g;

	tb_file(&b, "a", 0644, "x", 1);
	tb_end(&b);
	z = gz(b.p, b.len);
	g = malloc(z.len + 3);
	memcpy(g, z.p, z.len);
	memcpy(g + z.len, "xyz", 3);
	ck_assert_int_eq(extract_into(target, g, z.len + 3, NULL, 4096), -EINVAL);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "trailing"));
	/* Byte by byte: the garbage arrives in its own feed. */
	rm_tree(target);
	mkdir(target, 0755);
	ck_assert_int_eq(extract_into(target, g, z.len + 3, NULL, 1), -EINVAL);
	free(g);
	free(z.p);

	/* Inside the gzip, after the end blocks: non-zero data. */
	buf_put(&b, "junk", 4);
	rm_tree(target);
	mkdir(target, 0755);
	ck_assert_int_eq(extract_raw(&b, NULL), -EINVAL);

	/* Not gzip at all. */
	ck_assert_int_eq(extract_into(target, "plain text", 10, NULL, 4096), -EINVAL);
}
END_TEST

START_TEST(rejects_duplicate)
{
	char p[128], got[8] = { 0 };
	struct buf b = { 0 };
	int fd;

	tb_file(&b, "a", 0644, "first", 5);
	tb_file(&b, "a", 0644, "second", 6);
	tb_end(&b);
	ck_assert_int_eq(extract_raw(&b, NULL), -EEXIST);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "already exists"));
	snprintf(p, sizeof(p), "%s/a", target);
	fd = open(p, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(read(fd, got, sizeof(got)), 5);
	ck_assert_str_eq(got, "first");
	close(fd);
}
END_TEST

START_TEST(rejects_dir_over_file)
{
	struct buf b = { 0 };
	struct stat st;
	char p[128];

	tb_file(&b, "a", 0644, "x", 1);
	tb_dir(&b, "a/", 0755);
	tb_end(&b);
	ck_assert_int_eq(extract_raw(&b, NULL), -EEXIST);

	/* A file below something that is a file. */
	rm_tree(target);
	mkdir(target, 0755);
	tb_file(&b, "a", 0644, "x", 1);
	tb_file(&b, "a/b", 0644, "y", 1);
	tb_end(&b);
	ck_assert_int_eq(extract_raw(&b, NULL), -ENOTDIR);
	snprintf(p, sizeof(p), "%s/a", target);
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert(S_ISREG(st.st_mode));
}
END_TEST

START_TEST(strips_mode_bits)
{
	struct buf b = { 0 };
	struct stat st;
	char p[128];

	tb_file(&b, "suid", 06777, "x", 1);
	tb_dir(&b, "sticky", 01777);
	tb_file(&b, "ro", 0444, "x", 1);
	tb_end(&b);
	ck_assert_int_eq(extract_raw(&b, NULL), 0);
	snprintf(p, sizeof(p), "%s/suid", target);
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0755);
	snprintf(p, sizeof(p), "%s/sticky", target);
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0755);
	snprintf(p, sizeof(p), "%s/ro", target);
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0644);
	ck_assert_int_eq(st.st_mtime, 1700000000);
}
END_TEST

START_TEST(rejects_long_and_deep_names)
{
	char name[1200];
	struct buf b = { 0 };
	size_t len;
	int i;

	/* GNU long name over 1024 bytes. */
	memset(name, 'a', 1100);
	name[1100] = '\0';
	tb_header(&b, "././@LongLink", 'L', 0644, strlen(name) + 1, NULL, 0);
	buf_put(&b, name, strlen(name) + 1);
	tb_pad(&b, strlen(name) + 1);
	tb_file(&b, "x", 0644, "", 0);
	tb_end(&b);
	ck_assert_int_eq(extract_raw(&b, NULL), -ENAMETOOLONG);

	/* A long name filling its 1025-byte limit without a terminating NUL. */
	memset(name, 'a', 1025);
	tb_header(&b, "././@LongLink", 'L', 0644, 1025, NULL, 0);
	buf_put(&b, name, 1025);
	tb_pad(&b, 1025);
	tb_file(&b, "x", 0644, "", 0);
	tb_end(&b);
	ck_assert_int_eq(extract_raw(&b, NULL), -EINVAL);

	/* 65 components. */
	len = 0;
	for (i = 0; i < 65; i++)
		len += sprintf(name + len, "d/");
	strcpy(name + len, "f");
	tb_header(&b, "././@LongLink", 'L', 0644, strlen(name) + 1, NULL, 0);
	buf_put(&b, name, strlen(name) + 1);
	tb_pad(&b, strlen(name) + 1);
	tb_file(&b, "x", 0644, "", 0);
	tb_end(&b);
	ck_assert_int_eq(extract_raw(&b, NULL), -ENAMETOOLONG);
	ck_assert_int_eq(count_dir(target), 0);
}
END_TEST

/* ---- round trips through tar_create ---- */

struct sink {
	struct buf b;
	size_t max_chunk, calls;
};

static int sink_out(void *arg, const void *data, size_t len)
{
	struct sink *s = arg;

	buf_put(&s->b, data, len);
	if (len > s->max_chunk)
		s->max_chunk = len;
	s->calls++;
	return 0;
}

static void write_file(const char *path, const void *data, size_t len, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, data, len), (ssize_t)len);
	ck_assert_int_eq(fchmod(fd, mode), 0);
	close(fd);
}

static char src[128], dst[128];

/* Compare a tree a against b: same files, bytes, modes, mtimes. */
static void compare_trees(const char *a, const char *b)
{
	char cmd[512];

	/* find -printf gives a canonical listing of both sides. */
	snprintf(cmd, sizeof(cmd),
		 "cd '%s' && find . -printf '%%p %%y %%m\\n' | sort >'%s/la' && "
		 "cd '%s' && find . -printf '%%p %%y %%m\\n' | sort >'%s/lb' && "
		 "cmp -s '%s/la' '%s/lb' && diff -r '%s' '%s' >/dev/null",
		 a, base, b, base, base, base, a, b);
	ck_assert_msg(system(cmd) == 0, "trees differ: %s vs %s", a, b);
}

static void make_tree(void)
{
	char p[1024], longdir[400];
	static unsigned char blob[200000];
	size_t i;

	snprintf(src, sizeof(src), "%s/src", base);
	snprintf(dst, sizeof(dst), "%s/dst", base);
	ck_assert_int_eq(mkdir(src, 0755), 0);
	ck_assert_int_eq(mkdir(dst, 0755), 0);
	snprintf(p, sizeof(p), "%s/top", src);
	ck_assert_int_eq(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/top/a.txt", src);
	write_file(p, "hello\n", 6, 0644);
	snprintf(p, sizeof(p), "%s/top/run.sh", src);
	write_file(p, "#!/bin/sh\n", 10, 0755);
	snprintf(p, sizeof(p), "%s/top/sub", src);
	ck_assert_int_eq(mkdir(p, 0750), 0);
	snprintf(p, sizeof(p), "%s/top/sub/deep", src);
	ck_assert_int_eq(mkdir(p, 0700), 0);
	for (i = 0; i < sizeof(blob); i++)
		blob[i] = (unsigned char)(i * 2654435761u >> 13);
	snprintf(p, sizeof(p), "%s/top/sub/deep/blob.bin", src);
	write_file(p, blob, sizeof(blob), 0600);
	snprintf(p, sizeof(p), "%s/top/empty", src);
	ck_assert_int_eq(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/top/zero", src);
	write_file(p, "", 0, 0640);
	/* A name past 100 bytes (prefix split) and one past 256 (long name). */
	memset(longdir, 'd', 120);
	longdir[120] = '\0';
	snprintf(p, sizeof(p), "%s/top/%s", src, longdir);
	ck_assert_int_eq(mkdir(p, 0755), 0);
	memset(longdir, 'f', 200);
	longdir[200] = '\0';
	snprintf(p + strlen(p), sizeof(p) - strlen(p), "/%s", longdir);
	write_file(p, "long", 4, 0644);
}

/* Open descriptors: extraction and creation must not leak any. */
static int count_fds(void)
{
	char p[64];
	int fd, n = 0;

	for (fd = 0; fd < 1024; fd++) {
		snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
		n += access(p, F_OK) == 0;
	}
	return n;
}

static struct sink create(const char *path, const char *name)
{
	struct sink s = { 0 };

	ck_assert_msg(tar_create(path, name, sink_out, &s) == 0, "%s", husk_lasterr());
	return s;
}

START_TEST(roundtrip_tree)
{
	char p[256], q[256];
	struct sink s;
	struct stat st;
	int fds;

	make_tree();
	/* Things that are stored as nothing. */
	snprintf(p, sizeof(p), "%s/top/link", src);
	ck_assert_int_eq(symlink("a.txt", p), 0);
	snprintf(p, sizeof(p), "%s/top/fifo", src);
	ck_assert_int_eq(mkfifo(p, 0644), 0);

	snprintf(p, sizeof(p), "%s/top", src);
	fds = count_fds();
	s = create(p, "top");
	ck_assert_uint_le(s.max_chunk, 64 * 1024);
	ck_assert_int_eq(extract_into(dst, s.b.p, s.b.len, NULL, 3000), 0);
	ck_assert_int_eq(count_fds(), fds);
	/* Again into the same place: the first entry exists, nothing leaks. */
	ck_assert_int_eq(extract_into(dst, s.b.p, s.b.len, NULL, 3000), -EEXIST);
	ck_assert_int_eq(count_fds(), fds);

	snprintf(q, sizeof(q), "%s/top/link", dst);
	ck_assert_int_ne(lstat(q, &st), 0);
	snprintf(q, sizeof(q), "%s/top/fifo", dst);
	ck_assert_int_ne(lstat(q, &st), 0);
	snprintf(p, sizeof(p), "%s/top/link", src);
	unlink(p);
	snprintf(p, sizeof(p), "%s/top/fifo", src);
	unlink(p);
	snprintf(p, sizeof(p), "%s/top", src);
	snprintf(q, sizeof(q), "%s/top", dst);
	compare_trees(p, q);

	/* mtimes come along. */
	snprintf(p, sizeof(p), "%s/top/sub/deep/blob.bin", dst);
	ck_assert_int_eq(stat(p, &st), 0);
	{
		struct stat o;

		snprintf(q, sizeof(q), "%s/top/sub/deep/blob.bin", src);
		ck_assert_int_eq(stat(q, &o), 0);
		ck_assert_int_eq(st.st_mtime, o.st_mtime);
	}
	free(s.b.p);
}
END_TEST

START_TEST(roundtrip_byte_by_byte)
{
	char p[256], q[256];
	struct sink s;

	make_tree();
	snprintf(p, sizeof(p), "%s/top", src);
	s = create(p, "top");
	ck_assert_int_eq(extract_into(dst, s.b.p, s.b.len, NULL, 1), 0);
	snprintf(q, sizeof(q), "%s/top", dst);
	compare_trees(p, q);
	free(s.b.p);
}
END_TEST

START_TEST(roundtrip_deterministic)
{
	char p[256];
	struct sink s1, s2;

	make_tree();
	snprintf(p, sizeof(p), "%s/top", src);
	s1 = create(p, "top");
	s2 = create(p, "top");
	ck_assert_uint_eq(s1.b.len, s2.b.len);
	ck_assert(memcmp(s1.b.p, s2.b.p, s1.b.len) == 0);
	free(s1.b.p);
	free(s2.b.p);
}
END_TEST

START_TEST(roundtrip_single_file)
{
	char p[256], q[256], got[16] = { 0 };
	struct sink s;
	struct stat st;
	int fd;

	snprintf(p, sizeof(p), "%s/in.txt", base);
	write_file(p, "just one", 8, 0755);
	s = create(p, "renamed.txt");
	ck_assert_int_eq(extract_into(target, s.b.p, s.b.len, NULL, 4096), 0);
	snprintf(q, sizeof(q), "%s/renamed.txt", target);
	ck_assert_int_eq(stat(q, &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0755);
	fd = open(q, O_RDONLY);
	ck_assert_int_eq(read(fd, got, sizeof(got)), 8);
	ck_assert_str_eq(got, "just one");
	close(fd);
	ck_assert_int_eq(count_dir(target), 1);
	free(s.b.p);

	/* NULL name: the source's own name. */
	rm_tree(target);
	mkdir(target, 0755);
	s = create(p, NULL);
	ck_assert_int_eq(extract_into(target, s.b.p, s.b.len, NULL, 4096), 0);
	ck_assert(exists_at("in.txt"));
	free(s.b.p);
}
END_TEST

START_TEST(roundtrip_empty_dir)
{
	char p[256], q[256];
	struct sink s;
	struct stat st;

	snprintf(p, sizeof(p), "%s/empty", base);
	ck_assert_int_eq(mkdir(p, 0750), 0);
	s = create(p, "out");
	ck_assert_int_eq(extract_into(target, s.b.p, s.b.len, NULL, 4096), 0);
	snprintf(q, sizeof(q), "%s/out", target);
	ck_assert_int_eq(stat(q, &st), 0);
	ck_assert(S_ISDIR(st.st_mode));
	ck_assert_uint_eq(st.st_mode & 07777, 0750);
	ck_assert_int_eq(count_dir(q), 0);
	free(s.b.p);
}
END_TEST

START_TEST(create_refuses_symlink_and_special)
{
	char p[256];
	struct sink s = { 0 };

	snprintf(p, sizeof(p), "%s/l", base);
	ck_assert_int_eq(symlink("/etc/passwd", p), 0);
	ck_assert_int_eq(tar_create(p, "l", sink_out, &s), -EINVAL);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "symlink"));
	ck_assert_int_lt(tar_create("/dev/null", "n", sink_out, &s), 0);
	ck_assert_int_lt(tar_create(p, "../x", sink_out, &s), 0);
	ck_assert_int_lt(tar_create("/nonexistent/husk", "x", sink_out, &s), 0);
	free(s.b.p);
}
END_TEST

static int fail_out(void *arg, const void *data, size_t len)
{
	return -ENOSPC;
}

START_TEST(create_stops_on_output_error)
{
	char p[256];

	make_tree();
	snprintf(p, sizeof(p), "%s/top", src);
	ck_assert_int_eq(tar_create(p, "top", fail_out, NULL), -ENOSPC);
}
END_TEST

START_TEST(extract_sets_owner)
{
	struct buf b = { 0 };
	struct tar_extract *x;
	struct buf z;
	struct stat st;
	char p[128];
	int dfd;

	if (!unit_need_root("tar: extraction with another owner"))
		return;	/* chown to another user needs root */
	tb_file(&b, "d/f", 0644, "x", 1);
	tb_end(&b);
	z = gz(b.p, b.len);
	dfd = open(target, O_RDONLY | O_DIRECTORY);
	x = tar_extract_new(dfd, NULL);
	tar_extract_set_owner(x, 1000, 1000);
	ck_assert_int_eq(tar_extract_feed(x, z.p, z.len), 0);
	ck_assert_int_eq(tar_extract_finish(x), 0);
	tar_extract_free(x);
	close(dfd);
	snprintf(p, sizeof(p), "%s/d/f", target);
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert_uint_eq(st.st_uid, 1000);
	snprintf(p, sizeof(p), "%s/d", target);
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert_uint_eq(st.st_gid, 1000);
	free(b.p);
	free(z.p);
}
END_TEST

Suite *tar_suite(void)
{
	Suite *s = suite_create("tar");
	TCase *h = tcase_create("hostile");
	TCase *r = tcase_create("roundtrip");

	tcase_add_checked_fixture(h, setup, teardown);
	tcase_add_checked_fixture(r, setup, teardown);
	tcase_set_timeout(h, 30);
	tcase_set_timeout(r, 30);
	tcase_add_test(h, rejects_dotdot);
	tcase_add_test(h, rejects_inner_dotdot);
	tcase_add_test(h, rejects_absolute);
	tcase_add_test(h, rejects_odd_names);
	tcase_add_test(h, rejects_symlink);
	tcase_add_test(h, rejects_symlink_then_file);
	tcase_add_test(h, rejects_file_through_existing_symlink);
	tcase_add_test(h, rejects_hardlink);
	tcase_add_test(h, rejects_special_types);
	tcase_add_test(h, rejects_chardev_and_fifo_by_name);
	tcase_add_test(h, rejects_over_max_bytes);
	tcase_add_test(h, rejects_too_many_entries);
	tcase_add_test(h, rejects_gzip_bomb);
	tcase_add_test(h, long_names_count_as_entries);
	tcase_add_test(h, rejects_over_max_inflated);
	tcase_add_test(h, only_the_requested_name);
	tcase_add_test(h, strip_exec_bits);
	tcase_add_test(h, feed_some_is_bounded);
	tcase_add_test(h, rejects_bad_checksum);
	tcase_add_test(h, rejects_truncation);
	tcase_add_test(h, rejects_trailing_garbage);
	tcase_add_test(h, rejects_duplicate);
	tcase_add_test(h, rejects_dir_over_file);
	tcase_add_test(h, strips_mode_bits);
	tcase_add_test(h, rejects_long_and_deep_names);
	tcase_add_test(r, roundtrip_tree);
	tcase_add_test(r, roundtrip_byte_by_byte);
	tcase_add_test(r, roundtrip_deterministic);
	tcase_add_test(r, roundtrip_single_file);
	tcase_add_test(r, roundtrip_empty_dir);
	tcase_add_test(r, create_refuses_symlink_and_special);
	tcase_add_test(r, create_stops_on_output_error);
	tcase_add_test(r, extract_sets_owner);
	suite_add_tcase(s, h);
	suite_add_tcase(s, r);
	return s;
}
