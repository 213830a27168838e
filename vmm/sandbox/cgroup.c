/*
 * cgroup: one control group per VM, on cgroup v2, v1 or a mix of both.
 *
 * See cgroup.h for the contract. The work splits into: finding the
 * hierarchies (mountinfo + the v2 root's cgroup.controllers), making the
 * group (v2: delegate controllers down to the leaf first), writing limits,
 * and tearing groups down (kill, wait, rmdir) for our own VM or for groups
 * a crashed husk left behind.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sandbox/cgroup.h"
#include "lib/util.h"

/* How long teardown waits for the group's processes to die and go away. */
#define KILL_WAIT_MS	5000
#define POLL_MS		5
#define PARENT		"husk"
#define MAX_HIER	16

static const struct {
	const char *name;
	unsigned bit;
} ctrl_tab[] = {
	{ "cpu", CGROUP_CPU },
	{ "cpuacct", CGROUP_CPUACCT },
	{ "memory", CGROUP_MEMORY },
	{ "pids", CGROUP_PIDS },
};

/* Controllers a cgroup v2 root can offer us (cpuacct is a v1-only name). */
#define V2_CTRLS (CGROUP_CPU | CGROUP_MEMORY | CGROUP_PIDS)

/* ---- test hook ---- */

static struct cgroup_test_hooks hooks;
static bool test_mode;

void cgroup_set_test_hooks(const struct cgroup_test_hooks *h)
{
	test_mode = h != NULL;
	memset(&hooks, 0, sizeof(hooks));
	if (h)
		hooks = *h;
}

static const char *mountinfo_path(void)
{
	return test_mode && hooks.mountinfo ? hooks.mountinfo : "/proc/self/mountinfo";
}

static const char *root_prefix(void)
{
	return test_mode && hooks.root ? hooks.root : "";
}

/* ---- small helpers ---- */

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* dir + "/" + file into buf (CGROUP_PATH_MAX); -ENAMETOOLONG with a message. */
static int join(char *buf, const char *dir, const char *file)
{
	int n = snprintf(buf, CGROUP_PATH_MAX, "%s/%s", dir, file);

	if (n < 0 || n >= CGROUP_PATH_MAX)
		return husk_seterr(ENAMETOOLONG, "cgroup: path %s/%s is longer than %d bytes",
				   dir, file, CGROUP_PATH_MAX - 1);
	return 0;
}

/* Read a small file, NUL-terminated, trailing newline kept. */
static int read_small(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t len = 0;
	ssize_t n;

	if (fd < 0)
		return -errno;
	while (len + 1 < size) {
		n = read(fd, buf + len, size - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			n = -errno;
			close(fd);
			return (int)n;
		}
		if (n == 0)
			break;
		len += n;
	}
	buf[len] = '\0';
	close(fd);
	return 0;
}

/*
 * Write val to dir/file in one write(2): cgroupfs applies each write as a
 * whole and reports a bad value from write(), not open(). Optional files
 * (a kernel feature that may be absent) are skipped when they do not exist.
 */
static int write_file(const char *dir, const char *file, const char *val, bool optional)
{
	char path[CGROUP_PATH_MAX];
	size_t len = strlen(val);
	ssize_t n;
	int fd, err;

	err = join(path, dir, file);
	if (err)
		return err;
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0) {
		err = errno;
		if (optional && err == ENOENT) {
			husk_debug("cgroup: %s not present, skipped", path);
			return 0;
		}
		return husk_seterr(err, "cgroup: opening %s to write '%s': %s", path, val,
				   strerror(err));
	}
	do
		n = write(fd, val, len);
	while (n < 0 && errno == EINTR);
	err = n < 0 ? errno : EIO;
	close(fd);
	if (n != (ssize_t)len)
		return husk_seterr(err, "cgroup: writing '%s' to %s: %s", val, path, strerror(err));
	return 0;
}

/* Find "key <u64>" on its own line of dir/file. -ENOENT if file or key missing. */
static int read_key(const char *dir, const char *file, const char *key, uint64_t *out)
{
	char path[CGROUP_PATH_MAX], buf[4096], *line, *save;
	size_t klen = strlen(key);
	int err;

	if (snprintf(path, sizeof(path), "%s/%s", dir, file) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	err = read_small(path, buf, sizeof(buf));
	if (err)
		return err;
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		if (!strncmp(line, key, klen) && line[klen] == ' ')
			return parse_u64(line + klen + 1, 0, UINT64_MAX, out) ? -EINVAL : 0;
	return -ENOENT;
}

/* The whole of dir/file as one u64 ("max" or garbage is -EINVAL). */
static int read_u64_file(const char *dir, const char *file, uint64_t *out)
{
	char path[CGROUP_PATH_MAX], buf[64];
	size_t n;
	int err;

	if (snprintf(path, sizeof(path), "%s/%s", dir, file) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	err = read_small(path, buf, sizeof(buf));
	if (err)
		return err;
	n = strlen(buf);
	while (n && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		buf[--n] = '\0';
	return parse_u64(buf, 0, UINT64_MAX, out);
}

/* Controller names in a space/comma separated list, as CGROUP_* bits. */
static unsigned ctrl_mask(const char *list, const char *seps)
{
	char buf[1024], *tok, *save;
	unsigned mask = 0, i;

	snprintf(buf, sizeof(buf), "%s", list);
	for (tok = strtok_r(buf, seps, &save); tok; tok = strtok_r(NULL, seps, &save))
		for (i = 0; i < ARRAY_SIZE(ctrl_tab); i++)
			if (!strcmp(tok, ctrl_tab[i].name))
				mask |= ctrl_tab[i].bit;
	return mask;
}

/* ---- processes ---- */

/*
 * State letter and start time (clock ticks after boot, field 22) of a pid.
 * The comm field may hold spaces and parentheses: parse after the last ')'.
 */
static int proc_stat(pid_t pid, char *state, unsigned long long *start)
{
	char path[64], buf[2048], *p, *tok, *save;
	uint64_t v;
	int err, field;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	err = read_small(path, buf, sizeof(buf));
	if (err)
		return err;
	p = strrchr(buf, ')');
	if (!p)
		return -EIO;
	field = 3;
	for (tok = strtok_r(p + 1, " \n", &save); tok; tok = strtok_r(NULL, " \n", &save), field++) {
		if (field == 3)
			*state = tok[0];
		if (field == 22) {
			if (parse_u64(tok, 0, UINT64_MAX, &v))
				return -EIO;
			*start = v;
			return 0;
		}
	}
	return -EIO;
}

/* A pid that exists and has not exited (zombies are gone for our purposes). */
static bool proc_running(pid_t pid)
{
	unsigned long long start;
	char state = 0;

	if (proc_stat(pid, &state, &start))
		return false;
	return state != 'Z' && state != 'X' && state != 'x';
}

/*
 * What this process reads of itself and of the mounts is read once: a cold
 * husk run asked for each two or three times (the stale sweep, the group's
 * name, its creation), and under nested emulation every reading of
 * /proc/self/mountinfo cost the supervisor 2 to 10 ms of CPU. A process's
 * own PID namespace and start time never change; a child forgets them
 * (pthread_atfork), and the mounts are trusted for a second.
 */
#define LAYOUT_FRESH_US 1000000

static pthread_mutex_t self_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	unsigned long long pidns, start;	/* 0: not read yet */
} me;

static void layout_forget(void);

static void forget_self(void)
{
	/* The child of a fork has one thread: no lock to take. */
	memset(&me, 0, sizeof(me));
	layout_forget();
}

__attribute__((constructor)) static void self_init(void)
{
	pthread_atfork(NULL, NULL, forget_self);
}

static unsigned long long pidns_ino(void)
{
	char buf[64];
	unsigned long long ino = 0;
	ssize_t n;

	pthread_mutex_lock(&self_lock);
	ino = me.pidns;
	pthread_mutex_unlock(&self_lock);
	if (ino)
		return ino;
	n = readlink("/proc/self/ns/pid", buf, sizeof(buf) - 1);
	if (n > 0) {
		buf[n] = '\0';
		if (sscanf(buf, "pid:[%llu]", &ino) != 1)
			ino = 0;
	}
	pthread_mutex_lock(&self_lock);
	me.pidns = ino;
	pthread_mutex_unlock(&self_lock);
	return ino;
}

/* This process's start time (clock ticks since boot), for the group's name. */
static int self_start(unsigned long long *start)
{
	char state;
	int err = 0;

	pthread_mutex_lock(&self_lock);
	*start = me.start;
	pthread_mutex_unlock(&self_lock);
	if (*start)
		return 0;
	err = proc_stat(getpid(), &state, start);
	if (!err) {
		pthread_mutex_lock(&self_lock);
		me.start = *start;
		pthread_mutex_unlock(&self_lock);
	}
	return err;
}

/* ---- hierarchies ---- */

struct hier {
	char mnt[CGROUP_PATH_MAX];	/* mount point, test root prefixed */
	unsigned ctrls;			/* v1: mounted; v2: in the root's cgroup.controllers */
	bool v2;
	bool root_slash;		/* mounts the hierarchy's root, not a subtree */
};

struct layout {
	struct hier h[MAX_HIER];
	unsigned n;
	int at[ARRAY_SIZE(ctrl_tab)];	/* hierarchy index per controller, -1 if none */
};

/* mountinfo escapes space, tab, newline and backslash as \ooo. */
static void unescape(char *s)
{
	char *d = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*d++ = (char)((s[1] - '0') << 6 | (s[2] - '0') << 3 | (s[3] - '0'));
			s += 3;
		} else {
			*d++ = *s;
		}
	}
	*d = '\0';
}

/* Keep one mount per hierarchy, preferring one of its root over a bind of a subtree. */
static void add_hier(struct layout *lo, const struct hier *h)
{
	unsigned i;

	for (i = 0; i < lo->n; i++) {
		struct hier *o = &lo->h[i];

		if (o->v2 != h->v2 || (!h->v2 && !(o->ctrls & h->ctrls)))
			continue;
		if (!o->root_slash && h->root_slash)
			*o = *h;
		return;
	}
	if (lo->n < MAX_HIER)
		lo->h[lo->n++] = *h;
}

static void parse_mount_line(char *line, struct layout *lo)
{
	char *f[64], *save, *tok;
	struct hier h;
	int n = 0, k, len;

	for (tok = strtok_r(line, " \n", &save); tok && n < 64; tok = strtok_r(NULL, " \n", &save))
		f[n++] = tok;
	for (k = 6; k < n && strcmp(f[k], "-"); k++)
		;
	if (k + 3 >= n)
		return;
	memset(&h, 0, sizeof(h));
	if (!strcmp(f[k + 1], "cgroup2")) {
		h.v2 = true;
	} else if (!strcmp(f[k + 1], "cgroup")) {
		h.ctrls = ctrl_mask(f[k + 3], ",");
		if (!h.ctrls)
			return;		/* name=systemd, cpuset, ...: nothing of ours */
	} else {
		return;
	}
	unescape(f[4]);
	len = snprintf(h.mnt, sizeof(h.mnt), "%s%s", root_prefix(), f[4]);
	if (len < 0 || len >= (int)sizeof(h.mnt) - (int)sizeof("/" PARENT "/") - CGROUP_NAME_MAX) {
		husk_msg("cgroup: ignoring %s: mount point path too long", f[4]);
		return;
	}
	h.root_slash = !strcmp(f[3], "/");
	add_hier(lo, &h);
}

static struct {
	struct layout lo;
	uint64_t at_us;		/* 0: none */
} layout_cache;

static void layout_forget(void)
{
	layout_cache.at_us = 0;
}

static int read_layout(struct layout *lo);

/* The hierarchies and their controllers, as mounted now (or a second ago). */
static int discover(struct layout *lo)
{
	uint64_t now = now_us();
	int err;

	/* Test trees change from one check to the next: always read them. */
	pthread_mutex_lock(&self_lock);
	if (!test_mode && layout_cache.at_us && now - layout_cache.at_us < LAYOUT_FRESH_US) {
		*lo = layout_cache.lo;
		pthread_mutex_unlock(&self_lock);
		return 0;
	}
	pthread_mutex_unlock(&self_lock);
	err = read_layout(lo);
	if (!err && !test_mode) {
		pthread_mutex_lock(&self_lock);
		layout_cache.lo = *lo;
		layout_cache.at_us = now;
		pthread_mutex_unlock(&self_lock);
	}
	return err;
}

static int read_layout(struct layout *lo)
{
	char line[4096], path[CGROUP_PATH_MAX], buf[1024];
	unsigned i, c;
	FILE *f;

	memset(lo, 0, sizeof(*lo));
	for (c = 0; c < ARRAY_SIZE(ctrl_tab); c++)
		lo->at[c] = -1;
	f = fopen(mountinfo_path(), "re");
	if (!f)
		return husk_seterr(errno, "cgroup: reading %s: %s", mountinfo_path(), strerror(errno));
	while (fgets(line, sizeof(line), f))
		parse_mount_line(line, lo);
	fclose(f);

	/* A controller is usable on v2 only if the root offers it to children. */
	for (i = 0; i < lo->n; i++) {
		if (!lo->h[i].v2)
			continue;
		if (!join(path, lo->h[i].mnt, "cgroup.controllers") &&
		    !read_small(path, buf, sizeof(buf)))
			lo->h[i].ctrls = ctrl_mask(buf, " \n") & V2_CTRLS;
	}
	/* v2 first: a controller is never usable in both, and v2 is the future. */
	for (c = 0; c < ARRAY_SIZE(ctrl_tab); c++) {
		for (i = 0; i < lo->n; i++)
			if (lo->h[i].v2 && (lo->h[i].ctrls & ctrl_tab[c].bit))
				lo->at[c] = i;
		for (i = 0; i < lo->n && lo->at[c] < 0; i++)
			if (!lo->h[i].v2 && (lo->h[i].ctrls & ctrl_tab[c].bit))
				lo->at[c] = i;
	}
	return 0;
}

/* ---- limits ---- */

void cgroup_limits_for_vm(struct cgroup_limits *l, uint64_t guest_ram, unsigned vcpus)
{
	uint64_t over;

	if (!guest_ram)
		guest_ram = CGROUP_DEFAULT_GUEST_RAM;
	/* Fixed: code, thread stacks, device buffers; proportional: KVM page tables. */
	over = CGROUP_MEM_OVERHEAD_BASE + guest_ram / 32;
	if (over > CGROUP_MEM_OVERHEAD_CAP)
		over = CGROUP_MEM_OVERHEAD_CAP;
	l->cpu_milli = CGROUP_DEFAULT_CPU_MILLI;
	l->mem_bytes = guest_ram + over;
	l->pids = CGROUP_PIDS_BASE + (uint64_t)vcpus;
}

int cgroup_check_limits(const struct cgroup_limits *l)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	uint64_t cpu_max = 1000 * (uint64_t)(ncpu > 0 ? ncpu : 1);

	if (!l)
		return husk_seterr(EINVAL, "cgroup: no limits given");
	if (l->cpu_milli && (l->cpu_milli < CGROUP_CPU_MILLI_MIN || l->cpu_milli > cpu_max))
		return husk_seterr(ERANGE, "cgroup: CPU quota %u milli-CPU outside %u..%" PRIu64
				   " (%ld CPUs online)", l->cpu_milli, CGROUP_CPU_MILLI_MIN,
				   cpu_max, ncpu);
	if (l->mem_bytes && (l->mem_bytes < CGROUP_MEM_MIN || l->mem_bytes > CGROUP_MEM_MAX))
		return husk_seterr(ERANGE, "cgroup: memory limit %" PRIu64 " bytes outside %llu..%llu",
				   l->mem_bytes, CGROUP_MEM_MIN, CGROUP_MEM_MAX);
	if (l->pids > CGROUP_PIDS_MAX)
		return husk_seterr(ERANGE, "cgroup: pids limit %" PRIu64 " above %u",
				   l->pids, CGROUP_PIDS_MAX);
	return 0;
}

static int write_cpu(const struct husk_cgroup_dir *d, unsigned cpu_milli)
{
	uint64_t quota = (uint64_t)cpu_milli * CGROUP_CPU_PERIOD_US / 1000;
	char v[64];
	int err;

	if (d->v2) {
		snprintf(v, sizeof(v), "%" PRIu64 " %u", quota, CGROUP_CPU_PERIOD_US);
		return write_file(d->path, "cpu.max", v, false);
	}
	/* Period before quota: the kernel checks quota against it. */
	snprintf(v, sizeof(v), "%u", CGROUP_CPU_PERIOD_US);
	err = write_file(d->path, "cpu.cfs_period_us", v, false);
	snprintf(v, sizeof(v), "%" PRIu64, quota);
	if (!err)
		err = write_file(d->path, "cpu.cfs_quota_us", v, false);
	return err;
}

int cgroup_set_cpu(const struct husk_cgroup *cg, unsigned cpu_milli)
{
	struct cgroup_limits l = { .cpu_milli = cpu_milli };
	unsigned i;
	int err = cgroup_check_limits(&l);

	for (i = 0; !err && i < cg->ndirs; i++)
		if (cg->dir[i].ctrls & CGROUP_CPU)
			err = write_cpu(&cg->dir[i], cpu_milli);
	return err;
}

static int write_limits(const struct husk_cgroup_dir *d, const struct cgroup_limits *l)
{
	char v[64];
	int err = 0;

	if ((d->ctrls & CGROUP_CPU) && l->cpu_milli) {
		err = write_cpu(d, l->cpu_milli);
		if (err)
			return err;
	}
	if (d->ctrls & CGROUP_MEMORY) {
		snprintf(v, sizeof(v), "%" PRIu64, l->mem_bytes);
		if (d->v2) {
			if (l->mem_bytes)
				err = write_file(d->path, "memory.max", v, false);
			/* Guest RAM never goes to swap; absent when the kernel has no swap. */
			if (!err)
				err = write_file(d->path, "memory.swap.max", "0", true);
		} else {
			/* limit_in_bytes first: memsw may never be below it. */
			if (l->mem_bytes)
				err = write_file(d->path, "memory.limit_in_bytes", v, false);
			/* memory+swap = memory: reclaim cannot make room by swapping. */
			if (!err && l->mem_bytes)
				err = write_file(d->path, "memory.memsw.limit_in_bytes", v, true);
			if (!err)
				err = write_file(d->path, "memory.swappiness", "0", false);
		}
		if (err)
			return err;
	}
	if ((d->ctrls & CGROUP_PIDS) && l->pids) {
		snprintf(v, sizeof(v), "%" PRIu64, l->pids);
		err = write_file(d->path, "pids.max", v, false);
	}
	return err;
}

/* ---- creating ---- */

static int make_dir(const char *path, bool exist_ok)
{
	if (mkdir(path, 0755)) {
		int err = errno;

		if (err == EEXIST && exist_ok)
			return 0;
		return husk_seterr(err, "cgroup: mkdir %s: %s%s", path, strerror(err),
				   err == EACCES || err == EPERM || err == EROFS ?
				   " (creating cgroups needs root or a delegated, writable hierarchy)" : "");
	}
	if (test_mode && hooks.populate)
		hooks.populate(path);
	return 0;
}

/*
 * Make sure the controllers in mask are enabled for dir's children. All at
 * once is one write; if that fails, one at a time tells which one refused.
 */
static int enable_controllers(const char *dir, unsigned mask)
{
	char path[CGROUP_PATH_MAX], cur[1024], want[64] = "";
	unsigned missing, i;
	int err;

	err = join(path, dir, "cgroup.subtree_control");
	if (err)
		return err;
	err = read_small(path, cur, sizeof(cur));
	if (err)
		return husk_seterr(err, "cgroup: reading %s: %s", path, strerror(-err));
	missing = mask & ~ctrl_mask(cur, " \n");
	if (!missing)
		return 0;
	for (i = 0; i < ARRAY_SIZE(ctrl_tab); i++)
		if (missing & ctrl_tab[i].bit)
			snprintf(want + strlen(want), sizeof(want) - strlen(want), "%s+%s",
				 want[0] ? " " : "", ctrl_tab[i].name);
	if (!write_file(dir, "cgroup.subtree_control", want, false))
		return 0;
	for (i = 0; i < ARRAY_SIZE(ctrl_tab); i++) {
		char one[16];

		if (!(missing & ctrl_tab[i].bit))
			continue;
		snprintf(one, sizeof(one), "+%s", ctrl_tab[i].name);
		err = write_file(dir, "cgroup.subtree_control", one, false);
		if (err == -EBUSY)
			return husk_seterr(EBUSY, "cgroup: cannot enable %s in %s: the cgroup holds "
					   "processes itself, and cgroup v2 only gives controllers to "
					   "groups without any; move them into a leaf group",
					   ctrl_tab[i].name, path);
		if (err)
			return err;
	}
	return 0;
}

/*
 * Our identity goes into the name. Without a start time another husk
 * would take the group for a dead owner's and kill our VM: refuse instead.
 */
static int make_name(char *buf)
{
	static unsigned seq;
	unsigned long long start = 0;
	int err = self_start(&start);

	if (err)
		return husk_seterr(err, "cgroup: reading our start time from /proc/%d/stat: %s",
				   (int)getpid(), strerror(-err));
	snprintf(buf, CGROUP_NAME_MAX, "vm-%d-%llu-%u-%llu", (int)getpid(), start,
		 __atomic_fetch_add(&seq, 1, __ATOMIC_RELAXED), pidns_ino());
	return 0;
}

/* The VM's directory in one hierarchy, then its limits. */
static int create_in(struct husk_cgroup *cg, const struct hier *h, unsigned ctrls,
		     const struct cgroup_limits *l)
{
	struct husk_cgroup_dir *d = &cg->dir[cg->ndirs];
	char parent[CGROUP_PATH_MAX], name[CGROUP_NAME_MAX];
	int err;

	snprintf(name, sizeof(name), "%s", cg->name);	/* join() must not alias *cg */

	err = join(parent, h->mnt, PARENT);
	if (!err && h->v2)
		err = enable_controllers(h->mnt, ctrls);
	if (!err)
		err = make_dir(parent, true);
	if (!err && h->v2)
		err = enable_controllers(parent, ctrls);
	if (!err)
		err = join(d->path, parent, name);
	if (!err)
		err = make_dir(d->path, false);
	if (err) {
		d->path[0] = '\0';
		return err;
	}
	d->ctrls = ctrls;
	d->v2 = h->v2;
	cg->ndirs++;
	return write_limits(d, l);
}

int cgroup_create(struct husk_cgroup *cg, const struct cgroup_limits *l)
{
	unsigned need = 0, use[MAX_HIER] = { 0 }, c, i, any = 0;
	struct layout lo;
	bool v2_used = false;
	int err;

	if (!cg)
		return husk_seterr(EINVAL, "cgroup: no group given");
	memset(cg, 0, sizeof(*cg));
	err = cgroup_check_limits(l);
	if (err)
		return err;
	err = discover(&lo);
	if (err)
		return err;
	if (l->cpu_milli)
		need |= CGROUP_CPU;
	if (l->mem_bytes)
		need |= CGROUP_MEMORY;
	if (l->pids)
		need |= CGROUP_PIDS;

	for (c = 0; c < ARRAY_SIZE(ctrl_tab); c++) {
		unsigned bit = ctrl_tab[c].bit;

		if (lo.at[c] < 0) {
			if (need & bit)
				return husk_seterr(ENOTSUP, "cgroup: no '%s' controller: neither the "
						   "cgroup v2 root nor any v1 hierarchy in %s offers "
						   "it; mount it, or run without that limit",
						   ctrl_tab[c].name, mountinfo_path());
			continue;
		}
		if (bit == CGROUP_CPUACCT)
			continue;	/* decided below */
		use[lo.at[c]] |= bit;
		any |= bit;
		v2_used |= lo.h[lo.at[c]].v2;
	}
	if (!any)
		return husk_seterr(ENOENT, "cgroup: no hierarchy with a cpu, memory or pids "
				   "controller in %s", mountinfo_path());
	/* CPU accounting: v2 has it in every group's cpu.stat, v1 needs cpuacct. */
	for (c = 0; c < ARRAY_SIZE(ctrl_tab); c++)
		if (ctrl_tab[c].bit == CGROUP_CPUACCT && !v2_used && lo.at[c] >= 0)
			use[lo.at[c]] |= CGROUP_CPUACCT;

	err = make_name(cg->name);
	if (err)
		return err;
	/* v2 first, so a mixed layout reports the v2 path as dir[0]. */
	for (i = 0; i < lo.n && !err; i++)
		if (use[i] && lo.h[i].v2)
			err = create_in(cg, &lo.h[i], use[i], l);
	for (i = 0; i < lo.n && !err; i++)
		if (use[i] && !lo.h[i].v2)
			err = create_in(cg, &lo.h[i], use[i], l);
	if (err) {
		char why[512];

		/* Undo quietly: the first failure is the one worth reporting. */
		snprintf(why, sizeof(why), "%s", husk_lasterr());
		cgroup_destroy(cg);
		memset(cg, 0, sizeof(*cg));
		return husk_seterr(err, "%s", why);
	}
	husk_debug("cgroup: created %s (%s)", cg->name, cgroup_mode_name(cg));
	return 0;
}

int cgroup_attach(const struct husk_cgroup *cg, pid_t pid)
{
	char v[24];
	unsigned i;
	int err;

	if (!cg || !cg->ndirs || pid <= 0)
		return husk_seterr(EINVAL, "cgroup: nothing to attach pid %d to", (int)pid);
	snprintf(v, sizeof(v), "%d", (int)pid);
	for (i = 0; i < cg->ndirs; i++) {
		if (!cg->dir[i].path[0])
			continue;
		err = write_file(cg->dir[i].path, "cgroup.procs", v, false);
		if (err)
			return err;
	}
	return 0;
}

const char *cgroup_mode_name(const struct husk_cgroup *cg)
{
	bool v1 = false, v2 = false;
	unsigned i;

	for (i = 0; cg && i < cg->ndirs; i++) {
		if (!cg->dir[i].path[0])
			continue;
		if (cg->dir[i].v2)
			v2 = true;
		else
			v1 = true;
	}
	return v1 && v2 ? "mixed" : v2 ? "v2" : v1 ? "v1" : "none";
}

/* ---- accounting ---- */

int cgroup_read_usage(const struct husk_cgroup *cg, struct cgroup_usage *u)
{
	unsigned i;
	uint64_t v;

	if (!cg || !u)
		return husk_seterr(EINVAL, "cgroup: no group to read");
	memset(u, 0, sizeof(*u));
	for (i = 0; i < cg->ndirs; i++) {
		const struct husk_cgroup_dir *d = &cg->dir[i];

		if (!d->path[0])
			continue;
		if (d->v2) {
			/* usage_usec is core: present with or without the cpu controller. */
			if (!read_key(d->path, "cpu.stat", "usage_usec", &v)) {
				u->cpu_us = v;
				u->have |= CGROUP_USAGE_CPU;
			}
			if ((d->ctrls & CGROUP_CPU) &&
			    !read_key(d->path, "cpu.stat", "throttled_usec", &v)) {
				u->cpu_throttled_us = v;
				u->have |= CGROUP_USAGE_THROTTLED;
			}
			if (d->ctrls & CGROUP_MEMORY) {
				/* memory.peak is 5.19+; current is the best older kernels offer. */
				if (!read_u64_file(d->path, "memory.peak", &v) ||
				    !read_u64_file(d->path, "memory.current", &v)) {
					u->mem_peak_bytes = v;
					u->have |= CGROUP_USAGE_MEM_PEAK;
				}
				if (!read_key(d->path, "memory.events", "oom_kill", &v)) {
					u->oom_kills = v;
					u->have |= CGROUP_USAGE_OOM;
				}
			}
			continue;
		}
		if ((d->ctrls & CGROUP_CPUACCT) && !read_u64_file(d->path, "cpuacct.usage", &v)) {
			u->cpu_us = v / 1000;
			u->have |= CGROUP_USAGE_CPU;
		}
		if ((d->ctrls & CGROUP_CPU) && !read_key(d->path, "cpu.stat", "throttled_time", &v)) {
			u->cpu_throttled_us = v / 1000;
			u->have |= CGROUP_USAGE_THROTTLED;
		}
		if (d->ctrls & CGROUP_MEMORY) {
			if (!read_u64_file(d->path, "memory.max_usage_in_bytes", &v)) {
				u->mem_peak_bytes = v;
				u->have |= CGROUP_USAGE_MEM_PEAK;
			}
			if (!read_key(d->path, "memory.oom_control", "oom_kill", &v)) {
				u->oom_kills = v;
				u->have |= CGROUP_USAGE_OOM;
			}
		}
	}
	return 0;
}

/* ---- tearing down ---- */

/*
 * One pass over dir's cgroup.procs: SIGKILL every member still running.
 * Returns how many were (0 once the group is empty or gone); *self is set
 * if the calling process is listed, which is never signalled.
 */
static int kill_members(const char *dir, bool *self)
{
	char path[CGROUP_PATH_MAX];
	int pid, live = 0;
	FILE *f;

	if (join(path, dir, "cgroup.procs"))
		return 0;
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (fscanf(f, "%d", &pid) == 1) {
		if (pid <= 0)
			continue;
		if (pid == getpid()) {
			*self = true;
			continue;
		}
		/* Zombies have left the group already; their parent reaps them. */
		if (!proc_running(pid))
			continue;
		if (kill(pid, SIGKILL) == 0)
			live++;
	}
	fclose(f);
	return live;
}

/* cgroupfs removes its own files on rmdir; a fake tree needs them gone first. */
static void fake_depopulate(const char *dir)
{
	char path[CGROUP_PATH_MAX];
	struct dirent *de;
	struct stat st;
	DIR *d = opendir(dir);

	if (!d)
		return;
	while ((de = readdir(d))) {
		if (snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) >= (int)sizeof(path))
			continue;
		if (!lstat(path, &st) && !S_ISDIR(st.st_mode))
			unlink(path);
	}
	closedir(d);
}

int cgroup_destroy(struct husk_cgroup *cg)
{
	uint64_t deadline = now_us() + KILL_WAIT_MS * 1000ull;
	bool self = false;
	unsigned i, left = 0;
	int err = 0, live;

	if (!cg)
		return 0;
	/* cgroup.kill (v2, 5.14+) takes forks in flight too; the walk covers the rest. */
	for (i = 0; i < cg->ndirs; i++)
		if (cg->dir[i].path[0] && cg->dir[i].v2)
			write_file(cg->dir[i].path, "cgroup.kill", "1", true);
	for (;;) {
		live = 0;
		for (i = 0; i < cg->ndirs; i++)
			if (cg->dir[i].path[0])
				live += kill_members(cg->dir[i].path, &self);
		if (!live || now_us() >= deadline)
			break;
		sleep_ms(POLL_MS);
	}
	for (i = 0; i < cg->ndirs; i++) {
		struct husk_cgroup_dir *d = &cg->dir[i];

		while (d->path[0]) {
			int e;

			if (test_mode)
				fake_depopulate(d->path);
			if (!rmdir(d->path) || errno == ENOENT) {
				d->path[0] = '\0';
				break;
			}
			e = errno;
			/* A killed process leaves the group a moment after it dies. */
			if (e == EBUSY && !self && now_us() < deadline) {
				kill_members(d->path, &self);
				sleep_ms(POLL_MS);
				continue;
			}
			if (!err)
				err = husk_seterr(e, "cgroup: removing %s: %s%s", d->path, strerror(e),
						  self ? " (husk itself is inside; not killing it)" :
						  e == EBUSY ? " (processes still inside after "
						  "SIGKILL and a 5 s wait)" : "");
			left++;
			break;
		}
	}
	if (!left)
		cg->ndirs = 0;
	return err;
}

/* ---- stale groups ---- */

/* Digits only, no sign, no overflow: vm-<pid>-<start>-<seq>-<pidns>. */
static bool parse_name(const char *s, unsigned long long v[4])
{
	unsigned i;
	char *end;

	if (strncmp(s, "vm-", 3))
		return false;
	s += 3;
	for (i = 0; i < 4; i++) {
		if (*s < '0' || *s > '9')
			return false;
		errno = 0;
		v[i] = strtoull(s, &end, 10);
		if (errno || *end != (i < 3 ? '-' : '\0'))
			return false;
		s = end + (i < 3);
	}
	return v[0] > 0 && v[0] <= (unsigned long long)INT32_MAX;
}

/* Does the owner named by a group still run? Unsure (e.g. hidepid) means yes. */
static bool owner_alive(const unsigned long long v[4], unsigned long long my_ns)
{
	unsigned long long start;
	char state = 0;
	int err;

	if (v[3] != my_ns)
		return true;	/* another pid namespace: we cannot judge */
	err = proc_stat((pid_t)v[0], &state, &start);
	if (err == -ENOENT || err == -ESRCH)
		return false;
	if (err)
		return true;
	return start == v[1] && state != 'Z' && state != 'X' && state != 'x';
}

struct stale_list {
	struct husk_cgroup *g;
	unsigned n, cap;
};

static int stale_add(struct stale_list *sl, const char *name, const char *path, unsigned ctrls,
		     bool v2)
{
	struct husk_cgroup *g = NULL;
	unsigned i;

	for (i = 0; i < sl->n; i++)
		if (!strcmp(sl->g[i].name, name))
			g = &sl->g[i];
	if (!g) {
		if (sl->n == sl->cap) {
			unsigned cap = sl->cap ? sl->cap * 2 : 8;
			struct husk_cgroup *ng = realloc(sl->g, cap * sizeof(*ng));

			if (!ng)
				return -ENOMEM;
			sl->g = ng;
			sl->cap = cap;
		}
		g = &sl->g[sl->n++];
		memset(g, 0, sizeof(*g));
		snprintf(g->name, sizeof(g->name), "%s", name);
	}
	if (g->ndirs == CGROUP_MAX_DIRS)
		return 0;
	snprintf(g->dir[g->ndirs].path, CGROUP_PATH_MAX, "%s", path);
	g->dir[g->ndirs].ctrls = ctrls;
	g->dir[g->ndirs].v2 = v2;
	g->ndirs++;
	return 0;
}

static void scan_hier(const struct hier *h, unsigned long long my_ns, struct stale_list *sl)
{
	char parent[CGROUP_PATH_MAX], path[CGROUP_PATH_MAX];
	unsigned long long v[4];
	struct dirent *de;
	DIR *d;

	if (join(parent, h->mnt, PARENT))
		return;
	d = opendir(parent);
	if (!d)
		return;
	while ((de = readdir(d))) {
		if (!parse_name(de->d_name, v) || owner_alive(v, my_ns))
			continue;
		if (join(path, parent, de->d_name))
			continue;
		if (stale_add(sl, de->d_name, path, h->ctrls, h->v2))
			break;
	}
	closedir(d);
}

int cgroup_clean_stale(void)
{
	unsigned long long my_ns = pidns_ino();
	struct stale_list sl = { 0 };
	struct layout lo;
	unsigned i;
	int err, removed = 0;

	err = discover(&lo);
	if (err)
		return err;
	/* Every hierarchy we could have used, v2 whatever its root offers now. */
	for (i = 0; i < lo.n; i++)
		if (lo.h[i].v2 || lo.h[i].ctrls)
			scan_hier(&lo.h[i], my_ns, &sl);
	for (i = 0; i < sl.n; i++) {
		if (cgroup_destroy(&sl.g[i]))
			husk_msg("stale cgroup %s left in place: %s", sl.g[i].name, husk_lasterr());
		else
			removed++;
	}
	if (removed)
		husk_debug("cgroup: removed %d stale group(s)", removed);
	free(sl.g);
	return removed;
}

/* ---- freezing a VM's group (husk oci pause, resume) ---- */

/* The v2 directory of the group the husk process (owner, start) made, in our pid namespace. */
static int owned_v2_dir(pid_t owner, unsigned long long start, char *out)
{
	unsigned long long my_ns = pidns_ino(), v[4];
	char parent[CGROUP_PATH_MAX];
	struct dirent *de;
	struct layout lo;
	unsigned i;
	DIR *d;
	int err = discover(&lo);

	if (err)
		return err;
	for (i = 0; i < lo.n && !lo.h[i].v2; i++)
		;
	if (i == lo.n)
		return husk_seterr(ENOTSUP, "cgroup v2 is not mounted: no freezer for the VM");
	if (join(parent, lo.h[i].mnt, PARENT) || !(d = opendir(parent)))
		return husk_seterr(ENOENT, "the VM has no cgroup v2 group to freeze");
	err = husk_seterr(ENOENT, "the VM has no cgroup v2 group to freeze");
	while ((de = readdir(d)))
		if (parse_name(de->d_name, v) && v[0] == (unsigned long long)owner &&
		    v[1] == start && v[3] == my_ns) {
			err = join(out, parent, de->d_name);
			break;
		}
	closedir(d);
	return err;
}

/* 1 when the group at dir is frozen, 0 when not, -ENOTSUP without a freezer. */
static int frozen_at(const char *dir)
{
	uint64_t v;

	if (read_key(dir, "cgroup.events", "frozen", &v))
		return husk_seterr(ENOTSUP, "this kernel's cgroup v2 has no freezer");
	return v != 0;
}

int cgroup_owned_frozen(pid_t owner, unsigned long long start)
{
	char dir[CGROUP_PATH_MAX];
	int err = owned_v2_dir(owner, start, dir);

	return err ? err : frozen_at(dir);
}

/*
 * Where each of the group's threads is (its name, state and the kernel
 * function it waits in), for the error of a freeze that did not complete:
 * a thread that stays out of the freezer is the reason, and it is named.
 */
static void describe_threads(const char *dir, char *out, size_t len)
{
	char path[CGROUP_PATH_MAX], buf[4096], comm[64], wchan[64], *line, *save, state;
	unsigned long long start;
	size_t used = 0;
	uint64_t tid;
	int n;

	out[0] = '\0';
	if (snprintf(path, sizeof(path), "%s/cgroup.threads", dir) >= (int)sizeof(path) ||
	    read_small(path, buf, sizeof(buf)))
		return;
	for (line = strtok_r(buf, "\n", &save); line && used < len; line = strtok_r(NULL, "\n", &save)) {
		if (parse_u64(line, 1, INT_MAX, &tid) || proc_stat((pid_t)tid, &state, &start))
			continue;
		snprintf(path, sizeof(path), "/proc/%d/comm", (int)tid);
		if (read_small(path, comm, sizeof(comm)))
			continue;
		comm[strcspn(comm, "\n")] = '\0';
		snprintf(path, sizeof(path), "/proc/%d/wchan", (int)tid);
		/* A thread on a CPU waits nowhere: "0". */
		if (read_small(path, wchan, sizeof(wchan)) || !strcmp(wchan, "0"))
			wchan[0] = '\0';
		n = snprintf(out + used, len - used, "%s%d %s %c%s%s", used ? ", " : "", (int)tid,
			     comm, state, wchan[0] ? " in " : "", wchan);
		used += n > 0 ? (size_t)n : 0;
	}
}

int cgroup_owned_freeze(pid_t owner, unsigned long long start, bool freeze)
{
	char dir[CGROUP_PATH_MAX], threads[400];
	int err = owned_v2_dir(owner, start, dir), i;

	if (!err)
		err = write_file(dir, "cgroup.freeze", freeze ? "1" : "0", false);
	if (err)
		return err;
	/* The write only asks: every task is frozen when cgroup.events says so. */
	for (i = 0; i < 500; i++) {
		err = frozen_at(dir);
		if (err < 0 || err == freeze)
			return err < 0 ? err : 0;
		sleep_ms(10);
	}
	describe_threads(dir, threads, sizeof(threads));
	/* A freeze that failed leaves the VM running, as its state says. */
	if (freeze)
		write_file(dir, "cgroup.freeze", "0", false);
	return husk_seterr(ETIMEDOUT, "the VM's group did not %s within 5 s (its threads: %s)",
			   freeze ? "freeze" : "thaw", threads[0] ? threads : "unknown");
}

int cgroup_owned_set_cpu(pid_t owner, unsigned long long start, unsigned cpu_milli)
{
	struct husk_cgroup cg = { .ndirs = 1, .dir[0] = { .ctrls = CGROUP_CPU, .v2 = true } };
	int err = owned_v2_dir(owner, start, cg.dir[0].path);

	return err ? err : cgroup_set_cpu(&cg, cpu_milli);
}
