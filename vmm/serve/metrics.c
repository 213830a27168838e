/*
 * metrics: husk serve's Prometheus metrics. See metrics.h.
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "lib/util.h"
#include "serve/metrics.h"

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
	struct MHD_Daemon *http;
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

/* ---- exposition ---- */

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
	pthread_mutex_unlock(&M.lock);
	if (fclose(f)) {
		free(buf);
		return NULL;
	}
	return buf;
}

/* ---- HTTP ---- */

/*
 * libmicrohttpd is loaded only when --metrics asks for it. Linked, it brings
 * GnuTLS and seven more libraries that every husk run and boot would map and
 * relocate before its first instruction; under nested virtualization that
 * load is a visible part of the cold path (docs/architecture.md, Figures).
 */
static struct {
	void *dl;
	__typeof__(&MHD_start_daemon) start_daemon;
	__typeof__(&MHD_stop_daemon) stop_daemon;
	__typeof__(&MHD_create_response_from_buffer) response_from_buffer;
	__typeof__(&MHD_add_response_header) add_response_header;
	__typeof__(&MHD_queue_response) queue_response;
	__typeof__(&MHD_destroy_response) destroy_response;
} L;

static int load_mhd(void)
{
	const char *missing = NULL;

	if (L.dl)
		return 0;
	L.dl = dlopen(MHD_SONAME, RTLD_NOW | RTLD_LOCAL);
	if (!L.dl)
		return husk_seterr(ENOENT, "--metrics: cannot load %s (%s): install the Debian "
				   "package that provides it (libmicrohttpd12)", MHD_SONAME, dlerror());
#define SYM(f, name) \
	do { \
		*(void **)&L.f = dlsym(L.dl, name); \
		if (!L.f && !missing) \
			missing = name; \
	} while (0)
	SYM(start_daemon, "MHD_start_daemon");
	SYM(stop_daemon, "MHD_stop_daemon");
	SYM(response_from_buffer, "MHD_create_response_from_buffer");
	SYM(add_response_header, "MHD_add_response_header");
	SYM(queue_response, "MHD_queue_response");
	SYM(destroy_response, "MHD_destroy_response");
#undef SYM
	if (missing) {
		dlclose(L.dl);
		L.dl = NULL;
		return husk_seterr(ENOENT, "--metrics: %s has no %s", MHD_SONAME, missing);
	}
	return 0;
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
		body = metrics_render();
		if (!body)
			code = MHD_HTTP_INTERNAL_SERVER_ERROR;
	}
	if (code != MHD_HTTP_OK)
		r = L.response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
	else
		r = L.response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(body);
		return MHD_NO;
	}
	L.add_response_header(r, "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
	ret = L.queue_response(c, code, r);
	L.destroy_response(r);
	return ret;
}

static int parse_addr(const char *addr, struct sockaddr_storage *ss)
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
		return inet_pton(AF_INET6, host + 1, &s6->sin6_addr) == 1 ? 0 : -EINVAL;
	}
	s4->sin_family = AF_INET;
	s4->sin_port = htons(port);
	return inet_pton(AF_INET, host, &s4->sin_addr) == 1 ? 0 : -EINVAL;
}

int metrics_start(const char *addr)
{
	struct sockaddr_storage ss;
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;

	if (parse_addr(addr, &ss))
		return husk_seterr(EINVAL, "--metrics %s: not ADDR:PORT (an IPv4 address, or IPv6 "
				   "in brackets)", addr);
	if (ss.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	if (load_mhd())
		return -1;
	M.http = L.start_daemon(flags, 0, NULL, NULL, answer, NULL,
				  MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
				  MHD_OPTION_CONNECTION_LIMIT, 16u,
				  MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_END);
	if (!M.http)
		return husk_seterr(EADDRINUSE, "--metrics %s: cannot listen there", addr);
	return 0;
}

void metrics_stop(void)
{
	if (M.http)
		L.stop_daemon(M.http);
	M.http = NULL;
}
