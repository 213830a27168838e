/*
 * cli_run: parse and validate `husk run`. Pure, like cli.c: no files are
 * touched here; a rejected command line leaves its reason in husk_lasterr().
 */
#ifndef HUSK_CLI_RUN_H
#define HUSK_CLI_RUN_H

#include <stdbool.h>
#include <stdint.h>

#define RUN_MAX_ENV 256
#define RUN_MAX_PUTS 32
#define RUN_MAX_GETS 32
#define RUN_DEFAULT_MEM_MIB 512
#define RUN_DEFAULT_TIMEOUT_SEC 120
#define RUN_DEFAULT_WORKSPACE_MIB 256
#define RUN_MAX_WORKSPACE_MIB (64 * 1024)
#define RUN_DEFAULT_MAX_OUTPUT (16ull << 20)

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

extern const char cli_run_usage[];

#endif
