/*
 * run_int: what the parts of `husk run` share. Internal to run*.c.
 *
 * `husk run` is two processes (three with --net egress). The supervisor
 * (run.c) keeps every host privilege and resource: the tap and its eBPF
 * filter, the DNS proxy's learned addresses (run_net.c), the cgroup, the
 * user's files (run_files.c), the result. It forks one VM process
 * (run_vm.c) that opens /dev/kvm, the images and its sockets, enters the
 * jail (namespaces, pivot_root into the runtime directory, its own uid, no
 * capabilities, seccomp) and only then lets the guest run. If the guest
 * escapes into the VM process it finds an empty, read-only root, no
 * privileges and a short syscall list; the files it could hand out are tar
 * streams the supervisor extracts with its own checks.
 *
 * Supervisor and VM process talk over one SOCK_SEQPACKET pair (the chan_*
 * messages) and a shared anonymous mapping (struct run_shared) where the VM
 * process records how the job went; the supervisor reads it after the VM
 * process exited.
 * With --net egress the DNS proxy runs in a third, confined process of its
 * own (dns_helper.h) that asks the supervisor to open each address.
 */
#ifndef HUSK_RUN_INT_H
#define HUSK_RUN_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <stddef.h>

#include "sandbox/cgroup.h"
#include "cli_run.h"
#include "net/netpool.h"
#include "machine/phase.h"
#include "run/run.h"

/*
 * The largest chan message, header included. A larger one is an error on
 * either side (SOCK_SEQPACKET would silently cut it).
 */
#define RUN_CHAN_MAX (sizeof(struct chan_hdr) + 64 * 1024)

/* Supervisor -> VM process. */
enum chan_down {
	CHAN_GO = 1,		/* the VM process is in its cgroup: go on */
	CHAN_STOP,		/* stop the VM; payload: the reason (text) */
	CHAN_RESIZE,		/* the job's terminal: idx unused, u16 rows, u16 cols */
};

/* VM process -> supervisor. */
enum chan_up {
	CHAN_GET_DATA = 16,	/* idx, then bytes of that --get's tar stream */
	CHAN_GET_END,		/* idx: that stream is complete */
	CHAN_READY,		/* the job started: boot (or restore) and set-up are over */
	CHAN_MADE,		/* KVM_CREATE_VM returned: the VM process may change cgroup */
};

struct chan_hdr {
	uint8_t type;
	uint8_t idx;
	uint8_t pad[2];
};

/*
 * CHAN_GO: the VM process is in its cgroup, and this is the identity its
 * jail takes (decided while it built the VM).
 */
struct chan_go {
	struct chan_hdr h;
	uint8_t jail;			/* full jail: enter it as uid/gid */
	uint8_t pad[3];
	uint32_t uid, gid;
};

/*
 * One message from the channel (run_chan.c): its length (a header at
 * least), 0 when none is waiting, or -EPIPE (the other end is gone),
 * -EMSGSIZE (longer than cap: refused, not cut), -EPROTO (shorter than a
 * header), -errno.
 */
ssize_t run_chan_recv(int fd, void *buf, size_t cap);

/*
 * How the job went, as the VM process saw it. The supervisor reads it once
 * the VM process is gone and trusts none of it: a VM process the guest took
 * over writes what it likes here. run_report_import() checks every field
 * into the run_result; only plain integers and char arrays, so no value
 * can be an invalid representation.
 */
struct run_vm_report {
	uint8_t job_started, job_exited, timed_out, jailed;
	uint8_t stdout_open_line;	/* the job's last stdout byte was not '\n' */
	uint32_t job_code;		/* 0..255 when the job exited */
	uint32_t job_signal;		/* 1..64 when a signal killed it, else 0 */
	uint64_t user_us, sys_us, maxrss_kib;
	uint64_t stdout_bytes, stderr_bytes, stdout_dropped, stderr_dropped;
	uint32_t reason;		/* enum vm_stop_reason */
	uint32_t signal;		/* the signal that stopped the VM process */
	char error[512];
	char console_tail[CONSOLE_TAIL_MAX];	/* after a panic or crash, else "" */
	/* Microseconds since husk's start; -1 when a phase was not reached. */
	int64_t t_first_run, t_init, t_job_start, t_job_end, t_exit;
	int64_t t_restored;		/* a template's state was set on the new VM */
	int64_t guest_steps[IS_NR];	/* guest-init's marks, guest us; -1 none */
	/* template create: what the VM process saved. */
	uint8_t saved;
	uint32_t nr_devices;
	uint32_t devices[8];		/* virtio device ids in slot order */
	uint64_t mem_data;		/* guest RAM bytes written to the image */
};

/* Shared by the two processes (an anonymous MAP_SHARED mapping). */
struct run_shared {
	struct run_vm_report vm;	/* written by the VM process */
	uint64_t put_len[RUN_MAX_PUTS];	/* by the supervisor: bytes of each --put stream */
	char seccomp_report[256];	/* by the VM process's SIGSYS handler */
	struct phase_log phases;	/* each mark by one of the two */
};

/*
 * Copy the VM process's report into r, clamped: out-of-range numbers become
 * "not known", strings are cut and NUL-terminated, timings that are not
 * -1 or within [0, elapsed_us] become -1. Pure, for the unit tests.
 */
void run_report_import(struct run_result *r, const struct run_vm_report *v,
		       int64_t elapsed_us);

/* What the VM process gets from the supervisor. */
struct run_vm_args {
	const struct run_opts *o;
	struct run_shared *sh;
	uint64_t start;			/* husk's start, monotonic us */
	const char *kernel, *rootfs;
	const char *root;		/* runtime directory, becomes "/" */
	int chan_fd;
	int xfd;			/* -1, or husk serve's end of a session (SOCK_SEQPACKET) */
	int hold_fd;			/* -1, or --hold-fd: the job goes when it is readable */
	int put_fd;			/* -1 or every --put stream back to back */
	int console_fd;			/* -1: discard */
	int tap_fd;			/* -1: no NIC */
	uint8_t mac[6];
	const struct netpool_lease *lease;	/* NULL without --net egress */
	/* Templates. */
	int tpl_state_fd;		/* -1, or a memfd: the template's checked state file */
	int tpl_mem_fd;			/* -1, or its memory image, read-only */
	/* -1, or the kernel and root image the supervisor checked: read these, not the paths. */
	int kernel_fd, rootfs_fd;
	bool snapshot;			/* template create: save at guest-init's HELLO */
	int snap_state_fd, snap_mem_fd;	/* where to save (the temporary template) */
};

/* The VM process's whole life; returns its exit status. */
int run_vm_main(const struct run_vm_args *a);

/* ---- run_files.c: --put streams and --get staging (supervisor) ---- */

struct run_get {
	int dirfd;			/* the user's target directory */
	int tmpfd;			/* private staging directory inside it */
	char tmpname[64];
	struct tar_extract *x;
	bool complete;
};

struct run_files {
	const struct run_opts *o;
	struct run_get gets[RUN_MAX_GETS];
	int put_fd;
};

void run_files_init(struct run_files *f, const struct run_opts *o);
/* Open and stage every --get target; clears stale staging of dead husks. */
int run_files_open_gets(struct run_files *f);
/* Build every --put stream into one unlinked file under dir. */
int run_files_build_puts(struct run_files *f, const char *dir, uint64_t *lens);
/*
 * Bytes of --get idx from the VM process, extracted with about budget bytes
 * of inflated work at most: returns the bytes consumed (the caller passes
 * the rest again later, and calls with n = 0 while run_files_get_busy()),
 * or -errno, which ends the run.
 */
ssize_t run_files_get_data(struct run_files *f, unsigned idx, const void *p, size_t n,
			   size_t budget);
bool run_files_get_busy(const struct run_files *f, unsigned idx);
int run_files_get_end(struct run_files *f, unsigned idx);
/*
 * Commit (all or nothing per target) when asked, else discard; frees.
 * True when files were committed; a failed commit leaves its reason in
 * husk_lasterr().
 */
bool run_files_close(struct run_files *f, bool commit);

/* ---- run_template.c: templates (supervisor) ---- */

#include "template/template.h"

struct run_tpl {
	int dirfd;
	/* husk run --template: the template being restored */
	struct template t;
	bool open;
	int state_memfd;		/* its checked state, sealed, for the VM process */
	/* The images checked (restore: the root) or digested (create), for the VM process. */
	int kernel_fd, rootfs_fd;
	/* husk template create */
	struct template_new n;
	struct template_meta meta;
	uint8_t key[SNAP_KEY_LEN];	/* the template directory's, to seal it */
	bool creating;			/* not committed yet: abort removes it */
};
void run_tpl_init(struct run_tpl *T);
/*
 * Open o->template_name for a restore and check it; o gets the template's
 * machine (memory, vCPUs), rootfs the image path the VM must use. -errno.
 */
int run_tpl_open(struct run_tpl *T, struct run_opts *o, char *rootfs, size_t len);
/* Start making o->template_name from these images (digests computed here). */
int run_tpl_begin(struct run_tpl *T, const struct run_opts *o, const char *kernel,
		  const char *rootfs);
/* The VM process saved the VM: check, complete and commit the template. */
int run_tpl_finish(struct run_tpl *T, const struct run_vm_report *rep,
		   struct run_result *r);
/* Close; a template that was not finished is removed. */
void run_tpl_close(struct run_tpl *T);

/* ---- run_net.c: --net egress (supervisor) ---- */

struct run_egress;
/* Slot, tap, addresses, filter, DNS proxy. *tap_fd is for the VM process. */
int run_net_setup(struct run_egress **np, const struct run_opts *o, int *tap_fd,
		  uint8_t mac[6], const struct netpool_lease **lease);
/* fd to poll for filter events (anomalies), -1 if none. */
int run_net_events_fd(struct run_egress *n);
/* Read events; returns true when the filter wants the VM killed (why in out). */
bool run_net_poll(struct run_egress *n, char *why, size_t len);
/* fd to poll for the host's address changes, -1 if none. */
int run_net_addr_fd(struct run_egress *n);
/*
 * Deny the host's new addresses (bounded work per call); true when that
 * failed and the VM must be stopped (why in out).
 */
bool run_net_addr_poll(struct run_egress *n, char *why, size_t len);
/*
 * The DNS proxy's helper process, once the VM's cgroup exists (cg: NULL if
 * none): it joins it. Fails the run if the helper cannot be confined.
 */
int run_net_dns_start(struct run_egress *n, const struct husk_cgroup *cg);
/* fd to poll for the helper's requests and the expiry tick, -1 if none. */
int run_net_dns_fd(struct run_egress *n);
/* Serve what is ready there: bounded, never blocks. */
void run_net_dns_handle(struct run_egress *n);
/* Remove everything; fills the network part of r. */
void run_net_teardown(struct run_egress *n, struct run_result *r);
/* Replace the VM's --allow/--deny rules (fail closed on error: stop the VM). */
int run_net_set_rules(struct run_egress *n, const struct run_allow *allow, unsigned na,
		      const struct run_deny *deny, unsigned nd);
/* Replace its --allow-host list (a new DNS helper). */
int run_net_set_hosts(struct run_egress *n, char *const *hosts, unsigned nh);
/*
 * --policy-fd readable: one change of the rules, answered on fd (run_policy.c).
 * Returns 0, -1 when fd is done (close it), 1 when the VM must stop (why).
 */
int run_policy_handle(int fd, struct run_egress *n, struct run_result *r, uint64_t at_ms,
		      char *why, size_t len);
/* Rules as the lists of husk serve's policy ({"allow","allow_host","deny"}). */
struct json_t *run_rules_json(const struct run_allow *allow, unsigned na,
			      const struct run_deny *deny, unsigned nd,
			      const char *const *hosts, unsigned nh);
/* The rules in force. */
void run_net_rules(const struct run_egress *n, const struct run_allow **allow, unsigned *na,
		   const struct run_deny **deny, unsigned *nd, char *const **hosts,
		   unsigned *nh);
/* Remove taps and slot leftovers of husks that died (at start). */
void run_net_clean_stale(void);

#endif
