/*
 * Unit tests for layer: image layers built by hand (a small tar writer
 * below, independent of the module's parser) applied one after another;
 * the staging tree, the attribute table and the stats are checked, and
 * hostile layers must fail with nothing written outside the staging root.
 * And for source: a layer read from an OCI layout directory is the layer
 * whose digest was checked, whatever happens to the directory afterwards,
 * and a root directory read as another user is what that user may read.
 *
 * Every test works in its own mkdtemp directory under /tmp:
 *   base/root     the staging root the tree is applied to
 *   base/canary   an empty directory escapes would land in
 *   base/         must hold nothing but those two afterwards
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "suites.h"
#include "image/layer.h"
#include "image/source.h"
#include "lib/util.h"

/* ---- a minimal tar writer for crafting layers ---- */

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

static void buf_free(struct buf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

struct th {
	const char *name;
	char type;
	unsigned mode;
	unsigned long long uid, gid, size;
	long long mtime;
	const char *link;
	const char *prefix;
	int chk_delta;		/* corrupts the checksum */
	bool signed_sum;	/* checksum as historic tars with signed chars */
	bool b256_uid;		/* uid in GNU base-256 */
};

static void put_header(struct buf *b, const struct th *t)
{
	unsigned char h[512];
	unsigned sum = 0, i;
	int ssum = 0;

	memset(h, 0, sizeof(h));
	strncpy((char *)h, t->name, 100);
	snprintf((char *)h + 100, 8, "%07o", t->mode);
	snprintf((char *)h + 108, 8, "%07llo", t->uid);
	if (t->b256_uid) {
		memset(h + 108, 0, 8);
		h[108] = 0x80;
		for (i = 0; i < 7; i++)
			h[115 - i] = t->uid >> (8 * i);
	}
	snprintf((char *)h + 116, 8, "%07llo", t->gid);
	snprintf((char *)h + 124, 12, "%011llo", t->size);
	snprintf((char *)h + 136, 12, "%011llo", t->mtime ? t->mtime : 1700000000ll);
	h[156] = t->type;
	if (t->link)
		strncpy((char *)h + 157, t->link, 100);
	memcpy(h + 257, "ustar", 6);
	memcpy(h + 263, "00", 2);
	if (t->prefix)
		strncpy((char *)h + 345, t->prefix, 155);
	memset(h + 148, ' ', 8);
	for (i = 0; i < 512; i++) {
		sum += h[i];
		ssum += (signed char)h[i];
	}
	snprintf((char *)h + 148, 8, "%06o", (t->signed_sum ? (unsigned)ssum : sum) +
		 t->chk_delta);
	h[155] = ' ';
	buf_put(b, h, sizeof(h));
}

static void pad(struct buf *b, size_t size)
{
	if (size % 512)
		buf_put(b, NULL, 512 - size % 512);
}

static void t_file(struct buf *b, const char *name, unsigned mode, unsigned uid,
		   unsigned gid, const char *data)
{
	size_t n = strlen(data);

	put_header(b, &(struct th){ .name = name, .type = '0', .mode = mode, .uid = uid,
				    .gid = gid, .size = n });
	buf_put(b, data, n);
	pad(b, n);
}

static void t_dir(struct buf *b, const char *name, unsigned mode, unsigned uid,
		  unsigned gid)
{
	put_header(b, &(struct th){ .name = name, .type = '5', .mode = mode, .uid = uid,
				    .gid = gid });
}

static void t_link(struct buf *b, char type, const char *name, const char *target)
{
	put_header(b, &(struct th){ .name = name, .type = type, .mode = 0777,
				    .link = target });
}

/* An extended header ('x', 'L', 'K', 'g') with its payload. */
static void t_ext(struct buf *b, char type, const void *data, size_t len)
{
	put_header(b, &(struct th){ .name = "././@LongLink", .type = type, .mode = 0644,
				    .size = len });
	buf_put(b, data, len);
	pad(b, len);
}

/* Append one "LEN key=value\n" record to out. */
static void pax_rec(struct buf *out, const char *key, const char *val)
{
	size_t body = strlen(key) + strlen(val) + 3, d = 1, n;
	char tmp[32];

	while ((size_t)snprintf(tmp, sizeof(tmp), "%zu", body + d) != d)
		d++;
	n = snprintf(tmp, sizeof(tmp), "%zu ", body + d);
	buf_put(out, tmp, n);
	buf_put(out, key, strlen(key));
	buf_put(out, "=", 1);
	buf_put(out, val, strlen(val));
	buf_put(out, "\n", 1);
}

static void t_end(struct buf *b)
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

/* ---- scratch directories and the tree ---- */

static char base[64], rootdir[80], canary[80];
static int rootfd = -1;
static struct layer_tree *tree;

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
	if (flag == FTW_DP)
		chmod(path, 0700);
	return remove(path);
}

static void rm_tree(const char *path)
{
	nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void new_tree(const struct layer_limits *lim)
{
	tree = layer_tree_new(rootfd, lim);
	ck_assert_msg(tree != NULL, "layer_tree_new: %s", husk_lasterr());
}

/* A fresh empty root and tree (after a failed layer, say). */
static void fresh(const struct layer_limits *lim)
{
	layer_tree_free(tree);
	close(rootfd);
	rm_tree(rootdir);
	ck_assert_int_eq(mkdir(rootdir, 0700), 0);
	rootfd = open(rootdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(rootfd, 0);
	new_tree(lim);
}

static void setup(void)
{
	strcpy(base, "/tmp/husk-layer-test-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(base));
	snprintf(rootdir, sizeof(rootdir), "%s/root", base);
	snprintf(canary, sizeof(canary), "%s/canary", base);
	ck_assert_int_eq(mkdir(rootdir, 0700), 0);
	ck_assert_int_eq(mkdir(canary, 0755), 0);
	rootfd = open(rootdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(rootfd, 0);
	new_tree(NULL);
}

static void teardown(void)
{
	layer_tree_free(tree);
	tree = NULL;
	close(rootfd);
	rm_tree(base);
}

static int count_dir(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	ck_assert_ptr_nonnull(d);
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

/* Nothing escaped: base holds root and canary, canary is empty. */
static void assert_contained(void)
{
	ck_assert_int_eq(count_dir(base), 2);
	ck_assert_int_eq(count_dir(canary), 0);
}

static int lstat_in(const char *rel, struct stat *st)
{
	char p[512];

	snprintf(p, sizeof(p), "%s/%s", rootdir, rel);
	return lstat(p, st);
}

static bool exists_in(const char *rel)
{
	struct stat st;

	return lstat_in(rel, &st) == 0;
}

static void assert_content(const char *rel, const char *want)
{
	char p[512], got[256];
	ssize_t n;
	int fd;

	snprintf(p, sizeof(p), "%s/%s", rootdir, rel);
	fd = open(p, O_RDONLY | O_NOFOLLOW);
	ck_assert_msg(fd >= 0, "%s: %s", rel, strerror(errno));
	n = read(fd, got, sizeof(got) - 1);
	close(fd);
	ck_assert_int_ge(n, 0);
	got[n] = '\0';
	ck_assert_str_eq(got, want);
}

static int apply_bytes(const void *p, size_t len, unsigned index)
{
	int fd = memfd_create("layer", MFD_CLOEXEC), err;

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, p, len), (ssize_t)len);
	ck_assert_int_eq(lseek(fd, 0, SEEK_SET), 0);
	err = layer_apply_fd(tree, fd, index);
	close(fd);
	return err;
}

/* Apply a plain tar layer and free it. */
static int apply_raw(struct buf *b, unsigned index)
{
	int err = apply_bytes(b->p, b->len, index);

	buf_free(b);
	return err;
}

static int apply_gz(struct buf *b, unsigned index)
{
	struct buf z = gz(b->p, b->len);
	int err = apply_bytes(z.p, z.len, index);

	buf_free(&z);
	buf_free(b);
	return err;
}

static void expect_ok(int err)
{
	ck_assert_msg(err == 0, "apply failed (%d): %s", err, husk_lasterr());
}

static void expect_err(int err, const char *needle)
{
	ck_assert_msg(err < 0, "apply succeeded, wanted an error with \"%s\"", needle);
	ck_assert_msg(strstr(husk_lasterr(), needle), "message \"%s\" lacks \"%s\"",
		      husk_lasterr(), needle);
}

struct find {
	const char *path;
	struct layer_attr a;
	bool found;
};

static int find_cb(void *arg, const char *path, const struct layer_attr *a)
{
	struct find *f = arg;

	if (!strcmp(path, f->path)) {
		f->a = *a;
		f->found = true;
	}
	return 0;
}

static bool attr_of(const char *path, struct layer_attr *a)
{
	struct find f = { .path = path };

	ck_assert_int_eq(layer_tree_each(tree, find_cb, &f), 0);
	if (a)
		*a = f.a;
	return f.found;
}

static void assert_attr(const char *path, unsigned mode, unsigned uid, unsigned gid)
{
	struct layer_attr a;

	ck_assert_msg(attr_of(path, &a), "%s not in the table", path);
	ck_assert_msg(a.mode == mode, "%s: mode 0%o, wanted 0%o", path, a.mode, mode);
	ck_assert_uint_eq(a.uid, uid);
	ck_assert_uint_eq(a.gid, gid);
}

/* ---- building trees ---- */

START_TEST(files_dirs_links_and_attrs)
{
	const struct layer_stats *st;
	struct layer_attr a;
	struct stat s1, s2;
	struct buf b = { 0 };
	char path[128], target[64];
	ssize_t n;

	t_dir(&b, "etc/", 0755, 0, 0);
	t_file(&b, "etc/passwd", 0644, 0, 0, "root:x:0:0\n");
	t_dir(&b, "bin/", 0755, 0, 0);
	t_file(&b, "bin/su", 04755, 0, 0, "su");
	t_link(&b, '2', "bin/sh", "busybox");
	t_link(&b, '1', "bin/su2", "bin/su");
	t_dir(&b, "tmp/", 01777, 0, 0);
	t_file(&b, "home/u/notes", 0640, 1000, 2000, "hi");
	t_end(&b);
	expect_ok(apply_gz(&b, 1));

	assert_content("etc/passwd", "root:x:0:0\n");
	assert_attr("etc", S_IFDIR | 0755, 0, 0);
	assert_attr("etc/passwd", S_IFREG | 0644, 0, 0);
	/* setuid and sticky in the table, never on disk */
	assert_attr("bin/su", S_IFREG | 04755, 0, 0);
	ck_assert_int_eq(lstat_in("bin/su", &s1), 0);
	ck_assert_uint_eq(s1.st_mode & 07777, 0755);
	assert_attr("tmp", S_IFDIR | 01777, 0, 0);
	ck_assert_int_eq(lstat_in("tmp", &s2), 0);
	ck_assert_uint_eq(s2.st_mode & 07777, 0777);
	ck_assert_uint_eq(s2.st_uid, geteuid());
	assert_attr("home/u/notes", S_IFREG | 0640, 1000, 2000);
	ck_assert(attr_of("etc/passwd", &a));
	ck_assert_int_eq(a.mtime, 1700000000);

	snprintf(path, sizeof(path), "%s/bin/sh", rootdir);
	n = readlink(path, target, sizeof(target) - 1);
	ck_assert_int_eq(n, 7);
	target[n] = '\0';
	ck_assert_str_eq(target, "busybox");
	assert_attr("bin/sh", S_IFLNK | 0777, 0, 0);

	/* the hardlink shares the inode and the target's attributes */
	ck_assert_int_eq(lstat_in("bin/su2", &s2), 0);
	ck_assert_uint_eq(s1.st_ino, s2.st_ino);
	assert_attr("bin/su2", S_IFREG | 04755, 0, 0);

	st = layer_tree_stats(tree);
	ck_assert_uint_eq(st->entries, 8);
	ck_assert_uint_eq(st->files, 3);
	ck_assert_uint_eq(st->dirs, 3);
	ck_assert_uint_eq(st->symlinks, 1);
	ck_assert_uint_eq(st->hardlinks, 1);
	ck_assert_uint_eq(st->bytes, 11 + 2 + 2);
	assert_contained();
}
END_TEST

START_TEST(staging_modes_are_safe)
{
	struct buf b = { 0 };
	struct stat st;

	t_file(&b, "f", 0, 0, 0, "x");
	t_dir(&b, "d", 0, 0, 0);
	t_file(&b, "g", 06777, 0, 0, "x");
	t_end(&b);
	expect_ok(apply_raw(&b, 1));
	ck_assert_int_eq(lstat_in("f", &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0600);
	ck_assert_int_eq(lstat_in("d", &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0700);
	ck_assert_int_eq(lstat_in("g", &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0777);
	assert_attr("f", S_IFREG, 0, 0);
	assert_attr("d", S_IFDIR, 0, 0);
	assert_attr("g", S_IFREG | 06777, 0, 0);
}
END_TEST

START_TEST(later_layer_overwrites_file)
{
	struct buf b = { 0 };

	t_file(&b, "a", 0644, 0, 0, "one");
	t_end(&b);
	expect_ok(apply_raw(&b, 1));
	t_file(&b, "a", 0600, 5, 6, "second");
	t_end(&b);
	expect_ok(apply_raw(&b, 2));
	assert_content("a", "second");
	assert_attr("a", S_IFREG | 0600, 5, 6);
	ck_assert_uint_eq(layer_tree_stats(tree)->files, 2);
}
END_TEST

START_TEST(dir_and_file_replace_each_other)
{
	struct buf b = { 0 };
	struct stat st;

	t_file(&b, "x", 0644, 0, 0, "file");
	t_dir(&b, "d", 0755, 0, 0);
	t_file(&b, "d/f", 0644, 0, 0, "inner");
	t_dir(&b, "d/sub", 0755, 0, 0);
	t_end(&b);
	expect_ok(apply_raw(&b, 1));

	t_dir(&b, "x", 0711, 3, 3);
	t_file(&b, "x/in", 0644, 0, 0, "in");
	t_file(&b, "d", 0644, 4, 4, "now a file");
	t_end(&b);
	expect_ok(apply_raw(&b, 2));

	ck_assert_int_eq(lstat_in("x", &st), 0);
	ck_assert(S_ISDIR(st.st_mode));
	assert_content("x/in", "in");
	assert_attr("x", S_IFDIR | 0711, 3, 3);
	ck_assert_int_eq(lstat_in("d", &st), 0);
	ck_assert(S_ISREG(st.st_mode));
	assert_content("d", "now a file");
	assert_attr("d", S_IFREG | 0644, 4, 4);
	ck_assert(!attr_of("d/f", NULL));
	ck_assert(!attr_of("d/sub", NULL));
}
END_TEST

START_TEST(dir_over_dir_keeps_contents)
{
	struct buf b = { 0 };

	t_dir(&b, "d", 0755, 0, 0);
	t_file(&b, "d/f", 0644, 0, 0, "kept");
	t_end(&b);
	expect_ok(apply_raw(&b, 1));
	t_dir(&b, "d", 0700, 7, 8);
	t_end(&b);
	expect_ok(apply_raw(&b, 2));
	assert_content("d/f", "kept");
	assert_attr("d", S_IFDIR | 0700, 7, 8);
	assert_attr("d/f", S_IFREG | 0644, 0, 0);
}
END_TEST

START_TEST(whiteout_file_and_tree)
{
	struct buf b = { 0 };

	t_file(&b, "a", 0644, 0, 0, "a");
	t_dir(&b, "d", 0755, 0, 0);
	t_dir(&b, "d/e", 0755, 0, 0);
	t_file(&b, "d/e/f", 0644, 0, 0, "f");
	t_file(&b, "d/keep", 0644, 0, 0, "k");
	t_end(&b);
	expect_ok(apply_raw(&b, 1));

	t_file(&b, ".wh.a", 0644, 0, 0, "");
	t_file(&b, "d/.wh.e", 0644, 0, 0, "");
	t_file(&b, ".wh.absent", 0644, 0, 0, "");
	t_file(&b, "nodir/.wh.x", 0644, 0, 0, "");
	t_end(&b);
	expect_ok(apply_raw(&b, 2));

	ck_assert(!exists_in("a"));
	ck_assert(!exists_in("d/e"));
	ck_assert(!exists_in(".wh.a"));
	ck_assert(!exists_in("d/.wh.e"));
	ck_assert(!exists_in("nodir"));
	assert_content("d/keep", "k");
	ck_assert(!attr_of("a", NULL));
	ck_assert(!attr_of("d/e", NULL));
	ck_assert(!attr_of("d/e/f", NULL));
	ck_assert(attr_of("d", NULL));
	ck_assert_uint_eq(layer_tree_stats(tree)->whiteouts, 4);
}
END_TEST

START_TEST(whiteout_of_dot_refused)
{
	struct buf b = { 0 };

	t_dir(&b, "d", 0755, 0, 0);
	t_file(&b, "d/f", 0644, 0, 0, "f");
	t_file(&b, "d/.wh..", 0644, 0, 0, "");
	t_end(&b);
	expect_err(apply_raw(&b, 1), "names no entry");
	assert_content("d/f", "f");
}
END_TEST

START_TEST(opaque_keeps_this_layer)
{
	struct buf b = { 0 };

	t_dir(&b, "d", 0755, 0, 0);
	t_file(&b, "d/old", 0644, 0, 0, "old");
	t_dir(&b, "d/sub", 0755, 0, 0);
	t_file(&b, "d/sub/old2", 0644, 0, 0, "old2");
	t_dir(&b, "d/lowdir", 0755, 0, 0);
	t_file(&b, "d/lowdir/x", 0644, 0, 0, "x");
	t_file(&b, "other", 0644, 0, 0, "untouched");
	t_end(&b);
	expect_ok(apply_raw(&b, 1));

	/* entries before the marker stay, lower ones go */
	t_dir(&b, "d", 0750, 0, 0);
	t_file(&b, "d/new", 0644, 0, 0, "new");
	t_file(&b, "d/sub/new2", 0644, 0, 0, "new2");
	t_file(&b, "d/.wh..wh..opq", 0644, 0, 0, "");
	t_file(&b, "d/after", 0644, 0, 0, "after");
	t_file(&b, "d/.wh..wh..opq", 0644, 0, 0, "");
	t_end(&b);
	expect_ok(apply_raw(&b, 2));

	ck_assert(!exists_in("d/old"));
	ck_assert(!exists_in("d/sub/old2"));
	ck_assert(!exists_in("d/lowdir"));
	ck_assert(!exists_in("d/.wh..wh..opq"));
	assert_content("d/new", "new");
	assert_content("d/sub/new2", "new2");
	assert_content("d/after", "after");
	assert_content("other", "untouched");
	ck_assert(!attr_of("d/old", NULL));
	ck_assert(!attr_of("d/lowdir/x", NULL));
	assert_attr("d", S_IFDIR | 0750, 0, 0);
	ck_assert_uint_eq(layer_tree_stats(tree)->whiteouts, 2);

	/* a third layer's marker drops what layer 2 made */
	t_file(&b, "d/.wh..wh..opq", 0644, 0, 0, "");
	t_end(&b);
	expect_ok(apply_raw(&b, 3));
	ck_assert_int_eq(count_dir(rootdir), 2);
	ck_assert(exists_in("d"));
	{
		char p[128];

		snprintf(p, sizeof(p), "%s/d", rootdir);
		ck_assert_int_eq(count_dir(p), 0);
	}
}
END_TEST

START_TEST(root_entry_records_attrs)
{
	struct buf b = { 0 };

	t_dir(&b, "./", 0750, 10, 20);
	t_file(&b, "./a", 0644, 0, 0, "a");
	t_end(&b);
	expect_ok(apply_raw(&b, 1));
	assert_attr("", S_IFDIR | 0750, 10, 20);
	assert_content("a", "a");
	t_file(&b, ".", 0644, 0, 0, "x");
	t_end(&b);
	expect_err(apply_raw(&b, 2), "would replace the root");
}
END_TEST

/* ---- hostile names ---- */

START_TEST(dotdot_refused)
{
	struct buf b = { 0 };

	t_file(&b, "../x", 0644, 0, 0, "x");
	t_end(&b);
	expect_err(apply_raw(&b, 4), "layer 4: entry \"../x\": \"..\" component");
	assert_contained();
	ck_assert_int_eq(count_dir(rootdir), 0);

	fresh(NULL);
	t_file(&b, "a/../../x", 0644, 0, 0, "x");
	t_end(&b);
	expect_err(apply_raw(&b, 1), "\"..\"");
	assert_contained();
	ck_assert_int_eq(count_dir(rootdir), 0);

	fresh(NULL);
	t_file(&b, "a/b/..", 0644, 0, 0, "x");
	t_end(&b);
	expect_err(apply_raw(&b, 1), "\"..\"");
	assert_contained();
}
END_TEST

START_TEST(absolute_names_land_inside)
{
	struct buf b = { 0 };
	struct stat st;

	t_file(&b, "/husk-layer-test-abs/x", 0644, 0, 0, "abs");
	t_file(&b, ".//./y//z/./", 0644, 0, 0, "collapsed");
	t_end(&b);
	expect_ok(apply_raw(&b, 1));
	assert_content("husk-layer-test-abs/x", "abs");
	assert_content("y/z", "collapsed");
	ck_assert(attr_of("y/z", NULL));
	ck_assert_int_ne(lstat("/husk-layer-test-abs", &st), 0);
	assert_contained();
}
END_TEST

START_TEST(symlink_traversal_refused)
{
	struct buf b = { 0 };
	char name[200];

	/* "up" -> ".." would reach base/canary */
	t_link(&b, '2', "up", "..");
	t_file(&b, "up/canary/x", 0644, 0, 0, "escaped");
	t_end(&b);
	expect_err(apply_raw(&b, 2), "layer 2: up/canary/x goes through a symlink (up)");
	assert_contained();

	/* "slash" -> "/" then the canary's absolute path below it */
	fresh(NULL);
	snprintf(name, sizeof(name), "slash%s/x", canary);
	t_link(&b, '2', "slash", "/");
	t_end(&b);
	expect_ok(apply_raw(&b, 1));
	t_ext(&b, 'x', NULL, 0);	/* an empty PAX header changes nothing */
	t_file(&b, name, 0644, 0, 0, "escaped");
	t_end(&b);
	expect_err(apply_raw(&b, 2), "goes through a symlink (slash)");
	assert_contained();

	/* a symlink deeper down, made by an earlier layer */
	fresh(NULL);
	t_dir(&b, "a", 0755, 0, 0);
	t_link(&b, '2', "a/l", "../..");
	t_end(&b);
	expect_ok(apply_raw(&b, 1));
	t_dir(&b, "a/l/canary/d", 0755, 0, 0);
	t_end(&b);
	expect_err(apply_raw(&b, 2), "a/l/canary/d goes through a symlink (a/l)");
	assert_contained();

	/* a whiteout through a symlink must not remove outside either */
	fresh(NULL);
	ck_assert_int_eq(mkdir("/tmp/husk-layer-test-victim", 0700) == 0 || errno == EEXIST, 1);
	t_link(&b, '2', "t", "/tmp");
	t_file(&b, "t/.wh.husk-layer-test-victim", 0644, 0, 0, "");
	t_end(&b);
	expect_err(apply_raw(&b, 1), "goes through a symlink (t)");
	{
		struct stat st;

		ck_assert_int_eq(stat("/tmp/husk-layer-test-victim", &st), 0);
		rmdir("/tmp/husk-layer-test-victim");
	}
	assert_contained();
}
END_TEST

START_TEST(file_parent_refused)
{
	struct buf b = { 0 };

	t_file(&b, "f", 0644, 0, 0, "x");
	t_file(&b, "f/g", 0644, 0, 0, "y");
	t_end(&b);
	expect_err(apply_raw(&b, 1), "f/g goes through a non-directory (f)");
}
END_TEST

START_TEST(hardlink_refusals)
{
	struct buf b = { 0 };

	t_link(&b, '1', "h", "missing");
	t_end(&b);
	expect_err(apply_raw(&b, 1), "hardlink h to missing, which does not exist");

	fresh(NULL);
	t_dir(&b, "d", 0755, 0, 0);
	t_link(&b, '1', "h", "d");
	t_end(&b);
	expect_err(apply_raw(&b, 1), "which is a directory");

	fresh(NULL);
	t_link(&b, '2', "s", "/etc/passwd");
	t_link(&b, '1', "h", "s");
	t_end(&b);
	expect_err(apply_raw(&b, 1), "which is a symlink");
	ck_assert(!exists_in("h"));

	fresh(NULL);
	t_link(&b, '1', "h", "../canary/x");
	t_end(&b);
	expect_err(apply_raw(&b, 1), "\"..\" component");

	/* through a symlink to a real file outside */
	fresh(NULL);
	t_link(&b, '2', "etc", "/etc");
	t_link(&b, '1', "h", "etc/passwd");
	t_end(&b);
	expect_err(apply_raw(&b, 1), "goes through a symlink (etc)");
	ck_assert(!exists_in("h"));
	assert_contained();
}
END_TEST

START_TEST(devices_skipped)
{
	const struct layer_stats *st;
	struct buf b = { 0 };

	t_file(&b, "dev/null", 0644, 0, 0, "was a file");
	t_end(&b);
	expect_ok(apply_raw(&b, 1));
	put_header(&b, &(struct th){ .name = "dev/null", .type = '3', .mode = 0666 });
	put_header(&b, &(struct th){ .name = "dev/sda", .type = '4', .mode = 0660 });
	put_header(&b, &(struct th){ .name = "run/fifo", .type = '6', .mode = 0600 });
	t_end(&b);
	expect_ok(apply_raw(&b, 2));
	st = layer_tree_stats(tree);
	ck_assert_uint_eq(st->devices_skipped, 3);
	ck_assert(!exists_in("dev/null"));
	ck_assert(!exists_in("dev/sda"));
	ck_assert(!exists_in("run"));
	ck_assert(!attr_of("dev/null", NULL));
}
END_TEST

START_TEST(unknown_type_refused)
{
	struct buf b = { 0 };

	put_header(&b, &(struct th){ .name = "sparse", .type = 'S', .mode = 0644 });
	t_end(&b);
	expect_err(apply_raw(&b, 1), "unsupported entry type 'S'");

	fresh(NULL);
	put_header(&b, &(struct th){ .name = "odd", .type = 1, .mode = 0644 });
	t_end(&b);
	expect_err(apply_raw(&b, 1), "type 0x01");
}
END_TEST

START_TEST(name_limits)
{
	struct buf b = { 0 }, pax = { 0 };
	char *deep = malloc(5000);
	size_t i, o = 0;

	ck_assert_ptr_nonnull(deep);
	/* 257 components */
	for (i = 0; i < 257; i++)
		o += sprintf(deep + o, "%sd", i ? "/" : "");
	pax_rec(&pax, "path", deep);
	t_ext(&b, 'x', pax.p, pax.len);
	t_file(&b, "placeholder", 0644, 0, 0, "x");
	t_end(&b);
	expect_err(apply_raw(&b, 1), "more than 256 components");
	buf_free(&pax);

	/* 4097 bytes */
	fresh(NULL);
	memset(deep, 'a', 4097);
	for (i = 100; i < 4097; i += 101)
		deep[i] = '/';
	deep[4097] = '\0';
	t_ext(&b, 'L', deep, 4098);
	t_file(&b, "placeholder", 0644, 0, 0, "x");
	t_end(&b);
	expect_err(apply_raw(&b, 1), "of 4097 bytes");

	/* a NUL inside a GNU long name */
	fresh(NULL);
	t_ext(&b, 'L', "ab\0cd", 6);
	t_file(&b, "placeholder", 0644, 0, 0, "x");
	t_end(&b);
	expect_err(apply_raw(&b, 1), "NUL byte inside");

	/* exactly 256 components is fine */
	fresh(NULL);
	for (i = 0, o = 0; i < 256; i++)
		o += sprintf(deep + o, "%sd", i ? "/" : "");
	pax_rec(&pax, "path", deep);
	t_ext(&b, 'x', pax.p, pax.len);
	t_file(&b, "placeholder", 0644, 0, 0, "deep");
	t_end(&b);
	expect_ok(apply_raw(&b, 1));
	ck_assert(attr_of(deep, NULL));
	buf_free(&pax);
	free(deep);
}
END_TEST

/* ---- extended headers ---- */

START_TEST(pax_overrides)
{
	struct buf b = { 0 }, pax = { 0 };
	struct layer_attr a;
	char longpath[300];

	memset(longpath, 'p', sizeof(longpath));
	memcpy(longpath + 150, "/", 1);
	longpath[299] = '\0';
	pax_rec(&pax, "path", longpath);
	pax_rec(&pax, "size", "5");
	pax_rec(&pax, "uid", "4000000000");
	pax_rec(&pax, "gid", "77");
	pax_rec(&pax, "mtime", "1234567890.123456789");
	pax_rec(&pax, "SCHILY.xattr.security.capability", "x");
	pax_rec(&pax, "SCHILY.xattr.user.a", "y");
	pax_rec(&pax, "comment", "ignored");
	t_ext(&b, 'x', pax.p, pax.len);
	/* the ustar header says name "short" and size 0; PAX wins */
	put_header(&b, &(struct th){ .name = "short", .type = '0', .mode = 0644 });
	buf_put(&b, "hello", 5);
	pad(&b, 5);
	buf_free(&pax);
	pax_rec(&pax, "linkpath", "/a/very/long/target");
	t_ext(&b, 'x', pax.p, pax.len);
	t_link(&b, '2', "sym", "short-target");
	t_ext(&b, 'g', "9 a=bcde\n", 9);
	t_file(&b, "after", 0644, 0, 0, "after");
	t_end(&b);
	buf_free(&pax);
	expect_ok(apply_gz(&b, 1));

	assert_content(longpath, "hello");
	ck_assert(!exists_in("short"));
	ck_assert(attr_of(longpath, &a));
	ck_assert_uint_eq(a.uid, 4000000000u);
	ck_assert_uint_eq(a.gid, 77);
	ck_assert_int_eq(a.mtime, 1234567890);
	{
		char p[400], t[64];
		ssize_t n;

		snprintf(p, sizeof(p), "%s/sym", rootdir);
		n = readlink(p, t, sizeof(t) - 1);
		ck_assert_int_gt(n, 0);
		t[n] = '\0';
		ck_assert_str_eq(t, "/a/very/long/target");
	}
	assert_content("after", "after");
	ck_assert_uint_eq(layer_tree_stats(tree)->xattrs_ignored, 2);
	ck_assert_uint_eq(layer_tree_stats(tree)->entries, 6);
}
END_TEST

START_TEST(pax_malformed_refused)
{
	struct buf b = { 0 };

	t_ext(&b, 'x', "30 path=x\n", 10);
	t_file(&b, "f", 0644, 0, 0, "x");
	t_end(&b);
	expect_err(apply_raw(&b, 1), "malformed PAX");

	fresh(NULL);
	t_ext(&b, 'x', "11 size=-1\n", 11);
	t_file(&b, "f", 0644, 0, 0, "x");
	t_end(&b);
	expect_err(apply_raw(&b, 1), "bad PAX size");

	fresh(NULL);
	t_ext(&b, 'x', "10 path=a\n", 10);
	t_end(&b);
	expect_err(apply_raw(&b, 1), "not followed by an entry");

	/* payloads are capped */
	fresh(NULL);
	put_header(&b, &(struct th){ .name = "x", .type = 'x', .size = 1 << 20 });
	t_end(&b);
	expect_err(apply_raw(&b, 1), "limit 65536");
}
END_TEST

START_TEST(gnu_long_name_and_link)
{
	struct buf b = { 0 };
	char name[400], link[300], p[500], t[300];
	ssize_t n;

	memset(name, 'n', sizeof(name));
	memcpy(name, "dir/", 4);
	name[200] = '/';
	name[399] = '\0';
	memset(link, 'l', sizeof(link));
	link[299] = '\0';
	t_ext(&b, 'L', name, strlen(name) + 1);
	t_file(&b, "truncated-name", 0644, 0, 0, "long");
	t_ext(&b, 'L', "lnk", 4);
	t_ext(&b, 'K', link, strlen(link) + 1);
	t_link(&b, '2', "ignored", "ignored");
	t_end(&b);
	expect_ok(apply_raw(&b, 1));
	assert_content(name, "long");
	snprintf(p, sizeof(p), "%s/lnk", rootdir);
	n = readlink(p, t, sizeof(t) - 1);
	ck_assert_int_eq(n, 299);
	t[n] = '\0';
	ck_assert_str_eq(t, link);
	ck_assert(!exists_in("truncated-name"));
	ck_assert_uint_eq(layer_tree_stats(tree)->entries, 5);
}
END_TEST

START_TEST(ustar_prefix_and_numbers)
{
	struct buf b = { 0 };
	struct layer_attr a;

	put_header(&b, &(struct th){ .name = "file", .prefix = "usr/share/doc", .type = '0',
				     .mode = 0644, .uid = 3000000, .b256_uid = true });
	/* a name with a high byte, checksummed with signed chars */
	put_header(&b, &(struct th){ .name = "caf\xe9", .type = '0', .mode = 0644,
				     .signed_sum = true });
	put_header(&b, &(struct th){ .name = "old-dir/", .type = '\0', .mode = 0755 });
	put_header(&b, &(struct th){ .name = "contig", .type = '7', .mode = 0644 });
	t_end(&b);
	expect_ok(apply_raw(&b, 1));
	ck_assert(attr_of("usr/share/doc/file", &a));
	ck_assert_uint_eq(a.uid, 3000000);
	ck_assert(exists_in("caf\xe9"));
	assert_attr("old-dir", S_IFDIR | 0755, 0, 0);
	assert_attr("contig", S_IFREG | 0644, 0, 0);
}
END_TEST

/* ---- limits ---- */

START_TEST(entries_limit)
{
	struct layer_limits lim = { .max_entries = 5 };
	struct buf b = { 0 };
	int i;
	char n[16];

	fresh(&lim);
	for (i = 0; i < 5; i++) {
		snprintf(n, sizeof(n), "f%d", i);
		t_file(&b, n, 0644, 0, 0, "x");
	}
	t_end(&b);
	expect_ok(apply_raw(&b, 1));
	t_file(&b, "f5", 0644, 0, 0, "x");
	t_end(&b);
	expect_err(apply_raw(&b, 2), "layer 2: more than 5 entries");
	ck_assert(!exists_in("f5"));

	/* extension headers count too */
	fresh(&lim);
	for (i = 0; i < 6; i++)
		t_ext(&b, 'g', "9 a=bcde\n", 9);
	t_end(&b);
	expect_err(apply_raw(&b, 1), "more than 5 entries");

	/* and so do directories made as parents */
	fresh(&lim);
	t_file(&b, "a/b/c/d/e/f", 0644, 0, 0, "x");
	t_end(&b);
	expect_err(apply_raw(&b, 1), "more than 5 entries");
}
END_TEST

START_TEST(bytes_limit)
{
	struct layer_limits lim = { .max_bytes = 10 };
	struct buf b = { 0 };

	fresh(&lim);
	t_file(&b, "a", 0644, 0, 0, "123456");
	t_end(&b);
	expect_ok(apply_raw(&b, 1));
	t_file(&b, "b", 0644, 0, 0, "12345");
	t_end(&b);
	expect_err(apply_raw(&b, 2), "layer 2: b: over the limit of 10 bytes");
	ck_assert(!exists_in("b"));
	ck_assert_uint_eq(layer_tree_stats(tree)->bytes, 6);
}
END_TEST

START_TEST(gzip_bomb_refused)
{
	struct layer_limits lim = { .max_ratio = 100 };
	static unsigned char zero[65536];
	struct buf b = { 0 }, z = { 0 };
	z_stream zs = { 0 };
	unsigned long long size = 80ull << 20, left;
	int flush;

	fresh(&lim);
	t_file(&b, "small", 0644, 0, 0, "x");
	put_header(&b, &(struct th){ .name = "bomb", .type = '0', .mode = 0644, .size = size });
	ck_assert_int_eq(deflateInit2(&zs, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY),
			 Z_OK);
	z.cap = 1 << 20;
	z.p = malloc(z.cap);
	ck_assert_ptr_nonnull(z.p);
	zs.next_out = z.p;
	zs.avail_out = z.cap;
	zs.next_in = b.p;
	zs.avail_in = b.len;
	ck_assert_int_eq(deflate(&zs, Z_NO_FLUSH), Z_OK);
	for (left = size; left; left -= zs.avail_in ? 0 : sizeof(zero)) {
		flush = left <= sizeof(zero) ? Z_FINISH : Z_NO_FLUSH;
		zs.next_in = zero;
		zs.avail_in = sizeof(zero);
		ck_assert_int_ge(deflate(&zs, flush), Z_OK);
		ck_assert_uint_eq(zs.avail_in, 0);
		if (flush == Z_FINISH)
			break;
	}
	z.len = z.cap - zs.avail_out;
	deflateEnd(&zs);
	buf_free(&b);
	expect_err(apply_bytes(z.p, z.len, 3), "layer 3: gzip ratio over 100:1");
	buf_free(&z);
}
END_TEST

/* ---- framing ---- */

static void sample(struct buf *b)
{
	t_dir(b, "d", 0755, 0, 0);
	t_file(b, "d/one", 0644, 0, 0, "one");
	t_file(b, "d/two", 0644, 0, 0, "two");
	t_end(b);
}

START_TEST(gzip_plain_and_multimember)
{
	struct buf b = { 0 }, z1, z2, both = { 0 };

	sample(&b);
	expect_ok(apply_raw(&b, 1));
	assert_content("d/two", "two");

	fresh(NULL);
	sample(&b);
	expect_ok(apply_gz(&b, 1));
	assert_content("d/two", "two");

	/* two members, split inside a file's data, then zero padding */
	fresh(NULL);
	sample(&b);
	z1 = gz(b.p, 1100);
	z2 = gz(b.p + 1100, b.len - 1100);
	buf_put(&both, z1.p, z1.len);
	buf_put(&both, z2.p, z2.len);
	buf_put(&both, NULL, 100);
	expect_ok(apply_bytes(both.p, both.len, 1));
	assert_content("d/one", "one");
	assert_content("d/two", "two");
	buf_free(&z1);
	buf_free(&z2);

	/* garbage after the members */
	fresh(NULL);
	both.len -= 100;
	buf_put(&both, "junk", 4);
	expect_err(apply_bytes(both.p, both.len, 1), "data after the gzip stream");
	buf_free(&both);
	buf_free(&b);

	/* an empty stream is an empty layer, a tar without end blocks is fine */
	fresh(NULL);
	expect_ok(apply_bytes("", 0, 1));
	t_file(&b, "noend", 0644, 0, 0, "x");
	expect_ok(apply_raw(&b, 2));
	assert_content("noend", "x");
}
END_TEST

START_TEST(other_compressions_refused)
{
	static const unsigned char zstd[] = { 0x28, 0xb5, 0x2f, 0xfd, 0x04, 0x58, 0, 0 };

	expect_err(apply_bytes(zstd, sizeof(zstd), 3),
		   "layer 3: zstd-compressed layers are not supported");
	fresh(NULL);
	expect_err(apply_bytes("\xfd" "7zXZ\0\0\0\0\0\0\0\0", 12, 1), "xz-compressed");
	fresh(NULL);
	expect_err(apply_bytes("BZh91AY&SY", 10, 1), "bzip2-compressed");
	/* a tar whose first name merely starts like bzip2 is a tar */
	fresh(NULL);
	{
		struct buf b = { 0 };

		t_file(&b, "BZh9-notes", 0644, 0, 0, "x");
		t_end(&b);
		expect_ok(apply_raw(&b, 1));
		assert_content("BZh9-notes", "x");
	}
	fresh(NULL);
	{
		char junk[1024];

		memset(junk, 'j', sizeof(junk));
		expect_err(apply_bytes(junk, sizeof(junk), 5), "layer 5: not a tar archive");
	}
}
END_TEST

START_TEST(truncated_streams)
{
	struct buf b = { 0 }, z;

	/* inside a file's data */
	sample(&b);
	expect_err(apply_bytes(b.p, 512 + 512 + 2, 1), "truncated stream in d/one");
	/* inside a header */
	fresh(NULL);
	expect_err(apply_bytes(b.p, 512 + 100, 1), "truncated stream in a header");
	/* the gzip stream itself */
	fresh(NULL);
	z = gz(b.p, b.len);
	expect_err(apply_bytes(z.p, z.len - 6, 1), "truncated gzip stream");
	buf_free(&z);
	/* inside a PAX payload */
	fresh(NULL);
	buf_free(&b);
	t_ext(&b, 'x', "10 path=a\n", 10);
	expect_err(apply_bytes(b.p, 512 + 5, 1), "truncated stream in an extended header");
	buf_free(&b);
}
END_TEST

START_TEST(bad_checksum_refused)
{
	struct buf b = { 0 };

	t_file(&b, "good", 0644, 0, 0, "x");
	put_header(&b, &(struct th){ .name = "bad", .type = '0', .mode = 0644, .chk_delta = 1 });
	t_end(&b);
	expect_err(apply_raw(&b, 1), "layer 1: bad header checksum after 1 headers");
	ck_assert(!exists_in("bad"));
}
END_TEST

START_TEST(data_after_end_refused)
{
	struct buf b = { 0 };

	t_file(&b, "f", 0644, 0, 0, "x");
	t_end(&b);
	buf_put(&b, NULL, 9000);	/* record padding is fine */
	expect_ok(apply_raw(&b, 1));
	fresh(NULL);
	t_file(&b, "f", 0644, 0, 0, "x");
	t_end(&b);
	buf_put(&b, "x", 1);
	expect_err(apply_raw(&b, 1), "data after the end of the archive");
}
END_TEST

START_TEST(failure_is_sticky)
{
	struct buf b = { 0 };

	t_file(&b, "../x", 0644, 0, 0, "x");
	t_end(&b);
	ck_assert_int_lt(apply_raw(&b, 1), 0);
	t_file(&b, "fine", 0644, 0, 0, "x");
	t_end(&b);
	expect_err(apply_raw(&b, 2), "layer 2: not applied: an earlier layer failed");
	ck_assert(!exists_in("fine"));
}
END_TEST

START_TEST(new_refuses_nonempty_root)
{
	struct layer_tree *t2;
	int fd;

	fd = openat(rootfd, "x", O_WRONLY | O_CREAT | O_EXCL, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);
	t2 = layer_tree_new(rootfd, NULL);
	ck_assert_ptr_null(t2);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "not an empty directory"));
}
END_TEST

START_TEST(reads_from_a_pipe)
{
	struct buf b = { 0 }, z;
	int p[2], err, status;
	size_t off;
	pid_t pid;

	sample(&b);
	z = gz(b.p, b.len);
	ck_assert_int_eq(pipe(p), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (!pid) {
		/* dribble: a few bytes per write */
		close(p[0]);
		for (off = 0; off < z.len; off += 3)
			if (write(p[1], z.p + off, z.len - off < 3 ? z.len - off : 3) < 0)
				_exit(1);
		_exit(0);
	}
	close(p[1]);
	err = layer_apply_fd(tree, p[0], 1);
	close(p[0]);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	expect_ok(err);
	assert_content("d/one", "one");
	buf_free(&b);
	buf_free(&z);
}
END_TEST

static int open_fds(void)
{
	return count_dir("/proc/self/fd");
}

START_TEST(no_fd_leaks)
{
	struct buf b = { 0 };
	int before;

	layer_tree_free(tree);
	before = open_fds();
	new_tree(NULL);
	t_dir(&b, "a/b/c", 0755, 0, 0);
	t_file(&b, "a/b/c/f", 0644, 0, 0, "f");
	t_link(&b, '1', "a/h", "a/b/c/f");
	t_file(&b, "x/y/z", 0644, 0, 0, "z");
	t_end(&b);
	expect_ok(apply_gz(&b, 1));
	t_file(&b, "a/b/.wh..wh..opq", 0644, 0, 0, "");
	t_file(&b, "x/.wh.y", 0644, 0, 0, "");
	t_link(&b, '1', "x/h", "a/missing");
	t_end(&b);
	ck_assert_int_lt(apply_raw(&b, 2), 0);
	layer_tree_free(tree);
	tree = NULL;
	ck_assert_int_eq(open_fds(), before);
}
END_TEST

/* ---- the table ---- */

struct collect {
	char out[1024];
	int stop_after;
	int seen;
	struct layer_attr b;
};

static int collect_cb(void *arg, const char *path, const struct layer_attr *a)
{
	struct collect *c = arg;

	strcat(c->out, path);
	strcat(c->out, ",");
	if (!strcmp(path, "b"))
		c->b = *a;
	if (++c->seen == c->stop_after)
		return 42;
	return 0;
}

START_TEST(each_order_and_defaults)
{
	struct collect c = { .stop_after = -1 };
	struct buf b = { 0 };
	struct layer_attr root;

	t_file(&b, "b-c", 0644, 0, 0, "x");
	t_file(&b, "b/c", 0644, 0, 0, "x");
	t_file(&b, "a", 0644, 0, 0, "x");
	t_file(&b, "b/a/x", 0644, 1, 1, "x");
	t_dir(&b, "B", 0700, 0, 0);
	t_end(&b);
	expect_ok(apply_raw(&b, 1));
	ck_assert_int_eq(layer_tree_each(tree, collect_cb, &c), 0);
	ck_assert_str_eq(c.out, ",B,a,b,b/a,b/a/x,b/c,b-c,");
	/* parents made implicitly */
	ck_assert_uint_eq(c.b.mode, S_IFDIR | 0755);
	ck_assert_uint_eq(c.b.uid, 0);
	ck_assert_uint_eq(c.b.gid, 0);
	ck_assert_int_eq(c.b.mtime, 0);
	ck_assert(attr_of("", &root));
	ck_assert_uint_eq(root.mode, S_IFDIR | 0755);

	memset(&c, 0, sizeof(c));
	c.stop_after = 3;
	ck_assert_int_eq(layer_tree_each(tree, collect_cb, &c), 42);
	ck_assert_str_eq(c.out, ",B,a,");
}
END_TEST

START_TEST(many_entries)
{
	struct buf b = { 0 };
	char name[64];
	int i, n = 20000;

	/* one big directory, then a whiteout of it: stays fast */
	for (i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "big/%05d", i);
		put_header(&b, &(struct th){ .name = name, .type = '0', .mode = 0644 });
	}
	t_end(&b);
	expect_ok(apply_gz(&b, 1));
	ck_assert_uint_eq(layer_tree_stats(tree)->files, n);
	ck_assert(attr_of("big/19999", NULL));
	for (i = 0; i < n; i += 2) {
		snprintf(name, sizeof(name), "big/.wh.%05d", i);
		put_header(&b, &(struct th){ .name = name, .type = '0', .mode = 0644 });
	}
	t_file(&b, "big/.wh..wh..opq", 0644, 0, 0, "");
	t_file(&b, "big/new", 0644, 0, 0, "n");
	t_end(&b);
	expect_ok(apply_gz(&b, 2));
	ck_assert(!attr_of("big/00001", NULL));
	ck_assert(attr_of("big/new", NULL));
	{
		char p[128];

		snprintf(p, sizeof(p), "%s/big", rootdir);
		ck_assert_int_eq(count_dir(p), 1);
	}
}
END_TEST

/* ---- source: an OCI layout directory ---- */

/* A file of the layout (base/layout/name) with these bytes. */
static void layout_put(const char *name, const void *p, size_t len)
{
	char path[512];
	int fd;

	snprintf(path, sizeof(path), "%s/layout/%s", base, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, p, len), (ssize_t)len);
	close(fd);
}

/* A blob of the layout, named by its digest (returned). */
static void layout_blob(const void *p, size_t len, char digest[IMAGE_DIGEST_LEN])
{
	char name[128];

	image_sha256(p, len, digest);
	snprintf(name, sizeof(name), "blobs/sha256/%s", digest + 7);
	layout_put(name, p, len);
}

/* An OCI layout of one plain layer (lay); lay's digest in ld. */
static void make_layout(const struct buf *lay, char ld[IMAGE_DIGEST_LEN])
{
	static const char cfg[] = "{\"architecture\":\"amd64\",\"config\":{}}";
	char cd[IMAGE_DIGEST_LEN], md[IMAGE_DIGEST_LEN], doc[1024], dir[128];
	int n;

	snprintf(dir, sizeof(dir), "%s/layout/blobs/sha256", base);
	ck_assert_int_eq(mkdir_p(dir, 0755), 0);
	layout_put("oci-layout", "{\"imageLayoutVersion\":\"1.0.0\"}", 30);
	layout_blob(lay->p, lay->len, ld);
	layout_blob(cfg, strlen(cfg), cd);
	n = snprintf(doc, sizeof(doc), "{\"schemaVersion\":2,\"mediaType\":"
		     "\"application/vnd.oci.image.manifest.v1+json\",\"config\":{\"mediaType\":"
		     "\"application/vnd.oci.image.config.v1+json\",\"digest\":\"%s\",\"size\":%zu},"
		     "\"layers\":[{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar\","
		     "\"digest\":\"%s\",\"size\":%zu}]}", cd, strlen(cfg), ld, lay->len);
	layout_blob(doc, n, md);
	n = snprintf(doc, sizeof(doc), "{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":"
		     "\"application/vnd.oci.image.manifest.v1+json\",\"digest\":\"%s\","
		     "\"size\":%d}]}", md, n);
	layout_put("index.json", doc, n);
}

/*
 * Whoever can write a layout directory rewrites a layer in place (same
 * file, same length, other bytes) after it was hashed: the source still
 * hands on the checked bytes, and they are what is applied.
 */
START_TEST(layout_layer_rewritten_after_its_hash)
{
	struct buf good = { 0 }, evil = { 0 };
	char ld[IMAGE_DIGEST_LEN], got[IMAGE_DIGEST_LEN], path[512], layout[128];
	struct image_source src;
	int fd;

	t_file(&good, "hello", 0644, 0, 0, "checked");
	t_end(&good);
	t_file(&evil, "hello", 0644, 0, 0, "swapped");
	t_end(&evil);
	ck_assert_uint_eq(good.len, evil.len);
	make_layout(&good, ld);
	snprintf(layout, sizeof(layout), "%s/layout", base);
	ck_assert_msg(image_source_open(layout, NULL, base, &src) == 0, "open: %s", husk_lasterr());
	ck_assert_uint_eq(src.n_layers, 1);
	ck_assert_str_eq(src.layers[0].digest, ld);

	snprintf(path, sizeof(path), "%s/blobs/sha256/%s", layout, ld + 7);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, evil.p, evil.len, 0), (ssize_t)evil.len);
	close(fd);

	ck_assert_int_eq(image_sha256_fd(src.layers[0].fd, got), 0);
	ck_assert_str_eq(got, ld);
	expect_ok(layer_apply_fd(tree, src.layers[0].fd, 1));
	assert_content("hello", "checked");
	image_source_close(&src);
	buf_free(&good);
	buf_free(&evil);
}
END_TEST

/*
 * A root directory read as another user (a bundle of that user's): what
 * the user may read is the layer; a file only root may read stops it.
 */
START_TEST(tree_read_as_its_owner)
{
	const struct image_reader nobody = { .uid = 65534, .gid = 65534 };
	char tree_dir[128], path[256];
	struct image_source src;
	int fd;

	if (!unit_need_root("tree_read_as_its_owner"))
		return;
	ck_assert_int_eq(chmod(base, 0755), 0);
	snprintf(tree_dir, sizeof(tree_dir), "%s/tree", base);
	ck_assert_int_eq(mkdir(tree_dir, 0755), 0);
	snprintf(path, sizeof(path), "%s/hello", tree_dir);
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	ck_assert_int_eq(write(fd, "hi\n", 3), 3);
	close(fd);
	ck_assert_msg(image_source_open_tree(tree_dir, base, &nobody, &src) == 0, "%s",
		      husk_lasterr());
	ck_assert_str_eq(src.kind, "directory");
	ck_assert_uint_eq(src.n_layers, 1);
	expect_ok(layer_apply_fd(tree, src.layers[0].fd, 1));
	assert_content("hello", "hi\n");
	image_source_close(&src);

	snprintf(path, sizeof(path), "%s/secret", tree_dir);
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	close(fd);
	ck_assert_int_ne(image_source_open_tree(tree_dir, base, &nobody, &src), 0);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "./secret: Cannot open: Permission denied"));
	/* As we are, the same tree is read whole. */
	ck_assert_int_eq(image_source_open_tree(tree_dir, base, NULL, &src), 0);
	image_source_close(&src);
}
END_TEST

Suite *layer_suite(void)
{
	Suite *s = suite_create("layer");
	TCase *tr = tcase_create("tree");
	TCase *h = tcase_create("hostile");
	TCase *f = tcase_create("format");
	TCase *src = tcase_create("source");

	tcase_add_checked_fixture(tr, setup, teardown);
	tcase_add_checked_fixture(h, setup, teardown);
	tcase_add_checked_fixture(f, setup, teardown);
	tcase_add_checked_fixture(src, setup, teardown);
	tcase_set_timeout(tr, 60);
	tcase_set_timeout(h, 60);
	tcase_set_timeout(f, 60);

	tcase_add_test(tr, files_dirs_links_and_attrs);
	tcase_add_test(tr, staging_modes_are_safe);
	tcase_add_test(tr, later_layer_overwrites_file);
	tcase_add_test(tr, dir_and_file_replace_each_other);
	tcase_add_test(tr, dir_over_dir_keeps_contents);
	tcase_add_test(tr, whiteout_file_and_tree);
	tcase_add_test(tr, opaque_keeps_this_layer);
	tcase_add_test(tr, root_entry_records_attrs);
	tcase_add_test(tr, each_order_and_defaults);
	tcase_add_test(tr, many_entries);
	tcase_add_test(tr, no_fd_leaks);

	tcase_add_test(h, dotdot_refused);
	tcase_add_test(h, absolute_names_land_inside);
	tcase_add_test(h, symlink_traversal_refused);
	tcase_add_test(h, file_parent_refused);
	tcase_add_test(h, hardlink_refusals);
	tcase_add_test(h, whiteout_of_dot_refused);
	tcase_add_test(h, devices_skipped);
	tcase_add_test(h, unknown_type_refused);
	tcase_add_test(h, name_limits);
	tcase_add_test(h, entries_limit);
	tcase_add_test(h, bytes_limit);
	tcase_add_test(h, gzip_bomb_refused);
	tcase_add_test(h, failure_is_sticky);
	tcase_add_test(h, new_refuses_nonempty_root);

	tcase_add_test(f, pax_overrides);
	tcase_add_test(f, pax_malformed_refused);
	tcase_add_test(f, gnu_long_name_and_link);
	tcase_add_test(f, ustar_prefix_and_numbers);
	tcase_add_test(f, gzip_plain_and_multimember);
	tcase_add_test(f, other_compressions_refused);
	tcase_add_test(f, truncated_streams);
	tcase_add_test(f, bad_checksum_refused);
	tcase_add_test(f, data_after_end_refused);
	tcase_add_test(f, reads_from_a_pipe);

	tcase_add_test(src, layout_layer_rewritten_after_its_hash);
	tcase_add_test(src, tree_read_as_its_owner);

	suite_add_tcase(s, tr);
	suite_add_tcase(s, h);
	suite_add_tcase(s, f);
	suite_add_tcase(s, src);
	return s;
}
