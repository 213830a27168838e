/*
 * netlink: the few rtnetlink requests husk needs to set up a guest's tap on
 * the host: look up an interface, bring it up, give it an address, delete
 * it; and a monitor of the host's address changes (for the egress filter's
 * denies). No ip(8), no shell: one NETLINK_ROUTE socket per request, a
 * checked acknowledgement, and the kernel's own error (with its extended-ack
 * text when it sends one) in husk_lasterr().
 *
 * All functions return 0 or -errno. -EPERM says "needs root or
 * CAP_NET_ADMIN" in the message.
 */
#ifndef HUSK_NETLINK_H
#define HUSK_NETLINK_H

#include <stdbool.h>
#include <stdint.h>

/* Interface index of name (> 0), or -ENODEV if there is no such interface. */
int netlink_ifindex(const char *name);
/* Set IFF_UP on the interface. */
int netlink_link_up(int ifindex);
/*
 * Add addr/prefixlen (family AF_INET or AF_INET6; addr is a struct in_addr
 * or in6_addr) to the interface. peer, if not NULL, makes it a
 * point-to-point address towards peer. -EEXIST if already there.
 */
int netlink_addr_add(int ifindex, int family, const void *addr, unsigned prefixlen,
		     const void *peer);
/*
 * Move the interface into the network namespace open at nsfd; from then on
 * only requests made from inside that namespace see it.
 */
int netlink_link_netns(int ifindex, int nsfd);
/* Delete the interface called ifname (-ENODEV if it does not exist). */
int netlink_link_del(const char *ifname);

/*
 * Delete the taps dead husks left behind: interfaces of kind "tun" named
 * prefix + slot ("husk" + decimal slot without leading zeros, as
 * vmm/run/run_net.c names them) whose slot lock file lock_dir/<slot>.lock
 * nobody holds with flock(). A live husk holds its slot's lock for the
 * whole run, so its tap is never touched; each stale one is deleted (by
 * ifindex) while this call holds the lock itself. lock_dir is created if
 * missing. Taps normally vanish with their last fd; this catches the rest
 * (an fd inherited by a survivor, a persistent tap of a husk-like name).
 * Returns how many were deleted, or -errno.
 */
int netlink_del_stale_taps(const char *prefix, const char *lock_dir);

/*
 * Address changes on this host (this network namespace), as the kernel
 * announces them to the RTNLGRP_IPV4_IFADDR and RTNLGRP_IPV6_IFADDR groups.
 */
struct netlink_addr_event {
	int family;			/* AF_INET or AF_INET6 */
	bool added;			/* RTM_NEWADDR; false for RTM_DELADDR */
	int ifindex;
	unsigned prefixlen;
	uint8_t addr[16];		/* the local address; IPv4 in the first 4 bytes */
};

typedef int (*netlink_addr_fn)(const struct netlink_addr_event *ev, void *arg);

/* A non-blocking, close-on-exec socket subscribed to both groups, or -errno. */
int netlink_addr_monitor_open(void);
/*
 * Read what is pending on a monitor socket, at most max_msgs datagrams (a
 * bound on the work per wakeup), and call fn for each address event in
 * them; fn returns 0 or -errno, which stops the read. Messages not from
 * the kernel are ignored. Returns the number of datagrams read (0: nothing
 * pending), -ENOBUFS when the kernel had to drop announcements (the
 * socket's queue overflowed, or one did not fit: the caller must re-read
 * the whole state), fn's error, or another -errno.
 */
int netlink_addr_monitor_read(int fd, unsigned max_msgs, netlink_addr_fn fn, void *arg);

#endif
