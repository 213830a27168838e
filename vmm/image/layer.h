/*
 * layer: container image layers (OCI / Docker layer tar streams) applied one
 * after another onto a private staging directory.
 *
 * Every byte of a layer is hostile. Nothing outside the staging directory is
 * ever touched: names are walked one component at a time from its fd with
 * O_NOFOLLOW, symlinks are created verbatim and never resolved, hardlinks
 * must name a regular file already in the tree.
 *
 * The staging tree is owned by the invoking user and never carries setuid,
 * setgid or sticky bits (files are (mode & 0777) | 0600, directories
 * (mode & 0777) | 0700). The ownership, full modes and mtimes the image
 * asks for live in an in-memory table that the image builder reads with
 * layer_tree_each() and applies to the ext4 image itself.
 */
#ifndef HUSK_LAYER_H
#define HUSK_LAYER_H

#include <stdint.h>

/*
 * Limits over all the layers applied to one tree. 0 in a field means its
 * default. Each is checked as the stream arrives, before the work it bounds.
 */
struct layer_limits {
	uint64_t max_bytes;	/* regular file data over all layers */
	uint64_t max_entries;	/* headers of every kind (PAX, GNU long names
				 * included) plus directories made implicitly
				 * as parents, over all layers */
	uint64_t max_ratio;	/* inflated/compressed bytes of one layer's
				 * gzip stream once past LAYER_RATIO_GRACE */
};

#define LAYER_DEFAULT_MAX_BYTES (16ull << 30)
#define LAYER_DEFAULT_MAX_ENTRIES 1000000
#define LAYER_DEFAULT_MAX_RATIO 1000
#define LAYER_RATIO_GRACE (64ull << 20)

/* What the image should say about one entry. */
struct layer_attr {
	uint32_t mode;		/* full st_mode: type and 07777 bits */
	uint32_t uid, gid;
	int64_t mtime;		/* seconds */
};

struct layer_stats {
	uint64_t entries;	/* tar headers read, of every kind */
	uint64_t files, dirs, symlinks, hardlinks;
	uint64_t whiteouts;	/* ".wh.NAME" and opaque markers applied */
	uint64_t devices_skipped;	/* char/block devices and FIFOs: never created */
	uint64_t xattrs_ignored;	/* SCHILY.xattr.* / LIBARCHIVE.xattr.* records */
	uint64_t bytes;		/* regular file data written */
};

struct layer_tree;

/*
 * A tree staged in rootfd, an empty directory the caller made (0700); it is
 * not closed by layer_tree_free(). lim may be NULL. NULL with husk_lasterr()
 * when out of memory or when rootfd is not an empty directory.
 */
struct layer_tree *layer_tree_new(int rootfd, const struct layer_limits *lim);

/*
 * Apply one layer read from fd to its end: gzip (one or more members) or a
 * plain tar. Other compressions (zstd, xz, bzip2) and anything that is not
 * a tar are refused with a message saying so. index names the layer in
 * messages only. Returns 0 or -errno with husk_lasterr() naming the layer
 * and the path; after a failure the staging tree is unspecified (but still
 * confined to rootfd) and every later call fails: discard it.
 *
 * Layer rules (OCI image-spec layer.md): ".wh.NAME" removes NAME from lower
 * layers, ".wh..wh..opq" empties its directory of everything lower layers
 * put there (entries this layer made before the marker stay), an entry
 * replaces what has its name (a directory over a directory only takes the
 * new attributes). Absolute names are taken relative to the image root;
 * ".." anywhere is refused. Devices and FIFOs are counted, not created (and
 * the name they would replace is removed). A hardlink records the same
 * attributes as its target, which it shares an inode with on disk.
 */
int layer_apply_fd(struct layer_tree *t, int fd, unsigned index);

/*
 * Call fn for every entry of the tree, parents before their children and
 * siblings in byte order of their names; the root comes first with path "".
 * Entries no layer described (parents made implicitly, the root) get
 * directory 0755, 0:0, mtime 0. Stops at and returns fn's first nonzero
 * return; 0 after the last entry.
 */
int layer_tree_each(struct layer_tree *t,
		    int (*fn)(void *arg, const char *path, const struct layer_attr *a),
		    void *arg);

const struct layer_stats *layer_tree_stats(const struct layer_tree *t);
void layer_tree_free(struct layer_tree *t);

#endif
