/*
 * console: the guest's serial output. See console.h.
 */
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "machine/console.h"
#include "lib/util.h"

void console_init(struct console *c, int fd)
{
	memset(c, 0, sizeof(*c));
	pthread_mutex_init(&c->lock, NULL);
	c->fd = fd;
	c->limit = CONSOLE_DEFAULT_LIMIT;
	c->kick = -1;
}

void console_set_kick(struct console *c, int kick_fd)
{
	pthread_mutex_lock(&c->lock);
	c->kick = kick_fd;
	pthread_mutex_unlock(&c->lock);
}

int console_wait_ms(struct console *c, int max_ms)
{
	int ms = max_ms;

	pthread_mutex_lock(&c->lock);
	/* Discarded output needs no flush: the tail and the panic watch see each byte. */
	if (c->fd >= 0 && (c->len || c->kick < 0)) {
		if (ms < 0 || ms > CONSOLE_FLUSH_MS)
			ms = CONSOLE_FLUSH_MS;
	} else if (c->fd >= 0) {
		c->asleep = true;
	}
	pthread_mutex_unlock(&c->lock);
	return ms;
}

static void flush_locked(struct console *c)
{
	static const char marker[] = "\n[husk: console log limit reached; further "
				     "output is dropped and counted]\n";
	uint64_t room = c->written < c->limit ? c->limit - c->written : 0;
	unsigned n = c->len < room ? c->len : (unsigned)room;

	if (!c->len)
		return;
	write_best_effort(c->fd, c->line, n);
	c->written += n;
	if (n < c->len) {
		if (!c->dropped)
			write_best_effort(c->fd, marker, sizeof(marker) - 1);
		c->dropped += c->len - n;
	}
	c->len = 0;
}

static void watch_panic(struct console *c, uint8_t byte)
{
	static const char banner[] = CONSOLE_PANIC_BANNER;

	if (c->capturing) {
		if (byte == '\n' || c->panic_len == sizeof(c->panic_line) - 1)
			c->capturing = false;
		else
			c->panic_line[c->panic_len++] = byte;
		c->panic_line[c->panic_len] = '\0';
		return;
	}
	if (c->panic_seen)
		return;
	if (byte == (uint8_t)banner[c->match])
		c->match++;
	else
		c->match = byte == (uint8_t)banner[0];
	if (c->match == sizeof(banner) - 1) {
		unsigned before = sizeof(banner) - 2;	/* banner bytes already buffered */

		c->panic_seen = true;
		c->capturing = true;
		/* Report the whole line (timestamp included) when it is still buffered. */
		if (c->len >= before && !memcmp(c->line + c->len - before, banner, before)) {
			memcpy(c->panic_line, c->line, c->len);
			c->panic_line[c->len] = byte;
			c->panic_len = c->len + 1;
		} else {
			memcpy(c->panic_line, banner, sizeof(banner));
			c->panic_len = sizeof(banner) - 1;
		}
		c->panic_line[c->panic_len] = '\0';
	}
}

void console_put(struct console *c, uint8_t byte)
{
	pthread_mutex_lock(&c->lock);
	c->bytes++;
	/* Serial lines end in \r\n; the host's terminal wants \n. */
	if (byte != '\r') {
		watch_panic(c, byte);
		c->tail[c->tail_pos++] = (char)byte;
		if (c->tail_pos == sizeof(c->tail)) {
			c->tail_pos = 0;
			c->tail_full = true;
		}
		c->line[c->len++] = byte;
		if (byte == '\n' || c->len == CONSOLE_LINE_MAX - 1)
			flush_locked(c);
		if (c->len && c->asleep) {
			uint64_t one = 1;

			c->asleep = false;
			write_best_effort(c->kick, &one, sizeof(one));
		}
	}
	pthread_mutex_unlock(&c->lock);
}

void console_flush(struct console *c)
{
	pthread_mutex_lock(&c->lock);
	c->asleep = false;
	flush_locked(c);
	pthread_mutex_unlock(&c->lock);
}

bool console_panicked(struct console *c, char *line, unsigned len)
{
	bool p;

	pthread_mutex_lock(&c->lock);
	p = c->panic_seen;
	if (p && line && len) {
		strncpy(line, c->panic_line, len - 1);
		line[len - 1] = '\0';
	}
	pthread_mutex_unlock(&c->lock);
	return p;
}

size_t console_tail(struct console *c, char *buf, size_t cap)
{
	size_t n, skip = 0, first;
	const char *nl;
	bool cut_front;

	if (!cap)
		return 0;
	pthread_mutex_lock(&c->lock);
	n = c->tail_full ? sizeof(c->tail) : c->tail_pos;
	if (n > cap - 1) {
		skip = n - (cap - 1);
		n = cap - 1;
	}
	/* Oldest byte first: after tail_pos once the ring has wrapped. */
	first = ((c->tail_full ? c->tail_pos : 0) + skip) % sizeof(c->tail);
	for (size_t i = 0; i < n; i++)
		buf[i] = c->tail[(first + i) % sizeof(c->tail)];
	cut_front = skip || c->tail_full;
	pthread_mutex_unlock(&c->lock);
	buf[n] = '\0';
	/* A cut line at the front is dropped, if a whole one follows. */
	if (cut_front && (nl = memchr(buf, '\n', n)) && nl + 1 < buf + n) {
		size_t cut = (size_t)(nl + 1 - buf);

		memmove(buf, buf + cut, n - cut + 1);
		n -= cut;
	}
	return n;
}
