/*
 * sandbox: the walls around the job inside the guest.
 *
 * The VM is the real boundary; these layers keep the job from undoing
 * guest-init's own set-up (mounts, clock, cgroup limits, the control
 * socket's peer) and from the kernel interfaces a job never needs:
 * its own namespaces (jobinit.c), a cgroup with memory and pids limits,
 * rlimits, no capabilities at all (bounding, ambient, inheritable, and a
 * non-root uid), no_new_privs so setuid binaries in the image cannot hand
 * any back, and a seccomp filter. The job's init gets the same walls
 * except that it keeps CAP_KILL under a uid of its own.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/sched.h>

#include "init.h"
#include "lib/util.h"

static int write_file(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n;
	int err;

	if (fd < 0)
		return husk_seterr(errno, "open %s: %s", path, strerror(errno));
	n = write(fd, s, strlen(s));
	err = errno;
	close(fd);
	if (n != (ssize_t)strlen(s))
		return husk_seterr(n < 0 ? err : EIO, "write '%s' to %s: %s", s, path,
				   strerror(n < 0 ? err : EIO));
	return 0;
}

/* ---- cgroup (PID 1 side) ---- */

int sandbox_cgroup_create(void)
{
	int err;

	/* The root cgroup may hold processes and delegate controllers at once. */
	err = write_file("/sys/fs/cgroup/cgroup.subtree_control", "+memory +pids");
	if (err)
		return err;
	if (mkdir(JOB_CGROUP, 0755) && errno != EEXIST)
		return husk_seterr(errno, "mkdir %s: %s", JOB_CGROUP, strerror(errno));
	return 0;
}

int sandbox_cgroup_limit(const struct job_spec *js)
{
	char v[32];
	int err;

	if (js->mem_limit) {
		snprintf(v, sizeof(v), "%llu", (unsigned long long)js->mem_limit);
		err = write_file(JOB_CGROUP "/memory.max", v);
		if (err)
			return err;
		/* Without swap this is moot, but never let the limit leak into swap. */
		write_file(JOB_CGROUP "/memory.swap.max", "0");
	}
	snprintf(v, sizeof(v), "%u", js->pids_limit);
	return write_file(JOB_CGROUP "/pids.max", v);
}

/*
 * cgroup.kill takes the whole cgroup and its descendants atomically (forks
 * in flight included); the procs walk covers a kernel without it.
 */
void sandbox_kill_cgroup(const char *cgroup)
{
	char path[128], line[32];
	FILE *f;
	long pid;

	snprintf(path, sizeof(path), "%s/cgroup.kill", cgroup);
	write_file(path, "1");
	snprintf(path, sizeof(path), "%s/cgroup.procs", cgroup);
	f = fopen(path, "re");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "%ld", &pid) == 1 && pid > 1)
			kill(pid, SIGKILL);
	if (f)
		fclose(f);
}

/*
 * Kill everything the job started, however it tried to escape: its cgroup
 * (sandbox_kill_cgroup). The job's init is outside the cgroup (it
 * has to report how the job ended): JOBINIT_KILL asks it to kill what is
 * left in its PID namespace, or the job's process group in test mode, where
 * there is no cgroup and may be no namespace. jobinit 0: it is gone.
 */
void sandbox_kill_job(pid_t jobinit)
{
	if (cfg.use_cgroup)
		sandbox_kill_cgroup(JOB_CGROUP);
	if (jobinit > 1)
		kill(jobinit, JOBINIT_KILL);
}

/* Processes of cgroup the OOM killer ended (memory.events), 0 if unknown. */
uint64_t sandbox_oom_kills(const char *cgroup)
{
	unsigned long long n = 0;
	char path[128], line[64];
	FILE *f;

	if (!cfg.use_cgroup)
		return 0;
	snprintf(path, sizeof(path), "%s/memory.events", cgroup);
	f = fopen(path, "re");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "oom_kill %llu", &n) == 1)
			break;
	if (f)
		fclose(f);
	return n;
}

/*
 * cgroup v2 lets a cgroup pass controllers to its children only while it
 * holds no process itself: in a session the job's cgroup holds none (each
 * exec has its own below it, the job's init stays outside), so its
 * children can have memory.events of their own.
 */
void sandbox_session_cgroup(void)
{
	if (cfg.use_cgroup && write_file(JOB_CGROUP "/cgroup.subtree_control", "+memory"))
		fprintf(stderr, "husk-init: %s (no OOM report per exec)\n", husk_lasterr());
}

/* ---- privileges ---- */

static int last_cap(void)
{
	int lo = 0, hi = 63, mid;

	/*
	 * The kernel's last capability: PR_CAPBSET_READ refuses (EINVAL) any
	 * past it. Not /proc/sys/kernel/cap_last_cap: the job's init reads it
	 * in its fresh /proc, whose first /proc/sys lookup cost every job's
	 * start 4-9 ms in the test host. Nothing valid: try them all.
	 */
	if (prctl(PR_CAPBSET_READ, 0, 0, 0, 0) < 0)
		return 63;
	while (lo < hi) {
		mid = (lo + hi + 1) / 2;
		if (prctl(PR_CAPBSET_READ, mid, 0, 0, 0) >= 0)
			lo = mid;
		else
			hi = mid - 1;
	}
	return lo;
}

/*
 * Become uid/gid without supplementary groups and with no capability but
 * keep (-1: none at all), in every set including the bounding set.
 */
static int become(uid_t uid, gid_t gid, int keep)
{
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct data[2];
	int cap, n = last_cap();

	for (cap = 0; cap <= n; cap++)
		if (cap != keep && prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) && errno != EINVAL)
			return husk_seterr(errno, "drop capability %d from the bounding set: %s",
					   cap, strerror(errno));
	if (setgroups(0, NULL))
		return husk_seterr(errno, "setgroups: %s", strerror(errno));
	if (setresgid(gid, gid, gid))
		return husk_seterr(errno, "setresgid %d: %s", (int)gid, strerror(errno));
	/* Leaving uid 0 clears the permitted and effective sets, unless kept. */
	if (keep >= 0 && prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0))
		return husk_seterr(errno, "PR_SET_KEEPCAPS: %s", strerror(errno));
	if (setresuid(uid, uid, uid))
		return husk_seterr(errno, "setresuid %d: %s", (int)uid, strerror(errno));
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) && errno != EINVAL)
		return husk_seterr(errno, "clear ambient capabilities: %s", strerror(errno));
	memset(data, 0, sizeof(data));
	if (keep >= 0) {
		data[keep / 32].permitted = 1u << (keep % 32);
		data[keep / 32].effective = 1u << (keep % 32);
	}
	if (syscall(SYS_capset, &hdr, data))
		return husk_seterr(errno, "set the capability sets: %s", strerror(errno));
	if (keep >= 0 && prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0))
		return husk_seterr(errno, "PR_SET_KEEPCAPS: %s", strerror(errno));
	return 0;
}

int sandbox_drop_user(void)
{
	int err = 0;

	if (cfg.drop_user)
		err = become(AGENT_UID, AGENT_GID, -1);
	if (!err && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		err = husk_seterr(errno, "PR_SET_NO_NEW_PRIVS: %s", strerror(errno));
	return err;
}

/*
 * Root in the guest, as a container engine gives it by default: uid 0 with
 * only a container's capabilities, every other one gone from the bounding
 * set too (an exec of uid 0 gets the bounding set), and no_new_privs.
 * Mounts, namespaces, modules and the clock stay the seccomp filter's.
 */
static int keep_root(void)
{
	static const int container_caps[] = {
		CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_FOWNER, CAP_FSETID, CAP_KILL, CAP_SETGID,
		CAP_SETUID, CAP_SETPCAP, CAP_NET_BIND_SERVICE, CAP_NET_RAW, CAP_SYS_CHROOT,
		CAP_MKNOD, CAP_AUDIT_WRITE, CAP_SETFCAP,
	};
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct data[2];
	uint64_t keep = 0;
	int cap, n = last_cap();

	for (size_t i = 0; i < ARRAY_SIZE(container_caps); i++)
		keep |= 1ull << container_caps[i];
	for (cap = 0; cap <= n; cap++)
		if (!(keep >> cap & 1) && prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) && errno != EINVAL)
			return husk_seterr(errno, "drop capability %d from the bounding set: %s",
					   cap, strerror(errno));
	if (setgroups(0, NULL))
		return husk_seterr(errno, "setgroups: %s", strerror(errno));
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) && errno != EINVAL)
		return husk_seterr(errno, "clear ambient capabilities: %s", strerror(errno));
	memset(data, 0, sizeof(data));
	for (int i = 0; i < 2; i++)
		data[i].permitted = data[i].effective = data[i].inheritable =
			(uint32_t)(keep >> (32 * i));
	if (syscall(SYS_capset, &hdr, data))
		return husk_seterr(errno, "set the capability sets: %s", strerror(errno));
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return husk_seterr(errno, "PR_SET_NO_NEW_PRIVS: %s", strerror(errno));
	return 0;
}

/* ---- seccomp ---- */

/*
 * The guest runs the host's arch (x86_64 or arm64); the job's calls must be
 * that ABI's. Anything else is killed: i386 and x32 on x86_64, AArch32 on
 * arm64 (a compat task of a kernel built with it).
 */
#if defined(__x86_64__)
#define JOB_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define JOB_AUDIT_ARCH AUDIT_ARCH_AARCH64
#else
#error "the job's seccomp filter is written for x86_64 and arm64"
#endif
/* ARG_LO() reads an argument's low half at its first bytes. */
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the job's seccomp filter assumes a little-endian ABI"
#endif

/*
 * Denied with EPERM: process inspection, mounts and namespaces, kernel
 * code and keyrings, the clock, raw I/O ports (x86 only: arm64 has no such
 * calls), swap, accounting, reboot, BPF/perf and userfaultfd (common
 * exploit building blocks), io_uring (its ops bypass this filter). Numbers
 * missing from old headers, or from the arch, are skipped.
 */
static const int denied[] = {
	__NR_ptrace, __NR_process_vm_readv, __NR_process_vm_writev,
	__NR_mount, __NR_umount2, __NR_pivot_root, __NR_chroot,
#ifdef __NR_move_mount
	__NR_open_tree, __NR_move_mount, __NR_fsopen, __NR_fsconfig,
	__NR_fsmount, __NR_fspick,
#endif
#ifdef __NR_mount_setattr
	__NR_mount_setattr,
#endif
	__NR_kexec_load, __NR_kexec_file_load,
	__NR_init_module, __NR_finit_module, __NR_delete_module,
	__NR_bpf, __NR_perf_event_open,
	__NR_keyctl, __NR_add_key, __NR_request_key,
	__NR_unshare, __NR_setns,
	__NR_reboot, __NR_swapon, __NR_swapoff, __NR_acct,
#ifdef __NR_iopl
	__NR_iopl, __NR_ioperm,
#endif
	__NR_settimeofday, __NR_clock_settime, __NR_clock_adjtime, __NR_adjtimex,
	__NR_userfaultfd,
#ifdef __NR_io_uring_setup
	__NR_io_uring_setup, __NR_io_uring_enter, __NR_io_uring_register,
#endif
};

/* clone() flags that create namespaces (CLONE_NEWTIME is clone3/unshare only). */
#define CLONE_NS_FLAGS (CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | \
			CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET)

enum { L_NEXT, L_ALLOW, L_EPERM, L_ENOSYS, L_KILL, L_SOCKET, L_INET, L_CLONE, L_COUNT };

/* A tiny assembler: jumps name labels, patched once every label is placed. */
struct bpf_prog {
	struct sock_filter f[128];
	unsigned char jt[128], jf[128];
	int label[L_COUNT];
	int n;
};

static void emit(struct bpf_prog *p, uint16_t code, uint32_t k, int jt, int jf)
{
	p->f[p->n] = (struct sock_filter)BPF_JUMP(code, k, 0, 0);
	p->jt[p->n] = jt;
	p->jf[p->n] = jf;
	p->n++;
}

static void place(struct bpf_prog *p, int l)
{
	p->label[l] = p->n;
}

static void link_prog(struct bpf_prog *p)
{
	int i;

	for (i = 0; i < p->n; i++) {
		if (p->jt[i] != L_NEXT)
			p->f[i].jt = p->label[p->jt[i]] - i - 1;
		if (p->jf[i] != L_NEXT)
			p->f[i].jf = p->label[p->jf[i]] - i - 1;
	}
}

#define ARG_LO(n) (offsetof(struct seccomp_data, args) + 8 * (n))	/* little-endian */

static int install_seccomp(void)
{
	struct bpf_prog p = { .n = 0 };
	struct sock_fprog fp;
	unsigned i;

	emit(&p, BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch), 0, 0);
	emit(&p, BPF_JMP | BPF_JEQ | BPF_K, JOB_AUDIT_ARCH, L_NEXT, L_KILL);
	emit(&p, BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr), 0, 0);
#ifdef __x86_64__
	/* x32 numbers would otherwise reach the same handlers past our checks. */
	emit(&p, BPF_JMP | BPF_JGE | BPF_K, __X32_SYSCALL_BIT, L_KILL, L_NEXT);
#endif
	for (i = 0; i < ARRAY_SIZE(denied); i++)
		emit(&p, BPF_JMP | BPF_JEQ | BPF_K, denied[i], L_EPERM, L_NEXT);
#ifdef __NR_clone3
	/* clone3 passes flags in memory BPF cannot read: ENOSYS makes libc use clone. */
	emit(&p, BPF_JMP | BPF_JEQ | BPF_K, __NR_clone3, L_ENOSYS, L_NEXT);
#endif
	emit(&p, BPF_JMP | BPF_JEQ | BPF_K, __NR_socket, L_SOCKET, L_NEXT);
	emit(&p, BPF_JMP | BPF_JEQ | BPF_K, __NR_clone, L_CLONE, L_ALLOW);

	place(&p, L_SOCKET);
	emit(&p, BPF_LD | BPF_W | BPF_ABS, ARG_LO(0), 0, 0);
	emit(&p, BPF_JMP | BPF_JEQ | BPF_K, AF_PACKET, L_EPERM, L_NEXT);
	emit(&p, BPF_JMP | BPF_JEQ | BPF_K, AF_NETLINK, L_EPERM, L_NEXT);
	emit(&p, BPF_JMP | BPF_JEQ | BPF_K, AF_INET, L_INET, L_NEXT);
	emit(&p, BPF_JMP | BPF_JEQ | BPF_K, AF_INET6, L_INET, L_ALLOW);
	place(&p, L_INET);
	emit(&p, BPF_LD | BPF_W | BPF_ABS, ARG_LO(1), 0, 0);
	emit(&p, BPF_ALU | BPF_AND | BPF_K, 0xf, 0, 0);	/* strip NONBLOCK/CLOEXEC */
	emit(&p, BPF_JMP | BPF_JEQ | BPF_K, SOCK_RAW, L_EPERM, L_ALLOW);

	place(&p, L_CLONE);
	emit(&p, BPF_LD | BPF_W | BPF_ABS, ARG_LO(0), 0, 0);
	emit(&p, BPF_JMP | BPF_JSET | BPF_K, CLONE_NS_FLAGS, L_EPERM, L_ALLOW);

	place(&p, L_ALLOW);
	emit(&p, BPF_RET | BPF_K, SECCOMP_RET_ALLOW, 0, 0);
	place(&p, L_EPERM);
	emit(&p, BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM, 0, 0);
	place(&p, L_ENOSYS);
	emit(&p, BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS, 0, 0);
	place(&p, L_KILL);
	emit(&p, BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS, 0, 0);
	link_prog(&p);

	fp.len = p.n;
	fp.filter = p.f;
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fp, 0, 0))
		return husk_seterr(errno, "install the seccomp filter: %s", strerror(errno));
	return 0;
}

/* ---- the job's child ---- */

/*
 * husk's default for a resource, unless the job gave its own (set after
 * these): a hard limit lowered here could not be raised again.
 */
static int set_limit(const struct job_spec *js, int res, const char *name, rlim_t v)
{
	struct rlimit rl = { v, v };

	for (size_t i = 0; i < js->nrlimits; i++)
		if (js->rlimits[i].resource == (uint32_t)res)
			return 0;
	if (setrlimit(res, &rl))
		return husk_seterr(errno, "setrlimit %s %llu: %s", name,
				   (unsigned long long)v, strerror(errno));
	return 0;
}

/*
 * The job's stdio pipes are root's, and a pipe opened again through
 * /proc/self/fd (/dev/stdout, /dev/stderr) checks its owner: they go to the
 * agent user, or `echo >/dev/stderr` fails. Pipes only, never a device.
 */
static void give_stdio(void)
{
	struct stat st;
	int fd;

	for (fd = 0; fd < 3; fd++)
		if (!fstat(fd, &st) && S_ISFIFO(st.st_mode) && fchown(fd, AGENT_UID, AGENT_GID))
			husk_debug("give stdio %d to the agent user: %s", fd, strerror(errno));
}

/*
 * Born in the cgroup (clone3's CLONE_INTO_CGROUP, Linux 5.7) rather than
 * moved there: a move takes the cgroup core's thread-group lock for
 * writing, which waits for an RCU grace period, about 30 ms of every job's
 * start in the test host. A kernel without it gets fork() and the move.
 */
pid_t sandbox_fork(const char *cgroup, bool *placed)
{
	struct clone_args ca = { .flags = CLONE_INTO_CGROUP, .exit_signal = SIGCHLD };
	long pid;
	int fd;

	*placed = false;
	if (!cfg.use_cgroup || !cgroup)
		return fork();
	fd = open(cgroup, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return fork();
	ca.cgroup = fd;
	/* Fork-like (no new stack); the child's glibc keeps the parent's cached tid. */
	pid = syscall(SYS_clone3, &ca, sizeof(ca));
	if (pid < 0 && (errno == ENOSYS || errno == E2BIG || errno == EINVAL)) {
		close(fd);
		return fork();
	}
	if (pid < 0) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	close(fd);
	*placed = true;
	return pid;
}

int sandbox_enter(const struct job_spec *js, const char *cgroup)
{
	char path[128];
	int err;

	if (cfg.use_cgroup && cgroup) {
		snprintf(path, sizeof(path), "%s/cgroup.procs", cgroup);
		err = write_file(path, "0");
		if (err)
			return err;
	}
	/* Per-uid process count: only meaningful once we are the agent user. */
	if (cfg.drop_user && !js->root) {
		give_stdio();
		err = set_limit(js, RLIMIT_NPROC, "RLIMIT_NPROC", js->pids_limit);
		if (err)
			return err;
	}
	err = set_limit(js, RLIMIT_NOFILE, "RLIMIT_NOFILE", js->nofile);
	if (!err)
		err = set_limit(js, RLIMIT_FSIZE, "RLIMIT_FSIZE",
				js->fsize == UINT64_MAX ? RLIM_INFINITY : js->fsize);
	if (!err)
		err = set_limit(js, RLIMIT_CORE, "RLIMIT_CORE", 0);
	/* The job's own, over those; set while still root, so any hard limit. */
	for (size_t i = 0; !err && i < js->nrlimits; i++) {
		struct rlimit rl = { js->rlimits[i].soft, js->rlimits[i].hard };

		if (setrlimit(js->rlimits[i].resource, &rl))
			err = husk_seterr(errno, "setrlimit %u (%llu, %llu): %s",
					  js->rlimits[i].resource, (unsigned long long)rl.rlim_cur,
					  (unsigned long long)rl.rlim_max, strerror(errno));
	}
	if (!err)
		err = cfg.drop_user && js->root ? keep_root() : sandbox_drop_user();
	if (!err)
		err = install_seccomp();
	return err;
}

/*
 * The job's init, once the job is forked: a uid of its own, so the job
 * (AGENT_UID) can neither signal it nor read its /proc entries, with
 * CAP_KILL only, to forward signals to the job and kill what is left of
 * it; not dumpable, no_new_privs and the job's seccomp filter.
 */
int sandbox_enter_jobinit(void)
{
	int err = 0;

	if (cfg.drop_user)
		err = become(JOBINIT_UID, JOBINIT_GID, CAP_KILL);
	if (!err && prctl(PR_SET_DUMPABLE, 0, 0, 0, 0))
		err = husk_seterr(errno, "PR_SET_DUMPABLE: %s", strerror(errno));
	if (!err && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		err = husk_seterr(errno, "PR_SET_NO_NEW_PRIVS: %s", strerror(errno));
	if (!err)
		err = install_seccomp();
	return err;
}
