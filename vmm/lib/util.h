/*
 * util: error reporting, clocks and small file helpers shared by every module.
 *
 * Library functions return -errno and describe the failure with husk_seterr();
 * the caller that talks to the user prints husk_lasterr() with its own context.
 * The message is thread-local so vCPU threads never clobber each other's text.
 */
#ifndef HUSK_UTIL_H
#define HUSK_UTIL_H

#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Record why the current operation failed; returns -err for tail calls. */
int husk_seterr(int err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
const char *husk_lasterr(void);

/*
 * Copy s into out (cap bytes, always NUL-terminated) with every byte that is
 * not printable ASCII written as \xNN; returns the length written.
 */
size_t husk_escape(char *out, size_t cap, const char *s);

/* Messages to stderr, prefixed with "husk: ", escaped with husk_escape(). */
void husk_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
extern int husk_verbose;
void husk_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * pthread_create with a 1 MiB stack. glibc's default is RLIMIT_STACK (8 MiB),
 * whose first touch a host with transparent huge pages "always" (Debian's
 * default) backs with a 2 MiB page it must clear: 3-6 ms per thread under
 * the test host's emulation, on every VM's cold path. A stack smaller than
 * 2 MiB never holds a huge page. husk's threads keep their frames small
 * (the largest on a device or vCPU thread is about 12 KiB).
 */
#define HUSK_THREAD_STACK (1u << 20)
int husk_thread_create(pthread_t *t, void *(*fn)(void *), void *arg);
/*
 * After pthread_join of the thread whose gettid() was tid: wait (briefly)
 * until the kernel has let it go too, so the process counts one thread
 * less. The join returns when the thread cleared its tid, a little before.
 */
void husk_thread_gone(pid_t tid);

/* CLOCK_MONOTONIC and CLOCK_REALTIME in microseconds. */
uint64_t now_us(void);
uint64_t wall_us(void);
/*
 * A poll(2) timeout that wakes no earlier than due (both now_us() values):
 * -1 for UINT64_MAX (no deadline), 0 when due has passed, else rounded up
 * to whole milliseconds and capped at a minute (the caller polls again).
 */
int ms_until(uint64_t due, uint64_t now);
/* Reset a non-blocking eventfd that polled readable. */
void drain_eventfd(int fd);

/*
 * Read exactly len bytes of an open file from offset off into dst (which may
 * be guest RAM); a short file is -EIO.
 */
int read_exact_at(int fd, void *dst, uint64_t len, uint64_t off);

/* pwrite all of p at off; -errno (or -EIO on a write of 0 bytes). */
int write_all_at(int fd, const void *p, size_t n, uint64_t off);

/*
 * Write all of p unless the fd fails: output sinks (console, job output)
 * must never stop a VM because their reader went away.
 */
/* All n bytes (retrying short writes and EINTR): 0, or -errno (-EIO: no progress). */
int write_all(int fd, const void *p, size_t n);
void write_best_effort(int fd, const void *p, size_t n);

/*
 * A non-blocking signalfd for the signals that ask husk to stop (SIGINT,
 * SIGTERM, SIGHUP); they must already be blocked in every thread.
 */
int stop_signalfd(void);
/* Those signals as a set (a caller that watches one more). */
void stop_sigset(sigset_t *set);

/* Parse a decimal unsigned integer in [min, max]; -EINVAL/-ERANGE. */
int parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out);
/*
 * A size in bytes: a decimal number of at least min, below 2^34, with an
 * optional k, m or g (either case) for KiB, MiB or GiB; -EINVAL otherwise.
 */
int parse_size(const char *s, uint64_t min, uint64_t *out);

/* A signal by its name, with or without "SIG" ("TERM", "SIGKILL"); -1 if unknown. */
int signal_by_name(const char *s);

/*
 * mkdir -p: path itself with mode, parents it creates 0755 (so a private
 * /run/husk/uids does not make /run/husk private); -errno naming the part
 * that failed.
 */
int mkdir_p(const char *path, unsigned mode);

/*
 * Remove name under parent and everything below it, never following a
 * symbolic link out of the tree. Best effort: errors are ignored.
 */
void rm_tree_at(int parent, const char *name);

/*
 * An administrator's program (mke2fs, nft): /usr/sbin/name or /sbin/name,
 * which a caller's PATH often lacks; else name itself, for execlp's PATH.
 */
const char *sbin_path(const char *name, char *buf, size_t len);

/*
 * A file that comes with husk: beside husk's own binary (a build tree, as
 * the relative path beside) when it is accessible there with mode, else at
 * installed (where make install put it). The path goes to out either way;
 * 0 when the chosen file is accessible, else -errno.
 */
int husk_own_file(const char *beside, const char *installed, int mode, char *out,
		  size_t len);

#endif
