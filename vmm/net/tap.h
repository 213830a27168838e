/*
 * tap: the host end of a guest's network card. A tap device carries bare
 * Ethernet frames between the host stack and husk: one frame per read or
 * write, no packet-info prefix and no virtio_net_hdr (no IFF_VNET_HDR).
 * The guest's virtio-net header ends at husk's device model
 * (vmm/virtio/virtio_net.c), so no guest-chosen GSO or checksum metadata ever
 * reaches the host kernel's tun code, and the host can only hand husk
 * complete frames no longer than the tap's MTU.
 *
 * The device is not persistent: it disappears when its last fd is closed,
 * so a crashed husk leaves no interface behind.
 */
#ifndef HUSK_TAP_H
#define HUSK_TAP_H

#include <net/if.h>

/*
 * Create a new tap called name (a fixed name, or a pattern with one "%d"
 * such as "husk%d"; NULL means "husk%d"), non-blocking and close-on-exec.
 * The kernel's final name is stored in ifname_out (IFNAMSIZ bytes) if not
 * NULL. Never attaches to an existing interface: a name already in use is
 * -EBUSY with a message saying so. Returns the fd or -errno.
 */
int tap_open(const char *name, char *ifname_out);

/*
 * Check that fd, if it is a tun/tap fd at all, carries bare frames: a tap
 * opened with IFF_VNET_HDR (by someone else) is -EINVAL, since its frames
 * would be misread. Other fds (a socket in the unit tests) are fine.
 */
int tap_check_bare(int fd);

#endif
