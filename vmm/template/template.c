/*
 * template: templates on disk. See template.h.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <nettle/sha2.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "config.h"
#include "template/template.h"
#include "lib/util.h"

#define STATE_FILE "state"
#define MEMORY_FILE "memory"
#define PAGE 4096u

static void id_of_stat(const struct stat *st, struct file_id *id)
{
	id->dev = st->st_dev;
	id->ino = st->st_ino;
	id->size = st->st_size;
	id->mtime_ns = (uint64_t)st->st_mtim.tv_sec * 1000000000u + st->st_mtim.tv_nsec;
	id->ctime_ns = (uint64_t)st->st_ctim.tv_sec * 1000000000u + st->st_ctim.tv_nsec;
}

int file_id_of(int fd, struct file_id *id)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return husk_seterr(errno, "fstat: %s", strerror(errno));
	id_of_stat(&st, id);
	return 0;
}

int template_image_open(const char *what, const char *path, bool allow_blk,
			struct file_id *id)
{
	/* O_NONBLOCK: a FIFO is refused below, not waited on for a writer. */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	struct stat st;
	int e;

	if (fd < 0)
		return husk_seterr(errno, "the %s %s: %s", what, path, strerror(errno));
	if (fstat(fd, &st) < 0) {
		e = errno;
		close(fd);
		return husk_seterr(e, "the %s %s: %s", what, path, strerror(e));
	}
	if (S_ISBLK(st.st_mode) && !allow_blk) {
		close(fd);
		/* Whoever can change that path could point it at a host disk. */
		return husk_seterr(EPERM, "the %s %s is a block device, which husk reads only "
				   "when the run names it (--rootfs %s)", what, path, path);
	}
	if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) {
		close(fd);
		return husk_seterr(EINVAL, "the %s %s is not a regular file or block device",
				   what, path);
	}
	id_of_stat(&st, id);
	return fd;
}

/* ---- the sealing key ---- */

static int key_read(int fd, uint8_t key[SNAP_KEY_LEN])
{
	struct stat st;
	int err;

	if (fstat(fd, &st) < 0)
		return husk_seterr(errno, "the template directory's key: %s", strerror(errno));
	/* Anyone else who could read it could seal templates for this directory. */
	if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077) ||
	    st.st_size != SNAP_KEY_LEN)
		return husk_seterr(EPERM, "the template directory's key %s must be a file of %d "
				   "bytes of uid %u with mode 0600: remove it and make the "
				   "templates again", TEMPLATE_KEY_FILE, SNAP_KEY_LEN,
				   (unsigned)geteuid());
	err = read_exact_at(fd, key, SNAP_KEY_LEN, 0);
	if (err)
		return husk_seterr(err, "cannot read the template directory's key: %s",
				   strerror(-err));
	return 0;
}

/* A new key under a private name, then renamed: never over one made meanwhile. */
static int key_make(int dirfd)
{
	uint8_t key[SNAP_KEY_LEN];
	char tmp[48];
	int fd, err = 0;

	if (getrandom(key, sizeof(key), 0) != (ssize_t)sizeof(key))
		return husk_seterr(EIO, "cannot draw the template directory's key: %s",
				   strerror(errno));
	snprintf(tmp, sizeof(tmp), "%s.tmp-%d", TEMPLATE_KEY_FILE, (int)getpid());
	unlinkat(dirfd, tmp, 0);
	fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		err = -errno;
	if (!err)
		err = write_all_at(fd, key, sizeof(key), 0);
	if (!err && fsync(fd) < 0)
		err = -errno;
	if (fd >= 0)
		close(fd);
	memset(key, 0, sizeof(key));
	/* Another husk's key that won the race is the directory's: keep that one. */
	if (!err && renameat2(dirfd, tmp, dirfd, TEMPLATE_KEY_FILE, RENAME_NOREPLACE) < 0 &&
	    errno != EEXIST)
		err = -errno;
	unlinkat(dirfd, tmp, 0);
	if (err)
		return husk_seterr(-err, "cannot make the template directory's key: %s",
				   strerror(-err));
	fsync(dirfd);
	return 0;
}

int template_key(int dirfd, bool create, uint8_t key[SNAP_KEY_LEN])
{
	int flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
	int fd = openat(dirfd, TEMPLATE_KEY_FILE, flags), err;

	if (fd < 0 && errno == ENOENT && create) {
		err = key_make(dirfd);
		if (err)
			return err;
		fd = openat(dirfd, TEMPLATE_KEY_FILE, flags);
	}
	if (fd < 0 && errno == ENOENT)
		return husk_seterr(ENOKEY, "the template directory has no key (%s): no template "
				   "in it was made by this husk; make the template again",
				   TEMPLATE_KEY_FILE);
	if (fd < 0)
		return husk_seterr(errno, "the template directory's key %s: %s",
				   TEMPLATE_KEY_FILE, strerror(errno));
	err = key_read(fd, key);
	close(fd);
	return err;
}

int template_name_check(const char *name)
{
	size_t i, n = strlen(name);

	if (!n || n > TEMPLATE_NAME_MAX || name[0] == '.')
		goto bad;
	for (i = 0; i < n; i++) {
		char c = name[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			goto bad;
	}
	return 0;
bad:
	return husk_seterr(EINVAL, "template name '%s' must be 1..%d letters, digits, '.', '_' "
			   "or '-', not starting with '.'", name, TEMPLATE_NAME_MAX);
}

int template_dir_open(const char *dir, bool create)
{
	struct stat st;
	int fd, err;

	if (create) {
		err = mkdir_p(dir, 0700);
		if (err)
			return err;
	}
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return husk_seterr(errno, "template directory %s: %s%s", dir, strerror(errno),
				   errno == ENOENT ? " (no template was made there yet)" : "");
	/* Others who could write here could swap a template's files. */
	if (fstat(fd, &st) < 0 || st.st_uid != geteuid() || (st.st_mode & 077)) {
		close(fd);
		return husk_seterr(EPERM, "template directory %s must belong to uid %u with mode "
				   "0700 (chmod 0700 %s)", dir, (unsigned)geteuid(), dir);
	}
	return fd;
}

/* ---- metadata ---- */

static int get_str(const struct snap_section *sec, uint16_t tag, char *out, size_t cap)
{
	struct tlv t;
	int n = snap_get(sec, tag, &t);

	if (n < 0)
		return n;
	if (!n || t.len >= cap || memchr(t.val, '\0', t.len))
		return husk_seterr(EINVAL, "the template's metadata has no usable element %u", tag);
	memcpy(out, t.val, t.len);
	out[t.len] = '\0';
	return 0;
}

static int get_id(const struct snap_section *sec, uint16_t tag, struct file_id *id)
{
	uint64_t v[5];
	int err = snap_get_exact(sec, tag, v, sizeof(v));

	if (!err)
		*id = (struct file_id){ v[0], v[1], v[2], v[3], v[4] };
	return err;
}

void template_meta_write(struct snap_writer *w, const struct template_meta *m)
{
	uint64_t kid[5] = { m->kernel_id.dev, m->kernel_id.ino, m->kernel_id.size,
			    m->kernel_id.mtime_ns, m->kernel_id.ctime_ns };
	uint64_t rid[5] = { m->rootfs_id.dev, m->rootfs_id.ino, m->rootfs_id.size,
			    m->rootfs_id.mtime_ns, m->rootfs_id.ctime_ns };

	snap_begin(w, SNAP_META, 0);
	snap_put_str(w, T_META_NAME, m->name);
	snap_put_u64(w, T_META_CREATED_US, m->created_us);
	snap_put_str(w, T_META_HUSK_VERSION, PACKAGE_VERSION);
	snap_put(w, T_META_KERNEL_SHA, m->kernel_sha, SNAP_SHA256_LEN);
	snap_put(w, T_META_ROOTFS_SHA, m->rootfs_sha, SNAP_SHA256_LEN);
	snap_put_str(w, T_META_KERNEL_PATH, m->kernel_path);
	snap_put_str(w, T_META_ROOTFS_PATH, m->rootfs_path);
	snap_put(w, T_META_KERNEL_ID, kid, sizeof(kid));
	snap_put(w, T_META_ROOTFS_ID, rid, sizeof(rid));
	snap_put_u64(w, T_META_MEM_BYTES, m->mem_bytes);
	snap_put_u64(w, T_META_VCPUS, m->vcpus);
	snap_put_u64(w, T_META_NET, m->net);
	snap_put(w, T_META_DEVICES, m->devices, m->nr_devices * sizeof(m->devices[0]));
	snap_end(w);
	snap_begin(w, SNAP_HOST, 0);
	snap_put(w, T_HOST_FP, m->host_fp, SNAP_SHA256_LEN);
	snap_put_u64(w, T_HOST_TSC_KHZ, m->tsc_khz);
	snap_end(w);
}

int template_meta_read(const struct snap *s, struct template_meta *m)
{
	const struct snap_section *meta = snap_find(s, SNAP_META, 0);
	const struct snap_section *host = snap_find(s, SNAP_HOST, 0);
	const struct snap_section *mem = snap_find(s, SNAP_MEMORY, 0);
	uint64_t net = 0;
	struct tlv t;
	int err;

	memset(m, 0, sizeof(*m));
	if (!meta || !host || !mem)
		return husk_seterr(EINVAL, "the template's state file lacks its %s section",
				   !meta ? "metadata" : !host ? "host" : "memory");
	err = get_str(meta, T_META_NAME, m->name, sizeof(m->name));
	if (!err)
		err = snap_get_u64(meta, T_META_CREATED_US, &m->created_us);
	if (!err)
		err = snap_get_exact(meta, T_META_KERNEL_SHA, m->kernel_sha, SNAP_SHA256_LEN);
	if (!err)
		err = snap_get_exact(meta, T_META_ROOTFS_SHA, m->rootfs_sha, SNAP_SHA256_LEN);
	if (!err)
		err = get_str(meta, T_META_KERNEL_PATH, m->kernel_path, sizeof(m->kernel_path));
	if (!err)
		err = get_str(meta, T_META_ROOTFS_PATH, m->rootfs_path, sizeof(m->rootfs_path));
	if (!err)
		err = get_id(meta, T_META_KERNEL_ID, &m->kernel_id);
	if (!err)
		err = get_id(meta, T_META_ROOTFS_ID, &m->rootfs_id);
	if (!err)
		err = snap_get_u64(meta, T_META_MEM_BYTES, &m->mem_bytes);
	if (!err)
		err = snap_get_u64(meta, T_META_VCPUS, &m->vcpus);
	if (!err)
		err = snap_get_u64(meta, T_META_NET, &net);
	if (!err && (err = snap_get(meta, T_META_DEVICES, &t)) == 1) {
		err = 0;
		if (t.len % 4 || t.len / 4 > ARRAY_SIZE(m->devices))
			err = husk_seterr(EINVAL, "the template lists %u bytes of devices", t.len);
		else
			memcpy(m->devices, t.val, t.len);
		m->nr_devices = t.len / 4;
	} else if (!err) {
		err = husk_seterr(EINVAL, "the template lists no devices");
	}
	if (!err)
		err = snap_get_exact(host, T_HOST_FP, m->host_fp, SNAP_SHA256_LEN);
	if (!err)
		err = snap_get_u64(host, T_HOST_TSC_KHZ, &m->tsc_khz);
	if (!err)
		err = snap_get_u64(mem, T_MEM_SIZE, &m->mem_size);
	if (!err)
		err = snap_get_u64(mem, T_MEM_DATA, &m->mem_data);
	if (!err)
		err = snap_get_exact(mem, T_MEM_SHA, m->mem_sha, SNAP_SHA256_LEN);
	if (err)
		return husk_seterr(err, "the template's metadata is incomplete: %s", husk_lasterr());
	m->net = net != 0;
	if (m->mem_size != m->mem_bytes || !m->vcpus || m->vcpus > 32)
		return husk_seterr(EINVAL, "the template's metadata is inconsistent (memory %llu "
				   "vs %llu bytes, %llu vCPUs)", (unsigned long long)m->mem_size,
				   (unsigned long long)m->mem_bytes, (unsigned long long)m->vcpus);
	return 0;
}

/* ---- the memory image's digest and samples ---- */

static bool zero_page(const uint8_t *p)
{
	const uint64_t *w = (const uint64_t *)p;
	unsigned i;

	for (i = 0; i < PAGE / 8; i++)
		if (w[i])
			return false;
	return true;
}

/*
 * Walk the image's non-zero pages (holes are skipped without reading):
 * the digest is SHA-256 over (le64 offset, page) for each, so it does not
 * depend on how the file system laid the holes out. fn sees each page.
 */
static int walk_pages(int fd, uint64_t size, struct sha256_ctx *c,
		      void (*fn)(void *arg, uint64_t off, const uint8_t *page), void *arg)
{
	static uint8_t buf[1 << 16] __attribute__((aligned(8)));
	off_t data = 0, hole;
	uint64_t off, i, next = 0;

	while ((uint64_t)data < size) {
		data = lseek(fd, data, SEEK_DATA);
		if (data < 0 && errno == ENXIO)
			break;
		hole = data < 0 ? -1 : lseek(fd, data, SEEK_HOLE);
		if (data < 0 || hole < 0)
			return husk_seterr(errno, "cannot map the memory image's holes: %s",
					   strerror(errno));
		data &= ~(off_t)(PAGE - 1);
		for (off = data; off < (uint64_t)hole && off < size; ) {
			uint64_t n = (uint64_t)hole - off < sizeof(buf) ? (uint64_t)hole - off :
				     sizeof(buf);
			int err;

			n = (n + PAGE - 1) & ~(uint64_t)(PAGE - 1);
			if (off + n > size)
				n = size - off;
			memset(buf, 0, sizeof(buf));
			err = read_exact_at(fd, buf, n, off);
			if (err && err != -EIO)
				return husk_seterr(err, "cannot read the memory image: %s",
						   strerror(-err));
			for (i = 0; i + PAGE <= n; i += PAGE) {
				uint8_t le[8];
				unsigned b;

				/* Extents may share a page: each page once. */
				if (off + i < next || zero_page(buf + i))
					continue;
				next = off + i + PAGE;
				for (b = 0; b < 8; b++)
					le[b] = (uint8_t)((off + i) >> (8 * b));
				if (c) {
					sha256_update(c, 8, le);
					sha256_update(c, PAGE, buf + i);
				}
				if (fn)
					fn(arg, off + i, buf + i);
			}
			off += n;
		}
		data = hole;
	}
	return 0;
}

struct sampler {
	uint64_t pages, every, seen;
	unsigned n;
	uint64_t sample[TEMPLATE_SAMPLES][2];	/* offset, crc32 */
};

static void count_page(void *arg, uint64_t off, const uint8_t *page)
{
	(void)off;
	(void)page;
	((struct sampler *)arg)->pages++;
}

static void take_sample(void *arg, uint64_t off, const uint8_t *page)
{
	struct sampler *s = arg;

	if (s->n < TEMPLATE_SAMPLES && s->seen++ % s->every == 0) {
		s->sample[s->n][0] = off;
		s->sample[s->n][1] = crc32(crc32(0, Z_NULL, 0), page, PAGE);
		s->n++;
	}
}

int template_memory_section(int fd, uint64_t size, struct snap_writer *w, uint64_t *data)
{
	uint8_t digest[SNAP_SHA256_LEN];
	struct sha256_ctx c;
	struct sampler *s = calloc(1, sizeof(*s));
	int err;

	if (!s)
		return husk_seterr(ENOMEM, "out of memory");
	sha256_init(&c);
	err = walk_pages(fd, size, &c, count_page, s);
	if (!err) {
		s->every = s->pages / TEMPLATE_SAMPLES + 1;
		err = walk_pages(fd, size, NULL, take_sample, s);
	}
	if (!err) {
		sha256_digest(&c, SNAP_SHA256_LEN, digest);
		snap_begin(w, SNAP_MEMORY, 0);
		snap_put_u64(w, T_MEM_SIZE, size);
		snap_put_u64(w, T_MEM_DATA, s->pages * PAGE);
		if (data)
			*data = s->pages * PAGE;
		snap_put(w, T_MEM_SHA, digest, sizeof(digest));
		snap_put(w, T_MEM_SAMPLES, s->sample, s->n * sizeof(s->sample[0]));
		snap_end(w);
	}
	free(s);
	return err;
}

/* The recorded pages still hold what they held: a cheap check per restore. */
static int check_samples(const struct template *t)
{
	const struct snap_section *mem = snap_find(&t->snap, SNAP_MEMORY, 0);
	uint64_t sample[TEMPLATE_SAMPLES][2];
	uint8_t page[PAGE];
	struct tlv tl;
	unsigned i, n;

	if (snap_get(mem, T_MEM_SAMPLES, &tl) != 1 || tl.len % sizeof(sample[0]) ||
	    tl.len > sizeof(sample))
		return husk_seterr(EINVAL, "the template records no usable memory samples");
	memcpy(sample, tl.val, tl.len);
	n = tl.len / sizeof(sample[0]);
	for (i = 0; i < n; i++) {
		if (sample[i][0] % PAGE || sample[i][0] > t->meta.mem_size - PAGE ||
		    read_exact_at(t->mem_fd, page, PAGE, sample[i][0]) ||
		    crc32(crc32(0, Z_NULL, 0), page, PAGE) != sample[i][1])
			return husk_seterr(EBADMSG, "the template's memory image differs from what "
					   "was saved (page at 0x%llx): it was altered or damaged; "
					   "make the template again",
					   (unsigned long long)sample[i][0]);
	}
	return 0;
}

int template_verify_memory(const struct template *t)
{
	uint8_t digest[SNAP_SHA256_LEN];
	struct sha256_ctx c;
	int err;

	sha256_init(&c);
	err = walk_pages(t->mem_fd, t->meta.mem_size, &c, NULL, NULL);
	if (err)
		return err;
	sha256_digest(&c, SNAP_SHA256_LEN, digest);
	if (memcmp(digest, t->meta.mem_sha, SNAP_SHA256_LEN))
		return husk_seterr(EBADMSG, "the template's memory image does not match its "
				   "digest: it was altered or damaged; make the template again");
	return 0;
}

/* ---- making one ---- */

int template_new_begin(int dirfd, const char *name, struct template_new *t)
{
	struct stat st;
	int err;

	memset(t, 0, sizeof(*t));
	t->dirfd = dirfd;
	t->tmpfd = t->state_fd = t->mem_fd = -1;
	err = template_name_check(name);
	if (err)
		return err;
	snprintf(t->name, sizeof(t->name), "%s", name);
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
		return husk_seterr(EEXIST, "template %s exists already: remove it first (husk "
				   "template rm %s)", name, name);
	template_clean_stale(dirfd);
	snprintf(t->tmpname, sizeof(t->tmpname), ".%s.tmp-%d", name, (int)getpid());
	if (mkdirat(dirfd, t->tmpname, 0700) < 0) {
		err = husk_seterr(errno, "cannot create %s in the template directory: %s",
				  t->tmpname, strerror(errno));
		t->tmpname[0] = '\0';
		return err;
	}
	t->tmpfd = openat(dirfd, t->tmpname, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (t->tmpfd >= 0)
		t->state_fd = openat(t->tmpfd, STATE_FILE, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC,
				     0600);
	if (t->state_fd >= 0)
		t->mem_fd = openat(t->tmpfd, MEMORY_FILE, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC,
				   0600);
	if (t->mem_fd < 0)
		return husk_seterr(errno, "cannot create the template's files: %s", strerror(errno));
	return 0;
}

int template_new_commit(struct template_new *t)
{
	if (fsync(t->state_fd) < 0 || fsync(t->mem_fd) < 0 || fsync(t->tmpfd) < 0)
		return husk_seterr(errno, "cannot write template %s to disk: %s", t->name,
				   strerror(errno));
	if (renameat2(t->dirfd, t->tmpname, t->dirfd, t->name, RENAME_NOREPLACE) < 0)
		return husk_seterr(errno, "cannot put template %s in place: %s", t->name,
				   errno == EEXIST ? "another one of that name appeared meanwhile" :
				   strerror(errno));
	t->tmpname[0] = '\0';
	fsync(t->dirfd);
	return 0;
}

void template_new_abort(struct template_new *t)
{
	if (t->state_fd >= 0)
		close(t->state_fd);
	if (t->mem_fd >= 0)
		close(t->mem_fd);
	if (t->tmpfd >= 0)
		close(t->tmpfd);
	if (t->tmpname[0])
		rm_tree_at(t->dirfd, t->tmpname);
	t->state_fd = t->mem_fd = t->tmpfd = -1;
	t->tmpname[0] = '\0';
}

/* ---- using one ---- */

/* key NULL: the directory has none, and keyerr says why. */
static int read_state(int tfd, const uint8_t *key, const char *keyerr, struct template *t)
{
	struct stat st;
	int fd = openat(tfd, STATE_FILE, O_RDONLY | O_NOFOLLOW | O_CLOEXEC), err;

	if (fd < 0)
		return husk_seterr(errno, "its state file: %s", strerror(errno));
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > SNAP_MAX_LEN ||
	    st.st_size < SNAP_HEADER_LEN) {
		close(fd);
		return husk_seterr(EINVAL, "its state file is not a regular file of a "
				   "plausible size");
	}
	t->state_len = st.st_size;
	t->state = malloc(t->state_len);
	err = t->state ? read_exact_at(fd, t->state, t->state_len, 0) : -ENOMEM;
	close(fd);
	if (err)
		return husk_seterr(err, "cannot read its state file: %s", strerror(-err));
	err = snap_parse(t->state, t->state_len, &t->snap);
	/* Intact, then ours: nothing in it is read before both hold. */
	if (!err)
		err = key ? snap_check_seal(t->state, t->state_len, key) :
		      husk_seterr(ENOKEY, "%s", keyerr);
	if (!err)
		err = template_meta_read(&t->snap, &t->meta);
	return err;
}

/*
 * The image a run uses is the one the template was made from: the checked
 * descriptor, or -errno. allow_blk: the run named this path itself.
 */
static int check_image(const char *what, const char *path, bool allow_blk,
		       const struct file_id *want, const uint8_t sha[SNAP_SHA256_LEN])
{
	uint8_t got[SNAP_SHA256_LEN];
	char hex[2 * SNAP_SHA256_LEN + 1];
	struct file_id id;
	int fd = template_image_open(what, path, allow_blk, &id), err;

	if (fd < 0)
		return fd;
	/* Unchanged since the template was made: no need to read it. */
	if (!memcmp(&id, want, sizeof(id)))
		return fd;
	err = digest_sha256_fd(fd, 0, UINT64_MAX, -1, got);
	if (!err && memcmp(got, sha, SNAP_SHA256_LEN)) {
		digest_hex(sha, 8, hex);
		err = husk_seterr(EINVAL, "the %s %s is not the one the template was made from "
				  "(its digest begins %s): use that %s or make the template "
				  "again", what, path, hex, what);
	}
	if (err) {
		close(fd);
		return err;
	}
	return fd;
}

int template_check_fp(const struct template_meta *m, const uint8_t fp[SNAP_SHA256_LEN],
		      uint32_t tsc_khz)
{
	uint64_t d;

	if (memcmp(fp, m->host_fp, SNAP_SHA256_LEN))
		return husk_seterr(EINVAL, "template %s was made on another kind of host (its "
				   "CPU features, KVM capabilities or MSRs differ from this "
				   "one's): make the template again on this host", m->name);
	/* A reboot recalibrates the TSC by a few kHz: that much is the same host. */
	d = tsc_khz > m->tsc_khz ? tsc_khz - m->tsc_khz : m->tsc_khz - tsc_khz;
	if (!tsc_khz || d * 1000000 > m->tsc_khz * TEMPLATE_TSC_PPM)
		return husk_seterr(EINVAL, "template %s was made with a %llu kHz TSC, this host "
				   "has %u kHz: make the template again on this host", m->name,
				   (unsigned long long)m->tsc_khz, tsc_khz);
	return 0;
}

int template_open(int dirfd, const char *name, const char *kernel, const char *rootfs,
		  struct template *t)
{
	uint8_t key[SNAP_KEY_LEN];
	struct stat st;
	int tfd, err;

	memset(t, 0, sizeof(*t));
	t->mem_fd = t->rootfs_fd = t->kernel_fd = -1;
	err = template_name_check(name);
	if (err)
		return err;
	tfd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (tfd < 0)
		return husk_seterr(errno, "template %s: %s", name, errno == ENOENT ?
				   "there is no such template (husk template ls)" :
				   strerror(errno));
	err = template_key(dirfd, false, key);
	if (!err)
		err = read_state(tfd, key, NULL, t);
	memset(key, 0, sizeof(key));
	if (!err) {
		t->mem_fd = openat(tfd, MEMORY_FILE, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		if (t->mem_fd < 0)
			err = husk_seterr(errno, "its memory image: %s", strerror(errno));
	}
	close(tfd);
	if (!err && (fstat(t->mem_fd, &st) < 0 || !S_ISREG(st.st_mode) ||
		     (uint64_t)st.st_size != t->meta.mem_size))
		err = husk_seterr(EINVAL, "its memory image is %lld bytes, the template says "
				  "%llu: truncated or replaced", (long long)st.st_size,
				  (unsigned long long)t->meta.mem_size);
	if (!err)
		err = check_samples(t);
	if (!err && kernel) {
		t->kernel_fd = check_image("kernel", kernel, false, &t->meta.kernel_id,
					   t->meta.kernel_sha);
		err = t->kernel_fd < 0 ? t->kernel_fd : 0;
	}
	if (!err) {
		t->rootfs_fd = check_image("root image", rootfs ? rootfs : t->meta.rootfs_path,
					   rootfs != NULL, &t->meta.rootfs_id,
					   t->meta.rootfs_sha);
		err = t->rootfs_fd < 0 ? t->rootfs_fd : 0;
	}
	if (err) {
		err = husk_seterr(err, "template %s: %s", name, husk_lasterr());
		template_close(t);
	}
	return err;
}

void template_close(struct template *t)
{
	if (t->mem_fd >= 0)
		close(t->mem_fd);
	if (t->rootfs_fd >= 0)
		close(t->rootfs_fd);
	if (t->kernel_fd >= 0)
		close(t->kernel_fd);
	free(t->state);
	t->state = NULL;
	t->mem_fd = t->rootfs_fd = t->kernel_fd = -1;
}

/* ---- listing and removing ---- */

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct template_info *)a)->meta.name,
		      ((const struct template_info *)b)->meta.name);
}

static uint64_t disk_of(int tfd, const char *file)
{
	struct stat st;

	return fstatat(tfd, file, &st, AT_SYMLINK_NOFOLLOW) ? 0 : (uint64_t)st.st_blocks * 512;
}

int template_list(int dirfd, struct template_info **out, unsigned *n)
{
	int fd = dup(dirfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct template_info *v = NULL, *nv;
	struct dirent *de;
	uint8_t key[SNAP_KEY_LEN];
	char keyerr[160];
	bool have_key;
	unsigned cnt = 0;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return husk_seterr(errno, "cannot list the template directory: %s", strerror(errno));
	}
	have_key = !template_key(dirfd, false, key);
	snprintf(keyerr, sizeof(keyerr), "%s", have_key ? "" : husk_lasterr());
	rewinddir(d);
	while ((de = readdir(d))) {
		struct template t;
		int tfd;

		if (de->d_name[0] == '.' || template_name_check(de->d_name))
			continue;
		nv = realloc(v, (cnt + 1) * sizeof(*v));
		if (!nv)
			break;
		v = nv;
		memset(&v[cnt], 0, sizeof(v[cnt]));
		memset(&t, 0, sizeof(t));
		t.mem_fd = t.rootfs_fd = t.kernel_fd = -1;
		tfd = openat(dirfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (tfd >= 0 && !read_state(tfd, have_key ? key : NULL, keyerr, &t)) {
			v[cnt].meta = t.meta;
			v[cnt].ok = true;
		} else {
			snprintf(v[cnt].meta.name, sizeof(v[cnt].meta.name), "%s", de->d_name);
			snprintf(v[cnt].problem, sizeof(v[cnt].problem), "%s", husk_lasterr());
		}
		if (tfd >= 0) {
			v[cnt].disk_bytes = disk_of(tfd, STATE_FILE) + disk_of(tfd, MEMORY_FILE);
			close(tfd);
		}
		template_close(&t);
		cnt++;
	}
	closedir(d);
	memset(key, 0, sizeof(key));
	if (cnt)
		qsort(v, cnt, sizeof(*v), by_name);
	*out = v;
	*n = cnt;
	return 0;
}

int template_remove(int dirfd, const char *name)
{
	char gone[TEMPLATE_NAME_MAX + 32];
	int err = template_name_check(name);

	if (err)
		return err;
	snprintf(gone, sizeof(gone), ".%s.rm-%d", name, (int)getpid());
	/* Out of the way first: runs that map it keep it; new ones cannot find it. */
	if (renameat2(dirfd, name, dirfd, gone, RENAME_NOREPLACE) < 0)
		return husk_seterr(errno, "template %s: %s", name, errno == ENOENT ?
				   "there is no such template" : strerror(errno));
	rm_tree_at(dirfd, gone);
	return 0;
}

void template_clean_stale(int dirfd)
{
	int fd = dup(dirfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	rewinddir(d);
	while ((de = readdir(d))) {
		const char *dash = strrchr(de->d_name, '-');
		long pid;
		char *end;

		if (de->d_name[0] != '.' || !dash || (!strstr(de->d_name, ".tmp-") &&
						     !strstr(de->d_name, ".rm-")))
			continue;
		pid = strtol(dash + 1, &end, 10);
		if (pid <= 0 || *end || pid == getpid())
			continue;
		if (kill(pid, 0) < 0 && errno == ESRCH)
			rm_tree_at(dirfd, de->d_name);
	}
	closedir(d);
}
