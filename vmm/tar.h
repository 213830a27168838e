/*
 * tar: files in and out of the guest as gzip-compressed ustar streams.
 *
 * Writing walks a host (or guest) path and emits the stream in chunks.
 * Extraction is incremental (fed chunk by chunk as frames arrive) and treats
 * the stream as hostile: no absolute names, no "..", no symlinks, hardlinks,
 * devices or FIFOs, no writing through anything that is not a directory we
 * created, limits on total bytes, entry count and name length. Every file is
 * created with openat(O_NOFOLLOW | O_EXCL) below the target directory fd.
 */
#ifndef HUSK_TAR_H
#define HUSK_TAR_H

#include <stddef.h>
#include <stdint.h>

struct tar_limits {
	uint64_t max_bytes;	/* total file bytes after decompression */
	uint64_t max_entries;
	uint64_t max_ratio;	/* decompressed/compressed bytes, 0 = no check */
};

#define TAR_DEFAULT_MAX_BYTES (1ull << 30)
#define TAR_DEFAULT_MAX_ENTRIES 100000

typedef int (*tar_out_fn)(void *arg, const void *buf, size_t len);

/*
 * Archive src (a file or a directory tree; symlinks inside are stored as
 * nothing: they are skipped) under the name `name`, gzip'd, through out().
 * Returns 0 or -errno with husk_lasterr() naming the path.
 */
int tar_create(const char *src, const char *name, tar_out_fn out, void *arg);

struct tar_extract;
/* Extract into the directory dirfd (not closed by tar_extract_free). */
struct tar_extract *tar_extract_new(int dirfd, const struct tar_limits *lim);
/* Feed compressed bytes; -errno on the first violation (then stop feeding). */
int tar_extract_feed(struct tar_extract *x, const void *buf, size_t len);
/* The stream ended: it must be complete (gzip end, tar end blocks). */
int tar_extract_finish(struct tar_extract *x);
void tar_extract_free(struct tar_extract *x);

#endif
