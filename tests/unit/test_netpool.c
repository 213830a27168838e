/*
 * Unit tests for netpool: pool parsing, slot -> /30 mapping at both ends
 * of the pool, MAC derivation and the ip= parameter.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "net/netpool.h"
#include "suites.h"

static const char *ip(struct in_addr a)
{
	static char buf[4][INET_ADDRSTRLEN];
	static unsigned k;

	k = (k + 1) % 4;
	return inet_ntop(AF_INET, &a, buf[k], sizeof(buf[k]));
}

START_TEST(default_pool_slot0)
{
	struct netpool p;
	struct netpool_lease l;
	static const uint8_t mac[6] = { 0x06, 0, 0, 0, 0, 0 };

	ck_assert_int_eq(netpool_parse(NETPOOL_DEFAULT, &p), 0);
	ck_assert_uint_eq(p.prefixlen, 16);
	ck_assert_uint_eq(netpool_capacity(&p), 16384);
	ck_assert_int_eq(netpool_lease(&p, 0, &l), 0);
	ck_assert_str_eq(ip(l.net), "10.200.0.0");
	ck_assert_str_eq(ip(l.host), "10.200.0.1");
	ck_assert_str_eq(ip(l.guest), "10.200.0.2");
	ck_assert_str_eq(ip(l.netmask), "255.255.255.252");
	ck_assert_uint_eq(l.prefixlen, 30);
	ck_assert_mem_eq(l.mac, mac, 6);
}
END_TEST

START_TEST(slots_are_disjoint_and_deterministic)
{
	struct netpool p;
	struct netpool_lease a, b;
	static const uint8_t mac[6] = { 0x06, 0, 0, 0, 0x01, 0x41 };

	ck_assert_int_eq(netpool_parse("10.200.0.0/16", &p), 0);
	ck_assert_int_eq(netpool_lease(&p, 321, &a), 0);
	ck_assert_str_eq(ip(a.host), "10.200.5.5");
	ck_assert_str_eq(ip(a.guest), "10.200.5.6");
	ck_assert_mem_eq(a.mac, mac, 6);
	ck_assert_int_eq(netpool_lease(&p, 321, &b), 0);
	ck_assert_mem_eq(&a, &b, sizeof(a));
	ck_assert_int_eq(netpool_lease(&p, 322, &b), 0);
	ck_assert_str_eq(ip(b.net), "10.200.5.8");
	ck_assert(memcmp(a.mac, b.mac, 6) != 0);
	/* Locally administered, unicast. */
	ck_assert_uint_eq(b.mac[0] & 3, 2);
}
END_TEST

START_TEST(last_slot_and_beyond)
{
	struct netpool p;
	struct netpool_lease l;

	ck_assert_int_eq(netpool_parse("10.200.0.0/16", &p), 0);
	ck_assert_int_eq(netpool_lease(&p, 16383, &l), 0);
	ck_assert_str_eq(ip(l.host), "10.200.255.253");
	ck_assert_str_eq(ip(l.guest), "10.200.255.254");
	ck_assert_int_eq(netpool_lease(&p, 16384, &l), -ERANGE);
	ck_assert_int_eq(netpool_lease(&p, ~0u, &l), -ERANGE);
}
END_TEST

START_TEST(small_and_large_pools)
{
	struct netpool p;
	struct netpool_lease l;

	ck_assert_int_eq(netpool_parse("192.168.7.4/30", &p), 0);
	ck_assert_uint_eq(netpool_capacity(&p), 1);
	ck_assert_int_eq(netpool_lease(&p, 0, &l), 0);
	ck_assert_str_eq(ip(l.host), "192.168.7.5");
	ck_assert_int_eq(netpool_lease(&p, 1, &l), -ERANGE);
	ck_assert_int_eq(netpool_parse("0.0.0.0/0", &p), 0);
	ck_assert_uint_eq(netpool_capacity(&p), 1u << 30);
	ck_assert_int_eq(netpool_lease(&p, (1u << 30) - 1, &l), 0);
	ck_assert_str_eq(ip(l.guest), "255.255.255.254");
}
END_TEST

START_TEST(bad_pools_refused)
{
	static const char *const bad[] = {
		"10.200.0.0", "10.200.0.0/", "/16", "10.200.0.0/31", "10.200.0.0/33",
		"10.200.0.1/16", "10.200.0/16", "10.200.0.0/-1", "10.200.0.0/16x",
		"fd00::/64", "", "10.200.0.0/+16",
	};
	struct netpool p;
	unsigned i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(netpool_parse(bad[i], &p) == -EINVAL, "accepted '%s'", bad[i]);
	ck_assert_int_eq(netpool_parse(NULL, &p), -EINVAL);
}
END_TEST

START_TEST(ip_param)
{
	struct netpool p;
	struct netpool_lease l;
	char buf[80];

	ck_assert_int_eq(netpool_parse(NETPOOL_DEFAULT, &p), 0);
	ck_assert_int_eq(netpool_lease(&p, 2, &l), 0);
	ck_assert_int_eq(netpool_ip_param(&l, "eth0", buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "ip=10.200.0.10::10.200.0.9:255.255.255.252::eth0:off");
	ck_assert_int_eq(netpool_ip_param(&l, "eth0", buf, 20), -ENOSPC);
}
END_TEST

Suite *netpool_suite(void)
{
	Suite *s = suite_create("netpool");
	TCase *t = tcase_create("pool");

	tcase_add_test(t, default_pool_slot0);
	tcase_add_test(t, slots_are_disjoint_and_deterministic);
	tcase_add_test(t, last_slot_and_beyond);
	tcase_add_test(t, small_and_large_pools);
	tcase_add_test(t, bad_pools_refused);
	tcase_add_test(t, ip_param);
	suite_add_tcase(s, t);
	return s;
}
