/*
 * tar: gzip'd ustar streams for files going into and out of the guest.
 *
 * The same code runs in husk (creates --put streams, extracts --get streams)
 * and in guest-init (the reverse), so each side treats what it receives as
 * hostile. The format is plain POSIX ustar; names that do not fit the
 * 100+155 byte name/prefix split use a GNU 'L' long-name entry, which GNU tar
 * and bsdtar both read. Only regular files and directories exist here:
 * creation skips symlinks and special files, extraction refuses them.
 *
 * Extraction never resolves a path string: it walks each name one component
 * at a time with openat(O_DIRECTORY | O_NOFOLLOW) from the target directory
 * fd, creating missing parents with mkdirat, and creates files with
 * O_CREAT | O_EXCL | O_NOFOLLOW. A symlink or a file where a directory is
 * expected, or anything that already exists at a file's name, is an error.
 * Directories that already exist are entered, never replaced: the targets
 * are fresh (husk's temporary directory, the guest's empty workspace), and
 * nothing in the stream can make a symlink.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "job/tar.h"
#include "lib/util.h"

#define BLOCK 512
#define CHUNK (64 * 1024)	/* gzip output handed to out(), inflate buffer */
#define NAME_MAX_LEN 1024	/* longest entry name either side accepts */
#define MAX_DEPTH 64		/* path components in one name */
#define SIZE_MAX_OCTAL 077777777777ull	/* 11 octal digits: 8 GiB - 1 */
#define END_PAD_MAX (64 * 1024)	/* zero padding allowed after the end blocks */

/* Only rwx bits survive, never group/world write or setuid/setgid/sticky;
 * the owner can always read and write (or enter) what was extracted. */
static unsigned file_mode(unsigned m)
{
	return (m & 0755) | 0600;
}

static unsigned dir_mode(unsigned m)
{
	return (m & 0755) | 0700;
}

struct ustar {
	char name[100];
	char mode[8];
	char uid[8];
	char gid[8];
	char size[12];
	char mtime[12];
	char chksum[8];
	char typeflag;
	char linkname[100];
	char magic[6];
	char version[2];
	char uname[32];
	char gname[32];
	char devmajor[8];
	char devminor[8];
	char prefix[155];
	char pad[12];
};
_Static_assert(sizeof(struct ustar) == BLOCK, "ustar header is one block");

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
 * Validate an entry name: relative, at most NAME_MAX_LEN bytes and MAX_DEPTH
 * components, no empty, "." or ".." component, components fit NAME_MAX. A
 * single trailing '/' is allowed (directories). Returns 0 or -EINVAL/
 * -ENAMETOOLONG with the reason in *why.
 */
static int check_name(const char *name, const char **why)
{
	size_t len = strlen(name), clen;
	const char *p = name, *slash;
	unsigned depth = 0;

	if (len == 0)
		return *why = "empty name", -EINVAL;
	if (len > NAME_MAX_LEN)
		return *why = "name too long", -ENAMETOOLONG;
	if (name[0] == '/')
		return *why = "absolute name", -EPERM;
	if (len > 1 && name[len - 1] == '/')
		len--;
	while (p < name + len) {
		slash = memchr(p, '/', name + len - p);
		clen = slash ? (size_t)(slash - p) : (size_t)(name + len - p);
		if (clen == 0)
			return *why = "empty path component", -EINVAL;
		if (clen == 1 && p[0] == '.')
			return *why = "\".\" component", -EINVAL;
		if (clen == 2 && p[0] == '.' && p[1] == '.')
			return *why = "\"..\" component", -EPERM;
		if (clen > 255)
			return *why = "path component too long", -ENAMETOOLONG;
		if (++depth > MAX_DEPTH)
			return *why = "too many path components", -ENAMETOOLONG;
		p += clen + 1;
	}
	return 0;
}

/* ---- creation ---- */

struct tar_writer {
	z_stream zs;
	tar_out_fn out;
	void *arg;
	unsigned char *obuf;	/* CHUNK bytes of gzip output */
	unsigned char *ibuf;	/* CHUNK bytes read from files */
	char path[NAME_MAX_LEN + 2];	/* entry name being archived */
};

/* Run deflate over buf (flush: Z_NO_FLUSH or Z_FINISH), emitting full chunks. */
static int w_deflate(struct tar_writer *w, const void *buf, size_t len, int flush)
{
	int ret, err;

	w->zs.next_in = (Bytef *)buf;
	w->zs.avail_in = len;
	for (;;) {
		ret = deflate(&w->zs, flush);
		if (ret == Z_STREAM_ERROR)
			return husk_seterr(EIO, "tar: deflate failed");
		if (w->zs.avail_out == 0 || (flush == Z_FINISH && ret == Z_STREAM_END)) {
			size_t n = CHUNK - w->zs.avail_out;

			if (n) {
				err = w->out(w->arg, w->obuf, n);
				if (err < 0)
					return err;
			}
			w->zs.next_out = w->obuf;
			w->zs.avail_out = CHUNK;
		}
		if (flush == Z_FINISH ? ret == Z_STREAM_END
				      : w->zs.avail_in == 0 && w->zs.avail_out != 0)
			return 0;
	}
}

static void octal(char *field, size_t width, uint64_t v)
{
	/* width-1 digits, zero padded, NUL terminated (what GNU tar writes). */
	snprintf(field, width, "%0*llo", (int)width - 1, (unsigned long long)v);
}

/* Store name in the header: name field, prefix/name split, or false. */
static bool put_name(struct ustar *h, const char *name)
{
	size_t len = strlen(name), i;

	if (len <= sizeof(h->name)) {
		memcpy(h->name, name, len);
		return true;
	}
	/* Split at a '/' so the prefix fits 155 and the rest fits 100. */
	for (i = len - 1; i > 0; i--) {
		if (name[i] != '/' || i > sizeof(h->prefix))
			continue;
		if (len - i - 1 == 0)
			continue;	/* a directory's trailing '/' */
		if (len - i - 1 > sizeof(h->name))
			break;
		memcpy(h->prefix, name, i);
		memcpy(h->name, name + i + 1, len - i - 1);
		return true;
	}
	return false;
}

static void set_chksum(struct ustar *h)
{
	snprintf(h->chksum, sizeof(h->chksum), "%06o", header_sum((void *)h));
	h->chksum[7] = ' ';
}

static void fill_header(struct ustar *h, const char *name, char type,
			unsigned mode, uint64_t size, int64_t mtime)
{
	memset(h, 0, sizeof(*h));
	if (name)
		put_name(h, name);
	octal(h->mode, sizeof(h->mode), mode);
	octal(h->uid, sizeof(h->uid), 0);
	octal(h->gid, sizeof(h->gid), 0);
	octal(h->size, sizeof(h->size), size);
	if (mtime < 0)
		mtime = 0;
	if ((uint64_t)mtime > SIZE_MAX_OCTAL)
		mtime = SIZE_MAX_OCTAL;
	octal(h->mtime, sizeof(h->mtime), (uint64_t)mtime);
	h->typeflag = type;
	memcpy(h->magic, "ustar", 6);
	memcpy(h->version, "00", 2);
	strcpy(h->uname, "root");
	strcpy(h->gname, "root");
	set_chksum(h);
}

static int w_pad(struct tar_writer *w, uint64_t size)
{
	static const unsigned char zero[BLOCK];
	size_t rem = size % BLOCK;

	return rem ? w_deflate(w, zero, BLOCK - rem, Z_NO_FLUSH) : 0;
}

static int w_header(struct tar_writer *w, const char *name, char type,
		    unsigned mode, uint64_t size, int64_t mtime)
{
	struct ustar h;
	size_t len = strlen(name);
	int err;

	if (size > SIZE_MAX_OCTAL)
		return husk_seterr(EFBIG, "tar: %s: file too large to archive", name);
	fill_header(&h, NULL, type, mode, size, mtime);
	if (!put_name(&h, name)) {
		/* GNU long name: an 'L' entry whose data is the name. */
		struct ustar l;

		fill_header(&l, "././@LongLink", 'L', 0644, len + 1, 0);
		err = w_deflate(w, &l, BLOCK, Z_NO_FLUSH);
		if (!err)
			err = w_deflate(w, name, len + 1, Z_NO_FLUSH);
		if (!err)
			err = w_pad(w, len + 1);
		if (err)
			return err;
		/* Like GNU tar: the truncated name, for readers without 'L'. */
		memcpy(h.name, name, sizeof(h.name));
	}
	set_chksum(&h);
	return w_deflate(w, &h, BLOCK, Z_NO_FLUSH);
}

static int w_file(struct tar_writer *w, int fd, const struct stat *st)
{
	uint64_t left = st->st_size;
	ssize_t n;
	int err;

	err = w_header(w, w->path, '0', file_mode(st->st_mode), left,
		       st->st_mtim.tv_sec);
	if (err)
		return err;
	while (left) {
		n = read(fd, w->ibuf, left < CHUNK ? left : CHUNK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return husk_seterr(errno, "tar: reading %s: %s", w->path,
					   strerror(errno));
		/* The header already promised st_size bytes. */
		if (n == 0)
			return husk_seterr(EIO, "tar: %s shrank while being archived",
					   w->path);
		err = w_deflate(w, w->ibuf, n, Z_NO_FLUSH);
		if (err)
			return err;
		left -= n;
	}
	return w_pad(w, st->st_size);
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted names in the directory dfd (without "." and ".."). */
static int list_dir(int dfd, const char *path, char ***names, size_t *count)
{
	size_t n = 0, cap = 0;
	char **v = NULL, **nv;
	struct dirent *de;
	DIR *d;
	int fd = dup(dfd);

	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return husk_seterr(errno, "tar: reading directory %s: %s", path,
				   strerror(errno));
	}
	while ((errno = 0, de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 16;
			nv = realloc(v, cap * sizeof(*v));
			if (!nv)
				goto nomem;
			v = nv;
		}
		if (!(v[n] = strdup(de->d_name)))
			goto nomem;
		n++;
	}
	closedir(d);
	/* Sorted so the same tree always makes the same stream. */
	if (n)
		qsort(v, n, sizeof(*v), name_cmp);
	*names = v;
	*count = n;
	return 0;
nomem:
	closedir(d);
	while (n)
		free(v[--n]);
	free(v);
	return husk_seterr(ENOMEM, "tar: out of memory listing %s", path);
}

static int w_entry(struct tar_writer *w, int fd, const struct stat *st,
		   unsigned depth);

/* Archive the directory open at dfd, whose entry name is w->path. */
static int w_dir(struct tar_writer *w, int dfd, const struct stat *st,
		 unsigned depth)
{
	size_t len = strlen(w->path), n = 0, i;
	char **names = NULL;
	int err;

	if (len + 1 > NAME_MAX_LEN)
		return husk_seterr(ENAMETOOLONG, "tar: %s/: path too long to archive",
				   w->path);
	w->path[len] = '/';
	w->path[len + 1] = '\0';
	err = w_header(w, w->path, '5', dir_mode(st->st_mode), 0, st->st_mtim.tv_sec);
	if (!err)
		err = list_dir(dfd, w->path, &names, &n);
	if (err)
		return err;
	for (i = 0; i < n && !err; i++) {
		struct stat cst;
		size_t clen = strlen(names[i]);
		int fd;

		if (len + 1 + clen > NAME_MAX_LEN || depth + 1 > MAX_DEPTH) {
			err = husk_seterr(ENAMETOOLONG,
					  "tar: %s%s: path too long or too deep to archive",
					  w->path, names[i]);
			break;
		}
		memcpy(w->path + len + 1, names[i], clen + 1);
		if (fstatat(dfd, names[i], &cst, AT_SYMLINK_NOFOLLOW) < 0) {
			err = husk_seterr(errno, "tar: %s: %s", w->path, strerror(errno));
			break;
		}
		/* Symlinks, devices, FIFOs, sockets: stored as nothing. */
		if (!S_ISREG(cst.st_mode) && !S_ISDIR(cst.st_mode)) {
			husk_debug("tar: skipping %s (not a file or directory)", w->path);
			continue;
		}
		/* O_NONBLOCK: should it have become a FIFO meanwhile, don't hang. */
		fd = openat(dfd, names[i], O_RDONLY | O_NOFOLLOW | O_NONBLOCK |
			    O_NOCTTY | O_CLOEXEC);
		if (fd < 0) {
			err = husk_seterr(errno, "tar: opening %s: %s", w->path,
					  strerror(errno));
			break;
		}
		err = w_entry(w, fd, &cst, depth + 1);
		close(fd);
	}
	for (i = 0; i < n; i++)
		free(names[i]);
	free(names);
	w->path[len] = '\0';
	return err;
}

/* fd was opened for w->path after lstat gave *pre; it must still match. */
static int w_entry(struct tar_writer *w, int fd, const struct stat *pre,
		   unsigned depth)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return husk_seterr(errno, "tar: %s: %s", w->path, strerror(errno));
	if (st.st_dev != pre->st_dev || st.st_ino != pre->st_ino ||
	    (st.st_mode & S_IFMT) != (pre->st_mode & S_IFMT))
		return husk_seterr(EAGAIN, "tar: %s changed while being archived",
				   w->path);
	if (S_ISDIR(st.st_mode))
		return w_dir(w, fd, &st, depth);
	return w_file(w, fd, &st);
}

int tar_create(const char *src, const char *name, tar_out_fn out, void *arg)
{
	static const unsigned char end[2 * BLOCK];
	struct tar_writer w = { .out = out, .arg = arg };
	const char *why = NULL, *base;
	char tmp[NAME_MAX_LEN + 1];
	struct stat st;
	int fd, err;

	if (!name || !*name) {
		/* Default to the last component of src. */
		size_t len = strlen(src);

		while (len > 1 && src[len - 1] == '/')
			len--;
		base = memrchr(src, '/', len);
		base = base ? base + 1 : src;
		len -= base - src;
		if (len > NAME_MAX_LEN)
			len = NAME_MAX_LEN;
		memcpy(tmp, base, len);
		tmp[len] = '\0';
		name = tmp;
	}
	err = check_name(name, &why);
	if (err)
		return husk_seterr(err, "tar: archive name \"%s\": %s", name, why);
	if (lstat(src, &st) < 0)
		return husk_seterr(errno, "tar: %s: %s", src, strerror(errno));
	if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
		return husk_seterr(EINVAL, "tar: %s is not a regular file or directory%s",
				   src, S_ISLNK(st.st_mode) ? " (a symlink: name its target)" : "");
	fd = open(src, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return husk_seterr(errno, "tar: opening %s: %s", src, strerror(errno));

	w.obuf = malloc(CHUNK);
	w.ibuf = malloc(CHUNK);
	if (!w.obuf || !w.ibuf) {
		err = husk_seterr(ENOMEM, "tar: out of memory");
		goto out_free;
	}
	/*
	 * Level 1: the stream crosses memory (vsock), so CPU time, which is
	 * scarce in a small guest, matters more than the last few percent.
	 */
	if (deflateInit2(&w.zs, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
		err = husk_seterr(ENOMEM, "tar: deflateInit2 failed");
		goto out_free;
	}
	w.zs.next_out = w.obuf;
	w.zs.avail_out = CHUNK;
	/* Strip one trailing '/' from a directory name; w_dir adds it back. */
	snprintf(w.path, sizeof(w.path), "%s", name);
	if (strlen(w.path) > 1 && w.path[strlen(w.path) - 1] == '/')
		w.path[strlen(w.path) - 1] = '\0';
	err = w_entry(&w, fd, &st, 0);
	if (!err)
		err = w_deflate(&w, end, sizeof(end), Z_NO_FLUSH);
	if (!err)
		err = w_deflate(&w, NULL, 0, Z_FINISH);
	deflateEnd(&w.zs);
out_free:
	free(w.obuf);
	free(w.ibuf);
	close(fd);
	return err;
}

/* ---- extraction ---- */

enum x_state {
	X_HEADER,	/* collecting a 512-byte header */
	X_LONGNAME,	/* collecting a GNU long name */
	X_DATA,		/* file data to write */
	X_SKIP,		/* padding up to the next block */
	X_END,		/* after the two zero blocks: only zeros allowed */
};

struct tar_extract {
	int root;
	struct tar_limits lim;
	uid_t uid;		/* (uid_t)-1: keep the extracting user */
	gid_t gid;
	int err;		/* sticky: the first violation */

	z_stream zs;
	bool zinit, zend;
	bool drain;		/* zlib may hold output: inflate again before more input */
	unsigned char *buf;	/* CHUNK bytes of inflated data */
	uint64_t in_total, out_total, file_bytes, entries;

	enum x_state state;
	unsigned char hdr[BLOCK];
	size_t hdr_fill;
	bool zero_block;	/* the previous header block was all zeros */
	uint64_t remain;	/* data bytes left in this entry */
	uint64_t skip;		/* padding bytes left */
	uint64_t end_pad;	/* zero bytes seen after the end blocks */

	char *only;		/* copy of lim.only */
	size_t only_len;

	char longname[NAME_MAX_LEN + 2];	/* + NUL in the data + ours */
	size_t longname_len;
	bool have_longname;

	/* The regular file being written. */
	int fd, parent;
	char leaf[256];
	unsigned mode;
	int64_t mtime;
	char name[NAME_MAX_LEN + 1];
};

/*
 * Every entry may cost a header, a long-name header and its name's blocks,
 * and a file's last block of padding; plus the end blocks and their padding.
 * Saturates instead of wrapping for absurd limits.
 */
static uint64_t default_inflated(const struct tar_limits *l)
{
	uint64_t per = 3 * BLOCK + NAME_MAX_LEN + BLOCK;
	uint64_t meta = l->max_entries > UINT64_MAX / per ? UINT64_MAX : l->max_entries * per;
	uint64_t total = l->max_bytes + meta;

	if (total < l->max_bytes)
		return UINT64_MAX;
	total += 2 * BLOCK + END_PAD_MAX;
	return total < 2 * BLOCK ? UINT64_MAX : total;
}

struct tar_extract *tar_extract_new(int dirfd, const struct tar_limits *lim)
{
	struct tar_extract *x = calloc(1, sizeof(*x));

	if (!x) {
		husk_seterr(ENOMEM, "tar: out of memory");
		return NULL;
	}
	x->fd = -1;
	x->parent = -1;
	x->buf = malloc(CHUNK);
	if (!x->buf) {
		free(x);
		husk_seterr(ENOMEM, "tar: out of memory");
		return NULL;
	}
	x->root = dirfd;
	if (lim)
		x->lim = *lim;
	if (!x->lim.max_bytes)
		x->lim.max_bytes = TAR_DEFAULT_MAX_BYTES;
	if (!x->lim.max_entries)
		x->lim.max_entries = TAR_DEFAULT_MAX_ENTRIES;
	if (!x->lim.ratio_grace)
		x->lim.ratio_grace = TAR_RATIO_GRACE;
	if (!x->lim.max_inflated)
		x->lim.max_inflated = default_inflated(&x->lim);
	if (x->lim.only) {
		x->only = strdup(x->lim.only);
		if (!x->only) {
			husk_seterr(ENOMEM, "tar: out of memory");
			tar_extract_free(x);
			return NULL;
		}
		x->only_len = strlen(x->only);
		x->lim.only = x->only;
	}
	x->uid = (uid_t)-1;
	x->gid = (gid_t)-1;
	if (inflateInit2(&x->zs, 15 + 16) != Z_OK) {
		husk_seterr(ENOMEM, "tar: inflateInit2 failed");
		tar_extract_free(x);
		return NULL;
	}
	x->zinit = true;
	return x;
}

int tar_extract_set_owner(struct tar_extract *x, uid_t uid, gid_t gid)
{
	x->uid = uid;
	x->gid = gid;
	return 0;
}

/* Drop the file being written; a half-written file is removed. */
static void x_drop_file(struct tar_extract *x, bool remove)
{
	if (x->fd >= 0) {
		close(x->fd);
		if (remove)
			unlinkat(x->parent, x->leaf, 0);
	}
	if (x->parent >= 0 && x->parent != x->root)
		close(x->parent);
	x->fd = -1;
	x->parent = -1;
}

/* Record the first violation; the message is already set. */
static int x_fail(struct tar_extract *x, int err)
{
	x_drop_file(x, true);
	x->err = err;
	return err;
}

static int x_chown(struct tar_extract *x, int fd)
{
	if (x->uid == (uid_t)-1 && x->gid == (gid_t)-1)
		return 0;
	if (fchown(fd, x->uid, x->gid) < 0)
		return husk_seterr(errno, "tar: %s: chown: %s", x->name,
				   strerror(errno));
	return 0;
}

/*
 * Open the directory component comp under dfd, creating it if missing.
 * O_NOFOLLOW | O_DIRECTORY refuses symlinks and non-directories alike.
 */
static int x_subdir(struct tar_extract *x, int dfd, const char *comp)
{
	int fd, err;
	bool tried = false, made = false;

	for (;;) {
		fd = openat(dfd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd >= 0)
			break;
		if (errno != ENOENT || tried)
			return husk_seterr(errno == ELOOP ? ENOTDIR : errno,
					   "tar: %s: parent \"%s\" is not a directory we can enter (%s)",
					   x->name, comp, errno == ELOOP ? "a symlink" : strerror(errno));
		/* EEXIST: someone made it meanwhile; the openat decides. */
		if (mkdirat(dfd, comp, 0700) == 0)
			made = true;
		else if (errno != EEXIST)
			return husk_seterr(errno, "tar: %s: creating parent \"%s\": %s",
					   x->name, comp, strerror(errno));
		tried = true;
	}
	if (made) {
		/* Explicit modes: the extracting process's umask must not matter. */
		err = 0;
		if (fchmod(fd, 0755) < 0)
			err = husk_seterr(errno, "tar: %s: parent \"%s\": chmod: %s",
					  x->name, comp, strerror(errno));
		if (!err)
			err = x_chown(x, fd);
		if (err) {
			close(fd);
			return err;
		}
	}
	return fd;
}

/*
 * Walk x->name's parents from the root; returns the parent's fd (x->root
 * itself for top-level names) and copies the last component to leaf.
 */
static int x_parent(struct tar_extract *x, char *leaf)
{
	char comp[256];
	const char *p = x->name, *slash;
	size_t len = strlen(x->name);
	int dfd = x->root, fd;

	if (len > 1 && x->name[len - 1] == '/')
		len--;
	while ((slash = memchr(p, '/', x->name + len - p))) {
		memcpy(comp, p, slash - p);
		comp[slash - p] = '\0';
		fd = x_subdir(x, dfd, comp);
		if (dfd != x->root)
			close(dfd);
		if (fd < 0)
			return fd;
		dfd = fd;
		p = slash + 1;
	}
	memcpy(leaf, p, x->name + len - p);
	leaf[x->name + len - p] = '\0';
	return dfd;
}

static int x_mkdir(struct tar_extract *x)
{
	char leaf[256];
	int dfd, fd, err = 0;

	dfd = x_parent(x, leaf);
	if (dfd < 0)
		return dfd;
	if (mkdirat(dfd, leaf, 0700) < 0) {
		err = husk_seterr(errno, "tar: %s: %s", x->name,
				  errno == EEXIST ? "already exists" : strerror(errno));
		goto out;
	}
	fd = openat(dfd, leaf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		err = husk_seterr(errno, "tar: %s: %s", x->name, strerror(errno));
		goto out;
	}
	if (fchmod(fd, dir_mode(x->mode)) < 0)
		err = husk_seterr(errno, "tar: %s: chmod: %s", x->name, strerror(errno));
	if (!err)
		err = x_chown(x, fd);
	close(fd);
out:
	if (dfd != x->root)
		close(dfd);
	return err;
}

static int x_open_file(struct tar_extract *x)
{
	int dfd, fd;

	dfd = x_parent(x, x->leaf);
	if (dfd < 0)
		return dfd;
	/* O_EXCL never follows and never truncates: no overwrite, no escape. */
	fd = openat(dfd, x->leaf, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
		    O_CLOEXEC, 0600);
	if (fd < 0) {
		int e = errno;

		if (dfd != x->root)
			close(dfd);
		return husk_seterr(e, "tar: %s: %s", x->name,
				   e == EEXIST ? "already exists" : strerror(e));
	}
	x->fd = fd;
	x->parent = dfd;
	return 0;
}

static int x_close_file(struct tar_extract *x)
{
	struct timespec ts[2] = {
		{ .tv_nsec = UTIME_OMIT },
		{ .tv_sec = x->mtime },
	};
	int err = 0;

	if (fchmod(x->fd, file_mode(x->mode) & (x->lim.strip_exec ? ~0111u : ~0u)) < 0)
		err = husk_seterr(errno, "tar: %s: chmod: %s", x->name, strerror(errno));
	if (!err)
		err = x_chown(x, x->fd);
	if (!err && futimens(x->fd, ts) < 0)
		err = husk_seterr(errno, "tar: %s: setting mtime: %s", x->name,
				  strerror(errno));
	if (!err && close(x->fd) < 0)
		err = husk_seterr(errno, "tar: %s: %s", x->name, strerror(errno));
	else if (err)
		close(x->fd);
	x->fd = -1;
	if (err)
		unlinkat(x->parent, x->leaf, 0);
	x_drop_file(x, false);
	return err;
}

/* Parse an octal numeric field (spaces/NULs around the digits allowed). */
static int parse_octal(const char *f, size_t width, uint64_t *out)
{
	uint64_t v = 0;
	size_t i = 0;
	bool digits = false;

	if ((unsigned char)f[0] & 0x80)
		return -ERANGE;	/* GNU base-256: only for sizes we refuse anyway */
	while (i < width && f[i] == ' ')
		i++;
	for (; i < width && f[i] >= '0' && f[i] <= '7'; i++) {
		if (v >> 60)
			return -ERANGE;
		v = v * 8 + (f[i] - '0');
		digits = true;
	}
	for (; i < width; i++)
		if (f[i] != ' ' && f[i] != '\0')
			return -EINVAL;
	if (!digits)
		return -EINVAL;
	*out = v;
	return 0;
}

static const char *type_name(char t)
{
	switch (t) {
	case '1': return "hard links are";
	case '2': return "symbolic links are";
	case '3': return "character devices are";
	case '4': return "block devices are";
	case '6': return "FIFOs are";
	case '7': return "contiguous files are";
	case 'x': case 'g': return "pax headers are";
	case 'K': return "GNU long link names are";
	default: return "this entry type is";
	}
}

/* x->name (a checked name, maybe with one trailing '/') is lim.only or below it. */
static bool below_only(const struct tar_extract *x)
{
	size_t n = strlen(x->name);

	if (n > 1 && x->name[n - 1] == '/')
		n--;
	if (n < x->only_len || memcmp(x->name, x->only, x->only_len))
		return false;
	return n == x->only_len || x->name[x->only_len] == '/';
}

static int x_header(struct tar_extract *x)
{
	const struct ustar *h = (const void *)x->hdr;
	uint64_t sum, size, mode, mtime;
	const char *why;
	size_t i, n, p;
	int err;

	for (i = 0; i < BLOCK && !x->hdr[i]; i++)
		;
	if (i == BLOCK) {
		if (x->have_longname)
			return husk_seterr(EINVAL, "tar: long name \"%.64s...\" not followed by an entry",
					   x->longname);
		if (x->zero_block)
			x->state = X_END;
		x->zero_block = true;
		return 0;
	}
	if (x->zero_block)
		return husk_seterr(EINVAL, "tar: entry after a zero block (corrupt stream)");

	if (parse_octal(h->chksum, sizeof(h->chksum), &sum) < 0 ||
	    (sum != header_sum(x->hdr) && (int64_t)sum != header_sum_signed(x->hdr)))
		return husk_seterr(EINVAL, "tar: bad header checksum after %llu entries",
				   (unsigned long long)x->entries);
	if (memcmp(h->magic, "ustar", 5))
		return husk_seterr(EINVAL, "tar: not a ustar header after %llu entries",
				   (unsigned long long)x->entries);

	/* Name: long name, or prefix + name (POSIX magic only), or name. */
	if (x->have_longname) {
		memcpy(x->name, x->longname, x->longname_len + 1);
		x->have_longname = false;
	} else {
		p = 0;
		if (!memcmp(h->magic, "ustar\0", 6) && h->prefix[0]) {
			n = strnlen(h->prefix, sizeof(h->prefix));
			memcpy(x->name, h->prefix, n);
			x->name[n] = '/';
			p = n + 1;
		}
		n = strnlen(h->name, sizeof(h->name));
		memcpy(x->name + p, h->name, n);
		x->name[p + n] = '\0';
	}

	if (parse_octal(h->size, sizeof(h->size), &size) < 0 ||
	    parse_octal(h->mode, sizeof(h->mode), &mode) < 0 ||
	    parse_octal(h->mtime, sizeof(h->mtime), &mtime) < 0)
		return husk_seterr(EINVAL, "tar: %.200s: bad numeric field in header",
				   x->name);

	/* Every header counts, or long names alone could make a stream endless. */
	if (++x->entries > x->lim.max_entries)
		return husk_seterr(EFBIG, "tar: more than %llu entries",
				   (unsigned long long)x->lim.max_entries);
	if (h->typeflag == 'L') {
		if (size == 0 || size > NAME_MAX_LEN + 1)
			return husk_seterr(ENAMETOOLONG, "tar: long name of %llu bytes (limit %d)",
					   (unsigned long long)size, NAME_MAX_LEN);
		x->longname_len = 0;
		x->remain = size;
		x->skip = (BLOCK - size % BLOCK) % BLOCK;
		x->state = X_LONGNAME;
		return 0;
	}

	/* The type first: "pax headers are not allowed" says more than a name. */
	if (h->typeflag != '0' && h->typeflag != '\0' && h->typeflag != '5') {
		if ((unsigned char)h->typeflag >= ' ' && (unsigned char)h->typeflag < 0x7f)
			return husk_seterr(EPERM, "tar: %.200s: %s not allowed (type '%c')",
					   x->name, type_name(h->typeflag), h->typeflag);
		return husk_seterr(EPERM, "tar: %.200s: unknown entry type 0x%02x",
				   x->name, (unsigned char)h->typeflag);
	}
	err = check_name(x->name, &why);
	if (err)
		return husk_seterr(err, "tar: entry \"%.200s\": %s", x->name, why);
	if (x->only && !below_only(x))
		return husk_seterr(EPERM, "tar: entry \"%.200s\" is not \"%s\" or inside it; "
				   "only what was asked for may be extracted", x->name, x->only);
	x->mode = mode & 07777;
	x->mtime = mtime;

	switch (h->typeflag) {
	case '0':
	case '\0':
		if (x->name[strlen(x->name) - 1] == '/')
			return husk_seterr(EINVAL, "tar: file entry \"%s\" ends in '/'",
					   x->name);
		if (size > x->lim.max_bytes - x->file_bytes)
			return husk_seterr(EFBIG, "tar: %s: over the limit of %llu bytes in total",
					   x->name, (unsigned long long)x->lim.max_bytes);
		x->file_bytes += size;
		err = x_open_file(x);
		if (err)
			return err;
		x->remain = size;
		x->skip = (BLOCK - size % BLOCK) % BLOCK;
		x->state = X_DATA;
		if (!size) {
			err = x_close_file(x);
			x->state = X_HEADER;
		}
		return err;
	default:	/* '5' */
		if (size)
			return husk_seterr(EINVAL, "tar: directory \"%s\" has data", x->name);
		return x_mkdir(x);
	}
}

/* Consume len inflated bytes through the tar state machine. */
static int x_process(struct tar_extract *x, const unsigned char *p, size_t len)
{
	size_t n, i;
	ssize_t w;
	int err;

	while (len) {
		switch (x->state) {
		case X_HEADER:
			n = BLOCK - x->hdr_fill;
			if (n > len)
				n = len;
			memcpy(x->hdr + x->hdr_fill, p, n);
			x->hdr_fill += n;
			p += n;
			len -= n;
			if (x->hdr_fill == BLOCK) {
				x->hdr_fill = 0;
				err = x_header(x);
				if (err)
					return err;
			}
			break;
		case X_LONGNAME:
			n = x->remain < len ? x->remain : len;
			memcpy(x->longname + x->longname_len, p, n);
			x->longname_len += n;
			x->remain -= n;
			p += n;
			len -= n;
			if (!x->remain) {
				/* The data is NUL-terminated; the name is what precedes it. */
				x->longname[x->longname_len] = '\0';
				if (memchr(x->longname, '\0', x->longname_len) == NULL)
					return husk_seterr(EINVAL, "tar: unterminated long name");
				x->longname_len = strlen(x->longname);
				x->have_longname = true;
				x->state = x->skip ? X_SKIP : X_HEADER;
			}
			break;
		case X_DATA:
			n = x->remain < len ? x->remain : len;
			for (i = 0; i < n; i += w) {
				w = write(x->fd, p + i, n - i);
				if (w < 0 && errno == EINTR) {
					w = 0;
					continue;
				}
				if (w <= 0)
					return husk_seterr(w < 0 ? errno : EIO, "tar: writing %s: %s",
							   x->name, w < 0 ? strerror(errno) : "short write");
			}
			x->remain -= n;
			p += n;
			len -= n;
			if (!x->remain) {
				err = x_close_file(x);
				if (err)
					return err;
				x->state = x->skip ? X_SKIP : X_HEADER;
			}
			break;
		case X_SKIP:
			n = x->skip < len ? x->skip : len;
			x->skip -= n;
			p += n;
			len -= n;
			if (!x->skip)
				x->state = X_HEADER;
			break;
		case X_END:
			/* Writers pad to their record size with zeros; nothing else. */
			for (i = 0; i < len; i++)
				if (p[i])
					return husk_seterr(EINVAL, "tar: data after the end of the archive");
			x->end_pad += len;
			if (x->end_pad > END_PAD_MAX)
				return husk_seterr(EINVAL, "tar: too much padding after the end of the archive");
			len = 0;
			break;
		}
	}
	return 0;
}

ssize_t tar_extract_feed_some(struct tar_extract *x, const void *buf, size_t len,
			      size_t budget)
{
	uint64_t out_start = x->out_total;
	int ret, err;
	size_t made;

	if (x->err)
		return x->err;
	if (!len && !x->drain)
		return 0;
	if (x->zend)
		return x_fail(x, husk_seterr(EINVAL, "tar: trailing garbage after the gzip stream"));
	x->zs.next_in = (Bytef *)buf;
	x->zs.avail_in = len;
	do {
		uInt before = x->zs.avail_in;

		x->zs.next_out = x->buf;
		x->zs.avail_out = CHUNK;
		ret = inflate(&x->zs, Z_NO_FLUSH);
		if (ret == Z_NEED_DICT || ret == Z_DATA_ERROR || ret == Z_MEM_ERROR ||
		    ret == Z_STREAM_ERROR)
			return x_fail(x, husk_seterr(EINVAL, "tar: corrupt gzip stream: %s",
						     x->zs.msg ? x->zs.msg : "inflate failed"));
		made = CHUNK - x->zs.avail_out;
		/* A full buffer may leave output inside zlib: drain it next time. */
		x->drain = !x->zs.avail_out;
		x->in_total += before - x->zs.avail_in;
		x->out_total += made;
		if (x->out_total > x->lim.max_inflated)
			return x_fail(x, husk_seterr(EFBIG,
				"tar: the stream inflates past %llu bytes (the limit for %llu bytes "
				"of files in %llu entries)",
				(unsigned long long)x->lim.max_inflated,
				(unsigned long long)x->lim.max_bytes,
				(unsigned long long)x->lim.max_entries));
		if (x->lim.max_ratio && x->out_total > x->lim.ratio_grace &&
		    x->out_total / x->lim.max_ratio > x->in_total)
			return x_fail(x, husk_seterr(EFBIG,
				"tar: decompression ratio over %llu:1 (%llu bytes from %llu): refusing a gzip bomb",
				(unsigned long long)x->lim.max_ratio,
				(unsigned long long)x->out_total,
				(unsigned long long)x->in_total));
		err = x_process(x, x->buf, made);
		if (err)
			return x_fail(x, err);
		if (ret == Z_STREAM_END) {
			x->zend = true;
			x->drain = false;
			if (x->zs.avail_in)
				return x_fail(x, husk_seterr(EINVAL,
					"tar: trailing garbage after the gzip stream"));
			break;
		}
		/* Z_BUF_ERROR: no progress possible, more input needed. */
		if (ret == Z_BUF_ERROR && !made) {
			x->drain = false;
			break;
		}
	} while ((x->zs.avail_in || x->drain) && x->out_total - out_start < budget);
	return len - x->zs.avail_in;
}

bool tar_extract_busy(const struct tar_extract *x)
{
	return x->drain && !x->err;
}

int tar_extract_feed(struct tar_extract *x, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	ssize_t n;

	if (x->err)
		return x->err;
	while (len || x->drain) {
		n = tar_extract_feed_some(x, p, len, SIZE_MAX);
		if (n < 0)
			return n;
		p += n;
		len -= n;
		if (!n && !x->drain)
			break;
	}
	return 0;
}

int tar_extract_finish(struct tar_extract *x)
{
	if (x->err)
		return x->err;
	if (x->drain && tar_extract_feed(x, NULL, 0))
		return x->err;
	if (!x->zend)
		return x_fail(x, husk_seterr(EPIPE, "tar: truncated stream (gzip not finished)"));
	if (x->state != X_END) {
		if (x->state == X_DATA)
			return x_fail(x, husk_seterr(EPIPE, "tar: truncated stream in %s", x->name));
		return x_fail(x, husk_seterr(EPIPE, "tar: truncated stream (no end-of-archive blocks)"));
	}
	return 0;
}

void tar_extract_free(struct tar_extract *x)
{
	if (!x)
		return;
	/* Whatever was half written when the stream stopped goes away. */
	x_drop_file(x, true);
	if (x->zinit)
		inflateEnd(&x->zs);
	free(x->only);
	free(x->buf);
	free(x);
}
