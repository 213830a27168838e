/*
 * api: husk serve's requests and answers (docs/api.md), pure: a request
 * line in, a checked request out (or the error to answer with), and the
 * builders of answer lines. The daemon (serve.c) and the clients
 * (client.c) share it; fuzz_api feeds it hostile lines.
 *
 * A sandbox's options become the command line of its worker, `husk run
 * --session-fd 3 --json-fd 4 ...`, checked here with cli_parse_run(): one
 * set of rules for the CLI and the API.
 */
#ifndef HUSK_API_H
#define HUSK_API_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define API_VERSION 1
#define API_MAX_LINE (4u << 20)		/* a request line, its '\n' included */
#define API_MAX_DEPTH 64
#define API_MAX_ID 64			/* bytes of a string request id */
#define API_MAX_WORKER_ARGS 1024
#define API_WORKER_SESSION_FD "3"
#define API_WORKER_JSON_FD "4"
#define API_WORKER_POLICY_FD "5"	/* with net egress: run_policy.c's socket */

enum api_op {
	OP_RUN, OP_CREATE, OP_EXEC, OP_STDIN, OP_SIGNAL, OP_PUT, OP_GET, OP_POLICY,
	OP_DESTROY, OP_LIST, OP_INSPECT, OP_KILL, OP_WAIT, OP_HEALTH, OP__NR
};

/* Error codes of docs/api.md. */
#define E_BAD "bad-request"
#define E_UNSUPPORTED "unsupported"
#define E_NOT_FOUND "not-found"
#define E_BUSY "busy"
#define E_CONFLICT "conflict"
#define E_GONE "gone"
#define E_FAILED "failed"
#define E_SHUTTING_DOWN "shutting-down"
#define E_INTERNAL "internal"
#define E_FORBIDDEN "forbidden"

/* A command (run's job, exec). */
struct api_cmd {
	char **argv;			/* NULL-terminated, owned */
	unsigned argc;
	char **env;			/* "K=V", owned */
	unsigned nr_env;
	char *cwd;			/* owned, or NULL */
	bool stdin;
	uint64_t timeout_ms;		/* exec: 0 none */
};

struct api_req {
	json_t *root;			/* the parsed line; fields below borrow from it */
	json_t *id;			/* string or integer; NULL when unparseable */
	enum api_op op;
	const char *sandbox;		/* exec, stdin, ... : the sandbox named */
	/* run, create: the worker's arguments after "husk", checked */
	char *wargv[API_MAX_WORKER_ARGS];
	int wargc;
	const char *template_name;	/* run, create: NULL, or the template */
	uint64_t mem_mib;		/* run, create: the guest RAM it takes */
	unsigned vcpus;			/* run, create: its vCPUs */
	bool machine_default;		/* no option that changes the machine: a pool fits */
	uint64_t idle_timeout_s;	/* create */
	uint64_t max_output;		/* run: bytes per stream passed on (the rest counted) */
	uint64_t lifetime_s;		/* create: 0 none */
	bool timeout_set, idle_set;	/* run, create: asked for, not the defaults */
	bool detach, get_always;	/* run */
	struct api_cmd cmd;		/* run, exec */
	/* run, create: tar streams to put first (decoded), and run's gets */
	uint8_t **puts;
	size_t *put_len;
	unsigned nr_puts;
	const char **gets;
	unsigned nr_gets;
	/* stdin, signal: the exec or run request they are for */
	json_t *target;
	bool target_is_run;
	uint8_t *data;			/* stdin, put: decoded bytes (owned) */
	size_t data_len;
	bool eof;			/* stdin */
	bool more;			/* put: more chunks of this stream follow */
	const char *stream;		/* put: the stream's name, or NULL */
	int signal;			/* signal */
	const char *path;		/* get */
	bool net_policy;		/* run, create: --net egress, the worker takes policies */
	json_t *policy;			/* policy: {"allow":[..],...} of the lists given, owned;
					 * run, create with net_pool: its rules, or NULL */
	bool net_pool;			/* run, create: net egress and its rules only: a
					 * networked pool's clone fits */
	bool strict_net;		/* run, create: the worker runs with
					 * --absolute-builtins (api_strict_worker) */
};

/*
 * Parse one request line (without its '\n'). 0 with *r filled, or an error:
 * *code is an E_* string and the message is in husk_lasterr(); r->id is
 * set whenever the line had a usable id (answer with it, else null).
 */
int api_parse(const char *line, size_t len, struct api_req *r, const char **code);
void api_req_free(struct api_req *r);

/*
 * What the egress rules of a client that is not an admin may open
 * (docs/security.md, "What a client's policy may open"): public unicast,
 * and inside the filter's private and special-purpose ranges only what
 * the operator opened to clients. Never a cloud platform endpoint, an
 * address of the host, or a range no rule opens (loopback, multicast...).
 */
struct run_deny;
struct api_net_limits {
	const struct run_deny *open;	/* the operator's --client-allow ranges */
	unsigned nr_open;
	/* 1 when addr is one of the host's own addresses, 0 not, -errno (taken as 1). */
	int (*is_host)(int family, const void *addr);
};

/*
 * The "allow" rules of r (run, create, policy), each against l: 0, or
 * -EACCES with the first rule refused and why in husk_lasterr() (answer
 * E_FORBIDDEN). client: the whole check, for a client that is not an
 * admin. !client: only what a worker with --absolute-builtins keeps closed
 * whatever its rules say (platform endpoints, the host's addresses): an
 * admin's rules for such a worker.
 */
int api_check_rules(const struct api_req *r, const struct api_net_limits *l, bool client);

/*
 * run, create with net egress: the worker keeps the platform endpoints and
 * the host's addresses closed whatever its rules say (--absolute-builtins,
 * r->strict_net). 0 or -errno.
 */
int api_strict_worker(struct api_req *r);

/* More than API_MAX_DEPTH levels of brackets (outside strings) in s[0..n). */
bool api_too_deep(const char *s, size_t n);

/* The names of ops, for metrics. */
const char *api_op_name(enum api_op op);

/*
 * Answer lines. Each returns a malloc'd "{...}\n" (NULL only without
 * memory) that starts with "v" and "re" (id may be NULL: null).
 */
char *api_error(json_t *id, const char *code, const char *msg, json_t *extra);
/* {"v":1,"re":id,"event":event, ...fields}; fields is stolen (may be NULL). */
char *api_event(json_t *id, const char *event, json_t *fields);
/* {"v":1,"re":id,"ok":true, ...fields}; fields is stolen (may be NULL). */
char *api_ok(json_t *id, json_t *fields);

/* Base64 (the "data" fields): encode n bytes into a new JSON string. */
json_t *api_b64(const uint8_t *p, size_t n);
/* Decode a JSON string: 0 with a malloc'd buffer, or -EINVAL. */
int api_unb64(const json_t *s, uint8_t **out, size_t *len);

/*
 * o's field key, when present: an array of at most max strings without NUL
 * (0 with *arr NULL when absent), else an error naming the field.
 */
int api_str_array(json_t *o, const char *key, unsigned max, json_t **arr);

/* A signal by name ("TERM", "SIGKILL") or number: 1..64, or -1. */
int api_signal(const json_t *v);

#endif
