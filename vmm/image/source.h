/*
 * source: a container image where a user has it -- an OCI image layout
 * (directory or tar archive), a `docker save` archive, or an unpacked root
 * directory -- read into verified parts: its config and its layers in order.
 *
 * Everything in a source is hostile. Every blob husk uses is checked
 * against the digest that names it before it is parsed or applied (a
 * `docker save` layer of the old format against the config's diff_id), JSON
 * documents are size-capped, names inside archives and layouts are never
 * resolved through symbolic links, and only sha256 digests are accepted.
 */
#ifndef HUSK_IMAGE_SOURCE_H
#define HUSK_IMAGE_SOURCE_H

#include <limits.h>

#include "image/tool.h"

#define IMAGE_DIGEST_LEN 72	/* "sha256:" + 64 hex + NUL, rounded */
#define IMAGE_MAX_LAYERS 256
#define IMAGE_MAX_JSON (4u << 20)

struct image_layer {
	int fd;				/* the layer's bytes (tar, maybe gzip'd), from 0 */
	char digest[IMAGE_DIGEST_LEN];	/* of exactly those bytes */
};

struct image_source {
	const char *kind;		/* "oci-layout", "oci-archive", "docker-archive",
					 * "directory" */
	char *config;			/* the image config (JSON text), NULL for a directory */
	char config_digest[IMAGE_DIGEST_LEN];
	struct image_layer layers[IMAGE_MAX_LAYERS];
	unsigned n_layers;
	char id[IMAGE_DIGEST_LEN];	/* sha256 over the config and layer digests */
};

/*
 * Open src (ref: which image of a layout or archive holding several, by its
 * org.opencontainers.image.ref.name or docker tag; NULL when there is one)
 * and verify it. Every blob used is a private copy (an unnamed file in
 * workdir) made while it was hashed.
 * 0, or -errno with husk_lasterr() saying what is wrong with the source.
 */
int image_source_open(const char *src, const char *ref, const char *workdir,
		      struct image_source *s);
/*
 * Open dir as an unpacked root directory, whatever it holds (a container's
 * root is never taken for a layout), read by tar as `as` when given (a
 * bundle of another user's: the tree is what that user can read), else as
 * we are. 0, or -errno with husk_lasterr().
 */
int image_source_open_tree(const char *dir, const char *workdir, const struct image_reader *as,
			   struct image_source *s);
void image_source_close(struct image_source *s);

/* "sha256:<hex>" of a buffer, and of a whole file from its start. */
void image_sha256(const void *p, size_t len, char out[IMAGE_DIGEST_LEN]);
int image_sha256_fd(int fd, char out[IMAGE_DIGEST_LEN]);

#endif
