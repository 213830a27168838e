/*
 * fuzz_tar: libFuzzer target for the hostile-stream tar extractor.
 *
 * Input byte 0 chooses the mode and chunk size: with bit 0 set the rest of
 * the input is a raw tar stream that the harness gzips first (so the fuzzer
 * mutates tar headers rather than deflate bits); otherwise the rest is fed
 * as-is as a gzip stream. Each run extracts into <tmp>/t below a fresh
 * mkdtemp() directory with small limits, then asserts that <tmp> holds only
 * "t" and that nothing below "t" is a symlink, device, FIFO or hard link,
 * and removes the whole tree.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "job/tar.h"

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
	(void)st;
	(void)f;
	if (flag == FTW_DP || flag == FTW_D || flag == FTW_DNR)
		chmod(path, 0700);
	return remove(path);
}

static void chmod_dirs(const char *path);

static int fix_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
	(void)f;
	if (flag == FTW_D || flag == FTW_DNR)
		chmod(path, 0700);
	else if (flag == FTW_F && !S_ISREG(st->st_mode))
		abort();	/* symlink, device, FIFO or socket was created */
	else if (flag == FTW_SL || flag == FTW_SLN)
		abort();
	else if (flag == FTW_F && st->st_nlink != 1)
		abort();	/* hard link */
	return 0;
}

static void chmod_dirs(const char *path)
{
	nftw(path, fix_one, 16, FTW_PHYS);
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
			fprintf(stderr, "fuzz_tar: %s/%s created outside the target\n", base,
				e->d_name);
			abort();
		}
		n++;
	}
	closedir(d);
	if (n != 1)
		abort();
}

/* gzip raw bytes (the stream the host or guest would send). */
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const size_t chunks[] = { 1, 7, 512, 4096, 65536 };
	struct tar_limits lim = { .max_bytes = 1u << 20, .max_entries = 64, .max_ratio = 0 };
	char base[] = "/tmp/husk-fuzz-tar-XXXXXX";
	char target[sizeof(base) + 2];
	struct tar_extract *x;
	const uint8_t *stream;
	uint8_t *z = NULL;
	size_t len, off = 0, chunk;
	int dfd, err = 0;

	if (size < 1)
		return 0;
	chunk = chunks[(data[0] >> 1) % 5];
	if (data[0] & 1) {
		z = gzip(data + 1, size - 1, &len);
		if (!z)
			return 0;
		stream = z;
	} else {
		stream = data + 1;
		len = size - 1;
	}
	if (!mkdtemp(base))
		abort();
	snprintf(target, sizeof(target), "%s/t", base);
	if (mkdir(target, 0755))
		abort();
	dfd = open(target, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		abort();
	x = tar_extract_new(dfd, &lim);
	if (!x)
		abort();
	while (off < len && !err) {
		size_t n = len - off < chunk ? len - off : chunk;

		err = tar_extract_feed(x, stream + off, n);
		off += n;
	}
	if (!err)
		(void)tar_extract_finish(x);
	tar_extract_free(x);
	close(dfd);
	free(z);

	only_child(base);
	chmod_dirs(target);
	nftw(base, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	return 0;
}
