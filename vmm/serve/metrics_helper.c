/*
 * husk-metrics: the HTTP side of husk serve --metrics (see serve/metrics.c).
 *
 * Started by serve with the listening socket as fd 3 and serve's end of a
 * SOCK_SEQPACKET pair as fd 4 (serve/metrics_proto.h). libmicrohttpd parses
 * the requests in this process, so nothing the network sends reaches serve;
 * each GET /metrics asks serve for the exposition text. Before it serves,
 * it confines itself: with --uid (serve is root) the jail of sandbox/jail.h
 * (an empty read-only "/", that uid, no capabilities, not dumpable), in any
 * case no core, no new privileges and a system call list
 * (SECCOMP_KIND_METRICS) that has no open, no socket and no exec. The
 * helper exits when serve closes the pair (and is killed if serve dies).
 */
#include <errno.h>
#include <microhttpd.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "lib/util.h"
#include "sandbox/jail.h"
#include "sandbox/seccomp.h"
#include "serve/metrics_proto.h"

/* Descriptors: the two given, libmicrohttpd's connections, its wake-up pair and epoll. */
#define HELPER_NOFILE 64
/* Tasks of its uid: this thread and libmicrohttpd's one, with room. */
#define HELPER_NPROC 4

/* How long a scrape waits for serve's answer before it is a 503. */
#define ANSWER_WAIT_S 5

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t seq;
static char *answer_buf;

static void die(const char *what)
{
	fprintf(stderr, "husk-metrics: %s: %s\n", what, strerror(errno));
	exit(1);
}

/*
 * Serve's text for this scrape (malloc'd), or NULL. One scrape asks at a
 * time; an answer to an earlier scrape that gave up waiting is dropped.
 */
static char *ask_serve(void)
{
	struct metrics_req req = { .magic = METRICS_MAGIC };
	char *body = NULL;
	uint32_t got;
	ssize_t n;

	pthread_mutex_lock(&lock);
	req.seq = ++seq;
	if (send(METRICS_CHANNEL_FD, &req, sizeof(req), MSG_NOSIGNAL) != sizeof(req))
		goto out;
	for (;;) {
		n = recv(METRICS_CHANNEL_FD, answer_buf, sizeof(got) + METRICS_MAX_BODY, MSG_TRUNC);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < (ssize_t)sizeof(got) || n > (ssize_t)(sizeof(got) + METRICS_MAX_BODY))
			goto out;
		memcpy(&got, answer_buf, sizeof(got));
		if (got == req.seq)
			break;
	}
	n -= sizeof(got);
	if (n > 0 && (body = malloc(n + 1))) {
		memcpy(body, answer_buf + sizeof(got), n);
		body[n] = '\0';
	}
out:
	pthread_mutex_unlock(&lock);
	return body;
}

static enum MHD_Result answer(void *cls, struct MHD_Connection *c, const char *url,
			      const char *method, const char *version, const char *data,
			      size_t *size, void **state)
{
	struct MHD_Response *r;
	enum MHD_Result ret;
	unsigned code = MHD_HTTP_OK;
	char *body = NULL;

	if (strcmp(method, "GET") && strcmp(method, "HEAD")) {
		code = MHD_HTTP_METHOD_NOT_ALLOWED;
	} else if (strcmp(url, "/metrics")) {
		code = MHD_HTTP_NOT_FOUND;
	} else {
		body = ask_serve();
		if (!body)
			code = MHD_HTTP_SERVICE_UNAVAILABLE;
	}
	if (code != MHD_HTTP_OK)
		r = MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
	else
		r = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
	ret = MHD_queue_response(c, code, r);
	MHD_destroy_response(r);
	return ret;
}

/* The jail (with a uid to take), then the system call list; 0 or -errno. */
static int confine(int argc, char **argv)
{
	struct jail_cfg jc = { .root = METRICS_ROOT, .nofile = HELPER_NOFILE,
			       .nproc = HELPER_NPROC };
	struct rlimit none = { 0, 0 };
	uint64_t uid;
	int err;

	if (argc == 3 && !strcmp(argv[1], "--uid") && !parse_u64(argv[2], 1, UINT32_MAX - 1, &uid)) {
		jc.uid = jc.gid = (uid_t)uid;
		err = jail_enter(&jc);
		if (err < 0)
			return err;
	} else if (argc != 1) {
		return husk_seterr(EINVAL, "usage: husk-metrics [--uid N]");
	} else if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) || setrlimit(RLIMIT_CORE, &none)) {
		return husk_seterr(errno, "prctl: %s", strerror(errno));
	}
	return seccomp_install(SECCOMP_KIND_METRICS);
}

int main(int argc, char **argv)
{
	struct timeval tv = { .tv_sec = ANSWER_WAIT_S };
	struct pollfd p = { .fd = METRICS_CHANNEL_FD };
	struct MHD_Daemon *d;
	char ready = METRICS_READY;
	int type;
	socklen_t len = sizeof(type);

	if (getsockopt(METRICS_CHANNEL_FD, SOL_SOCKET, SO_TYPE, &type, &len) || type != SOCK_SEQPACKET ||
	    getsockopt(METRICS_LISTEN_FD, SOL_SOCKET, SO_TYPE, &type, &len) || type != SOCK_STREAM) {
		fprintf(stderr, "husk-metrics: husk serve --metrics starts this program; it is not "
			"run by hand\n");
		return 2;
	}
	answer_buf = malloc(sizeof(uint32_t) + METRICS_MAX_BODY);
	if (!answer_buf)
		die("malloc");
	if (setsockopt(METRICS_CHANNEL_FD, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)))
		die("SO_RCVTIMEO");
	if (confine(argc, argv)) {
		fprintf(stderr, "husk-metrics: cannot confine itself: %s\n", husk_lasterr());
		return 1;
	}
	d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ERROR_LOG, 0,
			     NULL, NULL, answer, NULL,
			     MHD_OPTION_LISTEN_SOCKET, (MHD_socket)METRICS_LISTEN_FD,
			     MHD_OPTION_CONNECTION_LIMIT, 16u,
			     MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_END);
	if (!d) {
		fprintf(stderr, "husk-metrics: libmicrohttpd would not serve the socket\n");
		return 1;
	}
	if (send(METRICS_CHANNEL_FD, &ready, 1, MSG_NOSIGNAL) != 1)
		die("telling serve it is ready");
	/* Asks no events: poll returns on POLLHUP, serve gone or done. */
	while (poll(&p, 1, -1) < 0 && errno == EINTR)
		;
	MHD_stop_daemon(d);
	return 0;
}
