/*
 * Unit tests for serve/api: which requests a pooled clone may serve. A
 * request that changes the machine never takes one; one whose only change
 * is net egress (with or without rules) may take a networked template's
 * clone, and its rules then travel as the policy message. Images are
 * booted by name only: keys and containers' roots are not-found. And what
 * the egress rules of a client that is not an admin may open: public
 * unicast, private ranges only where the operator opened them, never a
 * platform endpoint or the host's own address; an admin's rules only where
 * its sandbox's worker keeps those closed.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli_run.h"
#include "lib/util.h"
#include "net/ranges.h"
#include "serve/api.h"
#include "suites.h"

static struct api_req r;

static void parse(const char *line)
{
	const char *code;

	api_req_free(&r);
	ck_assert_msg(api_parse(line, strlen(line), &r, &code) == 0, "%s: %s", line, code);
}

static void teardown(void)
{
	api_req_free(&r);
}

START_TEST(plain_template_is_machine_default)
{
	parse("{\"id\":1,\"op\":\"create\",\"template\":\"base\"}");
	ck_assert(r.machine_default);
	ck_assert(!r.net_pool);
	ck_assert_ptr_null(r.policy);
	parse("{\"id\":1,\"op\":\"run\",\"template\":\"base\",\"net\":\"none\",\"argv\":[\"true\"]}");
	ck_assert(r.machine_default);
	ck_assert(!r.net_pool);
}
END_TEST

START_TEST(egress_without_rules_is_net_pool)
{
	parse("{\"id\":1,\"op\":\"create\",\"template\":\"net\",\"net\":\"egress\"}");
	ck_assert(!r.machine_default);
	ck_assert(r.net_pool);
	ck_assert(r.net_policy);
	ck_assert_ptr_null(r.policy);
}
END_TEST

START_TEST(egress_rules_become_the_policy)
{
	json_t *a;

	parse("{\"id\":1,\"op\":\"create\",\"template\":\"net\",\"net\":\"egress\","
	      "\"allow\":[\"192.0.2.1/32:tcp:443\"],\"allow_host\":[\"api.example.com\"]}");
	ck_assert(r.net_pool);
	ck_assert_ptr_nonnull(r.policy);
	a = json_object_get(r.policy, "allow");
	ck_assert_int_eq(json_array_size(a), 1);
	ck_assert_str_eq(json_string_value(json_array_get(a, 0)), "192.0.2.1/32:tcp:443");
	ck_assert_str_eq(json_string_value(json_array_get(json_object_get(r.policy, "allow_host"),
							  0)), "api.example.com");
	/* Only the lists given: the policy replaces no other. */
	ck_assert_ptr_null(json_object_get(r.policy, "deny"));
}
END_TEST

START_TEST(machine_changes_take_no_pool)
{
	static const char *const lines[] = {
		"{\"id\":1,\"op\":\"create\",\"net\":\"egress\",\"mem\":512}",
		"{\"id\":1,\"op\":\"create\",\"net\":\"egress\"}",
		"{\"id\":1,\"op\":\"create\",\"template\":\"net\",\"net\":\"egress\",\"conn_rate\":5}",
		"{\"id\":1,\"op\":\"create\",\"template\":\"base\",\"cpus\":1.0}",
		"{\"id\":1,\"op\":\"create\",\"template\":\"net\",\"net\":\"egress\","
		"\"egress_limit\":1000}",
	};

	for (unsigned i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
		parse(lines[i]);
		ck_assert_msg(!r.machine_default && !r.net_pool, "%s", lines[i]);
		ck_assert_ptr_null(r.policy);
	}
}
END_TEST

START_TEST(bad_rule_is_refused)
{
	const char *line = "{\"id\":1,\"op\":\"create\",\"template\":\"net\",\"net\":\"egress\","
			   "\"allow\":[\"not a rule\"]}";
	const char *code;

	api_req_free(&r);
	ck_assert_int_ne(api_parse(line, strlen(line), &r, &code), 0);
	ck_assert_str_eq(code, E_BAD);
}
END_TEST

/* ---- what a client's egress rules may open ---- */

/* The fake host: 192.0.2.10/24 (with its subnet's ends) and 2001:db8::10. */
static int fake_is_host(int family, const void *addr)
{
	static const uint8_t h4[3][4] = { { 192, 0, 2, 10 }, { 192, 0, 2, 0 }, { 192, 0, 2, 255 } };
	static const uint8_t h6[16] = { 0x20, 0x01, 0x0d, 0xb8, [15] = 0x10 };

	if (family == AF_INET6)
		return !memcmp(addr, h6, 16);
	for (unsigned i = 0; i < 3; i++)
		if (!memcmp(addr, h4[i], 4))
			return 1;
	return 0;
}

static int failing_is_host(int family, const void *addr)
{
	return -EIO;
}

static struct run_deny opened[2];
static struct api_net_limits lim;

static void lim_setup(void)
{
	memset(opened, 0, sizeof(opened));
	lim.open = opened;
	lim.nr_open = 0;
	lim.is_host = fake_is_host;
}

/* api_check_rules on a request with these allow rules. */
static int rules_of(const char *op, const char *allow, bool client)
{
	char line[512];

	snprintf(line, sizeof(line), "{\"id\":1,\"op\":\"%s\",%s\"allow\":[%s]}", op,
		 !strcmp(op, "policy") ? "\"sandbox\":\"sb-1\"," :
		 !strcmp(op, "run") ? "\"net\":\"egress\",\"argv\":[\"true\"]," :
		 "\"net\":\"egress\",", allow);
	parse(line);
	return api_check_rules(&r, &lim, client);
}

static void refused(const char *allow, const char *why)
{
	static const char *const ops[] = { "create", "run", "policy" };

	for (unsigned i = 0; i < 3; i++) {
		ck_assert_msg(rules_of(ops[i], allow, true) == -EACCES, "%s %s was accepted",
			      ops[i], allow);
		ck_assert_msg(strstr(husk_lasterr(), why), "%s %s: %s", ops[i], allow,
			      husk_lasterr());
	}
}

static void accepted(const char *allow)
{
	ck_assert_msg(rules_of("create", allow, true) == 0, "%s: %s", allow, husk_lasterr());
	ck_assert_msg(rules_of("policy", allow, true) == 0, "policy %s: %s", allow,
		      husk_lasterr());
}

START_TEST(client_closed_ranges_refused)
{
	refused("\"169.254.169.254/32:tcp:80\"", "a cloud platform endpoint (instance metadata)");
	refused("\"169.254.170.2/32\"", "a cloud platform endpoint");
	/* A public address, inside no private range: refused all the same. */
	refused("\"168.63.129.16/32:tcp:80,32526\"", "Azure WireServer");
	refused("\"192.0.0.192/32\"", "Oracle Cloud Classic");
	refused("\"[fd00:ec2::254]/128\"", "a cloud platform endpoint");
	refused("\"10.0.0.0/8\"", "a private network (RFC 1918) (10.0.0.0/8)");
	refused("\"10.1.2.3/32:tcp:5432\"", "(10.0.0.0/8)");
	refused("\"172.20.0.0/16\"", "(172.16.0.0/12)");
	refused("\"192.168.1.1/32\"", "(192.168.0.0/16)");
	refused("\"100.64.0.0/10\"", "CGNAT");
	refused("\"169.254.0.0/16\"", "link-local");
	refused("\"127.0.0.1/32\"", "no rule opens it");
	refused("\"224.0.0.0/4\"", "no rule opens it");
	refused("\"[fd00::]/8\"", "unique local");
	refused("\"[fe80::1]/128\"", "link-local");
	refused("\"[64:ff9b::]/96\"", "NAT64");
	refused("\"[2002::]/16\"", "6to4");
	refused("\"[::ffff:0:0]/96\"", "no rule opens it");
	/* The host's own addresses, and its subnet's broadcast address. */
	refused("\"192.0.2.10/32:tcp:22\"", "an address of this host");
	refused("\"192.0.2.255/32:udp\"", "an address of this host");
	refused("\"[2001:db8::10]/128\"", "an address of this host");
	/* One bad rule among good ones is enough, and it is the one named. */
	refused("\"93.184.216.0/24\",\"10.0.0.0/8\"", "allow 10.0.0.0/8 reaches");
	/* When the host's addresses cannot be listed, an exact rule is refused. */
	lim.is_host = failing_is_host;
	refused("\"93.184.216.34/32\"", "cannot be listed");
}
END_TEST

START_TEST(client_public_unicast_accepted)
{
	accepted("\"93.184.216.34/32:tcp:443\"");
	accepted("\"0.0.0.0/0\"");
	accepted("\"[::]/0\"");
	accepted("\"[2001:db8:1::]/48:tcp:443\"");
	/* Wider than a host address or a private range: the filter opens neither. */
	accepted("\"192.0.2.0/24\"");
	accepted("\"0.0.0.0/1\",\"8.0.0.0/7\"");
	accepted("\"[2001:db8::]/64\"");
	/* Nothing else of a request is a rule that opens anything. */
	parse("{\"id\":1,\"op\":\"create\",\"net\":\"egress\",\"deny\":[\"10.0.0.0/8\"],"
	      "\"allow_host\":[\"example.com\"]}");
	ck_assert_int_eq(api_check_rules(&r, &lim, true), 0);
}
END_TEST

START_TEST(client_allow_opens_private_ranges)
{
	cli_parse_deny("10.1.0.0/16", &opened[0]);
	cli_parse_deny("169.254.0.0/16", &opened[1]);
	lim.nr_open = 2;
	accepted("\"10.1.0.0/16\"");
	accepted("\"10.1.2.3/32:tcp:5432\"");
	accepted("\"169.254.1.0/24\"");
	/* Only inside what the operator opened. */
	refused("\"10.0.0.0/8\"", "unless the operator opens it");
	refused("\"10.2.0.0/16\"", "(10.0.0.0/8)");
	/* Never a platform endpoint, the host, or what nothing opens. */
	refused("\"169.254.169.254/32\"", "a cloud platform endpoint");
	cli_parse_deny("192.0.2.0/24", &opened[0]);
	refused("\"192.0.2.10/32\"", "an address of this host");
	cli_parse_deny("127.0.0.0/8", &opened[0]);
	refused("\"127.0.0.0/8\"", "no rule opens it");
}
END_TEST

/* An admin's rules are checked only for a worker that keeps these closed. */
START_TEST(admin_rules_on_a_strict_worker)
{
	ck_assert_int_eq(rules_of("policy", "\"10.0.0.0/8\",\"127.0.0.0/8\"", false), 0);
	ck_assert_int_eq(rules_of("create", "\"192.0.2.0/24\",\"[fd00::]/8\"", false), 0);
	ck_assert_int_eq(rules_of("policy", "\"169.254.169.254/32:tcp:80\"", false), -EACCES);
	ck_assert_msg(strstr(husk_lasterr(), "this sandbox keeps it closed"), "%s",
		      husk_lasterr());
	ck_assert_int_eq(rules_of("policy", "\"192.0.2.10/32\"", false), -EACCES);
	ck_assert_msg(strstr(husk_lasterr(), "an address of this host"), "%s", husk_lasterr());
}
END_TEST

/* A client's worker: --absolute-builtins, which husk run's parser takes. */
START_TEST(strict_worker_option)
{
	struct run_opts ro;

	parse("{\"id\":1,\"op\":\"create\",\"net\":\"egress\",\"allow\":[\"93.184.216.34/32\"]}");
	ck_assert_int_eq(api_strict_worker(&r), 0);
	ck_assert(r.strict_net);
	ck_assert_str_eq(r.wargv[r.wargc - 1], "--absolute-builtins");
	ck_assert_ptr_null(r.wargv[r.wargc]);
	ck_assert_int_eq(cli_parse_run(r.wargc, r.wargv, &ro), 0);
	ck_assert(ro.absolute_builtins);
	/* Once is enough. */
	ck_assert_int_eq(api_strict_worker(&r), 0);
	ck_assert_str_ne(r.wargv[r.wargc - 2], "--absolute-builtins");
	/* Without a network there is nothing to keep closed. */
	parse("{\"id\":1,\"op\":\"run\",\"argv\":[\"true\"]}");
	ck_assert_int_eq(api_strict_worker(&r), 0);
	ck_assert(!r.strict_net);
	ck_assert_str_ne(r.wargv[r.wargc - 1], "--absolute-builtins");
}
END_TEST

/* The table of the filter's built-in ranges, as the filter reads it. */
START_TEST(builtin_ranges_table)
{
	uint8_t a[16];
	const struct net_range *w;

	inet_pton(AF_INET, "169.254.169.254", a);
	ck_assert_uint_eq(ranges_builtin_deny(AF_INET, a, &w), 32);
	ck_assert(w->platform);
	inet_pton(AF_INET, "169.254.1.1", a);
	ck_assert_uint_eq(ranges_builtin_deny(AF_INET, a, NULL), 16);
	inet_pton(AF_INET, "127.0.0.53", a);
	ck_assert_uint_eq(ranges_builtin_deny(AF_INET, a, NULL), EGRESS_DENY_ABSOLUTE);
	inet_pton(AF_INET, "255.255.255.255", a);
	ck_assert_uint_eq(ranges_builtin_deny(AF_INET, a, NULL), EGRESS_DENY_ABSOLUTE);
	inet_pton(AF_INET, "93.184.216.34", a);
	ck_assert_uint_eq(ranges_builtin_deny(AF_INET, a, &w), 0);
	ck_assert_ptr_null(w);
	inet_pton(AF_INET6, "::1", a);
	ck_assert_uint_eq(ranges_builtin_deny(AF_INET6, a, NULL), EGRESS_DENY_ABSOLUTE);
	inet_pton(AF_INET6, "::2", a);
	ck_assert_uint_eq(ranges_builtin_deny(AF_INET6, a, NULL), 96);
	inet_pton(AF_INET6, "fd00:c1::a9fe:a9fe", a);
	ck_assert_uint_eq(ranges_builtin_deny(AF_INET6, a, NULL), 128);
	inet_pton(AF_INET6, "64:ff9b:1::5", a);
	ck_assert_uint_eq(ranges_builtin_deny(AF_INET6, a, NULL), 48);
	inet_pton(AF_INET6, "2001:db8::1", a);
	ck_assert_uint_eq(ranges_builtin_deny(AF_INET6, a, NULL), 0);
	inet_pton(AF_INET, "10.1.0.0", a);
	ck_assert(ranges_within(AF_INET, a, 16, (uint8_t[]){ 10, 0, 0, 0 }, 8));
	ck_assert(!ranges_within(AF_INET, (uint8_t[]){ 10, 0, 0, 0 }, 8, a, 16));
	ck_assert(ranges_within(AF_INET, (uint8_t[]){ 172, 31, 0, 0 }, 16,
				(uint8_t[]){ 172, 16, 0, 0 }, 12));
	ck_assert(!ranges_within(AF_INET, (uint8_t[]){ 172, 32, 0, 0 }, 16,
				 (uint8_t[]){ 172, 16, 0, 0 }, 12));
}
END_TEST

/* A run or create on image, refused as an image that does not exist. */
static void image_not_found(const char *op, const char *image)
{
	char line[512];
	const char *code;

	snprintf(line, sizeof(line), "{\"id\":1,\"op\":\"%s\",\"image\":\"%s\"%s}", op, image,
		 strcmp(op, "run") ? "" : ",\"argv\":[\"true\"]");
	api_req_free(&r);
	ck_assert_msg(api_parse(line, strlen(line), &r, &code) != 0, "taken: %s", line);
	ck_assert_str_eq(code, E_NOT_FOUND);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "no image"));
}

/*
 * A container's root (husk-runc names it oci-<sha256 of the ID>) and any
 * key or key prefix are not images a client can boot; names are.
 */
START_TEST(container_roots_and_keys_are_not_served)
{
	static const char oci[] = "oci-5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8";

	image_not_found("run", oci);
	image_not_found("create", oci);
	image_not_found("run", "oci-x");
	image_not_found("run", "0123456789ab");
	image_not_found("create", "5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8");
	parse("{\"id\":1,\"op\":\"run\",\"image\":\"python:3.12\",\"argv\":[\"true\"]}");
	ck_assert(!r.machine_default);
	parse("{\"id\":1,\"op\":\"create\",\"image\":\"0123456789a\"}");
	parse("{\"id\":1,\"op\":\"create\",\"image\":\"ABCDEF0123456\"}");
	parse("{\"id\":1,\"op\":\"create\",\"image\":\"my-oci-tools\"}");
}
END_TEST

/* A pooled clone's workspace was made at its start: a size asked for takes no clone. */
START_TEST(workspace_size_takes_no_pool)
{
	parse("{\"id\":1,\"op\":\"create\",\"template\":\"base\",\"workspace_size\":64}");
	ck_assert(!r.machine_default);
	ck_assert(!r.net_pool);
	parse("{\"id\":1,\"op\":\"run\",\"template\":\"net\",\"net\":\"egress\","
	      "\"workspace_size\":1024,\"argv\":[\"true\"]}");
	ck_assert(!r.machine_default);
	ck_assert(!r.net_pool);
}
END_TEST

/* The daemon caps what was asked for and cuts only its own defaults. */
START_TEST(timeouts_asked_for_are_marked)
{
	parse("{\"id\":1,\"op\":\"create\"}");
	ck_assert(!r.timeout_set && !r.idle_set);
	parse("{\"id\":1,\"op\":\"create\",\"timeout\":0,\"idle_timeout\":5}");
	ck_assert(r.timeout_set && r.idle_set);
	ck_assert_uint_eq(r.lifetime_s, 0);
	parse("{\"id\":1,\"op\":\"run\",\"argv\":[\"true\"],\"vcpus\":3,\"timeout\":9}");
	ck_assert(r.timeout_set);
	ck_assert_uint_eq(r.cmd.timeout_ms, 9000);
	ck_assert_uint_eq(r.vcpus, 3);
}
END_TEST

Suite *api_suite(void)
{
	Suite *s = suite_create("api");
	TCase *tc = tcase_create("pool");

	tcase_add_checked_fixture(tc, NULL, teardown);
	tcase_add_test(tc, plain_template_is_machine_default);
	tcase_add_test(tc, egress_without_rules_is_net_pool);
	tcase_add_test(tc, egress_rules_become_the_policy);
	tcase_add_test(tc, machine_changes_take_no_pool);
	tcase_add_test(tc, bad_rule_is_refused);
	tcase_add_test(tc, workspace_size_takes_no_pool);
	tcase_add_test(tc, timeouts_asked_for_are_marked);
	suite_add_tcase(s, tc);
	tc = tcase_create("client-rules");
	tcase_add_checked_fixture(tc, lim_setup, teardown);
	tcase_add_test(tc, client_closed_ranges_refused);
	tcase_add_test(tc, client_public_unicast_accepted);
	tcase_add_test(tc, client_allow_opens_private_ranges);
	tcase_add_test(tc, admin_rules_on_a_strict_worker);
	tcase_add_test(tc, strict_worker_option);
	tcase_add_test(tc, builtin_ranges_table);
	suite_add_tcase(s, tc);
	tc = tcase_create("image");
	tcase_add_checked_fixture(tc, NULL, teardown);
	tcase_add_test(tc, container_roots_and_keys_are_not_served);
	suite_add_tcase(s, tc);
	return s;
}
