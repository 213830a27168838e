/*
 * dns_learn: per-VM quota and bounded expiry of DNS-learned addresses.
 * See dns_learn.h.
 *
 * The table is a plain array of at most DNS_LEARN_QUOTA entries: every
 * operation is a scan of it in memory (a few microseconds) plus a bounded
 * number of filter calls, never a walk of the shared BPF map.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "net/dns_learn.h"
#include "lib/util.h"

void dns_learn_init(struct dns_learned *l, const struct dns_learn_ops *ops, unsigned quota)
{
	memset(l, 0, sizeof(*l));
	l->ops = *ops;
	l->quota = quota && quota <= DNS_LEARN_QUOTA ? quota : DNS_LEARN_QUOTA;
}

static size_t addr_len(int family)
{
	return family == AF_INET ? 4 : family == AF_INET6 ? 16 : 0;
}

static struct dns_learn_entry *find(struct dns_learned *l, int family, const uint8_t *addr)
{
	size_t len = addr_len(family);
	unsigned i;

	for (i = 0; i < l->quota; i++) {
		struct dns_learn_entry *e = &l->e[i];

		if (e->used && e->family == family && !memcmp(e->addr, addr, len))
			return e;
	}
	return NULL;
}

static void drop(struct dns_learned *l, struct dns_learn_entry *e)
{
	e->used = false;
	l->n--;
}

/*
 * Ask the filter to let e go. True when it is gone (removed now or already
 * gone); a live entry is left alone until DNS_LEARN_RECHECK_US from now.
 */
static bool try_forget(struct dns_learned *l, struct dns_learn_entry *e, uint64_t now)
{
	int r = l->ops.forget(l->ops.arg, e->family, e->addr, now);

	if (r == 1 || r == -ENOENT) {
		drop(l, e);
		return true;
	}
	if (r == 0)
		e->expires_us = now + DNS_LEARN_RECHECK_US;
	else
		husk_debug("dns: cannot expire a learned address: %s", husk_lasterr());
	return false;
}

/* A free slot, making room from the oldest expired entries if needed. */
static struct dns_learn_entry *make_room(struct dns_learned *l, uint64_t now)
{
	unsigned i, tries;

	if (l->n < l->quota) {
		for (i = 0; i < l->quota; i++)
			if (!l->e[i].used)
				return &l->e[i];
	}
	for (tries = 0; tries < DNS_LEARN_EVICT_TRIES; tries++) {
		struct dns_learn_entry *old = NULL;

		for (i = 0; i < l->quota; i++) {
			struct dns_learn_entry *e = &l->e[i];

			if (e->used && e->expires_us <= now &&
			    (!old || e->expires_us < old->expires_us))
				old = e;
		}
		if (!old)
			break;		/* nothing has expired */
		if (try_forget(l, old, now)) {
			l->st.evicted++;
			return old;
		}
	}
	return NULL;
}

int dns_learn_add(struct dns_learned *l, int family, const uint8_t *addr, uint32_t ttl_sec,
		  uint64_t now)
{
	uint64_t until = now + (uint64_t)ttl_sec * 1000000u;
	struct dns_learn_entry *e;
	size_t len = addr_len(family);
	int err;

	if (!len)
		return husk_seterr(EAFNOSUPPORT, "dns: address family %d", family);
	if (l->ops.closed && l->ops.closed(l->ops.arg, family, addr)) {
		char a[INET6_ADDRSTRLEN] = "?";

		inet_ntop(family, addr, a, sizeof(a));
		l->st.closed++;
		return husk_seterr(EACCES, "dns: %s is closed to this VM", a);
	}
	e = find(l, family, addr);
	if (!e) {
		e = make_room(l, now);
		if (!e) {
			l->st.quota_full++;
			return husk_seterr(EDQUOT, "dns: the VM holds %u learned addresses, none "
					   "of them expired", l->quota);
		}
	}
	err = l->ops.open(l->ops.arg, family, addr, ttl_sec);
	if (err) {
		l->st.failed++;
		return err;
	}
	l->st.opened++;
	if (!e->used) {
		memset(e, 0, sizeof(*e));
		e->used = true;
		e->family = family;
		memcpy(e->addr, addr, len);
		l->n++;
	}
	/* The filter merges the same way: the later expiry wins. */
	if (until > e->expires_us)
		e->expires_us = until;
	return 0;
}

int dns_learn_expire(struct dns_learned *l, uint64_t now)
{
	unsigned seen, removed = 0;

	if (l->passed && now - l->last_pass_us < DNS_LEARN_EXPIRE_EVERY_US)
		return 0;
	l->passed = true;
	l->last_pass_us = now;
	for (seen = 0; seen < DNS_LEARN_EXPIRE_BATCH && seen < l->quota; seen++) {
		struct dns_learn_entry *e = &l->e[l->cursor];

		l->cursor = (l->cursor + 1) % l->quota;
		if (e->used && e->expires_us <= now && try_forget(l, e, now)) {
			l->st.expired++;
			removed++;
		}
	}
	return removed;
}
