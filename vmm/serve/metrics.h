/*
 * metrics: husk serve's counters and gauges, and the Prometheus text
 * exposition of them on GET /metrics, served over HTTP by the husk-metrics
 * helper (libmicrohttpd, its own process) that asks serve's event loop for
 * the text on each scrape. Every update takes a lock and the text is
 * rendered under the same lock, so a scrape sees one consistent moment.
 */
#ifndef HUSK_METRICS_H
#define HUSK_METRICS_H

#include <stdint.h>

/*
 * Serve http://ADDR:PORT/metrics ("127.0.0.1:9464", "[::1]:9464") through
 * the helper program at helper; 0 once it serves, else -errno.
 */
int metrics_start(const char *addr, const char *helper);
/* The helper's socket: readable when it asks; metrics_answer() answers. */
int metrics_fd(void);
/* 0, or -EPIPE when the helper is gone (metrics_stop() then). */
int metrics_answer(void);
void metrics_stop(void);

void metrics_vms(unsigned running, unsigned queued, unsigned pooled);
/* A sandbox became ready: kind "cold", "template" or "pool". */
void metrics_started(const char *kind, double seconds);
/* A job or exec ended: "ok", "nonzero", "signal", "timeout", "failed". */
void metrics_job(const char *outcome);
void metrics_oom_kills(uint64_t n);
void metrics_egress_drops(const char *reason, uint64_t n);
void metrics_dns_refused(uint64_t n);
void metrics_request(const char *op, const char *result);

/* What one uid holds now: the husk_uid_* gauges. */
struct metrics_uid {
	uint32_t uid;
	unsigned conns, sandboxes, queued;
	uint64_t mem_mib;
};
#define METRICS_MAX_UIDS 1024
/* Replace the rows (a copy of the first METRICS_MAX_UIDS is kept). */
void metrics_uids(const struct metrics_uid *rows, unsigned n);

/* The exposition text, malloc'd (the unit tests read it without HTTP). */
char *metrics_render(void);

#endif
