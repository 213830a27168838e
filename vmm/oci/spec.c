/*
 * oci/spec: config.json of an OCI bundle into `husk run` arguments
 * (spec.h). The container is one husk job: process.args as the job,
 * process.env and cwd as its environment, memory and CPU limits as the
 * VM's RAM and quota, read-only binds under the workspace copied in. The
 * job always runs as the guest's unprivileged agentuser on a read-only
 * root, whatever user and root.readonly say: the VM is the boundary.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_run.h"
#include "job/proto.h"
#include "lib/util.h"
#include "oci/spec.h"
#include "template/template.h"

static int bad(const char *what)
{
	return husk_seterr(EINVAL, "config.json: %s", what);
}

static char *dup_str(const char *s)
{
	char *d = strdup(s);

	if (!d)
		husk_seterr(ENOMEM, "out of memory");
	return d;
}

/* An array of at most max strings into out (each duplicated). */
static int str_array(json_t *a, const char *name, char **out, int max, int *n)
{
	size_t i;
	json_t *v;

	*n = 0;
	if (!a)
		return 0;
	if (!json_is_array(a))
		return husk_seterr(EINVAL, "config.json: %s must be an array of strings", name);
	if (json_array_size(a) > (size_t)max)
		return husk_seterr(E2BIG, "config.json: %s has more than %d entries", name, max);
	json_array_foreach(a, i, v) {
		const char *s = json_string_value(v);

		if (!s || strlen(s) != json_string_length(v))
			return husk_seterr(EINVAL, "config.json: %s[%zu] must be a string without "
					   "NUL bytes", name, i);
		out[i] = dup_str(s);
		if (!out[i])
			return -ENOMEM;
		*n = i + 1;
	}
	return 0;
}

/* "a,b,c" into out[], each entry duplicated and checked by check. */
static int comma_list(const char *v, const char *key, char **out, int max, int *n,
		      int (*check)(const char *))
{
	char *copy = dup_str(v), *save = NULL, *t;
	int err = copy ? 0 : -ENOMEM;

	for (t = copy ? strtok_r(copy, ",", &save) : NULL; t && !err;
	     t = strtok_r(NULL, ",", &save)) {
		if (*n == max)
			err = husk_seterr(E2BIG, "annotation %s: more than %d entries", key, max);
		else if ((err = check(t)))
			err = husk_seterr(EINVAL, "annotation %s: %s", key, husk_lasterr());
		else if (!(out[*n] = dup_str(t)))
			err = -ENOMEM;
		else
			(*n)++;
	}
	free(copy);
	return err;
}

static int check_allow(const char *s)
{
	struct run_allow a;

	return cli_parse_allow(s, &a);
}

static int annotations(json_t *o, struct oci_spec *s)
{
	const char *k;
	json_t *v;

	if (!o)
		return 0;
	if (!json_is_object(o))
		return bad("annotations must be an object");
	s->annotations_json = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
	if (!s->annotations_json)
		return husk_seterr(ENOMEM, "out of memory");
	json_object_foreach(o, k, v) {
		const char *val = json_string_value(v);
		int err = 0;

		if (!val)
			return husk_seterr(EINVAL, "config.json: annotation %s must be a string", k);
		if (strncmp(k, "io.husk.", 8))
			continue;	/* the engine's own */
		if (!strcmp(k, "io.husk.net")) {
			if (strcmp(val, "egress") && strcmp(val, "none"))
				return husk_seterr(EINVAL, "annotation io.husk.net: 'none' or "
						   "'egress', not '%s'", val);
			s->egress = !strcmp(val, "egress");
			s->net_none = !s->egress;
		} else if (!strcmp(k, "io.husk.allow")) {
			err = comma_list(val, k, s->allow, OCI_MAX_ALLOW, &s->nr_allow, check_allow);
		} else if (!strcmp(k, "io.husk.allow-host")) {
			err = comma_list(val, k, s->allow_host, OCI_MAX_ALLOW, &s->nr_allow_host,
					 cli_check_allow_host);
		} else if (!strcmp(k, "io.husk.template")) {
			/* Made with `husk template create NAME --image` on this bundle's root. */
			if (template_name_check(val))
				return husk_seterr(EINVAL, "annotation io.husk.template: %s",
						   husk_lasterr());
			free(s->template_name);
			if (!(s->template_name = dup_str(val)))
				return -ENOMEM;
		} else if (!strcmp(k, "io.husk.user")) {
			/* Root in the guest only when asked: process.user.uid 0 is every spec's. */
			if (strcmp(val, "root") && strcmp(val, "agentuser"))
				return husk_seterr(EINVAL, "annotation io.husk.user: 'agentuser' or "
						   "'root', not '%s'", val);
			s->guest_root = !strcmp(val, "root");
		} else if (!strcmp(k, "io.husk.timeout")) {
			char *end;
			unsigned long t = strtoul(val, &end, 10);

			if (!*val || *end || t < 1 || t > CLI_MAX_TIMEOUT_SEC)
				return husk_seterr(EINVAL, "annotation io.husk.timeout: seconds, 1 to "
						   "%u", CLI_MAX_TIMEOUT_SEC);
			s->timeout_s = t;
		} else {
			/* A typo must not silently drop a security setting. */
			return husk_seterr(EINVAL, "annotation %s is not one of husk's (io.husk.net, "
					   "io.husk.allow, io.husk.allow-host, io.husk.template, "
					   "io.husk.timeout, io.husk.user)", k);
		}
		if (err)
			return err;
	}
	return 0;
}

/* A limit's value: a number (the config's parser takes up to 2^63-1). */
static int rlimit_value(json_t *v, char *out, size_t cap)
{
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return -EINVAL;
	snprintf(out, cap, "%lld", (long long)json_integer_value(v));
	return 0;
}

/*
 * process.rlimits, as husk run --rlimit takes them (one parser decides what
 * is valid). RLIMIT_RSS does nothing in Linux and is accepted unapplied.
 */
static int rlimits(json_t *a, struct oci_spec *s)
{
	char soft[32], hard[32], arg[96];
	struct job_rlimit r;
	size_t i;
	json_t *l;

	if (!a)
		return 0;
	if (!json_is_array(a))
		return bad("process.rlimits must be an array");
	json_array_foreach(a, i, l) {
		const char *type = json_string_value(json_object_get(l, "type"));

		if (!type || strlen(type) > 32 ||
		    rlimit_value(json_object_get(l, "soft"), soft, sizeof(soft)) ||
		    rlimit_value(json_object_get(l, "hard"), hard, sizeof(hard)))
			return husk_seterr(EINVAL, "config.json: process.rlimits[%zu] needs a type "
					   "and numbers soft and hard", i);
		if (!strcmp(type, "RLIMIT_RSS"))
			continue;
		snprintf(arg, sizeof(arg), "%s=%s:%s", type, soft, hard);
		if (cli_parse_rlimit(arg, &r))
			return husk_seterr(EINVAL, "config.json: process.rlimits[%zu]: %s", i,
					   husk_lasterr());
		if (s->nr_rlimits == OCI_MAX_RLIMITS)
			return bad("more than 16 process.rlimits");
		if (!(s->rlimits[s->nr_rlimits++] = dup_str(arg)))
			return -ENOMEM;
	}
	return 0;
}

static int process(json_t *p, struct oci_spec *s)
{
	json_t *t = json_object_get(p, "terminal");
	const char *cwd = json_string_value(json_object_get(p, "cwd"));
	int err;

	if (!json_is_object(p))
		return bad("process is missing (husk runs a container's process)");
	if (t && !json_is_boolean(t))
		return bad("process.terminal must be true or false");
	s->terminal = json_is_true(t);
	err = str_array(json_object_get(p, "args"), "process.args", s->args, OCI_MAX_ARGS,
			&s->nr_args);
	if (!err && !s->nr_args)
		err = bad("process.args must name a program");
	if (!err)
		err = str_array(json_object_get(p, "env"), "process.env", s->env, OCI_MAX_ENV,
				&s->nr_env);
	for (int i = 0; !err && i < s->nr_env; i++)
		if (!strchr(s->env[i], '=') || s->env[i][0] == '=')
			err = husk_seterr(EINVAL, "config.json: process.env[%d] is not NAME=VALUE", i);
	if (err)
		return err;
	if (!cwd || cwd[0] != '/' || strlen(cwd) > 4095)
		return bad("process.cwd must be an absolute path");
	err = rlimits(json_object_get(p, "rlimits"), s);
	if (err)
		return err;
	s->cwd = dup_str(cwd);
	return s->cwd ? 0 : -ENOMEM;
}

static bool has_opt(json_t *opts, const char *o)
{
	size_t i;
	json_t *v;

	json_array_foreach(opts, i, v)
		if (json_string_value(v) && !strcmp(json_string_value(v), o))
			return true;
	return false;
}

static bool under(const char *p, const char *dir)
{
	size_t n = strlen(dir);

	return !strcmp(p, dir) || (!strncmp(p, dir, n) && p[n] == '/');
}

/*
 * What the VM has of its own, or an engine's file of no use inside it: the
 * mount is accepted and not made.
 */
static bool vm_has(const char *dst)
{
	static const char *const own[] = { "/proc", "/sys", "/dev", "/run/.containerenv",
					   "/run/secrets", "/etc/hosts", "/etc/hostname",
					   "/etc/resolv.conf", "/tmp", "/run", "/var/tmp" };

	for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
		if (!strcmp(dst, own[i]) || (i < 3 && under(dst, own[i])))
			return true;
	return false;
}

/*
 * A tmpfs of the job's own, as husk run --tmpfs takes it (one parser decides
 * what is valid): size, mode and noexec are kept; the flags husk always has
 * or that change nothing in a VM are dropped (podman's tmpcopyup too: the
 * tmpfs starts empty); a read-only tmpfs is refused.
 */
static int tmpfs_mount(const char *dst, json_t *opts, size_t i, struct oci_spec *s)
{
	char arg[4096 + 128];
	size_t n, k;
	struct job_tmpfs t;
	json_t *o;

	n = snprintf(arg, sizeof(arg), "%s:", dst);
	json_array_foreach(opts, k, o) {
		const char *v = json_string_value(o);

		if (!v)
			return husk_seterr(EINVAL, "config.json: mounts[%zu].options must be strings", i);
		if (!strcmp(v, "ro"))
			return husk_seterr(ENOTSUP, "config.json: the tmpfs at %s is read-only: husk "
					   "makes writable ones", dst);
		if ((strncmp(v, "size=", 5) && strncmp(v, "mode=", 5) && strcmp(v, "noexec") &&
		     strcmp(v, "exec")) || n + strlen(v) + 2 >= sizeof(arg))
			continue;
		n += snprintf(arg + n, sizeof(arg) - n, "%s%s", arg[n - 1] == ':' ? "" : ",", v);
	}
	if (arg[n - 1] == ':')
		arg[n - 1] = '\0';
	if (cli_parse_tmpfs(arg, &t))
		return husk_seterr(EINVAL, "config.json: mounts[%zu]: %s", i, husk_lasterr());
	free((char *)t.path);
	if (s->nr_tmpfs == OCI_MAX_TMPFS)
		return husk_seterr(E2BIG, "config.json: more than %d tmpfs mounts", OCI_MAX_TMPFS);
	s->tmpfs[s->nr_tmpfs] = dup_str(arg);
	return s->tmpfs[s->nr_tmpfs++] ? 0 : -ENOMEM;
}

static int mount_one(json_t *m, size_t i, struct oci_spec *s)
{
	const char *dst = json_string_value(json_object_get(m, "destination"));
	const char *type = json_string_value(json_object_get(m, "type"));
	const char *src = json_string_value(json_object_get(m, "source"));
	json_t *opts = json_object_get(m, "options");
	bool bind = (type && !strcmp(type, "bind")) || has_opt(opts, "bind") ||
		    has_opt(opts, "rbind");
	struct oci_bind *b;
	char *rel;

	if (!json_is_object(m) || !dst || dst[0] != '/' || strlen(dst) > 4095)
		return husk_seterr(EINVAL, "config.json: mounts[%zu] needs an absolute "
				   "destination", i);
	if (opts && !json_is_array(opts))
		return husk_seterr(EINVAL, "config.json: mounts[%zu].options must be an array", i);
	if (!bind) {
		if (vm_has(dst))
			return 0;
		if (type && !strcmp(type, "tmpfs"))
			return tmpfs_mount(dst, opts, i, s);
		return husk_seterr(ENOTSUP, "config.json: a %s mount at %s: the guest's root is "
				   "read-only and husk makes only its own mounts (/tmp, /run and "
				   "the workspace /tmp/workspace are writable)", type ? type : "",
				   dst);
	}
	if (!strcmp(dst, "/etc/resolv.conf") && src && src[0] == '/' && !s->resolv_conf &&
	    !(s->resolv_conf = dup_str(src)))
		return -ENOMEM;
	if (vm_has(dst) && !under(dst, "/tmp"))
		return 0;
	if (!src || src[0] != '/')
		return husk_seterr(EINVAL, "config.json: the bind mount at %s needs an absolute "
				   "source", dst);
	if (!has_opt(opts, "ro"))
		return husk_seterr(ENOTSUP, "config.json: the bind mount of %s at %s is writable: "
				   "husk copies binds into the VM, so only read-only ones (:ro) "
				   "are honoured", src, dst);
	if (s->nr_binds == OCI_MAX_BINDS)
		return husk_seterr(E2BIG, "config.json: more than %d bind mounts", OCI_MAX_BINDS);
	b = &s->binds[s->nr_binds];
	b->dst = dup_str(dst);
	if (!b->dst)
		return -ENOMEM;
	rel = cli_workspace_path(b->dst);
	if (!rel || !under(dst, "/tmp/workspace")) {
		free(b->dst);
		b->dst = NULL;
		return husk_seterr(ENOTSUP, "config.json: the bind mount at %s: binds are copied "
				   "into the workspace, so their destination must be under "
				   "/tmp/workspace", dst);
	}
	memmove(b->dst, rel, strlen(rel) + 1);
	b->src = dup_str(src);
	if (!b->src)
		return -ENOMEM;
	s->nr_binds++;
	return 0;
}

int oci_spec_resources(json_t *res, uint64_t *mem_mib, unsigned *cpu_milli)
{
	json_t *mem = json_object_get(res, "memory"), *cpu = json_object_get(res, "cpu"), *v;

	if (res && !json_is_object(res))
		return bad("linux.resources must be an object");
	v = json_object_get(mem, "limit");
	if (v && json_is_integer(v) && json_integer_value(v) > 0) {
		uint64_t mib = ((uint64_t)json_integer_value(v) + (1 << 20) - 1) >> 20;

		if (mib < CLI_MIN_MEM_MIB || mib > CLI_MAX_MEM_MIB)
			return husk_seterr(ERANGE, "config.json: a memory limit of %" PRIu64 " MiB: "
					   "a VM takes %u to %u MiB", mib, CLI_MIN_MEM_MIB,
					   CLI_MAX_MEM_MIB);
		*mem_mib = mib;
	}
	v = json_object_get(cpu, "quota");
	if (v && json_is_integer(v) && json_integer_value(v) > 0) {
		json_t *per = json_object_get(cpu, "period");
		uint64_t q = json_integer_value(v);
		uint64_t p = json_is_integer(per) && json_integer_value(per) > 0 ?
			(uint64_t)json_integer_value(per) : 100000;

		if (q > UINT32_MAX || p > UINT32_MAX)
			return bad("linux.resources.cpu quota or period out of range");
		*cpu_milli = (q * 1000 + p - 1) / p;
		if (!*cpu_milli)
			*cpu_milli = 1;
	}
	return 0;
}

static int linux_part(json_t *l, struct oci_spec *s)
{
	json_t *ns = json_object_get(l, "namespaces"), *v;
	size_t i;
	int err;

	if (!l)
		return 0;
	if (!json_is_object(l))
		return bad("linux must be an object");
	err = oci_spec_resources(json_object_get(l, "resources"), &s->mem_mib, &s->cpu_milli);
	if (err)
		return err;
	if (ns && !json_is_array(ns))
		return bad("linux.namespaces must be an array");
	json_array_foreach(ns, i, v) {
		const char *type = json_string_value(json_object_get(v, "type"));
		const char *path = json_string_value(json_object_get(v, "path"));

		if (!type || strcmp(type, "network") || !path || !*path || s->net_none)
			continue;
		/* The engine's namespace: the guest's NIC lives there, filtered. */
		if (path[0] != '/' || strlen(path) > 4095)
			return bad("linux.namespaces: a network namespace's path must be absolute");
		free(s->netns);
		s->netns = dup_str(path);
		if (!s->netns)
			return -ENOMEM;
		s->egress = true;
	}
	return 0;
}

/* The job's UTS namespace carries it; "" is the spec's "not set". */
static int hostname(json_t *h, struct oci_spec *s)
{
	const char *v = json_string_value(h);

	if (!h)
		return 0;
	if (!v)
		return bad("hostname must be a string");
	if (!*v)
		return 0;
	if (!proto_hostname_ok(v))
		return husk_seterr(EINVAL, "config.json: hostname '%.80s' is not a host name "
				   "(1..%d of letters, digits, '-' and '.')", v, PROTO_HOSTNAME_MAX);
	s->hostname = dup_str(v);
	return s->hostname ? 0 : -ENOMEM;
}

int oci_spec_parse(const char *text, size_t len, struct oci_spec *s)
{
	json_error_t je;
	json_t *c, *hooks, *root, *mounts, *m;
	const char *ver, *path;
	size_t i;
	int err;

	memset(s, 0, sizeof(*s));
	s->timeout_s = OCI_DEFAULT_TIMEOUT_S;
	if (len > OCI_CONFIG_MAX)
		return husk_seterr(E2BIG, "config.json is larger than %u bytes", OCI_CONFIG_MAX);
	c = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	if (!c)
		return husk_seterr(EINVAL, "config.json: line %d: %s", je.line, je.text);
	err = json_is_object(c) ? 0 : bad("not a JSON object");
	ver = json_string_value(json_object_get(c, "ociVersion"));
	if (!err && (!ver || strncmp(ver, "1.", 2)))
		err = bad("ociVersion must be 1.x");
	/* Annotations first: io.husk.net decides whether an engine's netns is refused. */
	if (!err)
		err = annotations(json_object_get(c, "annotations"), s);
	if (!err)
		err = process(json_object_get(c, "process"), s);
	if (!err)
		err = hostname(json_object_get(c, "hostname"), s);
	root = json_object_get(c, "root");
	path = json_string_value(json_object_get(root, "path"));
	if (!err && (!path || !*path || strlen(path) > 4095))
		err = bad("root.path must name the bundle's root directory");
	if (!err && !(s->root = dup_str(path)))
		err = -ENOMEM;
	hooks = json_object_get(c, "hooks");
	if (!err && hooks && (!json_is_object(hooks) || json_object_size(hooks)))
		err = husk_seterr(ENOTSUP, "config.json: hooks are not supported (they would run "
				  "on the host, outside the VM)");
	mounts = json_object_get(c, "mounts");
	if (!err && mounts && !json_is_array(mounts))
		err = bad("mounts must be an array");
	json_array_foreach(mounts, i, m) {
		if (err)
			break;
		err = mount_one(m, i, s);
	}
	if (!err)
		err = linux_part(json_object_get(c, "linux"), s);
	if (!err && (s->nr_allow || s->nr_allow_host) && !s->egress)
		err = bad("io.husk.allow and io.husk.allow-host need a network: the annotation "
			  "io.husk.net=egress or a network namespace of the engine's");
	json_decref(c);
	return err;
}

int oci_spec_confine(struct oci_spec *s, unsigned uid)
{
	if (s->nr_binds)
		return husk_seterr(EPERM, "config.json is uid %u's, not the engine's: its bind mount "
				   "of %s is refused (husk-runc would copy host files with more rights "
				   "than uid %u has): put what the container needs in its root",
				   uid, s->binds[0].src, uid);
	if (s->netns)
		return husk_seterr(EPERM, "config.json is uid %u's, not the engine's: it may not name "
				   "a network namespace (%s); without one, io.husk.net=egress is "
				   "husk's own filtered NIC", uid, s->netns);
	free(s->resolv_conf);
	s->resolv_conf = NULL;
	return 0;
}

static void free_strs(char **v, int n)
{
	for (int i = 0; i < n; i++)
		free(v[i]);
}

void oci_spec_free(struct oci_spec *s)
{
	free_strs(s->args, s->nr_args);
	free_strs(s->env, s->nr_env);
	free_strs(s->allow, s->nr_allow);
	free_strs(s->allow_host, s->nr_allow_host);
	free_strs(s->rlimits, s->nr_rlimits);
	free_strs(s->tmpfs, s->nr_tmpfs);
	for (int i = 0; i < s->nr_binds; i++) {
		free(s->binds[i].src);
		free(s->binds[i].dst);
	}
	free(s->cwd);
	free(s->netns);
	free(s->resolv_conf);
	free(s->template_name);
	free(s->hostname);
	free(s->root);
	free(s->annotations_json);
	memset(s, 0, sizeof(*s));
}

struct argv_b {
	char **v, **owned;
	int n, nown, cap;
};

static int push(struct argv_b *b, const char *s)
{
	if (b->n + 2 > b->cap)
		return husk_seterr(E2BIG, "too many arguments");
	b->v[b->n++] = (char *)s;
	b->v[b->n] = NULL;
	return 0;
}

/* A string of our own making, kept in owned for the caller to free. */
static int pushf(struct argv_b *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int pushf(struct argv_b *b, const char *fmt, ...)
{
	va_list ap;
	char *s;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n < 0)
		return husk_seterr(ENOMEM, "out of memory");
	b->owned[b->nown++] = s;
	return push(b, s);
}

int oci_spec_argv(const struct oci_spec *s, const char *image, const char *image_dir,
		  int hold_fd, char ***argv, char ***owned)
{
	int cap = 32 + 2 * (s->nr_env + s->nr_allow + s->nr_allow_host + s->nr_binds +
			    s->nr_rlimits + s->nr_tmpfs) + s->nr_args;
	struct argv_b b = { .cap = cap };
	int err = 0, i;

	b.v = calloc(cap, sizeof(char *));
	b.owned = calloc(8 + s->nr_binds, sizeof(char *));
	if (!b.v || !b.owned) {
		free(b.v);
		free(b.owned);
		return husk_seterr(ENOMEM, "out of memory");
	}
	err = push(&b, "husk") || push(&b, "run") || pushf(&b, "--hold-fd=%d", hold_fd) || push(&b, "--stdin") ||
	      push(&b, "--image") || push(&b, image) || pushf(&b, "--timeout=%u", s->timeout_s) ||
	      push(&b, "--cwd") || push(&b, s->cwd);
	if (!err && image_dir)
		err = push(&b, "--image-dir") || push(&b, image_dir);
	if (!err && s->template_name)
		err = push(&b, "--template") || push(&b, s->template_name);
	if (!err && s->hostname)
		err = push(&b, "--hostname") || push(&b, s->hostname);
	if (!err && s->terminal)
		err = push(&b, "--tty");
	if (!err && s->guest_root)
		err = push(&b, "--user") || push(&b, "root");
	for (i = 0; !err && i < s->nr_rlimits; i++)
		err = push(&b, "--rlimit") || push(&b, s->rlimits[i]);
	for (i = 0; !err && i < s->nr_tmpfs; i++)
		err = push(&b, "--tmpfs") || push(&b, s->tmpfs[i]);
	if (!err && s->mem_mib)
		err = pushf(&b, "--mem=%" PRIu64, s->mem_mib);
	if (!err && s->cpu_milli)
		err = pushf(&b, "--cpus=%u.%03u", s->cpu_milli / 1000, s->cpu_milli % 1000);
	for (i = 0; !err && i < s->nr_env; i++)
		err = push(&b, "--env") || push(&b, s->env[i]);
	if (!err && s->egress)
		err = push(&b, "--net") || push(&b, "egress");
	if (!err && s->netns)
		err = push(&b, "--netns") || push(&b, s->netns);
	for (i = 0; !err && i < s->nr_allow; i++)
		err = push(&b, "--allow") || push(&b, s->allow[i]);
	for (i = 0; !err && i < s->nr_allow_host; i++)
		err = push(&b, "--allow-host") || push(&b, s->allow_host[i]);
	for (i = 0; !err && i < s->nr_binds; i++)
		err = push(&b, "--put") || pushf(&b, "%s:%s", s->binds[i].src, s->binds[i].dst);
	if (!err)
		err = push(&b, "--");
	for (i = 0; !err && i < s->nr_args; i++)
		err = push(&b, s->args[i]);
	if (err) {
		for (i = 0; i < b.nown; i++)
			free(b.owned[i]);
		free(b.owned);
		free(b.v);
		return husk_seterr(E2BIG, "the container's command line is too long");
	}
	*argv = b.v;
	*owned = b.owned;
	return 0;
}
