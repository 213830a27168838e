/*
 * dns_helper: the per-VM DNS proxy (dns_proxy.h) in a confined process of
 * its own, so that no byte the guest or the upstream resolver sends is
 * parsed by the root supervisor.
 *
 *   supervisor                              helper (child)
 *   dns_helper_start():
 *     bind gateway:53 (UDP, TCP), connect
 *     the upstream pool; socketpair; a
 *     shared page
 *     jail_fork(JAIL_NEWNET) --------------> every other fd closed, signals
 *     cgroup_attach(helper)                  blocked; waits for GO
 *     GO ---------------------------------->
 *                                            builds the proxy, then jail_enter():
 *                                            empty read-only root, its own uid,
 *                                            no capabilities, no_new_privs, not
 *                                            dumpable, rlimits, own session;
 *                                            then seccomp (SECCOMP_KIND_DNS_HELPER);
 *                                            wipes its copy of our argv and environ
 *     waits (bounded) for READY <----------- READY
 *   run loop: dns_helper_fd() readable
 *     -> dns_helper_handle()    <----------- LEARN {tag, family, address, TTL}
 *        check it, cfg.learn (quota, filter)
 *        ACK {tag, status}      -----------> releases the answer, or SERVFAIL
 *   dns_helper_stop(): SIGKILL, reap, read the shared page
 *
 * The helper is PID 1 of its own PID namespace (it sees no other process,
 * and the VM process, in another, cannot see or signal it), in its own
 * mount, IPC, UTS and network namespaces: its network namespace is empty,
 * so only the sockets it was handed reach anything, and its seccomp list
 * has no socket(), connect() or open() anyway. It gets SIGKILL when the supervisor's thread that started
 * it ends (PR_SET_PDEATHSIG), holds no file, map or lock, and so leaves
 * nothing behind on any path.
 *
 * Wire: one fixed-size struct dns_wire per SOCK_SEQPACKET message, both
 * ways. The supervisor takes a message only with exactly that size, the
 * type its state expects and every field in range with the unused ones
 * zero. Anything else - a malformed message, a helper that does not read
 * its acknowledgements (the non-blocking send fails), a closed channel, an
 * exit - ends DNS for the run: the helper is killed, the first reason is
 * kept (dns_helper_report.fault) and the guest's queries go unanswered from
 * then on; the VM runs on. dns_helper_handle() reads at most
 * DNS_HELPER_BATCH messages per call and never blocks on the helper; only
 * dns_helper_start() waits for READY (at most ready_ms) and
 * dns_helper_stop() reaps after SIGKILL.
 *
 * Statistics and refused names come back through the shared page, which
 * the supervisor reads only once the helper is dead; every count is
 * clamped and every string cut, NUL-terminated and made printable first.
 *
 * Supervisor side: single-threaded, call everything from one thread.
 */
#ifndef HUSK_DNS_HELPER_H
#define HUSK_DNS_HELPER_H

#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "sandbox/cgroup.h"
#include "net/dns_proxy.h"

#define DNS_HELPER_BATCH	32	/* messages handled per dns_helper_handle() */
#define DNS_HELPER_READY_MS	10000	/* default wait for READY */
#define DNS_HELPER_NAME_MAX	256	/* bytes kept per refused name */
#define DNS_HELPER_TICK_MS	1000	/* cfg.tick period */

enum dns_wire_type {
	DNS_WIRE_GO = 1,	/* supervisor -> helper: in the cgroup, go on */
	DNS_WIRE_READY,		/* helper -> supervisor: confined (status 0) or not (-errno) */
	DNS_WIRE_LEARN,		/* helper -> supervisor: open addr for ttl; seq = proxy tag */
	DNS_WIRE_ACK,		/* supervisor -> helper: seq's outcome, status 0 or -errno */
};

struct dns_wire {
	uint32_t type;		/* enum dns_wire_type */
	uint32_t seq;		/* LEARN, ACK */
	int32_t status;		/* READY, ACK */
	uint32_t ttl;		/* LEARN: DNS_PROXY_MIN_TTL..DNS_PROXY_MAX_TTL seconds */
	uint8_t family;		/* LEARN: 4 or 6 */
	uint8_t pad[3];		/* zero */
	uint8_t addr[16];	/* LEARN: network order; IPv4 in the first 4, rest zero */
};

/* The supervisor's decision on one address (the quota, the filter): 0 or -errno. */
typedef int (*dns_helper_learn_fn)(void *arg, int family, const uint8_t *addr,
				   uint32_t ttl_sec);
/* Called from dns_helper_handle() about every DNS_HELPER_TICK_MS (expiry). */
typedef void (*dns_helper_tick_fn)(void *arg, uint64_t now_us);

struct dns_helper_cfg {
	const char *const *allow;	/* --allow-host patterns */
	unsigned nallow;
	const struct sockaddr *bind;	/* the gateway, port 53 (0: any, tests) */
	socklen_t bind_len;
	const struct sockaddr *guest;	/* the only source it answers */
	socklen_t guest_len;
	const struct sockaddr *upstream;
	socklen_t ulen;
	const char *root;		/* an empty directory: the helper's "/" */
	uid_t uid;			/* its own; 0: not changed (husk not root) */
	gid_t gid;
	const struct husk_cgroup *cg;	/* the VM's cgroup, or NULL */
	unsigned ready_ms;		/* 0: DNS_HELPER_READY_MS */
	unsigned query_ms, idle_ms;	/* proxy timeouts; 0: its defaults */
	dns_helper_learn_fn learn;
	dns_helper_tick_fn tick;	/* may be NULL */
	void *arg;
};

struct dns_helper_report {
	struct dns_proxy_stats st;	/* the helper's own counts: its word only */
	unsigned nrefused;
	char refused[DNS_PROXY_REFUSED_KEEP][DNS_HELPER_NAME_MAX];
	uint64_t granted;		/* learn requests cfg.learn accepted ... */
	uint64_t denied;		/* ... and refused */
	char fault[256];		/* why DNS ended early, or "" */
};

struct dns_helper;

/*
 * Make the sockets, fork and confine the helper and wait for its READY.
 * -errno with husk_lasterr() saying what failed (the helper's own words
 * when it could not confine itself); nothing is left running then.
 */
int dns_helper_start(struct dns_helper **hp, const struct dns_helper_cfg *cfg);

/* An fd to poll for POLLIN; dns_helper_handle() when it is readable. Valid until stop. */
int dns_helper_fd(const struct dns_helper *h);
/* Bounded work on the channel, the helper's exit and the tick; never blocks. */
void dns_helper_handle(struct dns_helper *h);

/* The helper's pid (0 once reaped) and the listeners' port (tests). */
pid_t dns_helper_pid(const struct dns_helper *h);
uint16_t dns_helper_port(const struct dns_helper *h);
/* The reason DNS stopped early, or NULL while the helper serves. */
const char *dns_helper_fault(const struct dns_helper *h);

/* Kill and reap the helper, fill r (may be NULL) and free h (may be NULL). */
void dns_helper_stop(struct dns_helper *h, struct dns_helper_report *r);

/*
 * Tests only: when set, the child runs this after GO instead of the proxy
 * (no jail, no seccomp) and exits with its return value, to play a broken
 * or hostile helper.
 */
extern int (*dns_helper_test_child)(int ctl_fd);

#endif
