/*
 * tap: the host end of a guest's network card. A tap device carries
 * Ethernet frames between the host stack and husk; every frame read or
 * written is preceded by a 12-byte virtio_net_hdr_v1 (IFF_VNET_HDR), the
 * same header the guest's virtio-net driver uses, with no offloads
 * negotiated so it is always all zeroes (num_buffers aside).
 *
 * The device is not persistent: it disappears when its last fd is closed,
 * so a crashed husk leaves no interface behind.
 */
#ifndef HUSK_TAP_H
#define HUSK_TAP_H

#include <net/if.h>

#define TAP_VNET_HDR_LEN 12

/*
 * Create a new tap called name (a fixed name, or a pattern with one "%d"
 * such as "husk%d"; NULL means "husk%d"), non-blocking and close-on-exec.
 * The kernel's final name is stored in ifname_out (IFNAMSIZ bytes) if not
 * NULL. Never attaches to an existing interface: a name already in use is
 * -EBUSY with a message saying so. Returns the fd or -errno.
 */
int tap_open(const char *name, char *ifname_out);

/*
 * Put the virtio-net header contract on a tap fd: 12-byte headers, no
 * offloads. Done by tap_open; exposed for fds handed over by others.
 */
int tap_set_vnet(int fd);

#endif
