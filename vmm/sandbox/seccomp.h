/*
 * seccomp: per-thread system call allowlists for the husk process, defence
 * in depth behind the device emulation a hostile guest talks to.
 *
 * Every thread kind gets its own short list (seccomp.c says why each call
 * is there), with argument checks where they matter: ioctl request numbers,
 * no PROT_EXEC for mmap/mprotect, AF_UNIX only for socket, tgkill only to
 * this process with the vCPU kick signal. Only the host ABI's calls pass
 * (x86_64 or arm64): i386 (int 0x80) and x32 numbers on x86_64, AArch32
 * ones on arm64, are refused whatever the mode.
 *
 * Contract:
 * - A thread calls seccomp_install() for itself (filters are per thread, no
 *   TSYNC) before it does anything the guest can influence: vCPU and event
 *   loop threads first thing in their start routine, after setting their
 *   signal mask; the main thread after vm_start(). Threads it creates later
 *   inherit the filter, so create every thread before confining its parent.
 * - A forbidden call raises SIGSYS. The process-wide handler writes
 *   "husk: seccomp: <kind> thread made a forbidden system call: <name> (nr N)"
 *   to fd 2, copies it (without "husk: " and the newline) into the buffer
 *   given to seccomp_set_report(), and ends the whole process with status
 *   128 + SIGSYS. seccomp_install() unblocks SIGSYS in the calling thread:
 *   a blocked SIGSYS would kill without a word.
 * - HUSK_SECCOMP in the environment: unset or "on" refuses (the above);
 *   "log" lets forbidden calls through and has the kernel log them (audit/
 *   dmesg), for finding a missing call; "off" installs nothing and warns on
 *   stderr once.
 * - Installing pins glibc malloc's trim and mmap thresholds: trimming a
 *   thread's heap would otherwise read /proc/sys/vm/overcommit_memory, an
 *   open() no thread may make.
 */
#ifndef HUSK_SECCOMP_H
#define HUSK_SECCOMP_H

#include <linux/filter.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum seccomp_kind {
	SECCOMP_KIND_VCPU,		/* KVM_RUN loop and exit handling */
	SECCOMP_KIND_EVLOOP,		/* device event loop (evloop.c) */
	SECCOMP_KIND_BOOT_MAIN,		/* husk boot's main thread after vm_start() */
	SECCOMP_KIND_RUN_VM_MAIN,	/* husk run's VM process main thread after vm_start() */
	SECCOMP_KIND_DNS_HELPER,	/* the DNS helper process (dns_helper.c), its one thread */
	SECCOMP_KIND_TEMPLATE_MAIN,	/* husk template create's VM process main thread */
	SECCOMP_KIND_METRICS,		/* husk-metrics (husk serve's HTTP side), every thread */
	SECCOMP_KIND__COUNT,
};

/* What HUSK_SECCOMP asks for. */
enum seccomp_env {
	SECCOMP_ENV_ON,			/* forbidden calls raise SIGSYS */
	SECCOMP_ENV_LOG,		/* forbidden calls are allowed and logged */
	SECCOMP_ENV_OFF,		/* no filters */
};

/*
 * Confine the calling thread to kind's list (as HUSK_SECCOMP says): sets
 * no_new_privs, installs the SIGSYS handler, unblocks SIGSYS here and loads
 * the filter. -errno with husk_seterr() on failure; 0 with "off".
 */
int seccomp_install(enum seccomp_kind kind);

/*
 * Where the SIGSYS handler also puts its message (NUL-terminated, cut to
 * len - 1 bytes), e.g. shared memory a supervisor reads after husk died.
 * NULL to stop. The first forbidden call wins if several race.
 */
void seccomp_set_report(char *buf, size_t len);

/*
 * HUSK_SECCOMP, parsed; an unknown value warns once and means "on". "log"
 * and "off" take effect only while seccomp_env_unlocked: in a debug build
 * (HUSK_DEBUG_BUILD), under husk run --no-jail, or in the unit tests;
 * otherwise seccomp_env() says "on" and seccomp_env_check() refuses them.
 */
extern bool seccomp_env_unlocked;
enum seccomp_env seccomp_env(void);
/* 0, or -EPERM with the reason when HUSK_SECCOMP asks for what is locked. */
int seccomp_env_check(void);

/* "vCPU", "device event loop", ... for messages. */
const char *seccomp_kind_name(enum seccomp_kind kind);

/* The host ABI's name of a system call number (x86_64 or arm64), or NULL. */
const char *seccomp_syscall_name(long nr);

/* How many distinct system calls kind's list lets through (any arguments). */
unsigned seccomp_nr_allowed(enum seccomp_kind kind);

/*
 * Build kind's filter into out[max] (for tests and inspection). log: the
 * default action is SECCOMP_RET_LOG instead of SECCOMP_RET_TRAP. Returns
 * the instruction count or -E2BIG.
 */
int seccomp_build(enum seccomp_kind kind, int log, struct sock_filter *out, unsigned max);

#endif
