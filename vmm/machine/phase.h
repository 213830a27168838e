/*
 * phase: where husk's own time goes on the cold path, from the process's
 * start to the guest's first instruction. Each step marks when it ended,
 * in microseconds since husk's start; the record (JSON "phases_us") and
 * tools/bench-phases turn the marks into a table of step durations.
 *
 * One log per `husk` invocation. `husk run` puts it in the mapping it
 * shares with its VM process, so the supervisor's steps and the VM
 * process's land side by side; each mark has exactly one writer, and the
 * reader clamps every value (phase_import) because a VM process the guest
 * took over writes what it likes.
 */
#ifndef HUSK_PHASE_H
#define HUSK_PHASE_H

#include <stdint.h>
#include <stdio.h>

enum phase {
	/*
	 * The one duration, not a mark: how long exec and dynamic linking took
	 * before main(), when the spawner says when it forked.
	 */
	PH_EXEC,
	PH_OPTIONS,		/* command line parsed */
	/* husk run's supervisor. */
	PH_SUP_PREPARE,		/* images found, runtime dir, files, console */
	PH_SUP_NET,		/* tap, eBPF filter, DNS proxy */
	PH_SUP_CGROUP,		/* the VM's cgroup created */
	PH_SUP_JAIL,		/* uid leased, runtime dir prepared */
	PH_SUP_DNS,		/* the DNS helper started (--net egress) */
	PH_SUP_FORK,		/* the VM process forked into its namespaces */
	PH_SUP_GO,		/* the VM process moved into its cgroup and let go */
	/* The VM (husk boot, or husk run's VM process). */
	PH_KVM_OPEN,		/* /dev/kvm opened, capabilities and CPUID read */
	PH_VM_CREATE,		/* KVM_CREATE_VM, irqchip, PIT */
	PH_MEMORY,		/* guest RAM mapped and registered */
	PH_DEVICES,		/* virtio devices and their images opened */
	PH_IMAGES,		/* kernel and initrd in guest RAM (while the VM is made) */
	PH_LOAD,		/* then command line, boot tables, entry registers */
	PH_VCPUS,		/* vCPUs created (arm64: the GIC completed) */
	PH_RESTORE,		/* a template's state set on the new VM */
	PH_JAIL,		/* the VM process entered its jail */
	PH_THREADS,		/* vCPU and device threads started */
	PH_SECCOMP,		/* the main thread's seccomp filter installed */
	PH_FIRST_RUN,		/* the first KVM_RUN entered */
	PH_NR
};

/*
 * CPU time (user and system, every thread) a process had used when it let
 * the guest go: husk run's supervisor at its go (PH_SUP_GO), and the VM
 * process, or husk boot, at the first KVM_RUN. Their sum is the VMM's CPU
 * cost of a cold start, the figure Firecracker states its bar in ("ready
 * within 8 CPU ms"); unlike the marks it does not depend on how the two
 * processes shared the host's CPUs.
 */
enum phase_cpu {
	PH_CPU_SUPERVISOR,
	PH_CPU_VM,
	PH_CPU_NR
};

struct phase_log {
	int64_t us[PH_NR];	/* -1: not reached */
	int64_t cpu_us[PH_CPU_NR];	/* -1: not taken */
};

/* Start recording into log (NULL stops); marks are relative to start_us. */
void phase_init(struct phase_log *log, uint64_t start_us);

/* Go on recording into log, with the marks taken so far. */
void phase_move(struct phase_log *log);

/* This step ended now. Safe from any thread; a no-op without a log. */
void phase_mark(enum phase p);

/* Record a mark taken elsewhere (us since start; negative = not reached). */
void phase_set(enum phase p, int64_t us);

/* The JSON key of a phase ("kvm_open", ...). */
const char *phase_name(enum phase p);

/* The log being recorded into, or NULL. */
const struct phase_log *phase_current(void);

/*
 * "phases_us":{"exec":N,...},"cpu_us":{"supervisor":N,"vm":N}: every phase
 * and CPU figure, null where not reached.
 */
void phase_json(FILE *f, const struct phase_log *log);

/*
 * Copy src into dst, keeping only marks in [0, elapsed_us] and CPU figures
 * a process could have used in that time on PHASE_MAX_CPUS CPUs; the rest
 * become -1. Pure, for the unit tests.
 */
#define PHASE_MAX_CPUS 64
void phase_import(struct phase_log *dst, const struct phase_log *src, int64_t elapsed_us);

/*
 * When the spawner gave HUSK_SPAWN_US (its CLOCK_MONOTONIC microseconds
 * just before it forked husk), the time exec and dynamic linking took
 * until main() at now_us; -1 when absent or implausible (later than now,
 * or more than 10 s before).
 */
int64_t phase_exec_us(const char *spawn_env, uint64_t now_us);

#endif
