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

#include "cgroup.h"
#include "cli_run.h"
#include "netpool.h"
#include "run.h"

#define RUN_CHAN_MAX (64 * 1024 + 16)	/* largest chan message */

/* Supervisor -> VM process. */
enum chan_down {
	CHAN_GO = 1,		/* the VM process is in its cgroup: go on */
	CHAN_STOP,		/* stop the VM; payload: the reason (text) */
};

/* VM process -> supervisor. */
enum chan_up {
	CHAN_GET_DATA = 16,	/* idx, then bytes of that --get's tar stream */
	CHAN_GET_END,		/* idx: that stream is complete */
};

struct chan_hdr {
	uint8_t type;
	uint8_t idx;
	uint8_t pad[2];
};

/* Written by the VM process, read by the supervisor once it exited. */
struct run_shared {
	struct run_result r;
	uint64_t put_len[RUN_MAX_PUTS];	/* bytes of each --put stream in put_fd */
	char seccomp_report[256];	/* set by the SIGSYS handler */
	bool jailed;			/* the VM process entered the full jail */
};

/* What the VM process gets from the supervisor. */
struct run_vm_args {
	const struct run_opts *o;
	struct run_shared *sh;
	uint64_t start;			/* husk's start, monotonic us */
	const char *kernel, *rootfs;
	const char *root;		/* runtime directory, becomes "/" */
	int chan_fd;
	int put_fd;			/* -1 or every --put stream back to back */
	int console_fd;			/* -1: discard */
	int tap_fd;			/* -1: no NIC */
	uint8_t mac[6];
	const struct netpool_lease *lease;	/* NULL without --net egress */
	bool jail;			/* full jail (root and not --no-jail) */
	uid_t uid;
	gid_t gid;
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
/* Bytes of --get idx from the VM process; -errno ends the run. */
int run_files_get_data(struct run_files *f, unsigned idx, const void *p, size_t n);
int run_files_get_end(struct run_files *f, unsigned idx);
/*
 * Commit (all or nothing per target) when asked, else discard; frees.
 * True when files were committed; a failed commit leaves its reason in
 * husk_lasterr().
 */
bool run_files_close(struct run_files *f, bool commit);

/* ---- run_net.c: --net egress (supervisor) ---- */

struct run_egress;
/* Slot, tap, addresses, filter, DNS proxy. *tap_fd is for the VM process. */
int run_net_setup(struct run_egress **np, const struct run_opts *o, int *tap_fd,
		  uint8_t mac[6], const struct netpool_lease **lease);
/* fd to poll for filter events (anomalies), -1 if none. */
int run_net_events_fd(struct run_egress *n);
/* Read events; returns true when the filter wants the VM killed (why in out). */
bool run_net_poll(struct run_egress *n, char *why, size_t len);
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
/* Remove taps and slot leftovers of husks that died (at start). */
void run_net_clean_stale(void);

#endif
