/*
 * virtio_net: a virtio network card whose wire is a tap fd (or any fd that
 * carries one bare Ethernet frame per read/write: a SOCK_DGRAM socket does
 * in the unit tests). The guest's virtio_net_hdr_v1 never leaves the device
 * model: it is dropped on transmit, and on receive the guest gets a zeroed
 * one (num_buffers 1) that husk writes itself.
 *
 * Features: VERSION_1, MAC, STATUS (link always up), INDIRECT_DESC; no
 * checksum or segmentation offloads, no mergeable buffers, one queue pair
 * (rx = 0, tx = 1). Memory is bounded: frames go straight between the fd
 * and guest buffers; when the guest has no receive buffers the fd is not
 * polled, so frames wait in the tap's own (bounded) queue or are dropped by
 * the host kernel.
 */
#ifndef HUSK_VIRTIO_NET_H
#define HUSK_VIRTIO_NET_H

#include <stdint.h>

struct vm;
struct virtio_dev;

struct virtio_net_stats {
	uint64_t rx_frames, rx_bytes, rx_dropped;
	uint64_t tx_frames, tx_bytes, tx_dropped;
};

/*
 * Register a virtio-net device on tap_fd with MAC mac. The device owns
 * tap_fd from now on (closed at teardown), also on failure.
 */
int virtio_net_create(struct vm *vm, int tap_fd, const uint8_t mac[6]);
/* Counters of a device created by virtio_net_create (d = vm->virtio[i]). */
void virtio_net_stats(struct virtio_dev *d, struct virtio_net_stats *s);

#endif
