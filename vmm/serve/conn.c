/*
 * conn: a client's connection to husk serve (docs/api.md): the socket
 * found, requests sent as JSON lines, answer lines read back whole. Shared
 * by the command-line clients (client.c) and the MCP server (mcp/). The
 * daemon is a peer like any other: a line that does not end, or is not
 * JSON, is an error, not a reason to grow without bound.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "lib/util.h"
#include "serve/conn.h"
#include "serve/serve.h"

const char *serve_socket_path(const char *given)
{
	const char *e = getenv("HUSK_SERVER");

	return given ? given : e && *e ? e : SERVE_DEFAULT_SOCKET;
}

int sconn_open(struct sconn *c, const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };

	memset(c, 0, sizeof(*c));
	if (strlen(path) >= sizeof(a.sun_path))
		return husk_seterr(ENAMETOOLONG, "%s: path too long", path);
	strcpy(a.sun_path, path);
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		int e = errno;

		if (c->fd >= 0)
			close(c->fd);
		return husk_seterr(e, "cannot reach husk serve at %s: %s%s", path, strerror(e),
				   e == ENOENT || e == ECONNREFUSED ? " (is it running? --server PATH "
				   "or HUSK_SERVER names another socket)" : "");
	}
	return 0;
}

void sconn_close(struct sconn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	free(c->buf);
}

int sconn_send(struct sconn *c, json_t *req)
{
	char *s = json_dumps(req, JSON_COMPACT);
	size_t n, off = 0;

	json_decref(req);
	if (!s)
		return husk_seterr(ENOMEM, "out of memory");
	n = strlen(s);
	s[n++] = '\n';	/* json_dumps' NUL becomes the line's end */
	while (off < n) {
		ssize_t w = send(c->fd, s + off, n - off, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			free(s);
			return husk_seterr(errno, "husk serve went away: %s", strerror(errno));
		}
		off += w;
	}
	free(s);
	return 0;
}

/* The next answer line: 1 with *out, 0 nothing yet (nonblocking), -errno. */
int sconn_recv(struct sconn *c, json_t **out, bool block)
{
	char *nl;
	ssize_t n;

	for (;;) {
		nl = c->buf ? memchr(c->buf, '\n', c->len) : NULL;
		if (nl) {
			json_error_t je;

			*out = json_loadb(c->buf, nl - c->buf, 0, &je);
			memmove(c->buf, nl + 1, c->len - (nl + 1 - c->buf));
			c->len -= nl + 1 - c->buf;
			if (!*out)
				return husk_seterr(EPROTO, "husk serve sent something that is not "
						   "JSON: %s", je.text);
			return 1;
		}
		if (c->len + 65536 > c->cap) {
			char *nb = realloc(c->buf, c->cap + 65536 * 2);

			if (!nb)
				return husk_seterr(ENOMEM, "out of memory");
			c->buf = nb;
			c->cap += 65536 * 2;
		}
		if (c->len > (64u << 20))
			return husk_seterr(EPROTO, "husk serve sent a line that does not end");
		n = recv(c->fd, c->buf + c->len, c->cap - c->len, block ? 0 : MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		if (n <= 0)
			return husk_seterr(EPIPE, "husk serve closed the connection");
		c->len += n;
	}
}
