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
/* How long a partial line (a prompt, a progress bar) may wait to be written. */
#define CONSOLE_FLUSH_MS 20

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
	int kick;		/* eventfd of the event loop that flushes, or -1 */
	bool asleep;		/* that loop waits with no flush timer */
};

void console_init(struct console *c, int fd);
void console_put(struct console *c, uint8_t byte);
/* Write out a partial line (the event loop calls this when output pauses). */
void console_flush(struct console *c);
/*
 * An event loop flushes partial lines, but an idle VM's loop should not
 * wake on a timer for output that never comes. Before it waits, the loop
 * asks console_wait_ms() for its poll timeout: CONSOLE_FLUSH_MS while a
 * partial line is buffered (or max_ms if sooner), else max_ms (-1: none),
 * and the first byte the guest prints after that writes to kick_fd, which
 * the loop polls: a quiet guest costs no wake-ups, a chatty one at most one
 * per CONSOLE_FLUSH_MS. Discarded output (fd -1) needs no flush at all;
 * without a kick_fd the loop keeps a CONSOLE_FLUSH_MS timer.
 */
void console_set_kick(struct console *c, int kick_fd);
int console_wait_ms(struct console *c, int max_ms);
bool console_panicked(struct console *c, char *line, unsigned len);
/*
 * The last output, oldest first, from a line's start when the ring has
 * wrapped, NUL-terminated in buf; returns its length.
 */
size_t console_tail(struct console *c, char *buf, size_t cap);

#endif
