/*
 * net: the guest side of `husk run --net egress`. The kernel has INET but
 * no IP_PNP, so guest-init configures eth0 itself from the job spec with the
 * classic ioctls on an AF_INET socket (no netlink needed): lo and eth0 up,
 * the address and netmask, a default route via the gateway. The gateway
 * (the host end of the tap) is also the DNS server: resolv.conf lives on a
 * small tmpfs at /run and is bind-mounted read-only over the (read-only,
 * empty) /etc/resolv.conf of the root image. The mounts are made before
 * the job's init is cloned (net_prepare), so its copy of them shows the
 * file; the job's own network fills it in place.
 *
 * Runs as PID 1 before the job; the job's seccomp filter keeps it from
 * changing any of this. A job without a network gets a network namespace
 * of its own, where its init brings up lo alone (net_lo_up).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <net/route.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <unistd.h>

#include "init.h"
#include "lib/util.h"

#define NET_DEV "eth0"
#define RESOLV_TMP "/run/resolv.conf"

static void set_sin(struct sockaddr *sa, uint32_t addr)
{
	struct sockaddr_in *sin = (struct sockaddr_in *)sa;

	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	sin->sin_addr.s_addr = addr;
}

static int if_up(int s, const char *dev)
{
	struct ifreq ifr;

	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", dev);
	if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
		return husk_seterr(errno, "%s: %s", dev, strerror(errno));
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
		return husk_seterr(errno, "%s up: %s", dev, strerror(errno));
	return 0;
}

static int if_addr(int s, const struct job_spec *js)
{
	struct ifreq ifr;

	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), NET_DEV);
	set_sin(&ifr.ifr_addr, js->net_addr);
	if (ioctl(s, SIOCSIFADDR, &ifr) < 0)
		return husk_seterr(errno, NET_DEV " address: %s", strerror(errno));
	set_sin(&ifr.ifr_netmask, htonl(~0u << (32 - js->net_prefix)));
	if (ioctl(s, SIOCSIFNETMASK, &ifr) < 0)
		return husk_seterr(errno, NET_DEV " netmask: %s", strerror(errno));
	return 0;
}

static int default_route(int s, uint32_t gw)
{
	struct rtentry rt;

	memset(&rt, 0, sizeof(rt));
	set_sin(&rt.rt_dst, INADDR_ANY);
	set_sin(&rt.rt_genmask, INADDR_ANY);
	set_sin(&rt.rt_gateway, gw);
	rt.rt_flags = RTF_UP | RTF_GATEWAY;
	rt.rt_dev = (char *)NET_DEV;
	if (ioctl(s, SIOCADDRT, &rt) < 0)
		return husk_seterr(errno, "default route: %s", strerror(errno));
	return 0;
}

int net_prepare(void)
{
	int fd;

	if (mount("tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
		  "size=64k,mode=0755"))
		return husk_seterr(errno, "mount /run: %s", strerror(errno));
	fd = open(RESOLV_TMP, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0)
		return husk_seterr(errno, "create " RESOLV_TMP ": %s", strerror(errno));
	close(fd);
	if (mount(RESOLV_TMP, "/etc/resolv.conf", NULL, MS_BIND, NULL) ||
	    mount(NULL, "/etc/resolv.conf", NULL, MS_BIND | MS_REMOUNT | MS_RDONLY |
		  MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL))
		return husk_seterr(errno, "bind-mounting /etc/resolv.conf: %s", strerror(errno));
	return 0;
}

/* In place: the bind mounts, the job's copy included, hold this inode. */
static int resolv_conf(uint32_t gw)
{
	char buf[64], ip[INET_ADDRSTRLEN];
	int fd, n;

	inet_ntop(AF_INET, &gw, ip, sizeof(ip));
	n = snprintf(buf, sizeof(buf), "nameserver %s\n", ip);
	fd = open(RESOLV_TMP, O_WRONLY | O_TRUNC | O_CLOEXEC);
	if (fd < 0 || write(fd, buf, n) != n) {
		if (fd >= 0)
			close(fd);
		return husk_seterr(EIO, "writing " RESOLV_TMP);
	}
	close(fd);
	return 0;
}

/*
 * A template's clones share the NIC the template booted with: each gets
 * its own address from the job, set while the link is still down.
 */
static int if_mac(int s, const struct job_spec *js)
{
	struct ifreq ifr;

	if (!js->have_mac)
		return 0;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), NET_DEV);
	ifr.ifr_hwaddr.sa_family = ARPHRD_ETHER;
	memcpy(ifr.ifr_hwaddr.sa_data, js->net_mac, 6);
	if (ioctl(s, SIOCSIFHWADDR, &ifr) < 0)
		return husk_seterr(errno, "setting the MAC address of %s: %s", NET_DEV,
				   strerror(errno));
	return 0;
}

int net_lo_up(void)
{
	int s, err;

	s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return husk_seterr(errno, "AF_INET socket: %s", strerror(errno));
	err = if_up(s, "lo");
	close(s);
	return err;
}

int net_setup(const struct job_spec *js)
{
	int s, err;

	if (!js->net)
		return 0;
	s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return husk_seterr(errno, "AF_INET socket: %s", strerror(errno));
	err = if_up(s, "lo");
	if (!err)
		err = if_mac(s, js);
	if (!err)
		err = if_addr(s, js);
	if (!err)
		err = if_up(s, NET_DEV);
	if (!err)
		err = default_route(s, js->net_gw);
	close(s);
	if (!err)
		err = resolv_conf(js->net_gw);
	return err;
}
