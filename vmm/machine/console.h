/*
 * console: where the guest's serial output goes. Bytes are collected into
 * lines (so a log is written a line at a time, not a syscall per byte),
 * written to the console fd, counted, and watched for the kernel's panic
 * banner so husk can tell a panic from an ordinary reboot. The banner's
 * first letter occurs nowhere else in it, so a restart-on-mismatch matcher
 * finds every occurrence.
 */
#ifndef HUSK_CONSOLE_H
#define HUSK_CONSOLE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#define CONSOLE_LINE_MAX 512
/*
 * A guest can print forever; the log it leaves on the host is bounded.
 * Past the limit output is counted, not written, and one marker says so.
 */
#define CONSOLE_DEFAULT_LIMIT (64ull << 20)
#define CONSOLE_PANIC_BANNER "Kernel panic - not syncing"
/*
 * The last bytes the guest printed are kept even when the console is
 * discarded, so a panic or crash can be reported with the oops that led to
 * it (the kernel turns its console verbose for an oops).
 */
#define CONSOLE_TAIL_MAX 4096

struct console {
	pthread_mutex_t lock;
	int fd;			/* -1: discard */
	char line[CONSOLE_LINE_MAX];
	unsigned len;
	uint64_t bytes;		/* total bytes the guest wrote */
	uint64_t written;	/* bytes written to fd */
	uint64_t limit;		/* most bytes written to fd */
	uint64_t dropped;	/* bytes beyond the limit */
	/*
	 * The banner is matched byte by byte as it streams past, so neither a
	 * partial-line flush nor the line-length cut can hide it; once seen, the
	 * rest of its line is captured for the report.
	 */
	unsigned match;		/* banner bytes matched so far */
	bool capturing;		/* copying the panic line */
	bool panic_seen;
	unsigned panic_len;
	char panic_line[CONSOLE_LINE_MAX];
	char tail[CONSOLE_TAIL_MAX];	/* a ring of the last bytes */
	unsigned tail_pos;
	bool tail_full;
};

void console_init(struct console *c, int fd);
void console_put(struct console *c, uint8_t byte);
/* Write out a partial line (the event loop calls this when output pauses). */
void console_flush(struct console *c);
bool console_panicked(struct console *c, char *line, unsigned len);
/*
 * The last output, oldest first, from a line's start when the ring has
 * wrapped, NUL-terminated in buf; returns its length.
 */
size_t console_tail(struct console *c, char *buf, size_t cap);

#endif
