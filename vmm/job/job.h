/*
 * job: what a job asks of its guest, whoever fills it in: `husk run`'s
 * command line (cli_run.c), a `husk serve` request, a test. The host's
 * side of it (files on the host, the network, the machine) lives with the
 * caller; this is what travels to guest-init in the job spec.
 */
#ifndef HUSK_JOB_H
#define HUSK_JOB_H

#include <stdbool.h>
#include <stdint.h>

#define JOB_MAX_ENV 256
#define JOB_MAX_PUTS 32
#define JOB_MAX_GETS 32
#define JOB_DEFAULT_TIMEOUT_SEC 120
#define JOB_DEFAULT_WORKSPACE_MIB 256
#define JOB_MAX_WORKSPACE_MIB (64 * 1024)
#define JOB_DEFAULT_MAX_OUTPUT (16ull << 20)
#define JOB_MAX_RLIMITS 16
#define JOB_MAX_TMPFS 8
#define JOB_TMPFS_DEFAULT_MODE 01777

/* A resource limit of the job's (setrlimit), over guest-init's defaults. */
struct job_rlimit {
	uint32_t resource;		/* RLIMIT_*, proto_rlimit_ok() */
	uint64_t soft, hard;		/* UINT64_MAX: unlimited */
};

/* A tmpfs in the job's mount namespace (proto_tmpfs_path_ok). */
struct job_tmpfs {
	const char *path;
	uint64_t size;			/* bytes, 0: tmpfs's default (half the guest's RAM) */
	uint32_t mode;
	bool noexec;
};

struct job_opts {
	char **argv;			/* the command: argv[0..argc) (none for a session) */
	int argc;
	const char *env[JOB_MAX_ENV];	/* "K=V", on top of guest-init's defaults */
	unsigned nr_env;
	const char *cwd;		/* NULL: the workspace */
	const char *hostname;		/* NULL: the guest kernel's */
	uint64_t timeout_sec;		/* the job's (a session's: its lifetime); 0 none */
	uint64_t workspace_mib;
	uint64_t max_output;		/* bytes per stream passed on; the rest is counted */
	bool stdin;			/* stdin frames follow, else /dev/null */
	bool terminal;			/* a pty for the job's stdio, its output all stdout */
	uint16_t rows, cols;		/* the terminal's window, 0: unknown */
	unsigned nr_put;		/* tar streams sent before the job starts */
	const char *get[JOB_MAX_GETS];	/* workspace paths sent back after it */
	unsigned nr_get;
	struct job_rlimit rlimits[JOB_MAX_RLIMITS];
	unsigned nr_rlimits;
	struct job_tmpfs tmpfs[JOB_MAX_TMPFS];
	unsigned nr_tmpfs;
	bool session;			/* a session: commands come later (P_EXEC) */
	bool root;			/* uid 0 in the guest, not agentuser */
	bool verbose;			/* guest-init's own notes on the console (--verbose) */
};

/* One command of a session (P_EXEC). */
struct exec_opts {
	char *const *argv;
	unsigned argc;
	const char *const *env;		/* added to the session's */
	unsigned nr_env;
	const char *cwd;		/* NULL: the session's */
	bool stdin;
	uint64_t timeout_ms;		/* 0: none */
};

#endif
