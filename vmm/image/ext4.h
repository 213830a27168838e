/*
 * ext4: turn a staged image tree into husk's read-only root image.
 *
 * The staged tree belongs to whoever imports (no root needed, no setuid
 * bits or foreign owners on the host); the layer table knows what each
 * entry really is. mke2fs copies the tree into a new file system, then
 * every inode gets the owner, permission bits and mtime the table records,
 * set through libext2fs by walking names one component at a time (no
 * command language between husk and the image's hostile names).
 */
#ifndef HUSK_IMAGE_EXT4_H
#define HUSK_IMAGE_EXT4_H

#include <stdint.h>

struct layer_tree;

/*
 * Make out (a new file) from the directory tree at stage: sized for bytes of
 * file data in entries inodes, no journal, 4 KiB blocks, root owned by root,
 * then apply t's attributes. 0, or -errno with husk_lasterr().
 */
int ext4_build(const char *stage, const char *out, uint64_t bytes, uint64_t entries,
	       struct layer_tree *t);

#endif
