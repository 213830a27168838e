/*
 * jail: confine husk's VM process.
 *
 * `husk run` keeps a privileged supervisor and forks one VM process. That
 * process opens everything it needs (/dev/kvm, kernel, root image, its
 * sockets; the tap fd is inherited) and then locks itself in, so a guest
 * that escapes into the VMM finds nothing worth having:
 *
 *   supervisor                         VM process (child)
 *   jail_uid_lease()                   (PID 1 of a new PID namespace, new
 *   jail_prepare_dir() [per socket]     mount/IPC/UTS/net namespaces)
 *   pid = jail_fork(JAIL_NEWNET) ----> jail_close_fds(keep, n)
 *                                      open /dev/kvm, images, sockets
 *                                      jail_enter(&cfg)   <- single-threaded
 *                                      start threads, run the VM
 *   waitpid(pid); close(lock_fd)
 *
 * After jail_enter() the process has: "/" = the per-VM runtime directory,
 * mounted read-only, nosuid, nodev, noexec, and cwd "/" (so the Unix sockets
 * in it are reached by relative name); no other file system, no /proc, /dev
 * or /sys; its own uid/gid (no supplementary groups); no capabilities in any
 * set, an empty bounding set, securebits locked; no_new_privs; not dumpable;
 * RLIMIT_CORE 0 and the caller's nofile/fsize/nproc limits (soft = hard);
 * its own session (no controlling terminal, so TIOCSTI is refused); parent
 * death still sends it SIGKILL.
 *
 * Without privilege (not root, or root without CAP_SYS_ADMIN, CAP_SETUID,
 * CAP_SETGID, CAP_SETPCAP) each function does what it still can and says
 * once, on stderr, what is missing: jail_fork() becomes a plain fork,
 * jail_enter() only changes directory, drops what capabilities it may and
 * applies no_new_privs and the rlimits (but not nproc, which would count
 * every process of the user). Nothing degrades silently.
 *
 * Functions return -errno with a message set by husk_seterr() unless noted.
 */
#ifndef HUSK_JAIL_H
#define HUSK_JAIL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/resource.h>
#include <sys/types.h>

/* Where the per-uid lock files of jail_uid_lease() live. */
#define JAIL_UID_LOCK_DIR "/run/husk/uid"

/* jail_fork() flags. */
#define JAIL_NEWNET	(1u << 0)	/* a new, empty network namespace (only lo, down) */

/* jail_enter()'s result when it applied only the unprivileged part. */
#define JAIL_DEGRADED	1

struct jail_cfg {
	const char *root;	/* existing directory, not "/": becomes "/" and cwd */
	uid_t uid;		/* from jail_uid_lease(); never 0 */
	gid_t gid;		/* = uid by convention; never 0 */
	/*
	 * Resource limits, soft = hard so the jail cannot raise them; 0
	 * leaves one unchanged. RLIMIT_CORE is always 0.
	 * nofile: highest fd + 1 the process may still open (it keeps
	 *         making sockets and eventfds after the jail).
	 * fsize:  bytes any file written may grow to (the console log);
	 *         SIGXFSZ is ignored so an overlong write fails with EFBIG
	 *         instead of killing the VM.
	 * nproc:  tasks of the jail uid, counting threads: main + device
	 *         loop + one per vCPU (+ slack). The uid is unique to this
	 *         VM so nothing else counts against it (not applied when
	 *         the uid could not be changed).
	 */
	rlim_t nofile;
	rlim_t fsize;
	rlim_t nproc;
};

/*
 * True when this process can build the full jail: effective uid 0 with
 * CAP_SYS_ADMIN, CAP_SETUID, CAP_SETGID and CAP_SETPCAP. Otherwise, when
 * buf is given, it says what is missing ("not running as root (euid 1000)",
 * "missing CAP_SYS_ADMIN, CAP_SETPCAP").
 */
bool jail_privileged(char *why, size_t len);

/*
 * Lease the first free uid in [base, base + count): one lock file per uid
 * under JAIL_UID_LOCK_DIR (created 0700 as needed), held with flock on
 * *lock_fd (O_CLOEXEC) for the life of the run. Close *lock_fd only after
 * the VM process has been reaped: the uid is then free for another run.
 * The gid is the same number. The range must be reserved for husk and
 * excludes 0, 65534 and 65535; uids that are somebody's already are skipped:
 * a user or group of that number in the user database (NSS: /etc/passwd,
 * /etc/group, LDAP, ...), or a subordinate id range in /etc/subuid or
 * /etc/subgid (jail_subid_paths). None left: -EBUSY "all N jail uids in
 * use ..." saying how many were skipped. Needs root (the lock directory).
 */
int jail_uid_lease(uid_t base, unsigned count, uid_t *uid, int *lock_fd);
/* The same with another lock directory (tests). */
int jail_uid_lease_at(const char *dir, uid_t base, unsigned count, uid_t *uid,
		      int *lock_fd);

/*
 * Make dir usable by the jail: dir owned root:gid mode 0710 (the jail may
 * look names up, not list or change them), every Unix socket directly in
 * it owned uid:gid mode 0600 (connect() needs write permission on the
 * socket inode). Other entries are left alone. Call it again for sockets
 * created later. A no-op when not root (the VM process keeps our uid).
 */
int jail_prepare_dir(const char *dir, uid_t uid, gid_t gid);

/*
 * Fork the VM process. The child is PID 1 of a new PID namespace and has
 * new mount, IPC and UTS namespaces, plus a new network namespace with
 * JAIL_NEWNET (the tap fd and AF_UNIX pathname sockets keep working; it
 * cannot reach the host network). The child gets SIGKILL when the thread
 * that called jail_fork() exits, so call it from a thread that lives as
 * long as the run (the main thread). Returns the child's pid in the
 * parent, 0 in the child, -errno on failure. Not privileged, or the
 * namespaces refused: a plain fork and one warning per process.
 *
 * About PID 1: signals from inside its namespace are dropped unless it has
 * a handler; from the parent only SIGKILL and SIGSTOP are forced, other
 * signals need a handler or must be blocked (a signalfd works). When it
 * exits, everything else in its namespace is killed.
 */
pid_t jail_fork(unsigned flags);

/*
 * Close every fd >= 3 that is not in keep[0..n) (negative entries are
 * ignored, so an unused "-1" slot can be passed). Uses close_range where
 * the kernel has it. The fd jail_fork() keeps to watch the parent stays
 * open until jail_enter(). -EBADF when a keep entry is not open.
 */
int jail_close_fds(const int *keep, unsigned n);

/*
 * Enter the jail (see the top of this file). Call it in the child of
 * jail_fork(), after everything is opened and before any thread is
 * started: capabilities, no_new_privs and the mount namespace are
 * per-thread, so a second thread would stay outside (-EINVAL if /proc
 * shows more than one). No fd may refer to a directory (it would be a way
 * out of the new root): -EBADF naming the fd. Returns 0 when fully jailed,
 * JAIL_DEGRADED when it warned and applied only the unprivileged part,
 * -errno on failure; after a failure the process is half-jailed and must
 * exit.
 */
int jail_enter(const struct jail_cfg *c);

/*
 * Tests only: JAIL_TEST_NO_PIVOT takes the path used where pivot_root is
 * refused (an initramfs root, as in the test host): move the new root
 * over "/" and chroot into it. JAIL_TEST_NO_CLOSE_RANGE takes the path of
 * kernels before 5.9.
 */
#define JAIL_TEST_NO_PIVOT		(1u << 0)
#define JAIL_TEST_NO_CLOSE_RANGE	(1u << 1)
extern unsigned jail_test_hooks;
/* The subordinate id files jail_uid_lease() respects (tests point elsewhere). */
extern const char *jail_subid_paths[2];

#endif
