/*
 * client: the command-line clients of husk serve (docs/api.md): `husk ps`,
 * `husk kill ID`, `husk exec ID -- CMD` and `husk run --server PATH ...`.
 * Each connects to the daemon's socket, sends one request and prints what
 * comes back. Files go the way they go for a local `husk run`: --put is
 * packed here, as this user, and --get is extracted here with the same
 * hostile-archive rules (run_files.c); the daemon never touches the
 * user's files.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "cli_run.h"
#include "job/tar.h"
#include "lib/host_file.h"
#include "lib/util.h"
#include "run/run_int.h"
#include "serve/api.h"
#include "serve/client.h"
#include "serve/conn.h"
#include "serve/serve.h"

#define MAX_INLINE_PUT (API_MAX_LINE / 4 * 3 - 64 * 1024)
#define EXIT_USAGE 2

static const char *err_msg(json_t *a)
{
	json_t *e = json_object_get(a, "error");

	return json_string_value(json_object_get(e, "message")) ?: "unknown error";
}

/* One request, its final answer (streams are not expected). */
static json_t *call(const char *server, json_t *req)
{
	struct sconn c;
	json_t *a = NULL;

	if (sconn_open(&c, server) || sconn_send(&c, req) || sconn_recv(&c, &a, true) <= 0) {
		sconn_close(&c);
		return NULL;
	}
	sconn_close(&c);
	return a;
}

static void write_data(int fd, json_t *ev)
{
	uint8_t *p;
	size_t n;

	if (!api_unb64(json_object_get(ev, "data"), &p, &n)) {
		write_best_effort(fd, p, n);
		free(p);
	}
}

/* ---- husk ps ---- */

static const char *age(json_int_t created)
{
	static char b[32];
	long s = (long)(time(NULL) - created);

	if (s < 120)
		snprintf(b, sizeof(b), "%lds", s < 0 ? 0 : s);
	else if (s < 7200)
		snprintf(b, sizeof(b), "%ldm", s / 60);
	else
		snprintf(b, sizeof(b), "%ldh", s / 3600);
	return b;
}

int client_ps(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "server", required_argument, NULL, 's' }, { "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
	};
	const char *server = NULL;
	bool js = false;
	json_t *a, *sb;
	size_t i;
	int c;

	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:", opts, NULL)) != -1) {
		if (c == 's')
			server = optarg;
		else if (c == 'j')
			js = true;
		else if (c == 'h') {
			puts("usage: husk ps [--server PATH] [--json]\n\nList the sandboxes of husk "
			     "serve that are yours (all of them for its admin group).");
			return 0;
		} else {
			cli_bad_option(c, argv);
			fprintf(stderr, "husk ps: %s\n", husk_lasterr());
			return EXIT_USAGE;
		}
	}
	a = call(serve_socket_path(server), json_pack("{s:i,s:s}", "id", 1, "op", "list"));
	if (!a || json_object_get(a, "error")) {
		husk_msg("ps: %s", a ? err_msg(a) : husk_lasterr());
		json_decref(a);
		return 1;
	}
	if (js) {
		char *s = json_dumps(json_object_get(a, "sandboxes"), JSON_COMPACT);

		puts(s ? s : "[]");
		free(s);
	} else {
		printf("%-10s %-8s %-9s %-6s %-16s %-9s %5s %5s\n", "SANDBOX", "KIND", "STATE",
		       "OWNER", "TEMPLATE", "START", "EXECS", "AGE");
		json_array_foreach(json_object_get(a, "sandboxes"), i, sb)
			printf("%-10s %-8s %-9s %-6d %-16s %-9s %5d %5s\n",
			       json_string_value(json_object_get(sb, "sandbox")),
			       json_string_value(json_object_get(sb, "kind")),
			       json_string_value(json_object_get(sb, "state")),
			       (int)json_integer_value(json_object_get(sb, "owner")),
			       json_string_value(json_object_get(sb, "template")) ?: "-",
			       json_string_value(json_object_get(sb, "start")),
			       (int)json_integer_value(json_object_get(sb, "execs")),
			       age(json_integer_value(json_object_get(sb, "created"))));
	}
	json_decref(a);
	return 0;
}

/* ---- husk kill ---- */

int client_kill(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "server", required_argument, NULL, 's' }, { "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *server = NULL;
	int c, st = 0;

	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:", opts, NULL)) != -1) {
		if (c == 's') {
			server = optarg;
		} else if (c == 'h') {
			puts("usage: husk kill [--server PATH] SANDBOX...\n\nEnd sandboxes of husk "
			     "serve now: their jobs are killed, their VMs destroyed.");
			return 0;
		} else {
			cli_bad_option(c, argv);
			fprintf(stderr, "husk kill: %s\n", husk_lasterr());
			return EXIT_USAGE;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "husk kill: name a sandbox (husk ps lists them)\n");
		return EXIT_USAGE;
	}
	for (; optind < argc; optind++) {
		json_t *a = call(serve_socket_path(server), json_pack("{s:i,s:s,s:s}", "id", 1, "op",
								"kill", "sandbox", argv[optind]));

		if (!a || json_object_get(a, "error")) {
			husk_msg("kill %s: %s", argv[optind], a ? err_msg(a) : husk_lasterr());
			st = 1;
		}
		json_decref(a);
	}
	return st;
}

/* ---- streams of a running command ---- */

struct stream_ctx {
	struct sconn c;
	bool stdin;			/* forward our stdin */
	const char *target_key;		/* "exec" or "run" */
	json_t *target_id;
	struct run_files *files;	/* run --get: extraction here */
	const struct run_opts *o;
	unsigned get_idx;
	json_t *final;
	int exit_code;
	int sigfd;
};

static int on_files(struct stream_ctx *s, json_t *ev)
{
	const char *path = json_string_value(json_object_get(ev, "path"));
	uint8_t *p;
	size_t n, off = 0;
	ssize_t used;
	unsigned i;

	if (!s->files || !path)
		return husk_seterr(EPROTO, "husk serve sent files that were not asked for");
	for (i = 0; i < s->o->nr_get && strcmp(s->o->get[i].guest, path); i++)
		;
	if (i == s->o->nr_get)
		return husk_seterr(EPROTO, "husk serve sent files of '%s', not asked for", path);
	if (api_unb64(json_object_get(ev, "data"), &p, &n))
		return -EPROTO;
	if (!n) {
		free(p);
		return run_files_get_end(s->files, i);
	}
	while (off < n || run_files_get_busy(s->files, i)) {
		used = run_files_get_data(s->files, i, p + off, n - off, 1 << 20);
		if (used < 0) {
			free(p);
			return (int)used;
		}
		off += used;
	}
	free(p);
	return 0;
}

/* Relay until the final answer: output to our fds, our stdin to the command. */
static int stream(struct stream_ctx *s)
{
	uint8_t buf[48 * 1024];
	bool in_open = s->stdin;

	for (;;) {
		struct pollfd p[3] = {
			{ .fd = s->c.fd, .events = POLLIN },
			{ .fd = in_open ? STDIN_FILENO : -1, .events = POLLIN },
			{ .fd = s->sigfd, .events = POLLIN },
		};
		json_t *ev;
		int r;

		if (poll(p, 3, -1) < 0 && errno != EINTR)
			return husk_seterr(errno, "poll: %s", strerror(errno));
		if (p[2].revents & POLLIN)
			return husk_seterr(EINTR, "interrupted");
		if (p[1].revents) {
			ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));
			json_t *req = json_pack("{s:s,s:s,s:O}", "id", "stdin", "op", "stdin",
						s->target_key, s->target_id);

			if (n > 0)
				json_object_set_new(req, "data", api_b64(buf, n));
			else {
				json_object_set_new(req, "eof", json_true());
				in_open = false;
			}
			if (sconn_send(&s->c, req))
				return -EPIPE;
		}
		if (!p[0].revents)
			continue;
		while ((r = sconn_recv(&s->c, &ev, false)) == 1) {
			const char *e = json_string_value(json_object_get(ev, "event"));
			json_t *re = json_object_get(ev, "re");

			if (json_is_string(re) && !strcmp(json_string_value(re), "stdin")) {
				json_decref(ev);	/* our stdin's acknowledgements */
				continue;
			}
			if (e && !strcmp(e, "stdout"))
				write_data(STDOUT_FILENO, ev);
			else if (e && !strcmp(e, "stderr"))
				write_data(STDERR_FILENO, ev);
			else if (e && !strcmp(e, "files") && on_files(s, ev)) {
				json_decref(ev);
				return -EPROTO;
			} else if (e && !strcmp(e, "queued"))
				husk_debug("queued: no room in husk serve yet");
			if (!e) {
				s->final = ev;
				return 0;
			}
			json_decref(ev);
		}
		if (r < 0)
			return r;
	}
}

static int sig_fd(void)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigprocmask(SIG_BLOCK, &set, NULL);
	return stop_signalfd();
}

/* ---- husk exec ---- */

int client_exec(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "server", required_argument, NULL, 's' }, { "stdin", no_argument, NULL, 'i' },
		{ "env", required_argument, NULL, 'e' }, { "cwd", required_argument, NULL, 'c' },
		{ "timeout", required_argument, NULL, 't' }, { "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct stream_ctx s = { .target_key = "exec", .sigfd = -1 };
	const char *server = NULL, *cwd = NULL;
	json_t *req, *env = json_object(), *av = json_array(), *ec;
	uint64_t timeout = 0;
	int c, i, code;

	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			server = optarg;
			break;
		case 'i':
			s.stdin = true;
			break;
		case 'e': {
			char *eq = strchr(optarg, '=');

			if (!eq || eq == optarg) {
				fprintf(stderr, "husk exec: --env wants KEY=VALUE\n");
				return EXIT_USAGE;
			}
			json_object_set_new(env, (*eq = '\0', optarg), json_string(eq + 1));
			break;
		}
		case 'c':
			cwd = optarg;
			break;
		case 't':
			if (cli_num_opt("--timeout", optarg, 1, 86400 * 31, &timeout)) {
				fprintf(stderr, "husk exec: %s\n", husk_lasterr());
				return EXIT_USAGE;
			}
			break;
		case 'h':
			puts("usage: husk exec [--server PATH] [--stdin] [--env K=V]... [--cwd DIR]\n"
			     "                 [--timeout SEC] SANDBOX -- CMD [ARGS...]\n\n"
			     "Run CMD in a session of husk serve (made with its create request) and\n"
			     "exit with its status (128+N for signal N, 124 at --timeout).");
			return 0;
		default:
			cli_bad_option(c, argv);
			fprintf(stderr, "husk exec: %s\n", husk_lasterr());
			return EXIT_USAGE;
		}
	}
	if (optind + 1 >= argc) {
		fprintf(stderr, "husk exec: want SANDBOX -- CMD [ARGS...]\n");
		return EXIT_USAGE;
	}
	for (i = optind + 1; i < argc; i++)
		if (i > optind + 1 || strcmp(argv[i], "--"))
			json_array_append_new(av, json_string(argv[i]));
	if (!json_array_size(av)) {
		fprintf(stderr, "husk exec: no command\n");
		return EXIT_USAGE;
	}
	s.target_id = json_string("exec");
	req = json_pack("{s:O,s:s,s:s,s:o,s:o,s:b}", "id", s.target_id, "op", "exec",
			"sandbox", argv[optind], "argv", av, "env", env, "stdin", s.stdin);
	if (cwd)
		json_object_set_new(req, "cwd", json_string(cwd));
	if (timeout)
		json_object_set_new(req, "timeout", json_integer(timeout));
	s.sigfd = sig_fd();
	if (sconn_open(&s.c, serve_socket_path(server)) || sconn_send(&s.c, req) || stream(&s)) {
		husk_msg("exec: %s", husk_lasterr());
		sconn_close(&s.c);
		json_decref(s.target_id);
		return 125;
	}
	sconn_close(&s.c);
	json_decref(s.target_id);
	if (json_object_get(s.final, "error")) {
		husk_msg("exec: %s", err_msg(s.final));
		json_decref(s.final);
		return 125;
	}
	ec = json_object_get(s.final, "exit_code");
	code = json_is_integer(ec) ? (int)json_integer_value(ec) : 125;
	json_decref(s.final);
	return code;
}

/* ---- husk run --server ---- */

static int put_sink(void *arg, const void *buf, size_t len)
{
	struct { uint8_t *p; size_t n, cap; } *b = arg;

	if (b->n + len > MAX_INLINE_PUT)
		return husk_seterr(EFBIG, "--put data is more than a husk serve run takes "
				   "(%d MiB compressed): use a session (husk exec) or husk run "
				   "without --server", MAX_INLINE_PUT >> 20);
	if (b->n + len > b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 65536;
		uint8_t *nb;

		while (cap < b->n + len)
			cap *= 2;
		nb = realloc(b->p, cap);
		if (!nb)
			return husk_seterr(ENOMEM, "out of memory");
		b->p = nb;
		b->cap = cap;
	}
	memcpy(b->p + b->n, buf, len);
	b->n += len;
	return 0;
}

static int check_local_only(const struct run_opts *o)
{
	if (o->console || o->no_jail || o->template_dir || o->session_fd >= 0 ||
	    o->uid_base != RUN_DEFAULT_UID_BASE || o->kernel || o->rootfs || o->no_hugepages ||
	    o->pids_max != RUN_DEFAULT_PIDS_MAX)
		return husk_seterr(EINVAL, "--server: --console, --no-jail, --template-dir, "
				   "--uid-range, --kernel, --rootfs, --pids-max and "
				   "--no-hugepages are the daemon's to decide");
	return 0;
}

static json_t *run_request(const struct run_opts *o)
{
	json_t *r = json_pack("{s:s,s:s,s:I,s:I,s:I,s:I,s:b}", "id", "run", "op", "run",
			      "timeout", (json_int_t)o->job.timeout_sec,
			      "workspace_size", (json_int_t)o->job.workspace_mib,
			      "max_output", (json_int_t)o->job.max_output,
			      "vcpus", (json_int_t)o->vcpus, "stdin", o->job.stdin);
	json_t *av = json_array(), *env = json_object(), *puts = json_array(), *gets = json_array();
	unsigned i;

	for (i = 0; i < (unsigned)o->job.argc; i++)
		json_array_append_new(av, json_string(o->job.argv[i]));
	for (i = 0; i < o->job.nr_env; i++) {
		const char *e = o->job.env[i], *eq = strchr(e, '=');
		char key[256];

		snprintf(key, sizeof(key), "%.*s", eq ? (int)(eq - e) : (int)strlen(e), e);
		json_object_set_new(env, key, json_string(eq ? eq + 1 : ""));
	}
	json_object_set_new(r, "argv", av);
	json_object_set_new(r, "env", env);
	/* Only what differs from the defaults: a request like that fits a warm pool. */
	if (o->image)
		json_object_set_new(r, "image", json_string(o->image));
	if (o->template_name)
		json_object_set_new(r, "template", json_string(o->template_name));
	else if (o->mem_mib != RUN_DEFAULT_MEM_MIB)
		json_object_set_new(r, "mem", json_integer(o->mem_mib));
	if (o->vcpus == 1 || o->template_name)
		json_object_del(r, "vcpus");
	if (o->cpu_milli != RUN_DEFAULT_CPU_MILLI)
		json_object_set_new(r, "cpus", json_real(o->cpu_milli / 1000.0));
	for (i = 0; i < o->nr_put; i++) {
		struct { uint8_t *p; size_t n, cap; } b = { 0 };

		if (tar_create(o->put[i].host, o->put[i].guest, put_sink, &b)) {
			husk_seterr(EIO, "--put %s: %s", o->put[i].host, husk_lasterr());
			free(b.p);
			json_decref(r);
			json_decref(puts);
			json_decref(gets);
			return NULL;
		}
		json_array_append_new(puts, api_b64(b.p, b.n));
		free(b.p);
	}
	for (i = 0; i < o->nr_get; i++)
		json_array_append_new(gets, json_string(o->get[i].guest));
	json_object_set_new(r, "put", puts);
	json_object_set_new(r, "get", gets);
	if (o->get_always)
		json_object_set_new(r, "get_always", json_true());
	if (o->job.cwd)
		json_object_set_new(r, "cwd", json_string(o->job.cwd));
	if (o->net == RUN_NET_EGRESS) {
		/* The rules as the parsers read them back, for the daemon to check again. */
		json_t *rules = run_rules_json(o->allow, o->nr_allow, o->deny, o->nr_deny,
					       o->allow_host, o->nr_allow_host);

		json_object_set_new(r, "net", json_string("egress"));
		json_object_update(r, rules);
		json_decref(rules);
		json_object_set_new(r, "conn_rate", json_integer((json_int_t)o->conn_rate));
		json_object_set_new(r, "egress_limit", json_integer((json_int_t)o->egress_limit));
		json_object_set_new(r, "max_dests", json_integer((json_int_t)o->max_dests));
		if (o->egress_rate)
			json_object_set_new(r, "egress_rate",
					    json_integer((json_int_t)o->egress_rate));
	}
	return r;
}

int client_run(const struct run_opts *o, const char *server)
{
	struct stream_ctx s = { .target_key = "run", .sigfd = -1, .o = o };
	struct run_files files;
	json_t *req, *rec;
	bool ok;
	int code;

	if (check_local_only(o)) {
		husk_msg("run: %s", husk_lasterr());
		return EXIT_USAGE;
	}
	req = run_request(o);
	if (!req) {
		husk_msg("run: %s", husk_lasterr());
		return 125;
	}
	run_files_init(&files, o);
	if (run_files_open_gets(&files)) {
		husk_msg("run: %s", husk_lasterr());
		json_decref(req);
		return 125;
	}
	s.files = &files;
	s.stdin = o->job.stdin;
	s.target_id = json_string("run");
	s.sigfd = sig_fd();
	if (sconn_open(&s.c, serve_socket_path(server)) || sconn_send(&s.c, req) || stream(&s)) {
		husk_msg("run: %s", husk_lasterr());
		sconn_close(&s.c);
		run_files_close(&files, false);
		json_decref(s.target_id);
		return 125;
	}
	sconn_close(&s.c);
	json_decref(s.target_id);
	ok = !json_object_get(s.final, "error");
	code = ok ? (int)json_integer_value(json_object_get(s.final, "exit_code")) : 125;
	if (!ok)
		husk_msg("%s", err_msg(s.final));
	rec = json_object_get(s.final, "record");
	if (files.o->nr_get && run_files_close(&files, ok && (code == 0 || o->get_always))) {
		if (rec)
			json_object_set_new(rec, "files_committed", json_true());
	} else if (o->nr_get && ok && (code == 0 || o->get_always)) {
		husk_msg("%s", husk_lasterr());
		code = 125;
	}
	if (rec && (o->json || o->json_fd >= 0 || o->result)) {
		char *line = json_dumps(rec, JSON_COMPACT);

		if (line && o->json) {
			printf("%s\n", line);
			fflush(stdout);
		}
		if (line && o->json_fd >= 0)
			dprintf(o->json_fd, "%s\n", line);
		if (line && o->result) {
			int fd = host_open_output(o->result, "--result");

			if (fd >= 0) {
				dprintf(fd, "%s\n", line);
				close(fd);
			}
		}
		free(line);
	}
	json_decref(s.final);
	return code;
}
