/*
 * netlink: minimal rtnetlink request/acknowledge. See netlink.h.
 *
 * Every request is built in a fixed buffer, sent on a fresh socket and
 * answered by exactly one message: NLMSG_ERROR (0 = ack, else -errno), or
 * for RTM_GETLINK the RTM_NEWLINK reply. The one dump (all links, for the
 * stale-tap sweep) reads its multi-part answer up to NLMSG_DONE. A fresh socket per request costs a
 * few microseconds and means no stray multicast or stale replies can ever
 * be mistaken for ours; the sequence number and the kernel's port id are
 * checked all the same.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "net/netlink.h"
#include "lib/util.h"

#define NL_BUF 4096

#ifndef NETLINK_EXT_ACK
#define NETLINK_EXT_ACK 11
#endif
#ifndef NETLINK_CAP_ACK
#define NETLINK_CAP_ACK 10
#endif

struct nl_req {
	union {
		struct nlmsghdr h;
		char buf[NL_BUF];
	};
};

static void *nl_tail(struct nlmsghdr *h)
{
	return (char *)h + NLMSG_ALIGN(h->nlmsg_len);
}

/* Append one attribute; the buffer is ours and sized for every request. */
static int nl_attr(struct nlmsghdr *h, unsigned short type, const void *data, size_t len)
{
	struct rtattr *rta = nl_tail(h);
	size_t total = NLMSG_ALIGN(h->nlmsg_len) + RTA_SPACE(len);

	if (total > NL_BUF)
		return husk_seterr(ENOBUFS, "netlink request too large");
	rta->rta_type = type;
	rta->rta_len = RTA_LENGTH(len);
	memcpy(RTA_DATA(rta), data, len);
	h->nlmsg_len = total;
	return 0;
}

static int nl_name_attr(struct nlmsghdr *h, const char *name)
{
	size_t n = name ? strlen(name) : 0;

	if (n == 0 || n >= IFNAMSIZ)
		return husk_seterr(EINVAL, "bad interface name '%s' (1..%d characters)",
				   name ? name : "", IFNAMSIZ - 1);
	return nl_attr(h, IFLA_IFNAME, name, n + 1);
}

/* The kernel's extended-ack text in an error message, if it sent one. */
static const char *ext_ack_msg(const struct nlmsghdr *h, ssize_t n)
{
	const struct nlmsgerr *e = NLMSG_DATA(h);
	const struct rtattr *rta;
	size_t off, len;

	if (!(h->nlmsg_flags & NLM_F_ACK_TLVS))
		return NULL;
	/* With NETLINK_CAP_ACK the echoed request is just its header. */
	off = NLMSG_HDRLEN + sizeof(*e);
	if (!(h->nlmsg_flags & NLM_F_CAPPED))
		off = NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(e->error) + e->msg.nlmsg_len);
	if (off >= (size_t)n || h->nlmsg_len > (size_t)n)
		return NULL;
	len = h->nlmsg_len - off;
	for (rta = (const void *)((const char *)h + off); RTA_OK(rta, len);
	     rta = RTA_NEXT(rta, len))
		if (rta->rta_type == NLMSGERR_ATTR_MSG && RTA_PAYLOAD(rta) > 0 &&
		    ((const char *)RTA_DATA(rta))[RTA_PAYLOAD(rta) - 1] == '\0')
			return RTA_DATA(rta);
	return NULL;
}

static int nl_error(const char *what, int err, const char *ext)
{
	if (err == EPERM || err == EACCES)
		return husk_seterr(err, "%s: %s: needs root or CAP_NET_ADMIN", what,
				   strerror(err));
	return husk_seterr(err, "%s: %s%s%s", what, strerror(err), ext ? ": " : "",
			   ext ? ext : "");
}

/*
 * Send req and wait for its answer. reply (if not NULL) receives a
 * non-error answer of up to NL_BUF bytes. what names the operation for
 * messages.
 */
static int nl_talk(struct nl_req *req, struct nl_req *reply, const char *what)
{
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
	struct nl_req local;
	struct nl_req *in = reply ? reply : &local;
	struct nlmsghdr *h;
	static __thread uint32_t seq;
	socklen_t salen = sizeof(sa);
	uint32_t portid;
	int fd, one = 1, err;
	ssize_t n;

	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (fd < 0)
		return nl_error(what, errno, "cannot open a NETLINK_ROUTE socket");
	/* Best effort: older kernels simply give shorter error messages. */
	setsockopt(fd, SOL_NETLINK, NETLINK_EXT_ACK, &one, sizeof(one));
	setsockopt(fd, SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &salen) < 0) {
		err = nl_error(what, errno, "netlink bind");
		goto out;
	}
	portid = sa.nl_pid;
	req->h.nlmsg_seq = ++seq;
	req->h.nlmsg_flags |= NLM_F_REQUEST;
	memset(&sa, 0, sizeof(sa));
	sa.nl_family = AF_NETLINK;
	do
		n = sendto(fd, req, req->h.nlmsg_len, 0, (struct sockaddr *)&sa, sizeof(sa));
	while (n < 0 && errno == EINTR);
	if (n != (ssize_t)req->h.nlmsg_len) {
		err = nl_error(what, n < 0 ? errno : EIO, "netlink send");
		goto out;
	}
	for (;;) {
		salen = sizeof(sa);
		n = recvfrom(fd, in->buf, sizeof(in->buf), 0, (struct sockaddr *)&sa, &salen);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			err = nl_error(what, errno, "netlink receive");
			goto out;
		}
		h = &in->h;
		/* Only the kernel (port 0) answering our sequence number counts. */
		if (sa.nl_pid != 0 || !NLMSG_OK(h, (size_t)n) || h->nlmsg_seq != req->h.nlmsg_seq ||
		    h->nlmsg_pid != portid)
			continue;
		if (h->nlmsg_type == NLMSG_ERROR) {
			const struct nlmsgerr *e = NLMSG_DATA(h);

			if (h->nlmsg_len < NLMSG_LENGTH(sizeof(*e))) {
				err = nl_error(what, EPROTO, "short netlink error message");
				goto out;
			}
			err = e->error ? nl_error(what, -e->error, ext_ack_msg(h, n)) : 0;
			if (!err && reply)
				err = nl_error(what, EPROTO, "acknowledged without a reply");
			goto out;
		}
		err = reply ? 0 : nl_error(what, EPROTO, "unexpected netlink reply");
		goto out;
	}
out:
	close(fd);
	return err;
}

static void nl_init(struct nl_req *req, uint16_t type, uint16_t flags, size_t body)
{
	memset(req, 0, sizeof(*req));
	req->h.nlmsg_len = NLMSG_LENGTH(body);
	req->h.nlmsg_type = type;
	req->h.nlmsg_flags = flags;
}

int netlink_ifindex(const char *name)
{
	struct nl_req req, reply;
	struct ifinfomsg *ifi;
	char what[64];
	int err;

	snprintf(what, sizeof(what), "looking up interface %s", name ? name : "");
	nl_init(&req, RTM_GETLINK, 0, sizeof(*ifi));
	ifi = NLMSG_DATA(&req.h);
	ifi->ifi_family = AF_UNSPEC;
	if ((err = nl_name_attr(&req.h, name)))
		return err;
	err = nl_talk(&req, &reply, what);
	if (err)
		return err;
	if (reply.h.nlmsg_type != RTM_NEWLINK ||
	    reply.h.nlmsg_len < NLMSG_LENGTH(sizeof(*ifi)))
		return nl_error(what, EPROTO, "unexpected reply to RTM_GETLINK");
	ifi = NLMSG_DATA(&reply.h);
	if (ifi->ifi_index <= 0)
		return nl_error(what, EPROTO, "kernel returned no index");
	return ifi->ifi_index;
}

int netlink_link_up(int ifindex)
{
	struct nl_req req;
	struct ifinfomsg *ifi;
	char what[64];

	snprintf(what, sizeof(what), "bringing up interface #%d", ifindex);
	nl_init(&req, RTM_NEWLINK, NLM_F_ACK, sizeof(*ifi));
	ifi = NLMSG_DATA(&req.h);
	ifi->ifi_family = AF_UNSPEC;
	ifi->ifi_index = ifindex;
	ifi->ifi_flags = IFF_UP;
	ifi->ifi_change = IFF_UP;
	return nl_talk(&req, NULL, what);
}

/* The interface keeps its index in nsfd's namespace unless one there has it. */
int netlink_link_netns(int ifindex, int nsfd)
{
	struct nl_req req;
	struct ifinfomsg *ifi;
	uint32_t fd = nsfd;
	char what[80];
	int err;

	snprintf(what, sizeof(what), "moving interface #%d to another network namespace",
		 ifindex);
	nl_init(&req, RTM_NEWLINK, NLM_F_ACK, sizeof(*ifi));
	ifi = NLMSG_DATA(&req.h);
	ifi->ifi_family = AF_UNSPEC;
	ifi->ifi_index = ifindex;
	if ((err = nl_attr(&req.h, IFLA_NET_NS_FD, &fd, sizeof(fd))))
		return err;
	return nl_talk(&req, NULL, what);
}

int netlink_addr_add(int ifindex, int family, const void *addr, unsigned prefixlen,
		     const void *peer)
{
	struct nl_req req;
	struct ifaddrmsg *ifa;
	size_t alen;
	char what[64];
	int err;

	snprintf(what, sizeof(what), "adding an address to interface #%d", ifindex);
	if (family == AF_INET)
		alen = sizeof(struct in_addr);
	else if (family == AF_INET6)
		alen = sizeof(struct in6_addr);
	else
		return husk_seterr(EAFNOSUPPORT, "%s: address family %d", what, family);
	if (!addr || prefixlen > alen * 8)
		return husk_seterr(EINVAL, "%s: prefix length %u", what, prefixlen);
	nl_init(&req, RTM_NEWADDR, NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL, sizeof(*ifa));
	ifa = NLMSG_DATA(&req.h);
	ifa->ifa_family = family;
	ifa->ifa_prefixlen = prefixlen;
	ifa->ifa_index = ifindex;
	/* IFA_LOCAL is our address; IFA_ADDRESS the peer on point-to-point links. */
	if ((err = nl_attr(&req.h, IFA_LOCAL, addr, alen)) ||
	    (err = nl_attr(&req.h, IFA_ADDRESS, peer ? peer : addr, alen)))
		return err;
	if (family == AF_INET && !peer && prefixlen < 31) {
		struct in_addr brd;

		memcpy(&brd, addr, sizeof(brd));
		brd.s_addr |= htonl(~0u >> prefixlen);	/* prefixlen < 31 here */
		if ((err = nl_attr(&req.h, IFA_BROADCAST, &brd, sizeof(brd))))
			return err;
	}
	return nl_talk(&req, NULL, what);
}

int netlink_link_del(const char *ifname)
{
	struct nl_req req;
	struct ifinfomsg *ifi;
	char what[64];
	int err;

	snprintf(what, sizeof(what), "deleting interface %s", ifname ? ifname : "");
	nl_init(&req, RTM_DELLINK, NLM_F_ACK, sizeof(*ifi));
	ifi = NLMSG_DATA(&req.h);
	ifi->ifi_family = AF_UNSPEC;
	if ((err = nl_name_attr(&req.h, ifname)))
		return err;
	return nl_talk(&req, NULL, what);
}

/* ---- dumps and stale taps ---- */

#define NL_DUMP_BUF 32768

/*
 * Send a dump request and hand every answer message to cb until
 * NLMSG_DONE. cb returns 0 to go on or -errno to stop (the dump is still
 * read to its end so the socket closes cleanly; the error is returned).
 */
static int nl_dump(struct nl_req *req, const char *what,
		   int (*cb)(const struct nlmsghdr *h, void *arg), void *arg)
{
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
	static __thread uint32_t seq;
	socklen_t salen = sizeof(sa);
	uint32_t portid;
	char *buf;
	int fd, err = 0, cb_err = 0;
	ssize_t n;

	buf = malloc(NL_DUMP_BUF);
	if (!buf)
		return husk_seterr(ENOMEM, "%s: out of memory", what);
	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (fd < 0) {
		err = nl_error(what, errno, "cannot open a NETLINK_ROUTE socket");
		goto out_free;
	}
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &salen) < 0) {
		err = nl_error(what, errno, "netlink bind");
		goto out;
	}
	portid = sa.nl_pid;
	req->h.nlmsg_seq = ++seq;
	req->h.nlmsg_flags |= NLM_F_REQUEST | NLM_F_DUMP;
	memset(&sa, 0, sizeof(sa));
	sa.nl_family = AF_NETLINK;
	do
		n = sendto(fd, req, req->h.nlmsg_len, 0, (struct sockaddr *)&sa, sizeof(sa));
	while (n < 0 && errno == EINTR);
	if (n != (ssize_t)req->h.nlmsg_len) {
		err = nl_error(what, n < 0 ? errno : EIO, "netlink send");
		goto out;
	}
	for (;;) {
		struct nlmsghdr *h;
		size_t len;

		salen = sizeof(sa);
		n = recvfrom(fd, buf, NL_DUMP_BUF, 0, (struct sockaddr *)&sa, &salen);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			err = nl_error(what, errno, "netlink receive");
			goto out;
		}
		if (sa.nl_pid != 0)
			continue;
		len = n;
		for (h = (struct nlmsghdr *)buf; NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
			if (h->nlmsg_seq != req->h.nlmsg_seq || h->nlmsg_pid != portid)
				continue;
			if (h->nlmsg_type == NLMSG_DONE)
				goto out;
			if (h->nlmsg_type == NLMSG_ERROR) {
				const struct nlmsgerr *e = NLMSG_DATA(h);

				err = h->nlmsg_len < NLMSG_LENGTH(sizeof(*e)) ?
				      nl_error(what, EPROTO, "short netlink error message") :
				      nl_error(what, -e->error, ext_ack_msg(h, n));
				goto out;
			}
			if (!cb_err)
				cb_err = cb(h, arg);
		}
	}
out:
	close(fd);
out_free:
	free(buf);
	return err ? err : cb_err;
}

struct stale_scan {
	const char *prefix;
	size_t plen;
	struct stale_tap {
		int ifindex;
		unsigned slot;
	} *taps;
	size_t n, cap;
};

/* "<prefix><slot>" as husk names its taps: decimal, no sign, no leading 0. */
static int tap_slot(const char *name, const struct stale_scan *s, unsigned *slot)
{
	const char *d = name + s->plen;
	unsigned long v = 0;

	if (strncmp(name, s->prefix, s->plen) || !*d || (*d == '0' && d[1]))
		return 0;
	for (; *d; d++) {
		if (*d < '0' || *d > '9' || v > 99999999)
			return 0;
		v = v * 10 + (*d - '0');
	}
	*slot = v;
	return 1;
}

/* Is the nested IFLA_LINKINFO's IFLA_INFO_KIND "tun" (tun and tap alike)? */
static int is_tun(const struct rtattr *linkinfo)
{
	const struct rtattr *a;
	size_t len = RTA_PAYLOAD(linkinfo);

	for (a = RTA_DATA(linkinfo); RTA_OK(a, len); a = RTA_NEXT(a, len))
		if (a->rta_type == IFLA_INFO_KIND)
			return RTA_PAYLOAD(a) >= 4 && !memcmp(RTA_DATA(a), "tun", 4);
	return 0;
}

static int collect_stale(const struct nlmsghdr *h, void *arg)
{
	struct stale_scan *s = arg;
	const struct ifinfomsg *ifi = NLMSG_DATA(h);
	const struct rtattr *a, *linkinfo = NULL;
	const char *name = NULL;
	size_t len;
	unsigned slot;

	if (h->nlmsg_type != RTM_NEWLINK || h->nlmsg_len < NLMSG_LENGTH(sizeof(*ifi)))
		return 0;
	len = h->nlmsg_len - NLMSG_LENGTH(sizeof(*ifi));
	for (a = IFLA_RTA(ifi); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
		if (a->rta_type == IFLA_IFNAME && RTA_PAYLOAD(a) > 0 &&
		    memchr(RTA_DATA(a), '\0', RTA_PAYLOAD(a)))
			name = RTA_DATA(a);
		else if (a->rta_type == IFLA_LINKINFO)
			linkinfo = a;
	}
	if (!name || !linkinfo || !is_tun(linkinfo) || !tap_slot(name, s, &slot))
		return 0;
	if (s->n == s->cap) {
		struct stale_tap *t;

		s->cap = s->cap ? s->cap * 2 : 16;
		t = realloc(s->taps, s->cap * sizeof(*t));
		if (!t)
			return husk_seterr(ENOMEM, "listing interfaces: out of memory");
		s->taps = t;
	}
	s->taps[s->n].ifindex = ifi->ifi_index;
	s->taps[s->n].slot = slot;
	s->n++;
	return 0;
}

static int link_del_index(int ifindex)
{
	struct nl_req req;
	struct ifinfomsg *ifi;
	char what[64];

	snprintf(what, sizeof(what), "deleting interface #%d", ifindex);
	nl_init(&req, RTM_DELLINK, NLM_F_ACK, sizeof(*ifi));
	ifi = NLMSG_DATA(&req.h);
	ifi->ifi_family = AF_UNSPEC;
	ifi->ifi_index = ifindex;
	return nl_talk(&req, NULL, what);
}

/* mkdir -p: parents 0755 (like /run/husk), the last one 0700. */
static int make_lock_dir(const char *dir)
{
	char path[PATH_MAX];
	char *p;

	if (snprintf(path, sizeof(path), "%s", dir) >= (int)sizeof(path))
		return husk_seterr(ENAMETOOLONG, "lock directory '%s' is too long", dir);
	for (p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(path, 0755) && errno != EEXIST)
			return husk_seterr(errno, "cannot create %s: %s", path, strerror(errno));
		*p = '/';
	}
	if (mkdir(path, 0700) && errno != EEXIST)
		return husk_seterr(errno, "cannot create %s: %s", path, strerror(errno));
	return 0;
}

int netlink_del_stale_taps(const char *prefix, const char *lock_dir)
{
	struct nl_req req;
	struct stale_scan s = { .prefix = prefix };
	struct ifinfomsg *ifi;
	char path[PATH_MAX];
	size_t i;
	int err, fd, deleted = 0;

	if (!prefix || !*prefix || strlen(prefix) >= IFNAMSIZ - 1 || !lock_dir)
		return husk_seterr(EINVAL, "stale taps: bad name prefix or lock directory");
	s.plen = strlen(prefix);
	nl_init(&req, RTM_GETLINK, 0, sizeof(*ifi));
	ifi = NLMSG_DATA(&req.h);
	ifi->ifi_family = AF_UNSPEC;
	err = nl_dump(&req, "listing interfaces", collect_stale, &s);
	if (!err && s.n)
		err = make_lock_dir(lock_dir);
	for (i = 0; !err && i < s.n; i++) {
		snprintf(path, sizeof(path), "%s/%u.lock", lock_dir, s.taps[i].slot);
		fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd < 0) {
			err = husk_seterr(errno, "stale taps: cannot open %s: %s", path,
					  strerror(errno));
			break;
		}
		/*
		 * Held: a live husk owns the slot. Free: its owner died, and
		 * while we hold the lock no husk can take the slot and make a
		 * new tap of that name; deleting by index (never reused soon)
		 * could not hit a new one anyway.
		 */
		if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
			int r = link_del_index(s.taps[i].ifindex);

			if (r == 0)
				deleted++;
			else if (r != -ENODEV)
				err = r;
			else
				husk_debug("stale taps: #%d went away by itself",
					   s.taps[i].ifindex);
		} else if (errno != EWOULDBLOCK) {
			err = husk_seterr(errno, "stale taps: flock %s: %s", path,
					  strerror(errno));
		}
		close(fd);
	}
	free(s.taps);
	return err ? err : deleted;
}

/* ---- the host's address changes ---- */

#define NL_MONITOR_BUF 16384
#define NL_MONITOR_RCVBUF (1 << 20)

int netlink_addr_monitor_open(void)
{
	struct sockaddr_nl sa = {
		.nl_family = AF_NETLINK,
		.nl_groups = RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR,
	};
	int fd, rcv = NL_MONITOR_RCVBUF;

	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_ROUTE);
	if (fd < 0)
		return nl_error("watching the host's addresses", errno,
				"cannot open a NETLINK_ROUTE socket");
	/* Best effort: room for bursts (many VMs starting at once). */
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int err = nl_error("watching the host's addresses", errno, "netlink bind");

		close(fd);
		return err;
	}
	return fd;
}

/* One RTM_NEWADDR/RTM_DELADDR message into ev; false if it is not one. */
static bool addr_event(const struct nlmsghdr *h, struct netlink_addr_event *ev)
{
	const struct ifaddrmsg *ifa = NLMSG_DATA(h);
	const struct rtattr *a, *local = NULL, *address = NULL;
	size_t len, alen;

	if ((h->nlmsg_type != RTM_NEWADDR && h->nlmsg_type != RTM_DELADDR) ||
	    h->nlmsg_len < NLMSG_LENGTH(sizeof(*ifa)))
		return false;
	if (ifa->ifa_family == AF_INET)
		alen = 4;
	else if (ifa->ifa_family == AF_INET6)
		alen = 16;
	else
		return false;
	len = h->nlmsg_len - NLMSG_LENGTH(sizeof(*ifa));
	for (a = IFA_RTA(ifa); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
		if (RTA_PAYLOAD(a) != alen)
			continue;
		if (a->rta_type == IFA_LOCAL)
			local = a;
		else if (a->rta_type == IFA_ADDRESS)
			address = a;
	}
	/* IFA_LOCAL is ours when there is a peer (IFA_ADDRESS is then the peer). */
	if (!local)
		local = address;
	if (!local)
		return false;
	memset(ev, 0, sizeof(*ev));
	ev->family = ifa->ifa_family;
	ev->added = h->nlmsg_type == RTM_NEWADDR;
	ev->ifindex = ifa->ifa_index;
	ev->prefixlen = ifa->ifa_prefixlen;
	memcpy(ev->addr, RTA_DATA(local), alen);
	return true;
}

int netlink_addr_monitor_read(int fd, unsigned max_msgs, netlink_addr_fn fn, void *arg)
{
	char buf[NL_MONITOR_BUF];
	struct netlink_addr_event ev;
	struct sockaddr_nl sa;
	socklen_t salen;
	unsigned got;
	ssize_t n;
	int err;

	for (got = 0; got < max_msgs;) {
		struct nlmsghdr *h;
		size_t len;

		salen = sizeof(sa);
		n = recvfrom(fd, buf, sizeof(buf), MSG_TRUNC, (struct sockaddr *)&sa, &salen);
		if (n < 0 && errno == EINTR)
			continue;
		if (n >= 0)
			got++;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n < 0 && errno == ENOBUFS)
			return -ENOBUFS;
		if (n < 0)
			return nl_error("watching the host's addresses", errno, "netlink receive");
		if ((size_t)n > sizeof(buf))
			return -ENOBUFS;	/* cut short: as good as lost */
		/* Only the kernel announces addresses. */
		if (salen < sizeof(sa) || sa.nl_family != AF_NETLINK || sa.nl_pid != 0)
			continue;
		len = n;
		for (h = (struct nlmsghdr *)buf; NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
			if (!addr_event(h, &ev))
				continue;
			if ((err = fn(&ev, arg)))
				return err;
		}
	}
	return got;
}
