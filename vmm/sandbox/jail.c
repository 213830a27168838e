/*
 * jail: confine husk's VM process (contract in jail.h).
 *
 * Order matters throughout and is the point of this file:
 * - the PID namespace is made by the parent (unshare(CLONE_NEWPID) only
 *   affects children) and undone for the parent's later forks with setns;
 *   the other namespaces are made by the single-threaded child, because
 *   a new mount namespace cannot be unshared by a threaded process;
 * - mounts are changed only inside a mount namespace this process made,
 *   so a bug can never pivot the host's view;
 * - rlimits are set while CAP_SYS_RESOURCE may still raise them; the
 *   bounding set and securebits need CAP_SETPCAP, setgroups CAP_SETGID,
 *   so they precede the uid change, which in turn empties the permitted
 *   set; what is left (ambient, inheritable) is cleared explicitly;
 * - any credential change clears the parent-death signal and the dumpable
 *   flag, so both are set last.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "lib/accounts.h"
#include "sandbox/jail.h"
#include "lib/util.h"

/* Numbers shared by every architecture (added after the table unification). */
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif

unsigned jail_test_hooks;
const char *jail_subid_paths[2] = { "/etc/subuid", "/etc/subgid" };

/* State of the child of jail_fork(); the parent's copy stays empty. */
static unsigned jail_ns;		/* CLONE_NEW* this process got */
static pid_t parent_pid;		/* 0: not a jail_fork() child */
static int parent_pidfd = -1;		/* readable once the parent exited */
static bool fork_warned;

/* ---- capabilities (raw syscalls: no libcap) ---- */

static int caps_get(struct __user_cap_data_struct d[2])
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };

	memset(d, 0, 2 * sizeof(*d));
	return syscall(SYS_capget, &h, d) ? -errno : 0;
}

static bool cap_eff(const struct __user_cap_data_struct d[2], int cap)
{
	return d[cap >> 5].effective & (1u << (cap & 31));
}

static const struct {
	int cap;
	const char *name;
} needed_caps[] = {
	{ CAP_SYS_ADMIN, "CAP_SYS_ADMIN" },	/* namespaces, mounts, pivot_root */
	{ CAP_SETUID, "CAP_SETUID" },
	{ CAP_SETGID, "CAP_SETGID" },
	{ CAP_SETPCAP, "CAP_SETPCAP" },		/* bounding set, securebits */
};

bool jail_privileged(char *why, size_t len)
{
	struct __user_cap_data_struct d[2];
	size_t off = 0;
	unsigned i;
	bool ok = true;

	if (!why)
		len = 0;
	if (geteuid() != 0) {
		if (len)
			snprintf(why, len, "not running as root (euid %u)", (unsigned)geteuid());
		return false;
	}
	if (caps_get(d)) {
		if (len)
			snprintf(why, len, "cannot read this process's capabilities");
		return false;
	}
	for (i = 0; i < ARRAY_SIZE(needed_caps); i++) {
		if (cap_eff(d, needed_caps[i].cap))
			continue;
		if (len && off < len)
			off += snprintf(why + off, len - off, "%s%s",
					ok ? "root but missing " : ", ", needed_caps[i].name);
		ok = false;
	}
	return ok;
}

/* Empty every capability set left: ambient, inheritable, permitted, effective. */
static int caps_clear(void)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2];
	unsigned i;

	/* EINVAL: a kernel before 4.3 has no ambient set to clear. */
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) && errno != EINVAL)
		return husk_seterr(errno, "jail: cannot clear the ambient capabilities: %s",
				   strerror(errno));
	memset(d, 0, sizeof(d));
	if (syscall(SYS_capset, &h, d))
		return husk_seterr(errno, "jail: cannot clear the capabilities: %s",
				   strerror(errno));
	if (caps_get(d))
		return husk_seterr(EPERM, "jail: cannot read back the capabilities");
	for (i = 0; i < 2; i++)
		if (d[i].effective || d[i].permitted || d[i].inheritable)
			return husk_seterr(EPERM, "jail: capabilities are still set after capset");
	return 0;
}

/* Needs CAP_SETPCAP: nothing this process could ever exec may regain a cap. */
static int bounding_clear(void)
{
	unsigned long bits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED |
			     SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED |
			     SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
	int cap, r;

	/* PR_CAPBSET_READ fails (EINVAL) past the kernel's last capability. */
	for (cap = 0; cap < 64; cap++) {
		r = prctl(PR_CAPBSET_READ, cap, 0, 0, 0);
		if (r < 0)
			break;
		if (r && prctl(PR_CAPBSET_DROP, cap, 0, 0, 0))
			return husk_seterr(errno, "jail: cannot drop capability %d from the "
					   "bounding set: %s", cap, strerror(errno));
	}
	if (prctl(PR_SET_SECUREBITS, bits, 0, 0, 0))
		return husk_seterr(errno, "jail: cannot lock the securebits: %s", strerror(errno));
	return 0;
}

static int set_ids(uid_t uid, gid_t gid)
{
	uid_t ru, eu, su;
	gid_t rg, eg, sg;

	if (setgroups(0, NULL))
		return husk_seterr(errno, "jail: cannot drop the supplementary groups: %s",
				   strerror(errno));
	if (setresgid(gid, gid, gid))
		return husk_seterr(errno, "jail: cannot change to gid %u: %s", (unsigned)gid,
				   strerror(errno));
	if (setresuid(uid, uid, uid))
		return husk_seterr(errno, "jail: cannot change to uid %u: %s", (unsigned)uid,
				   strerror(errno));
	if (getresuid(&ru, &eu, &su) || getresgid(&rg, &eg, &sg) ||
	    ru != uid || eu != uid || su != uid || rg != gid || eg != gid || sg != gid)
		return husk_seterr(EPERM, "jail: the uid/gid change to %u/%u did not take",
				   (unsigned)uid, (unsigned)gid);
	return 0;
}

/* ---- uid leases ---- */

/* Is id inside a "name:start:count" range of a subordinate id file? */
static bool in_subid_file(const char *path, uint64_t id)
{
	char line[512];
	bool hit = false;
	FILE *f = fopen(path, "re");

	if (!f)
		return false;
	while (!hit && fgets(line, sizeof(line), f)) {
		unsigned long long start, n;
		char *c = strchr(line, ':');

		if (!c || sscanf(c + 1, "%llu:%llu", &start, &n) != 2)
			continue;
		hit = id >= start && id - start < n;
	}
	fclose(f);
	return hit;
}

/* The uid (and the gid of the same number) belongs to someone already. */
static bool id_taken(uid_t id)
{
	if (account_uid_taken(id) || account_gid_taken(id))
		return true;
	return in_subid_file(jail_subid_paths[0], id) || in_subid_file(jail_subid_paths[1], id);
}

int jail_uid_lease_at(const char *dir, uid_t base, unsigned count, uid_t *uid,
		      int *lock_fd)
{
	unsigned skipped = 0;
	uint64_t last = (uint64_t)base + count - 1;
	struct stat st;
	char name[32];
	unsigned i;
	int dfd, fd, err;

	if (!count || !base)
		return husk_seterr(EINVAL, "jail uid range %u+%u: it must be non-empty and "
				   "must not start at 0", (unsigned)base, count);
	/* (uid_t)-1 means "unchanged" to setresuid; 65534/65535 are shared. */
	if (last >= (uid_t)-1)
		return husk_seterr(ERANGE, "jail uid range %u+%u runs past uid %u",
				   (unsigned)base, count, (unsigned)(uid_t)-2);
	if (base <= 65535 && last >= 65534)
		return husk_seterr(EINVAL, "jail uid range %u..%llu holds nobody (65534/65535); "
				   "pick a range reserved for husk", (unsigned)base,
				   (unsigned long long)last);
	err = mkdir_p(dir, 0700);
	if (err)
		return err;
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (dfd < 0)
		return husk_seterr(errno, "cannot open %s: %s", dir, strerror(errno));
	/* Anyone who may write here may hold every uid, or swap a lock file. */
	if (fstat(dfd, &st) || st.st_uid != geteuid() || (st.st_mode & 022)) {
		close(dfd);
		return husk_seterr(EPERM, "lock directory %s must be owned by uid %u and "
				   "writable by nobody else", dir, (unsigned)geteuid());
	}
	for (i = 0; i < count; i++) {
		if (id_taken(base + i)) {
			skipped++;
			continue;
		}
		snprintf(name, sizeof(name), "%u.lock", (unsigned)(base + i));
		/* Read-only: should it leak into the jail it cannot be written. */
		fd = openat(dfd, name, O_RDONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd < 0) {
			err = errno;
			close(dfd);
			return husk_seterr(err, "cannot open %s/%s: %s", dir, name, strerror(err));
		}
		if (!flock(fd, LOCK_EX | LOCK_NB)) {
			close(dfd);
			*uid = base + i;
			*lock_fd = fd;
			return 0;
		}
		err = errno;
		close(fd);
		if (err != EWOULDBLOCK) {
			close(dfd);
			return husk_seterr(err, "cannot lock %s/%s: %s", dir, name, strerror(err));
		}
	}
	close(dfd);
	if (skipped)
		return husk_seterr(EBUSY, "all %u jail uids in use (%u..%llu, locks in %s; %u of "
				   "them skipped: a user, group or subordinate id range has "
				   "them): wait for other runs to end or configure a range "
				   "reserved for husk with --uid-range", count, (unsigned)base,
				   (unsigned long long)last, dir, skipped);
	return husk_seterr(EBUSY, "all %u jail uids in use (%u..%llu, locks in %s): wait for "
			   "other runs to end or configure a larger range", count, (unsigned)base,
			   (unsigned long long)last, dir);
}

int jail_uid_lease(uid_t base, unsigned count, uid_t *uid, int *lock_fd)
{
	return jail_uid_lease_at(JAIL_UID_LOCK_DIR, base, count, uid, lock_fd);
}

/* ---- the runtime directory ---- */

int jail_prepare_dir(const char *dir, uid_t uid, gid_t gid)
{
	struct dirent *e;
	struct stat st;
	DIR *d;
	int dfd, fd, err = 0;

	if (geteuid() != 0)
		return 0;
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (dfd < 0)
		return husk_seterr(errno, "cannot open %s: %s", dir, strerror(errno));
	if (fchown(dfd, 0, gid) || fchmod(dfd, 0710)) {
		err = husk_seterr(errno, "cannot hand %s to the jail (gid %u): %s", dir,
				  (unsigned)gid, strerror(errno));
		goto out;
	}
	fd = dup(dfd);
	d = fd < 0 ? NULL : fdopendir(fd);
	if (!d) {
		err = husk_seterr(errno, "cannot list %s: %s", dir, strerror(errno));
		if (fd >= 0)
			close(fd);
		goto out;
	}
	while (!err && (e = readdir(d))) {
		if (fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISSOCK(st.st_mode))
			continue;
		if (fchownat(dfd, e->d_name, uid, gid, AT_SYMLINK_NOFOLLOW) ||
		    fchmodat(dfd, e->d_name, 0600, 0))
			err = husk_seterr(errno, "cannot hand %s/%s to the jail (uid %u): %s",
					  dir, e->d_name, (unsigned)uid, strerror(errno));
	}
	closedir(d);
out:
	close(dfd);
	return err;
}

/* ---- fork ---- */

/* The parent exited between fork() and PR_SET_PDEATHSIG (or a cred change)? */
static bool parent_gone(void)
{
	struct pollfd p = { .fd = parent_pidfd, .events = POLLIN };

	if (parent_pidfd >= 0)
		return poll(&p, 1, 0) > 0;
	/* In a new PID namespace getppid() is always 0: nothing to compare. */
	if (!(jail_ns & CLONE_NEWPID))
		return getppid() != parent_pid;
	return false;
}

static const struct {
	int flag;
	const char *name;
} child_ns[] = {
	{ CLONE_NEWNS, "mount" },
	{ CLONE_NEWIPC, "IPC" },
	{ CLONE_NEWUTS, "UTS" },
	{ CLONE_NEWNET, "network" },
};

/* In the child, single-threaded: the namespaces that need it. */
static void child_unshare(unsigned flags)
{
	char missing[96] = "";
	size_t off = 0;
	int want = 0, err = 0;
	unsigned i;

	for (i = 0; i < ARRAY_SIZE(child_ns); i++)
		if (child_ns[i].flag != CLONE_NEWNET || (flags & JAIL_NEWNET))
			want |= child_ns[i].flag;
	if (!unshare(want)) {
		jail_ns |= want;
		return;
	}
	/* One by one, so the warning names exactly what is missing. */
	for (i = 0; i < ARRAY_SIZE(child_ns); i++) {
		if (!(want & child_ns[i].flag))
			continue;
		if (!unshare(child_ns[i].flag)) {
			jail_ns |= child_ns[i].flag;
			continue;
		}
		err = errno;
		off += snprintf(missing + off, sizeof(missing) - off, "%s%s", off ? ", " : "",
				child_ns[i].name);
	}
	husk_msg("warning: jail: cannot create the %s namespace%s of the VM process (%s); "
		 "it shares the host's", missing, strchr(missing, ',') ? "s" : "",
		 strerror(err));
}

pid_t jail_fork(unsigned flags)
{
	char why[160];
	pid_t me = getpid(), pid;
	int nsfd = -1, pfd, err;
	bool newpid = false;

	if (flags & ~JAIL_NEWNET)
		return husk_seterr(EINVAL, "jail: unknown fork flags %#x", flags);
	if (jail_privileged(why, sizeof(why))) {
		/* To give this thread's later children our own PID namespace back. */
		nsfd = open("/proc/self/ns/pid", O_RDONLY | O_CLOEXEC);
		if (nsfd < 0)
			snprintf(why, sizeof(why), "cannot open /proc/self/ns/pid: %s",
				 strerror(errno));
		else if (unshare(CLONE_NEWPID))
			snprintf(why, sizeof(why), "cannot create a PID namespace: %s",
				 strerror(errno));
		else
			newpid = true;
	}
	if (!newpid && !fork_warned) {
		fork_warned = true;
		husk_msg("warning: jail: %s: the VM process runs in the host's PID, mount, IPC, "
			 "UTS and network namespaces", why);
	}
	/* Fails on kernels before 5.3: the race check then falls back. */
	pfd = syscall(SYS_pidfd_open, me, 0);
	pid = fork();
	if (pid == 0) {
		parent_pid = me;
		parent_pidfd = pfd;
		jail_ns = newpid ? CLONE_NEWPID : 0;
		prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
		if (parent_gone())
			_exit(127);
		if (newpid)
			child_unshare(flags);
		if (nsfd >= 0)
			close(nsfd);
		return 0;
	}
	err = errno;
	if (pfd >= 0)
		close(pfd);
	if (newpid && setns(nsfd, CLONE_NEWPID))
		husk_msg("warning: jail: cannot return to the host PID namespace (%s): later "
			 "forks from this thread will fail", strerror(errno));
	if (nsfd >= 0)
		close(nsfd);
	if (pid < 0)
		return husk_seterr(err, "cannot fork the VM process: %s", strerror(err));
	return pid;
}

/* ---- fds ---- */

static bool is_kept(int fd, const int *keep, unsigned n)
{
	unsigned i;

	if (fd == parent_pidfd)
		return true;
	for (i = 0; i < n; i++)
		if (keep[i] == fd)
			return true;
	return false;
}

/* The smallest kept fd >= lo, or -1. */
static long next_kept(unsigned lo, const int *keep, unsigned n)
{
	long best = parent_pidfd >= (int)lo ? parent_pidfd : -1;
	unsigned i;

	for (i = 0; i < n; i++)
		if (keep[i] >= (int)lo && (best < 0 || keep[i] < best))
			best = keep[i];
	return best;
}

/* Without close_range (before 5.9): walk /proc/self/fd, else every possible fd. */
static void close_fallback(const int *keep, unsigned n)
{
	struct rlimit rl;
	struct dirent *e;
	DIR *d = opendir("/proc/self/fd");
	long fd, max;

	if (d) {
		while ((e = readdir(d))) {
			fd = strtol(e->d_name, NULL, 10);
			if (e->d_name[0] != '.' && fd >= 3 && fd != dirfd(d) &&
			    !is_kept(fd, keep, n))
				close(fd);
		}
		closedir(d);
		return;
	}
	max = 1 << 20;
	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < (rlim_t)max)
		max = rl.rlim_cur;
	for (fd = 3; fd < max; fd++)
		if (!is_kept(fd, keep, n))
			close(fd);
}

static int close_span(unsigned lo, unsigned hi)
{
	if (jail_test_hooks & JAIL_TEST_NO_CLOSE_RANGE) {
		errno = ENOSYS;
		return -1;
	}
	return syscall(SYS_close_range, lo, hi, 0);
}

int jail_close_fds(const int *keep, unsigned n)
{
	unsigned lo = 3, i;
	long k;

	for (i = 0; i < n; i++)
		if (keep[i] >= 0 && fcntl(keep[i], F_GETFD) < 0)
			return husk_seterr(EBADF, "jail: fd %d in the keep list is not open",
					   keep[i]);
	for (;;) {
		k = next_kept(lo, keep, n);
		if (k != (long)lo && close_span(lo, k < 0 ? ~0u : (unsigned)k - 1)) {
			if (errno != ENOSYS)
				return husk_seterr(errno, "jail: close_range failed: %s",
						   strerror(errno));
			close_fallback(keep, n);
			return 0;
		}
		if (k < 0)
			return 0;
		lo = k + 1;
	}
}

/* ---- enter ---- */

static int count_threads(void)
{
	FILE *f = fopen("/proc/self/status", "re");
	char line[128];
	int n = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Threads: %d", &n) == 1)
			break;
	fclose(f);
	return n;
}

/* An fd on a directory would be a way out of the new root (openat, fchdir). */
static int check_no_dir_fds(void)
{
	char link[64], target[PATH_MAX];
	struct dirent *e;
	struct stat st;
	DIR *d = opendir("/proc/self/fd");
	ssize_t len;
	long fd;

	if (!d)
		return 0;	/* no /proc: nothing to check with */
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		fd = strtol(e->d_name, NULL, 10);
		if (fd == dirfd(d) || fstat(fd, &st) || !S_ISDIR(st.st_mode))
			continue;
		snprintf(link, sizeof(link), "/proc/self/fd/%ld", fd);
		len = readlink(link, target, sizeof(target) - 1);
		target[len > 0 ? len : 0] = '\0';
		closedir(d);
		return husk_seterr(EBADF, "jail: fd %ld is an open directory (%s), a way out of "
				   "the jail's root: close it before jail_enter", fd, target);
	}
	closedir(d);
	return 0;
}

/*
 * New root: a private bind mount of root, pivoted to, read-only. Where
 * pivot_root is refused (EINVAL: the current root is an initramfs, which
 * has no parent mount) the bind mount is moved over "/" and chrooted into;
 * without capabilities the old root under it stays out of reach.
 */
static int enter_root(const char *root, bool *degraded)
{
	const unsigned long ro = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV |
				 MS_NOEXEC;

	if (!(jail_ns & CLONE_NEWNS)) {
		if (unshare(CLONE_NEWNS)) {
			husk_msg("warning: jail: cannot create a mount namespace (%s): the VM "
				 "process keeps the host's file system, only its cwd is %s",
				 strerror(errno), root);
			*degraded = true;
			if (chdir(root))
				return husk_seterr(errno, "jail: cannot enter %s: %s", root,
						   strerror(errno));
			return 0;
		}
		jail_ns |= CLONE_NEWNS;
	}
	/* Nothing done below may propagate back to the host. */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL))
		return husk_seterr(errno, "jail: cannot make the mounts private: %s",
				   strerror(errno));
	/* pivot_root wants a mount point; no MS_REC: nothing mounted below comes. */
	if (mount(root, root, NULL, MS_BIND, NULL) || chdir(root))
		return husk_seterr(errno, "jail: cannot bind %s: %s", root, strerror(errno));
	if (!(jail_test_hooks & JAIL_TEST_NO_PIVOT) && !syscall(SYS_pivot_root, ".", ".")) {
		/* The old root now sits on top of the new one, at ".". */
		if (umount2(".", MNT_DETACH))
			return husk_seterr(errno, "jail: cannot detach the old root: %s",
					   strerror(errno));
	} else if ((jail_test_hooks & JAIL_TEST_NO_PIVOT) || errno == EINVAL) {
		husk_debug("jail: pivot_root refused, moving %s over / and chrooting", root);
		if (mount(".", "/", NULL, MS_MOVE, NULL) || chroot("."))
			return husk_seterr(errno, "jail: cannot make %s the root: %s", root,
					   strerror(errno));
	} else {
		return husk_seterr(errno, "jail: pivot_root into %s failed: %s", root,
				   strerror(errno));
	}
	if (chdir("/"))
		return husk_seterr(errno, "jail: cannot enter the new root: %s", strerror(errno));
	if (mount(NULL, "/", NULL, ro, NULL))
		return husk_seterr(errno, "jail: cannot make the new root read-only: %s",
				   strerror(errno));
	return 0;
}

static int set_limit(int res, const char *name, rlim_t v)
{
	struct rlimit rl = { v, v }, old;

	if (!setrlimit(res, &rl))
		return 0;
	/* Above the hard limit without CAP_SYS_RESOURCE: say so, keep the hard one. */
	if (errno == EPERM && !getrlimit(res, &old) && v > old.rlim_max) {
		husk_msg("warning: jail: %s %llu is above the hard limit %llu, which only "
			 "CAP_SYS_RESOURCE may raise; using %llu", name, (unsigned long long)v,
			 (unsigned long long)old.rlim_max, (unsigned long long)old.rlim_max);
		rl.rlim_cur = rl.rlim_max = old.rlim_max;
		if (!setrlimit(res, &rl))
			return 0;
	}
	return husk_seterr(errno, "jail: cannot set %s to %llu: %s", name,
			   (unsigned long long)v, strerror(errno));
}

/* nproc only for a uid of the jail's own: the limit counts all its tasks. */
static int set_rlimits(const struct jail_cfg *c, bool own_uid)
{
	int err = set_limit(RLIMIT_CORE, "RLIMIT_CORE", 0);

	if (!err && c->nofile)
		err = set_limit(RLIMIT_NOFILE, "RLIMIT_NOFILE", c->nofile);
	if (!err && c->nproc && own_uid)
		err = set_limit(RLIMIT_NPROC, "RLIMIT_NPROC", c->nproc);
	if (!err && c->fsize) {
		err = set_limit(RLIMIT_FSIZE, "RLIMIT_FSIZE", c->fsize);
		/* A console log at its cap must fail its writes, not kill the VM. */
		signal(SIGXFSZ, SIG_IGN);
	}
	return err;
}

int jail_enter(const struct jail_cfg *c)
{
	struct __user_cap_data_struct d[2];
	char real[PATH_MAX], skipped[160], why[160];
	bool can_mount, can_id, can_bset, degraded = false;
	size_t off = 0;
	struct stat st;
	int threads, pdeath = 0, err;

	if (!c || !c->root || !*c->root)
		return husk_seterr(EINVAL, "jail: no root directory given");
	if (!realpath(c->root, real) || stat(real, &st))
		return husk_seterr(errno, "jail: cannot resolve %s: %s", c->root, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return husk_seterr(ENOTDIR, "jail: %s is not a directory", real);
	if (!strcmp(real, "/"))
		return husk_seterr(EINVAL, "jail: the root must be a per-VM directory, not /");
	threads = count_threads();
	if (threads > 1)
		return husk_seterr(EINVAL, "jail: %d threads are running; enter the jail before "
				   "starting any (capabilities, no_new_privs and namespaces are "
				   "per thread)", threads);
	err = check_no_dir_fds();
	if (err)
		return err;
	if (caps_get(d))
		memset(d, 0, sizeof(d));
	can_mount = geteuid() == 0 && cap_eff(d, CAP_SYS_ADMIN);
	can_id = cap_eff(d, CAP_SETUID) && cap_eff(d, CAP_SETGID);
	can_bset = cap_eff(d, CAP_SETPCAP);
	if (can_id && (c->uid == 0 || c->gid == 0))
		return husk_seterr(EINVAL, "jail: uid/gid 0 is no jail; lease one with "
				   "jail_uid_lease()");
	prctl(PR_GET_PDEATHSIG, &pdeath, 0, 0, 0);

	if (!can_mount || !can_id || !can_bset) {
		jail_privileged(why, sizeof(why));
		if (!can_mount)
			off += snprintf(skipped + off, sizeof(skipped) - off,
					"no private read-only root (pivot_root)");
		if (!can_id && off < sizeof(skipped))
			off += snprintf(skipped + off, sizeof(skipped) - off,
					"%sno uid/gid drop", off ? ", " : "");
		if (!can_bset && off < sizeof(skipped))
			snprintf(skipped + off, sizeof(skipped) - off,
				 "%sno capability bounding set", off ? ", " : "");
		husk_msg("warning: jail: %s: %s for the VM process. Still applied: "
			 "no_new_privs, rlimits%s, no capabilities", why, skipped,
			 can_id ? "" : " (not nproc: it would count every process of this uid)");
		degraded = true;
	}
	if (can_mount)
		err = enter_root(real, &degraded);
	else if (chdir(real))
		err = husk_seterr(errno, "jail: cannot enter %s: %s", real, strerror(errno));
	if (err)
		return err;
	/* Off the user's terminal: TIOCSTI needs it as the controlling tty. */
	if (setsid() < 0)
		husk_debug("jail: setsid: %s", strerror(errno));
	if ((jail_ns & CLONE_NEWUTS) && sethostname("husk", 4))
		husk_debug("jail: sethostname: %s", strerror(errno));

	err = set_rlimits(c, can_id);
	if (!err && can_bset)
		err = bounding_clear();
	if (!err && can_id)
		err = set_ids(c->uid, c->gid);
	if (!err)
		err = caps_clear();
	if (err)
		return err;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return husk_seterr(errno, "jail: cannot set no_new_privs: %s", strerror(errno));
	/* Credential changes reset both of these. */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0))
		return husk_seterr(errno, "jail: cannot clear dumpable: %s", strerror(errno));
	if (pdeath && prctl(PR_SET_PDEATHSIG, pdeath, 0, 0, 0))
		return husk_seterr(errno, "jail: cannot set the parent-death signal: %s",
				   strerror(errno));
	if (parent_pid && parent_gone())
		return husk_seterr(ESRCH, "jail: the supervisor exited");
	if (parent_pidfd >= 0) {
		close(parent_pidfd);
		parent_pidfd = -1;
	}
	return degraded ? JAIL_DEGRADED : 0;
}
