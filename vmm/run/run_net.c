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
#include <limits.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "net/deny_file.h"
#include "net/dns_helper.h"
#include "net/dns_learn.h"
#include "net/egress.h"
#include "sandbox/jail.h"
#include "net/netlink.h"
#include "net/netns.h"
#include "net/netpool.h"
#include "run/run_int.h"
#include "net/tap.h"
#include "lib/util.h"

#define NET_LOCK_DIR "/run/husk/net"
#define NET_SLOTS 1024
#define DNS_ROOT "/run/husk/empty"	/* the DNS helper's "/" */

struct run_egress {
	const struct run_opts *o;
	int slot_fd;			/* flock'ed NET_LOCK_DIR/<slot>.lock */
	int slot;
	int ns_fd;			/* --netns: the tap's namespace, else -1 */
	bool nat_on;			/* netns_nat_add() made this slot's table */
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
	/*
	 * The rules in force: --allow, --deny and --allow-host at the start,
	 * then whatever a policy change (run_policy.c) made of them.
	 */
	struct run_allow allow[RUN_MAX_ALLOW];
	unsigned nr_allow;
	struct run_deny deny[RUN_MAX_DENY];
	unsigned nr_deny;
	char *hosts[RUN_MAX_ALLOW_HOST];
	unsigned nr_hosts;
	const struct husk_cgroup *dns_cg;
	/* What the DNS helpers a policy change replaced had counted. */
	struct dns_helper_report dns_acc;
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

static bool same_cidr(int fa, const void *a, unsigned la, int fb, const void *b, unsigned lb)
{
	return fa == fb && la == lb && !memcmp(a, b, fa == AF_INET ? 4 : 16);
}

static bool allow_listed(const struct run_allow *l, unsigned n, const struct run_allow *a)
{
	for (unsigned i = 0; i < n; i++)
		if (same_cidr(l[i].family, run_cidr_addr(&l[i]), l[i].prefixlen,
			      a->family, run_cidr_addr(a), a->prefixlen))
			return true;
	return false;
}

static bool deny_listed(const struct run_deny *l, unsigned n, const struct run_deny *d)
{
	for (unsigned i = 0; i < n; i++)
		if (same_cidr(l[i].family, run_cidr_addr(&l[i]), l[i].prefixlen,
			      d->family, run_cidr_addr(d), d->prefixlen))
			return true;
	return false;
}

/*
 * Replace this VM's --allow and --deny rules. The order keeps the filter
 * closed at every step: new denies first, then the allows that go, then
 * the new allows, and only last the denies that go. A failure leaves
 * every old deny and at most the old and new allows' intersection plus
 * what was added: the caller stops the VM then (fail closed).
 */
int run_net_set_rules(struct run_egress *N, const struct run_allow *allow, unsigned na,
		      const struct run_deny *deny, unsigned nd)
{
	unsigned i;
	int err;

	if (na > RUN_MAX_ALLOW || nd > RUN_MAX_DENY)
		return husk_seterr(EINVAL, "at most %d allow and %d deny rules", RUN_MAX_ALLOW,
				   RUN_MAX_DENY);
	for (i = 0; i < nd; i++) {
		err = egress_deny_cidr(N->ifindex, deny[i].family, run_cidr_addr(&deny[i]),
				       deny[i].prefixlen);
		if (err)
			return err;
	}
	for (i = 0; i < N->nr_allow; i++) {
		const struct run_allow *a = &N->allow[i];

		if (allow_listed(allow, na, a))
			continue;
		err = egress_remove_cidr(N->ifindex, false, a->family, run_cidr_addr(a),
					 a->prefixlen);
		if (err)
			return err;
	}
	for (i = 0; i < na; i++) {
		const struct run_allow *a = &allow[i];

		err = egress_allow_cidr(N->ifindex, a->family, run_cidr_addr(a), a->prefixlen,
					a->protos, a->ports, a->nports);
		if (err)
			return err;
	}
	for (i = 0; i < N->nr_deny; i++) {
		const struct run_deny *d = &N->deny[i];

		if (deny_listed(deny, nd, d))
			continue;
		err = egress_remove_cidr(N->ifindex, true, d->family, run_cidr_addr(d),
					 d->prefixlen);
		if (err)
			return err;
	}
	if (allow != N->allow)
		memmove(N->allow, allow, na * sizeof(*allow));
	N->nr_allow = na;
	if (deny != N->deny)
		memmove(N->deny, deny, nd * sizeof(*deny));
	N->nr_deny = nd;
	return 0;
}

void run_net_rules(const struct run_egress *N, const struct run_allow **allow, unsigned *na,
		   const struct run_deny **deny, unsigned *nd, char *const **hosts,
		   unsigned *nh)
{
	*allow = N->allow;
	*na = N->nr_allow;
	*deny = N->deny;
	*nd = N->nr_deny;
	*hosts = N->hosts;
	*nh = N->nr_hosts;
}

/*
 * The tap's own side: its address, the filter on it, and with --netns the
 * namespace's addresses denied like the host's (a snapshot: the watch is
 * the host's). Runs in the namespace where the tap now is.
 */
static int tap_side(struct run_egress *N)
{
	const struct run_opts *o = N->o;
	struct egress_policy pol;
	int err;

	if (N->ns_fd >= 0) {
		/* The move keeps the index unless the namespace has one like it. */
		err = netlink_ifindex(N->ifname);
		if (err < 0)
			return err;
		if (err != N->ifindex)
			return husk_seterr(EEXIST, "%s: the network namespace has an interface "
					   "with index %d already; try again", o->netns,
					   N->ifindex);
	}
	/* Host end .1, point-to-point to the guest's .2. */
	err = netlink_addr_add(N->ifindex, AF_INET, &N->lease.host, N->lease.prefixlen,
			       &N->lease.guest);
	if (!err)
		err = netlink_link_up(N->ifindex);
	if (!err)
		err = egress_open();
	/* Before any host address is denied: with it, they go in as absolute denies. */
	if (!err && o->absolute_builtins)
		err = egress_absolute_builtins();
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
	if (N->ns_fd >= 0) {
		err = egress_deny_host_addrs();
		if (err < 0)
			return err;
	}
	return 0;
}

/* Move the tap into --netns and set up its side there. */
static int tap_side_in(struct run_egress *N)
{
	int saved, err, e;

	N->ns_fd = netns_open(N->o->netns);
	if (N->ns_fd < 0)
		return N->ns_fd;
	err = netlink_link_netns(N->ifindex, N->ns_fd);
	if (err)
		return err;
	saved = netns_enter(N->ns_fd);
	if (saved < 0)
		return saved;
	err = tap_side(N);
	e = netns_leave(saved);
	if (err || e)
		return err ? err : e;
	err = netns_nat_add(N->ns_fd, N->slot, N->ifname, N->lease.guest);
	if (!err)
		N->nat_on = true;
	return err;
}

static int setup(struct run_egress *N, int *tap_fd)
{
	const struct run_opts *o = N->o;
	struct netpool pool;
	char name[IFNAMSIZ];
	unsigned i;
	int slot, fd, err;

	slot = lock_slot(N);
	if (slot < 0)
		return slot;
	N->slot = slot;
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
	err = o->netns ? tap_side_in(N) : tap_side(N);
	if (err)
		return err;
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
	 * The host itself is not a destination, unless --allow names one of its
	 * addresses exactly (never with --absolute-builtins): its addresses now,
	 * and those it gains while the VM runs (another VM's gateway, a DHCP
	 * lease, a VPN coming up).
	 */
	err = egress_watch_host_addrs();
	if (err < 0)
		return err;
	N->watch_fd = err;
	err = run_net_set_rules(N, o->allow, o->nr_allow, o->deny, o->nr_deny);
	if (err)
		return err;
	for (i = 0; i < o->nr_allow_host; i++)
		if (!(N->hosts[N->nr_hosts++] = strdup(o->allow_host[i])))
			return husk_seterr(ENOMEM, "out of memory");
	husk_debug("net: slot %d, %s%s%s, guest %s", slot, N->ifname, o->netns ? " in " : "",
		   o->netns ? o->netns : "", inet_ntoa(N->lease.guest));
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

/* Only for --absolute-builtins: what the filter keeps closed, the proxy does not answer. */
static int learned_closed(void *arg, int family, const uint8_t *addr)
{
	struct run_egress *N = arg;

	return egress_learn_closed(N->ifindex, family, addr);
}

/* A learn request from the helper, already checked field by field. */
static int on_dns_learn(void *arg, int family, const uint8_t *addr, uint32_t ttl)
{
	struct run_egress *N = arg;
	char a[INET6_ADDRSTRLEN] = "?";
	int err = dns_learn_add(&N->learned, family, addr, ttl, now_us());

	inet_ntop(family, addr, a, sizeof(a));
	/*
	 * A full quota, or a name that resolves into a closed range, is the
	 * guest's (or the name's) doing and counted; a failing filter is ours.
	 */
	if (err && err != -EDQUOT && err != -EACCES)
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
 * optionally ":PORT", IPv6 in brackets) or the host's resolv.conf; for
 * --netns /run/netns/NAME, /etc/netns/NAME/resolv.conf when there is one
 * (ip-netns(8)'s convention: what that namespace's programs see).
 */
static int dns_upstream(const struct run_egress *N, struct sockaddr_storage *ss,
			socklen_t *len)
{
	char conf[PATH_MAX] = "/etc/resolv.conf";
	const char *e = getenv("HUSK_DNS_UPSTREAM");
	struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
	char host[INET6_ADDRSTRLEN + 2], *port = NULL, *end;
	const char *ns = N->o->netns;
	unsigned long p = 53;

	if (ns && !strncmp(ns, "/run/netns/", 11) && !strchr(ns + 11, '/') && ns[11]) {
		char c[PATH_MAX];

		snprintf(c, sizeof(c), "/etc/netns/%s/resolv.conf", ns + 11);
		if (!access(c, R_OK))
			snprintf(conf, sizeof(conf), "%s", c);
	}

	if (!e || !*e)
		return dns_resolv_conf_upstream(conf, ss, len);
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

/* The helper for the allowlist in N->hosts: at the start and on a change. */
static int helper_start(struct run_egress *N)
{
	struct sockaddr_in bind_to = { .sin_family = AF_INET, .sin_port = htons(53) };
	struct sockaddr_in guest = { .sin_family = AF_INET };
	struct dns_helper_cfg cfg = { 0 };
	struct sockaddr_storage up;
	socklen_t ulen;
	int err, saved, e;

	err = N->nr_hosts ? dns_upstream(N, &up, &ulen) : 0;
	if (err)
		return husk_seterr(err, "--allow-host needs an upstream resolver: %s",
				   husk_lasterr());
	if (!N->nr_hosts) {
		/*
		 * Nothing will be forwarded, every name is refused: the host's
		 * resolver (absent or unreachable from here) does not matter.
		 */
		struct sockaddr_in *lo = (struct sockaddr_in *)&up;

		memset(&up, 0, sizeof(up));
		lo->sin_family = AF_INET;
		lo->sin_port = htons(53);
		lo->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		ulen = sizeof(*lo);
	}
	bind_to.sin_addr = N->lease.host;
	guest.sin_addr = N->lease.guest;
	cfg.allow = (const char *const *)N->hosts;
	cfg.nallow = N->nr_hosts;
	cfg.bind = (struct sockaddr *)&bind_to;
	cfg.bind_len = sizeof(bind_to);
	cfg.guest = (struct sockaddr *)&guest;
	cfg.guest_len = sizeof(guest);
	cfg.upstream = (struct sockaddr *)&up;
	cfg.ulen = ulen;
	cfg.root = DNS_ROOT;
	cfg.uid = cfg.gid = N->dns_uid;
	cfg.cg = N->dns_cg;
	cfg.learn = on_dns_learn;
	cfg.tick = on_dns_tick;
	cfg.arg = N;
	if (N->ns_fd < 0)
		return dns_helper_start(&N->dns, &cfg);
	/* Its sockets at the gateway and to the upstream: in the tap's namespace. */
	saved = netns_enter(N->ns_fd);
	if (saved < 0)
		return saved;
	err = dns_helper_start(&N->dns, &cfg);
	e = netns_leave(saved);
	return err ? err : e;
}

int run_net_dns_start(struct run_egress *N, const struct husk_cgroup *cg)
{
	struct dns_learn_ops ops = { .open = learned_open, .forget = learned_forget, .arg = N };
	const struct run_opts *o = N->o;
	int err;

	if (o->absolute_builtins)
		ops.closed = learned_closed;

	err = dns_root();
	if (err)
		return err;
	/* A uid of its own: see docs/security.md for why not the VM's. */
	err = jail_uid_lease(o->uid_base, o->uid_count, &N->dns_uid, &N->dns_uid_lock);
	if (err)
		return husk_seterr(err, "no uid for the DNS helper: %s", husk_lasterr());
	dns_learn_init(&N->learned, &ops, DNS_LEARN_QUOTA);
	N->dns_cg = cg;
	N->dns_tried = true;
	return helper_start(N);
}

/* What a stopped helper counted, into the run's sums. */
static void dns_add(struct dns_helper_report *acc, const struct dns_helper_report *rep)
{
	unsigned i, j;

	acc->st.queries += rep->st.queries;
	acc->st.allowed += rep->st.allowed;
	acc->st.refused += rep->st.refused;
	acc->st.failed += rep->st.failed;
	acc->st.malformed += rep->st.malformed;
	acc->st.spoofed += rep->st.spoofed;
	acc->st.foreign += rep->st.foreign;
	acc->st.withheld += rep->st.withheld;
	acc->granted += rep->granted;
	acc->denied += rep->denied;
	if (!acc->fault[0])
		snprintf(acc->fault, sizeof(acc->fault), "%s", rep->fault);
	for (i = 0; i < rep->nrefused && acc->nrefused < DNS_PROXY_REFUSED_KEEP; i++) {
		for (j = 0; j < acc->nrefused; j++)
			if (!strcmp(acc->refused[j], rep->refused[i]))
				break;
		if (j == acc->nrefused)
			snprintf(acc->refused[acc->nrefused++], DNS_HELPER_NAME_MAX, "%s",
				 rep->refused[i]);
	}
}

/*
 * A new --allow-host list: the helper is replaced by one with the new
 * list (it holds no state worth keeping; a query in flight is lost and
 * the guest's resolver asks again). Addresses already learned stay open
 * until their TTL, as they would in the guest's own cache. Returns
 * -errno when nothing changed, 1 when the list changed but the new helper
 * did not start (DNS is dead for the run: the record's dns fault says why).
 */
int run_net_set_hosts(struct run_egress *N, char *const *hosts, unsigned n)
{
	static struct dns_helper_report rep;	/* 4 KiB of names: not on the stack */
	char *nh[RUN_MAX_ALLOW_HOST];
	unsigned i;
	int err;

	if (n > RUN_MAX_ALLOW_HOST)
		return husk_seterr(EINVAL, "at most %d allowed hosts", RUN_MAX_ALLOW_HOST);
	if (!N->dns_tried)
		return husk_seterr(EAGAIN, "the DNS proxy has not started yet");
	if (n && !N->nr_hosts) {
		struct sockaddr_storage up;
		socklen_t ulen;

		if (dns_upstream(N, &up, &ulen))
			return husk_seterr(EINVAL, "allowed hosts need an upstream resolver: %s",
					   husk_lasterr());
	}
	for (i = 0; i < n; i++) {
		if (!(nh[i] = strdup(hosts[i]))) {
			while (i--)
				free(nh[i]);
			return husk_seterr(ENOMEM, "out of memory");
		}
	}
	if (N->dns) {
		dns_helper_stop(N->dns, &rep);
		N->dns = NULL;
		dns_add(&N->dns_acc, &rep);
	}
	for (i = 0; i < N->nr_hosts; i++)
		free(N->hosts[i]);
	memcpy(N->hosts, nh, n * sizeof(*nh));
	N->nr_hosts = n;
	err = helper_start(N);
	if (!err)
		return 0;
	/* The list changed; the guest's queries go unanswered from now on. */
	if (!N->dns_acc.fault[0])
		snprintf(N->dns_acc.fault, sizeof(N->dns_acc.fault),
			 "the DNS helper did not restart: %s", husk_lasterr());
	husk_msg("warning: dns: %s", N->dns_acc.fault);
	return 1;
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
	memset(&rep, 0, sizeof(rep));
	if (N->dns)
		dns_helper_stop(N->dns, &rep);
	N->dns = NULL;
	dns_add(&N->dns_acc, &rep);
	rep = N->dns_acc;
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
	N->slot_fd = N->watch_fd = N->dns_uid_lock = N->ns_fd = -1;
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
	if (N->nat_on && netns_nat_del(N->ns_fd, N->slot))
		husk_msg("warning: %s", husk_lasterr());
	if (N->ns_fd >= 0)
		close(N->ns_fd);
	if (N->slot_fd >= 0)
		close(N->slot_fd);	/* unlocks the slot */
	for (unsigned i = 0; i < N->nr_hosts; i++)
		free(N->hosts[i]);
	free(N);
}

void run_net_clean_stale(void)
{
	int n = netlink_del_stale_taps("husk", NET_LOCK_DIR);

	if (n > 0)
		husk_debug("net: removed %d stale tap(s)", n);
}
