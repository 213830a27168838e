/*
 * conn: a client's connection to husk serve, JSON lines each way.
 */
#ifndef HUSK_SERVE_CONN_H
#define HUSK_SERVE_CONN_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

struct sconn {
	int fd;
	char *buf;
	size_t len, cap;
};

/* given, else $HUSK_SERVER, else the daemon's default socket. */
const char *serve_socket_path(const char *given);
/* Connect; -errno with a message that says what to check. */
int sconn_open(struct sconn *c, const char *path);
void sconn_close(struct sconn *c);
/* Send req (stolen) as one line. */
int sconn_send(struct sconn *c, json_t *req);
/* The next answer line: 1 with *out, 0 nothing yet (nonblocking), -errno. */
int sconn_recv(struct sconn *c, json_t **out, bool block);

#endif
