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

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * What an extraction accepts. A NULL limits pointer, or 0 in a numeric
 * field, means its default. Every limit is checked as the stream arrives, so
 * a hostile stream costs at most the limits' worth of work.
 */
struct tar_limits {
	uint64_t max_bytes;	/* total file bytes after decompression */
	uint64_t max_entries;	/* headers of every kind, GNU long names included */
	uint64_t max_ratio;	/* decompressed/compressed bytes once past
				 * ratio_grace, 0 = no check */
	uint64_t ratio_grace;	/* inflated bytes before max_ratio applies
				 * (0 = TAR_RATIO_GRACE) */
	uint64_t max_inflated;	/* inflated stream bytes (headers, padding and
				 * data); 0 = what max_bytes and max_entries need */
	const char *only;	/* NULL, or the one name every entry must be or lie
				 * below ("out": "out", "out/x"; never "other") */
	bool strip_exec;	/* files lose their execute bits */
};

#define TAR_DEFAULT_MAX_BYTES (1ull << 30)
#define TAR_DEFAULT_MAX_ENTRIES 100000
#define TAR_RATIO_GRACE (64ull << 20)	/* inflated bytes before max_ratio applies */

typedef int (*tar_out_fn)(void *arg, const void *buf, size_t len);

/*
 * Archive src (a file or a directory tree; symlinks inside are stored as
 * nothing: they are skipped) under the name `name`, gzip'd, through out().
 * Returns 0 or -errno with husk_lasterr() naming the path.
 *
 * Details: name NULL or "" means src's last component; src itself must be a
 * regular file or a directory (a symlink is an error, not followed).
 * Directories are walked in sorted order (the same tree gives the same
 * stream), FIFOs, sockets and devices inside are skipped like symlinks.
 * Headers carry uid/gid 0 and the mtime; modes keep only rwx bits without
 * group/world write (files | 0600, directories | 0700). Names longer than
 * ustar allows use a GNU 'L' entry; 1024 bytes and 64 components at most.
 * out() gets chunks of at most 64 KiB; a negative return aborts with it.
 */
int tar_create(const char *src, const char *name, tar_out_fn out, void *arg);

struct tar_extract;
/*
 * Extract into the directory dirfd (not closed by tar_extract_free).
 * Regular files and directories only; modes are masked as for creation,
 * mtimes of files restored, ownership is the extracting process's unless
 * tar_extract_set_owner() says otherwise. Nothing existing is overwritten
 * (a name that exists is an error), though existing directories are
 * entered. NULL (with husk_lasterr()) when out of memory.
 */
struct tar_extract *tar_extract_new(int dirfd, const struct tar_limits *lim);
/* Give everything extracted (files, directories, made parents) this owner. */
int tar_extract_set_owner(struct tar_extract *x, uid_t uid, gid_t gid);
/* Feed compressed bytes; -errno on the first violation (then stop feeding). */
int tar_extract_feed(struct tar_extract *x, const void *buf, size_t len);
/*
 * The same with bounded work: stops once about budget bytes were inflated
 * (and handled: files written, entries created) in this call. Returns the
 * input bytes consumed, or -errno. The caller passes the rest of buf again
 * later; while tar_extract_busy() it must call again (len 0 is fine) before
 * the stream can be finished.
 */
ssize_t tar_extract_feed_some(struct tar_extract *x, const void *buf, size_t len,
			      size_t budget);
bool tar_extract_busy(const struct tar_extract *x);
/*
 * The stream ended: it must be complete (gzip end, tar end blocks).
 * On any failure the file being written is removed; entries completed
 * before it stay for the caller to clean up (extract into a fresh directory).
 */
int tar_extract_finish(struct tar_extract *x);
void tar_extract_free(struct tar_extract *x);

#endif
