/*
 * admit: husk serve's admission decisions. See admit.h.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include "serve/admit.h"

int admit_check(const struct admit_limits *lim, const struct admit_req *r, char *why,
		size_t len)
{
	if (r->mem_mib > lim->max_mem_mib) {
		snprintf(why, len, "the sandbox needs %" PRIu64 " MiB of guest RAM, more than this "
			 "daemon ever runs (max_mem %" PRIu64 " MiB): ask for less", r->mem_mib,
			 lim->max_mem_mib);
		return -E2BIG;
	}
	if (!r->exempt && lim->uid_mem_mib && r->mem_mib > lim->uid_mem_mib) {
		snprintf(why, len, "the sandbox needs %" PRIu64 " MiB of guest RAM, more than one "
			 "user's share (uid_max_mem %" PRIu64 " MiB): ask for less", r->mem_mib,
			 lim->uid_mem_mib);
		return -E2BIG;
	}
	if (lim->max_vcpus && r->vcpus > lim->max_vcpus) {
		snprintf(why, len, "the sandbox has %u vCPUs, more than this daemon allows "
			 "(max_vcpus %u): ask for fewer", r->vcpus, lim->max_vcpus);
		return -E2BIG;
	}
	return 0;
}

static bool uid_full(const struct admit_limits *lim, const struct admit_req *r)
{
	if (r->exempt)
		return false;
	return (lim->uid_vms && r->uid.vms >= lim->uid_vms) ||
	       (lim->uid_mem_mib && r->uid.mem_mib + r->mem_mib > lim->uid_mem_mib);
}

static bool room_for(unsigned vms, uint64_t mem, const struct admit_limits *lim,
		     const struct admit_req *r)
{
	return vms < lim->max_vms && mem + r->mem_mib <= lim->max_mem_mib;
}

enum admit_fit admit_fit(const struct admit_limits *lim, const struct admit_use *u,
			 const struct admit_req *r)
{
	if (uid_full(lim, r))
		return ADMIT_WAIT_UID;
	if (r->pooled || room_for(u->vms, u->mem_mib, lim, r))
		return ADMIT_FITS;
	return ADMIT_WAIT_ROOM;
}

/* The request that holds the room it waits for: the oldest waiting for room, once aged. */
static int holder(const struct admit_limits *lim, const struct admit_use *u,
		  const struct admit_req *q, unsigned n)
{
	unsigned i;

	for (i = 0; i < n; i++)
		if (admit_fit(lim, u, &q[i]) == ADMIT_WAIT_ROOM)
			return q[i].waited_us >= lim->age_us ? (int)i : -1;
	return -1;
}

static bool queue_has_place(const struct admit_limits *lim, const struct admit_use *u,
			    const struct admit_req *r)
{
	if (u->queued >= lim->max_queue)
		return false;
	return r->exempt || !lim->uid_queue || r->uid.queued < lim->uid_queue;
}

enum admit_verdict admit_new(const struct admit_limits *lim, const struct admit_use *u,
			     const struct admit_req *q, unsigned n, const struct admit_req *r)
{
	if (admit_fit(lim, u, r) == ADMIT_FITS && (r->pooled || holder(lim, u, q, n) < 0))
		return ADMIT_START;
	return queue_has_place(lim, u, r) ? ADMIT_QUEUE : ADMIT_BUSY;
}

/* Give up an idle pooled clone for r: only if that makes room and the ending ones do not. */
static bool evict_for(const struct admit_limits *lim, const struct admit_use *u,
		      const struct admit_req *r)
{
	unsigned vms = u->vms - u->ending;
	uint64_t mem = u->mem_mib - u->ending_mem;

	if (!u->idle_pooled || room_for(vms, mem, lim, r))
		return false;
	return room_for(vms - u->idle_pooled, mem - u->idle_pooled_mem, lim, r);
}

enum admit_action admit_next(const struct admit_limits *lim, const struct admit_use *u,
			     const struct admit_req *q, unsigned n, unsigned *which)
{
	int h = holder(lim, u, q, n), first_room = -1;
	unsigned i;

	for (i = 0; i < n; i++) {
		if (lim->wait_us && q[i].waited_us >= lim->wait_us) {
			*which = i;
			return ADMIT_EXPIRE;
		}
	}
	for (i = 0; i < n; i++) {
		enum admit_fit f = admit_fit(lim, u, &q[i]);

		/* Older than the holder, or taking no room: it may go first. */
		if (f == ADMIT_FITS && (q[i].pooled || h < 0 || (int)i < h)) {
			*which = i;
			return ADMIT_DEQUEUE;
		}
		if (f == ADMIT_WAIT_ROOM && first_room < 0)
			first_room = (int)i;
	}
	if (first_room >= 0 && evict_for(lim, u, &q[first_room])) {
		*which = (unsigned)first_room;
		return ADMIT_EVICT;
	}
	return ADMIT_NONE;
}
