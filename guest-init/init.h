/*
 * guest-init internal interfaces.
 *
 * main.c   PID 1 duties (mounts, clock, RNG, control ports, power off) and
 *          the conversation with husk on the control socket;
 * job.c    the job spec, starting the job and supervising it until it ends,
 *          files in and out, and what a session's execs share with it
 *          (output streams, stdin queues, exit records, file helpers);
 * session.c a session (T_JOB_SESSION): many commands, puts and gets in the
 *          job's namespaces and cgroup, until P_END;
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

#include "job/proto.h"

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
#define STDIN_QUEUE_MAX (1u << 20)	/* stop reading the host beyond this */
/*
 * After the main process: whatever is left is killed, the pipes drained;
 * also how long the job's init (or an exec's helper) gets to report a kill
 * before it is killed.
 */
#define DRAIN_MS 2000

/* Husk control registers: the shared ABI (guest-init/ctl.h reaches them). */
#include "machine/husk_ctl.h"

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
	char *hostname;		/* NULL = the kernel's */
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
	bool session;		/* T_JOB_SESSION: P_EXEC etc. follow, no argv */
	bool terminal;		/* T_JOB_TERMINAL: the job's stdio is a pty */
	uint16_t rows, cols;	/* its window, 0: unknown */
	int tty;		/* the job's init: the pty's index in its devpts, or -1 */
	struct {
		uint32_t resource;
		uint64_t soft, hard;	/* UINT64_MAX: unlimited */
	} rlimits[PROTO_MAX_RLIMITS];	/* T_JOB_RLIMIT, over husk's defaults */
	size_t nrlimits;
	struct {
		char *path;
		uint64_t size;		/* bytes, 0: tmpfs's default */
		uint32_t mode;
		bool noexec;
	} tmpfs[PROTO_MAX_TMPFS];	/* T_JOB_TMPFS, mounted in the job's namespace */
	size_t ntmpfs;
	bool root;		/* T_JOB_ROOT: uid 0 in the guest, a container's capabilities */
	bool verbose;		/* T_JOB_VERBOSE: notes on the console */
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
struct tlv_buf;
/* Mark the end of a step (enum init_step, proto.h) now. */
void init_step(unsigned step);
/* Every step marked so far, as T_INIT_STEP entries. */
void init_steps_put(struct tlv_buf *b);
/* Report an internal error (P_ERROR + console) and power off with status 1. */
_Noreturn void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The error was already sent on the control socket by a child: just stop. */
_Noreturn void fatal_quiet(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
uint64_t realtime_ns(void);

/* job.c */
int job_spec_parse(const uint8_t *p, size_t len, struct job_spec *js);
/*
 * A P_EXEC spec (after its id) as a spec of its own: argv, env, cwd, stdin
 * and timeout from it, the environment and working directory it does not
 * set and the limits from the session's spec. Free it with job_spec_free,
 * also after a failure.
 */
int exec_spec_parse(const uint8_t *p, size_t len, const struct job_spec *session,
		    struct job_spec *xs);
void job_spec_free(struct job_spec *js);
/* Workspace-relative, no "..": the T_JOB_GET rules. */
bool job_path_sane(const char *p);
int files_in(const struct job_spec *js);
/* Before HELLO: the job's pipes and its init, waiting for the spec. */
int job_prepare(void);
/* spec/len: the P_JOB payload js was parsed from, for the job's init. */
int job_run(const struct job_spec *js, const uint8_t *spec, size_t len,
	    struct job_result *res);
/*
 * A session's spec to the job's init, which stays PID 1 of its namespaces;
 * *init is its pid (also after a failure, to be killed), 0 if there is none.
 */
int job_session_init(const uint8_t *spec, size_t len, pid_t *init);
int files_out(const struct job_spec *js);
/*
 * A session's put and get, each in a child that is the agent user: it
 * extracts the gzip'd tar arriving on in into the workspace, or writes
 * path's archive to out. Why it failed goes to msg. Its pid, or -errno.
 */
pid_t files_put_start(int in, int msg);
pid_t files_get_start(const char *path, int out, int msg);

/* A pipe of output relayed as frames of type, each beginning with pre. */
struct stream {
	int fd;			/* read end, -1 at EOF */
	uint16_t type;
	uint8_t pre[8];		/* sessions: the id and the stream */
	uint8_t pre_len;
};
/* Relay up to one chunk; -errno on a failed send, 0 otherwise. */
int stream_pump(struct stream *s);
/*
 * Say on err (stderr) when the OOM killer ended processes in cgroup, the
 * job's or (exec) a session exec's. -errno on a failed send.
 */
int report_oom(const struct job_spec *js, const char *cgroup, const struct stream *err,
	       bool exec);

/* Bytes queued for a non-blocking pipe: a job's stdin, a put's archive. */
struct feed {
	int fd;			/* write end, -1 once closed */
	uint8_t *buf;
	size_t len, off;	/* bytes [off, len) are still to be written */
	bool eof;		/* close the pipe once the queue is written */
};
/* Queue p (len 0: EOF); dropped once the reader is gone. -ENOMEM. */
int feed_queue(struct feed *f, const uint8_t *p, size_t len);
void feed_pump(struct feed *f);
void feed_close(struct feed *f);

/* The main process's wait status and rusage as the exit record has them. */
void job_result_set(struct job_result *r, int status, const struct rusage *ru);
/* The exit record (P_EXIT, P_XEXIT) of r. */
void exit_record_put(struct tlv_buf *b, const struct job_result *r);

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
/* The spec pipe starts with a u32: the job's pty index in its devpts, or this. */
#define JOBINIT_NO_TTY 0xffffffffu
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
/*
 * In a child that will exec the job's command (js->argv): its own session,
 * f->in/out/err as stdio, the sandbox with cgroup, then exec. A set-up
 * failure goes to f->errfd.
 */
_Noreturn void job_exec(const struct job_spec *js, const struct job_fds *f, const char *cgroup);
/* husk_lasterr() to errfd, then _exit(125). */
_Noreturn void child_fail(int errfd);
/* One report on fd (written once, atomically); -errno if it did not go. */
int jobinit_report_write(int fd, int status, const struct rusage *ru);
/* A report as it arrives on a non-blocking pipe. */
struct report_rd {
	int fd;			/* -1 once read or closed */
	struct jobinit_report rep;
	size_t len;
};
/*
 * Read what has come: 1 a valid report (an exit or a death by a signal),
 * -1 the pipe closed without one (then the writer's own status stands in
 * for it), 0 nothing more yet.
 */
int report_read(struct report_rd *r);
/* Close every descriptor above 2 but those in keep (children that do not exec). */
void close_fds_except(const int *keep, size_t n);

/* sandbox.c */
/* Before HELLO: JOB_CGROUP with its controllers; then the job's limits on it. */
int sandbox_cgroup_create(void);
int sandbox_cgroup_limit(const struct job_spec *js);
/*
 * fork() a job's or an exec's process straight into cgroup (a directory)
 * when the job has one. *placed says whether it is there already; if not,
 * sandbox_enter() moves it.
 */
pid_t sandbox_fork(const char *cgroup, bool *placed);
/*
 * In the job's child, before exec, joining cgroup (a directory; NULL: it
 * was born there): -errno.
 */
int sandbox_enter(const struct job_spec *js, const char *cgroup);
/* Become AGENT_UID with nothing else (tar helpers): -errno. */
int sandbox_drop_user(void);
/* The job's init after forking the job: -errno with husk_lasterr(). */
int sandbox_enter_jobinit(void);
/* Kill every process of the job; jobinit is its init's pid, 0 once reaped. */
void sandbox_kill_job(pid_t jobinit);
/* Kill every process in cgroup (a directory) and below. */
void sandbox_kill_cgroup(const char *cgroup);
/* Processes in cgroup the OOM killer ended (memory.events), 0 if unknown. */
uint64_t sandbox_oom_kills(const char *cgroup);
/*
 * A session: the memory controller for the execs' own cgroups below the
 * job's, so each can tell its OOM kills (best effort).
 */
void sandbox_session_cgroup(void);

/* session.c */
/*
 * Serve a session after its set-up: 0 at P_END or the end of its lifetime,
 * -ECONNABORTED when the host sent P_ERROR, another -errno with
 * husk_lasterr() on a protocol or internal error. Every process of the
 * session is gone when it returns.
 */
int session_run(const struct job_spec *js, const uint8_t *spec, size_t len);

#endif
