/*
 * run_policy: a live change of a running VM's egress rules, received by
 * the supervisor on `husk run --policy-fd N` (husk serve's `policy`
 * request). One JSON object per SOCK_SEQPACKET message,
 *
 *   {"allow":["CIDR[:PROTO[:PORTS]]",...],"allow_host":[NAME,...],"deny":[CIDR,...]}
 *
 * each key optional, a present one replacing that list; one answer each:
 * {"ok":true,"allow":[...],"allow_host":[...],"deny":[...]} with the rules
 * now in force, or {"error":"why"}. Every entry is checked by the parsers
 * of `husk run --allow/--allow-host/--deny` before anything changes; the
 * peer is treated as hostile like any other (size cap, one message per
 * wakeup). Each change goes into the record's network.policy.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <jansson.h>

#include "lib/util.h"
#include "run/run_int.h"
#include "serve/api.h"

#define POLICY_MSG_MAX (64 * 1024)

json_t *run_rules_json(const struct run_allow *allow, unsigned na, const struct run_deny *deny,
		       unsigned nd, const char *const *hosts, unsigned nh)
{
	json_t *o = json_object(), *a = json_array(), *h = json_array(), *d = json_array();
	char buf[256];
	unsigned i;

	for (i = 0; i < na; i++) {
		cli_format_allow(&allow[i], buf, sizeof(buf));
		json_array_append_new(a, json_string(buf));
	}
	for (i = 0; i < nh; i++)
		json_array_append_new(h, json_string(hosts[i]));
	for (i = 0; i < nd; i++) {
		cli_format_deny(&deny[i], buf, sizeof(buf));
		json_array_append_new(d, json_string(buf));
	}
	json_object_set_new(o, "allow", a);
	json_object_set_new(o, "allow_host", h);
	json_object_set_new(o, "deny", d);
	return o;
}

/* Append one change to the record's log, as far as it fits. */
static void log_change(struct run_result *r, json_t *req, uint64_t at_ms)
{
	json_t *e = json_deep_copy(req);
	char *s;
	size_t n = strlen(r->policy_log), len;

	r->policy_changes++;
	if (!e)
		return;
	json_object_set_new(e, "at_ms", json_integer((json_int_t)at_ms));
	s = json_dumps(e, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(e);
	if (!s)
		return;
	len = strlen(s);
	if (!r->policy_log_full && n + len + 2 < sizeof(r->policy_log)) {
		if (n)
			r->policy_log[n++] = ',';
		memcpy(r->policy_log + n, s, len + 1);
	} else {
		r->policy_log_full = true;
	}
	free(s);
}

static void answer(int fd, json_t *a)
{
	char *s = a ? json_dumps(a, JSON_COMPACT) : NULL;

	/* A peer that does not read its answers loses them, not us our loop. */
	if (s)
		send(fd, s, strlen(s), MSG_DONTWAIT | MSG_NOSIGNAL);
	free(s);
	json_decref(a);
}

/* The rules now in force, as the answer to a change that went through. */
static void answer_rules(int fd, const struct run_egress *N)
{
	const struct run_allow *allow;
	const struct run_deny *deny;
	char *const *hosts;
	unsigned na, nd, nh;
	json_t *a;

	run_net_rules(N, &allow, &na, &deny, &nd, &hosts, &nh);
	a = run_rules_json(allow, na, deny, nd, (const char *const *)hosts, nh);
	json_object_set_new(a, "ok", json_true());
	answer(fd, a);
}

static void refuse(int fd, const char *fmt, const char *arg)
{
	char why[512];

	snprintf(why, sizeof(why), fmt, arg);
	answer(fd, json_pack("{s:s}", "error", why));
}

/*
 * Everything is parsed before anything changes, so a bad entry changes
 * nothing. Returns 1 when a change failed half way: the filter may hold a
 * mix of old and new rules, so the caller stops the VM (why says it).
 */
static int apply(int fd, struct run_egress *N, json_t *req, struct run_result *r,
		 uint64_t at_ms, char *why, size_t len)
{
	static struct run_allow allow[RUN_MAX_ALLOW];
	static struct run_deny deny[RUN_MAX_DENY];
	const char *hosts[RUN_MAX_ALLOW_HOST];
	const char *key;
	json_t *ja, *jh, *jd, *e;
	size_t i;
	int err, hosts_err;

	json_object_foreach(req, key, e)
		if (strcmp(key, "allow") && strcmp(key, "allow_host") && strcmp(key, "deny")) {
			refuse(fd, "unknown key \"%s\"", key);
			return 0;
		}
	if (api_str_array(req, "allow", RUN_MAX_ALLOW, &ja) ||
	    api_str_array(req, "allow_host", RUN_MAX_ALLOW_HOST, &jh) ||
	    api_str_array(req, "deny", RUN_MAX_DENY, &jd)) {
		refuse(fd, "%s", husk_lasterr());
		return 0;
	}
	json_array_foreach(ja, i, e)
		if (cli_parse_allow(json_string_value(e), &allow[i])) {
			refuse(fd, "%s", husk_lasterr());
			return 0;
		}
	json_array_foreach(jh, i, e) {
		hosts[i] = json_string_value(e);
		if (cli_check_allow_host(hosts[i])) {
			refuse(fd, "%s", husk_lasterr());
			return 0;
		}
	}
	json_array_foreach(jd, i, e)
		if (cli_parse_deny(json_string_value(e), &deny[i])) {
			refuse(fd, "%s", husk_lasterr());
			return 0;
		}
	hosts_err = jh ? run_net_set_hosts(N, (char *const *)hosts, json_array_size(jh)) : 0;
	if (hosts_err < 0) {
		refuse(fd, "%s", husk_lasterr());
		return 0;
	}
	if (ja || jd) {
		const struct run_allow *oa;
		const struct run_deny *od;
		char *const *oh;
		unsigned na, nd, nh;

		run_net_rules(N, &oa, &na, &od, &nd, &oh, &nh);
		/* An absent list stays as it is. */
		if (!ja)
			memcpy(allow, oa, na * sizeof(*oa));
		if (!jd)
			memcpy(deny, od, nd * sizeof(*od));
		err = run_net_set_rules(N, allow, ja ? json_array_size(ja) : na, deny,
					jd ? json_array_size(jd) : nd);
		if (err) {
			log_change(r, req, at_ms);
			snprintf(why, len, "a policy change failed half way: %s", husk_lasterr());
			refuse(fd, "%s", why);
			return 1;
		}
	}
	log_change(r, req, at_ms);
	if (hosts_err) {
		refuse(fd, "the rules changed, but %s", husk_lasterr());
		return 0;
	}
	answer_rules(fd, N);
	return 0;
}

int run_policy_handle(int fd, struct run_egress *N, struct run_result *r, uint64_t at_ms,
		      char *why, size_t len)
{
	static char msg[POLICY_MSG_MAX];
	json_error_t je;
	json_t *req;
	ssize_t n;
	int stop;

	n = recv(fd, msg, sizeof(msg), MSG_DONTWAIT | MSG_TRUNC);
	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -1;
	if (n == 0)
		return -1;	/* the peer is gone: the rules stay as they are */
	if ((size_t)n > sizeof(msg)) {
		refuse(fd, "a policy message may be at most %s bytes", "65536");
		return 0;
	}
	if (!N) {
		refuse(fd, "%s", "this VM has no network (--net egress) whose rules could change");
		return 0;
	}
	req = json_loadb(msg, n, JSON_REJECT_DUPLICATES, &je);
	if (!req || !json_is_object(req)) {
		refuse(fd, "a policy is a JSON object: %s", req ? "" : je.text);
		json_decref(req);
		return 0;
	}
	stop = apply(fd, N, req, r, at_ms, why, len);
	json_decref(req);
	return stop;
}
