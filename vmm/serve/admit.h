/*
 * admit: husk serve's admission decisions, pure. Given the daemon's limits
 * and what is in use, it says whether a request can ever start (else it is
 * refused at once, with the reason), whether it starts now, waits, or is
 * refused as busy, and what to do next with the queue. serve.c gathers the
 * figures and acts on the answers; the unit tests play every case.
 *
 * Rules (docs/api.md, "Admission, queue and pool"):
 * - A request that can never fit (more guest RAM than max_mem or than one
 *   uid's share, more vCPUs than max_vcpus) is refused, never queued.
 * - A request starts when it fits now: room under max_vms and max_mem (a
 *   pooled clone it claims is already counted), and room in its uid's share
 *   of sandboxes and memory (root has no share).
 * - Otherwise it waits in the queue, if the queue and its uid's share of
 *   the queue have a place; else it is busy.
 * - The queue is served oldest first, but a request that does not fit lets
 *   the ones behind it that fit pass. Once the oldest request waiting for
 *   room has waited age_us, it holds that room: nothing else that needs
 *   room starts before it (so a large request is not starved by a stream
 *   of small ones). A request waiting only for its own uid's sandboxes to
 *   end never holds anyone.
 * - A request queued longer than wait_us is refused (busy).
 * - An idle pooled clone is given up only for a request that would then
 *   fit, and only when the sandboxes already ending would not make room.
 */
#ifndef HUSK_ADMIT_H
#define HUSK_ADMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct admit_limits {
	unsigned max_vms;
	uint64_t max_mem_mib;
	unsigned max_queue;
	unsigned max_vcpus;		/* per sandbox */
	/* One uid's share (root is exempt). */
	unsigned uid_vms;
	uint64_t uid_mem_mib;
	unsigned uid_queue;
	uint64_t age_us;		/* a request waiting this long holds the room it needs */
	uint64_t wait_us;		/* one waiting this long is refused */
};

/* The daemon's sandboxes that have not ended, pooled clones included. */
struct admit_use {
	unsigned vms;
	uint64_t mem_mib;
	unsigned idle_pooled;		/* unclaimed pool clones that may be given up */
	uint64_t idle_pooled_mem;
	unsigned ending;		/* being stopped: their room comes back soon */
	uint64_t ending_mem;
	unsigned queued;
};

/* One uid's own sandboxes and queued requests. */
struct admit_uid_use {
	unsigned vms;
	uint64_t mem_mib;
	unsigned queued;
};

struct admit_req {
	uint64_t mem_mib;
	unsigned vcpus;
	bool pooled;			/* a pool clone takes it: no new room needed */
	bool exempt;			/* root: no share */
	struct admit_uid_use uid;	/* its uid's, not counting this request */
	uint64_t waited_us;		/* in the queue: how long so far */
};

enum admit_fit {
	ADMIT_FITS,			/* it may start now */
	ADMIT_WAIT_UID,			/* its uid's own sandboxes must end first */
	ADMIT_WAIT_ROOM,		/* sandboxes of anyone must end first */
};

/*
 * Whether r can ever start under lim: 0, or -E2BIG with why (a sentence
 * for the client: what was asked and the limit) in why[len].
 */
int admit_check(const struct admit_limits *lim, const struct admit_req *r, char *why,
		size_t len);

/* Whether r (checked) fits now. */
enum admit_fit admit_fit(const struct admit_limits *lim, const struct admit_use *u,
			 const struct admit_req *r);

enum admit_verdict {
	ADMIT_START,			/* start it now */
	ADMIT_QUEUE,			/* it waits */
	ADMIT_BUSY,			/* no place in the queue (or in its uid's share of it) */
};

/*
 * A new request r (checked). q[0..n) is the queue, oldest first: its
 * holder, if any, keeps r from taking room it waits for.
 */
enum admit_verdict admit_new(const struct admit_limits *lim, const struct admit_use *u,
			     const struct admit_req *q, unsigned n, const struct admit_req *r);

enum admit_action {
	ADMIT_NONE,			/* nothing to do until something changes */
	ADMIT_DEQUEUE,			/* start q[*which] now */
	ADMIT_EXPIRE,			/* refuse q[*which]: it waited wait_us */
	ADMIT_EVICT,			/* give up one idle pooled clone for q[*which] */
};

/*
 * The next step for the queue q[0..n), oldest first (each entry's uid use
 * and waited_us current). Call again after acting on it, with the figures
 * updated, until ADMIT_NONE.
 */
enum admit_action admit_next(const struct admit_limits *lim, const struct admit_use *u,
			     const struct admit_req *q, unsigned n, unsigned *which);

#endif
