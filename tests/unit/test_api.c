/*
 * Unit tests for serve/api: which requests a pooled clone may serve. A
 * request that changes the machine never takes one; one whose only change
 * is net egress (with or without rules) may take a networked template's
 * clone, and its rules then travel as the policy message. Images are
 * booted by name only: keys and containers' roots are not-found.
 */
#include <stdio.h>
#include <string.h>

#include "lib/util.h"
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
	suite_add_tcase(s, tc);
	tc = tcase_create("image");
	tcase_add_checked_fixture(tc, NULL, teardown);
	tcase_add_test(tc, container_roots_and_keys_are_not_served);
	suite_add_tcase(s, tc);
	return s;
}
