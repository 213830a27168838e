/*
 * serve: `husk serve`, the daemon. See serve.h and docs/api.md.
 *
 * This file: the configuration, the socket, the dispatch of requests,
 * admission (the figures admit.c decides on: VMs, memory, a uid's share,
 * the queue), warm pools, what each uid holds (health, metrics), signals
 * (SIGTERM drains, SIGHUP reloads --config) and the tick that ends idle
 * sessions. The connections are clients.c's, sandboxes sandbox.c's.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <unistd.h>

#include "cli.h"
#include "config.h"
#include "lib/accounts.h"
#include "lib/util.h"
#include "net/ranges.h"
#include "machine/vm.h"
#include "run/run.h"
#include "serve/admit.h"
#include "serve/metrics.h"
#include "serve/serve_int.h"
#include "template/template.h"

#define TICK_MS 100
#define SEC 1000000ull
#define DEFAULT_MAX_QUEUE 64
#define DEFAULT_GRACE_S 30
#define DEFAULT_UID_CONNS 64
#define DEFAULT_MAX_LIFETIME_S (24 * 3600)
#define DEFAULT_QUEUE_AGE_S 30
#define DEFAULT_MAX_WAIT_S 600
#define DEFAULT_CONN_IDLE_S 3600
#define DEFAULT_LINE_TIMEOUT_S 30
#define OPEN_FILES_WANTED 65536		/* clients, and every sandbox's pipes and sockets */

struct server srv;

const char serve_usage[] =
	"usage: husk serve [--socket PATH] [--group NAME] [--admin-group NAME]\n"
	"                  [--max-vms N] [--max-mem MiB] [--max-queue N]\n"
	"                  [--pool TEMPLATE=K]... [--metrics ADDR:PORT]\n"
	"                  [--config FILE] [--grace SEC] [--template-dir DIR] [--verbose]\n"
	"                  [--client-allow CIDR]...\n"
	"\n"
	"Run sandboxes for clients on a Unix socket (JSON lines, docs/api.md).\n"
	"\n"
	"  --socket PATH       the API socket (default " SERVE_DEFAULT_SOCKET "), mode 0660\n"
	"  --group NAME        the socket's group: its members may use the API\n"
	"  --admin-group NAME  members see and control every sandbox, not only their own\n"
	"  --max-vms N         sandboxes at once, warm pool included (default: CPUs x 4)\n"
	"  --max-mem MiB       their guest RAM together (default: half the host's RAM)\n"
	"  --max-queue N       requests that wait for room before 'busy' (default 64)\n"
	"  --pool T=K          keep K sandboxes restored from template T ready\n"
	"  --metrics A:P       Prometheus metrics on http://A:P/metrics\n"
	"  --config FILE       key = value lines (max_vms, max_mem, max_queue, pool.T = K,\n"
	"                      each uid's share and the timeouts: husk-serve(8)),\n"
	"                      read at start and again on SIGHUP\n"
	"  --grace SEC         on SIGTERM, how long running work may finish (default 30)\n"
	"  --template-dir DIR  where templates live (default /var/lib/husk/templates)\n"
	"  --client-allow CIDR clients that are not admins may open CIDR, a part of the\n"
	"                      private and special-purpose ranges (default: public\n"
	"                      unicast only); config key client_allow\n";

/* ---- configuration ---- */

static int parse_pool(const char *arg, struct serve_cfg *c)
{
	const char *eq = strchr(arg, '=');
	uint64_t k;
	unsigned i;

	if (!eq || eq == arg || (size_t)(eq - arg) >= sizeof(c->pools[0].template_name) ||
	    parse_u64(eq + 1, 0, 64, &k))
		return husk_seterr(EINVAL, "--pool %s: want TEMPLATE=K, K in 0..64", arg);
	for (i = 0; i < c->nr_pools; i++)
		if (!strncmp(c->pools[i].template_name, arg, eq - arg) &&
		    !c->pools[i].template_name[eq - arg])
			break;
	if (i == c->nr_pools) {
		if (c->nr_pools == SERVE_MAX_POOLS)
			return husk_seterr(E2BIG, "at most %d pools", SERVE_MAX_POOLS);
		c->nr_pools++;
	}
	snprintf(c->pools[i].template_name, sizeof(c->pools[i].template_name), "%.*s",
		 (int)(eq - arg), arg);
	c->pools[i].k = (unsigned)k;
	return 0;
}

/* One range clients that are not admins may open (--client-allow, client_allow). */
static int add_client_allow(const char *arg, struct serve_cfg *c)
{
	if (c->nr_client_allow == SERVE_MAX_CLIENT_ALLOW)
		return husk_seterr(E2BIG, "at most %d client_allow ranges", SERVE_MAX_CLIENT_ALLOW);
	if (cli_parse_deny(arg, &c->client_allow[c->nr_client_allow]))
		return husk_seterr(EINVAL, "client_allow %s: want a.b.c.d/len or [IPv6]/len, "
				   "host bits zero", arg);
	c->nr_client_allow++;
	return 0;
}

/* A group by name, or by number (hosts and containers without /etc/group). */
static int group_id(const char *name, gid_t *gid)
{
	uint64_t n;

	if (!account_group_gid(name, gid))
		return 0;
	if (!parse_u64(name, 0, (gid_t)-2, &n)) {
		*gid = (gid_t)n;
		return 0;
	}
	return husk_seterr(ENOENT, "no group named %s in %s", name, accounts_group_path);
}

static void defaults(struct serve_cfg *c)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);

	memset(c, 0, sizeof(*c));
	c->socket_path = SERVE_DEFAULT_SOCKET;
	c->group = (gid_t)-1;
	c->admin_gid = (gid_t)-1;
	c->max_vms = (ncpu > 0 ? ncpu : 1) * 4;
	c->max_mem_mib = pages > 0 && psz > 0 ? (uint64_t)pages * psz / 2 / (1 << 20) : 4096;
	c->max_queue = DEFAULT_MAX_QUEUE;
	c->max_vcpus = VM_MAX_VCPUS;
	c->uid_max_conns = DEFAULT_UID_CONNS;
	c->max_lifetime_s = DEFAULT_MAX_LIFETIME_S;
	c->max_idle_s = DEFAULT_MAX_LIFETIME_S;
	c->queue_age_s = DEFAULT_QUEUE_AGE_S;
	c->max_wait_s = DEFAULT_MAX_WAIT_S;
	c->conn_idle_s = DEFAULT_CONN_IDLE_S;
	c->line_timeout_s = DEFAULT_LINE_TIMEOUT_S;
	c->grace_s = DEFAULT_GRACE_S;
}

/* The configuration file's keys that are one number each. */
#define MAX_DAYS (31u * 24 * 3600)
static const struct num_key {
	const char *key;
	size_t off;
	unsigned min, max;
} num_keys[] = {
	{ "max_vcpus", offsetof(struct serve_cfg, max_vcpus), 1, VM_MAX_VCPUS },
	{ "uid_max_conns", offsetof(struct serve_cfg, uid_max_conns), 1, 1024 },
	{ "uid_max_vms", offsetof(struct serve_cfg, uid_max_vms), 1, 100000 },
	{ "uid_max_queue", offsetof(struct serve_cfg, uid_max_queue), 1, 100000 },
	{ "max_lifetime", offsetof(struct serve_cfg, max_lifetime_s), 1, MAX_DAYS },
	{ "max_idle", offsetof(struct serve_cfg, max_idle_s), 1, MAX_DAYS },
	{ "queue_age", offsetof(struct serve_cfg, queue_age_s), 0, MAX_DAYS },
	{ "max_wait", offsetof(struct serve_cfg, max_wait_s), 0, MAX_DAYS },
	{ "conn_idle", offsetof(struct serve_cfg, conn_idle_s), 0, MAX_DAYS },
	{ "line_timeout", offsetof(struct serve_cfg, line_timeout_s), 0, 86400 },
};

/* 1 when key is not one of them; else 0, or -errno for its value (at path:line). */
static int num_key_set(struct serve_cfg *c, const char *key, const char *val, const char *path,
		       unsigned line)
{
	uint64_t v;
	unsigned i;
	int err;

	for (i = 0; i < ARRAY_SIZE(num_keys); i++) {
		if (strcmp(key, num_keys[i].key))
			continue;
		err = parse_u64(val, num_keys[i].min, num_keys[i].max, &v);
		if (err)
			return husk_seterr(err, "%s:%u: %s: want %u..%u, not %s", path, line, key,
					   num_keys[i].min, num_keys[i].max, val);
		*(unsigned *)((char *)c + num_keys[i].off) = (unsigned)v;
		return 0;
	}
	return 1;
}

int serve_parse(int argc, char **argv, struct serve_cfg *c)
{
	enum { O_SOCKET = 256, O_GROUP, O_ADMIN, O_MAX_VMS, O_MAX_MEM, O_MAX_QUEUE, O_POOL,
	       O_METRICS, O_CONFIG, O_GRACE, O_TDIR, O_VERBOSE, O_HELP, O_CLIENT_ALLOW };
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, O_SOCKET },
		{ "group", required_argument, NULL, O_GROUP },
		{ "admin-group", required_argument, NULL, O_ADMIN },
		{ "max-vms", required_argument, NULL, O_MAX_VMS },
		{ "max-mem", required_argument, NULL, O_MAX_MEM },
		{ "max-queue", required_argument, NULL, O_MAX_QUEUE },
		{ "pool", required_argument, NULL, O_POOL },
		{ "metrics", required_argument, NULL, O_METRICS },
		{ "config", required_argument, NULL, O_CONFIG },
		{ "grace", required_argument, NULL, O_GRACE },
		{ "template-dir", required_argument, NULL, O_TDIR },
		{ "verbose", no_argument, NULL, O_VERBOSE },
		{ "help", no_argument, NULL, O_HELP },
		{ "client-allow", required_argument, NULL, O_CLIENT_ALLOW },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t v;
	int ch, err = 0;

	defaults(c);
	optind = 0;
	opterr = 0;
	while (!err && (ch = getopt_long(argc, argv, "+:", opts, NULL)) != -1) {
		switch (ch) {
		case O_SOCKET:
			c->socket_path = optarg;
			if (!*optarg || strlen(optarg) >= sizeof(((struct sockaddr_un *)0)->sun_path))
				err = husk_seterr(EINVAL, "--socket: a path of 1..107 bytes");
			break;
		case O_GROUP:
			err = group_id(optarg, &c->group);
			break;
		case O_ADMIN:
			err = group_id(optarg, &c->admin_gid);
			break;
		case O_MAX_VMS:
			err = cli_num_opt("--max-vms", optarg, 1, 100000, &v);
			c->max_vms = v;
			break;
		case O_MAX_MEM:
			err = cli_num_opt("--max-mem", optarg, 32, 1ull << 30, &c->max_mem_mib);
			break;
		case O_MAX_QUEUE:
			err = cli_num_opt("--max-queue", optarg, 0, 100000, &v);
			c->max_queue = v;
			break;
		case O_POOL:
			err = parse_pool(optarg, c);
			break;
		case O_METRICS:
			c->metrics_addr = optarg;
			break;
		case O_CONFIG:
			c->config_path = optarg;
			break;
		case O_GRACE:
			err = cli_num_opt("--grace", optarg, 0, 86400, &v);
			c->grace_s = v;
			break;
		case O_TDIR:
			c->template_dir = optarg;
			break;
		case O_VERBOSE:
			c->verbose = true;
			break;
		case O_CLIENT_ALLOW:
			err = add_client_allow(optarg, c);
			break;
		case O_HELP:
			return 1;
		default:
			return cli_bad_option(ch, argv);
		}
	}
	if (!err && optind < argc)
		err = husk_seterr(EINVAL, "husk serve takes no arguments ('%s')", argv[optind]);
	if (!err && c->config_path)
		err = serve_read_config(c->config_path, c);
	return err;
}

int serve_read_config(const char *path, struct serve_cfg *c)
{
	FILE *f = fopen(path, "re");
	char line[512], key[128], val[256];
	unsigned n = 0;
	uint64_t v;
	int err = 0;
	bool client_allow_seen = false;

	if (!f)
		return husk_seterr(errno, "--config %s: %s", path, strerror(errno));
	while (!err && fgets(line, sizeof(line), f)) {
		n++;
		if (line[strspn(line, " \t")] == '#' || !line[strspn(line, " \t\r\n")])
			continue;
		if (sscanf(line, " %127[^= \t] = %255s", key, val) != 2) {
			err = husk_seterr(EINVAL, "%s:%u: want key = value", path, n);
		} else if (!strcmp(key, "max_vms")) {
			err = parse_u64(val, 1, 100000, &v);
			c->max_vms = v;
		} else if (!strcmp(key, "max_mem")) {
			err = parse_u64(val, 32, 1ull << 30, &c->max_mem_mib);
		} else if (!strcmp(key, "max_queue")) {
			err = parse_u64(val, 0, 100000, &v);
			c->max_queue = v;
		} else if (!strcmp(key, "client_allow")) {
			/* The file's lines are the list: they replace the one in force. */
			if (!client_allow_seen)
				c->nr_client_allow = 0;
			client_allow_seen = true;
			if (strcmp(val, "none") && (err = add_client_allow(val, c)))
				husk_seterr(err, "%s:%u: %s", path, n, husk_lasterr());
		} else if (!strcmp(key, "uid_max_mem")) {
			err = parse_u64(val, 32, 1ull << 30, &c->uid_max_mem_mib);
		} else if ((err = num_key_set(c, key, val, path, n)) <= 0) {
			/* one of the numbers: done */
		} else if (!strncmp(key, "pool.", 5) && key[5]) {
			char arg[200];

			snprintf(arg, sizeof(arg), "%s=%s", key + 5, val);
			err = parse_pool(arg, c);
		} else {
			err = husk_seterr(EINVAL, "%s:%u: unknown key %s", path, n, key);
		}
		if (err && !husk_lasterr()[0])
			husk_seterr(err, "%s:%u: bad value for %s", path, n, key);
	}
	fclose(f);
	return err;
}

/* ---- epoll ---- */

void ep_mod(int fd, struct handle *h, uint32_t events)
{
	struct epoll_event e = { .events = events, .data.ptr = h };

	if (fd >= 0)
		epoll_ctl(srv.epfd, EPOLL_CTL_MOD, fd, &e);
}

static void ep_add(int fd, struct handle *h, enum h_kind k, void *p, uint32_t events)
{
	struct epoll_event e = { .events = events, .data.ptr = h };

	h->kind = k;
	h->p = p;
	epoll_ctl(srv.epfd, EPOLL_CTL_ADD, fd, &e);
}

/* ---- admission, queue, pools ---- */

static unsigned count(bool pooled_only, const char *tpl, uint64_t *mem)
{
	struct sandbox *sb;
	unsigned n = 0;

	if (mem)
		*mem = 0;
	for (sb = srv.sandboxes; sb; sb = sb->next) {
		if (sb->state == SB_DONE)
			continue;
		if (pooled_only && (sb->owned || !sb->from_pool))
			continue;
		if (tpl && strcmp(sb->template_name, tpl))
			continue;
		n++;
		if (mem)
			*mem += sb->mem_mib;
	}
	return n;
}

static bool fits(uint64_t mem_mib)
{
	uint64_t used;
	unsigned n = count(false, NULL, &used);

	return n < srv.cfg.max_vms && used + mem_mib <= srv.cfg.max_mem_mib;
}

static bool pool_ready(const struct sandbox *sb)
{
	return sb->state == SB_READY && !sb->warming;
}

static json_t *load_json(void)
{
	uint64_t used;
	unsigned running = count(false, NULL, &used), pooled = count(true, NULL, NULL);
	unsigned ready = 0;
	struct sandbox *sb;

	for (sb = srv.sandboxes; sb; sb = sb->next)
		ready += sb->from_pool && !sb->owned && pool_ready(sb);
	return json_pack("{s:i,s:i,s:i,s:i,s:I,s:i,s:I,s:i}", "running", running - pooled,
			 "queued", srv.queued, "pooled", pooled, "pooled_ready", ready,
			 "mem_mib", (json_int_t)used,
			 "max_vms", srv.cfg.max_vms, "max_mem_mib",
			 (json_int_t)srv.cfg.max_mem_mib, "max_queue", srv.cfg.max_queue);
}

/* A ready (else a starting) clone of the template that nobody has claimed. */
static struct sandbox *pool_take(const char *tpl)
{
	struct sandbox *sb, *best = NULL;

	for (sb = srv.sandboxes; sb; sb = sb->next)
		if (sb->from_pool && !sb->owned && sb->state != SB_DONE &&
		    sb->state != SB_ENDING && !strcmp(sb->template_name, tpl) &&
		    (!best || (pool_ready(sb) && !pool_ready(best))))
			best = sb;
	return best;
}

static bool pool_has(const char *tpl)
{
	unsigned i;

	for (i = 0; i < srv.cfg.nr_pools; i++)
		if (srv.cfg.pools[i].k && !strcmp(srv.cfg.pools[i].template_name, tpl))
			return true;
	return false;
}

/*
 * The pooled clone a request can have, or NULL. The clones of a template
 * with a NIC run net egress with no rule, and serve only requests for net
 * egress (their rules follow as a policy); the others only requests
 * without a network.
 */
static struct sandbox *pool_for(const struct api_req *r)
{
	struct sandbox *sb;

	if (!r->template_name || !(r->machine_default || r->net_pool) ||
	    !pool_has(r->template_name))
		return NULL;
	sb = pool_take(r->template_name);
	return sb && sb->pool_net == r->net_pool ? sb : NULL;
}

/* Make room for a request by giving up an idle clone of another pool. */
static bool evict_pooled(void)
{
	struct sandbox *sb;

	for (sb = srv.sandboxes; sb; sb = sb->next) {
		if (sb->from_pool && !sb->owned && sb->state != SB_DONE && sb->state != SB_ENDING) {
			sb_kill(sb);
			return true;
		}
	}
	return false;
}

/*
 * A template's guest RAM and vCPUs, for admission: read from the templates' own
 * headers (template_list), kept for a while, since a request must not
 * wait for a directory scan each time. A name not found counts as the
 * default; its worker then fails with the reason.
 */
#define TPL_CACHE_MAX 64
#define TPL_CACHE_US (10 * 1000000ull)

static struct tpl_cached {
	char name[TEMPLATE_NAME_MAX + 1];
	uint64_t mem_mib;
	unsigned vcpus;
	bool net;
} tpl_cache[TPL_CACHE_MAX];
static unsigned tpl_cached;
static uint64_t tpl_cache_at;

static void tpl_cache_fill(void)
{
	const char *dir = srv.cfg.template_dir ? srv.cfg.template_dir : TEMPLATE_DEFAULT_DIR;
	struct template_info *t = NULL;
	unsigned n = 0, i;
	int fd = template_dir_open(dir, false);

	tpl_cached = 0;
	tpl_cache_at = now_us();
	if (fd < 0 || template_list(fd, &t, &n)) {
		if (fd >= 0)
			close(fd);
		return;
	}
	close(fd);
	for (i = 0; i < n && tpl_cached < TPL_CACHE_MAX; i++) {
		if (!t[i].ok)
			continue;
		snprintf(tpl_cache[tpl_cached].name, sizeof(tpl_cache[0].name), "%s",
			 t[i].meta.name);
		tpl_cache[tpl_cached].net = t[i].meta.net;
		tpl_cache[tpl_cached].vcpus = (unsigned)t[i].meta.vcpus;
		tpl_cache[tpl_cached++].mem_mib = t[i].meta.mem_bytes >> 20;
	}
	free(t);
}

static const struct tpl_cached *tpl_find(const char *name)
{
	unsigned i;

	if (!tpl_cache_at || now_us() - tpl_cache_at > TPL_CACHE_US)
		tpl_cache_fill();
	for (i = 0; i < tpl_cached; i++)
		if (!strcmp(tpl_cache[i].name, name))
			return &tpl_cache[i];
	return NULL;
}

uint64_t serve_template_mem(const char *name)
{
	const struct tpl_cached *t = tpl_find(name);

	return t && t->mem_mib ? t->mem_mib : RUN_DEFAULT_MEM_MIB;
}

static unsigned template_vcpus(const char *name)
{
	const struct tpl_cached *t = tpl_find(name);

	return t && t->vcpus ? t->vcpus : 1;
}

bool serve_template_net(const char *name)
{
	const struct tpl_cached *t = tpl_find(name);

	return t && t->net;
}

static bool queue_waits_room(void);

static void pools_fill(void)
{
	unsigned i, have;
	bool wait;

	if (srv.draining)
		return;
	/* Requests first: pools only take room nobody waits for. */
	wait = queue_waits_room();
	for (i = 0; i < srv.cfg.nr_pools; i++) {
		const struct serve_pool_cfg *p = &srv.cfg.pools[i];
		uint64_t mem = serve_template_mem(p->template_name);

		have = count(true, p->template_name, NULL);
		while (have < p->k && !wait && fits(mem)) {
			struct sandbox *sb = sb_spawn(NULL, p->template_name);

			if (!sb || sb->exited)
				break;
			sb->mem_mib = mem;
			have++;
		}
		/* A pool made smaller by SIGHUP: its extra idle clones go. */
		while (have > p->k) {
			struct sandbox *sb = pool_take(p->template_name);

			if (!sb)
				break;
			sb_kill(sb);
			sb->from_pool = true;
			sb->owned = true;	/* no longer offered */
			have--;
		}
	}
}

static void publish(void)
{
	unsigned all = count(false, NULL, NULL), pooled = count(true, NULL, NULL);

	metrics_vms(all - pooled, srv.queued, pooled);
}

/* Start a run or create: from the pool, or a new worker. */
static void start(struct bind *to, struct api_req *req)
{
	struct api_req *keep = malloc(sizeof(*keep));
	struct sandbox *sb = NULL;
	bool is_run = req->op == OP_RUN;

	if (!keep) {
		bind_send(to, api_error(to->re, E_INTERNAL, "out of memory", NULL));
		api_req_free(req);
		return;
	}
	*keep = *req;
	memset(req, 0, sizeof(*req));
	sb = pool_for(keep);
	if (sb) {
		sb->start_kind = "pool";
		sb->t_request = now_us();
		if (pool_ready(sb))
			metrics_started("pool", 0);
	} else {
		sb = sb_spawn(keep, NULL);
	}
	if (!sb || sb->exited) {
		/* No worker: the answer now (an exited one is reaped with the others). */
		bind_send(to, api_error(to->re, E_INTERNAL, husk_lasterr(), NULL));
		if (is_run)
			metrics_job("failed");
		api_req_free(keep);
		free(keep);
		return;
	}
	if (is_run)
		bind_send(to, api_event(to->re, "accepted", json_pack("{s:s}", "sandbox", sb->name)));
	sb_begin(sb, to, keep, is_run);
}

/* ---- the figures admit.c decides on ---- */

/* The daemon's limits, a uid's share resolved (half of each by default). */
static struct admit_limits limits(void)
{
	const struct serve_cfg *c = &srv.cfg;

	return (struct admit_limits){
		.max_vms = c->max_vms, .max_mem_mib = c->max_mem_mib,
		.max_queue = c->max_queue, .max_vcpus = c->max_vcpus,
		.uid_vms = c->uid_max_vms ? c->uid_max_vms : (c->max_vms + 1) / 2,
		.uid_mem_mib = c->uid_max_mem_mib ? c->uid_max_mem_mib : c->max_mem_mib / 2,
		.uid_queue = c->uid_max_queue ? c->uid_max_queue : (c->max_queue + 1) / 2,
		.age_us = c->queue_age_s * SEC, .wait_us = c->max_wait_s * SEC,
	};
}

static struct admit_use use_now(void)
{
	struct admit_use u = { .queued = srv.queued };
	struct sandbox *sb;

	for (sb = srv.sandboxes; sb; sb = sb->next) {
		if (sb->state == SB_DONE)
			continue;
		u.vms++;
		u.mem_mib += sb->mem_mib;
		if (sb->state == SB_ENDING) {
			u.ending++;
			u.ending_mem += sb->mem_mib;
		} else if (sb->from_pool && !sb->owned) {
			u.idle_pooled++;
			u.idle_pooled_mem += sb->mem_mib;
		}
	}
	return u;
}

/* What uid holds: sandboxes that have not ended, and queued requests. */
static struct admit_uid_use uid_use(uid_t uid)
{
	struct admit_uid_use u = { 0 };
	struct sandbox *sb;
	struct queued *q;

	for (sb = srv.sandboxes; sb; sb = sb->next) {
		if (sb->owned && sb->owner == uid && sb->state != SB_DONE) {
			u.vms++;
			u.mem_mib += sb->mem_mib;
		}
	}
	for (q = srv.queue; q; q = q->next)
		u.queued += q->uid == uid && q->to.c;
	return u;
}

static struct admit_req admit_req_of(const struct api_req *r, uid_t uid,
				      const struct admit_uid_use *use, uint64_t since)
{
	return (struct admit_req){
		.mem_mib = r->mem_mib, .vcpus = r->vcpus ? r->vcpus : 1,
		.pooled = pool_for(r) != NULL, .exempt = uid == 0, .uid = *use,
		.waited_us = since ? now_us() - since : 0,
	};
}

/* The queue as admit.c takes it (requests whose client is still there), oldest first. */
static struct admit_req *q_reqs;
static struct queued **q_ptrs;
static unsigned q_cap;

static unsigned queue_snapshot(void)
{
	struct queued *q;
	unsigned n = 0, i;

	if (srv.queued > q_cap) {
		struct admit_req *r = realloc(q_reqs, srv.queued * sizeof(*r));
		struct queued **p = r ? realloc(q_ptrs, srv.queued * sizeof(*p)) : NULL;

		if (r)
			q_reqs = r;
		if (!p)
			return 0;
		q_ptrs = p;
		q_cap = srv.queued;
	}
	for (q = srv.queue; q && n < q_cap; q = q->next) {
		struct admit_uid_use use;

		if (!q->to.c)
			continue;	/* its client left: dropped by dequeue() */
		/* A uid's use once per snapshot, however many requests it queued. */
		for (i = 0; i < n && q_ptrs[i]->uid != q->uid; i++)
			;
		use = i < n ? q_reqs[i].uid : uid_use(q->uid);
		q_ptrs[n] = q;
		q_reqs[n++] = admit_req_of(&q->req, q->uid, &use, q->t);
	}
	return n;
}

/* Some queued request waits for room, not only for its own uid's sandboxes. */
static bool queue_waits_room(void)
{
	struct admit_limits lim = limits();
	struct admit_use u = use_now();
	unsigned n = queue_snapshot(), i;

	for (i = 0; i < n; i++)
		if (admit_fit(&lim, &u, &q_reqs[i]) == ADMIT_WAIT_ROOM)
			return true;
	return false;
}

/* ---- admission ---- */

static void refuse(struct bind *to, struct api_req *req, const char *code, const char *msg,
		   bool load)
{
	bind_send(to, api_error(to->re, code, msg,
				load ? json_pack("{s:o}", "load", load_json()) : NULL));
	api_req_free(req);
}

/*
 * A run's timeout and a session's lifetime and idle timeout, within the
 * daemon's max_lifetime and max_idle: asked for beyond them (0, none,
 * included), the request is refused; a default beyond them is cut.
 */
static int time_caps(struct api_req *r, char *why, size_t len)
{
	uint64_t life = srv.cfg.max_lifetime_s, idle = srv.cfg.max_idle_s;
	uint64_t t = r->op == OP_CREATE ? r->lifetime_s : r->cmd.timeout_ms / 1000;

	if (r->timeout_set && (!t || t > life)) {
		snprintf(why, len, "timeout %" PRIu64 " s%s is longer than this daemon lets a "
			 "sandbox live (max_lifetime %" PRIu64 " s)", t, t ? "" : " (none)", life);
		return -ERANGE;
	}
	if (r->op == OP_RUN) {
		if (!t || t > life)
			r->cmd.timeout_ms = life * 1000;
		return 0;
	}
	if (r->idle_set && (!r->idle_timeout_s || r->idle_timeout_s > idle)) {
		snprintf(why, len, "idle_timeout %" PRIu64 " s%s is longer than this daemon lets "
			 "a session wait (max_idle %" PRIu64 " s)", r->idle_timeout_s,
			 r->idle_timeout_s ? "" : " (none)", idle);
		return -ERANGE;
	}
	if (!t || t > life)
		r->lifetime_s = life;
	if (!r->idle_timeout_s || r->idle_timeout_s > idle)
		r->idle_timeout_s = idle;
	return 0;
}

static void enqueue(struct bind *to, struct api_req *req, uid_t uid)
{
	struct queued *q = calloc(1, sizeof(*q)), **tail;

	if (!q) {
		refuse(to, req, E_INTERNAL, "out of memory", false);
		return;
	}
	bind_set(&q->to, to->c, to->re);
	q->req = *req;
	memset(req, 0, sizeof(*req));
	q->uid = uid;
	q->t = now_us();
	for (tail = &srv.queue; *tail; tail = &(*tail)->next)
		;
	*tail = q;
	srv.queued++;
	if (q->req.op == OP_RUN)
		bind_send(to, api_event(to->re, "queued", json_pack("{s:o}", "load", load_json())));
}

static void admit(struct bind *to, struct api_req *req)
{
	struct admit_limits lim = limits();
	struct admit_use u = use_now();
	uid_t uid = to->c->uid;
	struct admit_uid_use use;
	struct admit_req a;
	char why[300];
	unsigned n;

	if (srv.draining) {
		refuse(to, req, E_SHUTTING_DOWN, "husk serve is shutting down", false);
		return;
	}
	/* A template fixes the machine: its RAM and vCPUs are what the sandbox takes. */
	if (req->template_name) {
		req->mem_mib = serve_template_mem(req->template_name);
		req->vcpus = template_vcpus(req->template_name);
	}
	use = uid_use(uid);
	a = admit_req_of(req, uid, &use, 0);
	if (time_caps(req, why, sizeof(why)) || admit_check(&lim, &a, why, sizeof(why))) {
		refuse(to, req, E_BAD, why, false);
		return;
	}
	n = queue_snapshot();
	switch (admit_new(&lim, &u, q_reqs, n, &a)) {
	case ADMIT_START:
		start(to, req);
		publish();
		return;
	case ADMIT_QUEUE:
		enqueue(to, req, uid);
		publish();
		return;
	case ADMIT_BUSY:
		if (srv.queued >= srv.cfg.max_queue)
			snprintf(why, sizeof(why), "no room for another sandbox and the queue is full");
		else
			snprintf(why, sizeof(why), "uid %u has %u requests queued, its share of the "
				 "queue (uid_max_queue): wait for them", (unsigned)uid, a.uid.queued);
		refuse(to, req, E_BUSY, why, true);
		return;
	}
}

static void queue_drop(struct queued *q)
{
	struct queued **pp;

	for (pp = &srv.queue; *pp; pp = &(*pp)->next) {
		if (*pp == q) {
			*pp = q->next;
			srv.queued--;
			break;
		}
	}
	bind_clear(&q->to);
	api_req_free(&q->req);
	free(q);
}

/* A queued request that waited max_wait: busy, with the load. */
static void expire(struct queued *q)
{
	char msg[200];

	snprintf(msg, sizeof(msg), "waited %u s in the queue and there is still no room for it "
		 "(max_wait): try again later", srv.cfg.max_wait_s);
	bind_send(&q->to, api_error(q->to.re, E_BUSY, msg, json_pack("{s:o}", "load", load_json())));
	queue_drop(q);
}

static void dequeue(void)
{
	struct admit_limits lim = limits();
	struct queued *q, *next;
	unsigned steps, n, which;

	for (q = srv.queue; q; q = next) {
		next = q->next;
		if (!q->to.c)		/* its client left while it waited */
			queue_drop(q);
	}
	/* Each step starts, refuses or gives up something: bounded all the same. */
	for (steps = 0; steps < 2 * srv.cfg.max_vms + srv.queued + 8; steps++) {
		struct admit_use u = use_now();

		n = queue_snapshot();
		switch (admit_next(&lim, &u, q_reqs, n, &which)) {
		case ADMIT_NONE:
			return;
		case ADMIT_DEQUEUE:
			q = q_ptrs[which];
			start(&q->to, &q->req);
			queue_drop(q);
			break;
		case ADMIT_EXPIRE:
			expire(q_ptrs[which]);
			break;
		case ADMIT_EVICT:
			if (!evict_pooled())
				return;
			break;
		}
	}
}

/* Admission and pools after a sandbox ended or became ready. */
void serve_changed(void)
{
	dequeue();
	pools_fill();
	publish();
}

/*
 * Free what ended (detached results waiting for `wait` aside). Only between
 * epoll batches: an event of the batch may still name a sandbox's handle.
 */
static void reap_sandboxes(void)
{
	struct sandbox **pp = &srv.sandboxes, *sb;

	while ((sb = *pp)) {
		if (sb->state == SB_DONE && sb->exited && !(sb->detach && sb->final)) {
			*pp = sb->next;
			sb_free(sb);
			continue;
		}
		pp = &sb->next;
	}
}

/* ---- requests ---- */

static struct sandbox *find_sb(struct client *c, const char *name)
{
	struct sandbox *sb;

	for (sb = srv.sandboxes; sb; sb = sb->next)
		if (sb->owned && !strcmp(sb->name, name) && (c->admin || sb->owner == c->uid))
			return sb;
	return NULL;
}

/* The sandbox and request that an exec or run id of this client names. */
static struct xreq *find_target(struct client *c, json_t *id, bool run, struct sandbox **out)
{
	struct sandbox *sb;
	unsigned i;

	for (sb = srv.sandboxes; sb; sb = sb->next) {
		if (!sb->owned || (sb->owner != c->uid && !c->admin))
			continue;
		for (i = 0; i < SB_MAX_REQS; i++) {
			struct xreq *x = &sb->reqs[i];
			struct bind *b = x->for_run ? &sb->creator : &x->to;

			if (x->id && x->kind == X_EXEC && x->for_run == run && b->c == c &&
			    json_equal(b->re, id)) {
				*out = sb;
				return x;
			}
		}
	}
	return NULL;
}

static void reply_err(struct bind *to, const char *code, const char *msg)
{
	bind_send(to, api_error(to->re, code, msg, NULL));
}

/*
 * What a client's egress rules may open (docs/security.md, "What a
 * client's policy may open"). A client that is not an admin gets no rule
 * into a range closed to clients, and a worker that keeps the platform
 * endpoints and the host's addresses closed whatever its rules say. An
 * admin keeps husk run's rules, except on such a worker (a client's
 * sandbox, a pooled clone): a run or create that opens one of those takes
 * no pooled clone, a policy that does is refused. Returns the error code
 * the request was answered with, or NULL to go on.
 */
static const char *rules_refused(struct client *c, struct api_req *r, const struct sandbox *sb,
				 struct bind *to)
{
	const struct api_net_limits lim = { srv.cfg.client_allow, srv.cfg.nr_client_allow,
					    ranges_is_host_addr };

	if (c->admin && !sb) {
		if (r->net_pool && api_check_rules(r, &lim, false))
			r->net_pool = false;
		return NULL;
	}
	if ((!c->admin || sb->strict_net) && api_check_rules(r, &lim, !c->admin)) {
		reply_err(to, E_FORBIDDEN, husk_lasterr());
		return E_FORBIDDEN;
	}
	if (!sb && api_strict_worker(r)) {
		reply_err(to, E_BAD, husk_lasterr());
		return E_BAD;
	}
	return NULL;
}

/* ---- what each uid holds: health and metrics ---- */

static struct metrics_uid *uid_row(struct metrics_uid **rows, unsigned *n, unsigned *cap,
				   uid_t uid)
{
	unsigned i;

	for (i = 0; i < *n; i++)
		if ((*rows)[i].uid == uid)
			return &(*rows)[i];
	if (*n == *cap) {
		unsigned nc = *cap ? 2 * *cap : 16;
		struct metrics_uid *nr = realloc(*rows, nc * sizeof(*nr));

		if (!nr)
			return NULL;
		*rows = nr;
		*cap = nc;
	}
	memset(&(*rows)[*n], 0, sizeof(**rows));
	(*rows)[*n].uid = uid;
	return &(*rows)[(*n)++];
}

/* One row per uid with a connection, a sandbox or a queued request (malloc'd). */
static unsigned uid_rows(struct metrics_uid **out)
{
	struct metrics_uid *rows = NULL, *r;
	unsigned n = 0, cap = 0;
	struct sandbox *sb;
	struct peer *p;
	struct queued *q;

	for (p = srv.peers; p; p = p->next)
		if (p->conns && (r = uid_row(&rows, &n, &cap, p->uid)))
			r->conns = p->conns;
	for (sb = srv.sandboxes; sb; sb = sb->next) {
		if (sb->owned && sb->state != SB_DONE && (r = uid_row(&rows, &n, &cap, sb->owner))) {
			r->sandboxes++;
			r->mem_mib += sb->mem_mib;
		}
	}
	for (q = srv.queue; q; q = q->next)
		if (q->to.c && (r = uid_row(&rows, &n, &cap, q->uid)))
			r->queued++;
	*out = rows;
	return n;
}

static json_t *uid_json(const struct metrics_uid *r)
{
	return json_pack("{s:I,s:i,s:i,s:I,s:i}", "uid", (json_int_t)r->uid,
			 "connections", r->conns, "sandboxes", r->sandboxes,
			 "mem_mib", (json_int_t)r->mem_mib, "queued", r->queued);
}

/*
 * health: the load, what the asking uid holds and its share (root has
 * none), and for an admin every uid's use.
 */
static json_t *health_json(const struct client *c)
{
	struct admit_limits l = limits();
	struct metrics_uid *rows = NULL, mine = { .uid = c->uid };
	unsigned n = uid_rows(&rows), i;
	json_t *o, *me, *all = c->admin ? json_array() : NULL;

	for (i = 0; i < n; i++) {
		if (rows[i].uid == c->uid)
			mine = rows[i];
		if (all)
			json_array_append_new(all, uid_json(&rows[i]));
	}
	free(rows);
	me = uid_json(&mine);
	json_object_set_new(me, "share", c->uid == 0 ? json_null() :
			    json_pack("{s:i,s:i,s:I,s:i}", "connections", srv.cfg.uid_max_conns,
				      "sandboxes", l.uid_vms, "mem_mib", (json_int_t)l.uid_mem_mib,
				      "queue", l.uid_queue));
	o = json_pack("{s:s,s:o,s:b,s:o}", "version", PACKAGE_VERSION, "load", load_json(),
		      "draining", srv.draining, "uid", me);
	if (o && all)
		json_object_set_new(o, "uids", all);
	else
		json_decref(all);
	return o;
}

/* Before a scrape: each uid's use, for the husk_uid_* gauges. */
static void publish_uids(void)
{
	struct metrics_uid *rows = NULL;
	unsigned n = uid_rows(&rows);

	metrics_uids(rows, n);
	free(rows);
}

static const char *handle(struct client *c, struct api_req *r)
{
	struct bind to = { c, r->id };
	struct sandbox *sb = NULL;
	const char *code;
	struct xreq *x;
	json_t *arr;

	switch (r->op) {
	case OP_RUN:
	case OP_CREATE:
		if ((code = rules_refused(c, r, NULL, &to)))
			return code;
		admit(&to, r);
		return "ok";
	case OP_HEALTH:
		bind_send(&to, api_ok(r->id, health_json(c)));
		return "ok";
	case OP_LIST:
		arr = json_array();
		for (sb = srv.sandboxes; sb; sb = sb->next)
			if (sb->owned && sb->state != SB_DONE && (c->admin || sb->owner == c->uid))
				json_array_append_new(arr, sb_describe(sb, false));
		bind_send(&to, api_ok(r->id, json_pack("{s:o}", "sandboxes", arr)));
		return "ok";
	case OP_STDIN:
		x = find_target(c, r->target, r->target_is_run, &sb);
		if (!x || !x->stdin) {
			reply_err(&to, E_NOT_FOUND, "no running command with that id reads stdin");
			return E_NOT_FOUND;
		}
		if ((r->data_len && sb_send(sb, P_XSTDIN, x->id, r->data, r->data_len)) ||
		    (r->eof && sb_send(sb, P_XSTDIN, x->id, NULL, 0))) {
			reply_err(&to, E_CONFLICT, husk_lasterr());
			return E_CONFLICT;
		}
		bind_send(&to, api_ok(r->id, NULL));
		return "ok";
	case OP_SIGNAL: {
		uint8_t v[4];

		x = find_target(c, r->target, false, &sb);
		if (!x) {
			reply_err(&to, E_NOT_FOUND, "no running command with that id");
			return E_NOT_FOUND;
		}
		le32_put(v, (uint32_t)r->signal);
		if (sb_send(sb, P_XSIGNAL, x->id, v, 4)) {
			reply_err(&to, E_CONFLICT, husk_lasterr());
			return E_CONFLICT;
		}
		bind_send(&to, api_ok(r->id, NULL));
		return "ok";
	}
	default:
		break;
	}
	sb = find_sb(c, r->sandbox);
	if (!sb) {
		reply_err(&to, E_NOT_FOUND, "no such sandbox");
		return E_NOT_FOUND;
	}
	switch (r->op) {
	case OP_INSPECT:
		bind_send(&to, api_ok(r->id, json_pack("{s:o}", "sandbox", sb_describe(sb, true))));
		return "ok";
	case OP_KILL:
		sb_kill(sb);
		bind_send(&to, api_ok(r->id, NULL));
		return "ok";
	case OP_WAIT:
		if (!sb->is_run || !sb->detach) {
			reply_err(&to, E_CONFLICT, "only a detached run can be waited for");
			return E_CONFLICT;
		}
		if (sb->final) {
			bind_send(&to, api_ok(r->id, json_pack("{s:O}", "final", sb->final)));
			json_decref(sb->final);
			sb->final = NULL;
			serve_changed();
		} else {
			bind_set(&sb->waiter, c, r->id);
		}
		return "ok";
	case OP_DESTROY:
		if (sb->is_run) {
			reply_err(&to, E_CONFLICT, "a run ends by itself (or with kill)");
			return E_CONFLICT;
		}
		bind_set(&sb->waiter, c, r->id);
		sb_end(sb);
		return "ok";
	case OP_POLICY:
		if (sb->state == SB_ENDING || sb->state == SB_DONE) {
			reply_err(&to, E_GONE, "the sandbox has ended");
			return E_GONE;
		}
		if ((code = rules_refused(c, r, sb, &to)))
			return code;
		if (sb_policy(sb, &to, r->policy)) {
			reply_err(&to, E_CONFLICT, husk_lasterr());
			return E_CONFLICT;
		}
		return "ok";
	default:
		break;
	}
	/* An ended sandbox keeps its record for inspect and wait; a client
	 * still talking to it must learn that it is gone, not that it is busy. */
	if (sb->state == SB_ENDING || sb->state == SB_DONE) {
		reply_err(&to, E_GONE, "the sandbox has ended");
		return E_GONE;
	}
	if (sb->state != SB_READY || sb->is_run) {
		reply_err(&to, E_CONFLICT, "the sandbox is not a running session");
		return E_CONFLICT;
	}
	switch (r->op) {
	case OP_EXEC:
		if (sb_exec(sb, &to, &r->cmd, false)) {
			reply_err(&to, E_CONFLICT, husk_lasterr());
			return E_CONFLICT;
		}
		return "ok";
	case OP_PUT:
		if (sb_put(sb, &to, r->stream, r->data, r->data_len, r->more, false)) {
			reply_err(&to, E_CONFLICT, husk_lasterr());
			return E_CONFLICT;
		}
		if (r->more)
			bind_send(&to, api_ok(r->id, NULL));
		return "ok";
	case OP_GET:
		if (sb_get(sb, &to, r->path, false)) {
			reply_err(&to, E_CONFLICT, husk_lasterr());
			return E_CONFLICT;
		}
		return "ok";
	default:
		reply_err(&to, E_BAD, "unknown op");
		return E_BAD;
	}
}

void serve_request(struct client *c, const char *line, size_t len)
{
	struct api_req r;
	const char *code, *result;

	if (api_parse(line, len, &r, &code)) {
		client_send(c, api_error(r.id, code, husk_lasterr(), NULL));
		metrics_request("?", code);
		api_req_free(&r);
		return;
	}
	result = handle(c, &r);
	metrics_request(api_op_name(r.op), result);
	api_req_free(&r);	/* run and create moved their request out */
}

/* ---- the socket, signals, the loop ---- */

static int listen_on(const char *path, gid_t group)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	char dir[sizeof(a.sun_path)], *slash;
	struct stat st;
	int fd, probe;

	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	/* Its directory (/run/husk after a reboot) is made if missing, like a daemon's. */
	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = '\0';
		fd = mkdir_p(dir, 0755);
		if (fd)
			return fd;
	}
	/* Only a socket is ever replaced: a file at that path is not ours to remove. */
	if (lstat(path, &st) == 0 && !S_ISSOCK(st.st_mode))
		return husk_seterr(EEXIST, "%s exists and is not a socket: not replacing it", path);
	/* A socket nobody answers on is a killed daemon's: take its place. */
	probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (probe >= 0 && connect(probe, (struct sockaddr *)&a, sizeof(a)) == 0) {
		close(probe);
		return husk_seterr(EADDRINUSE, "another husk serve answers on %s", path);
	}
	if (probe >= 0)
		close(probe);
	unlink(path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 64) < 0 ||
	    chmod(path, 0660) < 0 || (group != (gid_t)-1 && chown(path, 0, group) < 0)) {
		int e = errno;

		if (fd >= 0)
			close(fd);
		return husk_seterr(e, "cannot listen on %s: %s", path, strerror(e));
	}
	return fd;
}

static void drain_start(void)
{
	struct sandbox *sb;

	if (srv.draining)
		return;
	srv.draining = true;
	srv.drain_end = now_us() + srv.cfg.grace_s * 1000000ull;
	husk_msg("serve: draining (%u s grace)", srv.cfg.grace_s);
	if (srv.lfd >= 0) {
		epoll_ctl(srv.epfd, EPOLL_CTL_DEL, srv.lfd, NULL);
		close(srv.lfd);
		srv.lfd = -1;
		unlink(srv.cfg.socket_path);
	}
	for (sb = srv.sandboxes; sb; sb = sb->next)
		if (sb->from_pool && !sb->owned)
			sb_kill(sb);
	while (srv.queue) {
		struct queued *q = srv.queue;

		srv.queue = q->next;
		bind_send(&q->to, api_error(q->to.re, E_SHUTTING_DOWN, "husk serve is shutting down",
					    NULL));
		bind_clear(&q->to);
		api_req_free(&q->req);
		free(q);
	}
	srv.queued = 0;
}

static void reload(void)
{
	struct serve_cfg c = srv.cfg;

	tpl_cache_at = 0;	/* templates may have been made anew */
	if (!c.config_path)
		return;
	c.nr_pools = 0;
	if (serve_read_config(c.config_path, &c)) {
		husk_msg("serve: SIGHUP: %s (keeping the limits in force)", husk_lasterr());
		return;
	}
	/* Pools named before but not now are emptied. */
	for (unsigned i = 0; i < srv.cfg.nr_pools; i++) {
		unsigned j;

		for (j = 0; j < c.nr_pools; j++)
			if (!strcmp(c.pools[j].template_name, srv.cfg.pools[i].template_name))
				break;
		if (j == c.nr_pools && c.nr_pools < SERVE_MAX_POOLS) {
			c.pools[c.nr_pools] = srv.cfg.pools[i];
			c.pools[c.nr_pools++].k = 0;
		}
	}
	srv.cfg = c;
	husk_msg("serve: limits reloaded: max_vms %u, max_mem %" PRIu64 " MiB, max_queue %u",
		 c.max_vms, c.max_mem_mib, c.max_queue);
	serve_changed();
}

static void on_signal(void)
{
	struct signalfd_siginfo si;

	while (read(srv.sfd, &si, sizeof(si)) == sizeof(si)) {
		if (si.ssi_signo == SIGHUP)
			reload();
		else
			drain_start();
	}
}

static void tick(void)
{
	uint64_t now = now_us(), t;
	struct sandbox *sb;

	if (read(srv.tfd, &t, sizeof(t)) < 0)
		return;
	for (sb = srv.sandboxes; sb; sb = sb->next)
		sb_tick(sb, now);
	clients_tick(now);
	if (srv.draining && now >= srv.drain_end)
		for (sb = srv.sandboxes; sb; sb = sb->next)
			sb_kill(sb);
	pools_fill();
}

static bool drained(void)
{
	struct sandbox *sb;

	for (sb = srv.sandboxes; sb; sb = sb->next)
		if (!sb->exited)
			return false;
	return true;
}

/*
 * Every client is a descriptor and every sandbox five or six: the soft
 * limit goes up to the hard one (as far as OPEN_FILES_WANTED), as a
 * daemon's should. Out of them all the same, the listener waits a tick.
 */
static void open_files(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur >= OPEN_FILES_WANTED ||
	    rl.rlim_cur >= rl.rlim_max)
		return;
	rl.rlim_cur = rl.rlim_max < OPEN_FILES_WANTED ? rl.rlim_max : OPEN_FILES_WANTED;
	setrlimit(RLIMIT_NOFILE, &rl);
}

static int setup(const struct serve_cfg *c)
{
	struct itimerspec its = { { 0, TICK_MS * 1000000 }, { 0, TICK_MS * 1000000 } };
	sigset_t set;

	memset(&srv, 0, sizeof(srv));
	srv.cfg = *c;
	srv.lfd = srv.sfd = srv.tfd = -1;
	open_files();
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGCHLD);
	sigprocmask(SIG_BLOCK, &set, NULL);
	sigdelset(&set, SIGCHLD);
	srv.sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	srv.tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	srv.epfd = epoll_create1(EPOLL_CLOEXEC);
	if (srv.sfd < 0 || srv.tfd < 0 || srv.epfd < 0 || timerfd_settime(srv.tfd, 0, &its, NULL))
		return husk_seterr(errno, "serve: %s", strerror(errno));
	/* What a killed daemon's workers left: taps, cgroups, runtime directories. */
	run_clean_stale();
	srv.lfd = listen_on(c->socket_path, c->group);
	if (srv.lfd < 0)
		return srv.lfd;
	if (c->metrics_addr) {
		static struct handle hm;
		char helper[PATH_MAX];
		int err;

		/* Not found: metrics_start() names the installed path. */
		husk_own_file("husk-metrics", HUSK_LIBEXEC_DIR "/husk-metrics", X_OK, helper,
			      sizeof(helper));
		err = metrics_start(c->metrics_addr, helper);
		if (err)
			return err;
		ep_add(metrics_fd(), &hm, H_METRICS, NULL, EPOLLIN);
	}
	{
		static struct handle hl, hs, ht;

		ep_add(srv.lfd, &hl, H_LISTEN, NULL, EPOLLIN);
		srv.hl = &hl;
		ep_add(srv.sfd, &hs, H_SIGNAL, NULL, EPOLLIN);
		ep_add(srv.tfd, &ht, H_TIMER, NULL, EPOLLIN);
	}
	return 0;
}

int serve_main(const struct serve_cfg *c)
{
	struct epoll_event ev[64];
	bool more = false;
	int n, i;

	if (setup(c)) {
		husk_msg("serve: %s", husk_lasterr());
		return 1;
	}
	husk_msg("serve: listening on %s (max %u VMs, %" PRIu64 " MiB, queue %u)",
		 c->socket_path, c->max_vms, c->max_mem_mib, c->max_queue);
	pools_fill();
	publish();
	while (!(srv.draining && drained())) {
		/* Requests left from the last pass: look at events, do not wait for them. */
		n = epoll_wait(srv.epfd, ev, 64, more ? 0 : -1);
		if (n < 0 && errno != EINTR)
			break;
		for (i = 0; i < n; i++) {
			struct handle *h = ev[i].data.ptr;

			switch (h->kind) {
			case H_LISTEN:
				clients_accept();
				break;
			case H_SIGNAL:
				on_signal();
				break;
			case H_TIMER:
				tick();
				break;
			case H_METRICS:
				publish_uids();
				if (metrics_answer()) {
					epoll_ctl(srv.epfd, EPOLL_CTL_DEL, metrics_fd(), NULL);
					metrics_stop();
				}
				break;
			case H_CLIENT: {
				struct client *cl = h->p;

				client_event(cl, ev[i].events);
				/* A client that drained its answers may release its sandboxes. */
				if (!client_full(cl)) {
					struct sandbox *sb;

					for (sb = srv.sandboxes; sb; sb = sb->next)
						sb_resume_check(sb);
				}
				break;
			}
			default:
				sb_event(h->p, h, ev[i].events);
				break;
			}
		}
		more = clients_pass();
		clients_reap();
		reap_sandboxes();
		serve_changed();
	}
	metrics_stop();
	husk_msg("serve: stopped");
	return 0;
}
