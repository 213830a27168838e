/*
 * Unit tests for serve/api: which requests a pooled clone may serve. A
 * request that changes the machine never takes one; one whose only change
 * is net egress (with or without rules) may take a networked template's
 * clone, and its rules then travel as the policy message.
 */
#include <string.h>

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
	return s;
}
