/*
 * mcp_tools: the tools of `husk mcp` and the one sandbox they share.
 *
 * The sandbox is made at the first tool call (a husk serve "create" with
 * the options husk mcp was started with) and destroyed when the MCP
 * connection ends. Every tool is a command in it (an "exec"): run_command
 * and run_code run what they are given, write_file, read_file and
 * list_files run sh, cat and ls on the path. The model's input never
 * becomes part of a shell command line: paths and code travel as argv
 * items and stdin.
 *
 * The daemon is a peer: every answer is checked, output kept is bounded.
 * A tool failure (the sandbox died, a timeout, a file too large) is a tool
 * result with isError, in words a model can act on; only an unknown tool
 * or malformed arguments are JSON-RPC errors.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/util.h"
#include "mcp/mcp.h"
#include "serve/api.h"
#include "serve/conn.h"

#define STDIN_CHUNK (48 * 1024)
#define RPC_INVALID_PARAMS -32602

struct mcp_box {
	const struct mcp_opts *o;
	struct sconn c;
	bool open;
	char id[128];
	json_int_t seq;
};

/* What one command did. */
struct exec_out {
	uint8_t *buf[2];		/* stdout, stderr: the first cap bytes */
	size_t len[2];
	uint64_t total[2];
	size_t cap;
	bool exited, timed_out;
	json_t *code, *signal;		/* owned */
	char error[512];		/* the daemon's error, or "" */
	char error_code[32];
};

struct mcp_box *mcp_box_new(const struct mcp_opts *o)
{
	struct mcp_box *b = calloc(1, sizeof(*b));

	if (b) {
		b->o = o;
		b->c.fd = -1;
	}
	return b;
}

static void box_close(struct mcp_box *b)
{
	if (b->c.fd >= 0)
		sconn_close(&b->c);
	memset(&b->c, 0, sizeof(b->c));
	b->c.fd = -1;
	b->open = false;
}

/* One request (req is stolen), its final line; events are skipped. NULL: the connection failed. */
static json_t *call(struct mcp_box *b, json_t *req)
{
	json_t *id = json_integer(++b->seq), *a;

	json_object_set(req, "id", id);
	if (sconn_send(&b->c, req)) {
		json_decref(id);
		return NULL;
	}
	for (;;) {
		if (sconn_recv(&b->c, &a, true) <= 0) {
			json_decref(id);
			return NULL;
		}
		if (json_equal(json_object_get(a, "re"), id) && !json_object_get(a, "event")) {
			json_decref(id);
			return a;
		}
		json_decref(a);
	}
}

void mcp_box_free(struct mcp_box *b)
{
	if (!b)
		return;
	if (b->open) {
		json_t *a = call(b, json_pack("{s:s,s:s}", "op", "destroy", "sandbox", b->id));

		json_decref(a);
	}
	box_close(b);
	free(b);
}

static json_t *str_list(const char *const *v, unsigned n)
{
	json_t *a = json_array();

	for (unsigned i = 0; i < n; i++)
		json_array_append_new(a, json_string(v[i]));
	return a;
}

static const char *err_text(json_t *a)
{
	return json_string_value(json_object_get(json_object_get(a, "error"), "message")) ?:
	       "no reason given";
}

/* The sandbox, made if there is none: 0, or -1 with why in msg. */
static int box_ensure(struct mcp_box *b, char *msg, size_t cap)
{
	const struct mcp_opts *o = b->o;
	json_t *req, *a;
	const char *id;

	if (b->open)
		return 0;
	if (sconn_open(&b->c, serve_socket_path(o->server))) {
		snprintf(msg, cap, "%s", husk_lasterr());
		b->c.fd = -1;
		return -1;
	}
	req = json_pack("{s:s}", "op", "create");
	if (o->template_name)
		json_object_set_new(req, "template", json_string(o->template_name));
	if (o->image)
		json_object_set_new(req, "image", json_string(o->image));
	if (o->net)
		json_object_set_new(req, "net", json_string("egress"));
	if (o->nr_allow)
		json_object_set_new(req, "allow", str_list(o->allow, o->nr_allow));
	if (o->nr_allow_host)
		json_object_set_new(req, "allow_host", str_list(o->allow_host, o->nr_allow_host));
	if (o->nr_deny)
		json_object_set_new(req, "deny", str_list(o->deny, o->nr_deny));
	if (o->mem_mib)
		json_object_set_new(req, "mem", json_integer((json_int_t)o->mem_mib));
	if (o->vcpus)
		json_object_set_new(req, "vcpus", json_integer((json_int_t)o->vcpus));
	if (o->cpus)
		json_object_set_new(req, "cpus", json_real(strtod(o->cpus, NULL)));
	if (o->lifetime_s)
		json_object_set_new(req, "timeout", json_integer((json_int_t)o->lifetime_s));
	if (o->idle_s)
		json_object_set_new(req, "idle_timeout", json_integer((json_int_t)o->idle_s));
	a = call(b, req);
	if (!a) {
		snprintf(msg, cap, "husk serve: %s", husk_lasterr());
		box_close(b);
		return -1;
	}
	id = json_string_value(json_object_get(a, "sandbox"));
	if (!json_is_true(json_object_get(a, "ok")) || !id || strlen(id) >= sizeof(b->id)) {
		snprintf(msg, cap, "the sandbox could not be made: %s", json_is_true(
			 json_object_get(a, "ok")) ? "husk serve named no sandbox" : err_text(a));
		json_decref(a);
		box_close(b);
		return -1;
	}
	strcpy(b->id, id);
	b->open = true;
	json_decref(a);
	return 0;
}

static void keep(struct exec_out *x, int s, const uint8_t *p, size_t n)
{
	size_t room = x->cap - x->len[s];

	x->total[s] += n;
	if (n > room)
		n = room;
	if (!n)
		return;
	memcpy(x->buf[s] + x->len[s], p, n);
	x->len[s] += n;
}

static void exec_out_free(struct exec_out *x)
{
	free(x->buf[0]);
	free(x->buf[1]);
	json_decref(x->code);
	json_decref(x->signal);
}

/* The next piece of a command's stdin: a chunk, or at the end its EOF. */
static int send_stdin(struct mcp_box *b, json_t *target, json_t *sid, const uint8_t *in,
		      size_t in_len, size_t *off, bool *eof_sent)
{
	size_t n = in_len - *off < STDIN_CHUNK ? in_len - *off : STDIN_CHUNK;
	json_t *req = json_pack("{s:O,s:s,s:O}", "id", sid, "op", "stdin", "exec", target);

	if (n) {
		json_object_set_new(req, "data", api_b64(in + *off, n));
		*off += n;
	} else {
		json_object_set_new(req, "eof", json_true());
		*eof_sent = true;
	}
	return sconn_send(&b->c, req);
}

/*
 * Run argv in the sandbox, stdin (if in) fed a chunk at a time, each once
 * the daemon took the last. 0 when the daemon answered (x->error says if it
 * refused), -1 when the connection failed (the sandbox is then gone).
 */
static int exec(struct mcp_box *b, json_t *argv, const char *cwd, uint64_t timeout_s,
		const uint8_t *in, size_t in_len, struct exec_out *x, const int *wait_fds,
		mcp_pump_fn pump, void *arg, bool *cancelled)
{
	json_t *id = json_integer(++b->seq), *sid = json_string("stdin"), *req, *a;
	bool eof_sent = !in, started = false, killed = false;
	size_t off = 0;
	int r = -1;

	req = json_pack("{s:O,s:s,s:s,s:O,s:I}", "id", id, "op", "exec", "sandbox", b->id,
			"argv", argv, "timeout", (json_int_t)timeout_s);
	if (in)
		json_object_set_new(req, "stdin", json_true());
	if (cwd)
		json_object_set_new(req, "cwd", json_string(cwd));
	if (sconn_send(&b->c, req))
		goto out;
	for (;;) {
		struct pollfd p[3] = { { .fd = b->c.fd, .events = POLLIN },
				       { .fd = killed ? -1 : wait_fds[0], .events = POLLIN },
				       { .fd = killed ? -1 : wait_fds[1], .events = POLLIN } };
		const char *ev;
		int got;

		if (poll(p, 3, -1) < 0) {
			if (errno == EINTR)
				continue;
			goto out;
		}
		if ((p[1].revents || p[2].revents) && pump(arg) && !killed) {
			/* Cancelled: the command is killed, its answer read and dropped. */
			killed = *cancelled = true;
			req = json_pack("{s:s,s:s,s:O,s:s}", "id", "cancel", "op", "signal", "exec",
					id, "signal", "KILL");
			if (sconn_send(&b->c, req))
				goto out;
		}
		if (!p[0].revents)
			continue;
		while ((got = sconn_recv(&b->c, &a, false)) == 1) {
			json_t *re = json_object_get(a, "re");

			if (json_equal(re, sid)) {
				/* A piece taken: the next. One refused: the command is done with stdin. */
				if (json_object_get(a, "error"))
					eof_sent = true;
				else if (!eof_sent &&
					 send_stdin(b, id, sid, in, in_len, &off, &eof_sent)) {
					json_decref(a);
					goto out;
				}
				json_decref(a);
				continue;
			}
			if (!json_equal(re, id)) {
				json_decref(a);	/* the cancel's acknowledgement */
				continue;
			}
			ev = json_string_value(json_object_get(a, "event"));
			if (!ev) {
				if (json_object_get(a, "error")) {
					snprintf(x->error, sizeof(x->error), "%s", err_text(a));
					snprintf(x->error_code, sizeof(x->error_code), "%s",
						 json_string_value(json_object_get(json_object_get(a,
							"error"), "code")) ?: "");
				}
				json_decref(a);
				r = 0;
				goto out;
			}
			if (!strcmp(ev, "started") && in && !started) {
				started = true;
				if (send_stdin(b, id, sid, in, in_len, &off, &eof_sent)) {
					json_decref(a);
					goto out;
				}
			} else if (!strcmp(ev, "stdout") || !strcmp(ev, "stderr")) {
				uint8_t *d;
				size_t n;

				if (!api_unb64(json_object_get(a, "data"), &d, &n)) {
					keep(x, ev[3] == 'e', d, n);
					free(d);
				}
			} else if (!strcmp(ev, "exit")) {
				x->exited = true;
				x->timed_out = json_is_true(json_object_get(a, "timed_out"));
				x->code = json_incref(json_object_get(a, "exit_code"));
				x->signal = json_incref(json_object_get(a, "signal"));
			}
			json_decref(a);
		}
		if (got < 0)
			goto out;
	}
out:
	json_decref(id);
	json_decref(sid);
	return r;
}

/* ---- results ---- */

static json_t *text_result(bool is_error, json_t *structured, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static json_t *text_result(bool is_error, json_t *structured, const char *fmt, ...)
{
	char *s = NULL;
	va_list ap;
	json_t *r;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	r = json_pack("{s:[{s:s,s:s}],s:b}", "content", "type", "text", "text", s ? s : "",
		      "isError", is_error);
	if (structured)
		json_object_set_new(r, "structuredContent", structured);
	free(s);
	return r;
}

/* Bytes as a JSON string: UTF-8 as it is; anything else, byte by byte. */
static json_t *bytes_json(const uint8_t *p, size_t n)
{
	json_t *s = json_stringn((const char *)p, n);
	char *t;

	if (s)
		return s;
	t = malloc(n + 1);
	if (!t)
		return json_string("");
	for (size_t i = 0; i < n; i++)
		t[i] = p[i] < 0x80 ? (char)p[i] : '?';
	s = json_stringn(t, n);
	free(t);
	return s;
}

/* What a stream kept, and a note of what was not kept. */
static json_t *output_json(const struct exec_out *x, int s)
{
	json_t *o = bytes_json(x->buf[s], x->len[s]);
	char more[96], *t;
	size_t l;

	if (x->total[s] <= x->len[s] || !json_string_value(o))
		return o;
	snprintf(more, sizeof(more), "\n[... %" PRIu64 " more bytes not shown]",
		 x->total[s] - x->len[s]);
	l = json_string_length(o);
	t = malloc(l + sizeof(more));
	if (t) {
		memcpy(t, json_string_value(o), l);
		memcpy(t + l, more, strlen(more) + 1);
		json_decref(o);
		o = bytes_json((const uint8_t *)t, l + strlen(more));
		free(t);
	}
	return o;
}

/* The result of a command the model ran: what it printed and how it ended. */
static json_t *command_result(const struct exec_out *x, uint64_t timeout_s)
{
	json_t *st = json_pack("{s:O,s:O,s:b,s:o,s:o}", "exit_code", x->code ?: json_null(),
			       "signal", x->signal ?: json_null(), "timed_out", x->timed_out,
			       "stdout", output_json(x, 0), "stderr", output_json(x, 1));
	char *text = json_dumps(st, JSON_COMPACT);
	json_t *r;

	if (x->timed_out)
		r = text_result(true, st, "the command ran past its timeout (%" PRIu64 " s) and "
				"was killed; what it printed until then: %s", timeout_s,
				text ? text : "");
	else
		r = text_result(false, st, "%s", text ? text : "");
	free(text);
	return r;
}

/* ---- arguments ---- */

static int bad_args(int *rpc_code, const char *fmt, const char *what)
{
	*rpc_code = RPC_INVALID_PARAMS;
	husk_seterr(EINVAL, fmt, what);
	return -1;
}

/* args[key] as a string: 0 (*out NULL when absent and optional), -1 if wrong. */
static int arg_str(json_t *args, const char *key, bool required, const char **out,
		   int *rpc_code)
{
	json_t *v = json_object_get(args, key);

	*out = NULL;
	if (!v && !required)
		return 0;
	if (!json_is_string(v))
		return bad_args(rpc_code, "\"%s\" must be a string", key);
	if (strlen(json_string_value(v)) != json_string_length(v))
		return bad_args(rpc_code, "\"%s\" must not hold a NUL byte", key);
	*out = json_string_value(v);
	return 0;
}

/* "encoding": absent, "utf-8" or "base64". */
static int arg_encoding(json_t *args, const char **enc, int *rpc_code)
{
	if (arg_str(args, "encoding", false, enc, rpc_code))
		return -1;
	if (*enc && strcmp(*enc, "utf-8") && strcmp(*enc, "base64"))
		return bad_args(rpc_code, "\"encoding\" is utf-8 or base64, not '%s'", *enc);
	return 0;
}

static int arg_timeout(const struct mcp_opts *o, json_t *args, uint64_t *t, int *rpc_code)
{
	json_t *v = json_object_get(args, "timeout");

	*t = o->timeout_s;
	if (!v)
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < 1)
		return bad_args(rpc_code, "\"%s\" must be a whole number of seconds, 1 or more",
				"timeout");
	if ((uint64_t)json_integer_value(v) < *t)
		*t = (uint64_t)json_integer_value(v);
	return 0;
}

/* ---- the tools ---- */

enum tool { T_RUN_COMMAND, T_RUN_CODE, T_WRITE_FILE, T_READ_FILE, T_LIST_FILES, T__NR };

static const char *const tool_names[T__NR] = {
	"run_command", "run_code", "write_file", "read_file", "list_files",
};

static const char *const languages[][3] = {
	/* name, interpreter, its "read the program from stdin" argument */
	{ "python", "python3", "-" }, { "sh", "sh", "-s" }, { "bash", "bash", "-s" },
	{ "node", "node", "-" }, { "perl", "perl", "-" },
};

json_t *mcp_tools_list(void)
{
	json_t *out_schema = json_pack(
		"{s:s,s:{s:{s:[s,s]},s:{s:[s,s]},s:{s:s},s:{s:s},s:{s:s}},s:[s,s,s,s,s]}",
		"type", "object", "properties",
		"exit_code", "type", "integer", "null", "signal", "type", "integer", "null",
		"timed_out", "type", "boolean", "stdout", "type", "string", "stderr", "type",
		"string", "required", "exit_code", "signal", "timed_out", "stdout", "stderr");
	json_t *langs = json_array();
	json_t *tools;

	for (size_t i = 0; i < sizeof(languages) / sizeof(languages[0]); i++)
		json_array_append_new(langs, json_string(languages[i][0]));
	tools = json_pack(
		"[{s:s,s:s,s:{s:s,s:{s:{s:s,s:s},s:{s:s,s:s},s:{s:s,s:i,s:s}},s:[s]},s:O},"
		"{s:s,s:s,s:{s:s,s:{s:{s:s,s:s},s:{s:s,s:o,s:s},s:{s:s,s:i,s:s}},s:[s]},s:O},"
		"{s:s,s:s,s:{s:s,s:{s:{s:s,s:s},s:{s:s,s:s},s:{s:s,s:[s,s],s:s}},s:[s,s]}},"
		"{s:s,s:s,s:{s:s,s:{s:{s:s,s:s},s:{s:s,s:[s,s],s:s}},s:[s]}},"
		"{s:s,s:s,s:{s:s,s:{s:{s:s,s:s}}}}]",
		"name", "run_command", "description",
		"Run a shell command (sh -c) in this session's sandbox, an isolated Linux microVM, "
		"as an unprivileged user, in its workspace (/tmp/workspace). Files and installed "
		"state persist across calls in the session. Returns its exit code, stdout and stderr.",
		"inputSchema", "type", "object", "properties",
		"command", "type", "string", "description", "the command line, run with sh -c",
		"cwd", "type", "string", "description", "working directory (default: the workspace)",
		"timeout", "type", "integer", "minimum", 1, "description", "seconds before it is killed",
		"required", "command", "outputSchema", out_schema,

		"name", "run_code", "description",
		"Run a program in this session's sandbox with the interpreter for its language "
		"(fed on stdin). Returns its exit code, stdout and stderr.",
		"inputSchema", "type", "object", "properties",
		"code", "type", "string", "description", "the program's source",
		"language", "type", "string", "enum", langs, "description", "default: python",
		"timeout", "type", "integer", "minimum", 1, "description", "seconds before it is killed",
		"required", "code", "outputSchema", out_schema,

		"name", "write_file", "description",
		"Write a file in the sandbox (a path relative to the workspace, or absolute in a "
		"writable place); parent directories are made, an existing file is replaced.",
		"inputSchema", "type", "object", "properties",
		"path", "type", "string", "description", "the file's path",
		"content", "type", "string", "description", "the file's content",
		"encoding", "type", "string", "enum", "utf-8", "base64", "description",
		"how content is written: utf-8 text (default) or base64 bytes",
		"required", "path", "content",

		"name", "read_file", "description",
		"Read a file from the sandbox. Text comes back as it is; bytes that are not UTF-8 "
		"come back base64-encoded (say encoding base64 to ask for that always).",
		"inputSchema", "type", "object", "properties",
		"path", "type", "string", "description", "the file's path",
		"encoding", "type", "string", "enum", "utf-8", "base64", "description",
		"utf-8 (default) or base64", "required", "path",

		"name", "list_files", "description",
		"List a directory in the sandbox (ls -la), the workspace by default.",
		"inputSchema", "type", "object", "properties",
		"path", "type", "string", "description", "the directory (default: the workspace)");
	json_decref(out_schema);
	return tools;
}

/* An exec whose daemon side failed: the sandbox is gone, or it refused. */
static json_t *exec_failed(struct mcp_box *b, struct exec_out *x, int r)
{
	if (r < 0 || !strcmp(x->error_code, "not-found") || !strcmp(x->error_code, "gone")) {
		const char *why = r < 0 ? husk_lasterr() : x->error;
		char msg[700];

		snprintf(msg, sizeof(msg), "the sandbox ended (%s); files and state in it are "
			 "lost, and the next call starts a new one", why);
		box_close(b);
		return text_result(true, NULL, "%s", msg);
	}
	return text_result(true, NULL, "husk serve refused the command: %s", x->error);
}

static bool b64_decode(const char *s, uint8_t **out, size_t *len)
{
	json_t *j = json_string(s);
	bool ok = j && !api_unb64(j, out, len);

	json_decref(j);
	return ok;
}

json_t *mcp_tool_call(struct mcp_box *b, const char *name, json_t *args, const int *wait_fds,
		      mcp_pump_fn pump, void *arg, int *rpc_code, bool *cancelled)
{
	const char *cmd = NULL, *cwd = NULL, *code = NULL, *lang = NULL, *path = NULL;
	const char *content = NULL, *enc = NULL;
	uint8_t *in = NULL, *decoded = NULL;
	size_t in_len = 0, i;
	struct exec_out x = { 0 };
	uint64_t timeout = b->o->timeout_s;
	json_t *argv = NULL, *res = NULL;
	char msg[700];
	enum tool t;
	int r;

	*cancelled = false;
	for (t = 0; t < T__NR && strcmp(name, tool_names[t]); t++)
		;
	if (t == T__NR) {
		*rpc_code = RPC_INVALID_PARAMS;
		husk_seterr(ENOENT, "no tool named '%s' (tools/list names them)", name);
		return NULL;
	}
	if (args && !json_is_object(args)) {
		bad_args(rpc_code, "%s must be an object", "\"arguments\"");
		return NULL;
	}
	switch (t) {
	case T_RUN_COMMAND:
		if (arg_str(args, "command", true, &cmd, rpc_code) ||
		    arg_str(args, "cwd", false, &cwd, rpc_code) ||
		    arg_timeout(b->o, args, &timeout, rpc_code))
			return NULL;
		argv = json_pack("[s,s,s]", "sh", "-c", cmd);
		break;
	case T_RUN_CODE:
		if (arg_str(args, "code", true, &code, rpc_code) ||
		    arg_str(args, "language", false, &lang, rpc_code) ||
		    arg_timeout(b->o, args, &timeout, rpc_code))
			return NULL;
		for (i = 0; i < sizeof(languages) / sizeof(languages[0]) &&
			    strcmp(lang ? lang : "python", languages[i][0]); i++)
			;
		if (i == sizeof(languages) / sizeof(languages[0])) {
			bad_args(rpc_code, "no interpreter for language '%s'", lang);
			return NULL;
		}
		argv = json_pack("[s,s]", languages[i][1], languages[i][2]);
		in = (uint8_t *)code;
		in_len = strlen(code);
		break;
	case T_WRITE_FILE:
		if (arg_str(args, "path", true, &path, rpc_code) ||
		    arg_str(args, "content", true, &content, rpc_code) ||
		    arg_encoding(args, &enc, rpc_code))
			return NULL;
		if (enc && !strcmp(enc, "base64")) {
			if (!b64_decode(content, &decoded, &in_len)) {
				bad_args(rpc_code, "%s is not valid base64", "\"content\"");
				return NULL;
			}
			in = decoded;
		} else {
			in = (uint8_t *)content;
			in_len = strlen(content);
		}
		/* The path is an argument of the script, never part of it. */
		argv = json_pack("[s,s,s,s,s]", "sh", "-c",
				 "case \"$1\" in */*) mkdir -p -- \"${1%/*}\" || exit;; esac; "
				 "cat > \"$1\"", "sh", path);
		/* stdin must be sent even when the file is empty: in is never NULL. */
		if (!in)
			in = (uint8_t *)"";
		break;
	case T_READ_FILE:
		if (arg_str(args, "path", true, &path, rpc_code) ||
		    arg_encoding(args, &enc, rpc_code))
			return NULL;
		argv = json_pack("[s,s,s]", "cat", "--", path);
		break;
	case T_LIST_FILES:
		if (arg_str(args, "path", false, &path, rpc_code))
			return NULL;
		argv = json_pack("[s,s,s,s]", "ls", "-la", "--", path ? path : ".");
		break;
	default:
		return NULL;
	}
	if (!argv) {
		*rpc_code = -32603;
		husk_seterr(ENOMEM, "out of memory");
		goto out;
	}
	if (box_ensure(b, msg, sizeof(msg))) {
		res = text_result(true, NULL, "%s", msg);
		goto out;
	}
	x.cap = t == T_READ_FILE ? b->o->max_file + 1 : b->o->max_return;
	x.buf[0] = malloc(x.cap ? x.cap : 1);
	x.buf[1] = malloc(b->o->max_return ? b->o->max_return : 1);
	if (!x.buf[0] || !x.buf[1]) {
		*rpc_code = -32603;
		husk_seterr(ENOMEM, "out of memory");
		goto out;
	}
	r = exec(b, argv, cwd, timeout, in, in_len, &x, wait_fds, pump, arg, cancelled);
	if (*cancelled)
		goto out;
	if (r < 0 || x.error[0]) {
		res = exec_failed(b, &x, r);
		goto out;
	}
	if (t == T_RUN_COMMAND || t == T_RUN_CODE) {
		res = command_result(&x, timeout);
		goto out;
	}
	/* File tools: a failure is the command's stderr. */
	if (x.timed_out || !json_is_integer(x.code) || json_integer_value(x.code)) {
		res = text_result(true, NULL, "%s %s failed: %.*s", tool_names[t],
				  path ? path : ".", (int)x.len[1], (const char *)x.buf[1]);
		goto out;
	}
	if (t == T_WRITE_FILE) {
		res = text_result(false, NULL, "wrote %zu bytes to %s", in_len, path);
	} else if (t == T_LIST_FILES) {
		json_t *s = output_json(&x, 0);

		res = text_result(false, NULL, "%s", json_string_value(s));
		json_decref(s);
	} else if (x.total[0] > b->o->max_file) {
		res = text_result(true, NULL, "%s is larger than %" PRIu64 " bytes, the most "
				  "read_file returns (husk mcp --max-file)", path, b->o->max_file);
	} else {
		json_t *s = enc && !strcmp(enc, "base64") ? NULL :
			    json_stringn((const char *)x.buf[0], x.len[0]);

		if (s) {
			res = json_pack("{s:[{s:s,s:o}],s:b}", "content", "type", "text", "text", s,
					"isError", false);
		} else {
			json_t *e = api_b64(x.buf[0], x.len[0]);

			res = json_pack("{s:[{s:s,s:s},{s:s,s:o}],s:b}", "content", "type", "text",
					"text", enc ? "the file, base64-encoded:" :
					"the file is not UTF-8 text; its bytes, base64-encoded:",
					"type", "text", "text", e, "isError", false);
		}
	}
out:
	json_decref(argv);
	free(decoded);
	exec_out_free(&x);
	return res;
}
