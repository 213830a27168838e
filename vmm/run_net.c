/*
 * run_net: `husk run --net egress` on the supervisor's side: a network slot
 * (lock file), the tap named after it, the host end of the point-to-point
 * link, the eBPF egress filter with the job's rules, the filter's anomaly
 * events, and the host's address changes (each new address denied as it
 * comes). The VM process only inherits the tap's fd; it never holds
 * a BPF map or a netlink socket, so a guest that escapes into it cannot
 * widen its own policy.
 *
 * Everything here runs on the supervisor's main thread.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "deny_file.h"
#include "dns_proxy.h"
#include "egress.h"
#include "evloop.h"
#include "netlink.h"
#include "netpool.h"
#include "run_int.h"
#include "tap.h"
#include "util.h"

#define NET_LOCK_DIR "/run/husk/net"
#define NET_SLOTS 1024

struct run_egress {
	const struct run_opts *o;
	int slot_fd;			/* flock'ed NET_LOCK_DIR/<slot>.lock */
	int ifindex;
	bool egress_on;			/* filter attached to ifindex */
	char ifname[IFNAMSIZ];
	struct netpool_lease lease;
	bool kill;			/* the filter asked for the VM to die */
	char anomaly[256];
	/* The DNS proxy and the allow-map expiry run on their own loop thread. */
	struct evloop loop;
	bool loop_on;
	struct dns_proxy *dns;
	int expire_fd;			/* timerfd: expire DNS-opened addresses */
	int watch_fd;			/* the host's address changes (egress.c owns it) */
};

/*
 * The first free slot: one lock file per slot, held with flock for the
 * life of the run, so a crashed husk frees its slot with its last fd.
 */
static int lock_slot(struct run_egress *n)
{
	char path[64];
	unsigned i;
	int fd;

	if ((mkdir("/run/husk", 0755) && errno != EEXIST) ||
	    (mkdir(NET_LOCK_DIR, 0700) && errno != EEXIST))
		return husk_seterr(errno, "cannot create %s: %s (--net needs root)",
				   NET_LOCK_DIR, strerror(errno));
	for (i = 0; i < NET_SLOTS; i++) {
		snprintf(path, sizeof(path), NET_LOCK_DIR "/%u.lock", i);
		fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd < 0)
			return husk_seterr(errno, "cannot open %s: %s", path, strerror(errno));
		if (!flock(fd, LOCK_EX | LOCK_NB)) {
			n->slot_fd = fd;
			return i;
		}
		close(fd);
	}
	return husk_seterr(EBUSY, "all %d network slots are in use", NET_SLOTS);
}

/* The filter fired for a VM: remember why if it is ours. */
static void on_egress_event(const struct egress_event *ev, void *opaque)
{
	struct run_egress *N = opaque;
	const struct run_opts *o = N->o;
	char *a = N->anomaly;
	size_t len = sizeof(N->anomaly), n;

	if (!N->ifindex || (int)ev->ifindex != N->ifindex || a[0])
		return;
	n = snprintf(a, len, "killed: egress anomaly (");
	if (ev->what & EGRESS_ANOM_CONNS)
		n += snprintf(a + n, n < len ? len - n : 0,
			      "new connections %llu in 1000 ms > %llu; ",
			      (unsigned long long)ev->window_conns,
			      (unsigned long long)o->conn_rate);
	if ((ev->what & EGRESS_ANOM_BYTES_TOTAL) && n < len)
		n += snprintf(a + n, len - n, "bytes out %llu > %llu; ",
			      (unsigned long long)ev->total_bytes,
			      (unsigned long long)o->egress_limit);
	if ((ev->what & EGRESS_ANOM_BYTES_WINDOW) && n < len)
		n += snprintf(a + n, len - n, "bytes out %llu in 1000 ms > %llu; ",
			      (unsigned long long)ev->window_bytes,
			      (unsigned long long)o->egress_rate);
	if ((ev->what & EGRESS_ANOM_DSTS) && n < len)
		n += snprintf(a + n, len - n, "distinct destinations %llu > %llu; ",
			      (unsigned long long)ev->distinct_dsts,
			      (unsigned long long)o->max_dests);
	if (n >= 2 && n < len && a[n - 2] == ';')
		n -= 2;
	if (n < len)
		snprintf(a + n, len - n, ")");
	N->kill = true;
}

static int setup(struct run_egress *N, int *tap_fd)
{
	const struct run_opts *o = N->o;
	struct egress_policy pol;
	struct netpool pool;
	char name[IFNAMSIZ];
	unsigned i;
	int slot, fd, err;

	slot = lock_slot(N);
	if (slot < 0)
		return slot;
	err = netpool_parse(NETPOOL_DEFAULT, &pool);
	if (!err)
		err = netpool_lease(&pool, slot, &N->lease);
	if (err)
		return husk_seterr(err, "no addresses for network slot %d", slot);
	snprintf(name, sizeof(name), "husk%d", slot);
	fd = tap_open(name, N->ifname);
	if (fd < 0)
		return fd;
	*tap_fd = fd;
	err = netlink_ifindex(N->ifname);
	if (err < 0)
		return err;
	N->ifindex = err;
	/* Host end .1, point-to-point to the guest's .2. */
	err = netlink_addr_add(N->ifindex, AF_INET, &N->lease.host, N->lease.prefixlen,
			       &N->lease.guest);
	if (!err)
		err = netlink_link_up(N->ifindex);
	if (!err)
		err = egress_open();
	if (err)
		return err;
	memset(&pol, 0, sizeof(pol));
	memcpy(pol.guest_mac, N->lease.mac, sizeof(pol.guest_mac));
	pol.guest_ip4 = N->lease.guest;
	pol.gateway_ip4 = N->lease.host;
	pol.window_ms = 1000;
	pol.max_conns_window = o->conn_rate > UINT32_MAX ? UINT32_MAX : (uint32_t)o->conn_rate;
	pol.max_bytes_total = o->egress_limit;
	pol.max_bytes_window = o->egress_rate;
	pol.max_dsts = o->max_dests > UINT32_MAX ? UINT32_MAX : (uint32_t)o->max_dests;
	err = egress_set_event_cb(on_egress_event, N);
	if (err)
		return err;
	err = egress_attach(N->ifindex, &pol);
	if (err)
		return err;
	N->egress_on = true;
	/*
	 * The whole pool, whatever --allow says: other VMs' gateways are the
	 * host's own addresses (local delivery, not forwarding), other VMs'
	 * guests are not a job's business. DNS to this VM's own gateway is
	 * decided before any deny.
	 */
	err = egress_block_cidr(AF_INET, &pool.base, pool.prefixlen);
	if (err)
		return err;
	/* The host's own list (deny_file.h): absolute too; all of it or no run. */
	err = deny_file_apply(deny_file_path());
	if (err < 0)
		return err;
	if (err)
		husk_debug("net: %d range(s) of %s denied", err, deny_file_path());
	/*
	 * The host itself is not a destination, unless --allow says so: its
	 * addresses now, and those it gains while the VM runs (another VM's
	 * gateway, a DHCP lease, a VPN coming up).
	 */
	err = egress_watch_host_addrs();
	if (err < 0)
		return err;
	N->watch_fd = err;
	for (i = 0; i < o->nr_allow; i++) {
		const struct run_allow *a = &o->allow[i];

		err = egress_allow_cidr(N->ifindex, a->family, run_cidr_addr(a), a->prefixlen,
					a->protos, a->ports, a->nports);
		if (err)
			return err;
	}
	for (i = 0; i < o->nr_deny; i++) {
		const struct run_deny *d = &o->deny[i];

		err = egress_deny_cidr(N->ifindex, d->family, run_cidr_addr(d), d->prefixlen);
		if (err)
			return err;
	}
	husk_debug("net: slot %d, %s, guest %s", slot, N->ifname, inet_ntoa(N->lease.guest));
	return 0;
}

/* ---- the DNS proxy at the gateway (--allow-host) ---- */

/* Open the filter for an allowed name's addresses before the guest sees them. */
static int on_dns_addrs(void *arg, const char *name, const struct dns_addr *addrs,
			unsigned n)
{
	struct run_egress *N = arg;
	unsigned i;
	int err;

	for (i = 0; i < n; i++) {
		err = egress_allow_addr_ttl(N->ifindex, addrs[i].family, addrs[i].addr,
					    addrs[i].ttl, EGRESS_P_ANY, NULL, 0);
		if (err) {
			husk_msg("warning: dns: cannot open the filter for %s: %s", name,
				 husk_lasterr());
			return err;
		}
	}
	husk_debug("dns: %s: %u address(es) allowed", name, n);
	return 0;
}

static void on_expire(void *arg, uint32_t events)
{
	struct run_egress *N = arg;
	uint64_t ticks;

	if (read(N->expire_fd, &ticks, sizeof(ticks)) != sizeof(ticks))
		return;
	if (egress_expire(N->ifindex, now_us()) < 0)
		husk_msg("warning: %s", husk_lasterr());
}

/*
 * The resolver the proxy forwards to: HUSK_DNS_UPSTREAM (an address,
 * optionally ":PORT", IPv6 in brackets) or the host's resolv.conf.
 */
static int dns_upstream(struct sockaddr_storage *ss, socklen_t *len)
{
	const char *e = getenv("HUSK_DNS_UPSTREAM");
	struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
	char host[INET6_ADDRSTRLEN + 2], *port = NULL, *end;
	unsigned long p = 53;

	if (!e || !*e)
		return dns_resolv_conf_upstream("/etc/resolv.conf", ss, len);
	snprintf(host, sizeof(host), "%s", e);
	memset(ss, 0, sizeof(*ss));
	if (host[0] == '[') {
		end = strchr(host, ']');
		if (!end)
			goto bad;
		*end = '\0';
		if (end[1] == ':')
			port = end + 2;
		else if (end[1])
			goto bad;
		memmove(host, host + 1, strlen(host + 1) + 1);
	} else if ((port = strchr(host, ':'))) {
		*port++ = '\0';
	}
	if (port) {
		p = strtoul(port, &end, 10);
		if (!*port || *end || !p || p > 65535)
			goto bad;
	}
	if (inet_pton(AF_INET, host, &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET;
		s4->sin_port = htons(p);
		*len = sizeof(*s4);
		return 0;
	}
	if (inet_pton(AF_INET6, host, &s6->sin6_addr) == 1) {
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(p);
		*len = sizeof(*s6);
		return 0;
	}
bad:
	return husk_seterr(EINVAL, "HUSK_DNS_UPSTREAM=%s: want an address, optionally with "
			   ":PORT (IPv6 in brackets)", e);
}

static int dns_setup(struct run_egress *N)
{
	const struct run_opts *o = N->o;
	struct itimerspec its = { { 1, 0 }, { 1, 0 } };
	struct sockaddr_in bind_to = { .sin_family = AF_INET, .sin_port = htons(53) };
	struct sockaddr_storage up;
	socklen_t ulen;
	int err;

	err = dns_upstream(&up, &ulen);
	if (err && o->nr_allow_host)
		return husk_seterr(err, "--allow-host needs an upstream resolver: %s",
				   husk_lasterr());
	if (err) {
		/* Nothing will be forwarded: every name is refused. */
		struct sockaddr_in *lo = (struct sockaddr_in *)&up;

		memset(&up, 0, sizeof(up));
		lo->sin_family = AF_INET;
		lo->sin_port = htons(53);
		lo->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		ulen = sizeof(*lo);
	}
	err = evloop_init(&N->loop);
	if (err)
		return err;
	bind_to.sin_addr = N->lease.host;
	N->dns = dns_proxy_new(&N->loop, (struct sockaddr *)&bind_to, sizeof(bind_to),
			       o->allow_host, o->nr_allow_host, (struct sockaddr *)&up, ulen,
			       on_dns_addrs, N);
	if (!N->dns)
		return -EINVAL;
	N->expire_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (N->expire_fd < 0 || timerfd_settime(N->expire_fd, 0, &its, NULL) < 0)
		return husk_seterr(errno, "timerfd: %s", strerror(errno));
	err = evloop_add(&N->loop, N->expire_fd, EPOLLIN, on_expire, N);
	if (!err)
		err = evloop_start(&N->loop);
	if (err)
		return err;
	N->loop_on = true;
	return 0;
}

static void dns_teardown(struct run_egress *N, struct run_result *r)
{
	unsigned i;

	if (N->loop_on)
		evloop_stop(&N->loop);
	N->loop_on = false;
	if (N->dns) {
		r->dns_on = true;
		dns_proxy_get_stats(N->dns, &r->dns);
		for (i = 0; i < RUN_DNS_REFUSED_KEEP; i++)
			if (dns_proxy_refused(N->dns, i, r->dns_refused[i],
					      sizeof(r->dns_refused[i])))
				break;
		r->nr_dns_refused = i;
		for (i = 0; i < r->nr_dns_refused; i++)
			husk_debug("dns: refused %s", r->dns_refused[i]);
		dns_proxy_free(N->dns);
		N->dns = NULL;
	}
	evloop_free(&N->loop);
	if (N->expire_fd >= 0)
		close(N->expire_fd);
	N->expire_fd = -1;
}

int run_net_setup(struct run_egress **np, const struct run_opts *o, int *tap_fd,
		  uint8_t mac[6], const struct netpool_lease **lease)
{
	struct run_egress *N = calloc(1, sizeof(*N));
	int err;

	*np = N;
	*tap_fd = -1;
	if (!N)
		return husk_seterr(ENOMEM, "out of memory");
	N->o = o;
	N->slot_fd = N->expire_fd = N->watch_fd = -1;
	err = setup(N, tap_fd);
	if (!err)
		err = dns_setup(N);
	if (err)
		return err;
	memcpy(mac, N->lease.mac, 6);
	*lease = &N->lease;
	return 0;
}

int run_net_events_fd(struct run_egress *N)
{
	return N && N->egress_on ? egress_events_fd() : -1;
}

bool run_net_poll(struct run_egress *N, char *why, size_t len)
{
	if (!N || !N->egress_on)
		return false;
	if (egress_events_poll() < 0)
		husk_msg("warning: %s", husk_lasterr());
	if (!N->kill)
		return false;
	N->kill = false;
	snprintf(why, len, "%s", N->anomaly);
	return true;
}

int run_net_addr_fd(struct run_egress *N)
{
	return N && N->egress_on ? N->watch_fd : -1;
}

bool run_net_addr_poll(struct run_egress *N, char *why, size_t len)
{
	int n;

	if (!N || !N->egress_on || N->watch_fd < 0)
		return false;
	n = egress_watch_poll();
	if (n > 0)
		husk_debug("net: %d new host address(es) denied", n);
	if (n >= 0)
		return false;
	/* Fail closed: a host address the filter does not know may be open. */
	snprintf(why, len, "%s", husk_lasterr());
	return true;
}

/* After the VM process is gone (the tap's last fd with it, so the tap). */
void run_net_teardown(struct run_egress *N, struct run_result *r)
{
	int n;

	if (!N)
		return;
	dns_teardown(N, r);
	if (N->egress_on) {
		r->net = true;
		r->net_counters = !egress_read_counters(N->ifindex, &r->net_ctr);
		n = egress_read_denied(N->ifindex, r->denied, RUN_DENIED_KEEP);
		r->nr_denied = n > 0 ? n : 0;
		if (egress_detach(N->ifindex))
			husk_msg("warning: %s", husk_lasterr());
	}
	if (N->anomaly[0])
		snprintf(r->anomaly, sizeof(r->anomaly), "%s", N->anomaly);
	if (N->slot_fd >= 0)
		close(N->slot_fd);	/* unlocks the slot */
	free(N);
}

void run_net_clean_stale(void)
{
	int n = netlink_del_stale_taps("husk", NET_LOCK_DIR);

	if (n > 0)
		husk_debug("net: removed %d stale tap(s)", n);
}
