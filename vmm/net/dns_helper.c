/*
 * dns_helper: the DNS proxy's own confined process and the supervisor's
 * end of its learn channel. See dns_helper.h.
 *
 * The order in the child is what makes the confinement hold: the sockets
 * were made by the supervisor (port 53 needs privilege), the proxy's
 * tables and fds are set up next, then jail_enter() drops every privilege
 * and seccomp takes away every system call the proxy does not make. Only
 * then does the first guest byte get read.
 */
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "net/dns_helper.h"
#include "machine/evloop.h"
#include "sandbox/jail.h"
#include "sandbox/seccomp.h"
#include "lib/util.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

_Static_assert(sizeof(struct dns_wire) == 36, "struct dns_wire has no holes");

int (*dns_helper_test_child)(int ctl_fd);

/* Written by the helper, read by the supervisor only once it is dead. */
struct dns_helper_shared {
	struct dns_proxy_stats st;
	uint32_t nrefused;
	char refused[DNS_PROXY_REFUSED_KEEP][DNS_HELPER_NAME_MAX];
	char error[256];		/* why it could not start */
	char seccomp_report[256];	/* its SIGSYS handler's message */
};

enum { EV_CTL = 1, EV_EXIT, EV_TICK };

struct dns_helper {
	pid_t pid;			/* 0 once reaped */
	int pidfd, ctl, ep, tick_fd;
	bool dead;			/* killed or exited: no more messages */
	uint16_t port;
	struct dns_helper_shared *sh;
	dns_helper_learn_fn learn;
	dns_helper_tick_fn tick;
	void *arg;
	uint64_t granted, denied;
	char fault[256];
};

/* Bytes from the helper: cut to cap, NUL-terminated, printable. */
static void clean_text(char *dst, const char *src, size_t cap, bool spaces)
{
	size_t i;

	for (i = 0; i + 1 < cap && src[i]; i++) {
		unsigned char c = (unsigned char)src[i];

		dst[i] = (c > 0x20 && c < 0x7f) || (spaces && c == ' ') ? (char)c : '?';
	}
	dst[i] = '\0';
}

/* ---- the helper process ---- */

struct child {
	int ctl;
	struct dns_proxy *proxy;
};

static int send_wire(int fd, const struct dns_wire *m, int flags)
{
	ssize_t n = send(fd, m, sizeof(*m), flags | MSG_NOSIGNAL);

	if (n == (ssize_t)sizeof(*m))
		return 0;
	return n < 0 ? -errno : -EMSGSIZE;
}

/* The proxy's learn function: one request to the supervisor, answer later. */
static int child_learn(void *arg, uint32_t tag, const char *name, const struct dns_addr *a)
{
	struct child *c = arg;
	struct dns_wire m = { .type = DNS_WIRE_LEARN, .seq = tag, .ttl = a->ttl };

	m.family = a->family == AF_INET6 ? 6 : 4;
	memcpy(m.addr, a->addr, m.family == 6 ? 16 : 4);
	/* Never wait for the supervisor: a full channel refuses the answer. */
	return send_wire(c->ctl, &m, MSG_DONTWAIT);
}

static void child_on_ctl(void *arg, uint32_t events)
{
	struct child *c = arg;
	struct dns_wire m;
	unsigned i;

	for (i = 0; i < DNS_HELPER_BATCH; i++) {
		ssize_t n = recv(c->ctl, &m, sizeof(m), MSG_DONTWAIT);

		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n <= 0)
			_exit(0);	/* the supervisor is gone or done with us */
		if (n == (ssize_t)sizeof(m) && m.type == DNS_WIRE_ACK)
			dns_proxy_learned(c->proxy, m.seq, m.status < 0 ? m.status : 0);
	}
}

/* Counts and new refused names into the shared page. */
static void publish(struct dns_helper_shared *sh, struct dns_proxy *p, unsigned *nref)
{
	dns_proxy_get_stats(p, &sh->st);
	while (*nref < DNS_PROXY_REFUSED_KEEP &&
	       !dns_proxy_refused(p, *nref, sh->refused[*nref], DNS_HELPER_NAME_MAX))
		sh->nrefused = ++*nref;
}

/* The highest open fd: RLIMIT_NOFILE must leave room above it. */
static int highest_fd(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int max = 1024;

	if (!d)
		return max;
	max = 2;
	while ((e = readdir(d))) {
		int fd = atoi(e->d_name);

		if (fd > max && fd != dirfd(d))
			max = fd;
	}
	closedir(d);
	return max;
}

/*
 * A forked child holds a copy of the supervisor's memory. Its command line
 * (--env values, paths) and environment are the likeliest secrets in it:
 * find them (/proc/self/stat, fields 48-51, since Linux 3.5) while /proc
 * can be read, wipe them once nothing needs them any more.
 */
struct strings {
	unsigned long start[2], end[2];		/* arguments, environment */
};

static void find_strings(struct strings *w)
{
	char buf[2048], *p;
	FILE *f = fopen("/proc/self/stat", "re");
	size_t n;
	int i;

	memset(w, 0, sizeof(*w));
	if (!f)
		return;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')');	/* the name may hold spaces and parentheses */
	/* ") S ppid ...": the space before field i + 1 is the i-th after ")". */
	for (i = 2; p && i < 48; i++)
		p = strchr(p + 1, ' ');
	if (!p || sscanf(p, " %lu %lu %lu %lu", &w->start[0], &w->end[0], &w->start[1],
			 &w->end[1]) != 4)
		memset(w, 0, sizeof(*w));
}

static void wipe_strings(const struct strings *w)
{
	unsigned i;

	for (i = 0; i < 2; i++)
		if (w->end[i] > w->start[i] && w->end[i] - w->start[i] < (64u << 20))
			memset((void *)w->start[i], 0, w->end[i] - w->start[i]);
	environ = NULL;
}

/* Private writable memory now (data and stack), from /proc/self/statm. */
static rlim_t data_now(void)
{
	unsigned long pages[7];
	FILE *f = fopen("/proc/self/statm", "re");
	int n = 0;

	if (f) {
		n = fscanf(f, "%lu %lu %lu %lu %lu %lu", &pages[0], &pages[1], &pages[2],
			   &pages[3], &pages[4], &pages[5]);
		fclose(f);
	}
	return n == 6 ? (rlim_t)pages[5] * (rlim_t)sysconf(_SC_PAGESIZE) : 0;
}

static int limit(int res, rlim_t v)
{
	struct rlimit rl = { v, v };

	return setrlimit(res, &rl) ? husk_seterr(errno, "dns helper: setrlimit %d: %s", res,
						  strerror(errno)) : 0;
}

/* Past GO: build the proxy, confine ourselves, serve. Returns only on failure. */
static int child_serve(const struct dns_helper_cfg *cfg, struct dns_proxy_socks *s,
		       struct child *c, struct dns_helper_shared *sh)
{
	struct dns_proxy_cfg pc = {
		.allow = cfg->allow, .nallow = cfg->nallow,
		.guest = cfg->guest, .guest_len = cfg->guest_len,
		.upstream = cfg->upstream, .ulen = cfg->ulen,
		.learn = child_learn, .arg = c,
	};
	struct jail_cfg jc = { .root = cfg->root, .uid = cfg->uid, .gid = cfg->gid, .nproc = 1 };
	struct dns_wire ready = { .type = DNS_WIRE_READY };
	struct strings strs;
	struct evloop el;
	unsigned nref = 0;
	int err;

	/* Nothing to lock, queue or map for good: none of it. */
	err = limit(RLIMIT_MEMLOCK, 0);
	if (!err)
		err = limit(RLIMIT_MSGQUEUE, 0);
	if (!err)
		err = evloop_init(&el);
	if (err)
		return err;
	c->proxy = dns_proxy_new(&el, s, &pc);
	if (!c->proxy)
		return -EINVAL;
	find_strings(&strs);
#ifndef HUSK_SANITIZED
	/*
	 * What it has (the supervisor's copy, its tables) plus room for its
	 * TCP answer queues (at most 4 MiB); the cgroup bounds the VM as a
	 * whole. Sanitizer builds map terabytes of shadow: no limit there.
	 */
	err = limit(RLIMIT_DATA, data_now() + (64u << 20));
	if (err)
		return err;
#endif
	if (cfg->query_ms || cfg->idle_ms)
		dns_proxy_set_timeouts(c->proxy, cfg->query_ms ? cfg->query_ms : DNS_PROXY_TIMEOUT_MS,
				       cfg->idle_ms ? cfg->idle_ms : DNS_PROXY_IDLE_MS);
	err = evloop_add(&el, c->ctl, EPOLLIN, child_on_ctl, c);
	if (err)
		return err;
	/* Every TCP connection and one being refused above the fds held now. */
	jc.nofile = highest_fd() + 1 + DNS_PROXY_TCP_MAX + 2;
	err = jail_enter(&jc);
	if (err < 0)
		return err;
	seccomp_set_report(sh->seccomp_report, sizeof(sh->seccomp_report));
	err = seccomp_install(SECCOMP_KIND_DNS_HELPER);
	if (err)
		return err;
	/* The allowlist is copied, HUSK_SECCOMP read: nothing needs them now. */
	wipe_strings(&strs);
	if (send_wire(c->ctl, &ready, 0))
		_exit(0);
	for (;;) {
		if (evloop_run_once(&el, -1) < 0)
			_exit(1);
		publish(sh, c->proxy, &nref);
	}
}

static int child_main(const struct dns_helper_cfg *cfg, struct dns_proxy_socks *s, int ctl,
		      struct dns_helper_shared *sh)
{
	int keep[3 + DNS_PROXY_PENDING_MAX];
	struct child c = { .ctl = ctl };
	struct dns_wire m, ready = { .type = DNS_WIRE_READY };
	unsigned i, n = 0;
	sigset_t all;
	int err;

	prctl(PR_SET_NAME, "husk-dns", 0, 0, 0);
	/* SIGINT from the terminal and the like are the supervisor's business. */
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, NULL);
	keep[n++] = ctl;
	keep[n++] = s->udp_fd;
	keep[n++] = s->tcp_fd;
	for (i = 0; i < DNS_PROXY_PENDING_MAX; i++)
		keep[n++] = s->up_fd[i];
	/* Nothing of the supervisor's: the tap, maps, netlink, locks, the user's files. */
	err = jail_close_fds(keep, n);
	/* GO: the supervisor has put us in the VM's cgroup; charges start here. */
	if (!err && (recv(ctl, &m, sizeof(m), 0) != (ssize_t)sizeof(m) || m.type != DNS_WIRE_GO))
		_exit(0);
	if (!err && dns_helper_test_child)
		return dns_helper_test_child(ctl);
	if (!err)
		err = child_serve(cfg, s, &c, sh);
	snprintf(sh->error, sizeof(sh->error), "%s", husk_lasterr());
	ready.status = err < 0 ? err : -EINVAL;
	send_wire(ctl, &ready, 0);
	return 1;
}

/* ---- the supervisor's side ---- */

/* First reason wins; the helper is killed, its channel closed. */
static void kill_helper(struct dns_helper *h, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void kill_helper(struct dns_helper *h, const char *fmt, ...)
{
	va_list ap;

	if (!h->fault[0]) {
		va_start(ap, fmt);
		vsnprintf(h->fault, sizeof(h->fault), fmt, ap);
		va_end(ap);
		husk_msg("warning: dns: %s; the guest gets no more DNS answers", h->fault);
	}
	if (h->pid > 0 && !h->dead)
		kill(h->pid, SIGKILL);	/* our unreaped child: the pid cannot be reused */
	h->dead = true;
	if (h->ctl >= 0) {
		epoll_ctl(h->ep, EPOLL_CTL_DEL, h->ctl, NULL);
		close(h->ctl);
		h->ctl = -1;
	}
}

/* A LEARN exactly as the helper must send it; "" or what is wrong. */
static const char *bad_learn(const struct dns_wire *m)
{
	static const uint8_t zero[16];

	if (m->type != DNS_WIRE_LEARN)
		return "a message of unknown type";
	if (m->status || memcmp(m->pad, zero, sizeof(m->pad)))
		return "a learn request with stray fields";
	if (m->family != 4 && m->family != 6)
		return "a learn request of unknown address family";
	if (m->family == 4 && memcmp(m->addr + 4, zero, 12))
		return "an IPv4 learn request with stray address bytes";
	if (m->ttl < DNS_PROXY_MIN_TTL || m->ttl > DNS_PROXY_MAX_TTL)
		return "a learn request with a TTL out of range";
	return "";
}

static void on_ctl(struct dns_helper *h)
{
	unsigned i;

	for (i = 0; i < DNS_HELPER_BATCH && h->ctl >= 0; i++) {
		uint8_t buf[sizeof(struct dns_wire) + 1];
		struct dns_wire m, ack = { .type = DNS_WIRE_ACK };
		const char *why;
		ssize_t n = recv(h->ctl, buf, sizeof(buf), MSG_DONTWAIT);
		int err;

		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n <= 0) {
			kill_helper(h, "the DNS helper closed its channel");
			return;
		}
		if (n != (ssize_t)sizeof(m)) {
			kill_helper(h, "the DNS helper sent a %zd-byte message", n);
			return;
		}
		memcpy(&m, buf, sizeof(m));
		why = bad_learn(&m);
		if (*why) {
			kill_helper(h, "the DNS helper sent %s", why);
			return;
		}
		err = h->learn(h->arg, m.family == 6 ? AF_INET6 : AF_INET, m.addr, m.ttl);
		if (err)
			h->denied++;
		else
			h->granted++;
		ack.seq = m.seq;
		ack.status = err;
		/* It must keep reading: a helper that does not is stuck or hostile. */
		if (send_wire(h->ctl, &ack, MSG_DONTWAIT)) {
			kill_helper(h, "the DNS helper does not read its answers");
			return;
		}
	}
}

static void reap(struct dns_helper *h, int options)
{
	int st;
	pid_t r;

	if (h->pid <= 0)
		return;
	do
		r = waitpid(h->pid, &st, options);
	while (r < 0 && errno == EINTR);
	if (r == 0)
		return;		/* WNOHANG and still there */
	if (r != h->pid)
		st = 0;		/* not ours to reap after all: it is gone either way */
	h->pid = 0;
	if (!h->dead) {
		char rep[sizeof(h->sh->seccomp_report)];

		/* Dead: nothing writes the page any more. */
		clean_text(rep, h->sh->seccomp_report, sizeof(rep), true);
		if (rep[0])
			kill_helper(h, "the DNS helper was stopped: %s", rep);
		else if (WIFSIGNALED(st))
			kill_helper(h, "the DNS helper was killed by signal %d", WTERMSIG(st));
		else
			kill_helper(h, "the DNS helper exited with status %d", WEXITSTATUS(st));
	}
	if (h->pidfd >= 0) {
		epoll_ctl(h->ep, EPOLL_CTL_DEL, h->pidfd, NULL);
		close(h->pidfd);
		h->pidfd = -1;
	}
}

void dns_helper_handle(struct dns_helper *h)
{
	struct epoll_event ev[3];
	uint64_t ticks;
	int n, i;

	if (!h)
		return;
	n = epoll_wait(h->ep, ev, 3, 0);
	for (i = 0; i < n; i++) {
		switch (ev[i].data.u32) {
		case EV_CTL:
			on_ctl(h);
			break;
		case EV_EXIT:
			reap(h, WNOHANG);
			break;
		case EV_TICK:
			if (read(h->tick_fd, &ticks, sizeof(ticks)) == sizeof(ticks) && h->tick)
				h->tick(h->arg, now_us());
			break;
		}
	}
}

static int watch(struct dns_helper *h, int fd, uint32_t tag)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u32 = tag };

	if (epoll_ctl(h->ep, EPOLL_CTL_ADD, fd, &ev))
		return husk_seterr(errno, "dns helper: epoll_ctl: %s", strerror(errno));
	return 0;
}

/* The supervisor's fds for the run loop: channel, exit, tick. */
static int watch_all(struct dns_helper *h)
{
	struct itimerspec its = { { DNS_HELPER_TICK_MS / 1000, DNS_HELPER_TICK_MS % 1000 * 1000000 },
				  { DNS_HELPER_TICK_MS / 1000, DNS_HELPER_TICK_MS % 1000 * 1000000 } };
	int err;

	h->ep = epoll_create1(EPOLL_CLOEXEC);
	h->tick_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (h->ep < 0 || h->tick_fd < 0 || timerfd_settime(h->tick_fd, 0, &its, NULL))
		return husk_seterr(errno, "dns helper: epoll/timerfd: %s", strerror(errno));
	err = watch(h, h->ctl, EV_CTL);
	if (!err)
		err = watch(h, h->tick_fd, EV_TICK);
	if (!err && h->pidfd >= 0)
		err = watch(h, h->pidfd, EV_EXIT);
	return err;
}

/* READY within ms, or the helper's reason for not being ready. */
static int wait_ready(struct dns_helper *h, unsigned ms)
{
	uint64_t end = now_us() + (uint64_t)ms * 1000;
	struct pollfd p = { .fd = h->ctl, .events = POLLIN };
	uint8_t buf[sizeof(struct dns_wire) + 1] = { 0 };
	char why[sizeof(h->sh->error)];
	struct dns_wire m;
	ssize_t n;

	for (;;) {
		uint64_t now = now_us();
		int r;

		if (now >= end)
			return husk_seterr(ETIMEDOUT, "the DNS helper did not start within %u ms",
					   ms);
		r = poll(&p, 1, ms_until(end, now));
		if (r < 0 && errno == EINTR)
			continue;
		if (r > 0)
			break;
	}
	n = recv(h->ctl, buf, sizeof(buf), MSG_DONTWAIT);
	memcpy(&m, buf, sizeof(m));
	if (n == (ssize_t)sizeof(m) && m.type == DNS_WIRE_READY && m.status == 0)
		return 0;
	/* It said why in the page, or its SIGSYS handler did; it is stopping. */
	snprintf(h->fault, sizeof(h->fault), "the DNS helper did not start");
	kill_helper(h, "%s", h->fault);
	reap(h, 0);
	clean_text(why, h->sh->error[0] ? h->sh->error : h->sh->seccomp_report, sizeof(why),
		   true);
	return husk_seterr(n == (ssize_t)sizeof(m) && m.status < 0 ? -m.status : EPROTO,
			   "the DNS helper could not confine itself: %s",
			   why[0] ? why : "it exited without a word");
}

static int check_cfg(const struct dns_helper_cfg *c)
{
	if (!c->bind || !c->guest || !c->upstream || !c->root || !*c->root || !c->learn)
		return husk_seterr(EINVAL, "dns helper: incomplete configuration");
	if (c->uid == 0 && geteuid() == 0)
		return husk_seterr(EINVAL, "dns helper: as root it needs a uid of its own");
	return 0;
}

int dns_helper_start(struct dns_helper **hp, const struct dns_helper_cfg *cfg)
{
	struct dns_wire go = { .type = DNS_WIRE_GO };
	struct dns_proxy_socks s;
	struct dns_helper *h;
	int sv[2], err;

	*hp = NULL;
	if ((err = check_cfg(cfg)))
		return err;
	h = calloc(1, sizeof(*h));
	if (!h)
		return husk_seterr(ENOMEM, "dns helper: out of memory");
	h->pidfd = h->ctl = h->ep = h->tick_fd = -1;
	h->learn = cfg->learn;
	h->tick = cfg->tick;
	h->arg = cfg->arg;
	h->sh = mmap(NULL, sizeof(*h->sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		     -1, 0);
	if (h->sh == MAP_FAILED) {
		h->sh = NULL;
		dns_helper_stop(h, NULL);
		return husk_seterr(ENOMEM, "dns helper: cannot map its shared page");
	}
	err = dns_proxy_open_socks(&s, cfg->bind, cfg->bind_len, cfg->upstream, cfg->ulen);
	if (err) {
		dns_helper_stop(h, NULL);
		return err;
	}
	h->port = s.port;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv)) {
		err = husk_seterr(errno, "dns helper: socketpair: %s", strerror(errno));
		dns_proxy_close_socks(&s);
		dns_helper_stop(h, NULL);
		return err;
	}
	fflush(NULL);
	h->pid = jail_fork(JAIL_NEWNET);
	if (h->pid == 0) {
		close(sv[0]);
		_exit(child_main(cfg, &s, sv[1], h->sh));
	}
	/* Ours are closed: the listeners live and die with the helper. */
	dns_proxy_close_socks(&s);
	close(sv[1]);
	h->ctl = sv[0];
	if (h->pid < 0) {
		err = h->pid;
		h->pid = 0;
		dns_helper_stop(h, NULL);
		return err;
	}
	h->pidfd = syscall(SYS_pidfd_open, h->pid, 0);
	if (h->pidfd < 0)
		err = husk_seterr(errno, "dns helper: pidfd_open: %s", strerror(errno));
	/* Before it allocates anything: memory charges stay where they are made. */
	if (!err && cfg->cg && cgroup_attach(cfg->cg, h->pid))
		err = husk_seterr(EIO, "cannot put the DNS helper in the VM's cgroup: %s",
				  husk_lasterr());
	if (!err && send_wire(h->ctl, &go, 0))
		err = husk_seterr(EPIPE, "cannot start the DNS helper: its channel is closed");
	if (!err)
		err = wait_ready(h, cfg->ready_ms ? cfg->ready_ms : DNS_HELPER_READY_MS);
	if (!err)
		err = watch_all(h);
	if (err) {
		dns_helper_stop(h, NULL);
		return err;
	}
	husk_debug("dns: helper %d serves port %u", (int)h->pid, h->port);
	*hp = h;
	return 0;
}

int dns_helper_fd(const struct dns_helper *h)
{
	return h ? h->ep : -1;
}

pid_t dns_helper_pid(const struct dns_helper *h)
{
	return h ? h->pid : 0;
}

uint16_t dns_helper_port(const struct dns_helper *h)
{
	return h ? h->port : 0;
}

const char *dns_helper_fault(const struct dns_helper *h)
{
	return h && h->fault[0] ? h->fault : NULL;
}

static void read_report(const struct dns_helper *h, struct dns_helper_report *r)
{
	const struct dns_helper_shared *sh = h->sh;
	unsigned i;

	memset(r, 0, sizeof(*r));
	r->granted = h->granted;
	r->denied = h->denied;
	snprintf(r->fault, sizeof(r->fault), "%s", h->fault);
	if (!sh)
		return;
	r->st = sh->st;
	r->nrefused = sh->nrefused < DNS_PROXY_REFUSED_KEEP ? sh->nrefused
							     : DNS_PROXY_REFUSED_KEEP;
	for (i = 0; i < r->nrefused; i++)
		clean_text(r->refused[i], sh->refused[i], sizeof(r->refused[i]), false);
}

void dns_helper_stop(struct dns_helper *h, struct dns_helper_report *r)
{
	if (!h) {
		if (r)
			memset(r, 0, sizeof(*r));
		return;
	}
	/* One that died on its own before we got to it still says why. */
	reap(h, WNOHANG);
	if (h->pid > 0) {
		/* Quiet: stopping it is not a fault. */
		if (!h->dead)
			kill(h->pid, SIGKILL);
		h->dead = true;
		reap(h, 0);
	}
	if (r)
		read_report(h, r);
	if (h->ctl >= 0)
		close(h->ctl);
	if (h->pidfd >= 0)
		close(h->pidfd);
	if (h->ep >= 0)
		close(h->ep);
	if (h->tick_fd >= 0)
		close(h->tick_fd);
	if (h->sh)
		munmap(h->sh, sizeof(*h->sh));
	free(h);
}
