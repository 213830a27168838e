/*
 * oci/bundle: an OCI bundle's config.json, and whose it is.
 *
 * config.json names host resources: the container's root, the sources of
 * its bind mounts, a network namespace. husk-runc usually runs as root, so
 * it trusts a config.json as far as it trusts whoever could have written it
 * (docs/oci.md, "Whose config.json"):
 *
 * - the engine's: config.json and every directory and symbolic link on the
 *   way to it belong to root or to husk-runc's own user, and no one else
 *   may write them (a sticky directory aside, whose entries are checked in
 *   turn). It names host paths as runc's does.
 * - another user's: config.json belongs to that user. Its root is read with
 *   that user's uid and primary group (no other group), and it may name no
 *   bind source and no network namespace.
 * - a config.json of root's (or ours) on a way someone else can change is
 *   refused: husk-runc cannot tell who put it there.
 *
 * Symbolic links on the way are followed by hand, each checked, so a link
 * in another user's directory cannot lead to an engine's config.json.
 */
#ifndef HUSK_OCI_BUNDLE_H
#define HUSK_OCI_BUNDLE_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#include "image/tool.h"

struct oci_bundle {
	char dir[PATH_MAX];		/* the bundle directory, resolved */
	char *config;			/* config.json's text (NUL-terminated), owned */
	size_t config_len;
	bool engine;			/* the engine's; else author's */
	struct image_reader author;	/* another user's: its owner and group */
	char why[PATH_MAX + 128];	/* not the engine's: what someone else can change */
};

/*
 * Find and read bundle's config.json (at most max bytes) and decide whose
 * it is. 0; -EPERM when no one can be told apart as its writer; other
 * -errno. husk_lasterr() says why.
 */
int oci_bundle_read(const char *bundle, size_t max, struct oci_bundle *b);
void oci_bundle_free(struct oci_bundle *b);

#endif
