/*
 * virtio_blk: a block device backed by a raw image file; read-only images
 * (the root file system) are opened O_RDONLY and offered with
 * VIRTIO_BLK_F_RO. Supports read, write (when writable), flush and get-id.
 */
#ifndef HUSK_VIRTIO_BLK_H
#define HUSK_VIRTIO_BLK_H

#include <stdbool.h>
#include <stdint.h>

struct vm;

int virtio_blk_create(struct vm *vm, const char *path, bool read_only);
/*
 * The same on a descriptor the caller opened and checked (fd > 0; the
 * device keeps a copy, the caller its own): path then only names the
 * image in messages. fd <= 0 opens path, as virtio_blk_create.
 */
int virtio_blk_create_fd(struct vm *vm, const char *path, int fd, bool read_only);

#endif
