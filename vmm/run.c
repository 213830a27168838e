/*
 * run: `husk run`, the job life cycle on the host side. See run.h.
 *
 * The main thread is the job's event loop: it accepts guest-init's control
 * connection (bridged by the vsock device to a Unix socket in a private
 * directory), speaks the protocol of docs/protocol.md, forwards stdin and
 * output, enforces a host-side deadline and reacts to signals. Everything
 * the guest sends is checked; a guest that misbehaves ends the run as a VM
 * failure, never as a crash or a hang.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "config.h"
#include "egress.h"
#include "json.h"
#include "netlink.h"
#include "netpool.h"
#include "proto.h"
#include "run.h"
#include "tap.h"
#include "tar.h"
#include "util.h"

#ifndef HUSK_IMAGE_DIR
#define HUSK_IMAGE_DIR "/usr/local/share/husk/images"
#endif
#define BOOT_ALLOWANCE_US (60ull * 1000000)	/* boot + teardown beyond --timeout */
#define PVM_BOOT_ALLOWANCE_US (1800ull * 1000000)
#define DONE_GRACE_US (5ull * 1000000)
#define CHUNK (64 * 1024)
#define NET_LOCK_DIR "/run/husk/net"
#define NET_SLOTS 1024

enum run_state { S_CONNECT, S_HELLO, S_RUNNING, S_FILES_OUT, S_DONE };

struct get_dir {
	int dirfd;			/* the user's target directory */
	int tmpfd;			/* private staging directory inside it */
	char tmpname[64];
	struct tar_extract *x;
};

struct run {
	const struct run_opts *o;
	struct run_result *r;
	struct vm *vm;
	char dir[PATH_MAX];		/* private runtime directory */
	char uds[PATH_MAX];		/* vsock device socket */
	char ctl_path[PATH_MAX];	/* where guest-init's connection arrives */
	int lfd, cfd, sfd, in_fd;
	struct proto_reader rd;
	enum run_state state;
	unsigned get_idx;
	struct get_dir gets[RUN_MAX_GETS];
	uint64_t deadline, done_at;
	int sig;
	/* --net egress */
	int slot_fd;			/* flock'ed NET_LOCK_DIR/<slot>.lock */
	int tap_fd;			/* until the VM owns it */
	int ifindex;			/* 0: no tap */
	bool egress_on;			/* filter attached to ifindex */
	char ifname[IFNAMSIZ];
	struct netpool_lease lease;
};

/* ---- default images ---- */

static int find_image(const char *given, const char *env, const char *name,
		      char *out, size_t len)
{
	char exe[PATH_MAX], *slash;
	ssize_t n;
	const char *e = getenv(env);

	if (given || (e && *e)) {
		snprintf(out, len, "%s", given ? given : e);
		return 0;
	}
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n > 0) {
		exe[n] = '\0';
		slash = strrchr(exe, '/');
		if (slash) {
			*slash = '\0';
			snprintf(out, len, "%s/images/%s", exe, name);
			if (access(out, R_OK) == 0)
				return 0;
		}
	}
	snprintf(out, len, "%s/%s", HUSK_IMAGE_DIR, name);
	if (access(out, R_OK) == 0)
		return 0;
	return husk_seterr(ENOENT, "no default %s: build it with 'make images' in the husk "
			   "build tree, or pass it explicitly (or set %s)", name, env);
}

/* ---- --net egress: slot, tap, host address, filter ---- */

/*
 * The first free slot: one lock file per slot, held with flock for the
 * life of the run, so a crashed husk frees its slot with its last fd.
 */
static int net_lock_slot(struct run *R)
{
	char path[64];
	unsigned i;
	int fd;

	if ((mkdir("/run/husk", 0755) && errno != EEXIST) ||
	    (mkdir(NET_LOCK_DIR, 0700) && errno != EEXIST))
		return husk_seterr(errno, "cannot create %s: %s (--net needs root)",
				   NET_LOCK_DIR, strerror(errno));
	for (i = 0; i < NET_SLOTS; i++) {
		snprintf(path, sizeof(path), NET_LOCK_DIR "/%u.lock", i);
		fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd < 0)
			return husk_seterr(errno, "cannot open %s: %s", path, strerror(errno));
		if (!flock(fd, LOCK_EX | LOCK_NB)) {
			R->slot_fd = fd;
			return i;
		}
		close(fd);
	}
	return husk_seterr(EBUSY, "all %d network slots are in use", NET_SLOTS);
}

/* The filter fired for a VM: kill ours if it is this one. */
static void on_egress_event(const struct egress_event *ev, void *opaque)
{
	struct run *R = opaque;
	const struct run_opts *o = R->o;
	char *a = R->r->anomaly;
	size_t len = sizeof(R->r->anomaly), n;

	if (!R->ifindex || (int)ev->ifindex != R->ifindex || a[0])
		return;
	n = snprintf(a, len, "killed: egress anomaly (");
	if (ev->what & EGRESS_ANOM_CONNS)
		n += snprintf(a + n, n < len ? len - n : 0,
			      "new connections %llu in 1000 ms > %llu; ",
			      (unsigned long long)ev->window_conns,
			      (unsigned long long)o->conn_rate);
	if ((ev->what & EGRESS_ANOM_BYTES_TOTAL) && n < len)
		n += snprintf(a + n, len - n, "bytes out %llu > %llu; ",
			      (unsigned long long)ev->total_bytes,
			      (unsigned long long)o->egress_limit);
	if ((ev->what & EGRESS_ANOM_BYTES_WINDOW) && n < len)
		n += snprintf(a + n, len - n, "bytes out %llu in one window; ",
			      (unsigned long long)ev->window_bytes);
	if ((ev->what & EGRESS_ANOM_DSTS) && n < len)
		n += snprintf(a + n, len - n, "distinct destinations %llu; ",
			      (unsigned long long)ev->distinct_dsts);
	if (n >= 2 && n < len && a[n - 2] == ';')
		n -= 2;
	if (n < len)
		snprintf(a + n, len - n, ")");
	snprintf(R->r->error, sizeof(R->r->error), "%s", a);
	vm_stop(R->vm, VM_STOP_HOST_ERROR, 0, "%s", a);
}

static int net_setup(struct run *R, struct vm_config *cfg)
{
	const struct run_opts *o = R->o;
	struct egress_policy pol;
	struct netpool pool;
	char name[IFNAMSIZ];
	unsigned i;
	int slot, fd, err;

	slot = net_lock_slot(R);
	if (slot < 0)
		return slot;
	err = netpool_parse(NETPOOL_DEFAULT, &pool);
	if (!err)
		err = netpool_lease(&pool, slot, &R->lease);
	if (err)
		return husk_seterr(err, "no addresses for network slot %d", slot);
	snprintf(name, sizeof(name), "husk%d", slot);
	fd = tap_open(name, R->ifname);
	if (fd < 0)
		return fd;
	/* A zeroed vm_config means "no NIC" with fd 0: keep the tap above stdio. */
	if (fd <= STDERR_FILENO) {
		int nfd = fcntl(fd, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);

		close(fd);
		if (nfd < 0)
			return husk_seterr(errno, "dup of the tap fd: %s", strerror(errno));
		fd = nfd;
	}
	R->tap_fd = fd;
	err = netlink_ifindex(R->ifname);
	if (err < 0)
		return err;
	R->ifindex = err;
	/* Host end .1, point-to-point to the guest's .2. */
	err = netlink_addr_add(R->ifindex, AF_INET, &R->lease.host, R->lease.prefixlen,
			       &R->lease.guest);
	if (!err)
		err = netlink_link_up(R->ifindex);
	if (!err)
		err = egress_open();
	if (err)
		return err;
	memset(&pol, 0, sizeof(pol));
	memcpy(pol.guest_mac, R->lease.mac, sizeof(pol.guest_mac));
	pol.guest_ip4 = R->lease.guest;
	pol.gateway_ip4 = R->lease.host;
	pol.window_ms = 1000;
	pol.max_conns_window = o->conn_rate > UINT32_MAX ? UINT32_MAX : (uint32_t)o->conn_rate;
	pol.max_bytes_total = o->egress_limit;
	err = egress_set_event_cb(on_egress_event, R);
	if (err)
		return err;
	err = egress_attach(R->ifindex, &pol);
	if (err)
		return err;
	R->egress_on = true;
	R->r->net = true;
	for (i = 0; i < o->nr_allow; i++) {
		const struct run_allow *a = &o->allow[i];

		err = egress_allow_cidr(R->ifindex, AF_INET, &a->addr, a->prefixlen, a->protos,
					a->ports, a->nports);
		if (err)
			return err;
	}
	husk_debug("net: slot %d, %s, guest %s", slot, R->ifname, inet_ntoa(R->lease.guest));
	/* The VM owns the tap from vm_create on. */
	cfg->net_tap_fd = R->tap_fd;
	memcpy(cfg->net_mac, R->lease.mac, sizeof(cfg->net_mac));
	R->tap_fd = -1;
	return 0;
}

/* After vm_destroy (the tap's last fd is gone, so is the interface). */
static void net_teardown(struct run *R)
{
	if (R->egress_on) {
		R->r->net_counters = !egress_read_counters(R->ifindex, &R->r->net_ctr);
		if (egress_detach(R->ifindex))
			husk_msg("warning: %s", husk_lasterr());
	}
	if (R->tap_fd >= 0)
		close(R->tap_fd);
	if (R->slot_fd >= 0)
		close(R->slot_fd);	/* unlocks the slot */
	R->tap_fd = R->slot_fd = -1;
}

/* ---- files out: staging directories committed only on success ---- */

static void rm_tree_at(int parent, const char *name)
{
	int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d;
	struct dirent *de;

	if (fd >= 0 && (d = fdopendir(fd))) {
		while ((de = readdir(d)))
			if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
				rm_tree_at(dirfd(d), de->d_name);
		closedir(d);
		unlinkat(parent, name, AT_REMOVEDIR);
		return;
	}
	if (fd >= 0)
		close(fd);
	unlinkat(parent, name, 0);
}

static int open_get_dirs(struct run *R)
{
	unsigned i;

	for (i = 0; i < R->o->nr_get; i++) {
		struct get_dir *g = &R->gets[i];

		g->dirfd = open(R->o->get[i].host, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (g->dirfd < 0)
			return husk_seterr(errno, "--get target %s: %s (it must be an existing "
					   "directory)", R->o->get[i].host, strerror(errno));
		snprintf(g->tmpname, sizeof(g->tmpname), ".husk-get-%d-%u", (int)getpid(), i);
		if (mkdirat(g->dirfd, g->tmpname, 0700) < 0)
			return husk_seterr(errno, "cannot create a staging directory in %s: %s",
					   R->o->get[i].host, strerror(errno));
		g->tmpfd = openat(g->dirfd, g->tmpname, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
				  O_CLOEXEC);
		if (g->tmpfd < 0)
			return husk_seterr(errno, "cannot open the staging directory in %s: %s",
					   R->o->get[i].host, strerror(errno));
	}
	return 0;
}

/* Move every staged entry into place, or nothing if any name is taken. */
static int commit_get(struct run *R, unsigned i)
{
	struct get_dir *g = &R->gets[i];
	struct dirent *de;
	struct stat st;
	int fd, err = 0, pass;
	DIR *d;

	for (pass = 0; pass < 2 && !err; pass++) {
		fd = dup(g->tmpfd);
		d = fd >= 0 ? fdopendir(fd) : NULL;
		if (!d)
			return husk_seterr(errno, "cannot read the staging directory");
		rewinddir(d);
		while (!err && (de = readdir(d))) {
			if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
				continue;
			if (pass == 0 && fstatat(g->dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0)
				err = husk_seterr(EEXIST, "--get would overwrite %s/%s; nothing was "
						  "copied", R->o->get[i].host, de->d_name);
			else if (pass == 1 && renameat2(g->tmpfd, de->d_name, g->dirfd, de->d_name,
							RENAME_NOREPLACE) < 0)
				err = husk_seterr(errno, "cannot move %s into %s: %s", de->d_name,
						  R->o->get[i].host, strerror(errno));
		}
		closedir(d);
	}
	return err;
}

static void close_gets(struct run *R, bool commit)
{
	unsigned i;
	int err = 0;

	for (i = 0; i < R->o->nr_get; i++) {
		struct get_dir *g = &R->gets[i];

		if (g->x)
			tar_extract_free(g->x);
		g->x = NULL;
		if (commit && !err && g->tmpfd >= 0) {
			err = commit_get(R, i);
			if (err)
				husk_msg("%s", husk_lasterr());
		}
	}
	for (i = 0; i < R->o->nr_get; i++) {
		struct get_dir *g = &R->gets[i];

		if (g->tmpfd >= 0)
			close(g->tmpfd);
		if (g->dirfd >= 0) {
			rm_tree_at(g->dirfd, g->tmpname);
			close(g->dirfd);
		}
		g->tmpfd = g->dirfd = -1;
	}
	R->r->files_committed = commit && !err && R->o->nr_get;
}

/* ---- control channel ---- */

static int listen_ctl(struct run *R)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };

	if (strlen(R->ctl_path) >= sizeof(a.sun_path))
		return husk_seterr(ENAMETOOLONG, "runtime path %s is too long", R->ctl_path);
	strcpy(a.sun_path, R->ctl_path);
	R->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (R->lfd < 0 || bind(R->lfd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    listen(R->lfd, 1) < 0)
		return husk_seterr(errno, "cannot listen on %s: %s", R->ctl_path, strerror(errno));
	return 0;
}

/* Send one frame; proto_send bounds the wait on this non-blocking socket. */
static int ctl_send(struct run *R, uint16_t type, const void *p, uint32_t len)
{
	if (proto_send(R->cfd, type, p, len))
		return husk_seterr(EPIPE, "the guest stopped reading its control channel (%s)",
				   husk_lasterr());
	return 0;
}

static int send_files_chunk(void *arg, const void *buf, size_t len)
{
	struct run *R = arg;

	return ctl_send(R, P_FILES_IN, buf, len);
}

static int send_job(struct run *R)
{
	const struct run_opts *o = R->o;
	uint8_t seed[64];
	struct tlv_buf b;
	unsigned i;
	int err;

	tlv_init(&b);
	for (i = 0; i < (unsigned)o->argc; i++)
		tlv_put_str(&b, T_JOB_ARG, o->argv[i]);
	for (i = 0; i < o->nr_env; i++)
		tlv_put_str(&b, T_JOB_ENV, o->env[i]);
	tlv_put_u64(&b, T_JOB_TIMEOUT_MS, o->timeout_sec * 1000);
	tlv_put_u32(&b, T_JOB_WORKSPACE_MIB, o->workspace_mib);
	tlv_put_u64(&b, T_JOB_CLOCK_NS, wall_us() * 1000);
	if (getrandom(seed, sizeof(seed), 0) == sizeof(seed))
		tlv_put(&b, T_JOB_RNG_SEED, seed, sizeof(seed));
	tlv_put_u8(&b, T_JOB_STDIN, o->stdin);
	tlv_put_u8(&b, T_JOB_FILES_IN, o->nr_put);
	for (i = 0; i < o->nr_get; i++)
		tlv_put_str(&b, T_JOB_GET, o->get[i].guest);
	if (R->r->net) {
		/* Addresses in network order, as the in_addr holds them. */
		tlv_put_u32(&b, T_JOB_NET_ADDR, R->lease.guest.s_addr);
		tlv_put_u32(&b, T_JOB_NET_GW, R->lease.host.s_addr);
		tlv_put_u8(&b, T_JOB_NET_PREFIX, R->lease.prefixlen);
	}
	if (b.failed) {
		tlv_free(&b);
		return husk_seterr(E2BIG, "the job description is too large");
	}
	err = ctl_send(R, P_JOB, b.data, b.len);
	tlv_free(&b);
	/* Each --put is its own gzip'd tar stream, ended by an empty chunk. */
	for (i = 0; !err && i < o->nr_put; i++) {
		err = tar_create(o->put[i].host, o->put[i].guest, send_files_chunk, R);
		if (err)
			husk_seterr(err, "--put %s: %s", o->put[i].host, husk_lasterr());
		else
			err = ctl_send(R, P_FILES_IN, NULL, 0);
	}
	return err;
}

/*
 * Pass job output through up to --max-output bytes per stream; past that
 * it is counted, not written, and one marker line says so.
 */
static void forward_output(struct run *R, bool out, const uint8_t *p, uint32_t len)
{
	struct run_result *r = R->r;
	uint64_t *seen = out ? &r->stdout_bytes : &r->stderr_bytes;
	uint64_t *dropped = out ? &r->stdout_dropped : &r->stderr_dropped;
	int fd = out ? STDOUT_FILENO : STDERR_FILENO;
	uint64_t room = *seen < R->o->max_output ? R->o->max_output - *seen : 0;
	uint32_t n = len < room ? len : (uint32_t)room;

	write_best_effort(fd, p, n);
	*seen += len;
	if (n < len) {
		char marker[160];

		if (!*dropped) {
			snprintf(marker, sizeof(marker), "\n[husk: %s exceeded %llu bytes; the rest "
				 "is dropped and counted]\n", out ? "stdout" : "stderr",
				 (unsigned long long)R->o->max_output);
			write_best_effort(fd, marker, strlen(marker));
		}
		*dropped += len - n;
	}
}

static int parse_exit(struct run *R, const uint8_t *p, uint32_t len)
{
	struct run_result *r = R->r;
	struct tlv_iter it;
	struct tlv t;
	uint32_t v32;
	uint8_t v8;
	int n;

	tlv_iter_init(&it, p, len);
	while ((n = tlv_next(&it, &t)) == 1) {
		switch (t.tag) {
		case T_EXIT_CODE:
			if (tlv_u32(&t, &v32) || v32 > 255)
				return -EINVAL;
			r->job_code = v32;
			break;
		case T_EXIT_SIGNAL:
			if (tlv_u32(&t, &v32) || v32 == 0 || v32 > 64)
				return -EINVAL;
			r->job_signal = v32;
			break;
		case T_EXIT_TIMED_OUT:
			if (tlv_u8(&t, &v8))
				return -EINVAL;
			r->timed_out = v8;
			break;
		case T_EXIT_USER_US:
			if (tlv_u64(&t, &r->user_us))
				return -EINVAL;
			break;
		case T_EXIT_SYS_US:
			if (tlv_u64(&t, &r->sys_us))
				return -EINVAL;
			break;
		case T_EXIT_MAXRSS_KIB:
			if (tlv_u64(&t, &r->maxrss_kib))
				return -EINVAL;
			break;
		default:
			break;	/* newer guest-init fields are ignored */
		}
	}
	return n;
}

static int64_t since_start(struct run *R)
{
	return (int64_t)(now_us() - R->vm->t.start);
}

static int fail(struct run *R, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct run *R, const char *fmt, ...)
{
	va_list ap;

	if (!R->r->error[0]) {
		va_start(ap, fmt);
		vsnprintf(R->r->error, sizeof(R->r->error), fmt, ap);
		va_end(ap);
	}
	vm_stop(R->vm, VM_STOP_HOST_ERROR, 0, "%s", R->r->error);
	return -EPROTO;
}

/* Handle one frame: <0 ends the run as a failure, 1 ends the conversation. */
static int on_frame(struct run *R, const struct proto_hdr *h, uint8_t *p)
{
	struct run_result *r = R->r;
	struct get_dir *g;

	switch (h->type) {
	case P_HELLO:
		if (R->state != S_HELLO)
			return fail(R, "guest sent HELLO twice");
		R->state = S_RUNNING;
		if (send_job(R))
			return fail(R, "cannot send the job: %s", husk_lasterr());
		return 0;
	case P_STARTED:
		if (R->state != S_RUNNING || r->job_started)
			return fail(R, "guest sent STARTED out of order");
		r->job_started = true;
		r->t_job_start = since_start(R);
		return 0;
	case P_STDOUT:
	case P_STDERR:
		if (R->state != S_RUNNING)
			return fail(R, "guest sent output after the job ended");
		forward_output(R, h->type == P_STDOUT, p, h->len);
		return 0;
	case P_EXIT:
		if (R->state != S_RUNNING || r->job_exited)
			return fail(R, "guest sent EXIT out of order");
		if (parse_exit(R, p, h->len) < 0)
			return fail(R, "guest sent a malformed EXIT record");
		r->job_exited = true;
		r->t_job_end = since_start(R);
		R->state = R->o->nr_get ? S_FILES_OUT : S_DONE;
		return 0;
	case P_FILES_OUT:
		if (R->state != S_FILES_OUT || R->get_idx >= R->o->nr_get)
			return fail(R, "guest sent files that were not asked for");
		g = &R->gets[R->get_idx];
		if (!g->x) {
			struct tar_limits lim = { TAR_DEFAULT_MAX_BYTES, TAR_DEFAULT_MAX_ENTRIES, 0 };

			g->x = tar_extract_new(g->tmpfd, &lim);
			if (!g->x)
				return fail(R, "out of memory for --get");
		}
		if (h->len && tar_extract_feed(g->x, p, h->len) < 0)
			return fail(R, "--get %s: %s", R->o->get[R->get_idx].guest, husk_lasterr());
		if (!h->len) {
			if (tar_extract_finish(g->x) < 0)
				return fail(R, "--get %s: %s", R->o->get[R->get_idx].guest,
					    husk_lasterr());
			if (++R->get_idx == R->o->nr_get)
				R->state = S_DONE;
		}
		return 0;
	case P_DONE:
		if (R->state != S_DONE)
			return fail(R, "guest finished before the job's results were complete");
		R->done_at = now_us();
		/* Closing tells guest-init everything arrived: it powers off now. */
		return 1;
	case P_ERROR: {
		char msg[256];
		size_t n = h->len < sizeof(msg) - 1 ? h->len : sizeof(msg) - 1;
		size_t i;

		memcpy(msg, p, n);
		msg[n] = '\0';
		for (i = 0; i < n; i++)
			if ((unsigned char)msg[i] < 0x20)
				msg[i] = ' ';
		fail(R, "guest-init: %s", msg);
		return 1;
	}
	default:
		return fail(R, "guest sent an unexpected frame (type %u)", h->type);
	}
}

static void on_ctl_readable(struct run *R)
{
	struct proto_hdr h;
	uint8_t *p;
	int n;

	while ((n = proto_reader_read(&R->rd, R->cfd, &h, &p)) == 1) {
		n = on_frame(R, &h, p);
		free(p);
		if (n < 0)
			return;
		if (n == 1) {		/* conversation over */
			close(R->cfd);
			R->cfd = -1;
			return;
		}
	}
	if (n == -EPIPE || n == -EPROTO) {
		close(R->cfd);
		R->cfd = -1;
		if (R->state != S_DONE || !R->done_at)
			fail(R, n == -EPIPE ? "guest-init closed the control channel early"
					    : "guest-init sent a malformed frame");
	}
}

static void on_accept(struct run *R)
{
	int fd = accept4(R->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

	if (fd < 0)
		return;
	close(R->lfd);
	R->lfd = -1;
	R->cfd = fd;
	R->state = S_HELLO;
	R->r->t_init = R->vm->t.event[HUSK_EV_INIT] ?
		(int64_t)(R->vm->t.event[HUSK_EV_INIT] - R->vm->t.start) : since_start(R);
}

static void on_stdin(struct run *R)
{
	uint8_t buf[CHUNK];
	ssize_t n = read(R->in_fd, buf, sizeof(buf));

	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		ctl_send(R, P_STDIN, NULL, 0);
		R->in_fd = -1;
		return;
	}
	if (ctl_send(R, P_STDIN, buf, n))
		fail(R, "%s", husk_lasterr());
}

static void event_loop(struct run *R)
{
	for (;;) {
		bool want_in = R->in_fd >= 0 && R->cfd >= 0 && R->r->job_started &&
			       R->state == S_RUNNING;
		struct pollfd p[6] = {
			{ .fd = R->vm->stop_fd, .events = POLLIN },
			{ .fd = R->sfd, .events = POLLIN },
			{ .fd = R->lfd, .events = POLLIN },
			{ .fd = R->cfd, .events = POLLIN },
			{ .fd = want_in ? R->in_fd : -1, .events = POLLIN },
			{ .fd = R->egress_on ? egress_events_fd() : -1, .events = POLLIN },
		};
		uint64_t now;
		int r;

		if (p[5].fd < 0)
			p[5].fd = -1;
		r = poll(p, 6, 20);

		if (r < 0 && errno != EINTR) {
			fail(R, "poll: %s", strerror(errno));
			break;
		}
		console_flush(&R->vm->console);
		if (p[0].revents & POLLIN) {
			/* Take whatever the guest sent before it stopped. */
			if (R->cfd >= 0)
				on_ctl_readable(R);
			break;
		}
		if (p[1].revents & POLLIN) {
			struct signalfd_siginfo si;

			if (read(R->sfd, &si, sizeof(si)) == sizeof(si)) {
				R->sig = si.ssi_signo;
				vm_stop(R->vm, VM_STOP_SIGNAL, 0, "stopped by signal %d (%s)",
					R->sig, strsignal(R->sig));
			}
			continue;
		}
		if (p[2].revents & POLLIN)
			on_accept(R);
		if (p[3].revents & (POLLIN | POLLHUP | POLLERR))
			on_ctl_readable(R);
		if (p[4].revents & (POLLIN | POLLHUP | POLLERR))
			on_stdin(R);
		if (p[5].revents & POLLIN) {
			if (egress_events_poll() < 0)
				husk_msg("warning: %s", husk_lasterr());
			if (R->r->anomaly[0])
				continue;	/* the stop_fd ends the loop */
		}
		now = now_us();
		if (now >= R->deadline)
			vm_stop(R->vm, VM_STOP_TIMEOUT, 0, "the guest did not finish within "
				"--timeout plus the boot allowance");
		if (R->done_at && now - R->done_at > DONE_GRACE_US)
			vm_stop(R->vm, VM_STOP_POWEROFF, 0, "guest-init finished but did not "
				"power off; stopped by husk");
	}
}

/* ---- the run ---- */

static int setup(struct run *R, uint64_t start)
{
	const struct run_opts *o = R->o;
	char kernel[PATH_MAX], rootfs[PATH_MAX];
	struct vm_config cfg;
	const char *tmp = getenv("TMPDIR");
	int fd, err;

	err = find_image(o->kernel, "HUSK_KERNEL", "vmlinux", kernel, sizeof(kernel));
	if (!err)
		err = find_image(o->rootfs, "HUSK_ROOTFS", "rootfs.ext4", rootfs, sizeof(rootfs));
	if (err)
		return err;
	err = open_get_dirs(R);
	if (err)
		return err;
	snprintf(R->dir, sizeof(R->dir), "%s/husk-run-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(R->dir)) {
		R->dir[0] = '\0';
		return husk_seterr(errno, "cannot create a runtime directory: %s", strerror(errno));
	}
	snprintf(R->uds, sizeof(R->uds), "%s/vsock", R->dir);
	snprintf(R->ctl_path, sizeof(R->ctl_path), "%s_%u", R->uds, PROTO_VSOCK_PORT);
	err = listen_ctl(R);
	if (err)
		return err;

	R->sfd = stop_signalfd();

	fd = -1;
	if (o->console) {
		fd = open(o->console, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY, 0644);
		if (fd < 0)
			return husk_seterr(errno, "cannot open console file %s: %s", o->console,
					   strerror(errno));
	}
	memset(&cfg, 0, sizeof(cfg));
	cfg.net_tap_fd = -1;
	if (o->net == RUN_NET_EGRESS) {
		err = net_setup(R, &cfg);
		if (err) {
			if (fd >= 0)
				close(fd);
			return err;
		}
	}
	cfg.kernel_path = kernel;
	cfg.rootfs_path = rootfs;
	cfg.rng = true;
	cfg.vsock_uds = R->uds;
	cfg.guest_cid = RUN_GUEST_CID;
	cfg.cmdline = RUN_CMDLINE;
	cfg.mem_bytes = o->mem_mib << 20;
	cfg.nr_vcpus = o->vcpus;
	cfg.console_fd = fd;
	err = vm_create(R->vm, &cfg, start);
	if (!err)
		err = vm_start(R->vm);
	if (err)
		return err;
	if (R->vm->kvm.pvm)
		husk_msg("warning: this host's KVM is PVM: guest kernel code is emulated and "
			 "booting takes minutes; use hardware KVM for real work");
	R->deadline = start + o->timeout_sec * 1000000u +
		      (R->vm->kvm.pvm ? PVM_BOOT_ALLOWANCE_US : BOOT_ALLOWANCE_US);
	return 0;
}

static int exit_status(struct run *R)
{
	struct run_result *r = R->r;

	if (r->timed_out)
		return RUN_EXIT_TIMEOUT;
	if (r->job_exited && !r->error[0])
		return r->job_signal ? 128 + r->job_signal : r->job_code;
	switch (r->reason) {
	case VM_STOP_TIMEOUT:
		return RUN_EXIT_TIMEOUT;
	case VM_STOP_SIGNAL:
		return 128 + R->sig;
	default:
		return RUN_EXIT_FAILURE;
	}
}

int run_job(const struct run_opts *o, uint64_t start, struct run_result *r)
{
	struct run R;
	unsigned i;
	int err;

	memset(r, 0, sizeof(*r));
	memset(&R, 0, sizeof(R));
	R.o = o;
	R.r = r;
	R.lfd = R.cfd = R.sfd = R.slot_fd = R.tap_fd = -1;
	R.in_fd = o->stdin ? STDIN_FILENO : -1;
	for (i = 0; i < RUN_MAX_GETS; i++)
		R.gets[i].dirfd = R.gets[i].tmpfd = -1;
	r->t_first_run = r->t_init = r->t_job_start = r->t_job_end = r->t_exit = -1;
	r->start_epoch_us = wall_us() - (now_us() - start);
	proto_reader_init(&R.rd);
	R.vm = calloc(1, sizeof(*R.vm));
	if (!R.vm)
		return husk_seterr(ENOMEM, "out of memory");

	err = setup(&R, start);
	if (err) {
		snprintf(r->error, sizeof(r->error), "%s", husk_lasterr());
		vm_stop(R.vm, VM_STOP_HOST_ERROR, 0, "%s", r->error);
	} else {
		event_loop(&R);
	}
	vm_destroy(R.vm);
	net_teardown(&R);
	r->reason = R.vm->reason;
	if (R.vm->t.first_run)
		r->t_first_run = R.vm->t.first_run - start;
	if (R.vm->t.exit)
		r->t_exit = R.vm->t.exit - start;
	if (r->t_init < 0 && R.vm->t.event[HUSK_EV_INIT])
		r->t_init = R.vm->t.event[HUSK_EV_INIT] - start;
	if (!r->error[0] && !r->job_exited && R.vm->reason != VM_STOP_SIGNAL &&
	    R.vm->reason != VM_STOP_TIMEOUT)
		snprintf(r->error, sizeof(r->error), "the VM stopped before the job finished: %s",
			 R.vm->detail);
	if (R.vm->reason == VM_STOP_TIMEOUT && !r->job_exited)
		r->timed_out = true;

	r->exit_code = exit_status(&R);
	close_gets(&R, r->job_exited && !r->error[0] &&
		   (o->get_always || (r->exit_code == 0 && !r->timed_out)));
	proto_reader_free(&R.rd);
	if (R.cfd >= 0)
		close(R.cfd);
	if (R.lfd >= 0)
		close(R.lfd);
	if (R.sfd >= 0)
		close(R.sfd);
	if (R.vm->console.fd >= 0)
		close(R.vm->console.fd);
	if (R.dir[0]) {
		unlink(R.ctl_path);
		unlink(R.uds);
		rmdir(R.dir);
	}
	free(R.vm);
	r->t_teardown = now_us() - start;
	return r->exit_code;
}

void run_print_json(const struct run_result *r)
{
	FILE *f = stdout;

	fprintf(f, "{\"exit_code\":%d,\"job\":{\"started\":%s,\"exited\":%s,", r->exit_code,
		r->job_started ? "true" : "false", r->job_exited ? "true" : "false");
	if (r->job_exited && !r->job_signal)
		fprintf(f, "\"exit\":%d,\"signal\":null,", r->job_code);
	else if (r->job_exited)
		fprintf(f, "\"exit\":null,\"signal\":%d,", r->job_signal);
	else
		fprintf(f, "\"exit\":null,\"signal\":null,");
	fprintf(f, "\"timed_out\":%s,\"cpu_user_us\":%llu,\"cpu_sys_us\":%llu,"
		"\"peak_rss_kib\":%llu},", r->timed_out ? "true" : "false",
		(unsigned long long)r->user_us, (unsigned long long)r->sys_us,
		(unsigned long long)r->maxrss_kib);
	fprintf(f, "\"vm_stop\":\"%s\",\"error\":", vm_reason_name(r->reason));
	if (r->error[0])
		json_string(f, r->error);
	else
		fputs("null", f);
	fprintf(f, ",\"bytes\":{\"stdout\":%llu,\"stderr\":%llu,\"stdout_dropped\":%llu,"
		"\"stderr_dropped\":%llu},\"files_committed\":%s,"
		"\"start_epoch_us\":%llu,\"timings_us\":{\"process_start\":0,"
		"\"first_kvm_run\":%lld,\"init\":%lld,\"job_start\":%lld,\"job_end\":%lld,"
		"\"vm_exit\":%lld,\"teardown\":%lld}",
		(unsigned long long)r->stdout_bytes, (unsigned long long)r->stderr_bytes,
		(unsigned long long)r->stdout_dropped, (unsigned long long)r->stderr_dropped,
		r->files_committed ? "true" : "false", (unsigned long long)r->start_epoch_us,
		(long long)r->t_first_run, (long long)r->t_init, (long long)r->t_job_start,
		(long long)r->t_job_end, (long long)r->t_exit, (long long)r->t_teardown);
	if (r->net) {
		const struct egress_counters *c = &r->net_ctr;
		unsigned i;

		/* Counters are null when the filter could not be read. */
		fputs(",\"network\":{\"mode\":\"egress\",\"anomaly\":", f);
		if (r->anomaly[0])
			json_string(f, r->anomaly);
		else
			fputs("null", f);
		if (r->net_counters) {
			fprintf(f, ",\"packets_out\":%llu,\"bytes_out\":%llu,\"drops\":%llu,"
				"\"drops_by_reason\":{", (unsigned long long)c->packets,
				(unsigned long long)c->bytes, (unsigned long long)c->dropped);
			for (i = 0; i < EGRESS_DROP__MAX; i++)
				fprintf(f, "%s\"%s\":%llu", i ? "," : "", egress_reason_name(i),
					(unsigned long long)c->drops[i]);
			fputs("}}", f);
		} else {
			fputs(",\"packets_out\":null,\"bytes_out\":null,\"drops\":null,"
			      "\"drops_by_reason\":null}", f);
		}
	}
	fputs("}\n", f);
	fflush(f);
}
