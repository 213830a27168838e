/*
 * run_net: `husk run --net egress` on the supervisor's side: a network slot
 * (lock file), the tap named after it, the host end of the point-to-point
 * link, the eBPF egress filter with the job's rules, and the filter's
 * anomaly events. The VM process only inherits the tap's fd; it never holds
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
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "egress.h"
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
		n += snprintf(a + n, len - n, "bytes out %llu in one window; ",
			      (unsigned long long)ev->window_bytes);
	if ((ev->what & EGRESS_ANOM_DSTS) && n < len)
		n += snprintf(a + n, len - n, "distinct destinations %llu; ",
			      (unsigned long long)ev->distinct_dsts);
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
	err = egress_set_event_cb(on_egress_event, N);
	if (err)
		return err;
	err = egress_attach(N->ifindex, &pol);
	if (err)
		return err;
	N->egress_on = true;
	for (i = 0; i < o->nr_allow; i++) {
		const struct run_allow *a = &o->allow[i];

		err = egress_allow_cidr(N->ifindex, AF_INET, &a->addr, a->prefixlen, a->protos,
					a->ports, a->nports);
		if (err)
			return err;
	}
	husk_debug("net: slot %d, %s, guest %s", slot, N->ifname, inet_ntoa(N->lease.guest));
	return 0;
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
	N->slot_fd = -1;
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

/* After the VM process is gone (the tap's last fd with it, so the tap). */
void run_net_teardown(struct run_egress *N, struct run_result *r)
{
	if (!N)
		return;
	if (N->egress_on) {
		r->net = true;
		r->net_counters = !egress_read_counters(N->ifindex, &r->net_ctr);
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
}
