/*
 * cg-driver: vmm/sandbox/cgroup.c against the real kernel, on whatever cgroup layout
 * the machine has (v1 on the build hosts, v2 or mixed in the test host).
 *
 *   cg-driver [--expect v1|v2|mixed]
 *
 * A forked child stands for the jailed VM process. Checks: the group's
 * directories and limit files as the kernel shows them, the child's own
 * /proc/<pid>/cgroup, that the CPU quota holds a busy loop to about half a
 * CPU, that pids.max stops a fork loop, that the memory limit OOM-kills
 * rather than swaps, that teardown kills everything and removes every
 * directory, and that a stale group (dead owner) with a live process in it
 * is cleaned up, as is the group of an owner that really died without
 * teardown (a crashed husk). Prints "ok - ..." / "FAIL - ..." lines; exit 0 when all
 * pass, 1 on a failure, 77 when there is nothing to test (not root, no
 * hierarchy with our controllers).
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sandbox/cgroup.h"
#include "lib/util.h"

#define MiB (1ull << 20)
#define MAX_FORKS 64

static int failures, passes;

static void check(bool ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void check(bool ok, const char *fmt, ...)
{
	va_list ap;

	printf("%s - ", ok ? "ok  " : "FAIL");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
	failures += !ok;
	passes += ok;
}

static const char *slurp(const char *dir, const char *file)
{
	static char buf[4][4096];
	static unsigned k;
	char path[CGROUP_PATH_MAX + 64];
	size_t n;
	FILE *f;

	k = (k + 1) % 4;
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	f = fopen(path, "r");
	if (!f)
		return NULL;
	n = fread(buf[k], 1, sizeof(buf[k]) - 1, f);
	fclose(f);
	buf[k][n] = '\0';
	while (n && buf[k][n - 1] == '\n')
		buf[k][--n] = '\0';
	return buf[k];
}

static void check_file(const char *dir, const char *file, const char *want)
{
	const char *got = slurp(dir, file);

	check(got && !strcmp(got, want), "%s/%s = '%s' (want '%s')", dir, file,
	      got ? got : "<missing>", want);
}

static bool dir_exists(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static uint64_t mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Running, i.e. neither gone nor a zombie. */
static bool running(pid_t pid)
{
	char path[64], buf[512], *p;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return false;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')');
	return p && p[1] == ' ' && p[2] != 'Z' && p[2] != 'X';
}

/* ---- the child ("VM process") ---- */

struct fork_report {
	int forked;
	int err;
	pid_t pids[MAX_FORKS];
};

static void child_main(int cmd_fd, int res_fd)
{
	char c;

	while (read(cmd_fd, &c, 1) == 1) {
		if (c == 'c') {		/* spin one second of wall-clock time */
			uint64_t end = mono_us() + 1000000;
			volatile uint64_t x = 0;

			while (mono_us() < end)
				x++;
			write(res_fd, "c", 1);
		} else if (c == 'f') {	/* fork until refused */
			struct fork_report r = { 0 };

			while (r.forked < MAX_FORKS) {
				pid_t p = fork();

				if (p == 0) {
					for (;;)
						pause();
				}
				if (p < 0) {
					r.err = errno;
					break;
				}
				r.pids[r.forked++] = p;
			}
			write(res_fd, &r, sizeof(r));
		} else if (c == 'm') {	/* touch 96 MiB, page by page */
			size_t len = 96 * MiB, i;
			char *m = malloc(len);

			for (i = 0; m && i < len; i += 4096)
				m[i] = 1;
			write(res_fd, "m", 1);
		}
	}
	_exit(0);
}

struct kid {
	pid_t pid;
	int cmd, res;
};

static void spawn(struct kid *k)
{
	int a[2], b[2];

	if (pipe(a) || pipe(b)) {
		perror("pipe");
		exit(1);
	}
	k->pid = fork();
	if (k->pid < 0) {
		perror("fork");
		exit(1);
	}
	if (k->pid == 0) {
		close(a[1]);
		close(b[0]);
		child_main(a[0], b[1]);
	}
	close(a[0]);
	close(b[1]);
	k->cmd = a[1];
	k->res = b[0];
}

static const char *ctrl_names(unsigned m, char *buf, size_t len)
{
	snprintf(buf, len, "%s%s%s%s", m & CGROUP_CPU ? "cpu " : "",
		 m & CGROUP_CPUACCT ? "cpuacct " : "", m & CGROUP_MEMORY ? "memory " : "",
		 m & CGROUP_PIDS ? "pids " : "");
	return buf;
}

/*
 * Does /proc/<pid>/cgroup put pid in this directory of the group? v2 is the
 * "0::" line; v1 the line of a hierarchy holding all of the dir's controllers.
 */
static bool proc_in_dir(pid_t pid, const struct husk_cgroup *cg, const struct husk_cgroup_dir *d)
{
	char path[64], line[1024], suffix[CGROUP_NAME_MAX + 8];
	bool found = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	snprintf(suffix, sizeof(suffix), "/husk/%s", cg->name);
	f = fopen(path, "r");
	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL, *p, *tok, *sv;
		unsigned have = 0;
		size_t n;

		if (!c2)
			continue;
		p = c2 + 1;
		n = strlen(p);
		while (n && p[n - 1] == '\n')
			p[--n] = '\0';
		if (n < strlen(suffix) || strcmp(p + n - strlen(suffix), suffix))
			continue;
		*c2 = '\0';
		if (d->v2) {
			found = !strncmp(line, "0:", 2) && c1[1] == '\0';
			continue;
		}
		for (tok = strtok_r(c1 + 1, ",", &sv); tok; tok = strtok_r(NULL, ",", &sv)) {
			have |= !strcmp(tok, "cpu") ? CGROUP_CPU : 0;
			have |= !strcmp(tok, "cpuacct") ? CGROUP_CPUACCT : 0;
			have |= !strcmp(tok, "memory") ? CGROUP_MEMORY : 0;
			have |= !strcmp(tok, "pids") ? CGROUP_PIDS : 0;
		}
		found = (have & d->ctrls) == d->ctrls;
	}
	fclose(f);
	return found;
}

static void check_limits(const struct husk_cgroup_dir *d)
{
	const char *s;

	if (d->v2) {
		if (d->ctrls & CGROUP_CPU)
			check_file(d->path, "cpu.max", "50000 100000");
		if (d->ctrls & CGROUP_MEMORY) {
			check_file(d->path, "memory.max", "67108864");
			if ((s = slurp(d->path, "memory.swap.max")))
				check_file(d->path, "memory.swap.max", "0");
			else
				printf("     (no memory.swap.max: kernel without swap)\n");
		}
		if (d->ctrls & CGROUP_PIDS)
			check_file(d->path, "pids.max", "16");
		return;
	}
	if (d->ctrls & CGROUP_CPU) {
		check_file(d->path, "cpu.cfs_period_us", "100000");
		check_file(d->path, "cpu.cfs_quota_us", "50000");
	}
	if (d->ctrls & CGROUP_MEMORY) {
		check_file(d->path, "memory.limit_in_bytes", "67108864");
		check_file(d->path, "memory.swappiness", "0");
		if ((s = slurp(d->path, "memory.memsw.limit_in_bytes")))
			check_file(d->path, "memory.memsw.limit_in_bytes", "67108864");
		else
			printf("     (no memory.memsw.*: swap accounting off)\n");
	}
	if (d->ctrls & CGROUP_PIDS)
		check_file(d->path, "pids.max", "16");
}

static int wait_status(pid_t pid)
{
	int st;

	if (waitpid(pid, &st, 0) != pid)
		return -1;
	return st;
}

static unsigned all_ctrls(const struct husk_cgroup *cg)
{
	unsigned m = 0, i;

	for (i = 0; i < cg->ndirs; i++)
		m |= cg->dir[i].ctrls;
	return m;
}

/* ---- the scenarios ---- */

static void limits_and_teardown(const char *expect)
{
	const struct cgroup_limits l = { 500, 64 * MiB, 16 };
	char paths[CGROUP_MAX_DIRS][CGROUP_PATH_MAX], names[64];
	struct fork_report fr;
	struct cgroup_usage u;
	struct husk_cgroup cg;
	struct kid k;
	unsigned i, n;
	int err, st;
	char c;

	err = cgroup_create(&cg, &l);
	check(err == 0, "create 0.5 CPU / 64 MiB / 16 pids: %s", err ? husk_lasterr() : cg.name);
	if (err)
		return;
	check(!expect || !strcmp(expect, cgroup_mode_name(&cg)), "mode %s (expected %s)",
	      cgroup_mode_name(&cg), expect ? expect : "any");
	check((all_ctrls(&cg) & (CGROUP_CPU | CGROUP_MEMORY | CGROUP_PIDS)) ==
	      (CGROUP_CPU | CGROUP_MEMORY | CGROUP_PIDS), "cpu, memory and pids all present");
	n = cg.ndirs;
	for (i = 0; i < n; i++) {
		snprintf(paths[i], sizeof(paths[i]), "%s", cg.dir[i].path);
		printf("     dir %s (%s, %s)\n", cg.dir[i].path, cg.dir[i].v2 ? "v2" : "v1",
		       ctrl_names(cg.dir[i].ctrls, names, sizeof(names)));
		check(dir_exists(cg.dir[i].path), "%s exists", cg.dir[i].path);
		check_limits(&cg.dir[i]);
	}

	spawn(&k);
	err = cgroup_attach(&cg, k.pid);
	check(err == 0, "attach child %d%s%s", (int)k.pid, err ? ": " : "",
	      err ? husk_lasterr() : "");
	for (i = 0; i < n; i++)
		check(proc_in_dir(k.pid, &cg, &cg.dir[i]), "/proc/%d/cgroup shows %s",
		      (int)k.pid, cg.dir[i].path);

	/* CPU: one second of spinning gets about half a second of CPU. */
	write(k.cmd, "c", 1);
	if (read(k.res, &c, 1) == 1 && !cgroup_read_usage(&cg, &u)) {
		check(u.have & CGROUP_USAGE_CPU, "CPU usage readable");
		check(u.cpu_us > 50000 && u.cpu_us < 700000,
		      "1 s of spinning used %.3f s of CPU (quota 0.5)", u.cpu_us / 1e6);
		check(!(u.have & CGROUP_USAGE_THROTTLED) || u.cpu_throttled_us > 0,
		      "throttled for %.3f s", u.cpu_throttled_us / 1e6);
	} else {
		check(false, "CPU spin in the child");
	}

	/* pids: 16 tasks in all, the child is one. */
	write(k.cmd, "f", 1);
	if (read(k.res, &fr, sizeof(fr)) == (ssize_t)sizeof(fr)) {
		check(fr.forked <= 15 && fr.err == EAGAIN,
		      "fork loop stopped after %d forks with %s (pids.max 16)", fr.forked,
		      fr.err ? strerror(fr.err) : "no error");
	} else {
		check(false, "fork loop report");
		fr.forked = 0;
	}

	if (!cgroup_read_usage(&cg, &u))
		printf("     usage: cpu %" PRIu64 " us, throttled %" PRIu64 " us, mem peak %"
		       PRIu64 " bytes, oom kills %" PRIu64 " (have 0x%x)\n", u.cpu_us,
		       u.cpu_throttled_us, u.mem_peak_bytes, u.oom_kills, u.have);

	err = cgroup_destroy(&cg);
	check(err == 0, "destroy%s%s", err ? ": " : "", err ? husk_lasterr() : "");
	st = wait_status(k.pid);
	check(st >= 0 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "child killed by SIGKILL");
	for (i = 0; i < (unsigned)fr.forked; i++)
		if (running(fr.pids[i]))
			break;
	check(i == (unsigned)fr.forked, "all %d grandchildren gone", fr.forked);
	for (i = 0; i < n; i++)
		check(!dir_exists(paths[i]), "%s removed", paths[i]);
	check(cgroup_destroy(&cg) == 0, "second destroy is a no-op");
	close(k.cmd);
	close(k.res);
}

/* 96 MiB touched under a 32 MiB limit: OOM kill, never swap. */
static void memory_limit(void)
{
	const struct cgroup_limits l = { 0, 32 * MiB, 0 };
	struct cgroup_usage u;
	struct husk_cgroup cg;
	struct kid k;
	int err, st;

	err = cgroup_create(&cg, &l);
	check(err == 0, "create 32 MiB group%s%s", err ? ": " : "", err ? husk_lasterr() : "");
	if (err)
		return;
	spawn(&k);
	check(cgroup_attach(&cg, k.pid) == 0, "attach child %d", (int)k.pid);
	write(k.cmd, "m", 1);
	st = wait_status(k.pid);
	check(st >= 0 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL,
	      "touching 96 MiB under 32 MiB: %s", st >= 0 && WIFSIGNALED(st) ?
	      strsignal(WTERMSIG(st)) : "survived (swapped?)");
	if (!cgroup_read_usage(&cg, &u)) {
		if (u.have & CGROUP_USAGE_OOM)
			check(u.oom_kills >= 1, "oom_kill count %" PRIu64, u.oom_kills);
		if (u.have & CGROUP_USAGE_MEM_PEAK)
			check(u.mem_peak_bytes <= 32 * MiB, "memory peak %" PRIu64 " <= limit",
			      u.mem_peak_bytes);
	}
	check(cgroup_destroy(&cg) == 0, "destroy 32 MiB group");
	close(k.cmd);
	close(k.res);
}

/*
 * A group named for an owner that cannot exist (pid above PID_MAX_LIMIT),
 * holding a live process, in every hierarchy: what a crashed husk leaves.
 */
static void stale_cleanup(void)
{
	const struct cgroup_limits l = { 500, 64 * MiB, 16 };
	char stale[CGROUP_MAX_DIRS][CGROUP_PATH_MAX], pidtxt[16], *slash;
	unsigned long long start, ns;
	struct husk_cgroup cg, live;
	unsigned i, n, seq;
	int pid, removed, st;
	struct kid k;
	FILE *f;

	if (cgroup_create(&cg, &l)) {
		check(false, "create for stale test: %s", husk_lasterr());
		return;
	}
	sscanf(cg.name, "vm-%d-%llu-%u-%llu", &pid, &start, &seq, &ns);
	spawn(&k);
	snprintf(pidtxt, sizeof(pidtxt), "%d", (int)k.pid);
	n = cg.ndirs;
	for (i = 0; i < n; i++) {
		snprintf(stale[i], sizeof(stale[i]), "%s", cg.dir[i].path);
		slash = strrchr(stale[i], '/');
		snprintf(slash + 1, sizeof(stale[i]) - (slash + 1 - stale[i]),
			 "vm-999999999-%llu-0-%llu", start, ns);
		if (mkdir(stale[i], 0755))
			check(false, "mkdir %s: %s", stale[i], strerror(errno));
		strcat(stale[i], "/cgroup.procs");
		f = fopen(stale[i], "w");
		if (!f || fputs(pidtxt, f) < 0 || fclose(f))
			check(false, "moving %d into %s: %s", (int)k.pid, stale[i], strerror(errno));
		*strrchr(stale[i], '/') = '\0';
	}
	check(cgroup_destroy(&cg) == 0, "scaffold group removed");
	/* A live group of ours must survive the cleanup. */
	check(cgroup_create(&live, &l) == 0, "live group %s", live.name);
	removed = cgroup_clean_stale();
	check(removed == 1, "clean_stale removed %d group(s) (want 1)", removed);
	st = wait_status(k.pid);
	check(st >= 0 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL,
	      "process left in the stale group was killed");
	for (i = 0; i < n; i++)
		check(!dir_exists(stale[i]), "%s removed", stale[i]);
	for (i = 0; i < live.ndirs; i++)
		check(dir_exists(live.dir[i].path), "live %s kept", live.dir[i].path);
	check(cgroup_destroy(&live) == 0, "live group destroyed");
	close(k.cmd);
	close(k.res);
}

/*
 * A husk that dies without teardown: a forked owner makes a group, puts
 * its own child in it and exits. The child is re-parented to us (child
 * subreaper), so we can see it killed once clean_stale finds the group.
 */
static void crash_cleanup(void)
{
	const struct cgroup_limits l = { 500, 64 * MiB, 16 };
	struct { struct husk_cgroup cg; pid_t kid; int err; } msg;
	pid_t owner;
	unsigned i;
	int p[2], removed, st;

	prctl(PR_SET_CHILD_SUBREAPER, 1);
	if (pipe(p))
		return;
	owner = fork();
	if (owner == 0) {
		memset(&msg, 0, sizeof(msg));
		msg.err = cgroup_create(&msg.cg, &l);
		if (!msg.err) {
			msg.kid = fork();
			if (msg.kid == 0) {
				for (;;)
					pause();
			}
			msg.err = cgroup_attach(&msg.cg, msg.kid);
		}
		write(p[1], &msg, sizeof(msg));
		_exit(0);	/* "crash": no cgroup_destroy() */
	}
	close(p[1]);
	if (read(p[0], &msg, sizeof(msg)) != (ssize_t)sizeof(msg) || msg.err) {
		check(false, "crashing owner set up its group");
		close(p[0]);
		return;
	}
	close(p[0]);
	wait_status(owner);
	check(running(msg.kid), "owner %d gone, its VM process %d still runs in %s",
	      (int)owner, (int)msg.kid, msg.cg.name);
	removed = cgroup_clean_stale();
	check(removed == 1, "clean_stale after the crash removed %d group(s) (want 1)", removed);
	st = wait_status(msg.kid);
	check(st >= 0 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL,
	      "orphaned VM process killed");
	for (i = 0; i < msg.cg.ndirs; i++)
		check(!dir_exists(msg.cg.dir[i].path), "%s removed", msg.cg.dir[i].path);
	prctl(PR_SET_CHILD_SUBREAPER, 0);
}

int main(int argc, char **argv)
{
	const struct cgroup_limits probe = { 500, 64 * MiB, 16 };
	const char *expect = NULL;
	struct husk_cgroup cg;
	int err;

	if (argc == 3 && !strcmp(argv[1], "--expect"))
		expect = argv[2];
	else if (argc != 1) {
		fprintf(stderr, "usage: %s [--expect v1|v2|mixed]\n", argv[0]);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (geteuid() != 0) {
		printf("SKIP: needs root to create cgroups\n");
		return 77;
	}
	err = cgroup_clean_stale();
	printf("     startup: clean_stale = %d\n", err);
	/* Nothing to test without the controllers; anything else is a failure. */
	err = cgroup_create(&cg, &probe);
	if (err == -ENOENT || err == -ENOTSUP) {
		printf("SKIP: %s\n", husk_lasterr());
		return expect ? 1 : 77;
	}
	if (!err)
		cgroup_destroy(&cg);

	limits_and_teardown(expect);
	memory_limit();
	stale_cleanup();
	crash_cleanup();
	printf("cg-driver: %s\n", failures ? "FAILED" : "all passed");
	printf("cgroup: %d passed, %d failed\n", passes, failures);
	return failures ? 1 : 0;
}
