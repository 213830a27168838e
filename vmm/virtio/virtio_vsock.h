/*
 * virtio_vsock: a userspace virtio-vsock device bridged to Unix sockets
 * (Firecracker's hybrid vsock). A host process connects to uds_path and
 * writes "CONNECT <port>\\n" to reach a guest listener, and gets "OK <port>\\n"
 * or "ERR <reason>\\n"; a guest connection to host port P is bridged to the
 * Unix socket "<uds_path>_<P>".
 */
#ifndef HUSK_VIRTIO_VSOCK_H
#define HUSK_VIRTIO_VSOCK_H

#include <stdbool.h>
#include <stdint.h>

struct vm;

int virtio_vsock_create(struct vm *vm, uint32_t guest_cid, const char *uds_path);

#endif
