/*
 * cli_run: parse and validate `husk run`. Pure, like cli.c: no files are
 * touched here; a rejected command line leaves its reason in husk_lasterr().
 */
#ifndef HUSK_CLI_RUN_H
#define HUSK_CLI_RUN_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>

#include "../bpf/egress.h"

#define RUN_MAX_ENV 256
#define RUN_MAX_PUTS 32
#define RUN_MAX_GETS 32
#define RUN_DEFAULT_MEM_MIB 512
#define RUN_DEFAULT_TIMEOUT_SEC 120
#define RUN_DEFAULT_WORKSPACE_MIB 256
#define RUN_MAX_WORKSPACE_MIB (64 * 1024)
#define RUN_DEFAULT_MAX_OUTPUT (16ull << 20)
#define RUN_MAX_ALLOW 64
#define RUN_DEFAULT_CONN_RATE 100		/* new connections per second */
#define RUN_DEFAULT_EGRESS_LIMIT (1ull << 30)	/* bytes out per VM */
#define RUN_MAX_CONN_RATE 1000000

enum run_net {
	RUN_NET_NONE = 0,	/* no network card at all */
	RUN_NET_EGRESS,		/* tap + eBPF filter: deny by default, --allow opens */
};

/* One --allow CIDR[:PROTO[:PORTS]] (IPv4). */
struct run_allow {
	struct in_addr addr;		/* network order, host bits zero */
	unsigned prefixlen;
	unsigned protos;		/* EGRESS_P_* */
	struct egress_port_range ports[EGRESS_MAX_PORT_RANGES];
	unsigned nports;		/* 0 = every port */
};

struct run_xfer {
	const char *host;	/* --put source / --get target directory */
	const char *guest;	/* workspace-relative path */
};

struct run_opts {
	const char *kernel;		/* NULL: the default image */
	const char *rootfs;		/* NULL: the default image */
	const char *console;		/* NULL: discard the guest console */
	uint64_t mem_mib;
	unsigned vcpus;
	uint64_t timeout_sec;
	uint64_t workspace_mib;
	uint64_t max_output;		/* bytes per stream passed through */
	const char *env[RUN_MAX_ENV];
	unsigned nr_env;
	struct run_xfer put[RUN_MAX_PUTS];
	unsigned nr_put;
	struct run_xfer get[RUN_MAX_GETS];
	unsigned nr_get;
	bool get_always;
	enum run_net net;
	struct run_allow allow[RUN_MAX_ALLOW];
	unsigned nr_allow;
	uint64_t conn_rate;		/* --conn-rate; 0 without --net egress */
	uint64_t egress_limit;		/* --egress-limit; 0 without --net egress */
	bool stdin;
	bool json;
	bool verbose;
	bool help;
	char **argv;			/* the job: argv[0..argc) */
	int argc;
};

/* Parse "husk run ..." (argv[0] is "run"). Returns 0 or -EINVAL. */
int cli_parse_run(int argc, char **argv, struct run_opts *o);
/*
 * A workspace-relative guest path: not empty, no ".." component, at most
 * 4095 bytes; a leading "/tmp/workspace/" is accepted and stripped.
 */
const char *cli_workspace_path(const char *p);
/* Parse one --allow value: "a.b.c.d/len[:tcp|udp|icmp|any[:P[-P],...]]". */
int cli_parse_allow(const char *arg, struct run_allow *a);

extern const char cli_run_usage[];

#endif
