/*
 * api: husk serve's requests and answers. See api.h.
 */
#include <errno.h>
#include <inttypes.h>
#include <nettle/base64.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_run.h"
#include "image/image.h"
#include "lib/util.h"
#include "net/ranges.h"
#include "serve/api.h"

#define DEFAULT_LIFETIME_S 3600
#define DEFAULT_IDLE_S 600
#define RUN_FILES_ALLOWANCE_S 60	/* a run's worker lives this much past its job */

static const char *const op_names[OP__NR] = {
	[OP_RUN] = "run", [OP_CREATE] = "create", [OP_EXEC] = "exec", [OP_STDIN] = "stdin",
	[OP_SIGNAL] = "signal", [OP_PUT] = "put", [OP_GET] = "get", [OP_POLICY] = "policy",
	[OP_DESTROY] = "destroy", [OP_LIST] = "list", [OP_INSPECT] = "inspect",
	[OP_KILL] = "kill", [OP_WAIT] = "wait", [OP_HEALTH] = "health",
};

const char *api_op_name(enum api_op op)
{
	return (unsigned)op < OP__NR ? op_names[op] : "?";
}

/* ---- base64 ---- */

json_t *api_b64(const uint8_t *p, size_t n)
{
	char *s = malloc(BASE64_ENCODE_RAW_LENGTH(n) + 1);
	json_t *j;

	if (!s)
		return NULL;
	base64_encode_raw(s, n, p);
	j = json_stringn_nocheck(s, BASE64_ENCODE_RAW_LENGTH(n));
	free(s);
	return j;
}

int api_unb64(const json_t *s, uint8_t **out, size_t *len)
{
	struct base64_decode_ctx ctx;
	size_t n = json_string_length(s), cap = BASE64_DECODE_LENGTH(n);
	uint8_t *b;

	*out = NULL;
	*len = 0;
	if (!json_is_string(s))
		return husk_seterr(EINVAL, "data must be a base64 string");
	b = malloc(cap ? cap : 1);
	if (!b)
		return husk_seterr(ENOMEM, "out of memory");
	base64_decode_init(&ctx);
	if (!base64_decode_update(&ctx, len, b, n, json_string_value(s)) ||
	    !base64_decode_final(&ctx)) {
		free(b);
		*len = 0;
		return husk_seterr(EINVAL, "data is not valid base64");
	}
	*out = b;
	return 0;
}

/* ---- answers ---- */

static char *line(json_t *o)
{
	char *s, *l;
	size_t n;

	if (!o)
		return NULL;
	s = json_dumps(o, JSON_COMPACT | JSON_ENCODE_ANY);
	json_decref(o);
	if (!s)
		return NULL;
	n = strlen(s);
	l = realloc(s, n + 2);
	if (!l) {
		free(s);
		return NULL;
	}
	l[n] = '\n';
	l[n + 1] = '\0';
	return l;
}

static json_t *head(json_t *id)
{
	json_t *o = json_object();

	if (!o)
		return NULL;
	json_object_set_new(o, "v", json_integer(API_VERSION));
	json_object_set(o, "re", id ? id : json_null());
	return o;
}

static json_t *merge(json_t *o, json_t *fields)
{
	if (o && fields)
		json_object_update(o, fields);
	json_decref(fields);
	return o;
}

char *api_error(json_t *id, const char *code, const char *msg, json_t *extra)
{
	json_t *o = head(id), *e = json_object(), *m;

	if (!o || !e) {
		json_decref(o);
		json_decref(e);
		json_decref(extra);
		return NULL;
	}
	m = json_string(msg);
	json_object_set_new(e, "code", json_string(code));
	/* Guest- or client-chosen bytes may be in a message: it must be valid UTF-8. */
	json_object_set_new(e, "message", m ? m : json_string("(a message that is not UTF-8)"));
	json_object_set_new(o, "error", e);
	return line(merge(o, extra));
}

char *api_event(json_t *id, const char *event, json_t *fields)
{
	json_t *o = head(id);

	if (o)
		json_object_set_new(o, "event", json_string(event));
	return line(merge(o, fields));
}

char *api_ok(json_t *id, json_t *fields)
{
	json_t *o = head(id);

	if (o)
		json_object_set_new(o, "ok", json_true());
	return line(merge(o, fields));
}

/* ---- request fields ---- */

int api_signal(const json_t *v)
{
	if (json_is_integer(v))
		return json_integer_value(v) >= 1 && json_integer_value(v) <= 64 ?
		       (int)json_integer_value(v) : -1;
	return json_is_string(v) ? signal_by_name(json_string_value(v)) : -1;
}

/* A field of an expected type; NULL when absent. */
static int field(json_t *o, const char *key, json_type type, json_t **out)
{
	json_t *v = json_object_get(o, key);

	*out = NULL;
	if (!v || json_is_null(v))
		return 0;
	if (json_typeof(v) != type && !(type == JSON_REAL && json_is_integer(v)) &&
	    !(type == JSON_TRUE && json_is_boolean(v)))
		return husk_seterr(EINVAL, "field \"%s\" has the wrong type", key);
	*out = v;
	return 0;
}

static int get_bool(json_t *o, const char *key, bool *b)
{
	json_t *v;
	int err = field(o, key, JSON_TRUE, &v);

	if (!err && v)
		*b = json_is_true(v);
	return err;
}

static int get_uint(json_t *o, const char *key, uint64_t max, uint64_t *u, bool *set)
{
	json_t *v;
	int err = field(o, key, JSON_INTEGER, &v);

	if (set)
		*set = false;
	if (err || !v)
		return err;
	if (json_integer_value(v) < 0 || (uint64_t)json_integer_value(v) > max)
		return husk_seterr(ERANGE, "field \"%s\" is out of range 0..%" PRIu64, key, max);
	*u = (uint64_t)json_integer_value(v);
	if (set)
		*set = true;
	return 0;
}

static int get_str(json_t *o, const char *key, const char **s)
{
	json_t *v;
	int err = field(o, key, JSON_STRING, &v);

	*s = NULL;
	if (err || !v)
		return err;
	if (strlen(json_string_value(v)) != json_string_length(v))
		return husk_seterr(EINVAL, "field \"%s\" holds a NUL byte", key);
	*s = json_string_value(v);
	return 0;
}

int api_str_array(json_t *o, const char *key, unsigned max, json_t **arr)
{
	size_t i;
	json_t *v;
	int err = field(o, key, JSON_ARRAY, arr);

	if (err || !*arr)
		return err;
	if (json_array_size(*arr) > max)
		return husk_seterr(E2BIG, "field \"%s\" has more than %u entries", key, max);
	json_array_foreach(*arr, i, v) {
		if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
			return husk_seterr(EINVAL, "field \"%s\" must hold strings without NUL", key);
	}
	return 0;
}

static int warg(struct api_req *r, const char *a)
{
	if (r->wargc >= API_MAX_WORKER_ARGS - 1)
		return husk_seterr(E2BIG, "too many options");
	r->wargv[r->wargc] = strdup(a);
	if (!r->wargv[r->wargc])
		return husk_seterr(ENOMEM, "out of memory");
	r->wargc++;
	return 0;
}

static int warg2(struct api_req *r, const char *opt, const char *val)
{
	int err = warg(r, opt);

	return err ? err : warg(r, val);
}

static int warg_uint(struct api_req *r, json_t *o, const char *key, const char *opt,
		     uint64_t max, bool *set)
{
	char buf[32];
	uint64_t u = 0;
	bool s;
	int err = get_uint(o, key, max, &u, &s);

	if (set)
		*set = s;
	if (err || !s)
		return err;
	snprintf(buf, sizeof(buf), "%" PRIu64, u);
	return warg2(r, opt, buf);
}

static int warg_strs(struct api_req *r, json_t *o, const char *key, const char *opt,
		     bool *set)
{
	json_t *arr, *v;
	size_t i;
	int err = api_str_array(o, key, 256, &arr);

	if (set)
		*set = arr && json_array_size(arr);
	if (err || !arr)
		return err;
	json_array_foreach(arr, i, v) {
		err = warg2(r, opt, json_string_value(v));
		if (err)
			return err;
	}
	return 0;
}

/* "env": {"K": "V"} into "K=V" strings. */
static int env_list(json_t *o, char ***env, unsigned *n)
{
	const char *k;
	json_t *obj, *v;
	int err = field(o, "env", JSON_OBJECT, &obj);

	*env = NULL;
	*n = 0;
	if (err || !obj)
		return err;
	if (json_object_size(obj) > 256)
		return husk_seterr(E2BIG, "env has more than 256 entries");
	*env = calloc(json_object_size(obj) + 1, sizeof(char *));
	if (!*env)
		return husk_seterr(ENOMEM, "out of memory");
	json_object_foreach(obj, k, v) {
		size_t kl = strlen(k);

		if (!kl || strchr(k, '=') || !json_is_string(v) ||
		    strlen(json_string_value(v)) != json_string_length(v))
			return husk_seterr(EINVAL, "env entries are \"KEY\": \"value\" strings, "
					   "KEY not empty and without '='");
		(*env)[*n] = malloc(kl + 2 + json_string_length(v));
		if (!(*env)[*n])
			return husk_seterr(ENOMEM, "out of memory");
		sprintf((*env)[*n], "%s=%s", k, json_string_value(v));
		(*n)++;
	}
	return 0;
}

static int get_cmd(json_t *o, struct api_cmd *c, bool need_argv)
{
	json_t *arr, *v;
	const char *cwd;
	uint64_t t = 0;
	size_t i;
	int err = api_str_array(o, "argv", 4096, &arr);

	if (!err && (!arr || !json_array_size(arr)) && need_argv)
		err = husk_seterr(EINVAL, "argv: a non-empty array of strings is required");
	if (!err && arr && json_array_size(arr) && !json_string_length(json_array_get(arr, 0)))
		err = husk_seterr(EINVAL, "argv[0] is empty");
	if (err)
		return err;
	if (arr) {
		c->argv = calloc(json_array_size(arr) + 1, sizeof(char *));
		if (!c->argv)
			return husk_seterr(ENOMEM, "out of memory");
		json_array_foreach(arr, i, v) {
			c->argv[i] = strdup(json_string_value(v));
			if (!c->argv[i])
				return husk_seterr(ENOMEM, "out of memory");
			c->argc++;
		}
	}
	err = env_list(o, &c->env, &c->nr_env);
	if (!err)
		err = get_str(o, "cwd", &cwd);
	if (!err && cwd) {
		c->cwd = strdup(cwd);
		if (!c->cwd)
			err = husk_seterr(ENOMEM, "out of memory");
	}
	if (!err)
		err = get_bool(o, "stdin", &c->stdin);
	if (!err)
		err = get_uint(o, "timeout", 31ull * 24 * 3600, &t, NULL);
	c->timeout_ms = t * 1000;
	return err;
}

static int get_policy(json_t *o, struct api_req *r);

/*
 * The images a client may boot: the store's images by their names. A key
 * or key prefix would reach every image stored, and oci-* names are the
 * roots of the containers husk-runc runs, an engine's users' files. To a
 * client both are images that do not exist (-ENOENT: not-found), whoever
 * asks: the daemon's store holds only what its administrator named.
 */
static int served_image(const char *name)
{
	if (image_is_key(name, IMAGE_KEY_PREFIX_MIN) ||
	    !strncmp(name, IMAGE_OCI_PREFIX, strlen(IMAGE_OCI_PREFIX)))
		return husk_seterr(ENOENT, "no image '%s' (the daemon boots images by their "
				   "names; keys and containers' roots are not served)", name);
	return 0;
}

/* run, create: the worker's command line, checked as husk run checks it. */
static int machine(json_t *o, struct api_req *r)
{
	bool set, changed = false, rules = false;
	uint64_t timeout = 0;
	json_t *v;
	const char *s;
	char buf[32];
	struct run_opts ro;
	int err;

	err = warg(r, "run");
	if (!err)
		err = warg2(r, "--session-fd", API_WORKER_SESSION_FD);
	if (!err)
		err = warg2(r, "--json-fd", API_WORKER_JSON_FD);
	if (!err)
		err = get_str(o, "template", &r->template_name);
	if (!err && r->template_name)
		err = warg2(r, "--template", r->template_name);
	if (!err)
		err = get_str(o, "image", &s);
	if (!err && s)
		err = served_image(s);
	if (!err && s) {
		/* Booted on an image: never a pool's template clone. */
		err = warg2(r, "--image", s);
		changed = true;
	}
	if (!err)
		err = warg_uint(r, o, "mem", "--mem", 65536, &set);
	changed |= set;
	if (!err)
		err = warg_uint(r, o, "vcpus", "--vcpus", 32, &set);
	changed |= set;
	if (!err)
		err = field(o, "cpus", JSON_REAL, &v);
	if (!err && v) {
		if (json_number_value(v) <= 0 || json_number_value(v) > 1024)
			err = husk_seterr(ERANGE, "cpus is out of range");
		snprintf(buf, sizeof(buf), "%.3f", json_number_value(v));
		if (!err)
			err = warg2(r, "--cpus", buf);
		changed = true;
	}
	if (!err)
		err = get_uint(o, "timeout", 31ull * 24 * 3600, &timeout, &r->timeout_set);
	set = r->timeout_set;
	if (!err && r->op == OP_CREATE) {
		r->lifetime_s = set ? timeout : DEFAULT_LIFETIME_S;
		r->idle_timeout_s = DEFAULT_IDLE_S;
		err = get_uint(o, "idle_timeout", 31ull * 24 * 3600, &r->idle_timeout_s,
			       &r->idle_set);
		timeout = r->lifetime_s;
	} else if (!err) {
		/* The job's timeout is its exec's; the worker lives long enough for files too. */
		if (!set)
			timeout = RUN_DEFAULT_TIMEOUT_SEC;
		r->cmd.timeout_ms = timeout * 1000;
		timeout += RUN_FILES_ALLOWANCE_S;
	}
	if (!err && timeout) {
		snprintf(buf, sizeof(buf), "%" PRIu64, timeout);
		err = warg2(r, "--timeout", buf);
	}
	/* A session's env and cwd are every exec's defaults: the worker's job has them. */
	for (unsigned i = 0; !err && r->op == OP_CREATE && i < r->cmd.nr_env; i++)
		err = warg2(r, "--env", r->cmd.env[i]);
	if (!err && r->op == OP_CREATE && r->cmd.cwd)
		err = warg2(r, "--cwd", r->cmd.cwd);
	/* A pooled clone's workspace was made at its start, with the default size. */
	if (!err)
		err = warg_uint(r, o, "workspace_size", "--workspace-size", RUN_MAX_WORKSPACE_MIB,
				&set);
	changed |= set;
	r->max_output = RUN_DEFAULT_MAX_OUTPUT;
	if (!err)
		err = get_uint(o, "max_output", UINT64_MAX / 2, &r->max_output, NULL);
	if (!err)
		err = get_str(o, "net", &s);
	if (!err && s) {
		err = warg2(r, "--net", s);
		/* A sandbox with a network may have its rules changed (policy). */
		r->net_policy = !strcmp(s, "egress");
		changed |= strcmp(s, "none") && !r->net_policy;
		if (!err && r->net_policy)
			err = warg2(r, "--policy-fd", API_WORKER_POLICY_FD);
	}
	if (!err)
		err = warg_strs(r, o, "allow", "--allow", &set);
	rules |= set;
	if (!err)
		err = warg_strs(r, o, "allow_host", "--allow-host", &set);
	rules |= set;
	if (!err)
		err = warg_strs(r, o, "deny", "--deny", &set);
	rules |= set;
	if (!err)
		err = warg_uint(r, o, "conn_rate", "--conn-rate", RUN_MAX_CONN_RATE, &set);
	changed |= set;
	if (!err)
		err = warg_uint(r, o, "egress_limit", "--egress-limit", UINT64_MAX / 2, &set);
	changed |= set;
	if (!err)
		err = warg_uint(r, o, "egress_rate", "--egress-rate", UINT64_MAX / 2, &set);
	changed |= set;
	if (!err)
		err = warg_uint(r, o, "max_dests", "--max-dests", UINT32_MAX, &set);
	changed |= set;
	if (err)
		return err;
	r->wargv[r->wargc] = NULL;
	/* The worker's own parser decides, here already. */
	if (cli_parse_run(r->wargc, r->wargv, &ro))
		return -EINVAL;
	r->mem_mib = ro.mem_mib;
	r->vcpus = ro.vcpus;
	r->machine_default = !changed && !r->net_policy && !rules;
	/*
	 * A networked pool's clone starts with no rule: it serves a request
	 * whose only change is its egress rules, which it gets as a policy.
	 */
	r->net_pool = !changed && r->net_policy && r->template_name;
	return r->net_pool && rules ? get_policy(o, r) : 0;
}

static int get_puts(json_t *o, struct api_req *r)
{
	json_t *arr, *v;
	size_t i;
	int err = field(o, "put", JSON_ARRAY, &arr);

	if (err || !arr)
		return err;
	if (json_array_size(arr) > 32)
		return husk_seterr(E2BIG, "put: at most 32 archives");
	r->puts = calloc(json_array_size(arr) + 1, sizeof(*r->puts));
	r->put_len = calloc(json_array_size(arr) + 1, sizeof(*r->put_len));
	if (!r->puts || !r->put_len)
		return husk_seterr(ENOMEM, "out of memory");
	json_array_foreach(arr, i, v) {
		err = api_unb64(v, &r->puts[i], &r->put_len[i]);
		if (err)
			return husk_seterr(err, "put[%zu]: %s", i, husk_lasterr());
		r->nr_puts++;
	}
	return 0;
}

static int get_gets(json_t *o, struct api_req *r)
{
	json_t *arr, *v;
	size_t i;
	int err = api_str_array(o, "get", 32, &arr);

	if (err || !arr)
		return err;
	r->gets = calloc(json_array_size(arr) + 1, sizeof(*r->gets));
	if (!r->gets)
		return husk_seterr(ENOMEM, "out of memory");
	json_array_foreach(arr, i, v)
		r->gets[r->nr_gets++] = json_string_value(v);
	return 0;
}

/* The keys each op may carry; anything else is a mistake worth saying. */
static bool known_key(enum api_op op, const char *k)
{
	static const char *const common[] = { "v", "id", "op", NULL };
	static const char *const machine_keys[] = {
		"template", "image", "mem", "vcpus", "cpus", "timeout", "workspace_size", "max_output",
		"env", "cwd", "net", "allow", "allow_host", "deny", "conn_rate", "egress_limit",
		"egress_rate", "max_dests", "put", NULL };
	static const char *const per_op[OP__NR][8] = {
		[OP_RUN] = { "argv", "stdin", "get", "get_always", "detach" },
		[OP_CREATE] = { "idle_timeout" },
		[OP_EXEC] = { "sandbox", "argv", "env", "cwd", "stdin", "timeout" },
		[OP_STDIN] = { "exec", "run", "data", "eof" },
		[OP_SIGNAL] = { "exec", "signal" },
		[OP_PUT] = { "sandbox", "data", "stream", "more" },
		[OP_GET] = { "sandbox", "path" },
		[OP_POLICY] = { "sandbox", "allow", "allow_host", "deny" },
		[OP_DESTROY] = { "sandbox" }, [OP_INSPECT] = { "sandbox" },
		[OP_KILL] = { "sandbox" }, [OP_WAIT] = { "sandbox" },
	};
	unsigned i;

	for (i = 0; common[i]; i++)
		if (!strcmp(k, common[i]))
			return true;
	if (op == OP_RUN || op == OP_CREATE)
		for (i = 0; machine_keys[i]; i++)
			if (!strcmp(k, machine_keys[i]))
				return true;
	for (i = 0; i < 8 && per_op[op][i]; i++)
		if (!strcmp(k, per_op[op][i]))
			return true;
	return false;
}

/* jansson's own limit is 2048 levels: count brackets first, outside strings. */
bool api_too_deep(const char *s, size_t n)
{
	unsigned depth = 0;
	bool str = false;
	size_t i;

	for (i = 0; i < n; i++) {
		char c = s[i];

		if (str) {
			if (c == '\\')
				i++;
			else if (c == '"')
				str = false;
		} else if (c == '"') {
			str = true;
		} else if (c == '{' || c == '[') {
			if (++depth > API_MAX_DEPTH)
				return true;
		} else if ((c == '}' || c == ']') && depth) {
			depth--;
		}
	}
	return false;
}

static int parse_id(struct api_req *r)
{
	json_t *id = json_object_get(r->root, "id");

	if (json_is_integer(id) || (json_is_string(id) && json_string_length(id) >= 1 &&
				    json_string_length(id) <= API_MAX_ID)) {
		r->id = id;
		return 0;
	}
	return husk_seterr(EINVAL, "\"id\" must be a string of 1..%d bytes or an integer",
			   API_MAX_ID);
}

static int parse_op(json_t *o, struct api_req *r)
{
	const char *op = json_string_value(json_object_get(o, "op")), *k;
	json_t *v;
	unsigned i;

	if (!op)
		return husk_seterr(EINVAL, "\"op\" is missing");
	for (i = 0; i < OP__NR; i++)
		if (!strcmp(op, op_names[i]))
			break;
	if (i == OP__NR)
		return husk_seterr(EINVAL, "unknown op \"%.64s\"", op);
	r->op = i;
	json_object_foreach(o, k, v) {
		if (!known_key(r->op, k))
			return husk_seterr(EINVAL, "%s does not take \"%.64s\"", op, k);
	}
	return 0;
}

static int need_sandbox(json_t *o, struct api_req *r)
{
	int err = get_str(o, "sandbox", &r->sandbox);

	if (!err && !r->sandbox)
		err = husk_seterr(EINVAL, "\"sandbox\" is required");
	return err;
}

/*
 * policy: the lists it replaces, each entry checked by the parsers of
 * husk run --allow/--allow-host/--deny; r->policy is the message for the
 * worker (run_policy.c).
 */
static int get_policy(json_t *o, struct api_req *r)
{
	static const char *const keys[] = { "allow", "allow_host", "deny" };
	struct run_allow a;
	struct run_deny d;
	json_t *arr, *v;
	unsigned k;
	size_t i;
	int err;

	r->policy = json_object();
	if (!r->policy)
		return husk_seterr(ENOMEM, "out of memory");
	for (k = 0; k < 3; k++) {
		err = api_str_array(o, keys[k], RUN_MAX_ALLOW, &arr);
		if (err)
			return err;
		if (!arr)
			continue;
		json_array_foreach(arr, i, v) {
			const char *e = json_string_value(v);

			err = k == 0 ? cli_parse_allow(e, &a) : k == 1 ? cli_check_allow_host(e) :
			      cli_parse_deny(e, &d);
			if (err)
				return err;
		}
		json_object_set(r->policy, keys[k], arr);
	}
	return 0;
}

/* ---- what a client's rules may open ---- */

/* Is allow rule a inside one of the ranges the operator opened to clients? */
static bool opened_to_clients(const struct run_allow *a, const struct api_net_limits *l)
{
	unsigned i;

	for (i = 0; i < l->nr_open; i++)
		if (l->open[i].family == a->family &&
		    ranges_within(a->family, run_cidr_addr(a), a->prefixlen,
				  run_cidr_addr(&l->open[i]), l->open[i].prefixlen))
			return true;
	return false;
}

static int refuse_rule(const struct run_allow *a, const char *what,
		       const struct net_range *in, const char *why)
{
	char rule[256], range[64] = "";
	struct run_deny d = { .family = in ? in->family : 0 };

	cli_format_allow(a, rule, sizeof(rule));
	if (in && !in->platform) {
		if (d.family == AF_INET)
			memcpy(&d.addr, in->addr, 4);
		else
			memcpy(&d.addr6, in->addr, 16);
		d.prefixlen = in->plen;
		cli_format_deny(&d, range, sizeof(range));
	}
	return husk_seterr(EACCES, "allow %s reaches %s%s%s%s: %s", rule, what,
			   range[0] ? " (" : "", range, range[0] ? ")" : "", why);
}

#define NOT_FOR_CLIENTS "closed to clients that are not admins of this daemon"
#define NOT_HERE "this sandbox keeps it closed (it was started for a client that is " \
		 "not an admin, or from a warm pool)"

/*
 * An allow rule opens something inside a deny range of the filter only
 * when it lies inside that range (a wider rule is less specific than the
 * range and opens none of it): so a rule is refused when it lies inside a
 * range that is closed to the client.
 */
static int rule_check(const struct run_allow *a, const struct api_net_limits *l, bool client)
{
	const struct net_range *platform = NULL, *never = NULL, *closed = NULL;
	unsigned i, max = a->family == AF_INET ? 32 : 128;
	const void *addr = run_cidr_addr(a);
	int host;

	for (i = 0; i < ranges_nr_builtin; i++) {
		const struct net_range *r = &ranges_builtin[i];

		if (r->family != a->family ||
		    !ranges_within(a->family, addr, a->prefixlen, r->addr, r->plen))
			continue;
		if (r->platform)
			platform = r;
		else if (r->strength == EGRESS_DENY_ABSOLUTE)
			never = r;
		else
			closed = r;
	}
	/* Of the ranges it lies in, the one that says most about it. */
	if (platform)
		return refuse_rule(a, platform->what, NULL, client ? NOT_FOR_CLIENTS : NOT_HERE);
	if (client && never)
		return refuse_rule(a, never->what, never, "no rule opens it");
	if (client && closed && !opened_to_clients(a, l))
		return refuse_rule(a, closed->what, closed, NOT_FOR_CLIENTS " unless the "
				   "operator opens it (husk serve --client-allow)");
	if (a->prefixlen < max || !l->is_host)
		return 0;
	host = l->is_host(a->family, addr);
	if (!host)
		return 0;
	return refuse_rule(a, host > 0 ? "an address of this host" : "what may be an address "
			   "of this host (its addresses cannot be listed)", NULL,
			   client ? NOT_FOR_CLIENTS : NOT_HERE);
}

int api_check_rules(const struct api_req *r, const struct api_net_limits *l, bool client)
{
	json_t *arr = json_object_get(r->root, "allow"), *v;
	struct run_allow a;
	size_t i;
	int err;

	json_array_foreach(arr, i, v) {
		if (!json_is_string(v) || cli_parse_allow(json_string_value(v), &a))
			return husk_seterr(EINVAL, "allow[%zu] is not a rule", i);
		err = rule_check(&a, l, client);
		if (err)
			return err;
	}
	return 0;
}

int api_strict_worker(struct api_req *r)
{
	int err;

	if ((r->op != OP_RUN && r->op != OP_CREATE) || !r->net_policy || r->strict_net)
		return 0;
	err = warg(r, "--absolute-builtins");
	if (err)
		return err;
	r->wargv[r->wargc] = NULL;
	r->strict_net = true;
	return 0;
}

static int target(json_t *o, struct api_req *r)
{
	json_t *x = json_object_get(o, "exec"), *run = json_object_get(o, "run");

	if (!!x == !!run)
		return husk_seterr(EINVAL, "name exactly one of \"exec\" and \"run\"");
	r->target = x ? x : run;
	r->target_is_run = !x;
	if (!json_is_string(r->target) && !json_is_integer(r->target))
		return husk_seterr(EINVAL, "\"exec\"/\"run\" must be a request id");
	return 0;
}

static int parse_fields(json_t *o, struct api_req *r)
{
	json_t *v;
	int err = 0;

	switch (r->op) {
	case OP_RUN:
		err = get_cmd(o, &r->cmd, true);
		if (!err)
			err = machine(o, r);
		if (!err)
			err = get_puts(o, r);
		if (!err)
			err = get_gets(o, r);
		if (!err)
			err = get_bool(o, "detach", &r->detach);
		if (!err)
			err = get_bool(o, "get_always", &r->get_always);
		if (!err && r->get_always && !r->nr_gets)
			err = husk_seterr(EINVAL, "get_always without get");
		return err;
	case OP_CREATE:
		err = get_cmd(o, &r->cmd, false);	/* env and cwd: every exec's defaults */
		if (!err && (r->cmd.argc || r->cmd.stdin))
			err = husk_seterr(EINVAL, "create takes no argv or stdin: exec does");
		if (!err)
			err = machine(o, r);
		if (!err)
			err = get_puts(o, r);
		return err;
	case OP_EXEC:
		err = need_sandbox(o, r);
		return err ? err : get_cmd(o, &r->cmd, true);
	case OP_STDIN:
		err = target(o, r);
		if (!err && (v = json_object_get(o, "data")))
			err = api_unb64(v, &r->data, &r->data_len);
		if (!err)
			err = get_bool(o, "eof", &r->eof);
		return err;
	case OP_SIGNAL:
		err = target(o, r);
		if (!err && r->target_is_run)
			err = husk_seterr(EINVAL, "signal takes \"exec\"");
		r->signal = api_signal(json_object_get(o, "signal"));
		if (!err && r->signal < 0)
			err = husk_seterr(EINVAL, "\"signal\" must be a signal name or 1..64");
		return err;
	case OP_PUT:
		err = need_sandbox(o, r);
		v = json_object_get(o, "data");
		if (!err && !v)
			err = husk_seterr(EINVAL, "\"data\" is required");
		if (!err)
			err = api_unb64(v, &r->data, &r->data_len);
		if (!err)
			err = get_str(o, "stream", &r->stream);
		if (!err)
			err = get_bool(o, "more", &r->more);
		if (!err && r->more && !r->stream)
			err = husk_seterr(EINVAL, "\"more\" needs a \"stream\" name");
		return err;
	case OP_GET:
		err = need_sandbox(o, r);
		if (!err)
			err = get_str(o, "path", &r->path);
		if (!err && (!r->path || !*r->path || strlen(r->path) >= 4096))
			err = husk_seterr(EINVAL, "\"path\" is required");
		return err;
	case OP_POLICY:
		err = need_sandbox(o, r);
		return err ? err : get_policy(o, r);
	case OP_DESTROY:
	case OP_INSPECT:
	case OP_KILL:
	case OP_WAIT:
		return need_sandbox(o, r);
	default:
		return 0;
	}
}

int api_parse(const char *s, size_t len, struct api_req *r, const char **code)
{
	json_error_t je;
	json_t *v;
	int err;

	memset(r, 0, sizeof(*r));
	*code = E_BAD;
	if (len >= API_MAX_LINE)
		return husk_seterr(E2BIG, "a request may be at most %u bytes", API_MAX_LINE - 1);
	if (api_too_deep(s, len))
		return husk_seterr(EINVAL, "a request may nest at most %d levels", API_MAX_DEPTH);
	r->root = json_loadb(s, len, JSON_REJECT_DUPLICATES, &je);
	if (!r->root)
		return husk_seterr(EINVAL, "not JSON: %s", je.text);
	if (!json_is_object(r->root))
		return husk_seterr(EINVAL, "a request is a JSON object");
	if (parse_id(r))
		return -EINVAL;
	v = json_object_get(r->root, "v");
	if (v && (!json_is_integer(v) || json_integer_value(v) != API_VERSION)) {
		*code = E_UNSUPPORTED;
		return husk_seterr(EPROTONOSUPPORT, "this daemon speaks version %d", API_VERSION);
	}
	if (parse_op(r->root, r))
		return -EINVAL;
	err = parse_fields(r->root, r);
	if (err) {
		/* Only served_image() says -ENOENT: an image the client may not name. */
		if (err == -ENOENT)
			*code = E_NOT_FOUND;
		return err;
	}
	*code = NULL;
	return 0;
}

static void free_strv(char **v, unsigned n)
{
	unsigned i;

	for (i = 0; v && i < n; i++)
		free(v[i]);
	free(v);
}

void api_req_free(struct api_req *r)
{
	unsigned i;

	for (i = 0; i < (unsigned)r->wargc; i++)
		free(r->wargv[i]);
	free_strv(r->cmd.argv, r->cmd.argc);
	free_strv(r->cmd.env, r->cmd.nr_env);
	free(r->cmd.cwd);
	for (i = 0; r->puts && i < r->nr_puts; i++)
		free(r->puts[i]);
	free(r->puts);
	free(r->put_len);
	free(r->gets);
	free(r->data);
	json_decref(r->policy);
	json_decref(r->root);
	memset(r, 0, sizeof(*r));
}
