/*
 * util: error reporting, clocks and small file helpers shared by every module.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "lib/util.h"

static __thread char lasterr[512];
int husk_verbose;

int husk_seterr(int err, const char *fmt, ...)
{
	va_list ap;

	char tmp[sizeof(lasterr)];

	/* Format aside first: callers may pass husk_lasterr() as an argument. */
	va_start(ap, fmt);
	vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	memcpy(lasterr, tmp, sizeof(lasterr));
	return err > 0 ? -err : err;
}

const char *husk_lasterr(void)
{
	return lasterr[0] ? lasterr : "unknown error";
}

size_t husk_escape(char *out, size_t cap, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	size_t n = 0;

	if (!cap)
		return 0;
	for (; *s && n + 4 < cap; s++) {
		unsigned char c = (unsigned char)*s;

		if (c >= 0x20 && c < 0x7f) {
			out[n++] = c;
			continue;
		}
		out[n++] = '\\';
		out[n++] = 'x';
		out[n++] = hex[c >> 4];
		out[n++] = hex[c & 15];
	}
	if (*s && n + 1 < cap)
		out[n++] = '.';	/* cut: long messages end in a dot */
	out[n] = '\0';
	return n;
}

void husk_msg(const char *fmt, ...)
{
	char line[1024], safe[1100];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	/* Messages carry names the guest chose: no terminal escapes get through. */
	husk_escape(safe, sizeof(safe), line);
	/* One write per message so lines from several threads do not interleave. */
	fprintf(stderr, "husk: %s\n", safe);
}

void husk_debug(const char *fmt, ...)
{
	char line[1024], safe[1100];
	va_list ap;

	if (!husk_verbose)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	husk_escape(safe, sizeof(safe), line);
	fprintf(stderr, "husk: debug: %s\n", safe);
}

static uint64_t clock_us(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

int husk_thread_create(pthread_t *t, void *(*fn)(void *), void *arg)
{
	pthread_attr_t a;
	int err;

	err = pthread_attr_init(&a);
	if (err)
		return err;
	err = pthread_attr_setstacksize(&a, HUSK_THREAD_STACK);
	if (!err)
		err = pthread_create(t, &a, fn, arg);
	pthread_attr_destroy(&a);
	return err;
}

void husk_thread_gone(pid_t tid)
{
	int i;

	/* A bounded wait: the exit has no step left that sleeps for long. */
	for (i = 0; tid > 0 && i < 2000; i++) {
		if (syscall(SYS_tgkill, getpid(), tid, 0) < 0 && errno == ESRCH)
			return;
		if (i < 10)
			sched_yield();
		else
			usleep(500);
	}
}

uint64_t now_us(void)
{
	return clock_us(CLOCK_MONOTONIC);
}

uint64_t wall_us(void)
{
	return clock_us(CLOCK_REALTIME);
}

int ms_until(uint64_t due, uint64_t now)
{
	uint64_t ms;

	if (due == UINT64_MAX)
		return -1;
	if (due <= now)
		return 0;
	ms = (due - now) / 1000 + ((due - now) % 1000 != 0);
	return ms > 60000 ? 60000 : (int)ms;
}

void drain_eventfd(int fd)
{
	uint64_t v;

	/* EAGAIN (nothing left) is the one failure a readable eventfd gives. */
	if (read(fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		husk_debug("eventfd %d: %s", fd, strerror(errno));
}

int parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	unsigned long long v;
	char *end;

	if (!s || !*s || *s == '-' || *s == '+')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end)
		return errno == ERANGE ? -ERANGE : -EINVAL;
	if (v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

int parse_size(const char *s, uint64_t min, uint64_t *out)
{
	char num[32];
	size_t n = s ? strlen(s) : 0;
	unsigned shift = 0;

	if (!n || n >= sizeof(num))
		return -EINVAL;
	memcpy(num, s, n + 1);
	switch (num[n - 1] | 0x20) {
	case 'k': shift = 10; break;
	case 'm': shift = 20; break;
	case 'g': shift = 30; break;
	}
	if (shift)
		num[n - 1] = '\0';
	/* Any number of gigabytes below 2^34 fits in 64 bits. */
	if (parse_u64(num, min, UINT64_MAX >> 30, out))
		return -EINVAL;
	*out <<= shift;
	return 0;
}

int read_exact_at(int fd, void *dst, uint64_t len, uint64_t off)
{
	uint8_t *d = dst;

	while (len) {
		ssize_t n = pread(fd, d, len > (1u << 30) ? (1u << 30) : len, off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		d += n;
		off += n;
		len -= n;
	}
	return 0;
}

int write_all_at(int fd, const void *p, size_t n, uint64_t off)
{
	const uint8_t *b = p;

	while (n) {
		ssize_t w = pwrite(fd, b, n, off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		b += w;
		off += w;
		n -= w;
	}
	return 0;
}

int write_all(int fd, const void *p, size_t n)
{
	const uint8_t *b = p;

	while (n) {
		ssize_t w = write(fd, b, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

void write_best_effort(int fd, const void *p, size_t n)
{
	if (fd >= 0)
		(void)write_all(fd, p, n);
}

void stop_sigset(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGINT);
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGHUP);
}

int stop_signalfd(void)
{
	sigset_t set;

	stop_sigset(&set);
	return signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
}

int mkdir_p(const char *path, unsigned mode)
{
	char buf[PATH_MAX];
	size_t len = strlen(path);
	char *p, c;

	if (!len || len >= sizeof(buf))
		return husk_seterr(ENAMETOOLONG, "bad directory path '%s'", path);
	memcpy(buf, path, len + 1);
	for (p = buf + 1;; p++) {
		if (*p != '/' && *p)
			continue;
		c = *p;
		*p = '\0';
		/* Parents as mkdir -p -m makes them: others may pass through. */
		if (mkdir(buf, c ? 0755 : mode) && errno != EEXIST)
			return husk_seterr(errno, "cannot create %s: %s", buf, strerror(errno));
		*p = c;
		if (!c)
			return 0;
	}
}

void rm_tree_at(int parent, const char *name)
{
	int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d;
	struct dirent *de;

	if (fd >= 0 && (d = fdopendir(fd))) {
		while ((de = readdir(d)))
			if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
				rm_tree_at(dirfd(d), de->d_name);
		closedir(d);
		unlinkat(parent, name, AT_REMOVEDIR);
		return;
	}
	if (fd >= 0)
		close(fd);
	unlinkat(parent, name, 0);
}

int signal_by_name(const char *s)
{
	static const struct { const char *name; int sig; } names[] = {
		{ "HUP", SIGHUP }, { "INT", SIGINT }, { "QUIT", SIGQUIT }, { "KILL", SIGKILL },
		{ "USR1", SIGUSR1 }, { "USR2", SIGUSR2 }, { "TERM", SIGTERM },
		{ "CONT", SIGCONT }, { "STOP", SIGSTOP }, { "ALRM", SIGALRM },
	};

	if (!strncmp(s, "SIG", 3))
		s += 3;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(s, names[i].name))
			return names[i].sig;
	return -1;
}

const char *sbin_path(const char *name, char *buf, size_t len)
{
	static const char *const dirs[] = { "/usr/sbin", "/sbin" };

	for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
		snprintf(buf, len, "%s/%s", dirs[i], name);
		if (access(buf, X_OK) == 0)
			return buf;
	}
	return name;
}

int husk_own_file(const char *beside, const char *installed, int mode, char *out,
		  size_t len)
{
	char exe[PATH_MAX], *slash;
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (n > 0) {
		exe[n] = '\0';
		slash = strrchr(exe, '/');
		if (slash) {
			*slash = '\0';
			snprintf(out, len, "%s/%s", exe, beside);
			if (access(out, mode) == 0)
				return 0;
		}
	}
	snprintf(out, len, "%s", installed);
	return access(out, mode) ? -errno : 0;
}
