/*
 * run_net: `husk run --net egress` on the supervisor's side: a network slot
 * (lock file), the tap named after it, the host end of the point-to-point
 * link, the eBPF egress filter with the job's rules, the filter's anomaly
 * events, and the host's address changes (each new address denied as it
 * comes). The VM process only inherits the tap's fd; it never holds
 * a BPF map or a netlink socket, so a guest that escapes into it cannot
 * widen its own policy. The DNS proxy runs in a confined helper process
 * (dns_helper.h) that asks this side to open each address it resolves.
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
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "deny_file.h"
#include "dns_helper.h"
#include "dns_learn.h"
#include "egress.h"
#include "jail.h"
#include "netlink.h"
#include "netpool.h"
#include "run_int.h"
#include "tap.h"
#include "util.h"

#define NET_LOCK_DIR "/run/husk/net"
#define NET_SLOTS 1024
#define DNS_ROOT "/run/husk/empty"	/* the DNS helper's "/" */

struct run_egress {
	const struct run_opts *o;
	int slot_fd;			/* flock'ed NET_LOCK_DIR/<slot>.lock */
	int ifindex;
	bool egress_on;			/* filter attached to ifindex */
	char ifname[IFNAMSIZ];
	struct netpool_lease lease;
	bool kill;			/* the filter asked for the VM to die */
	char anomaly[256];
	/* The DNS proxy's helper process and this VM's learned addresses. */
	bool dns_tried;			/* run_net_dns_start() ran */
	struct dns_helper *dns;
	struct dns_learned learned;
	uid_t dns_uid;			/* the helper's, leased ... */
	int dns_uid_lock;		/* ... with this lock */
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

/*
 * The proxy runs in its own confined process (dns_helper.h); what stays
 * here is the decision on each address it asks for: the VM's quota of
 * learned addresses and their expiry (dns_learn.h), then the filter.
 */

static int learned_open(void *arg, int family, const uint8_t *addr, uint32_t ttl)
{
	struct run_egress *N = arg;

	return egress_allow_addr_ttl(N->ifindex, family, addr, ttl, EGRESS_P_ANY, NULL, 0);
}

static int learned_forget(void *arg, int family, const uint8_t *addr, uint64_t now)
{
	struct run_egress *N = arg;

	return egress_expire_addr(N->ifindex, family, addr, now);
}

/* A learn request from the helper, already checked field by field. */
static int on_dns_learn(void *arg, int family, const uint8_t *addr, uint32_t ttl)
{
	struct run_egress *N = arg;
	char a[INET6_ADDRSTRLEN] = "?";
	int err = dns_learn_add(&N->learned, family, addr, ttl, now_us());

	inet_ntop(family, addr, a, sizeof(a));
	/* A full quota is the guest's doing and counted; a failing filter is ours. */
	if (err && err != -EDQUOT)
		husk_msg("warning: dns: cannot open the filter for %s: %s", a, husk_lasterr());
	else
		husk_debug("dns: %s for %u s: %s", a, ttl, err ? husk_lasterr() : "opened");
	return err;
}

static void on_dns_tick(void *arg, uint64_t now)
{
	struct run_egress *N = arg;

	dns_learn_expire(&N->learned, now);
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

/*
 * The helper's "/": an empty directory nobody but root may change (its
 * bind mount in the helper is read-only anyway). Shared by every run and
 * never removed, like the lock directories.
 */
static int dns_root(void)
{
	struct stat st;

	if ((mkdir("/run/husk", 0755) && errno != EEXIST) ||
	    (mkdir(DNS_ROOT, 0555) && errno != EEXIST))
		return husk_seterr(errno, "cannot create %s: %s", DNS_ROOT, strerror(errno));
	if (lstat(DNS_ROOT, &st) || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & 022))
		return husk_seterr(EPERM, "%s must be a directory owned by uid %u that no one "
				   "else may write", DNS_ROOT, (unsigned)geteuid());
	return 0;
}

int run_net_dns_start(struct run_egress *N, const struct husk_cgroup *cg)
{
	struct dns_learn_ops ops = { learned_open, learned_forget, N };
	const struct run_opts *o = N->o;
	struct sockaddr_in bind_to = { .sin_family = AF_INET, .sin_port = htons(53) };
	struct sockaddr_in guest = { .sin_family = AF_INET };
	struct dns_helper_cfg cfg = { 0 };
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
	err = dns_root();
	if (err)
		return err;
	/* A uid of its own: see docs/security.md for why not the VM's. */
	err = jail_uid_lease(o->uid_base, o->uid_count, &N->dns_uid, &N->dns_uid_lock);
	if (err)
		return husk_seterr(err, "no uid for the DNS helper: %s", husk_lasterr());
	dns_learn_init(&N->learned, &ops, DNS_LEARN_QUOTA);
	bind_to.sin_addr = N->lease.host;
	guest.sin_addr = N->lease.guest;
	cfg.allow = o->allow_host;
	cfg.nallow = o->nr_allow_host;
	cfg.bind = (struct sockaddr *)&bind_to;
	cfg.bind_len = sizeof(bind_to);
	cfg.guest = (struct sockaddr *)&guest;
	cfg.guest_len = sizeof(guest);
	cfg.upstream = (struct sockaddr *)&up;
	cfg.ulen = ulen;
	cfg.root = DNS_ROOT;
	cfg.uid = cfg.gid = N->dns_uid;
	cfg.cg = cg;
	cfg.learn = on_dns_learn;
	cfg.tick = on_dns_tick;
	cfg.arg = N;
	N->dns_tried = true;
	return dns_helper_start(&N->dns, &cfg);
}

int run_net_dns_fd(struct run_egress *N)
{
	return N ? dns_helper_fd(N->dns) : -1;
}

void run_net_dns_handle(struct run_egress *N)
{
	if (N)
		dns_helper_handle(N->dns);
}

static void dns_teardown(struct run_egress *N, struct run_result *r)
{
	static struct dns_helper_report rep;	/* 4 KiB of names: not on the stack */
	unsigned i;

	if (!N->dns_tried)
		return;
	/* Dead before its page is read: no number or name can change under us. */
	dns_helper_stop(N->dns, &rep);
	N->dns = NULL;
	r->dns_on = true;
	r->dns = rep.st;
	r->dns_learn = N->learned.st;
	snprintf(r->dns_fault, sizeof(r->dns_fault), "%s", rep.fault);
	r->nr_dns_refused = rep.nrefused < RUN_DNS_REFUSED_KEEP ? rep.nrefused
								: RUN_DNS_REFUSED_KEEP;
	for (i = 0; i < r->nr_dns_refused; i++) {
		snprintf(r->dns_refused[i], sizeof(r->dns_refused[i]), "%s", rep.refused[i]);
		husk_debug("dns: refused %s", r->dns_refused[i]);
	}
	/* The helper is reaped: its uid is free for another run. */
	if (N->dns_uid_lock >= 0)
		close(N->dns_uid_lock);
	N->dns_uid_lock = -1;
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
	N->slot_fd = N->watch_fd = N->dns_uid_lock = -1;
	err = setup(N, tap_fd);
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
