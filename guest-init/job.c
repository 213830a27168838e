/*
 * job: the job spec, files into and out of the workspace, and running the
 * job: start it through its init (jobinit.c), then one poll loop that
 * relays stdin, stdout and stderr, reads the init's report, enforces the
 * timeout and ends with the exit record once the main process is gone and
 * its output is drained.
 *
 * A session (session.c) runs each of its execs the same way, so the pieces
 * both need live here: exec specs, output streams, stdin queues, exit
 * records and the put and get helpers.
 *
 * Everything from the host is validated here before use. Work on files
 * (tar in and out) happens in children that already are the agent user,
 * so a hostile archive or path can only touch what the job itself could.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "init.h"
#include "job/proto.h"
#include "job/tar.h"
#include "lib/util.h"

/* ---- job spec ---- */

static int push_str(char ***v, size_t *n, size_t max, const struct tlv *t, const char *what)
{
	char **nv;
	int err;

	if (*n >= max)
		return husk_seterr(EINVAL, "job spec has more than %zu %s", max, what);
	nv = realloc(*v, (*n + 2) * sizeof(**v));
	if (!nv)
		return husk_seterr(ENOMEM, "out of memory for the job spec");
	*v = nv;
	err = tlv_str(t, &nv[*n]);
	if (err)
		return err;
	nv[++*n] = NULL;
	return 0;
}

/* Relative, no "..", no empty components beyond a trailing slash. */
bool job_path_sane(const char *p)
{
	const char *c = p;
	size_t n;

	if (!*p || *p == '/' || strlen(p) >= PATH_MAX)
		return false;
	while (*c) {
		n = strcspn(c, "/");
		if (n == 2 && c[0] == '.' && c[1] == '.')
			return false;
		c += n;
		while (*c == '/')
			c++;
	}
	return true;
}

static int scalar_once(uint64_t *seen, uint16_t tag)
{
	if (*seen & (1ull << tag))
		return husk_seterr(EINVAL, "job spec repeats tag %u", tag);
	*seen |= 1ull << tag;
	return 0;
}

/* One T_JOB_RLIMIT: u32 resource, u64 soft, u64 hard, little-endian. */
static int spec_rlimit(struct job_spec *js, const struct tlv *t)
{
	uint32_t res;
	uint64_t soft, hard;

	if (t->len != PROTO_RLIMIT_LEN)
		return husk_seterr(EINVAL, "job spec has a malformed resource limit");
	res = le32_get(t->val);
	soft = le64_get(t->val + 4);
	hard = le64_get(t->val + 12);
	if (!proto_rlimit_ok(res) || soft > hard)
		return husk_seterr(EINVAL, "job spec has an invalid resource limit (%u: "
				   "%llu over %llu)", res, (unsigned long long)soft,
				   (unsigned long long)hard);
	if (js->nrlimits == PROTO_MAX_RLIMITS)
		return husk_seterr(EINVAL, "job spec has more than %d resource limits",
				   PROTO_MAX_RLIMITS);
	js->rlimits[js->nrlimits].resource = res;
	js->rlimits[js->nrlimits].soft = soft;
	js->rlimits[js->nrlimits].hard = hard;
	js->nrlimits++;
	return 0;
}

/* One T_JOB_TMPFS: u64 size, u32 mode, u32 flags, then the path, little-endian. */
static int spec_tmpfs(struct job_spec *js, const struct tlv *t)
{
	uint64_t size;
	uint32_t mode, flags;
	size_t n = t->len > PROTO_TMPFS_HDR ? t->len - PROTO_TMPFS_HDR : 0;
	char *path;

	if (!n || n > 4095 || memchr(t->val + PROTO_TMPFS_HDR, 0, n))
		return husk_seterr(EINVAL, "job spec has a malformed tmpfs mount");
	size = le64_get(t->val);
	mode = le32_get(t->val + 8);
	flags = le32_get(t->val + 12);
	path = strndup((const char *)t->val + PROTO_TMPFS_HDR, n);
	if (!path)
		return husk_seterr(ENOMEM, "out of memory");
	if (!proto_tmpfs_path_ok(path, cfg.workspace) || mode > 07777 ||
	    (flags & ~PROTO_TMPFS_NOEXEC) || js->ntmpfs == PROTO_MAX_TMPFS) {
		int err = husk_seterr(EINVAL, "job spec has a tmpfs mount husk does not make at "
				      "'%.200s' (mode %o, flags %x; at most %d)", path, mode, flags,
				      PROTO_MAX_TMPFS);

		free(path);
		return err;
	}
	js->tmpfs[js->ntmpfs].path = path;
	js->tmpfs[js->ntmpfs].size = size;
	js->tmpfs[js->ntmpfs].mode = mode;
	js->tmpfs[js->ntmpfs].noexec = flags & PROTO_TMPFS_NOEXEC;
	js->ntmpfs++;
	return 0;
}

/* A flag that is there only when set: a u8 that must be 1. */
static int spec_flag(const struct tlv *t, const char *name, bool *flag)
{
	uint8_t u8;
	int err = tlv_u8(t, &u8);

	if (!err && u8 != 1)
		err = husk_seterr(EINVAL, "job spec: %s must be 1", name);
	*flag = !err;
	return err;
}

static int spec_elem(struct job_spec *js, const struct tlv *t, uint64_t *seen)
{
	uint8_t u8;
	int err = 0;
	char *eq;

	switch (t->tag) {
	case T_JOB_ARG:
		return push_str(&js->argv, &js->argc, PROTO_MAX_ARGS, t, "arguments");
	case T_JOB_ENV:
		err = push_str(&js->env, &js->nenv, PROTO_MAX_ENV, t, "environment entries");
		if (err)
			return err;
		eq = strchr(js->env[js->nenv - 1], '=');
		if (!eq || eq == js->env[js->nenv - 1])
			return husk_seterr(EINVAL, "environment entry '%s' is not KEY=VALUE",
					   js->env[js->nenv - 1]);
		return 0;
	case T_JOB_RLIMIT:
		return spec_rlimit(js, t);
	case T_JOB_TMPFS:
		return spec_tmpfs(js, t);
	case T_JOB_GET:
		err = push_str(&js->gets, &js->ngets, PROTO_MAX_GETS, t, "--get paths");
		if (!err && !job_path_sane(js->gets[js->ngets - 1]))
			return husk_seterr(EINVAL, "--get path '%s' must be workspace-relative "
					   "without '..'", js->gets[js->ngets - 1]);
		return err;
	}
	/* Every other tag is a scalar that may appear once. */
	if (t->tag >= 64 || scalar_once(seen, t->tag))
		return husk_seterr(EINVAL, "job spec has unknown or repeated tag %u", t->tag);
	switch (t->tag) {
	case T_JOB_CWD:
		err = tlv_str(t, &js->cwd);
		if (!err && (!*js->cwd || strlen(js->cwd) >= PATH_MAX))
			err = husk_seterr(EINVAL, "job working directory is empty or too long");
		return err;
	case T_JOB_HOSTNAME:
		err = tlv_str(t, &js->hostname);
		if (!err && !proto_hostname_ok(js->hostname))
			err = husk_seterr(EINVAL, "job host name is not a host name");
		return err;
	case T_JOB_TIMEOUT_MS:
		return tlv_u64(t, &js->timeout_ms);
	case T_JOB_WORKSPACE_MIB:
		err = tlv_u32(t, &js->workspace_mib);
		if (!err && js->workspace_mib > (1u << 20))
			err = husk_seterr(EINVAL, "workspace of %u MiB is absurd", js->workspace_mib);
		return err;
	case T_JOB_CLOCK_NS:
		return tlv_u64(t, &js->clock_ns);
	case T_JOB_RNG_SEED:
		if (t->len > MAX_RNG_SEED)
			return husk_seterr(EINVAL, "RNG seed of %u bytes exceeds %d", t->len,
					   MAX_RNG_SEED);
		js->seed = malloc(t->len ? t->len : 1);
		if (!js->seed)
			return husk_seterr(ENOMEM, "out of memory for the RNG seed");
		memcpy(js->seed, t->val, t->len);
		js->seed_len = t->len;
		return 0;
	case T_JOB_STDIN:
		err = tlv_u8(t, &u8);
		js->stdin_frames = u8 != 0;
		return err;
	case T_JOB_FILES_IN:
		/* Number of streams (husk sends one per --put); 0 = none. */
		return tlv_u8(t, &js->files_in);
	case T_JOB_MEM_LIMIT:
		return tlv_u64(t, &js->mem_limit);
	case T_JOB_PIDS_LIMIT:
		err = tlv_u32(t, &js->pids_limit);
		if (!err && js->pids_limit == 0)
			err = husk_seterr(EINVAL, "pids limit of 0 leaves no room for the job");
		return err;
	case T_JOB_NOFILE:
		err = tlv_u32(t, &js->nofile);
		if (!err && js->nofile < 3)
			err = husk_seterr(EINVAL, "nofile limit %u leaves no room for stdio",
					  js->nofile);
		return err;
	case T_JOB_FSIZE:
		return tlv_u64(t, &js->fsize);
	case T_JOB_NET_ADDR:
		js->net = true;
		return tlv_u32(t, &js->net_addr);
	case T_JOB_NET_GW:
		return tlv_u32(t, &js->net_gw);
	case T_JOB_NET_PREFIX:
		return tlv_u8(t, &js->net_prefix);
	case T_JOB_NET_MAC:
		/* Unicast, not all zero: what the host's filter will expect. */
		if (t->len != 6 || (t->val[0] & 1) || !memcmp(t->val, "\0\0\0\0\0\0", 6))
			return husk_seterr(EINVAL, "job spec has an invalid MAC address");
		memcpy(js->net_mac, t->val, 6);
		js->have_mac = true;
		return 0;
	case T_JOB_ROOT:
		return spec_flag(t, "T_JOB_ROOT", &js->root);
	case T_JOB_VERBOSE:
		return spec_flag(t, "T_JOB_VERBOSE", &js->verbose);
	case T_JOB_TERMINAL: {
		uint32_t v;

		err = tlv_u32(t, &v);
		js->terminal = !err;
		js->rows = v >> 16;
		js->cols = v & 0xffff;
		return err;
	}
	case T_JOB_SESSION:
		err = tlv_u8(t, &u8);
		if (!err && u8 > 1)
			err = husk_seterr(EINVAL, "job spec has session flag %u (0 or 1)", u8);
		js->session = u8 == 1;
		return err;
	}
	return husk_seterr(EINVAL, "job spec has unknown tag %u", t->tag);
}

static int check_argv(const struct job_spec *js, const char *what)
{
	if (!js->argc)
		return husk_seterr(EINVAL, "%s spec has no command", what);
	if (!*js->argv[0])
		return husk_seterr(EINVAL, "%s command is an empty string", what);
	return 0;
}

/* What a session decides per exec must not be in its own spec. */
static int check_session(const struct job_spec *js, uint64_t seen)
{
	if (js->argc)
		return husk_seterr(EINVAL, "a session's spec has no command "
				   "(each P_EXEC has its own)");
	if (js->ngets)
		return husk_seterr(EINVAL, "a session's spec has no --get paths "
				   "(P_GET asks for them)");
	if (seen & 1ull << T_JOB_STDIN)
		return husk_seterr(EINVAL, "a session's spec has no stdin "
				   "(each P_EXEC asks for its own)");
	if (js->terminal)
		return husk_seterr(EINVAL, "a session has no terminal");
	return 0;
}

int job_spec_parse(const uint8_t *p, size_t len, struct job_spec *js)
{
	struct tlv_iter it;
	struct tlv t;
	uint64_t seen = 0, net_tags;
	int r;

	memset(js, 0, sizeof(*js));
	js->tty = -1;
	js->workspace_mib = DEFAULT_WORKSPACE_MIB;
	js->pids_limit = DEFAULT_PIDS_LIMIT;
	js->nofile = DEFAULT_NOFILE;
	js->fsize = UINT64_MAX;
	tlv_iter_init(&it, p, len);
	while ((r = tlv_next(&it, &t)) == 1) {
		r = spec_elem(js, &t, &seen);
		if (r)
			return r;
	}
	if (r)
		return r;
	r = js->session ? check_session(js, seen) : check_argv(js, "job");
	if (r)
		return r;
	if (!js->workspace_mib)
		js->workspace_mib = DEFAULT_WORKSPACE_MIB;
	/* Network: all three tags or none; the gateway must be on-link. */
	net_tags = seen & (1ull << T_JOB_NET_ADDR | 1ull << T_JOB_NET_GW |
			   1ull << T_JOB_NET_PREFIX);
	if (net_tags) {
		uint32_t mask = js->net_prefix && js->net_prefix <= 32 ?
				htonl(~0u << (32 - js->net_prefix)) : 0;

		if (net_tags != (1ull << T_JOB_NET_ADDR | 1ull << T_JOB_NET_GW |
				 1ull << T_JOB_NET_PREFIX))
			return husk_seterr(EINVAL, "job spec has a partial network configuration");
		if (!mask || !js->net_addr || js->net_addr == js->net_gw ||
		    ((js->net_addr ^ js->net_gw) & mask))
			return husk_seterr(EINVAL, "job spec network address, gateway or prefix "
					   "is invalid");
	}
	return 0;
}

/* Does env (n entries) set the key of entry ("K=V")? */
static bool env_has_key(char **env, size_t n, const char *entry)
{
	size_t kl = strcspn(entry, "="), i;

	for (i = 0; i < n; i++)
		if (!strncmp(env[i], entry, kl) && env[i][kl] == '=')
			return true;
	return false;
}

static int dup_str(char **dst, const char *s)
{
	*dst = s ? strdup(s) : NULL;
	if (s && !*dst)
		return husk_seterr(ENOMEM, "out of memory for an exec spec");
	return 0;
}

/* The session's environment entries the exec does not override come after its own. */
static int exec_inherit(struct job_spec *xs, const struct job_spec *session)
{
	size_t own = xs->nenv, i;
	char **nv;

	for (i = 0; i < session->nenv; i++) {
		if (env_has_key(xs->env, own, session->env[i]))
			continue;
		nv = realloc(xs->env, (xs->nenv + 2) * sizeof(*nv));
		if (!nv)
			return husk_seterr(ENOMEM, "out of memory for an exec spec");
		xs->env = nv;
		nv[xs->nenv + 1] = NULL;
		if (dup_str(&nv[xs->nenv], session->env[i]))
			return -ENOMEM;
		xs->nenv++;
	}
	if (!xs->cwd && dup_str(&xs->cwd, session->cwd))
		return -ENOMEM;
	xs->mem_limit = session->mem_limit;
	xs->pids_limit = session->pids_limit;
	xs->nofile = session->nofile;
	xs->fsize = session->fsize;
	xs->workspace_mib = session->workspace_mib;
	return 0;
}

int exec_spec_parse(const uint8_t *p, size_t len, const struct job_spec *session,
		    struct job_spec *xs)
{
	struct tlv_iter it;
	struct tlv t;
	uint64_t seen = 0;
	int r;

	memset(xs, 0, sizeof(*xs));
	xs->tty = -1;
	tlv_iter_init(&it, p, len);
	while ((r = tlv_next(&it, &t)) == 1) {
		switch (t.tag) {
		case T_JOB_ARG:
		case T_JOB_ENV:
		case T_JOB_CWD:
		case T_JOB_STDIN:
		case T_JOB_TIMEOUT_MS:
			r = spec_elem(xs, &t, &seen);
			break;
		default:
			r = husk_seterr(EINVAL, "exec spec has tag %u (only argv, env, cwd, "
					"stdin and timeout belong to an exec)", t.tag);
		}
		if (r)
			return r;
	}
	if (r)
		return r;
	r = check_argv(xs, "exec");
	return r ? r : exec_inherit(xs, session);
}

static void free_vec(char **v, size_t n)
{
	size_t i;

	for (i = 0; v && i < n; i++)
		free(v[i]);
	free(v);
}

void job_spec_free(struct job_spec *js)
{
	free_vec(js->argv, js->argc);
	free_vec(js->env, js->nenv);
	free_vec(js->gets, js->ngets);
	free(js->cwd);
	free(js->hostname);
	free(js->seed);
	for (size_t i = 0; i < js->ntmpfs; i++)
		free(js->tmpfs[i].path);
	memset(js, 0, sizeof(*js));
}

/* ---- helpers ---- */

/*
 * In a helper: where its failure goes. A one-shot job's helpers share the
 * control socket (P_ERROR, the VM ends); a session's write the message to
 * a pipe of their own, and guest-init answers the request with it.
 */
static int helper_msg = -1;

static void helper_report(const char *msg)
{
	fprintf(stderr, "husk-init: %s\n", msg);
	/* The pipe: one write below PIPE_BUF, read once the helper is gone. */
	if (helper_msg < 0)
		proto_send(cfg.ctl, P_ERROR, msg, strlen(msg));
	else if (write(helper_msg, msg, strlen(msg)) < 0)
		fprintf(stderr, "husk-init: reporting it: %s\n", strerror(errno));
}

/* In a helper: report husk_lasterr() (the host sees why) and fail. */
static int helper_fail(const char *what)
{
	char msg[600];

	snprintf(msg, sizeof(msg), "%s: %s", what, husk_lasterr());
	helper_report(msg);
	return -1;
}

/*
 * Fork a helper that becomes the agent user and exits with fn's verdict.
 * keep NULL: it keeps every descriptor (a one-shot job's helpers use the
 * control socket); else only those, and its failure goes to msg.
 */
static pid_t agent_fork(int (*fn)(void *), void *arg, int msg, const int *keep, size_t nkeep)
{
	sigset_t all;
	pid_t pid;

	pid = fork();
	if (pid < 0)
		return husk_seterr(errno, "fork: %s", strerror(errno));
	if (pid)
		return pid;
	sigemptyset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	if (keep) {
		close_fds_except(keep, nkeep);
		helper_msg = msg;
	}
	if (sandbox_drop_user()) {
		helper_report(husk_lasterr());
		_exit(1);
	}
	_exit(fn(arg) ? 1 : 0);
}

/* Fork a helper that becomes the agent user; the parent gets its status. */
static int run_as_agent(int (*fn)(void *), void *arg)
{
	pid_t pid;
	int st;

	pid = agent_fork(fn, arg, -1, NULL, 0);
	if (pid < 0)
		return pid;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return husk_seterr(errno, "waitpid: %s", strerror(errno));
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -EIO;
}

/* ---- files in ---- */

static struct tar_extract *extract_new(int dirfd)
{
	struct tar_limits lim = { .max_bytes = TAR_DEFAULT_MAX_BYTES,
				  .max_entries = TAR_DEFAULT_MAX_ENTRIES };

	return tar_extract_new(dirfd, &lim);
}

static int open_workspace(void)
{
	int dirfd = open(cfg.workspace, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (dirfd < 0)
		return husk_seterr(errno, "open %s: %s", cfg.workspace, strerror(errno));
	return dirfd;
}

static int extract_one(int dirfd);

static int extract_helper(void *arg)
{
	unsigned nr;
	int dirfd;

	dirfd = open_workspace();
	if (dirfd < 0)
		return helper_fail("files in");
	for (nr = 0; nr < *(const uint8_t *)arg; nr++) {
		if (extract_one(dirfd))
			return -1;
	}
	close(dirfd);
	return 0;
}

/* One gzip'd tar stream: P_FILES_IN chunks up to an empty one. */
static int extract_one(int dirfd)
{
	struct tar_extract *x;
	struct proto_hdr h;
	uint8_t *p;
	int err;

	x = extract_new(dirfd);
	if (!x)
		return helper_fail("files in");
	for (;;) {
		err = proto_recv(cfg.ctl, &h, &p);
		if (err)
			return helper_fail("files in");
		if (h.type != P_FILES_IN) {
			free(p);
			husk_seterr(EPROTO, "expected P_FILES_IN, got frame type %u", h.type);
			return helper_fail("files in");
		}
		if (!h.len)
			break;
		err = tar_extract_feed(x, p, h.len);
		free(p);
		if (err)
			return helper_fail("files in");
	}
	if (tar_extract_finish(x))
		return helper_fail("files in");
	tar_extract_free(x);
	return 0;
}

int files_in(const struct job_spec *js)
{
	if (!js->files_in)
		return 0;
	return run_as_agent(extract_helper, (void *)&js->files_in);
}

/* A session's put: the stream arrives on a pipe, EOF is its end. */
static int put_helper(void *arg)
{
	static uint8_t buf[CHUNK_MAX];
	int in = *(const int *)arg, dirfd;
	struct tar_extract *x;
	ssize_t n;

	dirfd = open_workspace();
	if (dirfd < 0)
		return helper_fail("put");
	x = extract_new(dirfd);
	if (!x)
		return helper_fail("put");
	for (;;) {
		n = read(in, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			husk_seterr(errno, "reading the archive: %s", strerror(errno));
			return helper_fail("put");
		}
		if (!n)
			break;
		if (tar_extract_feed(x, buf, n))
			return helper_fail("put");
	}
	if (tar_extract_finish(x))
		return helper_fail("put");
	tar_extract_free(x);
	close(dirfd);
	return 0;
}

pid_t files_put_start(int in, int msg)
{
	int keep[] = { in, msg };

	return agent_fork(put_helper, &in, msg, keep, ARRAY_SIZE(keep));
}

/* ---- files out ---- */

struct out_buf {
	uint8_t data[CHUNK_MAX];
	size_t len;
	int fd;			/* the control socket, or a session's pipe */
	bool raw;		/* a pipe: plain bytes (guest-init frames them) */
};

static int write_raw(int fd, const uint8_t *p, size_t len)
{
	int err = write_all(fd, p, len);

	if (err)
		return husk_seterr(-err, "writing the archive: %s", strerror(-err));
	return 0;
}

static int out_flush(struct out_buf *o)
{
	int err = 0;

	if (o->len)
		err = o->raw ? write_raw(o->fd, o->data, o->len) :
			       proto_send(o->fd, P_FILES_OUT, o->data, o->len);
	o->len = 0;
	return err;
}

/* tar_create's sink: gather into chunks of CHUNK_MAX, never empty frames. */
static int out_fn(void *arg, const void *buf, size_t len)
{
	struct out_buf *o = arg;
	const uint8_t *b = buf;
	size_t n;
	int err;

	while (len) {
		n = CHUNK_MAX - o->len;
		if (n > len)
			n = len;
		memcpy(o->data + o->len, b, n);
		o->len += n;
		b += n;
		len -= n;
		if (o->len == CHUNK_MAX) {
			err = out_flush(o);
			if (err)
				return err;
		}
	}
	return 0;
}

/*
 * A valid gzip'd tar with no entries (just the two zero end blocks), so the
 * host's extractor sees a complete stream that creates nothing.
 */
static int empty_archive(struct out_buf *o)
{
	static const uint8_t zero[1024];
	z_stream z = { 0 };
	int r;

	/* windowBits 15 + 16: gzip wrapper, as tar_create writes. */
	if (deflateInit2(&z, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return husk_seterr(ENOMEM, "deflateInit2 failed");
	z.next_in = (uint8_t *)zero;
	z.avail_in = sizeof(zero);
	z.next_out = o->data + o->len;
	z.avail_out = CHUNK_MAX - o->len;
	r = deflate(&z, Z_FINISH);
	o->len = CHUNK_MAX - z.avail_out;
	deflateEnd(&z);
	return r == Z_STREAM_END ? 0 : husk_seterr(EIO, "gzip of the empty archive failed");
}

/* What to archive and where the archive goes. */
struct get_req {
	const char *path;
	int fd;
	bool raw;
	const char *what;	/* for messages: "files out", "get" */
	const char *label;	/* how the console names the path: "--get", "get" */
};

/*
 * A path that does not exist yields a valid archive with no entries and a
 * diagnostic on the console; it is not an error, because
 * a job that failed early commonly leaves its outputs unwritten.
 */
static int create_helper(void *arg)
{
	const struct get_req *req = arg;
	const char *path = req->path;
	struct out_buf *o = calloc(1, sizeof(*o));
	struct stat st;

	if (!o) {
		husk_seterr(ENOMEM, "out of memory");
		return helper_fail(req->what);
	}
	o->fd = req->fd;
	o->raw = req->raw;
	if (chdir(cfg.workspace)) {
		husk_seterr(errno, "chdir %s: %s", cfg.workspace, strerror(errno));
		return helper_fail(req->what);
	}
	if (lstat(path, &st)) {
		fprintf(stderr, "husk-init: %s %s: %s (sending an empty archive)\n", req->label,
			path, strerror(errno));
		if (empty_archive(o) || out_flush(o))
			return helper_fail(req->what);
		return 0;
	}
	if (tar_create(path, path, out_fn, o) || out_flush(o))
		return helper_fail(req->what);
	free(o);
	return 0;
}

int files_out(const struct job_spec *js)
{
	struct get_req req = { .fd = cfg.ctl, .what = "files out", .label = "--get" };
	size_t i;
	int err;

	for (i = 0; i < js->ngets; i++) {
		req.path = js->gets[i];
		err = run_as_agent(create_helper, &req);
		if (err)
			return err;
		err = proto_send(cfg.ctl, P_FILES_OUT, NULL, 0);
		if (err)
			return err;
	}
	return 0;
}

pid_t files_get_start(const char *path, int out, int msg)
{
	struct get_req req = { path, out, true, "get", "get" };
	int keep[] = { out, msg };

	return agent_fork(create_helper, &req, msg, keep, ARRAY_SIZE(keep));
}

/* ---- supervising ---- */

struct job {
	pid_t pid;		/* the job's init; 0 before it exists */
	bool reaped;		/* the job's init is gone */
	bool ended;		/* the job's main process is: res is filled */
	struct report_rd rep;	/* the init's report */
	uint64_t force_at;	/* SIGKILL the init if the job has not ended by then */
	struct feed in;		/* the job's stdin */
	bool tty;		/* in is the master of the job's terminal */
	bool term;		/* the job has a terminal: out[0] is its master */
	struct stream out[2];
	int sfd, tfd;
	struct proto_reader rd;
	struct job_result *res;
};

int stream_pump(struct stream *s)
{
	static uint8_t buf[sizeof(s->pre) + CHUNK_MAX];
	ssize_t n;

	n = read(s->fd, buf + s->pre_len, CHUNK_MAX);
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return 0;
	if (n <= 0) {
		close(s->fd);
		s->fd = -1;
		return 0;
	}
	memcpy(buf, s->pre, s->pre_len);
	return proto_send(cfg.ctl, s->type, buf, s->pre_len + n);
}

void feed_close(struct feed *f)
{
	if (f->fd >= 0)
		close(f->fd);
	f->fd = -1;
	free(f->buf);
	f->buf = NULL;
	f->len = f->off = 0;
}

void feed_pump(struct feed *f)
{
	ssize_t n;

	while (f->fd >= 0 && f->off < f->len) {
		n = write(f->fd, f->buf + f->off, f->len - f->off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n < 0) {
			/* EPIPE: the reader closed its end; the rest is dropped. */
			feed_close(f);
			return;
		}
		f->off += n;
	}
	if (f->off == f->len) {
		f->off = f->len = 0;
		if (f->eof)
			feed_close(f);
	}
}

int feed_queue(struct feed *f, const uint8_t *p, size_t len)
{
	uint8_t *nb;

	if (!len) {
		f->eof = true;
		feed_pump(f);
		return 0;
	}
	if (f->fd < 0 || f->eof)
		return 0;	/* nobody is reading any more: drop */
	nb = realloc(f->buf, f->len + len);
	if (!nb)
		return husk_seterr(ENOMEM, "out of memory queueing %zu bytes for a pipe", len);
	memcpy(nb + f->len, p, len);
	f->buf = nb;
	f->len += len;
	feed_pump(f);
	return 0;
}

static int handle_ctl(struct job *j)
{
	struct proto_hdr h;
	uint8_t *p;
	char msg[128];
	int r;

	while ((r = proto_reader_read(&j->rd, cfg.ctl, &h, &p)) == 1) {
		if (h.type == P_STDIN && !h.len && j->tty) {
			/*
			 * A terminal has no end of input, only its EOF character:
			 * typed at the start of a line, the reader's read returns 0.
			 */
			static const uint8_t veof = 4;	/* ^D, the default VEOF */

			r = feed_queue(&j->in, &veof, 1);
			if (!r)
				r = feed_queue(&j->in, NULL, 0);
		} else if (h.type == P_STDIN) {
			r = feed_queue(&j->in, p, h.len);
		} else if (h.type == P_RESIZE && j->term && h.len == 4) {
			uint32_t v = le32_get(p);
			struct winsize ws = { .ws_row = v >> 16, .ws_col = v & 0xffff };

			/* The kernel tells the job's foreground group (SIGWINCH). */
			if (j->out[0].fd >= 0)
				ioctl(j->out[0].fd, TIOCSWINSZ, &ws);
			r = 0;
		} else if (h.type == P_ERROR) {
			snprintf(msg, sizeof(msg), "host sent an error: %.*s",
				 (int)(h.len < 100 ? h.len : 100), p ? (char *)p : "");
			fprintf(stderr, "husk-init: %s\n", msg);
			r = -ECONNABORTED;
		} else {
			snprintf(msg, sizeof(msg), "unexpected frame type %u while the job runs",
				 h.type);
			proto_send(cfg.ctl, P_ERROR, msg, strlen(msg));
			r = husk_seterr(EPROTO, "%s", msg);
		}
		free(p);
		if (r)
			return r;
	}
	return r;
}

void job_result_set(struct job_result *r, int st, const struct rusage *ru)
{
	r->end_ns = realtime_ns();
	r->ru = *ru;
	r->exited = WIFEXITED(st);
	r->code = WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st);
}

void exit_record_put(struct tlv_buf *b, const struct job_result *r)
{
	tlv_put_u32(b, r->exited ? T_EXIT_CODE : T_EXIT_SIGNAL, r->code);
	tlv_put_u8(b, T_EXIT_TIMED_OUT, r->timed_out);
	tlv_put_u64(b, T_EXIT_USER_US, r->ru.ru_utime.tv_sec * 1000000ull +
		    r->ru.ru_utime.tv_usec);
	tlv_put_u64(b, T_EXIT_SYS_US, r->ru.ru_stime.tv_sec * 1000000ull +
		    r->ru.ru_stime.tv_usec);
	tlv_put_u64(b, T_EXIT_MAXRSS_KIB, r->ru.ru_maxrss);
	tlv_put_u64(b, T_EXIT_START_NS, r->start_ns);
	tlv_put_u64(b, T_EXIT_END_NS, r->end_ns);
}

/* The job's main process has ended with wait status st. */
static void job_ended(struct job *j, int st, const struct rusage *ru)
{
	j->ended = true;
	job_result_set(j->res, st, ru);
}

/*
 * A report is written once, before its writer exits. One that is not a
 * plain exit or death by a signal is ignored: the writer's own exit status
 * stands in for it.
 */
int report_read(struct report_rd *r)
{
	struct jobinit_report *rep = &r->rep;
	ssize_t n;

	if (r->fd < 0)
		return 0;
	for (;;) {
		n = read(r->fd, (uint8_t *)rep + r->len, sizeof(*rep) - r->len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return 0;
		if (n > 0)
			r->len += n;
		if (n <= 0 || r->len == sizeof(*rep))
			break;
	}
	close(r->fd);
	r->fd = -1;
	if (r->len == sizeof(*rep) && rep->magic == JOBINIT_MAGIC &&
	    (WIFEXITED(rep->status) || (WIFSIGNALED(rep->status) && WTERMSIG(rep->status) < 65)))
		return 1;
	return -1;
}

static void read_report(struct job *j)
{
	if (report_read(&j->rep) == 1 && !j->ended)
		job_ended(j, j->rep.rep.status, &j->rep.rep.ru);
}

static void reap(struct job *j)
{
	struct signalfd_siginfo si;
	struct rusage ru;
	pid_t pid;
	int st;

	while (read(j->sfd, &si, sizeof(si)) > 0)
		;
	/* Test mode without namespaces adopts orphans too: reap them all. */
	while ((pid = wait4(-1, &st, WNOHANG, &ru)) > 0) {
		if (pid != j->pid)
			continue;
		j->reaped = true;
		/* It reported before exiting; without a report, its death is the job's. */
		read_report(j);
		if (!j->ended)
			job_ended(j, st, &ru);
	}
}

/* SIGKILL for the init kills its PID namespace, the job with it. */
static void force_kill(struct job *j)
{
	if (j->pid > 0 && !j->reaped)
		kill(j->pid, SIGKILL);
	j->force_at = 0;
}

/*
 * After a failure: kill the job and give its init a moment to reap it and
 * exit (without a namespace it is what kills the job's process group),
 * then SIGKILL it.
 */
static void abort_job(struct job *j)
{
	uint64_t until = now_us() + DRAIN_MS * 1000ull;

	if (j->pid <= 0 || j->reaped)
		return;
	sandbox_kill_job(j->pid);
	while (now_us() < until) {
		if (waitpid(j->pid, NULL, WNOHANG) == j->pid)
			return;
		usleep(10000);
	}
	force_kill(j);
}

static int setup_fds(struct job *j, const struct job_spec *js)
{
	struct itimerspec its = { 0 };
	sigset_t chld;

	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	j->sfd = signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC);
	if (j->sfd < 0)
		return husk_seterr(errno, "signalfd: %s", strerror(errno));
	j->tfd = -1;
	if (js->timeout_ms) {
		j->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
		if (j->tfd < 0)
			return husk_seterr(errno, "timerfd_create: %s", strerror(errno));
		its.it_value.tv_sec = js->timeout_ms / 1000;
		its.it_value.tv_nsec = (js->timeout_ms % 1000) * 1000000;
		if (timerfd_settime(j->tfd, 0, &its, NULL))
			return husk_seterr(errno, "timerfd_settime: %s", strerror(errno));
	}
	if (fcntl(cfg.ctl, F_SETFL, fcntl(cfg.ctl, F_GETFL) | O_NONBLOCK))
		return husk_seterr(errno, "control socket O_NONBLOCK: %s", strerror(errno));
	proto_reader_init(&j->rd);
	return 0;
}

/* guest-init's ends of the job's pipes and the init waiting on them (job_prepare). */
struct job_pre {
	pid_t pid;
	int in, out, err, ep, sp, spec;
};
static struct job_pre pre = { -1, -1, -1, -1, -1, -1, -1 };

int job_prepare(void)
{
	int in[2], out[2], err[2], ep[2], sp[2], spec[2];
	struct job_fds f;

	if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC) ||
	    pipe2(ep, O_CLOEXEC) || pipe2(sp, O_CLOEXEC) || pipe2(spec, O_CLOEXEC))
		return husk_seterr(errno, "pipe: %s", strerror(errno));
	f = (struct job_fds){ in[0], out[1], err[1], ep[1], sp[1], spec[0], -1 };
	pre.pid = jobinit_prepare(&f);
	close(in[0]);
	close(out[1]);
	close(err[1]);
	close(ep[1]);
	close(sp[1]);
	close(spec[0]);
	pre = (struct job_pre){ pre.pid, in[1], out[0], err[0], ep[0], sp[0], spec[1] };
	return pre.pid < 0 ? pre.pid : 0;
}

/*
 * The job spec to the job's init, after the index of the pty in its devpts
 * (JOBINIT_NO_TTY: none) that only guest-init can make; its set-up failure,
 * if any, comes back on ep, whose EOF means the job has exec'd (or reached
 * its exec failure path), or for a session that the init is ready.
 */
static int hand_spec(const uint8_t *spec, size_t len, uint32_t tty)
{
	char msg[600];
	size_t off = 0;
	ssize_t n;

	if (write(pre.spec, &tty, sizeof(tty)) != sizeof(tty))
		len = 0;
	while (off < len) {
		n = write(pre.spec, spec + off, len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		off += n;
	}
	close(pre.spec);
	while ((n = read(pre.ep, msg, sizeof(msg) - 1)) < 0 && errno == EINTR)
		;
	close(pre.ep);
	if (n > 0) {
		msg[n] = 0;
		return husk_seterr(EIO, "setting up the job: %s", msg);
	}
	if (off < len || !len)
		return husk_seterr(EIO, "the job's init did not take the job spec");
	return 0;
}

/*
 * A pty in the devpts instance that is the job's /dev/pts (guest-init's own
 * /dev/pts), for a job with a terminal: its master is guest-init's end of
 * the job's stdin and stdout. Returns the master, -errno.
 */
static int open_pty(const struct job_spec *js, uint32_t *index)
{
	struct winsize ws = { .ws_row = js->rows, .ws_col = js->cols };
	int m, unlock = 0;

	m = open("/dev/pts/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (m < 0)
		return husk_seterr(errno, "open the job's pty: %s", strerror(errno));
	if (ioctl(m, TIOCSPTLCK, &unlock) || ioctl(m, TIOCGPTN, index) ||
	    (ws.ws_row && ws.ws_col && ioctl(m, TIOCSWINSZ, &ws))) {
		int e = errno;

		close(m);
		return husk_seterr(e, "set up the job's pty: %s", strerror(e));
	}
	return m;
}

static int spawn(struct job *j, const struct job_spec *js, const uint8_t *spec, size_t len)
{
	uint32_t tty = JOBINIT_NO_TTY;
	int err, m;

	if (pre.pid < 0)
		return husk_seterr(ECHILD, "the job's init is not there");
	j->pid = pre.pid;
	j->in.fd = pre.in;
	if (!js->stdin_frames) {
		close(pre.in);
		j->in.fd = -1;
	}
	j->out[0] = (struct stream){ .fd = pre.out, .type = P_STDOUT };
	j->out[1] = (struct stream){ .fd = pre.err, .type = P_STDERR };
	if (js->terminal) {
		/* One stream both ways: the pty's master; the pipes see EOF at the exec. */
		m = open_pty(js, &tty);
		if (m < 0)
			return m;
		close(pre.out);
		j->out[0].fd = m;
		j->term = true;
		if (j->in.fd >= 0) {
			close(j->in.fd);
			j->in.fd = fcntl(m, F_DUPFD_CLOEXEC, 3);
			j->tty = true;
		}
	}
	j->rep.fd = pre.sp;
	j->res->start_ns = realtime_ns();
	err = hand_spec(spec, len, tty);
	if (err)
		return err;
	if (j->in.fd >= 0)
		fcntl(j->in.fd, F_SETFL, O_NONBLOCK);
	fcntl(j->rep.fd, F_SETFL, O_NONBLOCK);
	return 0;
}

/* The session's init needs none of the job's pipes: it never forks a job. */
int job_session_init(const uint8_t *spec, size_t len, pid_t *init)
{
	int fds[] = { pre.in, pre.out, pre.err, pre.sp };
	size_t i;

	*init = 0;
	if (pre.pid < 0)
		return husk_seterr(ECHILD, "the job's init is not there");
	*init = pre.pid;
	for (i = 0; i < ARRAY_SIZE(fds); i++)
		close(fds[i]);
	return hand_spec(spec, len, JOBINIT_NO_TTY);
}

/* A negative fd makes poll skip the slot. */
static void watch(struct pollfd *p, int fd, short events)
{
	p->fd = fd;
	p->events = events;
	p->revents = 0;
}

enum { FD_CTL, FD_SIG, FD_TIMER, FD_OUT, FD_ERR, FD_IN, FD_STAT, NFDS };

/* A message of our own on an output stream (the user's stderr). */
static int stream_say(const struct stream *s, const char *msg)
{
	uint8_t buf[sizeof(s->pre) + 256];
	size_t n = strlen(msg);

	if (n > 256)
		n = 256;
	memcpy(buf, s->pre, s->pre_len);
	memcpy(buf + s->pre_len, msg, n);
	return proto_send(cfg.ctl, s->type, buf, s->pre_len + n);
}

/*
 * The kernel's OOM killer ended processes in cgroup (its memory limit, or
 * the guest's memory): say so on err, the job's or an exec's stderr and the
 * only place the user looks, since the exit record just shows SIGKILL.
 */
int report_oom(const struct job_spec *js, const char *cgroup, const struct stream *err,
	       bool exec)
{
	uint64_t n = sandbox_oom_kills(cgroup);
	const char *whose = exec ? "this command's" : "its";
	char msg[256];

	if (!n)
		return 0;
	if (js->mem_limit)
		snprintf(msg, sizeof(msg), "husk-init: the %s reached its memory limit of %llu "
			 "MiB: the kernel's OOM killer ended %llu of %s processes\n",
			 exec ? "session" : "job", (unsigned long long)(js->mem_limit >> 20),
			 (unsigned long long)n, whose);
	else
		snprintf(msg, sizeof(msg), "husk-init: the guest ran out of memory: the kernel's "
			 "OOM killer ended %llu of %s processes\n", (unsigned long long)n,
			 exec ? whose : "the job's");
	fputs(msg, stderr);
	return stream_say(err, msg);
}

int job_run(const struct job_spec *js, const uint8_t *spec, size_t len,
	    struct job_result *res)
{
	struct job j = { .res = res, .in = { .fd = -1 }, .rep = { .fd = -1 },
			 .out = { { .fd = -1, .type = P_STDOUT },
				  { .fd = -1, .type = P_STDERR } } };
	struct pollfd pfd[NFDS];
	uint64_t ticks, now, wake, deadline = 0;
	int err, i, timeout;
	bool killed = false;

	memset(res, 0, sizeof(*res));
	err = setup_fds(&j, js);
	if (err)
		return err;
	err = spawn(&j, js, spec, len);
	if (!err) {
		struct tlv_buf b;

		init_step(IS_JOB_STARTED);
		tlv_init(&b);
		init_steps_put(&b);
		err = b.failed ? -ENOMEM : proto_send(cfg.ctl, P_STARTED, b.data, b.len);
		tlv_free(&b);
	}
	if (err)
		goto kill;
	husk_event(HUSK_EV_JOB_STARTED);

	while (!j.ended || !j.reaped || j.out[0].fd >= 0 || j.out[1].fd >= 0) {
		now = now_us();
		if (j.ended && !killed) {
			/* Whatever the main process left behind goes now. */
			sandbox_kill_job(j.reaped ? 0 : j.pid);
			killed = true;
			deadline = now + DRAIN_MS * 1000ull;
		}
		if (killed && now >= deadline) {
			if (j.out[0].fd >= 0 || j.out[1].fd >= 0)
				fprintf(stderr, "husk-init: job output still open after %d ms, "
					"giving up on it\n", DRAIN_MS);
			force_kill(&j);
			break;
		}
		if (j.force_at && !j.ended && now >= j.force_at)
			force_kill(&j);
		watch(&pfd[FD_CTL], j.ended || j.in.len >= STDIN_QUEUE_MAX ? -1 : cfg.ctl,
		      POLLIN);
		watch(&pfd[FD_SIG], j.sfd, POLLIN);
		watch(&pfd[FD_TIMER], j.tfd, POLLIN);
		watch(&pfd[FD_OUT], j.out[0].fd, POLLIN);
		watch(&pfd[FD_ERR], j.out[1].fd, POLLIN);
		watch(&pfd[FD_IN], j.in.off < j.in.len ? j.in.fd : -1, POLLOUT);
		watch(&pfd[FD_STAT], j.rep.fd, POLLIN);
		wake = killed ? deadline : j.ended ? 0 : j.force_at;
		timeout = !wake ? -1 : wake > now ? (int)((wake - now) / 1000) + 1 : 0;
		if (poll(pfd, NFDS, timeout) < 0) {
			if (errno == EINTR)
				continue;
			err = husk_seterr(errno, "poll: %s", strerror(errno));
			goto kill;
		}
		if (pfd[FD_STAT].revents)
			read_report(&j);
		if (pfd[FD_SIG].revents)
			reap(&j);
		if (pfd[FD_TIMER].revents && read(j.tfd, &ticks, sizeof(ticks)) > 0 &&
		    !j.ended) {
			res->timed_out = true;
			sandbox_kill_job(j.pid);
			/* The init reports the job's SIGKILL; one that does not goes too. */
			j.force_at = now_us() + DRAIN_MS * 1000ull;
		}
		for (i = 0; i < 2; i++) {
			if (!pfd[FD_OUT + i].revents)
				continue;
			err = stream_pump(&j.out[i]);
			if (err)
				goto kill;
		}
		if (pfd[FD_IN].revents)
			feed_pump(&j.in);
		if (pfd[FD_CTL].revents) {
			err = handle_ctl(&j);
			if (err)
				goto kill;
		}
	}
	err = report_oom(js, JOB_CGROUP, &j.out[1], false);
	goto out;
kill:
	abort_job(&j);
out:
	for (i = 0; i < 2; i++)
		if (j.out[i].fd >= 0)
			close(j.out[i].fd);
	if (j.rep.fd >= 0)
		close(j.rep.fd);
	feed_close(&j.in);
	proto_reader_free(&j.rd);
	close(j.sfd);
	if (j.tfd >= 0)
		close(j.tfd);
	/* Back to blocking for the rest of the conversation. */
	fcntl(cfg.ctl, F_SETFL, fcntl(cfg.ctl, F_GETFL) & ~O_NONBLOCK);
	if (!err)
		husk_event(HUSK_EV_JOB_ENDED);
	return err;
}
