/*
 * guest-init internal interfaces.
 *
 * main.c   PID 1 duties (mounts, clock, RNG, control ports, power off) and
 *          the conversation with husk on the control socket;
 * job.c    the job spec, starting the job and supervising it until it ends,
 *          files in and out;
 * jobinit.c the job's init, PID 1 of the job's own namespaces, and the
 *          job's process up to exec;
 * sandbox.c what the job's process and its init do to themselves (cgroup,
 *          rlimits, capabilities, uid, no_new_privs, seccomp) and how the
 *          whole job is killed.
 *
 * Test mode (`husk-init --test-fd N [--workspace DIR]`) skips every PID 1
 * duty and the cgroup, so the same binary can be driven from the host
 * through a socketpair; the uid switch and the job's namespaces happen only
 * when running as root.
 */
#ifndef HUSK_INIT_H
#define HUSK_INIT_H

#include <stdbool.h>
#include <stddef.h>
#include <signal.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

#define AGENT_UID 1000
#define AGENT_GID 1000
/* The job's init: a uid no file in the images belongs to (Debian reserves it). */
#define JOBINIT_UID 65533
#define JOBINIT_GID 65533
#define JOBINIT_NAME "job-init"	/* its /proc/1/cmdline and comm, as the job sees them */
#define WORKSPACE "/tmp/workspace"
#define JOB_CGROUP "/sys/fs/cgroup/job"
#define INIT_VERSION "husk-init 1"

#define DEFAULT_WORKSPACE_MIB 256
#define DEFAULT_PIDS_LIMIT 512
#define DEFAULT_NOFILE 1024
#define MAX_RNG_SEED 4096
#define CHUNK_MAX (64 * 1024)	/* P_STDOUT/P_STDERR/P_FILES_OUT chunk size */

/* Husk control registers (docs/architecture.md). */
#define HUSK_PORT_EVENT 0x600
#define HUSK_PORT_POWEROFF 0x604
#define HUSK_EV_INIT 1
#define HUSK_EV_JOB_STARTED 2
#define HUSK_EV_JOB_ENDED 3

struct init_cfg {
	bool test_mode;
	bool drop_user;		/* switch to AGENT_UID (root only) */
	bool use_cgroup;	/* JOB_CGROUP exists and is ours */
	bool namespaces;	/* the job gets its own (root only) */
	const char *workspace;
	int ctl;		/* control connection */
	char *title;		/* our argv strings, rewritten by the job's init */
	size_t title_len;
};
extern struct init_cfg cfg;

struct job_spec {
	char **argv;		/* NULL-terminated */
	size_t argc;
	char **env;		/* NULL-terminated, "K=V" */
	size_t nenv;
	char **gets;
	size_t ngets;
	char *cwd;		/* NULL = the workspace */
	uint64_t timeout_ms;
	uint32_t workspace_mib;
	uint64_t clock_ns;
	uint8_t *seed;
	size_t seed_len;
	bool stdin_frames;
	uint8_t files_in;	/* number of P_FILES_IN streams */
	uint64_t mem_limit;	/* 0 = none */
	uint32_t pids_limit;
	uint32_t nofile;
	uint64_t fsize;		/* RLIM_INFINITY unless given */
	bool net;		/* configure eth0 (T_JOB_NET_*) */
	uint32_t net_addr;	/* IPv4, network order */
	uint32_t net_gw;	/* gateway and DNS server, network order */
	uint8_t net_prefix;
	uint8_t net_mac[6];
	bool have_mac;		/* T_JOB_NET_MAC: set eth0's address first */
};

/* net.c: before the job's init, /run and the resolv.conf bind mount. */
int net_prepare(void);
/* lo and eth0 up, address, default route, resolv.conf. */
int net_setup(const struct job_spec *js);
/* lo up in the current (the job's own) network namespace. */
int net_lo_up(void);

struct job_result {
	bool exited;		/* else killed by signal */
	int code;		/* exit code or signal number */
	bool timed_out;
	struct rusage ru;
	uint64_t start_ns, end_ns;
};

/* main.c */
void husk_event(uint32_t code);
/* Report an internal error (P_ERROR + console) and power off with status 1. */
_Noreturn void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The error was already sent on the control socket by a child: just stop. */
_Noreturn void fatal_quiet(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
uint64_t realtime_ns(void);

/* job.c */
int job_spec_parse(const uint8_t *p, size_t len, struct job_spec *js);
void job_spec_free(struct job_spec *js);
int files_in(const struct job_spec *js);
/* Before HELLO: the job's pipes and its init, waiting for the spec. */
int job_prepare(void);
/* spec/len: the P_JOB payload js was parsed from, for the job's init. */
int job_run(const struct job_spec *js, const uint8_t *spec, size_t len,
	    struct job_result *res);
int files_out(const struct job_spec *js);

/* jobinit.c */
/* The ends of the pipes between guest-init and the job that the job side keeps. */
struct job_fds {
	int in, out, err;	/* the job's stdin, stdout, stderr */
	int errfd;		/* set-up failure message; EOF once the job has exec'd */
	int statfd;		/* one struct jobinit_report when the job's main process ends */
	int spec;		/* the job spec (P_JOB payload), then EOF */
	int netns;		/* guest-init's network namespace, -1 (jobinit_prepare) */
};
/* guest-init asks the job's init to kill every process of the job. */
#define JOBINIT_KILL SIGUSR1
#define JOBINIT_MAGIC 0x4a494e31u	/* "JIN1" */
struct jobinit_report {
	uint32_t magic;
	int32_t status;		/* wait status of the job's main process */
	struct rusage ru;	/* its rusage from wait4() */
};
/*
 * Start the job's init, which waits for the job spec on f->spec and then
 * starts the job: its pid, or -errno.
 */
pid_t jobinit_prepare(struct job_fds *f);

/* sandbox.c */
/* Before HELLO: JOB_CGROUP with its controllers; then the job's limits on it. */
int sandbox_cgroup_create(void);
int sandbox_cgroup_limit(const struct job_spec *js);
/* In the job's child, before exec: -errno with husk_lasterr(). */
int sandbox_enter(const struct job_spec *js);
/* Become AGENT_UID with nothing else (tar helpers): -errno. */
int sandbox_drop_user(void);
/* The job's init after forking the job: -errno with husk_lasterr(). */
int sandbox_enter_jobinit(void);
/* Kill every process of the job; jobinit is its init's pid, 0 once reaped. */
void sandbox_kill_job(pid_t jobinit);
uint64_t sandbox_oom_kills(void);

#endif
