/*
 * metrics_proto: how husk serve starts its husk-metrics helper, and what
 * they say to each other over their SOCK_SEQPACKET pair.
 *
 * The helper starts with the listening socket as fd 3 and the pair as fd 4,
 * an empty environment, and, when serve is root, `--uid N`: a uid leased
 * for it from the jail's range, in namespaces of its own (an empty network
 * namespace among them). It confines itself before it serves: the jail
 * (METRICS_ROOT as "/", that uid, no capabilities, not dumpable), then its
 * system call list. It says METRICS_READY once it serves, then sends a struct metrics_req for
 * each scrape; serve answers with one message: the request's seq, then the
 * exposition text (empty when it has none to give). The seq lets the helper
 * drop an answer that came after it had stopped waiting for it.
 */
#ifndef HUSK_METRICS_PROTO_H
#define HUSK_METRICS_PROTO_H

#include <stdint.h>

#define METRICS_LISTEN_FD 3
#define METRICS_CHANNEL_FD 4
#define METRICS_READY 'R'
#define METRICS_READY_MS 10000
#define METRICS_MAGIC 0x6d657472u	/* "metr" */
#define METRICS_MAX_BODY (1u << 20)
/* The helper's "/": empty, root's, shared with the DNS helpers. */
#define METRICS_ROOT "/run/husk/empty"

struct metrics_req {
	uint32_t magic;
	uint32_t seq;
};

#endif
