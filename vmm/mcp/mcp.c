/*
 * mcp: `husk mcp`, a Model Context Protocol server on stdin/stdout
 * (JSON-RPC 2.0, one message per line, docs/mcp.md). An agent host starts
 * it as a tool server; its tools (mcp_tools.c) run in one husk serve
 * sandbox per connection, made at the first call, destroyed at the end.
 *
 * The client is a peer like any other: lines are bounded, nesting is
 * bounded, every malformed message gets the JSON-RPC error it deserves and
 * the server goes on. Requests are handled one at a time; while a tool
 * runs, pings are answered and a cancellation of that call kills it.
 * stdout carries protocol only; messages for people go to stderr.
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "config.h"
#include "cli.h"
#include "lib/util.h"
#include "mcp/mcp.h"
#include "serve/api.h"

#define RPC_PARSE -32700
#define RPC_INVALID -32600
#define RPC_NO_METHOD -32601
#define RPC_PARAMS -32602
#define RPC_INTERNAL -32603
#define RPC_BUSY -32000		/* implementation-defined: the queue below is full */
#define EXIT_USAGE 2

/* Newest first; a client asking for another one gets the newest. */
static const char *const versions[] = { "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05" };

const char mcp_usage[] =
	"usage: husk mcp [--server PATH] [--template NAME | --image NAME] [--net egress]\n"
	"                [--allow RULE]... [--allow-host NAME]... [--deny RULE]...\n"
	"                [--mem MiB] [--vcpus N] [--cpus N] [--lifetime SEC]\n"
	"                [--idle-timeout SEC] [--timeout SEC] [--max-output BYTES]\n"
	"                [--max-file BYTES]\n"
	"\n"
	"A Model Context Protocol server on stdin/stdout for an agent host. Its tools\n"
	"(run_command, run_code, write_file, read_file, list_files) run in one husk\n"
	"serve sandbox, made at the first tool call and destroyed when the client\n"
	"closes stdin. See docs/mcp.md.\n"
	"\n"
	"  --server PATH       husk serve's socket (default $HUSK_SERVER, else\n"
	"                      /run/husk/serve.sock)\n"
	"  --template NAME     make the sandbox from this template (a pool's: warm)\n"
	"  --image NAME        or boot it on this container image\n"
	"  --net egress        give it the network, filtered; with --allow, --allow-host\n"
	"                      and --deny as for husk run (each repeatable)\n"
	"  --mem MiB, --vcpus N, --cpus N   its machine, as for husk run\n"
	"  --lifetime SEC      the sandbox's lifetime (default: the daemon's)\n"
	"  --idle-timeout SEC  end it after this long without a call (default 600)\n"
	"  --timeout SEC       a tool call's longest run, and its default (default 300)\n"
	"  --max-output BYTES  output of each stream returned to the client (default 65536;\n"
	"                      the rest is counted)\n"
	"  --max-file BYTES    the largest file read_file returns (default 8388608)\n"
	"\n"
	"Exit status: 0 when the client closed stdin, 2 usage error, 125 husk failed.\n";

/*
 * Messages that arrive while a tool runs wait for it (pings and its
 * cancellation excepted), but only so many: past either bound a request is
 * refused at once with RPC_BUSY and a notification, which has no answer,
 * is dropped. Bytes are those of the lines, so a client can hold at most
 * two messages of the largest size waiting.
 */
#define MCP_MAX_DEFERRED 64
#define MCP_MAX_DEFERRED_BYTES (2 * (size_t)MCP_MAX_LINE)

struct deferred {
	json_t *msg;
	size_t len;			/* of its line */
};

struct server {
	struct mcp_box *box;
	/* The client's bytes not yet handled, and whole messages put aside while a tool ran. */
	char *buf;
	size_t len, cap;
	bool skipping;			/* discarding the rest of an over-long line */
	bool eof;
	struct deferred deferred[MCP_MAX_DEFERRED];	/* oldest first */
	unsigned nr_deferred;
	size_t deferred_bytes;
	json_t *current;		/* the id of the tools/call running, or NULL */
	int sigfd;
	int wait_fds[2];		/* what a running tool watches: stdin (-1 at its end), sigfd */
	bool quit;
	bool out_broken;
};

/* ---- output ---- */

static void send_msg(struct server *s, json_t *m)
{
	char *t = json_dumps(m, JSON_COMPACT);
	size_t n;

	json_decref(m);
	if (!t || s->out_broken) {
		free(t);
		return;
	}
	n = strlen(t);
	t[n] = '\n';
	if (write_all(STDOUT_FILENO, t, n + 1))
		s->out_broken = s->quit = true;
	free(t);
}

static void send_result(struct server *s, json_t *id, json_t *result)
{
	send_msg(s, json_pack("{s:s,s:O,s:o}", "jsonrpc", "2.0", "id", id, "result", result));
}

static void send_error(struct server *s, json_t *id, int code, const char *msg)
{
	send_msg(s, json_pack("{s:s,s:O,s:{s:i,s:s}}", "jsonrpc", "2.0", "id", id ? id : json_null(),
			      "error", "code", code, "message", msg));
}

/* ---- input ---- */

/* Read what stdin has: 0, or -1 at its end or on an error. */
static int read_some(struct server *s)
{
	ssize_t n;

	/* next_line() drops a line past MCP_MAX_LINE, so the buffer stays under this. */
	if (s->cap - s->len < 65536) {
		size_t cap = s->cap ? s->cap * 2 : 131072;
		char *b;

		if (cap > MCP_MAX_LINE + 2 * 65536)
			cap = MCP_MAX_LINE + 2 * 65536;
		b = realloc(s->buf, cap);
		if (!b)
			return -1;
		s->buf = b;
		s->cap = cap;
	}
	do
		n = read(STDIN_FILENO, s->buf + s->len, s->cap - s->len);
	while (n < 0 && errno == EINTR);
	if (n <= 0) {
		s->eof = true;
		/* A last message without its newline is still one. */
		if (s->len && !s->skipping && s->len < s->cap)
			s->buf[s->len++] = '\n';
		return -1;
	}
	s->len += n;
	return 0;
}

static bool valid_id(json_t *id)
{
	return json_is_string(id) || json_is_integer(id);
}

/*
 * The next whole message buffered: 1 with *m (NULL for a line that was
 * answered with an error here) and its line's length in *len, 0 when none
 * is whole yet.
 */
static int next_line(struct server *s, json_t **m, size_t *len)
{
	char *nl = s->len ? memchr(s->buf, '\n', s->len) : NULL;
	size_t l;
	json_error_t je;

	*m = NULL;
	*len = 0;
	if (!nl) {
		if (s->skipping || s->len > MCP_MAX_LINE) {
			s->len = 0;
			s->skipping = true;
		}
		return 0;
	}
	l = (size_t)(nl - s->buf);
	*len = l;
	if (s->skipping) {
		s->skipping = false;
		send_error(s, NULL, RPC_PARSE, "a message longer than the 16 MiB husk mcp takes");
	} else if (l && !(l == 1 && s->buf[0] == '\r')) {
		if (api_too_deep(s->buf, l))
			send_error(s, NULL, RPC_PARSE, "a message nested too deeply");
		else if (!(*m = json_loadb(s->buf, l, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je)))
			send_error(s, NULL, RPC_PARSE, je.text);
	}
	memmove(s->buf, nl + 1, s->len - l - 1);
	s->len -= l + 1;
	return 1;
}

/* ---- while a tool runs ---- */

static bool is_cancel_of(json_t *m, json_t *id)
{
	const char *method = json_string_value(json_object_get(m, "method"));

	return method && !strcmp(method, "notifications/cancelled") && id &&
	       json_equal(json_object_get(json_object_get(m, "params"), "requestId"), id);
}

/* Put m (a line of len bytes) aside until the running call is done, if there is room. */
static void defer(struct server *s, json_t *m, size_t len)
{
	json_t *id = json_object_get(m, "id");
	char msg[160];

	if (s->nr_deferred < MCP_MAX_DEFERRED && len <= MCP_MAX_DEFERRED_BYTES - s->deferred_bytes) {
		s->deferred[s->nr_deferred].msg = json_incref(m);
		s->deferred[s->nr_deferred++].len = len;
		s->deferred_bytes += len;
		return;
	}
	if (!valid_id(id) || !json_object_get(m, "method"))
		return;
	snprintf(msg, sizeof(msg), "husk mcp holds at most %d messages (%zu MiB) while a tool call "
		 "runs; send this again once it has answered", MCP_MAX_DEFERRED,
		 MCP_MAX_DEFERRED_BYTES >> 20);
	send_error(s, id, RPC_BUSY, msg);
}

/* The oldest message put aside (the caller's reference). */
static json_t *take_deferred(struct server *s)
{
	json_t *m = s->deferred[0].msg;

	s->deferred_bytes -= s->deferred[0].len;
	memmove(s->deferred, s->deferred + 1, --s->nr_deferred * sizeof(s->deferred[0]));
	return m;
}

/* mcp_pump_fn: take what the client sent; true when the call must stop. */
static bool pump(void *arg)
{
	struct server *s = arg;
	bool stop = false;
	size_t len;
	json_t *m;

	if (s->sigfd >= 0) {
		struct signalfd_siginfo si;

		if (read(s->sigfd, &si, sizeof(si)) == sizeof(si))
			s->quit = stop = true;
	}
	/*
	 * A client that closed stdin ends the session once this call is done:
	 * the call itself runs to its end (or its timeout).
	 */
	if (!s->eof) {
		struct pollfd p = { .fd = STDIN_FILENO, .events = POLLIN };

		if (poll(&p, 1, 0) > 0 && read_some(s))
			s->wait_fds[0] = -1;
	}
	while (next_line(s, &m, &len) == 1) {
		const char *method = json_string_value(json_object_get(m, "method"));

		if (!m)
			continue;
		if (is_cancel_of(m, s->current)) {
			stop = true;
		} else if (method && !strcmp(method, "ping") && valid_id(json_object_get(m, "id"))) {
			send_result(s, json_object_get(m, "id"), json_object());
		} else {
			defer(s, m, len);
		}
		json_decref(m);
	}
	return stop;
}

/* ---- methods ---- */

static json_t *initialize(json_t *params)
{
	const char *want = json_string_value(json_object_get(params, "protocolVersion"));
	const char *v = versions[0];

	for (size_t i = 0; want && i < ARRAY_SIZE(versions); i++)
		if (!strcmp(want, versions[i]))
			v = versions[i];
	return json_pack("{s:s,s:{s:{s:b}},s:{s:s,s:s},s:s}", "protocolVersion", v,
			 "capabilities", "tools", "listChanged", false,
			 "serverInfo", "name", "husk", "version", PACKAGE_VERSION,
			 "instructions",
			 "Tools run in one isolated Linux microVM (a husk sandbox) for this "
			 "session, as an unprivileged user in /tmp/workspace; files and state "
			 "persist between calls until the session ends. Network access is only "
			 "what the operator allowed.");
}

static void tools_call(struct server *s, json_t *id, json_t *params)
{
	const char *name = json_string_value(json_object_get(params, "name"));
	bool cancelled = false;
	int code = RPC_INTERNAL;
	json_t *r;

	if (!json_is_object(params) || !name ||
	    strlen(name) != json_string_length(json_object_get(params, "name"))) {
		send_error(s, id, RPC_PARAMS, "tools/call needs params with a tool \"name\"");
		return;
	}
	s->current = id;
	/*
	 * The call waits for new input only: what came in the same read as it
	 * (its cancellation, pings, more requests) is taken now.
	 */
	if (pump(s)) {
		s->current = NULL;
		return;		/* cancelled before it started, or told to stop: no answer */
	}
	r = mcp_tool_call(s->box, name, json_object_get(params, "arguments"), s->wait_fds, pump,
			  s, &code, &cancelled);
	s->current = NULL;
	if (cancelled) {
		/* A cancelled request is not answered. */
		json_decref(r);
		return;
	}
	if (r)
		send_result(s, id, r);
	else
		send_error(s, id, code, husk_lasterr());
}

static void handle(struct server *s, json_t *m)
{
	json_t *id = json_object_get(m, "id"), *params;
	const char *method, *jv;

	if (json_is_array(m)) {
		send_error(s, NULL, RPC_INVALID, "batches are not part of this protocol version");
		return;
	}
	jv = json_string_value(json_object_get(m, "jsonrpc"));
	method = json_string_value(json_object_get(m, "method"));
	/* Strings may hold NUL (arguments are checked where used); a method may not. */
	if (method && strlen(method) != json_string_length(json_object_get(m, "method")))
		method = "";
	if (!json_is_object(m) || !jv || strcmp(jv, "2.0") || (id && !valid_id(id))) {
		send_error(s, valid_id(id) ? id : NULL, RPC_INVALID,
			   "not a JSON-RPC 2.0 message (jsonrpc \"2.0\", an id that is a string or "
			   "an integer)");
		return;
	}
	if (!method) {
		if (!json_object_get(m, "result") && !json_object_get(m, "error"))
			send_error(s, id, RPC_INVALID, "a request without a \"method\"");
		return;	/* a response: husk mcp sends no requests */
	}
	params = json_object_get(m, "params");
	if (params && !json_is_object(params) && !json_is_array(params)) {
		if (id)
			send_error(s, id, RPC_INVALID, "\"params\" must be an object");
		return;
	}
	if (!id)
		return;	/* notifications: initialized, cancelled (of nothing running) */
	if (!strcmp(method, "initialize"))
		send_result(s, id, initialize(params));
	else if (!strcmp(method, "ping"))
		send_result(s, id, json_object());
	else if (!strcmp(method, "tools/list"))
		send_result(s, id, json_pack("{s:o}", "tools", mcp_tools_list()));
	else if (!strcmp(method, "tools/call"))
		tools_call(s, id, params);
	else
		send_error(s, id, RPC_NO_METHOD, "husk mcp has no such method (it offers tools)");
}

/* ---- the command ---- */

static int add_rule(const char **v, unsigned *n, const char *opt, const char *val)
{
	if (*n == MCP_MAX_RULES)
		return husk_seterr(EINVAL, "more than %d %s rules", MCP_MAX_RULES, opt);
	v[(*n)++] = val;
	return 0;
}

int mcp_parse(int argc, char **argv, struct mcp_opts *o)
{
	static const struct option opts[] = {
		{ "server", required_argument, NULL, 's' }, { "template", required_argument, NULL, 'T' },
		{ "image", required_argument, NULL, 'I' }, { "net", required_argument, NULL, 'n' },
		{ "allow", required_argument, NULL, 'a' }, { "allow-host", required_argument, NULL, 'H' },
		{ "deny", required_argument, NULL, 'd' }, { "mem", required_argument, NULL, 'm' },
		{ "vcpus", required_argument, NULL, 'v' }, { "cpus", required_argument, NULL, 'c' },
		{ "lifetime", required_argument, NULL, 'l' },
		{ "idle-timeout", required_argument, NULL, 'i' },
		{ "timeout", required_argument, NULL, 't' },
		{ "max-output", required_argument, NULL, 'o' },
		{ "max-file", required_argument, NULL, 'f' }, { "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c, err = 0;
	char *end;

	memset(o, 0, sizeof(*o));
	o->timeout_s = 300;
	o->max_return = 65536;
	o->max_file = 8u << 20;
	optind = 0;
	opterr = 0;
	while (!err && (c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (c) {
		case 's': o->server = optarg; break;
		case 'T': o->template_name = optarg; break;
		case 'I': o->image = optarg; break;
		case 'n':
			if (strcmp(optarg, "egress") && strcmp(optarg, "none"))
				err = husk_seterr(EINVAL, "--net is egress or none, not '%s'", optarg);
			o->net = !strcmp(optarg, "egress");
			break;
		case 'a': err = add_rule(o->allow, &o->nr_allow, "--allow", optarg); break;
		case 'H': err = add_rule(o->allow_host, &o->nr_allow_host, "--allow-host", optarg); break;
		case 'd': err = add_rule(o->deny, &o->nr_deny, "--deny", optarg); break;
		case 'm': err = cli_num_opt("--mem", optarg, 32, 65536, &o->mem_mib); break;
		case 'v': err = cli_num_opt("--vcpus", optarg, 1, 32, &o->vcpus); break;
		case 'c':
			errno = 0;
			if (strtod(optarg, &end) < 0.01 || strtod(optarg, NULL) > 1024 || *end || errno)
				err = husk_seterr(EINVAL, "--cpus '%s' is not a number in 0.01..1024",
						  optarg);
			o->cpus = optarg;
			break;
		case 'l': err = cli_num_opt("--lifetime", optarg, 1, 31ull * 24 * 3600, &o->lifetime_s); break;
		case 'i': err = cli_num_opt("--idle-timeout", optarg, 1, 31ull * 24 * 3600, &o->idle_s); break;
		case 't': err = cli_num_opt("--timeout", optarg, 1, 31ull * 24 * 3600, &o->timeout_s); break;
		case 'o': err = cli_num_opt("--max-output", optarg, 0, 64u << 20, &o->max_return); break;
		case 'f': err = cli_num_opt("--max-file", optarg, 0, 256u << 20, &o->max_file); break;
		case 'h': return 1;
		default: err = cli_bad_option(c, argv); break;
		}
	}
	if (!err && optind < argc)
		err = husk_seterr(EINVAL, "unexpected argument '%s'", argv[optind]);
	if (!err && o->template_name && o->image)
		err = husk_seterr(EINVAL, "--template and --image: one or the other");
	if (!err && (o->nr_allow || o->nr_allow_host || o->nr_deny))
		o->net = true;
	return err;
}

int mcp_main(int argc, char **argv)
{
	struct mcp_opts o;
	struct server s = { .sigfd = -1 };
	sigset_t set;
	size_t len;
	json_t *m;
	int r = mcp_parse(argc, argv, &o);

	if (r == 1) {
		fputs(mcp_usage, stdout);
		return 0;
	}
	if (r) {
		fprintf(stderr, "husk mcp: %s\n\n%s", husk_lasterr(), mcp_usage);
		return EXIT_USAGE;
	}
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigprocmask(SIG_BLOCK, &set, NULL);
	s.sigfd = stop_signalfd();
	s.wait_fds[0] = STDIN_FILENO;
	s.wait_fds[1] = s.sigfd;
	s.box = mcp_box_new(&o);
	if (s.sigfd < 0 || !s.box) {
		fprintf(stderr, "husk mcp: cannot start: %s\n", strerror(errno));
		return 125;
	}
	while (!s.quit) {
		if (s.nr_deferred) {
			m = take_deferred(&s);
			handle(&s, m);
			json_decref(m);
			continue;
		}
		if (next_line(&s, &m, &len) == 1) {
			if (m)
				handle(&s, m);
			json_decref(m);
			continue;
		}
		if (s.eof)
			break;
		{
			struct pollfd p[2] = { { .fd = STDIN_FILENO, .events = POLLIN },
					       { .fd = s.sigfd, .events = POLLIN } };

			if (poll(p, 2, -1) < 0 && errno != EINTR)
				break;
			if (p[1].revents) {
				s.quit = true;
				break;
			}
			if (p[0].revents)
				read_some(&s);
		}
	}
	/* The client is gone (or we were told to stop): so is its sandbox. */
	mcp_box_free(s.box);
	while (s.nr_deferred)
		json_decref(take_deferred(&s));
	free(s.buf);
	close(s.sigfd);
	return 0;
}
