/*
 * Unit tests for cgroup: fake v1, v2 and mixed cgroup trees in a temporary
 * directory, described by a fake mountinfo (cgroup_set_test_hooks). A
 * small "kernel" here fills each new directory with the files cgroupfs
 * would give it, so every value the module writes (limits, swap settings,
 * v2 subtree_control at each level) can be read back; teardown, rollback
 * after a failed write, stale-group cleanup and limit validation too.
 * Processes "in" a fake group are real children of the test, so killing
 * is checked for real.
 */
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox/cgroup.h"
#include "suites.h"
#include "lib/util.h"

#define MiB (1ull << 20)

static char tmp[256];		/* the fake system's directory */
static char rootdir[300];	/* prefix of every mount point */
static bool fake_has_kill;	/* v2 kernels >= 5.14 have cgroup.kill */
static bool fake_has_swap;	/* v2 kernels with swap have memory.swap.max */

/* ---- the fake tree ---- */

static void put(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	ck_assert_msg(f != NULL, "create %s: %s", path, strerror(errno));
	fputs(text, f);
	fclose(f);
}

/* Contents of a file (static buffer), trailing newline dropped; "<none>" if absent. */
static const char *get(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static const char *get(const char *fmt, ...)
{
	static char buf[4][512];
	static unsigned k;
	char path[600];
	va_list ap;
	size_t n;
	FILE *f;

	va_start(ap, fmt);
	vsnprintf(path, sizeof(path), fmt, ap);
	va_end(ap);
	k = (k + 1) % 4;
	f = fopen(path, "r");
	if (!f)
		return "<none>";
	n = fread(buf[k], 1, sizeof(buf[k]) - 1, f);
	fclose(f);
	buf[k][n] = '\0';
	while (n && buf[k][n - 1] == '\n')
		buf[k][--n] = '\0';
	return buf[k];
}

static bool exists(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static bool exists(const char *fmt, ...)
{
	char path[600];
	struct stat st;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(path, sizeof(path), fmt, ap);
	va_end(ap);
	return stat(path, &st) == 0;
}

/* How many vm-* directories a husk/ parent holds; -1 if it does not exist. */
static int count_vm(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int count_vm(const char *fmt, ...)
{
	char path[600];
	struct dirent *de;
	va_list ap;
	int n = 0;
	DIR *d;

	va_start(ap, fmt);
	vsnprintf(path, sizeof(path), fmt, ap);
	va_end(ap);
	d = opendir(path);
	if (!d)
		return -1;
	while ((de = readdir(d)))
		if (!strncmp(de->d_name, "vm-", 3))
			n++;
	closedir(d);
	return n;
}

static void touch_in(const char *dir, const char *name)
{
	char p[600];

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	put(p, "");
}

static bool v2_enabled(const char *list, const char *ctrl)
{
	char buf[256], *tok, *save;

	snprintf(buf, sizeof(buf), "%s", list);
	for (tok = strtok_r(buf, " +\n", &save); tok; tok = strtok_r(NULL, " +\n", &save))
		if (!strcmp(tok, ctrl))
			return true;
	return false;
}

/*
 * What cgroupfs does on mkdir. v1: the new group has the files of its
 * parent. v2: core files, plus those of each controller the parent's
 * cgroup.subtree_control enables.
 */
static void fake_populate(const char *dir)
{
	char parent[600], p[700];
	const char *sub;
	struct dirent *de;
	DIR *d;

	snprintf(parent, sizeof(parent), "%s", dir);
	*strrchr(parent, '/') = '\0';
	snprintf(p, sizeof(p), "%s/cgroup.subtree_control", parent);
	if (!exists("%s", p)) {
		d = opendir(parent);
		ck_assert_ptr_nonnull(d);
		while ((de = readdir(d)))
			if (de->d_type == DT_REG)
				touch_in(dir, de->d_name);
		closedir(d);
		return;
	}
	sub = get("%s", p);
	touch_in(dir, "cgroup.procs");
	touch_in(dir, "cgroup.subtree_control");
	touch_in(dir, "cgroup.events");
	touch_in(dir, "cpu.stat");
	snprintf(p, sizeof(p), "%s/cgroup.controllers", dir);
	put(p, "");
	if (fake_has_kill)
		touch_in(dir, "cgroup.kill");
	if (v2_enabled(sub, "cpu")) {
		touch_in(dir, "cpu.max");
		touch_in(dir, "cpu.weight");
	}
	if (v2_enabled(sub, "memory")) {
		touch_in(dir, "memory.max");
		touch_in(dir, "memory.current");
		touch_in(dir, "memory.events");
		if (fake_has_swap)
			touch_in(dir, "memory.swap.max");
	}
	if (v2_enabled(sub, "pids")) {
		touch_in(dir, "pids.max");
		touch_in(dir, "pids.current");
	}
}

/* Under the fake root: mkdir -p, then create the listed files (NULL-terminated). */
static void fake_dir(const char *rel, ...)
{
	char path[600], *s;
	const char *f;
	va_list ap;

	snprintf(path, sizeof(path), "%s%s", rootdir, rel);
	for (s = path + strlen(rootdir) + 1; (s = strchr(s, '/')); s++) {
		*s = '\0';
		mkdir(path, 0755);
		*s = '/';
	}
	mkdir(path, 0755);
	va_start(ap, rel);
	while ((f = va_arg(ap, const char *)))
		touch_in(path, f);
	va_end(ap);
}

static void fake_write(const char *rel, const char *text)
{
	char path[600];

	snprintf(path, sizeof(path), "%s%s", rootdir, rel);
	put(path, text);
}

static void fake_mountinfo(const char *text)
{
	char path[300];
	static char mi[300];
	struct cgroup_test_hooks h;

	snprintf(path, sizeof(path), "%s/mountinfo", tmp);
	put(path, text);
	snprintf(mi, sizeof(mi), "%s", path);
	memset(&h, 0, sizeof(h));
	h.mountinfo = mi;
	h.root = rootdir;
	h.populate = fake_populate;
	cgroup_set_test_hooks(&h);
}

#define MI_TMPFS "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
#define MI_V1(id, dir, opts) \
	#id " 31 0:" #id " / /sys/fs/cgroup/" dir " rw,relatime - cgroup cgroup rw," opts "\n"
#define MI_UNIFIED "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"
#define MI_V2 "30 23 0:27 / /sys/fs/cgroup rw,nosuid shared:9 - cgroup2 cgroup2 rw,nsdelegate\n"

/* This build host: one v1 hierarchy per controller, an empty cgroup2 beside. */
static void layout_v1_split(void)
{
	fake_mountinfo("22 1 8:1 / / rw - ext4 /dev/sda1 rw\n" MI_TMPFS
		       MI_V1(32, "cpu", "cpu") MI_V1(33, "cpuacct", "cpuacct")
		       MI_V1(34, "cpuset", "cpuset") MI_V1(35, "memory", "memory")
		       MI_V1(39, "pids", "pids") MI_V1(40, "systemd", "name=systemd")
		       MI_UNIFIED);
	fake_dir("/sys/fs/cgroup/cpu", "cgroup.procs", "tasks", "cpu.cfs_period_us",
		 "cpu.cfs_quota_us", "cpu.stat", "cpu.shares", NULL);
	fake_dir("/sys/fs/cgroup/cpuacct", "cgroup.procs", "tasks", "cpuacct.usage", NULL);
	fake_dir("/sys/fs/cgroup/cpuset", "cgroup.procs", "cpuset.cpus", NULL);
	fake_dir("/sys/fs/cgroup/memory", "cgroup.procs", "tasks", "memory.limit_in_bytes",
		 "memory.memsw.limit_in_bytes", "memory.swappiness",
		 "memory.max_usage_in_bytes", "memory.oom_control", NULL);
	fake_dir("/sys/fs/cgroup/pids", "cgroup.procs", "tasks", "pids.max", "pids.current",
		 NULL);
	fake_dir("/sys/fs/cgroup/systemd", "cgroup.procs", NULL);
	fake_dir("/sys/fs/cgroup/unified", "cgroup.procs", "cgroup.subtree_control", NULL);
	fake_write("/sys/fs/cgroup/unified/cgroup.controllers", "hugetlb\n");
}

static void layout_v2(const char *controllers)
{
	fake_mountinfo("22 1 8:1 / / rw - ext4 /dev/sda1 rw\n" MI_V2);
	fake_dir("/sys/fs/cgroup", "cgroup.procs", "cgroup.subtree_control", NULL);
	fake_write("/sys/fs/cgroup/cgroup.controllers", controllers);
}

static int rm_cb(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(p);
}

static void setup(void)
{
	snprintf(tmp, sizeof(tmp), "/tmp/husk-cgtest-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmp));
	snprintf(rootdir, sizeof(rootdir), "%s/root", tmp);
	mkdir(rootdir, 0755);
	fake_has_kill = false;
	fake_has_swap = true;
}

static void teardown(void)
{
	cgroup_set_test_hooks(NULL);
	nftw(tmp, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

/* A child that sleeps until killed; stands for the jailed VM process. */
static pid_t sleeper(void)
{
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		for (;;)
			pause();
	}
	return pid;
}

static void assert_killed(pid_t pid)
{
	int st;

	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert(WIFSIGNALED(st));
	ck_assert_int_eq(WTERMSIG(st), SIGKILL);
}

static const struct cgroup_limits std_limits = { 500, 64 * MiB, 16 };

/* ---- tests ---- */

START_TEST(v1_split_hierarchies)
{
	const char *cg1 = "root/sys/fs/cgroup";
	struct husk_cgroup cg;
	struct cgroup_usage u;
	char pidtxt[16];
	pid_t child;

	layout_v1_split();
	ck_assert_int_eq(cgroup_create(&cg, &std_limits), 0);
	ck_assert_str_eq(cgroup_mode_name(&cg), "v1");
	ck_assert_uint_eq(cg.ndirs, 4);
	ck_assert(strncmp(cg.name, "vm-", 3) == 0);

	ck_assert_str_eq(get("%s/%s/cpu/husk/%s/cpu.cfs_period_us", tmp, cg1, cg.name), "100000");
	ck_assert_str_eq(get("%s/%s/cpu/husk/%s/cpu.cfs_quota_us", tmp, cg1, cg.name), "50000");
	ck_assert(exists("%s/%s/cpuacct/husk/%s", tmp, cg1, cg.name));
	ck_assert_str_eq(get("%s/%s/memory/husk/%s/memory.limit_in_bytes", tmp, cg1, cg.name),
			 "67108864");
	ck_assert_str_eq(get("%s/%s/memory/husk/%s/memory.memsw.limit_in_bytes", tmp, cg1,
			     cg.name), "67108864");
	ck_assert_str_eq(get("%s/%s/memory/husk/%s/memory.swappiness", tmp, cg1, cg.name), "0");
	ck_assert_str_eq(get("%s/%s/pids/husk/%s/pids.max", tmp, cg1, cg.name), "16");
	/* Hierarchies without our controllers are left alone. */
	ck_assert(!exists("%s/%s/cpuset/husk", tmp, cg1));
	ck_assert(!exists("%s/%s/systemd/husk", tmp, cg1));
	ck_assert(!exists("%s/%s/unified/husk", tmp, cg1));

	child = sleeper();
	ck_assert_int_eq(cgroup_attach(&cg, child), 0);
	snprintf(pidtxt, sizeof(pidtxt), "%d", (int)child);
	ck_assert_str_eq(get("%s/%s/cpu/husk/%s/cgroup.procs", tmp, cg1, cg.name), pidtxt);
	ck_assert_str_eq(get("%s/%s/cpuacct/husk/%s/cgroup.procs", tmp, cg1, cg.name), pidtxt);
	ck_assert_str_eq(get("%s/%s/memory/husk/%s/cgroup.procs", tmp, cg1, cg.name), pidtxt);
	ck_assert_str_eq(get("%s/%s/pids/husk/%s/cgroup.procs", tmp, cg1, cg.name), pidtxt);

	{
		char rel[300];

		snprintf(rel, sizeof(rel), "/sys/fs/cgroup/cpuacct/husk/%s/cpuacct.usage", cg.name);
		fake_write(rel, "123456789\n");
		snprintf(rel, sizeof(rel), "/sys/fs/cgroup/cpu/husk/%s/cpu.stat", cg.name);
		fake_write(rel, "nr_periods 10\nnr_throttled 3\nthrottled_time 7000\n");
		snprintf(rel, sizeof(rel), "/sys/fs/cgroup/memory/husk/%s/memory.max_usage_in_bytes",
			 cg.name);
		fake_write(rel, "5242880\n");
		snprintf(rel, sizeof(rel), "/sys/fs/cgroup/memory/husk/%s/memory.oom_control",
			 cg.name);
		fake_write(rel, "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n");
	}
	ck_assert_int_eq(cgroup_read_usage(&cg, &u), 0);
	ck_assert_uint_eq(u.have, CGROUP_USAGE_CPU | CGROUP_USAGE_THROTTLED |
			  CGROUP_USAGE_MEM_PEAK | CGROUP_USAGE_OOM);
	ck_assert_uint_eq(u.cpu_us, 123456);
	ck_assert_uint_eq(u.cpu_throttled_us, 7);
	ck_assert_uint_eq(u.mem_peak_bytes, 5 * MiB);
	ck_assert_uint_eq(u.oom_kills, 2);

	ck_assert_int_eq(cgroup_destroy(&cg), 0);
	assert_killed(child);
	ck_assert(!exists("%s/%s/cpu/husk/%s", tmp, cg1, cg.name));
	ck_assert(!exists("%s/%s/cpuacct/husk/%s", tmp, cg1, cg.name));
	ck_assert(!exists("%s/%s/memory/husk/%s", tmp, cg1, cg.name));
	ck_assert(!exists("%s/%s/pids/husk/%s", tmp, cg1, cg.name));
	/* The shared parent stays: other husks may be creating groups in it. */
	ck_assert(exists("%s/%s/memory/husk", tmp, cg1));
	ck_assert_str_eq(cgroup_mode_name(&cg), "none");
	/* Idempotent. */
	ck_assert_int_eq(cgroup_destroy(&cg), 0);
	ck_assert_int_eq(cgroup_attach(&cg, getpid()), -EINVAL);
}
END_TEST

/* cpu and cpuacct in one hierarchy; no swap accounting (no memsw files). */
START_TEST(v1_combined_cpu_no_memsw)
{
	const char *cg1 = "root/sys/fs/cgroup";
	struct husk_cgroup cg;

	fake_mountinfo(MI_TMPFS MI_V1(32, "cpu,cpuacct", "cpu,cpuacct")
		       MI_V1(35, "memory", "memory") MI_V1(39, "pids", "pids"));
	fake_dir("/sys/fs/cgroup/cpu,cpuacct", "cgroup.procs", "cpu.cfs_period_us",
		 "cpu.cfs_quota_us", "cpuacct.usage", NULL);
	fake_dir("/sys/fs/cgroup/memory", "cgroup.procs", "memory.limit_in_bytes",
		 "memory.swappiness", NULL);
	fake_dir("/sys/fs/cgroup/pids", "cgroup.procs", "pids.max", NULL);
	ck_assert_int_eq(cgroup_create(&cg, &(struct cgroup_limits){ 1000, 512 * MiB, 100 }), 0);
	ck_assert_uint_eq(cg.ndirs, 3);
	ck_assert_uint_eq(cg.dir[0].ctrls, CGROUP_CPU | CGROUP_CPUACCT);
	ck_assert_str_eq(get("%s/%s/cpu,cpuacct/husk/%s/cpu.cfs_quota_us", tmp, cg1, cg.name),
			 "100000");
	ck_assert_str_eq(get("%s/%s/memory/husk/%s/memory.limit_in_bytes", tmp, cg1, cg.name),
			 "536870912");
	ck_assert(!exists("%s/%s/memory/husk/%s/memory.memsw.limit_in_bytes", tmp, cg1, cg.name));
	ck_assert_str_eq(get("%s/%s/pids/husk/%s/pids.max", tmp, cg1, cg.name), "100");
	ck_assert_int_eq(cgroup_destroy(&cg), 0);
	ck_assert(!exists("%s/%s/memory/husk/%s", tmp, cg1, cg.name));
}
END_TEST

START_TEST(v2_delegates_and_limits)
{
	const char *c2 = "root/sys/fs/cgroup";
	struct husk_cgroup cg;
	struct cgroup_usage u;
	char rel[300];
	pid_t child;

	fake_has_kill = true;
	layout_v2("cpuset cpu io memory hugetlb pids rdma misc\n");
	ck_assert_int_eq(cgroup_create(&cg, &std_limits), 0);
	ck_assert_str_eq(cgroup_mode_name(&cg), "v2");
	ck_assert_uint_eq(cg.ndirs, 1);
	ck_assert(cg.dir[0].v2);
	ck_assert_uint_eq(cg.dir[0].ctrls, CGROUP_CPU | CGROUP_MEMORY | CGROUP_PIDS);
	/* Controllers handed down at each level, only our three. */
	ck_assert_str_eq(get("%s/%s/cgroup.subtree_control", tmp, c2), "+cpu +memory +pids");
	ck_assert_str_eq(get("%s/%s/husk/cgroup.subtree_control", tmp, c2), "+cpu +memory +pids");
	ck_assert_str_eq(get("%s/%s/husk/%s/cgroup.subtree_control", tmp, c2, cg.name), "");
	ck_assert_str_eq(get("%s/%s/husk/%s/cpu.max", tmp, c2, cg.name), "50000 100000");
	ck_assert_str_eq(get("%s/%s/husk/%s/memory.max", tmp, c2, cg.name), "67108864");
	ck_assert_str_eq(get("%s/%s/husk/%s/memory.swap.max", tmp, c2, cg.name), "0");
	ck_assert_str_eq(get("%s/%s/husk/%s/pids.max", tmp, c2, cg.name), "16");
	/* No process is ever put into the parents. */
	ck_assert_str_eq(get("%s/%s/husk/cgroup.procs", tmp, c2), "");

	child = sleeper();
	ck_assert_int_eq(cgroup_attach(&cg, child), 0);
	snprintf(rel, sizeof(rel), "%d", (int)child);
	ck_assert_str_eq(get("%s/%s/husk/%s/cgroup.procs", tmp, c2, cg.name), rel);

	snprintf(rel, sizeof(rel), "/sys/fs/cgroup/husk/%s/cpu.stat", cg.name);
	fake_write(rel, "usage_usec 4242\nuser_usec 4000\nsystem_usec 242\nnr_periods 5\n"
		   "nr_throttled 1\nthrottled_usec 99\n");
	snprintf(rel, sizeof(rel), "/sys/fs/cgroup/husk/%s/memory.current", cg.name);
	fake_write(rel, "1048576\n");
	snprintf(rel, sizeof(rel), "/sys/fs/cgroup/husk/%s/memory.events", cg.name);
	fake_write(rel, "low 0\nhigh 0\nmax 4\noom 1\noom_kill 1\n");
	ck_assert_int_eq(cgroup_read_usage(&cg, &u), 0);
	ck_assert_uint_eq(u.have, CGROUP_USAGE_CPU | CGROUP_USAGE_THROTTLED |
			  CGROUP_USAGE_MEM_PEAK | CGROUP_USAGE_OOM);
	ck_assert_uint_eq(u.cpu_us, 4242);
	ck_assert_uint_eq(u.cpu_throttled_us, 99);
	ck_assert_uint_eq(u.mem_peak_bytes, MiB);	/* no memory.peak: current */
	ck_assert_uint_eq(u.oom_kills, 1);
	snprintf(rel, sizeof(rel), "/sys/fs/cgroup/husk/%s/memory.peak", cg.name);
	fake_write(rel, "3145728\n");
	ck_assert_int_eq(cgroup_read_usage(&cg, &u), 0);
	ck_assert_uint_eq(u.mem_peak_bytes, 3 * MiB);

	ck_assert_int_eq(cgroup_destroy(&cg), 0);
	assert_killed(child);
	ck_assert(!exists("%s/%s/husk/%s", tmp, c2, cg.name));
	ck_assert(exists("%s/%s/husk", tmp, c2));
}
END_TEST

/* Already delegated (second husk, or systemd did it): nothing rewritten. */
START_TEST(v2_already_enabled_and_no_swap)
{
	const char *c2 = "root/sys/fs/cgroup";
	struct husk_cgroup a, b;

	fake_has_swap = false;
	layout_v2("cpu memory pids\n");
	fake_write("/sys/fs/cgroup/cgroup.subtree_control", "cpu io memory pids\n");
	ck_assert_int_eq(cgroup_create(&a, &std_limits), 0);
	ck_assert_str_eq(get("%s/%s/cgroup.subtree_control", tmp, c2), "cpu io memory pids");
	ck_assert(!exists("%s/%s/husk/%s/memory.swap.max", tmp, c2, a.name));
	fake_write("/sys/fs/cgroup/husk/cgroup.subtree_control", "cpu memory pids\n");
	ck_assert_int_eq(cgroup_create(&b, &std_limits), 0);
	ck_assert_str_eq(get("%s/%s/husk/cgroup.subtree_control", tmp, c2), "cpu memory pids");
	/* Two groups of one process never collide. */
	ck_assert_str_ne(a.name, b.name);
	ck_assert_int_eq(cgroup_destroy(&a), 0);
	ck_assert_int_eq(cgroup_destroy(&b), 0);
}
END_TEST

/* memory and pids on v2, cpu only in a v1 hierarchy. */
START_TEST(mixed_v2_and_v1)
{
	const char *c = "root/sys/fs/cgroup";
	struct husk_cgroup cg;
	char pidtxt[16];
	pid_t child;

	fake_mountinfo(MI_TMPFS MI_V1(32, "cpu,cpuacct", "cpu,cpuacct") MI_UNIFIED);
	fake_dir("/sys/fs/cgroup/cpu,cpuacct", "cgroup.procs", "cpu.cfs_period_us",
		 "cpu.cfs_quota_us", "cpuacct.usage", NULL);
	fake_dir("/sys/fs/cgroup/unified", "cgroup.procs", "cgroup.subtree_control", NULL);
	fake_write("/sys/fs/cgroup/unified/cgroup.controllers", "memory pids\n");
	ck_assert_int_eq(cgroup_create(&cg, &std_limits), 0);
	ck_assert_str_eq(cgroup_mode_name(&cg), "mixed");
	ck_assert_uint_eq(cg.ndirs, 2);
	ck_assert(cg.dir[0].v2);
	ck_assert_uint_eq(cg.dir[0].ctrls, CGROUP_MEMORY | CGROUP_PIDS);
	ck_assert(!cg.dir[1].v2);
	ck_assert_uint_eq(cg.dir[1].ctrls, CGROUP_CPU);
	ck_assert_str_eq(get("%s/%s/unified/cgroup.subtree_control", tmp, c), "+memory +pids");
	ck_assert_str_eq(get("%s/%s/unified/husk/cgroup.subtree_control", tmp, c),
			 "+memory +pids");
	ck_assert_str_eq(get("%s/%s/unified/husk/%s/memory.max", tmp, c, cg.name), "67108864");
	ck_assert_str_eq(get("%s/%s/unified/husk/%s/memory.swap.max", tmp, c, cg.name), "0");
	ck_assert_str_eq(get("%s/%s/unified/husk/%s/pids.max", tmp, c, cg.name), "16");
	ck_assert(!exists("%s/%s/unified/husk/%s/cpu.max", tmp, c, cg.name));
	ck_assert_str_eq(get("%s/%s/cpu,cpuacct/husk/%s/cpu.cfs_quota_us", tmp, c, cg.name),
			 "50000");
	child = sleeper();
	ck_assert_int_eq(cgroup_attach(&cg, child), 0);
	snprintf(pidtxt, sizeof(pidtxt), "%d", (int)child);
	ck_assert_str_eq(get("%s/%s/unified/husk/%s/cgroup.procs", tmp, c, cg.name), pidtxt);
	ck_assert_str_eq(get("%s/%s/cpu,cpuacct/husk/%s/cgroup.procs", tmp, c, cg.name), pidtxt);
	ck_assert_int_eq(cgroup_destroy(&cg), 0);
	assert_killed(child);
	ck_assert(!exists("%s/%s/unified/husk/%s", tmp, c, cg.name));
	ck_assert(!exists("%s/%s/cpu,cpuacct/husk/%s", tmp, c, cg.name));
}
END_TEST

/* Zero limits: groups made (accounting, swap), no limit files touched. */
START_TEST(zero_limits_write_no_limits)
{
	const char *cg1 = "root/sys/fs/cgroup";
	struct husk_cgroup cg;

	layout_v1_split();
	ck_assert_int_eq(cgroup_create(&cg, &(struct cgroup_limits){ 0, 0, 0 }), 0);
	ck_assert_uint_eq(cg.ndirs, 4);
	ck_assert_str_eq(get("%s/%s/cpu/husk/%s/cpu.cfs_quota_us", tmp, cg1, cg.name), "");
	ck_assert_str_eq(get("%s/%s/memory/husk/%s/memory.limit_in_bytes", tmp, cg1, cg.name), "");
	ck_assert_str_eq(get("%s/%s/memory/husk/%s/memory.memsw.limit_in_bytes", tmp, cg1,
			     cg.name), "");
	ck_assert_str_eq(get("%s/%s/memory/husk/%s/memory.swappiness", tmp, cg1, cg.name), "0");
	ck_assert_str_eq(get("%s/%s/pids/husk/%s/pids.max", tmp, cg1, cg.name), "");
	ck_assert_int_eq(cgroup_destroy(&cg), 0);
}
END_TEST

START_TEST(bad_limits_refused)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	const struct cgroup_limits bad[] = {
		{ 5, 0, 0 }, { 9, 0, 0 }, { 1000 * ncpu + 1, 0, 0 },
		{ 0, 1, 0 }, { 0, CGROUP_MEM_MIN - 1, 0 }, { 0, CGROUP_MEM_MAX + 1, 0 },
		{ 0, 0, CGROUP_PIDS_MAX + 1 }, { 0, 0, UINT64_MAX },
	};
	struct husk_cgroup cg;
	unsigned i;

	layout_v1_split();
	for (i = 0; i < ARRAY_SIZE(bad); i++) {
		ck_assert_msg(cgroup_create(&cg, &bad[i]) == -ERANGE, "accepted #%u", i);
		ck_assert_uint_eq(cg.ndirs, 0);
	}
	ck_assert(strstr(husk_lasterr(), "pids limit") != NULL);
	ck_assert_int_eq(cgroup_create(&cg, NULL), -EINVAL);
	ck_assert_int_eq(cgroup_create(NULL, &std_limits), -EINVAL);
	ck_assert_int_eq(cgroup_check_limits(&(struct cgroup_limits){ 10, CGROUP_MEM_MIN, 1 }), 0);
	ck_assert_int_eq(cgroup_check_limits(&(struct cgroup_limits){ 1000 * ncpu,
				CGROUP_MEM_MAX, CGROUP_PIDS_MAX }), 0);
	/* Nothing was created by any refused call. */
	ck_assert(!exists("%s/root/sys/fs/cgroup/memory/husk", tmp));
}
END_TEST

START_TEST(missing_hierarchies)
{
	struct husk_cgroup cg;

	/* No cgroup mount at all. */
	fake_mountinfo("22 1 8:1 / / rw - ext4 /dev/sda1 rw\n" MI_TMPFS);
	ck_assert_int_eq(cgroup_create(&cg, &(struct cgroup_limits){ 0, 0, 0 }), -ENOENT);
	ck_assert_int_eq(cgroup_create(&cg, &std_limits), -ENOTSUP);
	/* An empty cgroup2 (its root offers nothing) is no better. */
	fake_mountinfo(MI_TMPFS MI_UNIFIED);
	fake_dir("/sys/fs/cgroup/unified", "cgroup.procs", "cgroup.subtree_control", NULL);
	fake_write("/sys/fs/cgroup/unified/cgroup.controllers", "hugetlb\n");
	ck_assert_int_eq(cgroup_create(&cg, &(struct cgroup_limits){ 0, 0, 0 }), -ENOENT);
	/* Only memory: asking for a CPU quota names the missing controller. */
	fake_mountinfo(MI_TMPFS MI_V1(35, "memory", "memory"));
	fake_dir("/sys/fs/cgroup/memory", "cgroup.procs", "memory.limit_in_bytes",
		 "memory.swappiness", NULL);
	ck_assert_int_eq(cgroup_create(&cg, &std_limits), -ENOTSUP);
	ck_assert(strstr(husk_lasterr(), "'cpu'") != NULL);
	ck_assert(!exists("%s/root/sys/fs/cgroup/memory/husk", tmp));
	/* ... but a memory-only limit works there. */
	ck_assert_int_eq(cgroup_create(&cg, &(struct cgroup_limits){ 0, 64 * MiB, 0 }), 0);
	ck_assert_str_eq(cgroup_mode_name(&cg), "v1");
	ck_assert_int_eq(cgroup_destroy(&cg), 0);
	/* No mountinfo. */
	cgroup_set_test_hooks(&(struct cgroup_test_hooks){ .mountinfo = "/nonexistent/mi",
							   .root = rootdir });
	ck_assert_int_eq(cgroup_create(&cg, &std_limits), -ENOENT);
	ck_assert(strstr(husk_lasterr(), "/nonexistent/mi") != NULL);
	ck_assert_int_eq(cgroup_clean_stale(), -ENOENT);
}
END_TEST

/* A limit file the kernel refuses (here: missing): nothing is left behind. */
START_TEST(failed_write_rolls_back)
{
	const char *cg1 = "root/sys/fs/cgroup";
	char path[600];
	struct husk_cgroup cg;

	layout_v1_split();
	snprintf(path, sizeof(path), "%s/%s/pids/pids.max", tmp, cg1);
	unlink(path);
	ck_assert_int_eq(cgroup_create(&cg, &std_limits), -ENOENT);
	ck_assert_msg(strstr(husk_lasterr(), "pids.max") != NULL, "%s", husk_lasterr());
	ck_assert_uint_eq(cg.ndirs, 0);
	ck_assert_str_eq(cgroup_mode_name(&cg), "none");
	ck_assert_int_eq(cgroup_destroy(&cg), 0);
	/* The directories made before the failure are gone again. */
	ck_assert_int_eq(count_vm("%s/%s/cpu/husk", tmp, cg1), 0);
	ck_assert_int_eq(count_vm("%s/%s/cpuacct/husk", tmp, cg1), 0);
	ck_assert_int_eq(count_vm("%s/%s/memory/husk", tmp, cg1), 0);
	ck_assert_int_eq(count_vm("%s/%s/pids/husk", tmp, cg1), 0);
}
END_TEST

/* Mount point escapes, and a bind of a subtree seen before the real root. */
START_TEST(mountinfo_details)
{
	struct husk_cgroup cg;

	fake_mountinfo("50 31 0:35 /docker/abc /sys/fs/cgroup/memory-bind rw - cgroup cgroup "
		       "rw,memory\n"
		       "35 31 0:35 / /sys/fs/cgroup/my\\040memory rw,relatime - cgroup cgroup "
		       "rw,memory\n");
	fake_dir("/sys/fs/cgroup/memory-bind", "cgroup.procs", "memory.limit_in_bytes",
		 "memory.swappiness", NULL);
	fake_dir("/sys/fs/cgroup/my memory", "cgroup.procs", "memory.limit_in_bytes",
		 "memory.swappiness", NULL);
	ck_assert_int_eq(cgroup_create(&cg, &(struct cgroup_limits){ 0, 64 * MiB, 0 }), 0);
	ck_assert_uint_eq(cg.ndirs, 1);
	ck_assert_str_eq(get("%s/root/sys/fs/cgroup/my memory/husk/%s/memory.limit_in_bytes",
			     tmp, cg.name), "67108864");
	ck_assert(!exists("%s/root/sys/fs/cgroup/memory-bind/husk", tmp));
	ck_assert_int_eq(cgroup_destroy(&cg), 0);
}
END_TEST

/* Make a group by hand, as a crashed husk would have left it, in every hierarchy. */
static void stale_group(const char *name, const char *procs)
{
	static const char *const h[] = { "cpu", "cpuacct", "memory", "pids" };
	char rel[300];
	unsigned i;

	for (i = 0; i < ARRAY_SIZE(h); i++) {
		snprintf(rel, sizeof(rel), "/sys/fs/cgroup/%s/husk/%s", h[i], name);
		fake_dir(rel, "cgroup.procs", NULL);
		snprintf(rel, sizeof(rel), "/sys/fs/cgroup/%s/husk/%s/cgroup.procs", h[i], name);
		fake_write(rel, procs);
	}
}

START_TEST(stale_groups_removed_live_kept)
{
	const char *c = "root/sys/fs/cgroup";
	unsigned long long start, ns;
	char dead[80], reused[80], foreign[80], procs[16];
	struct husk_cgroup live;
	unsigned seq;
	int pid;
	pid_t orphan;

	layout_v1_split();
	ck_assert_int_eq(cgroup_create(&live, &std_limits), 0);
	ck_assert_int_eq(sscanf(live.name, "vm-%d-%llu-%u-%llu", &pid, &start, &seq, &ns), 4);
	ck_assert_int_eq(pid, getpid());
	/* Above PID_MAX_LIMIT: this owner cannot exist. */
	snprintf(dead, sizeof(dead), "vm-999999999-%llu-0-%llu", start, ns);
	/* Our pid but another start time: the pid was reused. */
	snprintf(reused, sizeof(reused), "vm-%d-%llu-0-%llu", pid, start + 1, ns);
	/* A pid namespace we cannot see into: not ours to judge. */
	snprintf(foreign, sizeof(foreign), "vm-999999999-1-0-%llu", ns + 1);
	orphan = sleeper();	/* the VM process that outlived its husk */
	snprintf(procs, sizeof(procs), "%d\n", (int)orphan);
	stale_group(dead, procs);
	stale_group(reused, "");
	stale_group(foreign, "");
	fake_dir("/sys/fs/cgroup/memory/husk/not-ours", NULL);
	fake_dir("/sys/fs/cgroup/memory/husk/vm-12x-1-0-1", NULL);
	fake_dir("/sys/fs/cgroup/memory/husk/vm--1-1-0-1", NULL);

	ck_assert_int_eq(cgroup_clean_stale(), 2);
	assert_killed(orphan);
	ck_assert(!exists("%s/%s/cpu/husk/%s", tmp, c, dead));
	ck_assert(!exists("%s/%s/cpuacct/husk/%s", tmp, c, dead));
	ck_assert(!exists("%s/%s/memory/husk/%s", tmp, c, dead));
	ck_assert(!exists("%s/%s/pids/husk/%s", tmp, c, dead));
	ck_assert(!exists("%s/%s/pids/husk/%s", tmp, c, reused));
	ck_assert(exists("%s/%s/pids/husk/%s", tmp, c, foreign));
	ck_assert(exists("%s/%s/memory/husk/not-ours", tmp, c));
	ck_assert(exists("%s/%s/memory/husk/vm-12x-1-0-1", tmp, c));
	ck_assert(exists("%s/%s/memory/husk/vm--1-1-0-1", tmp, c));
	/* Our own, live group is untouched, limits and all. */
	ck_assert_str_eq(get("%s/%s/pids/husk/%s/pids.max", tmp, c, live.name), "16");
	ck_assert_int_eq(cgroup_clean_stale(), 0);
	ck_assert_int_eq(cgroup_destroy(&live), 0);
}
END_TEST

/* On v2, a group of ours and the parts of its name: owner, start time, pid namespace. */
static void v2_group(struct husk_cgroup *live, int *pid, unsigned long long *start,
		     unsigned long long *ns)
{
	unsigned seq;

	layout_v2("cpu memory pids\n");
	ck_assert_int_eq(cgroup_create(live, &std_limits), 0);
	ck_assert_int_eq(sscanf(live->name, "vm-%d-%llu-%u-%llu", pid, start, &seq, ns), 4);
}

START_TEST(stale_on_v2)
{
	const char *c2 = "root/sys/fs/cgroup";
	unsigned long long start, ns;
	struct husk_cgroup live;
	char rel[200];
	int pid;

	v2_group(&live, &pid, &start, &ns);
	snprintf(rel, sizeof(rel), "/sys/fs/cgroup/husk/vm-999999999-1-0-%llu", ns);
	fake_dir(rel, "cgroup.procs", "cgroup.kill", NULL);
	ck_assert_int_eq(cgroup_clean_stale(), 1);
	ck_assert(!exists("%s/root%s", tmp, rel));
	ck_assert(exists("%s/%s/husk/%s", tmp, c2, live.name));
	ck_assert_int_eq(cgroup_destroy(&live), 0);
}
END_TEST

/* husk oci pause: the group a husk process made, found by its owner, frozen and thawed. */
START_TEST(freeze_owned_group)
{
	unsigned long long start, ns;
	struct husk_cgroup live;
	char rel[200];
	int pid;

	v2_group(&live, &pid, &start, &ns);
	ck_assert_int_eq(pid, getpid());
	snprintf(rel, sizeof(rel), "/sys/fs/cgroup/husk/%s/cgroup.freeze", live.name);
	fake_write(rel, "0\n");
	snprintf(rel, sizeof(rel), "/sys/fs/cgroup/husk/%s/cgroup.events", live.name);
	fake_write(rel, "populated 1\nfrozen 0\n");
	ck_assert_int_eq(cgroup_owned_frozen(pid, start), 0);
	/* The kernel reports it frozen: the freeze is done. */
	fake_write(rel, "populated 1\nfrozen 1\n");
	ck_assert_int_eq(cgroup_owned_freeze(pid, start, true), 0);
	ck_assert_str_eq(get("%s/root/sys/fs/cgroup/husk/%s/cgroup.freeze", tmp, live.name), "1");
	ck_assert_int_eq(cgroup_owned_frozen(pid, start), 1);
	fake_write(rel, "populated 1\nfrozen 0\n");
	ck_assert_int_eq(cgroup_owned_freeze(pid, start, false), 0);
	ck_assert_str_eq(get("%s/root/sys/fs/cgroup/husk/%s/cgroup.freeze", tmp, live.name), "0");
	/* Another process's start time, another owner: no group of theirs. */
	ck_assert_int_eq(cgroup_owned_freeze(pid, start + 1, true), -ENOENT);
	ck_assert_int_eq(cgroup_owned_frozen(pid + 1, start), -ENOENT);
	/* A kernel without the freezer has no "frozen" key. */
	fake_write(rel, "populated 1\n");
	ck_assert_int_eq(cgroup_owned_frozen(pid, start), -ENOTSUP);
	ck_assert_int_eq(cgroup_destroy(&live), 0);
}
END_TEST

/*
 * A freeze the kernel never completes: after its bound, the group is thawed
 * again (the VM runs on, as its state says) and the error names its threads.
 */
START_TEST(freeze_that_never_completes)
{
	unsigned long long start, ns;
	struct husk_cgroup live;
	char rel[200], me[64];
	int pid;

	v2_group(&live, &pid, &start, &ns);
	snprintf(rel, sizeof(rel), "/sys/fs/cgroup/husk/%s/cgroup.freeze", live.name);
	fake_write(rel, "0\n");
	snprintf(rel, sizeof(rel), "/sys/fs/cgroup/husk/%s/cgroup.threads", live.name);
	snprintf(me, sizeof(me), "%d\n999999999\n", (int)gettid());
	fake_write(rel, me);
	snprintf(rel, sizeof(rel), "/sys/fs/cgroup/husk/%s/cgroup.events", live.name);
	fake_write(rel, "populated 1\nfrozen 0\n");
	ck_assert_int_eq(cgroup_owned_freeze(pid, start, true), -ETIMEDOUT);
	ck_assert_str_eq(get("%s/root/sys/fs/cgroup/husk/%s/cgroup.freeze", tmp, live.name), "0");
	/* This thread, by its tid and name, in its state (running); a gone tid is left out. */
	snprintf(me, sizeof(me), "(its threads: %d unit-tests R)", (int)gettid());
	ck_assert_msg(strstr(husk_lasterr(), "did not freeze within 5 s") &&
		      strstr(husk_lasterr(), me) && !strstr(husk_lasterr(), "999999999"),
		      "%s", husk_lasterr());
	ck_assert_int_eq(cgroup_destroy(&live), 0);
}
END_TEST

START_TEST(limits_for_vm_defaults)
{
	struct cgroup_limits l;

	cgroup_limits_for_vm(&l, 0, 1);
	ck_assert_uint_eq(l.cpu_milli, 500);
	ck_assert_uint_eq(l.mem_bytes, (512 + 64 + 16) * MiB);
	ck_assert_uint_eq(l.pids, CGROUP_PIDS_BASE + 1);
	ck_assert_int_eq(cgroup_check_limits(&l), 0);
	cgroup_limits_for_vm(&l, 64ull << 30, 4);
	ck_assert_uint_eq(l.mem_bytes, (64ull << 30) + CGROUP_MEM_OVERHEAD_CAP);
	ck_assert_uint_eq(l.pids, CGROUP_PIDS_BASE + 4);
}
END_TEST

Suite *cgroup_suite(void)
{
	Suite *s = suite_create("cgroup");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, v1_split_hierarchies);
	tcase_add_test(tc, v1_combined_cpu_no_memsw);
	tcase_add_test(tc, v2_delegates_and_limits);
	tcase_add_test(tc, v2_already_enabled_and_no_swap);
	tcase_add_test(tc, mixed_v2_and_v1);
	tcase_add_test(tc, zero_limits_write_no_limits);
	tcase_add_test(tc, bad_limits_refused);
	tcase_add_test(tc, missing_hierarchies);
	tcase_add_test(tc, failed_write_rolls_back);
	tcase_add_test(tc, mountinfo_details);
	tcase_add_test(tc, freeze_owned_group);
	tcase_add_test(tc, freeze_that_never_completes);
	tcase_add_test(tc, stale_groups_removed_live_kept);
	tcase_add_test(tc, stale_on_v2);
	tcase_add_test(tc, limits_for_vm_defaults);
	suite_add_tcase(s, tc);
	return s;
}
