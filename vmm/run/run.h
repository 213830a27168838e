/*
 * run: `husk run`: boot a fresh VM from the kernel and read-only root image,
 * hand guest-init the job over the vsock control channel, stream the job's
 * stdout/stderr to husk's own, move files in and out, and report how the job
 * ended. The VM is destroyed on every path out.
 */
#ifndef HUSK_RUN_H
#define HUSK_RUN_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "bpf/egress.h"
#include "net/dns_learn.h"
#include "net/dns_proxy.h"
#include "cli_run.h"
#include "machine/phase.h"
#include "job/proto.h"
#include "machine/vm.h"

#define RUN_EXIT_TIMEOUT 124
#define RUN_EXIT_FAILURE 125
#define RUN_GUEST_CID 3
#define RUN_DENIED_KEEP EGRESS_DENIED_MAX
#define RUN_DNS_REFUSED_KEEP DNS_PROXY_REFUSED_KEEP
/* A root image on the read-only disk, /dev/vda. */
#define RUN_CMDLINE "root=/dev/vda ro rootfstype=ext4 init=/sbin/init quiet"
/* A root image that is a cpio archive: the initramfs, in guest RAM. */
#define RUN_CMDLINE_RAM "rdinit=/sbin/init quiet"
/* An imported container image: guest-init where husk put it (image.h). */
#define RUN_CMDLINE_IMAGE "root=/dev/vda ro rootfstype=ext4 init=/.husk/init quiet"
#define RUN_CMDLINE_IMAGE_RAM "rdinit=/.husk/init quiet"

struct run_result {
	int exit_code;			/* what husk exits with */
	bool job_started, job_exited, timed_out;
	int job_code;			/* valid when the job exited */
	int job_signal;			/* > 0 when a signal killed it */
	uint64_t user_us, sys_us, maxrss_kib;
	uint64_t stdout_bytes, stderr_bytes;	/* everything the job wrote */
	uint64_t stdout_dropped, stderr_dropped;	/* beyond --max-output */
	bool files_committed;
	bool stdout_open_line;		/* the job's stdout did not end with '\n' */
	enum vm_stop_reason reason;
	int signal;			/* the signal that stopped husk, if one did */
	char error[512];		/* why husk or the VM failed, if it did */
	char console_tail[CONSOLE_TAIL_MAX];	/* the guest's last output after a panic or crash */
	/* Microseconds since process start; -1 when a phase was not reached. */
	int64_t t_first_run, t_init, t_job_start, t_job_end, t_exit, t_teardown;
	uint64_t start_epoch_us;
	bool from_template;		/* restored from a template ("start":"template") */
	uint64_t template_data;		/* template create: guest RAM bytes saved */
	/* Restore phases, microseconds since process start; -1 not reached. */
	int64_t t_restore_open, t_restore_vm;
	struct phase_log phases;	/* husk's own steps up to the first KVM_RUN */
	/* guest-init's steps (proto.h), guest CLOCK_BOOTTIME us; -1 not known. */
	int64_t guest_steps[IS_NR];
	bool net;			/* --net egress was set up */
	bool net_counters;		/* net_ctr is valid */
	struct egress_counters net_ctr;	/* the egress filter's, for this VM */
	char anomaly[256];		/* why the egress filter killed the VM, or "" */
	struct egress_denied_dst denied[RUN_DENIED_KEEP];	/* first distinct ones */
	unsigned nr_denied;
	bool jailed;			/* the VM process entered the full jail */
	unsigned jail_uid;
	bool cg_on;			/* the VM process had a cgroup */
	char cg_mode[8];		/* "v1", "v2", "mixed" */
	unsigned cg_have;		/* CGROUP_USAGE_* valid below */
	uint64_t cg_cpu_us, cg_throttled_us, cg_mem_peak, cg_oom_kills;
	bool dns_on;			/* the DNS proxy ran; dns is valid */
	struct dns_proxy_stats dns;	/* as its helper reported them */
	struct dns_learn_stats dns_learn;	/* the supervisor's: addresses opened */
	char dns_fault[256];		/* why the DNS helper was stopped early, or "" */
	char dns_refused[RUN_DNS_REFUSED_KEEP][256];	/* first distinct names refused */
	unsigned nr_dns_refused;
	/* Rule changes while it ran (--policy-fd): a JSON array's items. */
	unsigned policy_changes;
	bool policy_log_full;		/* later changes are counted, not listed */
	char policy_log[16384];
};

/*
 * Remove what husk runs that are gone left behind: runtime directories,
 * cgroups, taps and network slots (husk serve at start; each run does it too).
 */
void run_clean_stale(void);
/* Run the job; fills r and returns husk's exit status. */
int run_job(const struct run_opts *o, uint64_t start_us, struct run_result *r);
/*
 * A default guest file: given, else $env, else images/NAME next to the
 * husk binary, else the installed one. 0, or -ENOENT saying how to get it.
 */
int run_find_image(const char *given, const char *env, const char *name,
		   char *out, size_t len);
/* The result record's "schema": bumped when a field changes meaning or goes. */
#define RUN_RECORD_SCHEMA "husk.run/1"
/* Write the JSON result record, one line with its '\n', to f. */
void run_record_json(FILE *f, const struct run_result *r);

#endif
