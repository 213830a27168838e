/*
 * Unit tests for dns_learn, the supervisor's per-VM table of DNS-learned
 * addresses, against a fake filter: the quota (a full table refuses a new
 * address without asking the filter anything unless an entry has expired,
 * then the oldest expired entry goes; live entries stay; at most
 * DNS_LEARN_EVICT_TRIES candidates per address), merging of the same
 * address, expiry at most once a second and at most DNS_LEARN_EXPIRE_BATCH
 * entries per pass (all of them in quota / batch passes), live entries
 * looked at again only after DNS_LEARN_RECHECK_US, entries the filter lost
 * and filter failures; and addresses closed to the VM, refused untouched.
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "net/dns_learn.h"
#include "suites.h"

#define SEC 1000000ull

/* The fake filter: one entry per address, with its own TTL and liveness. */
static struct fake {
	struct {
		bool used;
		int family;
		uint8_t addr[16];
		uint64_t expires, live_until;
	} e[1024];
	unsigned opens, forgets, removed;
	int open_err;
	bool all_live;		/* every entry had a packet just now */
	uint64_t now;		/* the clock open() sees */
} fk;

static struct dns_learned L;

static int find(int family, const uint8_t *addr)
{
	unsigned i;

	for (i = 0; i < 1024; i++)
		if (fk.e[i].used && fk.e[i].family == family &&
		    !memcmp(fk.e[i].addr, addr, family == AF_INET ? 4 : 16))
			return i;
	return -1;
}

static int fake_open(void *arg, int family, const uint8_t *addr, uint32_t ttl)
{
	int i = find(family, addr);
	uint64_t until = fk.now + ttl * SEC;

	ck_assert_ptr_eq(arg, &fk);
	fk.opens++;
	if (fk.open_err)
		return fk.open_err;
	if (i < 0) {
		for (i = 0; fk.e[i].used; i++)
			;
		memset(&fk.e[i], 0, sizeof(fk.e[i]));
		fk.e[i].used = true;
		fk.e[i].family = family;
		memcpy(fk.e[i].addr, addr, family == AF_INET ? 4 : 16);
	}
	if (until > fk.e[i].expires)
		fk.e[i].expires = until;
	return 0;
}

static int fake_forget(void *arg, int family, const uint8_t *addr, uint64_t now)
{
	int i = find(family, addr);

	fk.forgets++;
	if (i < 0)
		return -ENOENT;
	if (fk.e[i].expires > now || fk.all_live || fk.e[i].live_until > now)
		return 0;
	fk.e[i].used = false;
	fk.removed++;
	return 1;
}

static void setup(void)
{
	static const struct dns_learn_ops ops = { .open = fake_open, .forget = fake_forget,
						   .arg = &fk };

	memset(&fk, 0, sizeof(fk));
	dns_learn_init(&L, &ops, 0);
}

/* 198.51.<i / 256>.<i % 256>. */
static const uint8_t *v4(unsigned i)
{
	static uint8_t a[4];

	a[0] = 198;
	a[1] = 51;
	a[2] = i >> 8;
	a[3] = i & 0xff;
	return a;
}

static int add(unsigned i, uint32_t ttl, uint64_t now)
{
	fk.now = now;
	return dns_learn_add(&L, AF_INET, v4(i), ttl, now);
}

/* The table full at t = 10 s, every entry for 60 s, entry 10 for only 30 s. */
static void fill(void)
{
	unsigned i;

	for (i = 0; i < DNS_LEARN_QUOTA; i++)
		ck_assert_int_eq(add(i, i == 10 ? 30 : 60, 10 * SEC), 0);
	ck_assert_uint_eq(L.n, DNS_LEARN_QUOTA);
}

START_TEST(quota_refuses_when_nothing_expired)
{
	fill();
	ck_assert_uint_eq(L.st.opened, DNS_LEARN_QUOTA);
	/* The same address again: merged, no new entry. */
	ck_assert_int_eq(add(5, 300, 11 * SEC), 0);
	ck_assert_uint_eq(L.n, DNS_LEARN_QUOTA);
	/* One more: refused at once, the filter is neither asked nor changed. */
	fk.opens = fk.forgets = 0;
	ck_assert_int_eq(add(1000, 60, 12 * SEC), -EDQUOT);
	ck_assert_uint_eq(L.st.quota_full, 1);
	ck_assert_uint_eq(fk.forgets, 0);
	ck_assert_uint_eq(fk.opens, 0);
	ck_assert_int_lt(find(AF_INET, v4(1000)), 0);
}
END_TEST

START_TEST(quota_evicts_oldest_expired)
{
	fill();
	/* At 45 s only entry 10 (TTL 30) has expired: it makes room. */
	fk.forgets = 0;
	ck_assert_int_eq(add(1000, 60, 45 * SEC), 0);
	ck_assert_uint_eq(fk.forgets, 1);
	ck_assert_uint_eq(L.st.evicted, 1);
	ck_assert_int_lt(find(AF_INET, v4(10)), 0);
	ck_assert_int_ge(find(AF_INET, v4(1000)), 0);
	ck_assert_uint_eq(L.n, DNS_LEARN_QUOTA);
	/* Entry 5 was refreshed to 311 s: at 100 s, the oldest is entry 0. */
	ck_assert_int_eq(add(1001, 60, 100 * SEC), 0);
	ck_assert_int_lt(find(AF_INET, v4(0)), 0);
	ck_assert_int_ge(find(AF_INET, v4(5)), 0);
}
END_TEST

START_TEST(quota_keeps_live_entries)
{
	fill();
	/* Everything expired, but in use: nothing may go. */
	fk.all_live = true;
	fk.forgets = 0;
	ck_assert_int_eq(add(1000, 60, 200 * SEC), -EDQUOT);
	ck_assert_uint_eq(fk.forgets, DNS_LEARN_EVICT_TRIES);
	ck_assert_uint_eq(L.st.quota_full, 1);
	ck_assert_uint_eq(fk.removed, 0);
	/* The ones tried are not tried again at once: the next four are. */
	fk.forgets = 0;
	ck_assert_int_eq(add(1001, 60, 200 * SEC), -EDQUOT);
	ck_assert_uint_eq(fk.forgets, DNS_LEARN_EVICT_TRIES);
	/* Once traffic stops, an expired entry goes again. */
	fk.all_live = false;
	ck_assert_int_eq(add(1002, 60, 201 * SEC), 0);
	ck_assert_uint_eq(L.st.evicted, 1);
}
END_TEST

START_TEST(expiry_bounded_and_rate_limited)
{
	unsigned pass;

	fill();
	fk.forgets = 0;
	/* At 100 s all have expired: 32 per pass, at most once a second. */
	ck_assert_int_eq(dns_learn_expire(&L, 100 * SEC), DNS_LEARN_EXPIRE_BATCH);
	ck_assert_uint_eq(fk.forgets, DNS_LEARN_EXPIRE_BATCH);
	ck_assert_int_eq(dns_learn_expire(&L, 100 * SEC + SEC / 2), 0);
	ck_assert_uint_eq(fk.forgets, DNS_LEARN_EXPIRE_BATCH);
	for (pass = 1; pass < DNS_LEARN_QUOTA / DNS_LEARN_EXPIRE_BATCH; pass++)
		ck_assert_int_eq(dns_learn_expire(&L, (101 + pass) * SEC),
				 DNS_LEARN_EXPIRE_BATCH);
	ck_assert_uint_eq(L.n, 0);
	ck_assert_uint_eq(fk.removed, DNS_LEARN_QUOTA);
	ck_assert_uint_eq(fk.forgets, DNS_LEARN_QUOTA);
	ck_assert_uint_eq(L.st.expired, DNS_LEARN_QUOTA);
	/* An empty table costs nothing. */
	ck_assert_int_eq(dns_learn_expire(&L, 200 * SEC), 0);
	ck_assert_uint_eq(fk.forgets, DNS_LEARN_QUOTA);
}
END_TEST

START_TEST(expiry_rechecks_live_later)
{
	unsigned pass;
	uint64_t t = 100 * SEC;

	fill();
	fk.all_live = true;
	fk.forgets = 0;
	/* One full round: each entry asked once, each kept. */
	for (pass = 0; pass < DNS_LEARN_QUOTA / DNS_LEARN_EXPIRE_BATCH; pass++, t += SEC)
		ck_assert_int_eq(dns_learn_expire(&L, t), 0);
	ck_assert_uint_eq(fk.forgets, DNS_LEARN_QUOTA);
	ck_assert_uint_eq(L.n, DNS_LEARN_QUOTA);
	/* The next round, within DNS_LEARN_RECHECK_US: nobody is asked. */
	for (pass = 0; pass < DNS_LEARN_QUOTA / DNS_LEARN_EXPIRE_BATCH; pass++, t += SEC)
		dns_learn_expire(&L, t);
	ck_assert_uint_eq(fk.forgets, DNS_LEARN_QUOTA);
	/* After it, and idle now: they go. */
	fk.all_live = false;
	t += DNS_LEARN_RECHECK_US;
	for (pass = 0; pass < DNS_LEARN_QUOTA / DNS_LEARN_EXPIRE_BATCH; pass++, t += SEC)
		dns_learn_expire(&L, t);
	ck_assert_uint_eq(L.n, 0);
}
END_TEST

START_TEST(lost_entries_and_failures)
{
	static const uint8_t v6[16] = { 0x20, 0x01, 0x0d, 0xb8, [15] = 7 };
	int i;

	/* The filter lost an entry (another path removed it): our slot is freed. */
	ck_assert_int_eq(add(1, 30, 0), 0);
	i = find(AF_INET, v4(1));
	fk.e[i].used = false;
	ck_assert_int_eq(dns_learn_expire(&L, 60 * SEC), 1);
	ck_assert_uint_eq(L.n, 0);
	/* IPv6, and an unknown family. */
	fk.now = 0;
	ck_assert_int_eq(dns_learn_add(&L, AF_INET6, v6, 30, 0), 0);
	ck_assert_int_ge(find(AF_INET6, v6), 0);
	ck_assert_int_eq(dns_learn_add(&L, AF_UNIX, v6, 30, 0), -EAFNOSUPPORT);
	/* The filter refuses: no entry, counted. */
	fk.open_err = -E2BIG;
	ck_assert_int_eq(add(2, 30, 0), -E2BIG);
	ck_assert_uint_eq(L.st.failed, 1);
	ck_assert_uint_eq(L.n, 1);
}
END_TEST

START_TEST(smaller_quota)
{
	static const struct dns_learn_ops ops = { .open = fake_open, .forget = fake_forget,
						   .arg = &fk };
	unsigned i;

	dns_learn_init(&L, &ops, 4);
	for (i = 0; i < 4; i++)
		ck_assert_int_eq(add(i, 30, 0), 0);
	ck_assert_int_eq(add(4, 30, 0), -EDQUOT);
	/* Expiry goes round the 4 entries only. */
	ck_assert_int_eq(dns_learn_expire(&L, 31 * SEC), 4);
	ck_assert_uint_eq(fk.forgets, 4);
}
END_TEST

/*
 * A husk serve client's VM: an address its filter keeps closed (here 10/8,
 * 169.254/16; an error of the check counts as closed) is refused before
 * the filter or the quota are touched, so the answer is withheld.
 */
static int fake_closed(void *arg, int family, const uint8_t *addr)
{
	ck_assert_ptr_eq(arg, &fk);
	if (family == AF_INET && addr[0] == 192)
		return -EIO;
	return family == AF_INET && (addr[0] == 10 || (addr[0] == 169 && addr[1] == 254));
}

START_TEST(closed_addresses_refused)
{
	static const struct dns_learn_ops ops = { .open = fake_open, .forget = fake_forget,
						  .arg = &fk, .closed = fake_closed };
	static const uint8_t meta[4] = { 169, 254, 169, 254 }, ten[4] = { 10, 1, 2, 3 },
			     err[4] = { 192, 0, 2, 1 };
	unsigned i;

	dns_learn_init(&L, &ops, 4);
	ck_assert_int_eq(dns_learn_add(&L, AF_INET, meta, 60, 0), -EACCES);
	ck_assert_int_eq(dns_learn_add(&L, AF_INET, ten, 60, 0), -EACCES);
	ck_assert_int_eq(dns_learn_add(&L, AF_INET, err, 60, 0), -EACCES);
	ck_assert_uint_eq(fk.opens, 0);
	ck_assert_int_lt(find(AF_INET, meta), 0);
	ck_assert_int_lt(find(AF_INET, ten), 0);
	ck_assert_uint_eq(L.n, 0);
	ck_assert_uint_eq(L.st.closed, 3);
	ck_assert_uint_eq(L.st.opened, 0);
	/* Public addresses still open, and the whole quota is theirs. */
	for (i = 0; i < 4; i++)
		ck_assert_int_eq(add(i, 60, 0), 0);
	ck_assert_uint_eq(fk.opens, 4);
	ck_assert_uint_eq(L.n, 4);
	/* Once full, a closed address is still refused as closed, not for quota. */
	ck_assert_int_eq(dns_learn_add(&L, AF_INET, ten, 60, 0), -EACCES);
	ck_assert_uint_eq(L.st.quota_full, 0);
	ck_assert_uint_eq(L.st.closed, 4);
}
END_TEST

Suite *dns_learn_suite(void)
{
	Suite *s = suite_create("dns_learn");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, quota_refuses_when_nothing_expired);
	tcase_add_test(tc, quota_evicts_oldest_expired);
	tcase_add_test(tc, quota_keeps_live_entries);
	tcase_add_test(tc, expiry_bounded_and_rate_limited);
	tcase_add_test(tc, expiry_rechecks_live_later);
	tcase_add_test(tc, lost_entries_and_failures);
	tcase_add_test(tc, smaller_quota);
	tcase_add_test(tc, closed_addresses_refused);
	suite_add_tcase(s, tc);
	return s;
}
