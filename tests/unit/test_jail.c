/*
 * Unit tests for jail, the VM process's confinement.
 *
 * uid leases (distinct uids, a full range, release on close, bad ranges, an
 * unsafe lock directory) and fd closing run anywhere. The jail itself runs
 * for real in children (root only; otherwise skipped with the reason): a
 * jail_fork()ed child enters a temp directory holding a listening Unix
 * socket and reports through a pipe what it can still see and do — PID 1,
 * the leased uid/gid, no capabilities, an empty bounding set, no_new_privs,
 * no host files, a read-only root, the socket still connectable by relative
 * name, a network namespace with only lo, its own UTS namespace, the
 * rlimits, closed fds. The same through the chroot path used where
 * pivot_root is refused, the parent's death killing the jailed child, the
 * refusals (root "/", a file, uid 0, a thread running, an open directory
 * fd), and the degraded path of a process that is not root.
 */
#include <errno.h>
#include <pwd.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <limits.h>
#include <linux/capability.h>
#include <net/if.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox/jail.h"
#include "suites.h"
#include "lib/util.h"

#define UID_BASE 2900000u	/* far from any account on a test machine */
#define NOBODY 65534

static char tmp[64];		/* the jail's root in each test */
static char lockdir[128];

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	return remove(p) ? 0 : 0;
}

static void setup(void)
{
	snprintf(tmp, sizeof(tmp), "/tmp/husk-jail-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmp));
	snprintf(lockdir, sizeof(lockdir), "%s-locks/run/uid", tmp);
}

static void teardown(void)
{
	char p[160];

	nftw(tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	snprintf(p, sizeof(p), "%s-locks", tmp);
	nftw(p, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static bool need_root(const char *test)
{
	char why[160];

	if (jail_privileged(why, sizeof(why)))
		return true;
	unit_skip(test, why);
	return false;
}

static void read_all(int fd, void *p, size_t n)
{
	size_t got = 0;
	ssize_t r;

	while (got < n) {
		r = read(fd, (char *)p + got, n - got);
		if (r < 0 && errno == EINTR)
			continue;
		ck_assert_msg(r > 0, "child report short: %zu of %zu bytes", got, n);
		got += r;
	}
}

static int wait_exit(pid_t pid)
{
	int st;

	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* ---- uid leases ---- */

START_TEST(lease_distinct_full_release)
{
	uid_t a, b, c;
	int fa, fb, fc = -1;
	struct stat st;

	ck_assert_int_eq(jail_uid_lease_at(lockdir, UID_BASE, 2, &a, &fa), 0);
	ck_assert_int_eq(stat(lockdir, &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0700);
	ck_assert_int_ge(fcntl(fa, F_GETFD) & FD_CLOEXEC, 1);
	ck_assert_int_eq(jail_uid_lease_at(lockdir, UID_BASE, 2, &b, &fb), 0);
	ck_assert_uint_ne(a, b);
	ck_assert(a >= UID_BASE && a < UID_BASE + 2 && b >= UID_BASE && b < UID_BASE + 2);

	ck_assert_int_eq(jail_uid_lease_at(lockdir, UID_BASE, 2, &c, &fc), -EBUSY);
	ck_assert_msg(strstr(husk_lasterr(), "all 2 jail uids in use"), "%s", husk_lasterr());
	ck_assert_int_eq(fc, -1);

	/* The lease lives as long as its fd: a crashed run frees its uid. */
	close(fa);
	ck_assert_int_eq(jail_uid_lease_at(lockdir, UID_BASE, 2, &c, &fc), 0);
	ck_assert_uint_eq(c, a);
	close(fb);
	close(fc);
}
END_TEST

/* uids an account, a group or a subordinate id range has are never leased. */
START_TEST(lease_skips_taken_ids)
{
	char sub[PATH_MAX], subg[PATH_MAX];
	const char *saved[2] = { jail_subid_paths[0], jail_subid_paths[1] };
	FILE *f;
	uid_t u;
	int fd;

	/* uid 1 (daemon) and 2 (bin) are in every Debian /etc/passwd. */
	ck_assert_ptr_nonnull(getpwuid(1));
	ck_assert_int_eq(jail_uid_lease_at(lockdir, 1, 2, &u, &fd), -EBUSY);
	ck_assert_msg(strstr(husk_lasterr(), "2 of them skipped"), "%s", husk_lasterr());

	snprintf(sub, sizeof(sub), "%s.subuid", lockdir);
	snprintf(subg, sizeof(subg), "%s.subgid", lockdir);
	f = fopen(sub, "w");
	ck_assert_ptr_nonnull(f);
	fprintf(f, "alice:%u:2\nbroken line\nbob:x:y\n", UID_BASE);
	fclose(f);
	f = fopen(subg, "w");
	ck_assert_ptr_nonnull(f);
	fprintf(f, "carol:%u:1\n", UID_BASE + 2);
	fclose(f);
	jail_subid_paths[0] = sub;
	jail_subid_paths[1] = subg;
	ck_assert_int_eq(jail_uid_lease_at(lockdir, UID_BASE, 4, &u, &fd), 0);
	ck_assert_uint_eq(u, UID_BASE + 3);
	close(fd);
	ck_assert_int_eq(jail_uid_lease_at(lockdir, UID_BASE, 3, &u, &fd), -EBUSY);
	ck_assert_msg(strstr(husk_lasterr(), "3 of them skipped"), "%s", husk_lasterr());
	jail_subid_paths[0] = saved[0];
	jail_subid_paths[1] = saved[1];
	unlink(sub);
	unlink(subg);
}
END_TEST

START_TEST(lease_bad_ranges)
{
	uid_t u;
	int fd;

	ck_assert_int_eq(jail_uid_lease_at(lockdir, UID_BASE, 0, &u, &fd), -EINVAL);
	ck_assert_int_eq(jail_uid_lease_at(lockdir, 0, 10, &u, &fd), -EINVAL);
	ck_assert_int_eq(jail_uid_lease_at(lockdir, 65000, 1000, &u, &fd), -EINVAL);
	ck_assert_msg(strstr(husk_lasterr(), "nobody"), "%s", husk_lasterr());
	ck_assert_int_eq(jail_uid_lease_at(lockdir, (uid_t)-4, 4, &u, &fd), -ERANGE);
	/* A lock directory others may write is refused. */
	ck_assert_int_eq(jail_uid_lease_at(lockdir, UID_BASE, 1, &u, &fd), 0);
	close(fd);
	ck_assert_int_eq(chmod(lockdir, 0777), 0);
	ck_assert_int_eq(jail_uid_lease_at(lockdir, UID_BASE, 1, &u, &fd), -EPERM);
	ck_assert_msg(strstr(husk_lasterr(), "writable by nobody else"), "%s", husk_lasterr());
}
END_TEST

/* ---- fds ---- */

START_TEST(close_fds_keeps_list)
{
	static const int fds[] = { 10, 11, 12, 40, 41, 500 };
	int p[2], res[ARRAY_SIZE(fds) + 2], null, i;
	pid_t pid;

	ck_assert_int_eq(pipe(p), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int keep[] = { 41, -1, 11, 500, 0, 0 };

		if (_i)
			jail_test_hooks |= JAIL_TEST_NO_CLOSE_RANGE;
		null = open("/dev/null", O_RDONLY);
		for (i = 0; i < (int)ARRAY_SIZE(fds); i++)
			dup2(null, fds[i]);
		close(null);
		/* The pipe's write end moves to 600 and is kept. */
		dup2(p[1], 600);
		keep[4] = 600;
		keep[5] = 77;		/* not open: refused, nothing closed */
		res[0] = jail_close_fds(keep, 6);
		res[1] = jail_close_fds(keep, 5);
		for (i = 0; i < (int)ARRAY_SIZE(fds); i++)
			res[i + 2] = fcntl(fds[i], F_GETFD) >= 0;
		if (write(600, res, sizeof(res)) != sizeof(res))
			_exit(2);
		/* Only stdio and the kept fds may remain. */
		_exit(fcntl(p[0], F_GETFD) >= 0 || fcntl(p[1], F_GETFD) >= 0);
	}
	close(p[1]);
	read_all(p[0], res, sizeof(res));
	close(p[0]);
	ck_assert_int_eq(wait_exit(pid), 0);
	ck_assert_int_eq(res[0], -EBADF);
	ck_assert_int_eq(res[1], 0);
	ck_assert_int_eq(res[2], 0);	/* 10 */
	ck_assert_int_eq(res[3], 1);	/* 11 kept */
	ck_assert_int_eq(res[4], 0);	/* 12 */
	ck_assert_int_eq(res[5], 0);	/* 40 */
	ck_assert_int_eq(res[6], 1);	/* 41 kept */
	ck_assert_int_eq(res[7], 1);	/* 500 kept */
}
END_TEST

/* ---- the jail, observed from inside ---- */

enum { NS_MNT, NS_PID, NS_IPC, NS_UTS, NS_NET, NR_NS };
static const char *const ns_names[NR_NS] = { "mnt", "pid", "ipc", "uts", "net" };

struct report {
	int close_rc, enter_rc;
	char err[256];
	ino_t ns[NR_NS];		/* before jail_enter */
	pid_t pid;
	uid_t ruid, euid, suid;
	gid_t rgid, egid, sgid;
	int ngroups;
	uint32_t eff[2], prm[2], inh[2];
	int bset, ambient;
	int nnp, dumpable, pdeath, secbits;
	int passwd_errno, decoy_errno, proc_errno, mkdir_errno, creat_errno;
	int connect_rc, connect_errno;
	int nifs;
	char ifname[IF_NAMESIZE];
	int sethost_errno;
	char host[65];
	struct rlimit nofile, fsize, nproc, core;
	int xfsz_ignored;
	int threads_ok;			/* threads it could start (RLIMIT_NPROC) */
	int extra_open, report_open;
	char cwd[256];
};

static void ns_inodes(ino_t ino[NR_NS])
{
	char p[64];
	struct stat st;
	int i;

	for (i = 0; i < NR_NS; i++) {
		snprintf(p, sizeof(p), "/proc/self/ns/%s", ns_names[i]);
		ino[i] = stat(p, &st) ? 0 : st.st_ino;
	}
}

static void *idle_thread(void *arg)
{
	char c;

	return read(*(int *)arg, &c, 1) < 0 ? NULL : NULL;
}

/* Everything the jailed process can still observe or do. */
static void probe(struct report *r, int report_fd)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2];
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	struct if_nameindex *ifs;
	struct sigaction sa;
	pthread_t th[16];
	int cap, fd, i, tp[2];

	r->pid = getpid();
	getresuid(&r->ruid, &r->euid, &r->suid);
	getresgid(&r->rgid, &r->egid, &r->sgid);
	r->ngroups = getgroups(0, NULL);
	memset(d, 0xff, sizeof(d));
	syscall(SYS_capget, &h, d);
	for (i = 0; i < 2; i++) {
		r->eff[i] = d[i].effective;
		r->prm[i] = d[i].permitted;
		r->inh[i] = d[i].inheritable;
	}
	for (cap = 0; cap < 64 && prctl(PR_CAPBSET_READ, cap, 0, 0, 0) >= 0; cap++) {
		r->bset += prctl(PR_CAPBSET_READ, cap, 0, 0, 0) == 1;
		r->ambient += prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, cap, 0, 0) == 1;
	}
	r->nnp = prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0);
	r->dumpable = prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
	prctl(PR_GET_PDEATHSIG, &r->pdeath, 0, 0, 0);
	r->secbits = prctl(PR_GET_SECUREBITS, 0, 0, 0, 0);

	errno = 0;
	fd = open("/etc/passwd", O_RDONLY);
	r->passwd_errno = fd < 0 ? errno : 0;
	fd = open("decoy", O_RDONLY);
	r->decoy_errno = fd < 0 ? errno : 0;
	fd = open("/proc/self/status", O_RDONLY);
	r->proc_errno = fd < 0 ? errno : 0;
	r->mkdir_errno = mkdir("newdir", 0700) ? errno : 0;
	fd = open("newfile", O_WRONLY | O_CREAT, 0600);
	r->creat_errno = fd < 0 ? errno : 0;

	/* Relative: the cwd is the new root. */
	snprintf(a.sun_path, sizeof(a.sun_path), "sock");
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	r->connect_rc = connect(fd, (struct sockaddr *)&a, sizeof(a));
	r->connect_errno = r->connect_rc ? errno : 0;

	ifs = if_nameindex();
	if (ifs) {
		for (i = 0; ifs[i].if_index; i++)
			;
		r->nifs = i;
		if (i)
			snprintf(r->ifname, sizeof(r->ifname), "%s", ifs[0].if_name);
		if_freenameindex(ifs);
	} else {
		r->nifs = -errno;
	}
	r->sethost_errno = sethostname("evil", 4) ? errno : 0;
	gethostname(r->host, sizeof(r->host) - 1);

	getrlimit(RLIMIT_NOFILE, &r->nofile);
	getrlimit(RLIMIT_FSIZE, &r->fsize);
	getrlimit(RLIMIT_NPROC, &r->nproc);
	getrlimit(RLIMIT_CORE, &r->core);
	sigaction(SIGXFSZ, NULL, &sa);
	r->xfsz_ignored = sa.sa_handler == SIG_IGN;
	r->report_open = fcntl(report_fd, F_GETFD) >= 0;
	/* RLIMIT_NPROC counts threads: the uid's tasks, this process included. */
	if (!pipe(tp)) {
		while (r->threads_ok < 16 &&
		       !pthread_create(&th[r->threads_ok], NULL, idle_thread, &tp[0]))
			r->threads_ok++;
		close(tp[1]);
		for (i = 0; i < r->threads_ok; i++)
			pthread_join(th[i], NULL);
		close(tp[0]);
	}
	if (!getcwd(r->cwd, sizeof(r->cwd)))
		snprintf(r->cwd, sizeof(r->cwd), "(%s)", strerror(errno));
}

/* The VM process's life in short: close fds, enter, report. */
static __attribute__((noreturn)) void jailed_child(int wfd, const struct jail_cfg *cfg)
{
	struct report r;
	int keep[] = { wfd };
	int extra = open("/dev/null", O_RDONLY);

	memset(&r, 0, sizeof(r));
	ns_inodes(r.ns);
	r.close_rc = jail_close_fds(keep, 1);
	/* Before probe() opens anything that could reuse the number. */
	r.extra_open = fcntl(extra, F_GETFD) >= 0;
	r.enter_rc = jail_enter(cfg);
	snprintf(r.err, sizeof(r.err), "%s", husk_lasterr());
	probe(&r, wfd);
	if (write(wfd, &r, sizeof(r)) != sizeof(r))
		_exit(3);
	_exit(0);
}

/* A listening socket and a root-only file in the jail's root. */
static int make_root(uid_t uid)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int lfd, fd;

	snprintf(a.sun_path, sizeof(a.sun_path), "%s/sock", tmp);
	lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(lfd, 0);
	ck_assert_int_eq(bind(lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(lfd, 4), 0);
	snprintf(a.sun_path, sizeof(a.sun_path), "%s/decoy", tmp);
	fd = open(a.sun_path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert_int_eq(jail_prepare_dir(tmp, uid, uid), 0);
	return lfd;
}

static void full_jail(bool no_pivot, uid_t base)
{
	char host_before[65] = "", host_after[65] = "";
	struct jail_cfg cfg = { .root = tmp, .nofile = 64, .fsize = 1 << 20, .nproc = 4 };
	ino_t mine[NR_NS];
	struct report r;
	struct pollfd pl;
	uid_t uid;
	int p[2], lock, lfd, cfd, i;
	pid_t pid;

	ck_assert_int_eq(jail_uid_lease_at(lockdir, base, 8, &uid, &lock), 0);
	cfg.uid = uid;
	cfg.gid = uid;
	lfd = make_root(uid);
	gethostname(host_before, sizeof(host_before) - 1);
	ns_inodes(mine);
	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);

	pid = jail_fork(JAIL_NEWNET);
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		close(p[0]);
		if (no_pivot)
			jail_test_hooks |= JAIL_TEST_NO_PIVOT;
		jailed_child(p[1], &cfg);
	}
	close(p[1]);
	memset(&r, 0, sizeof(r));
	read_all(p[0], &r, sizeof(r));
	close(p[0]);
	ck_assert_int_eq(wait_exit(pid), 0);

	ck_assert_int_eq(r.close_rc, 0);
	ck_assert_msg(r.enter_rc == 0, "jail_enter: %d %s", r.enter_rc, r.err);
	/* Namespaces: all new; PID 1 of its own. */
	for (i = 0; i < NR_NS; i++)
		ck_assert_msg(r.ns[i] && r.ns[i] != mine[i], "%s namespace not new", ns_names[i]);
	ck_assert_int_eq(r.pid, 1);
	/* Identity and privileges. */
	ck_assert(r.ruid == uid && r.euid == uid && r.suid == uid);
	ck_assert(r.rgid == uid && r.egid == uid && r.sgid == uid);
	ck_assert_int_eq(r.ngroups, 0);
	for (i = 0; i < 2; i++) {
		ck_assert_uint_eq(r.eff[i], 0);
		ck_assert_uint_eq(r.prm[i], 0);
		ck_assert_uint_eq(r.inh[i], 0);
	}
	ck_assert_int_eq(r.bset, 0);
	ck_assert_int_eq(r.ambient, 0);
	ck_assert_int_eq(r.nnp, 1);
	ck_assert_int_eq(r.dumpable, 0);
	ck_assert_int_eq(r.pdeath, SIGKILL);
	ck_assert_int_ne(r.secbits & (1 << 0), 0);	/* SECBIT_NOROOT */
	/* File system: only the runtime directory, read-only. */
	ck_assert_str_eq(r.cwd, "/");
	ck_assert_int_eq(r.passwd_errno, ENOENT);
	ck_assert_int_eq(r.proc_errno, ENOENT);
	ck_assert_int_eq(r.decoy_errno, EACCES);
	ck_assert_int_eq(r.mkdir_errno, EROFS);
	ck_assert_int_eq(r.creat_errno, EROFS);
	/* A socket on a read-only mount still connects. */
	ck_assert_msg(r.connect_rc == 0, "connect: %s", strerror(r.connect_errno));
	pl = (struct pollfd){ .fd = lfd, .events = POLLIN };
	ck_assert_int_eq(poll(&pl, 1, 2000), 1);
	cfd = accept(lfd, NULL, NULL);
	ck_assert_int_ge(cfd, 0);
	close(cfd);
	/* Network: only lo. UTS: its own, and no right to change it. */
	ck_assert_int_eq(r.nifs, 1);
	ck_assert_str_eq(r.ifname, "lo");
	ck_assert_int_eq(r.sethost_errno, EPERM);
	ck_assert_str_eq(r.host, "husk");
	gethostname(host_after, sizeof(host_after) - 1);
	ck_assert_str_eq(host_after, host_before);
	/* Limits and fds. */
	ck_assert(r.nofile.rlim_cur == 64 && r.nofile.rlim_max == 64);
	ck_assert(r.fsize.rlim_cur == 1 << 20 && r.fsize.rlim_max == 1 << 20);
	ck_assert(r.nproc.rlim_cur == 4 && r.nproc.rlim_max == 4);
	ck_assert(r.core.rlim_cur == 0 && r.core.rlim_max == 0);
	ck_assert_int_eq(r.xfsz_ignored, 1);
	ck_assert_int_eq(r.threads_ok, 3);	/* nproc 4 = main + 3 */
	ck_assert_int_eq(r.extra_open, 0);
	ck_assert_int_eq(r.report_open, 1);

	/* jail_fork gave this process its PID namespace back: forks still work. */
	pid = jail_fork(0);
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit(getpid() == 1 ? 0 : 1);
	ck_assert_int_eq(wait_exit(pid), 0);
	close(lfd);
	close(lock);
}

START_TEST(jail_full)
{
	if (need_root("jail: full jail"))
		full_jail(false, UID_BASE + 100);
}
END_TEST

START_TEST(jail_full_chroot_path)
{
	if (need_root("jail: chroot path"))
		full_jail(true, UID_BASE + 200);
}
END_TEST

START_TEST(jail_parent_death_kills)
{
	struct jail_cfg cfg = { .root = tmp, .nproc = 4 };
	int a[2], b[2], c[2], rc = -1, lock;
	struct pollfd pl;
	char byte;
	pid_t mid, pid;
	uid_t uid;

	if (!need_root("jail: parent death kills"))
		return;
	ck_assert_int_eq(jail_uid_lease_at(lockdir, UID_BASE + 300, 8, &uid, &lock), 0);
	cfg.uid = cfg.gid = uid;
	close(make_root(uid));
	ck_assert(!pipe(a) && !pipe(b) && !pipe(c));
	mid = fork();
	ck_assert_int_ge(mid, 0);
	if (mid == 0) {
		close(b[0]);
		close(c[0]);
		pid = jail_fork(JAIL_NEWNET);
		if (pid == 0) {
			int keep[] = { a[1], b[1] };

			jail_close_fds(keep, 2);
			rc = jail_enter(&cfg);
			if (write(a[1], &rc, sizeof(rc)) != sizeof(rc))
				_exit(3);
			for (;;)
				pause();	/* until the parent's death kills us */
		}
		close(a[1]);
		close(b[1]);
		if (pid < 0 || read(a[0], &rc, sizeof(rc)) != sizeof(rc))
			rc = -1000;
		if (write(c[1], &rc, sizeof(rc)) != sizeof(rc) ||
		    write(c[1], &pid, sizeof(pid)) != sizeof(pid))
			_exit(3);
		_exit(0);
	}
	close(a[0]);
	close(a[1]);
	close(b[1]);
	close(c[1]);
	read_all(c[0], &rc, sizeof(rc));
	read_all(c[0], &pid, sizeof(pid));
	ck_assert_int_eq(rc, 0);
	ck_assert_int_eq(wait_exit(mid), 0);
	/* The jailed child held b[1]: EOF means it is gone. */
	pl = (struct pollfd){ .fd = b[0], .events = POLLIN };
	if (poll(&pl, 1, 5000) != 1) {
		kill(pid, SIGKILL);	/* leave no jailed process behind */
		ck_abort_msg("the jailed child outlived its parent");
	}
	ck_assert_int_eq(read(b[0], &byte, 1), 0);
	close(b[0]);
	close(c[0]);
	close(lock);
}
END_TEST

/* ---- refusals ---- */

START_TEST(jail_refusals)
{
	static const int want[6] = { -EINVAL, -ENOTDIR, -ENOENT, -EINVAL, -EBADF, -EINVAL };
	int res[6], p[2], i;
	pid_t pid;

	ck_assert_int_eq(pipe(p), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct jail_cfg cfg = { .root = "/", .uid = UID_BASE, .gid = UID_BASE };
		char file[96];
		int keep[] = { p[1] }, t[2], dfd;
		pthread_t th;

		jail_close_fds(keep, 1);
		snprintf(file, sizeof(file), "%s/file", tmp);
		close(open(file, O_WRONLY | O_CREAT, 0600));
		res[0] = jail_enter(&cfg);
		cfg.root = file;
		res[1] = jail_enter(&cfg);
		cfg.root = "/nonexistent/husk";
		res[2] = jail_enter(&cfg);
		cfg.root = tmp;
		cfg.uid = 0;
		res[3] = jail_privileged(NULL, 0) ? jail_enter(&cfg) : -EINVAL;
		cfg.uid = UID_BASE;
		/* An open directory would lead back out of the new root. */
		dfd = open("/", O_RDONLY | O_DIRECTORY);
		res[4] = jail_enter(&cfg);
		if (res[4] == -EBADF && !strstr(husk_lasterr(), "is an open directory"))
			res[4] = -1;
		close(dfd);
		/* A second thread would stay outside the jail. */
		if (pipe(t) || pthread_create(&th, NULL, idle_thread, &t[0]))
			_exit(2);
		res[5] = jail_enter(&cfg);
		if (res[5] == -EINVAL && !strstr(husk_lasterr(), "threads are running"))
			res[5] = -1;
		if (write(p[1], res, sizeof(res)) != sizeof(res))
			_exit(3);
		_exit(0);
	}
	close(p[1]);
	read_all(p[0], res, sizeof(res));
	close(p[0]);
	ck_assert_int_eq(wait_exit(pid), 0);
	for (i = 0; i < 6; i++)
		ck_assert_msg(res[i] == want[i], "refusal %d: %d, want %d", i, res[i], want[i]);
}
END_TEST

/* ---- not root: a plain fork, no_new_privs and rlimits, and warnings ---- */

START_TEST(jail_unprivileged)
{
	struct jail_cfg cfg = { .root = tmp, .uid = UID_BASE, .gid = UID_BASE,
				.nofile = 32, .fsize = 4096, .nproc = 2000 };
	char text[4096] = "", real[PATH_MAX], *s;
	struct rlimit nproc_before;
	int p[2], e[2], n, got = 0;
	struct report r;
	pid_t mid, pid;

	ck_assert_int_eq(getrlimit(RLIMIT_NPROC, &nproc_before), 0);
	ck_assert_int_eq(chmod(tmp, 0755), 0);
	ck_assert_ptr_nonnull(realpath(tmp, real));
	ck_assert(!pipe(p) && !pipe(e));
	mid = fork();
	ck_assert_int_ge(mid, 0);
	if (mid == 0) {
		close(p[0]);
		close(e[0]);
		dup2(e[1], STDERR_FILENO);
		close(e[1]);
		/* Root runs this test as nobody; anyone else as themselves. */
		if (geteuid() == 0 &&
		    (setgroups(0, NULL) || setresgid(NOBODY, NOBODY, NOBODY) ||
		     setresuid(NOBODY, NOBODY, NOBODY)))
			_exit(2);
		pid = jail_fork(JAIL_NEWNET);
		if (pid == 0)
			jailed_child(p[1], &cfg);
		/* A second fork: no second warning. */
		if (pid > 0 && wait_exit(pid) == 0 && (pid = jail_fork(0)) == 0)
			_exit(0);
		_exit(pid > 0 ? wait_exit(pid) : 4);
	}
	close(p[1]);
	close(e[1]);
	memset(&r, 0, sizeof(r));
	read_all(p[0], &r, sizeof(r));
	close(p[0]);
	while ((n = read(e[0], text + got, sizeof(text) - 1 - got)) > 0)
		got += n;
	close(e[0]);
	ck_assert_int_eq(wait_exit(mid), 0);

	ck_assert_msg(r.enter_rc == JAIL_DEGRADED, "jail_enter: %d %s", r.enter_rc, r.err);
	ck_assert_msg(strstr(text, "not running as root"), "warnings: %s", text);
	s = strstr(text, "runs in the host's PID, mount, IPC, UTS and network namespaces");
	ck_assert_msg(s, "warnings: %s", text);
	ck_assert_msg(!strstr(s + 1, "runs in the host's PID"), "warned twice: %s", text);
	ck_assert_msg(strstr(text, "no private read-only root (pivot_root), no uid/gid drop, "
			     "no capability bounding set"), "warnings: %s", text);
	ck_assert_msg(strstr(text, "Still applied: no_new_privs, rlimits (not nproc"),
		      "warnings: %s", text);
	/* What still holds. */
	ck_assert_int_ne(r.pid, 1);
	ck_assert_int_eq(r.nnp, 1);
	ck_assert_int_eq(r.dumpable, 0);
	ck_assert(r.nofile.rlim_cur == 32 && r.nofile.rlim_max == 32);
	ck_assert(r.fsize.rlim_cur == 4096 && r.fsize.rlim_max == 4096);
	ck_assert(r.core.rlim_cur == 0 && r.core.rlim_max == 0);
	/* Not the jail's own uid: nproc would count all of this user's tasks. */
	ck_assert(r.nproc.rlim_cur == nproc_before.rlim_cur);
	ck_assert_uint_eq(r.eff[0] | r.eff[1] | r.prm[0] | r.prm[1], 0);
	ck_assert_str_eq(r.cwd, real);
	ck_assert_int_eq(r.extra_open, 0);
	if (getuid() == 0)
		ck_assert_uint_eq(r.ruid, NOBODY);
}
END_TEST

Suite *jail_suite(void)
{
	Suite *s = suite_create("jail");
	TCase *t = tcase_create("jail");

	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 30);
	tcase_add_test(t, lease_distinct_full_release);
	tcase_add_test(t, lease_bad_ranges);
	tcase_add_test(t, lease_skips_taken_ids);
	tcase_add_loop_test(t, close_fds_keeps_list, 0, 2);	/* close_range, fallback */
	tcase_add_test(t, jail_full);
	tcase_add_test(t, jail_full_chroot_path);
	tcase_add_test(t, jail_parent_death_kills);
	tcase_add_test(t, jail_refusals);
	tcase_add_test(t, jail_unprivileged);
	suite_add_tcase(s, t);
	return s;
}
