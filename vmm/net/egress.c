/*
 * egress: loader for the eBPF egress filter. See egress.h.
 *
 * The program and maps come from the bpftool skeleton generated at build
 * time (bpf/egress.skel.h, embedding bpf/egress.bpf.o), so husk carries no
 * separate object file to find at run time. One program instance serves all
 * VMs; attaching a VM is adding map entries and a tc filter that points at
 * the same program fd.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "net/egress.h"
#include "egress.skel.h"
#include "net/netlink.h"
#include "net/ranges.h"
#include "lib/util.h"

/* Our tc filter's identity on each tap: handle "HU", first priority. */
#define EGRESS_TC_HANDLE	0x4855
#define EGRESS_TC_PRIO		1

static struct egress_bpf *skel;
static int watch_fd = -1;		/* egress_watch_host_addrs() */
static bool host_absolute;		/* egress_absolute_builtins() */
static struct ring_buffer *events_rb;
static egress_event_fn event_fn;
static void *event_opaque;

static const char *const reason_names[EGRESS_DROP__MAX] = {
	[EGRESS_DROP_MALFORMED] = "malformed",
	[EGRESS_DROP_VLAN] = "vlan",
	[EGRESS_DROP_ETHERTYPE] = "ethertype",
	[EGRESS_DROP_SPOOF_MAC] = "spoofed-mac",
	[EGRESS_DROP_SPOOF_IP] = "spoofed-ip",
	[EGRESS_DROP_ARP] = "arp",
	[EGRESS_DROP_FRAGMENT] = "fragment",
	[EGRESS_DROP_IP_OPTIONS] = "ip-options",
	[EGRESS_DROP_DENY_RANGE] = "deny-range",
	[EGRESS_DROP_NOT_ALLOWED] = "not-allowed",
	[EGRESS_DROP_PORT] = "port",
	[EGRESS_DROP_DNS] = "dns",
	[EGRESS_DROP_DOT] = "dot",
	[EGRESS_DROP_ND] = "nd",
	[EGRESS_DROP_ANOMALY] = "anomaly",
};

const char *egress_reason_name(unsigned int reason)
{
	return reason < EGRESS_DROP__MAX ? reason_names[reason] : "unknown";
}

/* libbpf's own chatter only with --verbose: husk reports the failure itself. */
static int libbpf_print(enum libbpf_print_level level, const char *fmt,
			va_list ap)
{
	if (!husk_verbose || level == LIBBPF_DEBUG)
		return 0;
	return vfprintf(stderr, fmt, ap);
}

static int load_error(int err)
{
	if (err == EPERM || err == EACCES)
		return husk_seterr(err, "loading the eBPF egress filter: %s "
				   "(needs root, or CAP_BPF + CAP_NET_ADMIN)",
				   strerror(err));
	if (err == ENOSYS || err == EINVAL)
		return husk_seterr(err, "loading the eBPF egress filter: %s "
				   "(kernel without BPF, or too old: needs "
				   "ring buffers and BPF atomics, Linux >= 5.12)",
				   strerror(err));
	return husk_seterr(err, "loading the eBPF egress filter: %s "
			   "(run with --verbose for the verifier log)",
			   strerror(err));
}

static int on_event(void *ctx, void *data, size_t len)
{
	if (len >= sizeof(struct egress_event) && event_fn)
		event_fn(data, event_opaque);
	return 0;
}

int egress_open(void)
{
	int err;

	if (skel)
		return 0;
	libbpf_set_print(libbpf_print);
	skel = egress_bpf__open();
	if (!skel)
		return load_error(errno ? errno : EINVAL);
	err = egress_bpf__load(skel);
	if (err) {
		egress_bpf__destroy(skel);
		skel = NULL;
		return load_error(-err);
	}
	events_rb = ring_buffer__new(bpf_map__fd(skel->maps.egress_events),
				     on_event, NULL, NULL);
	if (!events_rb) {
		err = errno ? errno : ENOMEM;
		egress_bpf__destroy(skel);
		skel = NULL;
		return husk_seterr(err, "egress filter: ring buffer: %s",
				   strerror(err));
	}
	return 0;
}

void egress_close(void)
{
	if (watch_fd >= 0)
		close(watch_fd);
	watch_fd = -1;
	ring_buffer__free(events_rb);
	events_rb = NULL;
	egress_bpf__destroy(skel);
	skel = NULL;
	host_absolute = false;
}

static int need_open(void)
{
	if (!skel)
		return husk_seterr(ENODEV, "egress filter is not loaded "
				   "(egress_open() first)");
	return 0;
}

int egress_prog_fd(void)
{
	return skel ? bpf_program__fd(skel->progs.egress_filter) : -ENODEV;
}

int egress_count_prog_fd(void)
{
	return skel ? bpf_program__fd(skel->progs.egress_count_in) : -ENODEV;
}

static int map_fd(struct bpf_map *m)
{
	return bpf_map__fd(m);
}

int egress_configure(int ifindex, const struct egress_policy *pol)
{
	struct egress_config cfg;
	struct egress_state st;
	struct egress_denied_log log;
	struct egress_counters *zero;
	__u32 key = ifindex;
	int ncpu, err;

	if ((err = need_open()))
		return err;
	if (ifindex <= 0)
		return husk_seterr(EINVAL, "egress filter: bad ifindex %d", ifindex);
	memset(&cfg, 0, sizeof(cfg));
	memcpy(cfg.guest_mac, pol->guest_mac, 6);
	cfg.guest_ip4 = pol->guest_ip4.s_addr;
	cfg.gw_ip4 = pol->gateway_ip4.s_addr;
	if (pol->has_ip6) {
		cfg.flags |= EGRESS_CF_IPV6;
		memcpy(cfg.guest_ip6, &pol->guest_ip6, 16);
		memcpy(cfg.gw_ip6, &pol->gateway_ip6, 16);
	}
	cfg.window_ms = pol->window_ms;
	cfg.max_conns_window = pol->max_conns_window;
	cfg.max_dsts = pol->max_dsts;
	cfg.max_bytes_total = pol->max_bytes_total;
	cfg.max_bytes_window = pol->max_bytes_window;

	/* Counters and state first: the program drops until all three exist. */
	ncpu = libbpf_num_possible_cpus();
	if (ncpu <= 0)
		return husk_seterr(-ncpu, "egress filter: cannot count CPUs");
	zero = calloc(ncpu, sizeof(*zero));
	if (!zero)
		return husk_seterr(ENOMEM, "egress filter: out of memory");
	memset(&st, 0, sizeof(st));
	memset(&log, 0, sizeof(log));
	if (bpf_map_update_elem(map_fd(skel->maps.egress_counters), &key, zero, BPF_ANY) ||
	    bpf_map_update_elem(map_fd(skel->maps.egress_state), &key, &st, BPF_ANY) ||
	    bpf_map_update_elem(map_fd(skel->maps.egress_denied), &key, &log, BPF_ANY) ||
	    bpf_map_update_elem(map_fd(skel->maps.egress_cfg), &key, &cfg, BPF_ANY)) {
		err = errno;
		free(zero);
		return husk_seterr(err, "egress filter: configuring ifindex %d: %s",
				   ifindex, strerror(err));
	}
	free(zero);
	return 0;
}

/*
 * The filter on the tap's ingress (what the guest sends) and the counter on
 * its egress (what the guest is sent). Both share the one clsact qdisc.
 */
int egress_attach(int ifindex, const struct egress_policy *pol)
{
	DECLARE_LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = ifindex,
			    .attach_point = BPF_TC_INGRESS);
	DECLARE_LIBBPF_OPTS(bpf_tc_opts, opts, .handle = EGRESS_TC_HANDLE,
			    .priority = EGRESS_TC_PRIO,
			    .prog_fd = egress_prog_fd(),
			    .flags = BPF_TC_F_REPLACE);
	DECLARE_LIBBPF_OPTS(bpf_tc_hook, out_hook, .ifindex = ifindex,
			    .attach_point = BPF_TC_EGRESS);
	DECLARE_LIBBPF_OPTS(bpf_tc_opts, out_opts, .handle = EGRESS_TC_HANDLE,
			    .priority = EGRESS_TC_PRIO,
			    .prog_fd = egress_count_prog_fd(),
			    .flags = BPF_TC_F_REPLACE);
	int err;

	err = egress_configure(ifindex, pol);
	if (err)
		return err;
	err = bpf_tc_hook_create(&hook);
	if (err && err != -EEXIST) {
		egress_detach(ifindex);
		return husk_seterr(-err, "egress filter: creating the clsact qdisc "
				   "on ifindex %d: %s (is sch_ingress/cls_bpf "
				   "available?)", ifindex, strerror(-err));
	}
	err = bpf_tc_attach(&hook, &opts);
	if (err) {
		egress_detach(ifindex);
		return husk_seterr(-err, "egress filter: attaching to ingress of "
				   "ifindex %d: %s", ifindex, strerror(-err));
	}
	err = bpf_tc_attach(&out_hook, &out_opts);
	if (err) {
		egress_detach(ifindex);
		return husk_seterr(-err, "egress filter: attaching the counter to "
				   "egress of ifindex %d: %s", ifindex,
				   strerror(-err));
	}
	return 0;
}

/*
 * Delete every key of map m for which belongs(key) is true. Keys are
 * gathered first: deleting during get_next_key iteration restarts walks.
 */
static int purge(struct bpf_map *m, int ifindex,
		 int (*belongs)(const void *key, int ifindex))
{
	size_t ksz = bpf_map__key_size(m), n = 0, cap = 0;
	int fd = map_fd(m), err = 0;
	char *keys = NULL, *cur = NULL, *next;
	size_t i;

	next = malloc(ksz);
	if (!next)
		return -ENOMEM;
	while (bpf_map_get_next_key(fd, cur, next) == 0) {
		if (belongs(next, ifindex)) {
			if (n == cap) {
				char *k;

				cap = cap ? cap * 2 : 64;
				k = realloc(keys, cap * ksz);
				if (!k) {
					err = -ENOMEM;
					break;
				}
				keys = k;
			}
			memcpy(keys + n * ksz, next, ksz);
			n++;
		}
		if (!cur && !(cur = malloc(ksz))) {
			err = -ENOMEM;
			break;
		}
		memcpy(cur, next, ksz);
	}
	for (i = 0; i < n; i++)
		bpf_map_delete_elem(fd, keys + i * ksz);
	free(keys);
	free(cur);
	free(next);
	return err;
}

/* All our multi-field keys start with (prefixlen,) ifindex: see egress.h. */
static int lpm_belongs(const void *key, int ifindex)
{
	const struct egress_lpm4 *k = key;

	return k->ifindex == (__u32)ifindex;
}

static int first_u32_belongs(const void *key, int ifindex)
{
	return *(const __u32 *)key == (__u32)ifindex;
}

int egress_detach(int ifindex)
{
	DECLARE_LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = ifindex,
			    .attach_point = BPF_TC_INGRESS);
	DECLARE_LIBBPF_OPTS(bpf_tc_opts, opts, .handle = EGRESS_TC_HANDLE,
			    .priority = EGRESS_TC_PRIO);
	DECLARE_LIBBPF_OPTS(bpf_tc_hook, out_hook, .ifindex = ifindex,
			    .attach_point = BPF_TC_EGRESS);
	DECLARE_LIBBPF_OPTS(bpf_tc_opts, out_opts, .handle = EGRESS_TC_HANDLE,
			    .priority = EGRESS_TC_PRIO);
	__u32 key = ifindex;
	int err;

	if ((err = need_open()))
		return err;
	/* The tap may be gone already (its filters went with it): fine. */
	err = bpf_tc_detach(&hook, &opts);
	if (err && err != -ENOENT && err != -ENODEV && err != -EINVAL)
		husk_debug("egress: detaching from ifindex %d: %s", ifindex,
			   strerror(-err));
	err = bpf_tc_detach(&out_hook, &out_opts);
	if (err && err != -ENOENT && err != -ENODEV && err != -EINVAL)
		husk_debug("egress: detaching the counter from ifindex %d: %s",
			   ifindex, strerror(-err));

	/* Config first, so packets in flight are dropped, not half-counted. */
	bpf_map_delete_elem(map_fd(skel->maps.egress_cfg), &key);
	bpf_map_delete_elem(map_fd(skel->maps.egress_counters), &key);
	bpf_map_delete_elem(map_fd(skel->maps.egress_state), &key);
	bpf_map_delete_elem(map_fd(skel->maps.egress_denied), &key);
	err = purge(skel->maps.egress_allow4, ifindex, lpm_belongs);
	err = err ?: purge(skel->maps.egress_allow6, ifindex, lpm_belongs);
	err = err ?: purge(skel->maps.egress_deny4, ifindex, lpm_belongs);
	err = err ?: purge(skel->maps.egress_deny6, ifindex, lpm_belongs);
	err = err ?: purge(skel->maps.egress_flows, ifindex, first_u32_belongs);
	err = err ?: purge(skel->maps.egress_dsts, ifindex, first_u32_belongs);
	err = err ?: purge(skel->maps.egress_dyn, ifindex, first_u32_belongs);
	if (err)
		return husk_seterr(-err, "egress filter: removing the entries of "
				   "ifindex %d: %s", ifindex, strerror(-err));
	return 0;
}

/* Build an LPM key; the host bits below the prefix are cleared. */
static int lpm_key(int ifindex, int family, const void *addr,
		   unsigned int prefixlen, struct egress_lpm6 *k6,
		   struct egress_lpm4 *k4)
{
	unsigned int max = family == AF_INET ? 32 : 128, i;
	uint8_t *a;

	if ((family != AF_INET && family != AF_INET6) || prefixlen > max)
		return husk_seterr(EINVAL, "egress filter: bad prefix /%u for "
				   "address family %d", prefixlen, family);
	if (family == AF_INET) {
		memset(k4, 0, sizeof(*k4));
		k4->prefixlen = 32 + prefixlen;
		k4->ifindex = ifindex;
		memcpy(&k4->addr, addr, 4);
		a = (uint8_t *)&k4->addr;
	} else {
		memset(k6, 0, sizeof(*k6));
		k6->prefixlen = 32 + prefixlen;
		k6->ifindex = ifindex;
		memcpy(k6->addr, addr, 16);
		a = k6->addr;
	}
	for (i = prefixlen; i < max; i++)
		a[i / 8] &= ~(0x80u >> (i % 8));
	return 0;
}

static int lpm_put(struct bpf_map *m4, struct bpf_map *m6, int ifindex,
		   int family, const void *addr, unsigned int prefixlen,
		   const void *val)
{
	struct egress_lpm4 k4;
	struct egress_lpm6 k6;
	int err;

	if ((err = need_open()))
		return err;
	if ((err = lpm_key(ifindex, family, addr, prefixlen, &k6, &k4)))
		return err;
	if (bpf_map_update_elem(map_fd(family == AF_INET ? m4 : m6),
				family == AF_INET ? (void *)&k4 : (void *)&k6,
				val, BPF_ANY)) {
		err = errno;
		return husk_seterr(err, "egress filter: adding a /%u rule for "
				   "ifindex %d: %s%s", prefixlen, ifindex,
				   strerror(err), err == E2BIG ?
				   " (the filter's rule table is full)" : "");
	}
	return 0;
}

static int check_ports(unsigned int protos, const struct egress_port_range *ranges,
		       unsigned int nranges)
{
	unsigned int i;

	if (nranges > EGRESS_MAX_PORT_RANGES)
		return husk_seterr(E2BIG, "egress filter: %u port ranges for one "
				   "destination (at most %d)", nranges,
				   EGRESS_MAX_PORT_RANGES);
	if (!protos || (protos & ~EGRESS_P_ANY))
		return husk_seterr(EINVAL, "egress filter: bad protocol set 0x%x",
				   protos);
	for (i = 0; i < nranges; i++)
		if (ranges[i].lo > ranges[i].hi)
			return husk_seterr(EINVAL, "egress filter: empty port "
					   "range %u-%u", ranges[i].lo,
					   ranges[i].hi);
	return 0;
}

int egress_allow_cidr(int ifindex, int family, const void *addr,
		      unsigned int prefixlen, unsigned int protos,
		      const struct egress_port_range *ranges, unsigned int nranges)
{
	struct egress_allow v;
	unsigned int i;
	int err;

	if (ifindex <= 0)
		return husk_seterr(EINVAL, "egress filter: bad ifindex %d", ifindex);
	if ((err = check_ports(protos, ranges, nranges)))
		return err;
	memset(&v, 0, sizeof(v));
	v.protos = protos;
	v.nranges = nranges;
	v.plen = prefixlen;
	for (i = 0; i < nranges; i++)
		v.ports[i] = ranges[i];
	if (!skel)
		return need_open();
	return lpm_put(skel->maps.egress_allow4, skel->maps.egress_allow6,
		       ifindex, family, addr, prefixlen, &v);
}

int egress_deny_cidr(int ifindex, int family, const void *addr,
		     unsigned int prefixlen)
{
	struct egress_deny v = { .plen = prefixlen };

	if (ifindex < 0)
		return husk_seterr(EINVAL, "egress filter: bad ifindex %d", ifindex);
	if (!skel)
		return need_open();
	return lpm_put(skel->maps.egress_deny4, skel->maps.egress_deny6,
		       ifindex, family, addr, prefixlen, &v);
}

int egress_remove_cidr(int ifindex, bool deny, int family, const void *addr,
		       unsigned int prefixlen)
{
	struct egress_lpm4 k4;
	struct egress_lpm6 k6;
	struct bpf_map *m;
	int err;

	if (ifindex <= 0)
		return husk_seterr(EINVAL, "egress filter: bad ifindex %d", ifindex);
	if ((err = need_open()))
		return err;
	if ((err = lpm_key(ifindex, family, addr, prefixlen, &k6, &k4)))
		return err;
	if (deny)
		m = family == AF_INET ? skel->maps.egress_deny4 : skel->maps.egress_deny6;
	else
		m = family == AF_INET ? skel->maps.egress_allow4 : skel->maps.egress_allow6;
	if (bpf_map_delete_elem(map_fd(m), family == AF_INET ? (void *)&k4 : (void *)&k6) &&
	    errno != ENOENT) {
		err = errno;
		return husk_seterr(err, "egress filter: removing a /%u rule of ifindex %d: %s",
				   prefixlen, ifindex, strerror(err));
	}
	return 0;
}

int egress_block_cidr(int family, const void *addr, unsigned int prefixlen)
{
	struct egress_deny v = { .plen = prefixlen };

	if (!skel)
		return need_open();
	return lpm_put(skel->maps.egress_block4, skel->maps.egress_block6, 0,
		       family, addr, prefixlen, &v);
}

int egress_read_counters(int ifindex, struct egress_counters *out)
{
	struct egress_counters *per;
	__u32 key = ifindex;
	int ncpu, i, j, err;

	if ((err = need_open()))
		return err;
	ncpu = libbpf_num_possible_cpus();
	if (ncpu <= 0)
		return husk_seterr(-ncpu, "egress filter: cannot count CPUs");
	per = calloc(ncpu, sizeof(*per));
	if (!per)
		return husk_seterr(ENOMEM, "egress filter: out of memory");
	if (bpf_map_lookup_elem(map_fd(skel->maps.egress_counters), &key, per)) {
		err = errno;
		free(per);
		return husk_seterr(err, "egress filter: no counters for ifindex "
				   "%d: %s", ifindex, strerror(err));
	}
	memset(out, 0, sizeof(*out));
	for (i = 0; i < ncpu; i++) {
		out->packets += per[i].packets;
		out->bytes += per[i].bytes;
		out->new_conns += per[i].new_conns;
		out->dropped += per[i].dropped;
		for (j = 0; j < EGRESS_DROP__MAX; j++)
			out->drops[j] += per[i].drops[j];
		out->in_packets += per[i].in_packets;
		out->in_bytes += per[i].in_bytes;
	}
	free(per);
	return 0;
}

int egress_set_event_cb(egress_event_fn fn, void *opaque)
{
	event_fn = fn;
	event_opaque = opaque;
	return 0;
}

int egress_events_fd(void)
{
	int err;

	if ((err = need_open()))
		return err;
	return ring_buffer__epoll_fd(events_rb);
}

int egress_events_poll(void)
{
	int n, err;

	if ((err = need_open()))
		return err;
	n = ring_buffer__consume(events_rb);
	if (n < 0)
		return husk_seterr(-n, "egress filter: reading events: %s",
				   strerror(-n));
	return n;
}

/*
 * One LPM lookup with a full-length key of ifindex: 1 found (into val),
 * 0 not, -errno.
 */
static int lpm_find(struct bpf_map *m4, struct bpf_map *m6, int ifindex, int family,
		    const void *addr, void *val)
{
	struct egress_lpm4 k4;
	struct egress_lpm6 k6;
	int err = lpm_key(ifindex, family, addr, family == AF_INET ? 32 : 128, &k6, &k4);

	if (err)
		return err;
	if (!bpf_map_lookup_elem(map_fd(family == AF_INET ? m4 : m6),
				 family == AF_INET ? (void *)&k4 : (void *)&k6, val))
		return 1;
	if (errno == ENOENT)
		return 0;
	err = errno;
	return husk_seterr(err, "egress filter: looking up a rule of ifindex %d: %s",
			   ifindex, strerror(err));
}

/* ---- the host's own addresses ---- */

/*
 * One address of the host, for every VM: a /32 or /128 deny, or absolute.
 * An address an absolute range holds already (each VM's gateway, in husk's
 * pool) takes no entry of its own: the block maps are the smaller ones.
 */
static int deny_host_one(int family, const void *addr)
{
	unsigned max = family == AF_INET ? 32 : 128;
	struct egress_deny dn;
	int r;

	if (!host_absolute)
		return egress_deny_cidr(0, family, addr, max);
	r = lpm_find(skel->maps.egress_block4, skel->maps.egress_block6, 0, family, addr, &dn);
	return r < 0 ? r : r ? 0 : egress_block_cidr(family, addr, max);
}

/*
 * One address of the host, for every VM (ifindex 0). For IPv4 subnets of /30
 * and wider also their broadcast address, for which the kernel adds a local
 * broadcast route (a UDP service bound to 0.0.0.0 receives what is sent
 * there), and their network address, which older kernels treated the same
 * way (RFC 3021: /31 and /32 have neither). Computed from address and
 * prefix length: for a point-to-point address (a tap: the guest at the
 * other end) the peer is not the broadcast address. Adds to *n per address.
 */
static int deny_host_addr(int family, const void *addr, unsigned prefixlen, int *n)
{
	struct in_addr a, net, bcast;
	int err;

	err = deny_host_one(family, addr);
	if (err)
		return err;
	++*n;
	if (family != AF_INET)
		return 0;
	memcpy(&a, addr, 4);
	if (!ranges_subnet_ends(&a, prefixlen, &net, &bcast))
		return 0;
	if ((err = deny_host_one(AF_INET, &net)) || (err = deny_host_one(AF_INET, &bcast)))
		return err;
	*n += 2;
	return 0;
}

int egress_absolute_builtins(void)
{
	unsigned i;
	int err;

	if ((err = need_open()))
		return err;
	host_absolute = true;
	for (i = 0; i < ranges_nr_builtin; i++) {
		const struct net_range *r = &ranges_builtin[i];

		if (r->platform && (err = egress_block_cidr(r->family, r->addr, r->plen)))
			return err;
	}
	return 0;
}

static unsigned mask_len(const struct sockaddr *m)
{
	return m ? __builtin_popcount(((const struct sockaddr_in *)m)->sin_addr.s_addr) : 32;
}

/* Every address the host answers on, from getifaddrs (rtnetlink underneath). */
int egress_deny_host_addrs(void)
{
	struct ifaddrs *ifa, *i;
	int n = 0, err = 0;

	if ((err = need_open()))
		return err;
	if (getifaddrs(&ifa) < 0)
		return husk_seterr(errno, "egress filter: listing the host's "
				   "addresses: %s", strerror(errno));
	for (i = ifa; i && !err; i = i->ifa_next) {
		if (!i->ifa_addr)
			continue;
		if (i->ifa_addr->sa_family == AF_INET)
			err = deny_host_addr(AF_INET,
					     &((struct sockaddr_in *)i->ifa_addr)->sin_addr,
					     mask_len(i->ifa_netmask), &n);
		else if (i->ifa_addr->sa_family == AF_INET6)
			err = deny_host_addr(AF_INET6,
					     &((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr,
					     128, &n);
	}
	freeifaddrs(ifa);
	return err ? err : n;
}

/* Datagrams read per egress_watch_poll(): bounded work per wakeup. */
#define WATCH_BUDGET 32

static int on_addr_event(const struct netlink_addr_event *ev, void *arg)
{
	char s[INET6_ADDRSTRLEN];
	int err;

	/*
	 * A removed address stays denied: the same address may still be on
	 * another interface, and denying one the host no longer has costs
	 * nothing but that destination (an exact --allow reopens it).
	 */
	if (!ev->added)
		return 0;
	err = deny_host_addr(ev->family, ev->addr, ev->prefixlen, arg);
	if (err) {
		inet_ntop(ev->family, ev->addr, s, sizeof(s));
		return husk_seterr(err, "egress filter: cannot deny the host's new "
				   "address %s: %s", s, husk_lasterr());
	}
	return 0;
}

int egress_watch_host_addrs(void)
{
	int fd, n;

	if ((n = need_open()))
		return n;
	if (watch_fd >= 0)
		return watch_fd;
	/* Subscribe first: an address added while we list is then not missed. */
	fd = netlink_addr_monitor_open();
	if (fd < 0)
		return fd;
	n = egress_deny_host_addrs();
	if (n < 0) {
		close(fd);
		return n;
	}
	watch_fd = fd;
	return fd;
}

int egress_watch_poll(void)
{
	int n = 0, err;

	if ((err = need_open()))
		return err;
	if (watch_fd < 0)
		return husk_seterr(EBADF, "egress filter: the host's addresses are not "
				   "watched (egress_watch_host_addrs() first)");
	err = netlink_addr_monitor_read(watch_fd, WATCH_BUDGET, on_addr_event, &n);
	if (err == -ENOBUFS) {
		/* Announcements were lost: deny what the host has now. */
		husk_debug("egress: address announcements lost, listing the host's addresses");
		return egress_deny_host_addrs();
	}
	return err < 0 ? err : n;
}

/* ---- addresses learned from DNS answers ---- */

static uint64_t mono_ns(void)
{
	return now_us() * 1000ull;
}

static int dyn_key(int ifindex, int family, const void *addr,
		   struct egress_dyn_key *k)
{
	memset(k, 0, sizeof(*k));
	k->ifindex = ifindex;
	if (family == AF_INET) {
		k->family = 4;
		memcpy(k->addr, addr, 4);
	} else if (family == AF_INET6) {
		k->family = 6;
		memcpy(k->addr, addr, 16);
	} else {
		return husk_seterr(EAFNOSUPPORT, "egress filter: address family %d",
				   family);
	}
	return 0;
}

/*
 * Merge rule b into a: protocols are OR'd; ports are "every port" if either
 * side had every port, else the union of both lists (-E2BIG past the map's
 * EGRESS_MAX_PORT_RANGES ranges, a left unchanged).
 */
static int merge_rule(struct egress_allow *a, const struct egress_allow *b)
{
	struct egress_allow m = *a;
	unsigned int i, j;

	m.protos |= b->protos;
	if (!a->nranges || !b->nranges) {
		m.nranges = 0;
	} else {
		for (i = 0; i < b->nranges; i++) {
			for (j = 0; j < m.nranges; j++)
				if (m.ports[j].lo <= b->ports[i].lo &&
				    m.ports[j].hi >= b->ports[i].hi)
					break;
			if (j < m.nranges)
				continue;	/* already covered */
			if (m.nranges == EGRESS_MAX_PORT_RANGES)
				return husk_seterr(E2BIG, "egress filter: more than %d "
						   "port ranges for one learned "
						   "address", EGRESS_MAX_PORT_RANGES);
			m.ports[m.nranges++] = b->ports[i];
		}
	}
	*a = m;
	return 0;
}

int egress_allow_addr_ttl(int ifindex, int family, const void *addr,
			  unsigned int ttl_sec, unsigned int protos,
			  const struct egress_port_range *ranges,
			  unsigned int nranges)
{
	struct egress_dyn_key k;
	struct egress_dyn v, old;
	unsigned int i;
	int fd, err;

	if ((err = need_open()))
		return err;
	if (ifindex <= 0)
		return husk_seterr(EINVAL, "egress filter: bad ifindex %d", ifindex);
	if ((err = check_ports(protos, ranges, nranges)) ||
	    (err = dyn_key(ifindex, family, addr, &k)))
		return err;
	memset(&v, 0, sizeof(v));
	v.rule.protos = protos;
	v.rule.nranges = nranges;
	v.rule.plen = family == AF_INET ? 32 : 128;
	for (i = 0; i < nranges; i++)
		v.rule.ports[i] = ranges[i];
	v.expires_ns = mono_ns() + ttl_sec * 1000000000ull;

	fd = map_fd(skel->maps.egress_dyn);
	if (!bpf_map_lookup_elem(fd, &k, &old)) {
		/* Another name (or a fresh answer) for the same address. */
		if ((err = merge_rule(&old.rule, &v.rule)))
			return err;
		if (old.expires_ns < v.expires_ns)
			old.expires_ns = v.expires_ns;
		v = old;
	}
	if (!bpf_map_update_elem(fd, &k, &v, BPF_ANY))
		return 0;
	err = errno;
	if (err == E2BIG) {
		/* Full: make room from this VM's own stale entries, once. */
		egress_expire(ifindex, now_us());
		if (!bpf_map_update_elem(fd, &k, &v, BPF_ANY))
			return 0;
		err = errno;
	}
	return husk_seterr(err, "egress filter: opening a learned address for "
			   "ifindex %d: %s%s", ifindex, strerror(err),
			   err == E2BIG ? " (table of learned addresses is full)" : "");
}

/*
 * Is a learned entry still needed at now_ns? Until it expires, yes; after,
 * only while the guest is using it: a packet passed through it within the
 * last EGRESS_LIVE_SEC (the filter stamps last_ns).
 */
static bool dyn_keep(const struct egress_dyn *v, uint64_t now_ns)
{
	if (v->expires_ns > now_ns)
		return true;
	return v->last_ns && (v->last_ns >= now_ns ||
			      now_ns - v->last_ns < EGRESS_LIVE_SEC * 1000000000ull);
}

static int dyn_belongs(const void *key, int ifindex)
{
	return !ifindex || *(const __u32 *)key == (__u32)ifindex;
}

int egress_expire(int ifindex, uint64_t now)
{
	uint64_t now_ns = now * 1000ull;
	struct egress_dyn_key cur, next, *keys = NULL;
	struct egress_dyn v;
	size_t n = 0, cap = 0, i;
	int fd, err, removed = 0;
	bool first = true;

	if ((err = need_open()))
		return err;
	if (ifindex < 0)
		return husk_seterr(EINVAL, "egress filter: bad ifindex %d", ifindex);
	fd = map_fd(skel->maps.egress_dyn);
	/* Candidates first: deleting while walking would restart the walk. */
	while (!bpf_map_get_next_key(fd, first ? NULL : &cur, &next)) {
		first = false;
		cur = next;
		if (!dyn_belongs(&next, ifindex) ||
		    bpf_map_lookup_elem(fd, &next, &v) || dyn_keep(&v, now_ns))
			continue;
		if (n == cap) {
			struct egress_dyn_key *k;

			cap = cap ? cap * 2 : 32;
			k = realloc(keys, cap * sizeof(*k));
			if (!k) {
				free(keys);
				return husk_seterr(ENOMEM, "egress filter: out of memory");
			}
			keys = k;
		}
		keys[n++] = next;
	}
	for (i = 0; i < n; i++) {
		/*
		 * Take the entry out with its value as of that instant: a
		 * packet may have stamped it since we looked, then it goes
		 * back in (kernels before 5.14 cannot do this for hash maps:
		 * there the window is one lookup wide).
		 */
		if (bpf_map_lookup_and_delete_elem(fd, &keys[i], &v)) {
			if (errno == ENOENT)
				continue;
			if (bpf_map_lookup_elem(fd, &keys[i], &v) ||
			    dyn_keep(&v, now_ns) ||
			    bpf_map_delete_elem(fd, &keys[i]))
				continue;
		} else if (dyn_keep(&v, now_ns)) {
			bpf_map_update_elem(fd, &keys[i], &v, BPF_NOEXIST);
			continue;
		}
		removed++;
	}
	free(keys);
	return removed;
}

/*
 * The filter's policy() for a learned address, from this side: absolute
 * denies drop it; a deny range (built-in, the host's, the VM's --deny)
 * keeps every learned address out, and only an allow rule at least as
 * specific as the range opens it.
 */
int egress_learn_closed(int ifindex, int family, const void *addr)
{
	struct egress_deny dn;
	struct egress_allow al;
	unsigned deny;
	int r;

	if ((r = need_open()))
		return r;
	if (family != AF_INET && family != AF_INET6)
		return husk_seterr(EAFNOSUPPORT, "egress filter: address family %d", family);
	deny = ranges_builtin_deny(family, addr, NULL);
	if (deny == EGRESS_DENY_ABSOLUTE)
		return 1;
	r = lpm_find(skel->maps.egress_block4, skel->maps.egress_block6, 0, family, addr, &dn);
	if (r)
		return r < 0 ? r : 1;
	r = lpm_find(skel->maps.egress_deny4, skel->maps.egress_deny6, 0, family, addr, &dn);
	if (r < 0)
		return r;
	if (r && dn.plen > deny)
		deny = dn.plen;
	r = lpm_find(skel->maps.egress_deny4, skel->maps.egress_deny6, ifindex, family, addr,
		     &dn);
	if (r < 0)
		return r;
	if (r && dn.plen > deny)
		deny = dn.plen;
	if (!deny)
		return 0;
	r = lpm_find(skel->maps.egress_allow4, skel->maps.egress_allow6, ifindex, family, addr,
		     &al);
	if (r < 0)
		return r;
	return !(r && al.plen >= deny);
}

/* ---- refused destinations ---- */

int egress_read_denied(int ifindex, struct egress_denied_dst *out, unsigned int n)
{
	struct egress_denied_log log;
	__u32 key = ifindex;
	unsigned int i, j, got = 0, count;
	int err;

	if ((err = need_open()))
		return err;
	if (bpf_map_lookup_elem(map_fd(skel->maps.egress_denied), &key, &log)) {
		err = errno;
		return husk_seterr(err, "egress filter: no denied log for ifindex "
				   "%d: %s", ifindex, strerror(err));
	}
	count = log.count < EGRESS_DENIED_MAX ? log.count : EGRESS_DENIED_MAX;
	for (i = 0; i < count && got < n; i++) {
		const struct egress_denied_dst *d = &log.dst[i];

		if (d->family != 4 && d->family != 6)
			continue;	/* claimed, still being written */
		for (j = 0; j < got; j++)
			if (out[j].family == d->family && out[j].proto == d->proto &&
			    out[j].port == d->port &&
			    !memcmp(out[j].addr, d->addr, sizeof(d->addr)))
				break;
		if (j == got)
			out[got++] = *d;
	}
	return got;
}

/* ---- one learned address at a time (the DNS proxy's per-VM table) ---- */

int egress_expire_addr(int ifindex, int family, const void *addr, uint64_t now)
{
	uint64_t now_ns = now * 1000ull;
	struct egress_dyn_key k;
	struct egress_dyn v;
	int fd, err;

	if ((err = need_open()))
		return err;
	if (ifindex <= 0)
		return husk_seterr(EINVAL, "egress filter: bad ifindex %d", ifindex);
	if ((err = dyn_key(ifindex, family, addr, &k)))
		return err;
	fd = map_fd(skel->maps.egress_dyn);
	if (bpf_map_lookup_elem(fd, &k, &v)) {
		err = errno;
		if (err == ENOENT)
			return -ENOENT;
		return husk_seterr(err, "egress filter: looking up a learned address of "
				   "ifindex %d: %s", ifindex, strerror(err));
	}
	if (dyn_keep(&v, now_ns))
		return 0;
	/* As in egress_expire(): out with its value of that instant. */
	if (bpf_map_lookup_and_delete_elem(fd, &k, &v)) {
		if (errno == ENOENT)
			return -ENOENT;
		if (bpf_map_lookup_elem(fd, &k, &v))
			return -ENOENT;
		if (dyn_keep(&v, now_ns))
			return 0;
		if (bpf_map_delete_elem(fd, &k)) {
			err = errno;
			if (err == ENOENT)
				return -ENOENT;
			return husk_seterr(err, "egress filter: removing a learned address "
					   "of ifindex %d: %s", ifindex, strerror(err));
		}
		return 1;
	}
	if (dyn_keep(&v, now_ns)) {
		/* A packet stamped it meanwhile: it stays. */
		bpf_map_update_elem(fd, &k, &v, BPF_NOEXIST);
		return 0;
	}
	return 1;
}
