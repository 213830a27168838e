/*
 * serve: `husk serve`, the per-host daemon of docs/api.md. Clients on a
 * Unix socket (JSON lines), sandboxes run by worker processes (`husk run
 * --session-fd 3 --json-fd 4 ...`, one per sandbox, so a VM that dies or a
 * worker the guest subverts takes nothing else with it), admission and a
 * FIFO queue, warm pools of template clones, Prometheus metrics.
 *
 * One thread runs everything on epoll (the metrics HTTP server has its
 * own, reading a snapshot under a lock). Every peer is hostile: clients
 * get bounded lines and bounded output queues, workers are parsed frame by
 * frame with the session protocol's rules.
 */
#ifndef HUSK_SERVE_H
#define HUSK_SERVE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "cli_run.h"

#define SERVE_MAX_POOLS 8
#define SERVE_MAX_CLIENT_ALLOW 64
#define SERVE_DEFAULT_SOCKET "/run/husk/serve.sock"

struct serve_pool_cfg {
	char template_name[64];
	unsigned k;
};

struct serve_cfg {
	const char *socket_path;
	gid_t group;			/* the socket's group; (gid_t)-1: root's */
	gid_t admin_gid;		/* (gid_t)-1: none but root */
	unsigned max_vms;
	uint64_t max_mem_mib;
	unsigned max_queue;
	unsigned max_vcpus;		/* of one sandbox */
	/* One uid's share (root has none); 0: half the daemon's limit. */
	unsigned uid_max_conns;		/* never 0 */
	unsigned uid_max_vms, uid_max_queue;
	uint64_t uid_max_mem_mib;
	unsigned max_lifetime_s;	/* a run's timeout, a session's lifetime, at most */
	unsigned max_idle_s;		/* a session's idle_timeout at most */
	unsigned queue_age_s;		/* a request queued this long holds the room it needs */
	unsigned max_wait_s;		/* one queued this long is refused; 0: never */
	unsigned conn_idle_s;		/* a silent connection with nothing open is closed; 0: never */
	unsigned line_timeout_s;	/* one holding a partial request line; 0: never */
	struct serve_pool_cfg pools[SERVE_MAX_POOLS];
	unsigned nr_pools;
	const char *metrics_addr;	/* "host:port", or NULL */
	const char *config_path;	/* re-read on SIGHUP, or NULL */
	unsigned grace_s;		/* SIGTERM: how long running work may finish */
	const char *template_dir;	/* NULL: the default */
	const char *husk_path;		/* the binary the workers run */
	bool verbose;
	/*
	 * What clients that are not admins may open inside the filter's
	 * private and special-purpose ranges (--client-allow, client_allow).
	 */
	struct run_deny client_allow[SERVE_MAX_CLIENT_ALLOW];
	unsigned nr_client_allow;
};

/* Parse `husk serve ...` (argv[0] is "serve"). 0, or -EINVAL (husk_lasterr()). */
int serve_parse(int argc, char **argv, struct serve_cfg *c);
/* Read --config's key = value lines into c (limits and pools). */
int serve_read_config(const char *path, struct serve_cfg *c);
/* Run the daemon until SIGTERM/SIGINT and the drain; the process's exit status. */
int serve_main(const struct serve_cfg *c);

extern const char serve_usage[];

#endif
