/*
 * image: husk's store of imported container images, each a read-only ext4
 * root image with husk's guest-init injected, kept by content.
 *
 * The store is one directory (default IMAGE_DEFAULT_DIR, made 0700):
 * <key>.ext4 and <key>.json per image, where key digests what the image is
 * made of (its config and layers, see source.h) and the guest-init put in
 * it, so importing an unchanged image again only names it. Names are kept
 * in the .json files; a name belongs to one image at a time. Every change
 * of the store happens under its lock file and by rename, so a reader never
 * sees half an image and a killed import leaves only its build directory,
 * which the next import removes.
 */
#ifndef HUSK_IMAGE_IMAGE_H
#define HUSK_IMAGE_IMAGE_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#define IMAGE_DEFAULT_DIR "/var/lib/husk/images"
/* Where guest-init sits in an imported image (the kernel's init=). */
#define IMAGE_INIT_PATH "/.husk/init"
#define IMAGE_MAX_ARGS 256

struct image_reader;

struct image_import_opts {
	const char *src;
	const char *name;	/* NULL: the image is known by its key only */
	const char *ref;	/* which image of a multi-image source */
	const char *dir;
	const char *init;	/* guest-init binary */
	bool json;
	bool tree;		/* src is a root directory, never taken for a layout */
	const struct image_reader *read_as;	/* with tree: read as this user */
	char *key_out;		/* [65]: the image's key, and nothing printed */
};

/*
 * Import; prints what was done (a line, or JSON) unless key_out is given.
 * 0, or -errno with husk_lasterr().
 */
int image_import(const struct image_import_opts *o);
int image_ls(const char *dir, bool json);
/* Remove a name; the image goes with its last name (or when named by its key). */
int image_rm(const char *dir, const char *name);

/* What `husk run --image` needs of an image. Strings live until image_info_free. */
struct image_info {
	char rootfs[PATH_MAX];
	char key[65];
	char **argv;		/* Entrypoint + Cmd; NULL-terminated, may be empty */
	int argc;
	char **env;		/* "K=V"; NULL-terminated */
	int nr_env;
	char *workdir;		/* NULL or absolute */
	char *user;		/* as the image says; jobs run as agentuser anyway */
};
/* Find name (or a key, or a key prefix of 12+ hex digits) in the store. */
int image_find(const char *dir, const char *name, struct image_info *out);
void image_info_free(struct image_info *i);

/* A name: 1-128 of [A-Za-z0-9._:/@+-], starting with a letter or digit, no "..". */
int image_name_check(const char *name);

/*
 * image_find() and image_rm() take IMAGE_KEY_PREFIX_MIN to 64 lower-case
 * hex digits as a key or a key's prefix, not as a name. image_is_key(s,
 * min): s is min to 64 such digits.
 */
#define IMAGE_KEY_PREFIX_MIN 12
bool image_is_key(const char *s, size_t min);

/*
 * The names husk-runc gives the roots of its containers (IMAGE_OCI_PREFIX
 * and the SHA-256 of the container's ID): an engine's users' files, which
 * husk serve never boots.
 */
#define IMAGE_OCI_PREFIX "oci-"

#endif
