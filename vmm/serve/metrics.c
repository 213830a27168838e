/*
 * metrics: husk serve's Prometheus metrics. See metrics.h.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli_run.h"
#include "config.h"
#include "lib/util.h"
#include "sandbox/jail.h"
#include "serve/metrics.h"
#include "serve/metrics_proto.h"

#define MAX_LABELS 32
#define NAME_MAX_LEN 48

/* A counter family keyed by one label value. */
struct family {
	char values[MAX_LABELS][NAME_MAX_LEN];
	uint64_t counts[MAX_LABELS];
	unsigned n;
};

static const double buckets[] = { 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30 };
#define NB (sizeof(buckets) / sizeof(buckets[0]))

struct hist {
	uint64_t le[NB];
	uint64_t count;
	double sum;
};

static const char *const start_kinds[] = { "cold", "template", "pool" };

static struct {
	pthread_mutex_t lock;
	unsigned running, queued, pooled;
	uint64_t starts[3];
	struct hist start_hist[3];
	struct family jobs, drops;
	struct family requests;		/* "op|result" */
	uint64_t timeouts, oom_kills, dns_refused;
	struct metrics_uid uids[METRICS_MAX_UIDS];
	unsigned nr_uids;
} M = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void family_add(struct family *f, const char *value, uint64_t n)
{
	unsigned i;

	for (i = 0; i < f->n; i++) {
		if (!strcmp(f->values[i], value)) {
			f->counts[i] += n;
			return;
		}
	}
	if (f->n == MAX_LABELS)
		return;	/* bounded: label values come from fixed sets anyway */
	snprintf(f->values[f->n], NAME_MAX_LEN, "%s", value);
	f->counts[f->n++] = n;
}

void metrics_vms(unsigned running, unsigned queued, unsigned pooled)
{
	pthread_mutex_lock(&M.lock);
	M.running = running;
	M.queued = queued;
	M.pooled = pooled;
	pthread_mutex_unlock(&M.lock);
}

void metrics_started(const char *kind, double seconds)
{
	unsigned k, b;

	for (k = 0; k < 3 && strcmp(kind, start_kinds[k]); k++)
		;
	if (k == 3)
		return;
	pthread_mutex_lock(&M.lock);
	M.starts[k]++;
	for (b = 0; b < NB; b++)
		if (seconds <= buckets[b])
			M.start_hist[k].le[b]++;
	M.start_hist[k].count++;
	M.start_hist[k].sum += seconds;
	pthread_mutex_unlock(&M.lock);
}

void metrics_job(const char *outcome)
{
	pthread_mutex_lock(&M.lock);
	family_add(&M.jobs, outcome, 1);
	if (!strcmp(outcome, "timeout"))
		M.timeouts++;
	pthread_mutex_unlock(&M.lock);
}

void metrics_oom_kills(uint64_t n)
{
	pthread_mutex_lock(&M.lock);
	M.oom_kills += n;
	pthread_mutex_unlock(&M.lock);
}

void metrics_egress_drops(const char *reason, uint64_t n)
{
	pthread_mutex_lock(&M.lock);
	family_add(&M.drops, reason, n);
	pthread_mutex_unlock(&M.lock);
}

void metrics_dns_refused(uint64_t n)
{
	pthread_mutex_lock(&M.lock);
	M.dns_refused += n;
	pthread_mutex_unlock(&M.lock);
}

void metrics_request(const char *op, const char *result)
{
	char key[NAME_MAX_LEN];

	snprintf(key, sizeof(key), "%s|%s", op, result);
	pthread_mutex_lock(&M.lock);
	family_add(&M.requests, key, 1);
	pthread_mutex_unlock(&M.lock);
}

void metrics_uids(const struct metrics_uid *rows, unsigned n)
{
	pthread_mutex_lock(&M.lock);
	M.nr_uids = n < METRICS_MAX_UIDS ? n : METRICS_MAX_UIDS;
	if (M.nr_uids)
		memcpy(M.uids, rows, M.nr_uids * sizeof(*rows));
	pthread_mutex_unlock(&M.lock);
}

/* ---- exposition ---- */

static void uids_print(FILE *f)
{
	static const struct {
		const char *name, *help;
	} g[] = {
		{ "husk_uid_connections", "Connections open, by the client's uid." },
		{ "husk_uid_sandboxes", "Sandboxes that have not ended, by their owner's uid." },
		{ "husk_uid_mem_mib", "Guest RAM of those sandboxes in MiB, by uid." },
		{ "husk_uid_queued", "Requests waiting in the queue, by uid." },
	};
	unsigned k, i;

	for (k = 0; k < ARRAY_SIZE(g); k++) {
		fprintf(f, "# HELP %s %s\n# TYPE %s gauge\n", g[k].name, g[k].help, g[k].name);
		for (i = 0; i < M.nr_uids; i++) {
			const struct metrics_uid *u = &M.uids[i];
			unsigned long long v = k == 0 ? u->conns : k == 1 ? u->sandboxes :
					       k == 2 ? u->mem_mib : u->queued;

			fprintf(f, "%s{uid=\"%u\"} %llu\n", g[k].name, (unsigned)u->uid, v);
		}
	}
}

static void family_print(FILE *f, const char *name, const char *label, const struct family *fm)
{
	unsigned i;

	for (i = 0; i < fm->n; i++)
		fprintf(f, "%s{%s=\"%s\"} %llu\n", name, label, fm->values[i],
			(unsigned long long)fm->counts[i]);
}

char *metrics_render(void)
{
	char *buf = NULL, *bar;
	size_t len = 0;
	unsigned k, b, i;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	pthread_mutex_lock(&M.lock);
	fputs("# HELP husk_vms Sandboxes by state.\n# TYPE husk_vms gauge\n", f);
	fprintf(f, "husk_vms{state=\"running\"} %u\nhusk_vms{state=\"queued\"} %u\n"
		"husk_vms{state=\"pooled\"} %u\n", M.running, M.queued, M.pooled);
	fputs("# HELP husk_starts_total Sandboxes started, by how.\n"
	      "# TYPE husk_starts_total counter\n", f);
	for (k = 0; k < 3; k++)
		fprintf(f, "husk_starts_total{kind=\"%s\"} %llu\n", start_kinds[k],
			(unsigned long long)M.starts[k]);
	fputs("# HELP husk_start_seconds From the request to the sandbox ready.\n"
	      "# TYPE husk_start_seconds histogram\n", f);
	for (k = 0; k < 3; k++) {
		const struct hist *h = &M.start_hist[k];

		for (b = 0; b < NB; b++)
			fprintf(f, "husk_start_seconds_bucket{kind=\"%s\",le=\"%g\"} %llu\n",
				start_kinds[k], buckets[b], (unsigned long long)h->le[b]);
		fprintf(f, "husk_start_seconds_bucket{kind=\"%s\",le=\"+Inf\"} %llu\n",
			start_kinds[k], (unsigned long long)h->count);
		fprintf(f, "husk_start_seconds_sum{kind=\"%s\"} %.6f\n", start_kinds[k], h->sum);
		fprintf(f, "husk_start_seconds_count{kind=\"%s\"} %llu\n", start_kinds[k],
			(unsigned long long)h->count);
	}
	fputs("# HELP husk_jobs_total Jobs and execs that ended, by outcome.\n"
	      "# TYPE husk_jobs_total counter\n", f);
	family_print(f, "husk_jobs_total", "outcome", &M.jobs);
	fprintf(f, "# HELP husk_timeouts_total Jobs and execs killed at their timeout.\n"
		"# TYPE husk_timeouts_total counter\nhusk_timeouts_total %llu\n",
		(unsigned long long)M.timeouts);
	fprintf(f, "# HELP husk_oom_kills_total OOM kills in sandboxes' host cgroups.\n"
		"# TYPE husk_oom_kills_total counter\nhusk_oom_kills_total %llu\n",
		(unsigned long long)M.oom_kills);
	fputs("# HELP husk_egress_drops_total Guest packets the egress filter dropped.\n"
	      "# TYPE husk_egress_drops_total counter\n", f);
	family_print(f, "husk_egress_drops_total", "reason", &M.drops);
	fprintf(f, "# HELP husk_dns_refused_total Names the DNS proxy refused.\n"
		"# TYPE husk_dns_refused_total counter\nhusk_dns_refused_total %llu\n",
		(unsigned long long)M.dns_refused);
	fputs("# HELP husk_requests_total API requests answered.\n"
	      "# TYPE husk_requests_total counter\n", f);
	for (i = 0; i < M.requests.n; i++) {
		bar = strchr(M.requests.values[i], '|');
		if (bar)
			fprintf(f, "husk_requests_total{op=\"%.*s\",result=\"%s\"} %llu\n",
				(int)(bar - M.requests.values[i]), M.requests.values[i], bar + 1,
				(unsigned long long)M.requests.counts[i]);
	}
	uids_print(f);
	pthread_mutex_unlock(&M.lock);
	if (fclose(f)) {
		free(buf);
		return NULL;
	}
	return buf;
}

/* ---- HTTP: the husk-metrics helper ---- */

/*
 * GET /metrics is answered by husk-metrics, a separate program linked with
 * libmicrohttpd: husk is a static executable (no shared library to load),
 * and the parser of whatever the network sends runs confined, with none of
 * serve's state but the text it asks for: under a uid of its own leased
 * from the jail's range (not the nobody other daemons share), in its own
 * PID, mount, IPC, UTS and (empty) network namespaces, then jailed and
 * filtered by itself after its exec (metrics_proto.h). serve binds the
 * address itself, so a busy port is an error at start and the helper needs
 * no privilege to listen, and answers the helper from its event loop.
 */
static struct {
	pid_t pid;
	int fd;
	int uid_lock;			/* the helper's uid is ours while held */
} H = { .pid = -1, .fd = -1, .uid_lock = -1 };

static int parse_addr(const char *addr, struct sockaddr_storage *ss, socklen_t *len)
{
	char host[128], *colon;
	uint64_t port;
	struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof(*ss));
	if (strlen(addr) >= sizeof(host))
		return -EINVAL;
	strcpy(host, addr);
	colon = strrchr(host, ':');
	if (!colon || parse_u64(colon + 1, 1, 65535, &port))
		return -EINVAL;
	*colon = '\0';
	if (host[0] == '[' && colon > host + 1 && colon[-1] == ']') {
		colon[-1] = '\0';
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(port);
		*len = sizeof(*s6);
		return inet_pton(AF_INET6, host + 1, &s6->sin6_addr) == 1 ? 0 : -EINVAL;
	}
	s4->sin_family = AF_INET;
	s4->sin_port = htons(port);
	*len = sizeof(*s4);
	return inet_pton(AF_INET, host, &s4->sin_addr) == 1 ? 0 : -EINVAL;
}

static int listen_addr(const char *addr)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int fd, err, one = 1;

	if (parse_addr(addr, &ss, &len))
		return husk_seterr(EINVAL, "--metrics %s: not ADDR:PORT (an IPv4 address, or IPv6 "
				   "in brackets)", addr);
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return husk_seterr(errno, "--metrics %s: socket: %s", addr, strerror(errno));
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, len) || listen(fd, 16)) {
		err = errno;
		close(fd);
		return husk_seterr(err, "--metrics %s: cannot listen there: %s", addr,
				   strerror(err));
	}
	return fd;
}

/*
 * In the child: the helper with fd 3 listening and fd 4 to serve, and an
 * empty environment. With uid (serve is root) it still has root's
 * privilege to jail itself after the exec, in the namespaces jail_fork()
 * made; it reads nothing from the network before.
 */
static void __attribute__((noreturn)) helper_exec(const char *path, int lfd, int cfd, uid_t uid)
{
	char num[16], *argv[] = { (char *)"husk-metrics", NULL, NULL, NULL }, *envp[] = { NULL };
	sigset_t none;
	int l, c;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_DFL);
	/* Above 4 first, so that neither dup2 below overwrites the other. */
	l = fcntl(lfd, F_DUPFD, 16);
	c = fcntl(cfd, F_DUPFD, 16);
	if (l < 0 || c < 0 || dup2(l, METRICS_LISTEN_FD) < 0 || dup2(c, METRICS_CHANNEL_FD) < 0)
		_exit(127);
	close_range(METRICS_CHANNEL_FD + 1, ~0U, 0);
	/* jail_fork() set it and checked the race; a plain fork checks here. */
	if (!uid && (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() == 1))
		_exit(127);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		_exit(127);
	if (uid) {
		snprintf(num, sizeof(num), "%u", (unsigned)uid);
		argv[1] = (char *)"--uid";
		argv[2] = num;
	}
	execve(path, argv, envp);
	fprintf(stderr, "husk: serve: cannot run %s: %s\n", path, strerror(errno));
	_exit(127);
}

/* The helper's "/": an empty directory nobody but root may change. */
static int helper_root(void)
{
	struct stat st;

	if ((mkdir("/run/husk", 0755) && errno != EEXIST) ||
	    (mkdir(METRICS_ROOT, 0555) && errno != EEXIST))
		return husk_seterr(errno, "--metrics: cannot create %s: %s", METRICS_ROOT,
				   strerror(errno));
	if (lstat(METRICS_ROOT, &st) || !S_ISDIR(st.st_mode) || st.st_uid != 0 ||
	    (st.st_mode & 022))
		return husk_seterr(EPERM, "--metrics: %s must be a directory owned by root that "
				   "no one else may write", METRICS_ROOT);
	return 0;
}

/* As root: a uid for the helper alone, and its "/". 0 otherwise (it keeps ours). */
static int helper_uid(uid_t *uid)
{
	int err;

	*uid = 0;
	if (geteuid() != 0)
		return 0;
	err = helper_root();
	if (!err)
		err = jail_uid_lease(RUN_DEFAULT_UID_BASE, RUN_DEFAULT_UID_COUNT, uid, &H.uid_lock);
	if (err)
		return husk_seterr(err, "--metrics: no uid for husk-metrics: %s", husk_lasterr());
	return 0;
}

int metrics_start(const char *addr, const char *helper)
{
	struct pollfd p;
	char ready = 0;
	int lfd, sv[2], err;
	uid_t uid;

	if (access(helper, X_OK))
		return husk_seterr(errno, "--metrics: cannot run %s (%s): it is built and "
				   "installed with husk", helper, strerror(errno));
	lfd = listen_addr(addr);
	if (lfd < 0)
		return lfd;
	err = helper_uid(&uid);
	if (!err && socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv))
		err = husk_seterr(errno, "--metrics: socketpair: %s", strerror(errno));
	if (err) {
		close(lfd);
		metrics_stop();
		return err;
	}
	H.pid = uid ? jail_fork(JAIL_NEWNET) : fork();
	if (H.pid == 0)
		helper_exec(helper, lfd, sv[1], uid);
	err = H.pid >= 0 ? 0 : uid ? H.pid : -errno;
	close(lfd);
	close(sv[1]);
	H.fd = sv[0];
	if (H.pid < 0) {
		H.pid = -1;
		metrics_stop();
		return husk_seterr(err, "--metrics: cannot start husk-metrics: %s", strerror(-err));
	}
	/* The helper says it serves; otherwise it said why on stderr. */
	p.fd = H.fd;
	p.events = POLLIN;
	if (poll(&p, 1, METRICS_READY_MS) != 1 || recv(H.fd, &ready, 1, MSG_DONTWAIT) != 1 ||
	    ready != METRICS_READY) {
		metrics_stop();
		return husk_seterr(EIO, "--metrics %s: husk-metrics did not start", addr);
	}
	return 0;
}

int metrics_fd(void)
{
	return H.fd;
}

int metrics_answer(void)
{
	struct metrics_req req;
	struct iovec iov[2];
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 2 };
	char *body;
	ssize_t n;

	n = recv(H.fd, &req, sizeof(req), MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (n != sizeof(req) || req.magic != METRICS_MAGIC) {
		husk_msg("serve: husk-metrics stopped or misspoke: /metrics is no longer served");
		return -EPIPE;
	}
	body = metrics_render();
	iov[0] = (struct iovec){ .iov_base = &req.seq, .iov_len = sizeof(req.seq) };
	iov[1] = (struct iovec){ .iov_base = body, .iov_len = body ? strlen(body) : 0 };
	if (iov[1].iov_len > METRICS_MAX_BODY)
		iov[1].iov_len = 0;	/* an empty answer: the helper says 503 */
	/* One message either way; a helper that does not read its answers only loses them. */
	sendmsg(H.fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
	free(body);
	return 0;
}

void metrics_stop(void)
{
	if (H.fd >= 0)
		close(H.fd);
	H.fd = -1;
	if (H.pid > 0) {
		kill(H.pid, SIGKILL);
		while (waitpid(H.pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	H.pid = -1;
	/* Reaped: its uid may go to a VM now. */
	if (H.uid_lock >= 0)
		close(H.uid_lock);
	H.uid_lock = -1;
}
