/*
 * fuzz_layer: libFuzzer target for image layers applied onto a staging tree.
 *
 * Input byte 0: bit 0 set = each layer is a raw tar that the harness gzips
 * first (so the fuzzer mutates tar headers rather than deflate bits); clear
 * = the layers are fed as they are (gzip, plain tar or anything else). The
 * rest is split into up to four layers at each "HUSKLAYR" separator, and
 * they are applied in order into <tmp>/t below a fresh mkdtemp() directory
 * with small limits, stopping at the first failure.
 *
 * Afterwards <tmp> must hold only "t", nothing below "t" may carry setuid,
 * setgid or sticky bits or be a device, FIFO or socket, and every directory
 * must be the owner's to enter. When every layer applied, the attribute
 * table must list exactly what is on disk, with the same file types.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "image/layer.h"

#define SEP "HUSKLAYR"
#define MAX_LAYERS 4

static const char *target_dir;
static unsigned long disk_entries;

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
	(void)st;
	(void)f;
	(void)flag;
	return remove(path);
}

static int check_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
	(void)f;
	if (flag == FTW_DNR || flag == FTW_NS)
		abort();	/* a directory we cannot read back */
	if (st->st_mode & 07000) {
		fprintf(stderr, "fuzz_layer: %s has mode 0%o\n", path, st->st_mode);
		abort();
	}
	if (S_ISDIR(st->st_mode) && (st->st_mode & 0700) != 0700)
		abort();
	if (S_ISREG(st->st_mode) && (st->st_mode & 0600) != 0600)
		abort();
	if (!S_ISDIR(st->st_mode) && !S_ISREG(st->st_mode) && !S_ISLNK(st->st_mode))
		abort();	/* device, FIFO or socket */
	if (strcmp(path, target_dir))
		disk_entries++;
	return 0;
}

static void only_child(const char *base)
{
	DIR *d = opendir(base);
	struct dirent *e;
	int n = 0;

	if (!d)
		abort();
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (strcmp(e->d_name, "t")) {
			fprintf(stderr, "fuzz_layer: %s/%s created outside the root\n", base,
				e->d_name);
			abort();
		}
		n++;
	}
	closedir(d);
	if (n != 1)
		abort();
}

struct table_check {
	int rootfd;
	unsigned long entries;
};

/* Each table entry exists on disk with the recorded type. */
static int table_one(void *arg, const char *path, const struct layer_attr *a)
{
	struct table_check *c = arg;
	struct stat st;

	if (!*path) {
		if (!S_ISDIR(a->mode))
			abort();
		return 0;
	}
	c->entries++;
	/* Parents come first and are directories of ours: nothing to follow. */
	if (fstatat(c->rootfd, path, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
	    (st.st_mode & S_IFMT) != (a->mode & S_IFMT)) {
		fprintf(stderr, "fuzz_layer: table and disk disagree on %s\n", path);
		abort();
	}
	return 0;
}

static uint8_t *gzip(const uint8_t *p, size_t len, size_t *out_len)
{
	z_stream z;
	uint8_t *out;
	size_t cap = compressBound(len) + 64;

	out = malloc(cap);
	if (!out)
		return NULL;
	memset(&z, 0, sizeof(z));
	if (deflateInit2(&z, 1, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
		free(out);
		return NULL;
	}
	z.next_in = (Bytef *)p;
	z.avail_in = len;
	z.next_out = out;
	z.avail_out = cap;
	if (deflate(&z, Z_FINISH) != Z_STREAM_END) {
		deflateEnd(&z);
		free(out);
		return NULL;
	}
	*out_len = z.total_out;
	deflateEnd(&z);
	return out;
}

static int apply(struct layer_tree *t, const uint8_t *p, size_t len, bool zip,
		 unsigned index)
{
	uint8_t *z = NULL;
	int fd, err;

	if (zip) {
		z = gzip(p, len, &len);
		if (!z)
			return -1;
		p = z;
	}
	fd = memfd_create("layer", MFD_CLOEXEC);
	if (fd < 0)
		abort();
	if (len && write(fd, p, len) != (ssize_t)len)
		abort();
	lseek(fd, 0, SEEK_SET);
	err = layer_apply_fd(t, fd, index);
	close(fd);
	free(z);
	return err;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct layer_limits lim = { .max_bytes = 1u << 20, .max_entries = 256 };
	char base[] = "/tmp/husk-fuzz-layer-XXXXXX";
	char target[sizeof(base) + 2];
	struct table_check tc = { 0 };
	const uint8_t *p, *end, *sep;
	struct layer_tree *t;
	unsigned i;
	int rootfd, err = 0;
	bool zip;

	if (size < 1)
		return 0;
	zip = data[0] & 1;
	if (!mkdtemp(base))
		abort();
	snprintf(target, sizeof(target), "%s/t", base);
	if (mkdir(target, 0700))
		abort();
	rootfd = open(target, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0)
		abort();
	t = layer_tree_new(rootfd, &lim);
	if (!t)
		abort();
	p = data + 1;
	end = data + size;
	for (i = 1; i <= MAX_LAYERS && !err; i++) {
		sep = i < MAX_LAYERS ? memmem(p, end - p, SEP, strlen(SEP)) : NULL;
		err = apply(t, p, (sep ? sep : end) - p, zip, i);
		if (!sep)
			break;
		p = sep + strlen(SEP);
	}

	only_child(base);
	target_dir = target;
	disk_entries = 0;
	nftw(target, check_one, 16, FTW_PHYS);
	if (!err) {
		tc.rootfd = rootfd;
		layer_tree_each(t, table_one, &tc);
		if (tc.entries != disk_entries) {
			fprintf(stderr, "fuzz_layer: %lu entries in the table, %lu on disk\n",
				tc.entries, disk_entries);
			abort();
		}
	}
	layer_tree_free(t);
	close(rootfd);
	nftw(base, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	return 0;
}
