/*
 * dns_learn: the supervisor's table of the addresses one VM's DNS answers
 * opened in its egress filter, with a per-VM quota and bounded expiry.
 *
 * The egress filter keeps learned addresses in one BPF hash map for every
 * VM of the process (EGRESS_MAX_DYN entries). Walking it to expire one
 * VM's entries, or to make room when it is full, costs a system call per
 * entry of every VM. This table remembers which addresses this VM has
 * there and until when, so that:
 *
 * - a VM holds at most `quota` learned addresses (DNS_LEARN_QUOTA, 256: the
 *   same as the default --max-dests). A new address beyond it replaces the
 *   oldest entry whose TTL ran out and that the filter no longer needs
 *   (ops.forget decides: an entry a connection used within the live window
 *   stays); if none can go, the address is refused (-EDQUOT) and the DNS
 *   answer that carried it becomes SERVFAIL. At most DNS_LEARN_EVICT_TRIES
 *   candidates are tried per new address.
 * - expiry looks only at this VM's entries: dns_learn_expire() runs at most
 *   once per DNS_LEARN_EXPIRE_EVERY_US and examines at most
 *   DNS_LEARN_EXPIRE_BATCH entries per pass, going round the table.
 * An entry that is past its TTL but still live is looked at again after
 * DNS_LEARN_RECHECK_US rather than on every pass.
 *
 * Pure bookkeeping: the filter is reached only through ops, so the unit
 * tests run it against a fake. Single-threaded (the supervisor's loop).
 */
#ifndef HUSK_DNS_LEARN_H
#define HUSK_DNS_LEARN_H

#include <stdbool.h>
#include <stdint.h>

#define DNS_LEARN_QUOTA			256
#define DNS_LEARN_EXPIRE_EVERY_US	1000000ull
#define DNS_LEARN_EXPIRE_BATCH		32
#define DNS_LEARN_EVICT_TRIES		4
#define DNS_LEARN_RECHECK_US		(30 * 1000000ull)

struct dns_learn_ops {
	/* Open addr (AF_INET: 4 bytes, AF_INET6: 16) for ttl seconds; 0 or -errno. */
	int (*open)(void *arg, int family, const uint8_t *addr, uint32_t ttl_sec);
	/*
	 * Remove addr if the filter no longer needs it at now (us, now_us()):
	 * 1 removed, 0 still needed (TTL or live), -ENOENT not there, -errno.
	 */
	int (*forget)(void *arg, int family, const uint8_t *addr, uint64_t now);
	void *arg;
	/*
	 * Optional (NULL: every address is opened): 1 when addr must not be
	 * opened for this VM at all, 0 when it may, -errno (taken as 1). A
	 * husk serve client's VM refuses what its filter keeps closed anyway
	 * (egress_learn_closed()), so that such an answer is withheld.
	 */
	int (*closed)(void *arg, int family, const uint8_t *addr);
};

struct dns_learn_stats {
	uint64_t opened;	/* addresses opened or refreshed */
	uint64_t evicted;	/* expired entries removed to make room */
	uint64_t expired;	/* removed by the periodic pass */
	uint64_t quota_full;	/* refused: quota reached, nothing could go */
	uint64_t failed;	/* refused: the filter could not be changed */
	uint64_t closed;	/* refused: ops.closed said so */
};

struct dns_learn_entry {
	bool used;
	uint8_t family;			/* AF_INET or AF_INET6 */
	uint8_t addr[16];
	uint64_t expires_us;		/* our view of the TTL; ops.forget has the last word */
};

struct dns_learned {
	struct dns_learn_ops ops;
	unsigned quota;			/* 1..DNS_LEARN_QUOTA */
	unsigned n;			/* entries used */
	unsigned cursor;		/* where the next expiry pass starts */
	uint64_t last_pass_us;
	bool passed;			/* a pass ran (last_pass_us is valid) */
	struct dns_learn_stats st;
	struct dns_learn_entry e[DNS_LEARN_QUOTA];
};

/* quota 0 or above DNS_LEARN_QUOTA means DNS_LEARN_QUOTA. */
void dns_learn_init(struct dns_learned *l, const struct dns_learn_ops *ops, unsigned quota);

/*
 * Open addr for ttl_sec seconds from now (us) for this VM. Returns 0,
 * -EACCES (ops.closed refused it, counted in closed: nothing is asked of
 * the filter and no quota is taken), -EDQUOT (quota reached, counted in
 * quota_full), -EAFNOSUPPORT or the error of ops.open (counted in failed).
 */
int dns_learn_add(struct dns_learned *l, int family, const uint8_t *addr, uint32_t ttl_sec,
		  uint64_t now);

/*
 * One bounded expiry pass (see above); does nothing within
 * DNS_LEARN_EXPIRE_EVERY_US of the last one. Returns how many entries
 * went.
 */
int dns_learn_expire(struct dns_learned *l, uint64_t now);

#endif
