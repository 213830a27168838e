/*
 * cli_run: parse and validate `husk run`. Pure, like cli.c: no files are
 * touched here; a rejected command line leaves its reason in husk_lasterr().
 */
#ifndef HUSK_CLI_RUN_H
#define HUSK_CLI_RUN_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>

#include "bpf/egress.h"
#include "job/job.h"

#define RUN_MAX_ENV JOB_MAX_ENV
#define RUN_MAX_PUTS JOB_MAX_PUTS
#define RUN_MAX_GETS JOB_MAX_GETS
#define RUN_DEFAULT_MEM_MIB 512
#define RUN_DEFAULT_TIMEOUT_SEC JOB_DEFAULT_TIMEOUT_SEC
#define RUN_DEFAULT_WORKSPACE_MIB JOB_DEFAULT_WORKSPACE_MIB
#define RUN_MAX_WORKSPACE_MIB JOB_MAX_WORKSPACE_MIB
#define RUN_DEFAULT_MAX_OUTPUT JOB_DEFAULT_MAX_OUTPUT
#define RUN_MAX_ALLOW 64
#define RUN_MAX_ALLOW_HOST 64
#define RUN_MAX_DENY 64
#define RUN_DEFAULT_CONN_RATE 100		/* new connections per second */
#define RUN_DEFAULT_EGRESS_LIMIT (1ull << 30)	/* bytes out per VM */
#define RUN_DEFAULT_MAX_DESTS 256		/* distinct destination addresses */
#define RUN_MAX_CONN_RATE 1000000
/* --cpus: CPU time per wall-clock time, in thousandths of one CPU. */
#define RUN_DEFAULT_CPU_MILLI 500		/* half a CPU */
#define RUN_MIN_CPU_MILLI 10			/* 0.01 */
/*
 * --pids-max: tasks (threads count) in the VM's host-side cgroup. husk
 * itself needs one per vCPU plus RUN_PIDS_OVERHEAD (main thread, event
 * loop, short-lived helpers); 128 covers the 32-vCPU maximum with room to
 * spare and still stops a compromised VMM's fork bomb at a harmless size.
 */
#define RUN_DEFAULT_PIDS_MAX 128
#define RUN_MIN_PIDS_MAX 16
#define RUN_MAX_PIDS_MAX 4194304		/* the kernel's PID_MAX_LIMIT */
#define RUN_PIDS_OVERHEAD 8
/*
 * --uid-range: host uids the jail hands out, one VM each. The default sits
 * above what /etc/subuid ranges (100000 + 65536 per user), systemd's
 * container ranges (524288..1879048191) and ordinary accounts use, and below
 * 2^31 (some tools treat uids as signed); jail_uid_lease() also skips any
 * uid of it that turns out to be someone's.
 */
#define RUN_DEFAULT_UID_BASE 1879048192		/* 0x70000000 */
#define RUN_DEFAULT_UID_COUNT 4096
#define RUN_UID_NOBODY 65534			/* the kernel's overflow uid */

enum run_net {
	RUN_NET_NONE = 0,	/* no network card at all */
	RUN_NET_EGRESS,		/* tap + eBPF filter: deny by default, --allow opens */
};

/*
 * One --allow CIDR[:PROTO[:PORTS]]; an IPv6 CIDR is written with the
 * address in brackets ("[2001:db8::]/32:tcp:443"). family says which of
 * addr/addr6 holds the prefix (run_cidr_addr() picks it); the other is zero.
 */
struct run_allow {
	int family;			/* AF_INET or AF_INET6 */
	struct in_addr addr;		/* network order, host bits zero */
	struct in6_addr addr6;		/* likewise */
	unsigned prefixlen;
	unsigned protos;		/* EGRESS_P_* */
	struct egress_port_range ports[EGRESS_MAX_PORT_RANGES];
	unsigned nports;		/* 0 = every port */
};

/* One --deny CIDR (IPv4, or IPv6 in brackets); fields as in run_allow. */
struct run_deny {
	int family;
	struct in_addr addr;
	struct in6_addr addr6;
	unsigned prefixlen;
};

/* The prefix of an allow/deny rule as the egress_*_cidr() calls take it. */
#define run_cidr_addr(r) \
	((r)->family == AF_INET6 ? (const void *)&(r)->addr6 : (const void *)&(r)->addr)

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
	struct job_opts job;		/* what goes to the guest (job/job.h) */
	struct run_xfer put[RUN_MAX_PUTS];
	unsigned nr_put;
	struct run_xfer get[RUN_MAX_GETS];
	unsigned nr_get;
	bool get_always;
	bool get_keep_modes;		/* --get files keep the guest's execute bits */
	enum run_net net;
	const char *netns;		/* --netns: the tap's namespace; NULL = husk's */
	/*
	 * --absolute-builtins (not in the usage: husk serve's workers for
	 * clients that are not admins): no rule opens a cloud platform
	 * endpoint or an address of the host, and no DNS answer for one is
	 * released (egress_absolute_builtins(), egress_learn_closed()).
	 */
	bool absolute_builtins;
	struct run_allow allow[RUN_MAX_ALLOW];
	unsigned nr_allow;
	const char *allow_host[RUN_MAX_ALLOW_HOST];	/* checked dns.h patterns */
	unsigned nr_allow_host;
	struct run_deny deny[RUN_MAX_DENY];
	unsigned nr_deny;
	uint64_t conn_rate;		/* --conn-rate; 0 without --net egress */
	uint64_t egress_limit;		/* --egress-limit; 0 without --net egress */
	uint64_t egress_rate;		/* --egress-rate: bytes per second; 0 = none */
	uint64_t max_dests;		/* --max-dests; 0 without --net egress */
	/* Jail and cgroup of the VM on the host. */
	unsigned cpu_milli;		/* --cpus x 1000, <= vcpus x 1000 */
	unsigned pids_max;		/* >= vcpus + RUN_PIDS_OVERHEAD */
	uint32_t uid_base;		/* --uid-range: uid_base..uid_base+uid_count-1, */
	uint32_t uid_count;		/* never 0, RUN_UID_NOBODY or (uid_t)-1 */
	bool no_jail;			/* --no-jail: run unconfined (the caller warns) */
	bool no_hugepages;		/* --no-hugepages: guest RAM in small pages */
	int session_fd;			/* --session-fd N: husk serve's session socket; -1 */
	int policy_fd;			/* --policy-fd N: live rule changes (run_policy.c); -1 */
	int hold_fd;			/* --hold-fd N: the job waits for a byte there (husk oci); -1 */
	const char *server;		/* --server PATH: through husk serve; NULL */
	/* Templates (template.h). */
	const char *template_name;	/* --template NAME: restore instead of boot */
	const char *template_dir;	/* --template-dir DIR (NULL: the default) */
	/* Images (image/image.h): the root and, without a command, the job. */
	const char *image;		/* --image NAME; NULL */
	const char *image_dir;		/* --image-dir DIR (NULL: the default) */
	bool image_init;		/* the root's init is IMAGE_INIT_PATH */
	bool template_create;		/* husk template create: boot, save as
					 * template_name, no job */
	bool json;			/* the record on stdout, as its last line */
	int json_fd;			/* --json-fd N: the record on fd N; -1 none */
	const char *result;		/* --result FILE: the record in FILE; NULL none */
	bool verbose;
	bool help;
};

/* The defaults of every run option (what a bare "husk run -- CMD" gets). */
void cli_run_defaults(struct run_opts *o);
/* Parse "husk run ..." (argv[0] is "run"). Returns 0 or -EINVAL. */
int cli_parse_run(int argc, char **argv, struct run_opts *o);
/*
 * A workspace-relative guest path, normalized in place: a leading
 * "/tmp/workspace/" is stripped, repeated and trailing slashes go; what is
 * left must be non-empty, at most 4095 bytes, without "." or ".."
 * components. NULL when it is not such a path.
 */
char *cli_workspace_path(char *p);
/*
 * Parse one --allow value: "CIDR[:tcp|udp|icmp|any[:P[-P],...]]" where CIDR
 * is "a.b.c.d/len" or "[ipv6]/len".
 */
int cli_parse_allow(const char *arg, struct run_allow *a);
/* Parse one --deny value: "a.b.c.d/len" or "[ipv6]/len". */
int cli_parse_deny(const char *arg, struct run_deny *d);
/* One --allow-host value: a domain name or "*.suffix", not an address. */
int cli_check_allow_host(const char *name);
/* The --allow / --deny text of a rule (what the parsers read back). */
void cli_format_allow(const struct run_allow *a, char *buf, size_t cap);
void cli_format_deny(const struct run_deny *d, char *buf, size_t cap);
/* Parse --cpus: "N", "N.D", "N.DD" or "N.DDD" CPUs, into thousandths. */
int cli_parse_cpus(const char *arg, unsigned *milli);
/*
 * --rlimit NAME=SOFT[:HARD] into *r: NAME is a resource as prlimit(1) and
 * setrlimit(2) name it (nofile, nproc, fsize, core, stack, ...; RLIMIT_NOFILE
 * works too), SOFT and HARD a number or "unlimited"; HARD defaults to SOFT.
 */
int cli_parse_rlimit(const char *arg, struct job_rlimit *r);
/*
 * --tmpfs PATH[:OPTIONS] into *t (its path a copy): OPTIONS is a comma list
 * of size=N[k|m|g], mode=OCTAL, noexec or exec, and the mount flags husk
 * always has or that change nothing here (rw, nosuid, nodev, noatime,
 * relatime, strictatime, nodiratime); PATH as proto_tmpfs_path_ok() takes.
 */
int cli_parse_tmpfs(const char *arg, struct job_tmpfs *t);
/* Parse --uid-range "BASE:COUNT" (the rules of run_opts.uid_base). */
int cli_parse_uid_range(const char *arg, uint32_t *base, uint32_t *count);

extern const char cli_run_usage[];

#endif
