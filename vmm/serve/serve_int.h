/*
 * serve_int: what serve.c (the daemon: requests, admission, pools,
 * signals), clients.c (the connections and their shares) and sandbox.c
 * (one worker per sandbox and the session protocol with it) share.
 * Internal to vmm/serve/.
 */
#ifndef HUSK_SERVE_INT_H
#define HUSK_SERVE_INT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "job/proto.h"
#include "serve/api.h"
#include "serve/serve.h"

#define CLIENT_OUT_MAX (16u << 20)	/* a client that reads slower holds its sandboxes */
#define CLIENT_ANSWERS_MAX (256u << 10)	/* ... and no request of it is read past this */
#define CLIENT_OUT_HARD (64u << 20)	/* a client past this is closed */
#define PEER_OUT_MAX (32u << 20)	/* all of a uid's clients: as CLIENT_OUT_MAX */
#define SB_OUT_MAX (8u << 20)		/* frames waiting for a worker's socket */
#define SB_MAX_REQS 96			/* open execs, puts and gets per sandbox */
#define SB_LOG_MAX 4096			/* the tail of a worker's own messages */
#define SB_RECORD_MAX (256u << 10)
#define XCHUNK (60 * 1024)		/* put data per frame */

/* What an epoll event belongs to. */
enum h_kind {
	H_LISTEN, H_SIGNAL, H_TIMER, H_METRICS, H_CLIENT, H_SB_X, H_SB_JSON, H_SB_LOG, H_SB_PID, H_SB_POLICY
};
struct handle {
	enum h_kind kind;
	void *p;
};

/* The connections of one uid, for its share and its turn. */
struct peer {
	uid_t uid;
	unsigned conns;
	size_t in_bytes;		/* request bytes read, not handled yet */
	size_t out_bytes;		/* answer bytes not sent yet */
	unsigned lines;			/* handled in this pass */
	struct peer *next;
};

struct client {
	struct handle h;
	int fd;
	uid_t uid;
	gid_t gid;
	pid_t pid;
	bool admin;
	struct peer *peer;
	char *in;			/* request bytes: handled up to in_off, */
	size_t in_off, in_scan, in_len, in_cap;	/* no '\n' before in_scan */
	bool skipping;			/* inside a line that was too long */
	char *out;			/* answer lines not written yet */
	size_t out_len, out_off, out_cap;
	uint32_t ep_events;		/* what epoll watches for now */
	unsigned binds;			/* its requests that may still be answered */
	unsigned sessions;		/* live sessions it created */
	uint64_t t_active;		/* the last byte in or out */
	uint64_t t_line;		/* a partial request line held since, or 0 */
	uint64_t t_stall;		/* answers waiting, none taken since, or 0 */
	bool gone;			/* closed: freed once nothing points at it */
	struct client *next;
};

/* Where a request's answers go: the client and the request's id. */
struct bind {
	struct client *c;
	json_t *re;
};

enum xkind { X_EXEC = 'x', X_PUT = 'p', X_GET = 'g' };

/* A request open in a sandbox's session. */
struct xreq {
	uint32_t id;			/* the session id (0: free slot) */
	enum xkind kind;
	struct bind to;
	char *stream;			/* put: the stream's name */
	char *path;			/* get: the path, for run's file events */
	bool stdin;			/* exec: it reads stdin */
	bool for_run;			/* part of a run request, not the client's own */
	bool warmup;			/* a pooled clone's first exec, the daemon's own */
};

enum sb_state { SB_STARTING, SB_READY, SB_ENDING, SB_DONE };

struct sandbox {
	struct handle hx, hj, hl, hp, hpol;
	char name[24];
	uid_t owner;
	bool owned;			/* claimed (a pooled one is not until then) */
	enum sb_state state;
	bool is_run, detach;
	char template_name[64];
	uint64_t mem_mib;
	bool machine_default;
	const char *start_kind;		/* "cold", "template", "pool" */
	bool from_pool;
	bool pool_net;			/* a pooled clone with net egress (and no rule yet) */
	bool strict_net;		/* its worker runs with --absolute-builtins */
	bool rules_pending;		/* its request's rules sent as a policy, unanswered */
	bool rules_set;			/* ... and applied */
	bool warming;			/* a pooled clone running its warm-up exec */
	pid_t pid;
	int pidfd, xfd, jfd, logfd;
	int pfd;			/* the worker's --policy-fd (net egress), or -1 */
	struct bind policy_to;		/* the policy request waiting for its answer */
	bool policy_pending;		/* sent, not answered (its client may have left) */
	bool exited;
	int wstatus;
	char *record;			/* the worker's --json-fd output */
	size_t record_len;
	char log[SB_LOG_MAX];
	size_t log_len;
	/* frames the worker's socket did not take yet */
	uint8_t **outq;
	size_t *outq_len;
	unsigned outq_n, outq_cap;
	size_t outq_bytes;
	struct xreq reqs[SB_MAX_REQS];
	uint32_t next_id;
	uint64_t t_request, t_ready, t_active, lifetime_end, idle_us;
	/* create: waiting for ready (and its puts); run: the whole run */
	struct bind creator;
	struct client *origin;		/* a session's creator, while both live */
	struct api_req *req;		/* run/create request kept (argv, puts, gets) */
	unsigned puts_sent;		/* create/run: the request's puts sent so far */
	unsigned puts_pending;		/* one of them is waiting for its XDONE */
	/* run */
	uint32_t run_exec;		/* the job's exec id, 0 before */
	bool run_exited;
	json_t *run_exit;		/* the exec's exit, for the record */
	unsigned run_get;		/* the next get to ask for */
	bool run_files_ok;
	uint64_t run_out[2];		/* bytes of the job's stdout and stderr */
	uint64_t run_drop[2];		/* of them beyond its max_output */
	json_t *final;			/* a detached run's last answer, for wait */
	struct bind waiter;		/* wait, destroy */
	struct sandbox *next;
};

struct server {
	struct serve_cfg cfg;
	int epfd, lfd, sfd, tfd;
	struct handle *hl;		/* the listening socket's */
	bool listen_paused;		/* out of descriptors: until the next tick */
	struct client *clients;
	unsigned nclients;
	struct client *rr;		/* where the next pass over requests starts */
	struct peer *peers;
	struct sandbox *sandboxes;
	unsigned next_sb;
	bool draining;
	uint64_t drain_end;
	struct queued *queue;
	unsigned queued;
};

struct queued {
	struct bind to;
	struct api_req req;
	uid_t uid;
	bool exempt;			/* root's: no share */
	uint64_t t;
	struct queued *next;
};

extern struct server srv;

/* clients.c */
void client_send(struct client *c, char *line);	/* takes line */
void bind_send(struct bind *b, char *line);
void bind_set(struct bind *b, struct client *c, json_t *re);
void bind_clear(struct bind *b);
bool client_full(const struct client *c);
void clients_accept(void);
void client_event(struct client *c, uint32_t events);
bool clients_pass(void);	/* true: requests are left for another pass */
void clients_tick(uint64_t now);
void clients_reap(void);	/* free the closed ones */

/* serve.c */
void ep_mod(int fd, struct handle *h, uint32_t events);
void serve_request(struct client *c, const char *line, size_t len);
void serve_changed(void);	/* a sandbox ended or became ready: admission, pools, metrics */
uint64_t serve_template_mem(const char *name);	/* a template's guest RAM, MiB */
bool serve_template_net(const char *name);	/* the template's guest has a NIC */

/* sandbox.c */
struct sandbox *sb_spawn(const struct api_req *r, const char *pool_template);
void sb_event(struct sandbox *sb, struct handle *h, uint32_t events);
int sb_send(struct sandbox *sb, uint16_t type, uint32_t id, const void *p, size_t n);
struct xreq *sb_req_new(struct sandbox *sb, enum xkind kind);
struct xreq *sb_req_find(struct sandbox *sb, uint32_t id);
void sb_req_free(struct xreq *x);
/* Requests for a ready sandbox. */
void sb_begin(struct sandbox *sb, struct bind *to, struct api_req *r, bool is_run);
int sb_exec(struct sandbox *sb, struct bind *to, const struct api_cmd *cmd, bool for_run);
int sb_put(struct sandbox *sb, struct bind *to, const char *stream, const uint8_t *p,
	   size_t n, bool more, bool for_run);
int sb_get(struct sandbox *sb, struct bind *to, const char *path, bool for_run);
int sb_policy(struct sandbox *sb, struct bind *to, json_t *policy);
void sb_end(struct sandbox *sb);	/* P_END: the session ends */
void sb_kill(struct sandbox *sb);	/* SIGTERM to the worker */
void sb_free(struct sandbox *sb);
void sb_tick(struct sandbox *sb, uint64_t now);
void sb_client_gone(struct sandbox *sb, struct client *c);
json_t *sb_describe(const struct sandbox *sb, bool detail);
bool sb_paused(const struct sandbox *sb);
void sb_resume_check(struct sandbox *sb);

#endif
