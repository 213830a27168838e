/*
 * cgroup: one control group per VM, on cgroup v2, v1 or a mix of both.
 *
 * Purpose: bound what one VM can take from the host (CPU time, memory,
 * processes), make sure guest RAM is never swapped to disk, and make sure
 * nothing a VM started outlives it, even when husk itself crashes.
 *
 * Contract:
 * - Hierarchies are found in /proc/self/mountinfo, never at hard-coded
 *   paths. Each controller (cpu, memory, pids; cpuacct for accounting on v1)
 *   is taken from cgroup v2 when the v2 root lists it in cgroup.controllers,
 *   else from the v1 hierarchy that has it mounted. A VM therefore gets one
 *   directory on v2 and/or one per v1 hierarchy in use, each named
 *   <mount>/husk/<name>, where <name> is
 *       vm-<pid>-<starttime>-<seq>-<pidns>
 *   <pid> and <starttime> (field 22 of /proc/<pid>/stat) identify the husk
 *   process that owns the group, <seq> counts groups made by that process,
 *   <pidns> is the inode of its pid namespace. cgroup_clean_stale() uses the
 *   owner identity to find groups a crashed husk left behind.
 * - The shared husk/ parent is created on demand and never removed (other
 *   husk processes may be creating groups in it at the same moment).
 * - On v2, controllers are enabled in cgroup.subtree_control of the mount
 *   root and of husk/; processes are only ever placed in the vm-* leaves
 *   ("no internal processes" rule).
 * - Limits written (only those that are non-zero in struct cgroup_limits):
 *     v2: cpu.max "<milli*100> 100000", memory.max, pids.max
 *     v1: cpu.cfs_period_us 100000 + cpu.cfs_quota_us, memory.limit_in_bytes
 *         (+ memory.memsw.limit_in_bytes, same value, when swap accounting
 *         exists), pids.max
 *   and whenever the memory controller is used, however the limit is set:
 *     v2: memory.swap.max 0 (when the kernel has swap), v1: memory.swappiness 0.
 * - Memory is charged to the cgroup a process is in when it allocates, and
 *   charges never move with it: attach the VM process before it maps guest RAM.
 * - Every function returns 0 (or a count) or -errno with husk_seterr()
 *   naming the file or path involved. Not being root, a read-only cgroupfs
 *   or no usable hierarchy all fail cleanly; the caller decides whether to
 *   run without a cgroup.
 * - Not thread-safe with respect to cgroup_set_test_hooks(); everything else
 *   may be called from any thread.
 */
#ifndef HUSK_CGROUP_H
#define HUSK_CGROUP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* Defaults for a VM; see cgroup_limits_for_vm(). */
#define CGROUP_DEFAULT_CPU_MILLI	500			/* half a CPU */
#define CGROUP_DEFAULT_GUEST_RAM	(512ull << 20)
/* Host memory beyond guest RAM: fixed part + 1/32 of RAM, at most CAP. */
#define CGROUP_MEM_OVERHEAD_BASE	(64ull << 20)
#define CGROUP_MEM_OVERHEAD_CAP		(256ull << 20)
/* Threads and processes: this many plus one per vCPU. */
#define CGROUP_PIDS_BASE		32

/* Accepted ranges of non-zero limits (0 always means "no limit"). */
#define CGROUP_CPU_MILLI_MIN		10	/* 1 ms quota per 100 ms period */
#define CGROUP_MEM_MIN			(4ull << 20)
#define CGROUP_MEM_MAX			(1ull << 50)
#define CGROUP_PIDS_MAX			4194304	/* the kernel's PID_MAX_LIMIT */

#define CGROUP_CPU_PERIOD_US		100000
#define CGROUP_PATH_MAX			512
#define CGROUP_NAME_MAX			80
#define CGROUP_MAX_DIRS			5	/* v2 + up to four v1 hierarchies */

struct cgroup_limits {
	unsigned cpu_milli;	/* CPU quota in 1/1000 CPU: 500 = half a CPU; 0 = none.
				   At most 1000 * online CPUs. */
	uint64_t mem_bytes;	/* memory limit; 0 = none */
	uint64_t pids;		/* processes + threads; 0 = none */
};

/* Which controllers a directory of the group carries (bit masks). */
#define CGROUP_CPU	(1u << 0)
#define CGROUP_CPUACCT	(1u << 1)
#define CGROUP_MEMORY	(1u << 2)
#define CGROUP_PIDS	(1u << 3)

struct husk_cgroup_dir {
	char path[CGROUP_PATH_MAX];	/* the VM's directory; "" once removed */
	unsigned ctrls;			/* CGROUP_* handled through it */
	bool v2;
};

struct husk_cgroup {
	char name[CGROUP_NAME_MAX];	/* vm-<pid>-<start>-<seq>-<pidns> */
	unsigned ndirs;
	struct husk_cgroup_dir dir[CGROUP_MAX_DIRS];
};

struct cgroup_usage {
	unsigned have;			/* CGROUP_USAGE_* of the fields below that are valid */
	uint64_t cpu_us;		/* CPU time used by every thread in the group */
	uint64_t cpu_throttled_us;	/* time the quota held the group back */
	uint64_t mem_peak_bytes;	/* high-water mark (v2 before 5.19: current usage) */
	uint64_t oom_kills;		/* processes the memory limit's OOM killer took */
};
#define CGROUP_USAGE_CPU	(1u << 0)
#define CGROUP_USAGE_THROTTLED	(1u << 1)
#define CGROUP_USAGE_MEM_PEAK	(1u << 2)
#define CGROUP_USAGE_OOM	(1u << 3)

/*
 * Default limits for a VM with guest_ram bytes of RAM (0 = the default
 * 512 MiB) and vcpus vCPUs: half a CPU, guest RAM + bounded overhead,
 * CGROUP_PIDS_BASE + vcpus tasks.
 */
void cgroup_limits_for_vm(struct cgroup_limits *l, uint64_t guest_ram, unsigned vcpus);

/* -EINVAL/-ERANGE with a message if a limit is outside the ranges above. */
int cgroup_check_limits(const struct cgroup_limits *l);

/*
 * Create a fresh group for a VM of the calling process and write the limits.
 * Every controller with a non-zero limit must be available (-ENOTSUP names
 * the missing one); -ENOENT when no hierarchy at all is mounted. On failure
 * nothing is left behind and *cg is empty (cgroup_destroy() is a no-op).
 */
int cgroup_create(struct husk_cgroup *cg, const struct cgroup_limits *l);

/* Change the CPU quota of a group that has a cpu controller. */
int cgroup_set_cpu(const struct husk_cgroup *cg, unsigned cpu_milli);

/* Move process pid (all its threads) into every directory of the group. */
int cgroup_attach(const struct husk_cgroup *cg, pid_t pid);

/*
 * Read accounting before cgroup_destroy(). Fields that this kernel or
 * layout cannot provide are left out of u->have; returns 0 even then.
 */
int cgroup_read_usage(const struct husk_cgroup *cg, struct cgroup_usage *u);

/*
 * Kill whatever is still in the group (cgroup.kill on v2 when the kernel has
 * it, and SIGKILL to every live pid in cgroup.procs until none is left,
 * within a bounded wait), then remove its directories. Never signals the
 * calling process. Idempotent: directories already removed are skipped, so
 * it may be called again after a failure (-EBUSY) and on an empty *cg.
 */
int cgroup_destroy(struct husk_cgroup *cg);

/*
 * Remove husk/vm-* groups, in every hierarchy, whose owner (pid + start
 * time, in our pid namespace) no longer runs, killing what is left inside.
 * Live owners' groups, groups from other pid namespaces and directories
 * not named like ours are left alone. Returns the number of groups removed
 * (a group spanning several v1 hierarchies counts once); failures to remove
 * one are reported with husk_msg() and skipped. -errno only if mountinfo
 * cannot be read.
 */
int cgroup_clean_stale(void);

/* "v2", "v1", "mixed" (v2 and v1 directories) or "none", for reports. */
const char *cgroup_mode_name(const struct husk_cgroup *cg);

/*
 * ---- Test hook (unit tests only) ----
 * Read mountinfo from a file and prefix every mount point with root, so a
 * fake tree in a temporary directory stands in for cgroupfs. There is no
 * kernel behind such a tree: populate(dir) is called right after each mkdir
 * to create the files the kernel would provide, and before each rmdir the
 * regular files in the directory are unlinked. Pass NULL to go back to the
 * real system. /proc is always the real one.
 */
struct cgroup_test_hooks {
	const char *mountinfo;
	const char *root;
	void (*populate)(const char *dir);
};
void cgroup_set_test_hooks(const struct cgroup_test_hooks *h);

/*
 * Freeze (or thaw) the v2 group of the VM that the husk process owner,
 * started at start (field 22 of its stat), made in our pid namespace, and
 * wait (bounded) until the kernel reports it so; -ENOENT without such a
 * group, -ENOTSUP without cgroup v2. A frozen VM's vCPUs do not run; a
 * fatal signal still ends it.
 */
int cgroup_owned_freeze(pid_t owner, unsigned long long start, bool freeze);
/* 1 frozen, 0 not, -errno as above. */
int cgroup_owned_frozen(pid_t owner, unsigned long long start);
/* Change the CPU quota of that group (husk oci update); -errno as above. */
int cgroup_owned_set_cpu(pid_t owner, unsigned long long start, unsigned cpu_milli);

#endif
