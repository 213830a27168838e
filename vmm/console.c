/*
 * console: the guest's serial output. See console.h.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "console.h"

void console_init(struct console *c, int fd)
{
	memset(c, 0, sizeof(*c));
	pthread_mutex_init(&c->lock, NULL);
	c->fd = fd;
}

static void write_all(int fd, const char *p, size_t n)
{
	while (n && fd >= 0) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;	/* a closed console must not stop the VM */
		p += w;
		n -= w;
	}
}

static void flush_locked(struct console *c)
{
	if (!c->len)
		return;
	write_all(c->fd, c->line, c->len);
	c->len = 0;
}

static void check_panic(struct console *c)
{
	if (c->panic_seen)
		return;
	c->line[c->len] = '\0';
	if (memmem(c->line, c->len, CONSOLE_PANIC_BANNER, strlen(CONSOLE_PANIC_BANNER))) {
		c->panic_seen = true;
		memcpy(c->panic_line, c->line, c->len + 1);
		/* Drop the trailing newline for reporting. */
		if (c->len && c->panic_line[c->len - 1] == '\n')
			c->panic_line[c->len - 1] = '\0';
	}
}

void console_put(struct console *c, uint8_t byte)
{
	pthread_mutex_lock(&c->lock);
	c->bytes++;
	/* Serial lines end in \r\n; the host's terminal wants \n. */
	if (byte != '\r') {
		c->line[c->len++] = byte;
		if (byte == '\n' || c->len == CONSOLE_LINE_MAX - 1) {
			check_panic(c);
			flush_locked(c);
		}
	}
	pthread_mutex_unlock(&c->lock);
}

void console_flush(struct console *c)
{
	pthread_mutex_lock(&c->lock);
	check_panic(c);
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
