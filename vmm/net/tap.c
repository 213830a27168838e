/*
 * tap: open and configure a tap device through /dev/net/tun. See tap.h.
 *
 * IFF_TUN_EXCL makes TUNSETIFF fail instead of silently attaching to a
 * persistent tap of the same name that someone else created: a VM must
 * never share (or steal) another interface's traffic. Without IFF_VNET_HDR
 * the tun driver parses no header from us, and with its offloads off (the
 * default, set once more explicitly) the host stack checksums and segments
 * every frame before handing it over: each one is a plain, complete
 * Ethernet frame.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/if_tun.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "net/tap.h"
#include "lib/util.h"

#define TUN_PATH "/dev/net/tun"

#ifndef IFF_TUN_EXCL
#define IFF_TUN_EXCL 0x8000
#endif

int tap_check_bare(int fd)
{
	struct ifreq ifr;

	memset(&ifr, 0, sizeof(ifr));
	if (ioctl(fd, TUNGETIFF, &ifr) < 0) {
		if (errno == ENOTTY || errno == EINVAL || errno == EBADFD)
			return 0;	/* not a tun/tap fd */
		return husk_seterr(errno, "tap: TUNGETIFF: %s", strerror(errno));
	}
	if (ifr.ifr_flags & IFF_VNET_HDR)
		return husk_seterr(EINVAL, "tap %.*s carries virtio-net headers "
				   "(IFF_VNET_HDR); husk needs a tap of bare frames",
				   IFNAMSIZ, ifr.ifr_name);
	return 0;
}

static int tap_error(const char *name, int err)
{
	switch (err) {
	case EPERM:
	case EACCES:
		return husk_seterr(err, "cannot create tap %s: %s: needs root or CAP_NET_ADMIN",
				   name, strerror(err));
	case EBUSY:
		return husk_seterr(err, "cannot create tap %s: an interface with that name "
				   "already exists (another VM or a leftover); choose another "
				   "name or delete it", name);
	case EINVAL:
		return husk_seterr(err, "cannot create tap %s: the name is in use by a "
				   "non-tap interface or is invalid", name);
	default:
		return husk_seterr(err, "cannot create tap %s: %s", name, strerror(err));
	}
}

int tap_open(const char *name, char *ifname_out)
{
	struct ifreq ifr;
	size_t n;
	int fd, err;

	if (!name)
		name = "husk%d";
	n = strlen(name);
	if (n == 0 || n >= IFNAMSIZ)
		return husk_seterr(EINVAL, "tap name '%s' must have 1..%d characters", name,
				   IFNAMSIZ - 1);
	fd = open(TUN_PATH, O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		err = errno;
		if (err == ENOENT || err == ENODEV || err == ENXIO)
			return husk_seterr(err, "cannot open %s: %s (is the tun module loaded?)",
					   TUN_PATH, strerror(err));
		return tap_error(name, err);
	}
	memset(&ifr, 0, sizeof(ifr));
	memcpy(ifr.ifr_name, name, n);
	/* No IFF_VNET_HDR: see tap.h. */
	ifr.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_TUN_EXCL;
	if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
		err = tap_error(name, errno);
		close(fd);
		return err;
	}
	if (ioctl(fd, TUNSETOFFLOAD, 0UL) < 0) {
		err = husk_seterr(errno, "tap: TUNSETOFFLOAD 0: %s", strerror(errno));
		close(fd);
		return err;
	}
	if (ifname_out) {
		memcpy(ifname_out, ifr.ifr_name, IFNAMSIZ);
		ifname_out[IFNAMSIZ - 1] = '\0';
	}
	husk_debug("tap: created %.*s", IFNAMSIZ, ifr.ifr_name);
	return fd;
}
