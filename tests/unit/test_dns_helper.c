/*
 * Unit tests for dns_helper: the DNS proxy in a process of its own and the
 * supervisor's end of its learn channel, over loopback (the guest is
 * 127.0.0.1, a fake resolver thread answers on another port).
 *
 * The real helper: the answer reaches the guest only after the
 * supervisor's learn function granted its address; a refusal is SERVFAIL;
 * the helper is another process with no_new_privs and seccomp (and, as
 * root, its own uid and no capabilities); its report comes back; stop
 * leaves no process. A helper that cannot confine itself fails the start
 * with its reason. Played helpers (dns_helper_test_child): garbage of every
 * kind, a helper that floods requests and never reads the answers, one
 * that never gets ready and one that exits - each is killed (or reaped)
 * with its reason, the supervisor's work per call stays bounded and it
 * never waits. And the helper dies with its supervisor (PDEATHSIG).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "net/dns_helper.h"
#include "sandbox/jail.h"
#include "../proc_status.h"
#include "suites.h"
#include "lib/util.h"

/* The fake resolver: one A record 10.0.0.1 (TTL 5) for every query. */
static struct {
	int fd;
	struct sockaddr_in addr;
	atomic_bool stop;
	atomic_int queries;
	pthread_t th;
} up;

/* What the supervisor's learn function saw, and what it answers. */
static struct {
	int calls, ret, family;
	uint8_t addr[16];
	uint32_t ttl;
	uint64_t t_us;
} seen;

static struct sockaddr_in lo = { .sin_family = AF_INET, .sin_addr = { .s_addr = 0x0100007f } };
static char root[] = "/tmp/husk-dns-root.XXXXXX", uidir[] = "/tmp/husk-dns-uid.XXXXXX";
static uid_t uid;
static int uid_lock = -1;

static void *up_thread(void *arg)
{
	uint8_t b[1024];

	while (!atomic_load(&up.stop)) {
		struct pollfd p = { .fd = up.fd, .events = POLLIN };
		struct sockaddr_in from;
		socklen_t flen = sizeof(from);
		ssize_t n;

		if (poll(&p, 1, 20) <= 0)
			continue;
		n = recvfrom(up.fd, b, sizeof(b) - 16, 0, (struct sockaddr *)&from, &flen);
		if (n < 12)
			continue;
		atomic_fetch_add(&up.queries, 1);
		b[2] = 0x81;
		b[3] = 0x80;
		b[7] = 1;	/* one answer, after the question */
		memcpy(b + n, "\xc0\x0c\0\1\0\1\0\0\0\5\0\4\x0a\0\0\1", 16);
		sendto(up.fd, b, n + 16, 0, (struct sockaddr *)&from, flen);
	}
	return NULL;
}

static int learn(void *arg, int family, const uint8_t *addr, uint32_t ttl)
{
	seen.calls++;
	seen.family = family;
	memcpy(seen.addr, addr, family == AF_INET ? 4 : 16);
	seen.ttl = ttl;
	seen.t_us = now_us();
	return seen.ret;
}

static void setup(void)
{
	socklen_t len = sizeof(up.addr);

	memset(&seen, 0, sizeof(seen));
	dns_helper_test_child = NULL;
	up.fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	up.addr = lo;
	ck_assert_int_eq(bind(up.fd, (struct sockaddr *)&up.addr, sizeof(up.addr)), 0);
	ck_assert_int_eq(getsockname(up.fd, (struct sockaddr *)&up.addr, &len), 0);
	atomic_store(&up.stop, false);
	atomic_store(&up.queries, 0);
	ck_assert_int_eq(pthread_create(&up.th, NULL, up_thread, NULL), 0);
	ck_assert_ptr_nonnull(mkdtemp(root));
	ck_assert_int_eq(chmod(root, 0555), 0);
	uid = 0;
	if (geteuid() == 0) {
		ck_assert_ptr_nonnull(mkdtemp(uidir));
		ck_assert_int_eq(jail_uid_lease_at(uidir, 270000, 8, &uid, &uid_lock), 0);
	}
}

static void teardown(void)
{
	atomic_store(&up.stop, true);
	pthread_join(up.th, NULL);
	close(up.fd);
	rmdir(root);
	strcpy(root + strlen(root) - 6, "XXXXXX");
	if (uid_lock >= 0) {
		close(uid_lock);
		uid_lock = -1;
		rm_tree_at(AT_FDCWD, uidir);
		strcpy(uidir + strlen(uidir) - 6, "XXXXXX");
	}
}

static void cfg_init(struct dns_helper_cfg *c)
{
	static const char *const allow[] = { "*.example.com" };

	memset(c, 0, sizeof(*c));
	c->allow = allow;
	c->nallow = 1;
	c->bind = (struct sockaddr *)&lo;
	c->bind_len = sizeof(lo);
	c->guest = (struct sockaddr *)&lo;
	c->guest_len = sizeof(lo);
	c->upstream = (struct sockaddr *)&up.addr;
	c->ulen = sizeof(up.addr);
	c->root = root;
	c->uid = c->gid = uid;
	c->query_ms = 1000;
	c->learn = learn;
}

static struct dns_helper *start(void)
{
	struct dns_helper_cfg c;
	struct dns_helper *h;

	cfg_init(&c);
	ck_assert_msg(dns_helper_start(&h, &c) == 0, "%s", husk_lasterr());
	return h;
}

/* The supervisor's loop for ms: poll the helper's fd, handle it. */
static void serve(struct dns_helper *h, int ms)
{
	uint64_t end = now_us() + ms * 1000ull;

	while (now_us() < end) {
		struct pollfd p = { .fd = dns_helper_fd(h), .events = POLLIN };

		if (poll(&p, 1, 10) > 0)
			dns_helper_handle(h);
	}
}

/* The guest: one query for name, the answer in r (its length, -1 if none). */
static struct {
	pthread_t th;
	uint16_t port;
	bool tcp;
	const char *name;
	uint8_t r[1024];
	atomic_int len;		/* -2 while waiting */
	uint64_t t_us;
} guest;

static void *guest_thread(void *arg)
{
	struct sockaddr_in to = lo;
	struct timeval tv = { 3, 0 };
	uint8_t q[300] = { 0x42, 0x42, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0 };
	size_t n = 12 + dns_name_to_wire(guest.name, q + 12, 256);
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	ssize_t k;

	memcpy(q + n, "\0\1\0\1", 4);	/* A, IN */
	n += 4;
	to.sin_port = htons(guest.port);
	if (guest.tcp) {
		uint8_t b[2 + sizeof(q)];

		close(fd);
		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		b[0] = n >> 8;
		b[1] = n & 0xff;
		memcpy(b + 2, q, n);
		k = -1;
		if (!connect(fd, (struct sockaddr *)&to, sizeof(to)) &&
		    send(fd, b, n + 2, 0) == (ssize_t)n + 2 && recv(fd, b, 2, MSG_WAITALL) == 2)
			k = recv(fd, guest.r, (size_t)b[0] << 8 | b[1], MSG_WAITALL);
		guest.t_us = now_us();
		atomic_store(&guest.len, k);
		close(fd);
		return NULL;
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	sendto(fd, q, n, 0, (struct sockaddr *)&to, sizeof(to));
	k = recv(fd, guest.r, sizeof(guest.r), 0);
	guest.t_us = now_us();
	atomic_store(&guest.len, k);
	close(fd);
	return NULL;
}

/* Ask name through h (over TCP if tcp) while serving it; the answer's length. */
static ssize_t ask_over(struct dns_helper *h, const char *name, bool tcp)
{
	guest.tcp = tcp;
	guest.port = dns_helper_port(h);
	guest.name = name;
	atomic_store(&guest.len, -2);
	ck_assert_int_eq(pthread_create(&guest.th, NULL, guest_thread, NULL), 0);
	while (atomic_load(&guest.len) == -2)
		serve(h, 10);
	pthread_join(guest.th, NULL);
	return atomic_load(&guest.len);
}

static ssize_t ask(struct dns_helper *h, const char *name)
{
	return ask_over(h, name, false);
}

/* /proc/PID/<what> holds no byte but NUL (and could be read); -1 if unreadable. */
static int only_nuls(pid_t pid, const char *what)
{
	char path[64], b[4096];
	ssize_t n, i;
	int fd, ok = 1;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, what);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	while ((n = read(fd, b, sizeof(b))) > 0)
		for (i = 0; i < n; i++)
			ok &= !b[i];
	close(fd);
	return n < 0 ? -1 : ok;
}

START_TEST(real_helper_answers_after_grant)
{
	struct dns_helper *h = start();
	static struct dns_helper_report rep;
	pid_t pid = dns_helper_pid(h);
	char v[128];
	ssize_t n;

	ck_assert_int_gt(pid, 0);
	ck_assert_int_ne(pid, getpid());
	/* Confined: no_new_privs, seccomp; as root its own uid, no capabilities. */
	proc_status_field(pid, "NoNewPrivs", v, sizeof(v));
	ck_assert_str_eq(v, "1");
	proc_status_field(pid, "Seccomp", v, sizeof(v));
	ck_assert_str_eq(v, "2");
	proc_status_field(pid, "Name", v, sizeof(v));
	ck_assert_str_eq(v, "husk-dns");
	if (geteuid() == 0) {
		char want[32];

		proc_status_field(pid, "Uid", v, sizeof(v));
		snprintf(want, sizeof(want), "%u\t", (unsigned)uid);
		ck_assert_msg(!strncmp(v, want, strlen(want)), "Uid: %s", v);
		proc_status_field(pid, "CapEff", v, sizeof(v));
		ck_assert_str_eq(v, "0000000000000000");
		proc_status_field(pid, "CapBnd", v, sizeof(v));
		ck_assert_str_eq(v, "0000000000000000");
		/* Its copy of our command line and environment is wiped. */
		ck_assert_ptr_nonnull(getenv("PATH"));
		ck_assert_int_eq(only_nuls(pid, "environ"), 1);
		ck_assert_int_eq(only_nuls(pid, "cmdline"), 1);
	}
	n = ask(h, "www.example.com");
	ck_assert_int_gt(n, 12);
	ck_assert_uint_eq(guest.r[3] & 0xf, 0);
	ck_assert_mem_eq(guest.r + n - 4, "\x0a\0\0\1", 4);
	/* The supervisor granted the address before the guest saw it. */
	ck_assert_int_eq(seen.calls, 1);
	ck_assert_int_eq(seen.family, AF_INET);
	ck_assert_mem_eq(seen.addr, "\x0a\0\0\1", 4);
	ck_assert_uint_eq(seen.ttl, DNS_PROXY_MIN_TTL);
	ck_assert_uint_le(seen.t_us, guest.t_us);
	/* TCP through the confined helper as well. */
	n = ask_over(h, "a.example.com", true);
	ck_assert_int_gt(n, 12);
	ck_assert_uint_eq(guest.r[3] & 0xf, 0);
	ck_assert_mem_eq(guest.r + n - 4, "\x0a\0\0\1", 4);
	ck_assert_int_eq(seen.calls, 2);
	/* Refused names never reach the resolver or the supervisor. */
	n = ask(h, "evil.org");
	ck_assert_int_gt(n, 12);
	ck_assert_uint_eq(guest.r[3] & 0xf, DNS_RCODE_NXDOMAIN);
	ck_assert_int_eq(seen.calls, 2);
	ck_assert_ptr_null(dns_helper_fault(h));
	dns_helper_stop(h, &rep);
	ck_assert_int_eq(kill(pid, 0), -1);
	ck_assert_int_eq(errno, ESRCH);
	ck_assert_uint_eq(rep.st.queries, 3);
	ck_assert_uint_eq(rep.st.allowed, 2);
	ck_assert_uint_eq(rep.st.refused, 1);
	ck_assert_uint_eq(rep.granted, 2);
	ck_assert_uint_eq(rep.nrefused, 1);
	ck_assert_str_eq(rep.refused[0], "evil.org");
	ck_assert_str_eq(rep.fault, "");
	ck_assert_int_eq(atomic_load(&up.queries), 2);
}
END_TEST

START_TEST(real_helper_refused_by_supervisor)
{
	struct dns_helper *h = start();
	static struct dns_helper_report rep;
	ssize_t n;

	seen.ret = -EDQUOT;
	n = ask(h, "www.example.com");
	ck_assert_int_ge(n, 12);
	ck_assert_uint_eq(guest.r[3] & 0xf, DNS_RCODE_SERVFAIL);
	ck_assert_uint_eq(guest.r[7], 0);	/* no answer records */
	ck_assert_int_eq(seen.calls, 1);
	dns_helper_stop(h, &rep);
	ck_assert_uint_eq(rep.denied, 1);
	ck_assert_uint_eq(rep.st.withheld, 1);
}
END_TEST

START_TEST(helper_cannot_confine)
{
	struct dns_helper_cfg c;
	struct dns_helper *h;

	cfg_init(&c);
	c.root = "/nonexistent/husk-dns-root";
	ck_assert_int_lt(dns_helper_start(&h, &c), 0);
	ck_assert_ptr_null(h);
	ck_assert_msg(strstr(husk_lasterr(), "could not confine itself") &&
		      strstr(husk_lasterr(), "/nonexistent/husk-dns-root"), "%s", husk_lasterr());
	/* As root a uid of its own is required. */
	if (geteuid() == 0) {
		cfg_init(&c);
		c.uid = 0;
		ck_assert_int_eq(dns_helper_start(&h, &c), -EINVAL);
	}
}
END_TEST

/* ---- played helpers ---- */

static uint8_t bad[64];		/* what the garbage child sends after READY */
static size_t bad_len;
static pid_t *child_pid;	/* shared with the played child */

/*
 * The played child's pid as the test sees it: as root it is PID 1 of its
 * own namespace, but /proc is the host's, so /proc/self names it there.
 */
static void note_pid(void)
{
	char b[32];
	ssize_t n = readlink("/proc/self", b, sizeof(b) - 1);

	if (!child_pid)
		return;
	b[n > 0 ? n : 0] = '\0';
	*child_pid = atoi(b);
}

static int child_ready(int ctl)
{
	struct dns_wire r = { .type = DNS_WIRE_READY };

	note_pid();
	return send(ctl, &r, sizeof(r), 0) == sizeof(r) ? 0 : -1;
}

static int child_garbage(int ctl)
{
	char b;

	if (child_ready(ctl) || send(ctl, bad, bad_len, 0) != (ssize_t)bad_len)
		return 2;
	if (read(ctl, &b, 1))	/* until killed */
		return 3;
	return 3;
}

static struct dns_wire good_learn(void)
{
	struct dns_wire m = { .type = DNS_WIRE_LEARN, .seq = 7, .ttl = 60, .family = 4,
			      .addr = { 192, 0, 2, 1 } };

	return m;
}

/* Serve until a fault shows (at most ms); it must read like why. */
static void expect_fault(struct dns_helper *h, const char *why, int ms)
{
	uint64_t end = now_us() + ms * 1000ull;

	while (!dns_helper_fault(h) && now_us() < end)
		serve(h, 10);
	ck_assert_msg(dns_helper_fault(h) && strstr(dns_helper_fault(h), why),
		      "fault \"%s\", wanted \"%s\"", dns_helper_fault(h) ?: "(none)", why);
	/* The killed helper is reaped through the same fd, without waiting. */
	while (dns_helper_pid(h) && now_us() < end + 2000000)
		serve(h, 10);
	ck_assert_int_eq(dns_helper_pid(h), 0);
}

START_TEST(garbage_kills_helper)
{
	static const struct {
		const char *why;
		size_t len;
	} cases[] = {
		{ "5-byte message", 5 },
		{ "37-byte message", sizeof(struct dns_wire) + 1 },
		{ "unknown type", sizeof(struct dns_wire) },
		{ "unknown address family", sizeof(struct dns_wire) },
		{ "TTL out of range", sizeof(struct dns_wire) },
		{ "TTL out of range", sizeof(struct dns_wire) },
		{ "stray fields", sizeof(struct dns_wire) },
		{ "stray address bytes", sizeof(struct dns_wire) },
	};
	unsigned i;

	dns_helper_test_child = child_garbage;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		static struct dns_helper_report rep;
		struct dns_wire m = good_learn();
		struct dns_helper *h;

		switch (i) {
		case 2: m.type = 99; break;
		case 3: m.family = 5; break;
		case 4: m.ttl = 0; break;
		case 5: m.ttl = DNS_PROXY_MAX_TTL + 1; break;
		case 6: m.pad[1] = 1; break;
		case 7: m.addr[9] = 1; break;
		}
		memset(bad, 0xee, sizeof(bad));
		if (i >= 2)
			memcpy(bad, &m, sizeof(m));
		bad_len = cases[i].len;
		h = start();
		expect_fault(h, cases[i].why, 2000);
		ck_assert_int_eq(seen.calls, 0);
		dns_helper_stop(h, &rep);
		ck_assert_msg(strstr(rep.fault, cases[i].why), "%s", rep.fault);
	}
}
END_TEST

/* Valid requests as fast as the channel takes them; never reads an answer. */
static int child_flood(int ctl)
{
	struct dns_wire m = good_learn();
	unsigned i;

	if (child_ready(ctl))
		return 2;
	for (i = 0;; i++) {
		m.seq = i;
		m.addr[3] = i & 0xff;
		if (send(ctl, &m, sizeof(m), 0) != sizeof(m))
			return 3;
	}
}

START_TEST(flood_without_reading_kills_helper)
{
	struct dns_helper *h;
	unsigned calls = 0;
	int before;

	dns_helper_test_child = child_flood;
	h = start();
	while (!dns_helper_fault(h) && calls < 100000) {
		struct pollfd p = { .fd = dns_helper_fd(h), .events = POLLIN };
		uint64_t t0;

		if (poll(&p, 1, 1000) <= 0)
			break;
		before = seen.calls;
		t0 = now_us();
		dns_helper_handle(h);
		calls++;
		/* Bounded: one batch per call, and quick. */
		ck_assert_int_le(seen.calls - before, DNS_HELPER_BATCH);
		ck_assert_uint_lt(now_us() - t0, 200000);
	}
	ck_assert_msg(dns_helper_fault(h) && strstr(dns_helper_fault(h), "does not read"),
		      "after %u calls, %d requests: %s", calls, seen.calls,
		      dns_helper_fault(h) ?: "no fault");
	/* The channel's own buffer is the bound: a few hundred at most. */
	ck_assert_int_lt(seen.calls, 5000);
	dns_helper_stop(h, NULL);
}
END_TEST

static int child_silent(int ctl)
{
	note_pid();
	pause();
	return 0;
}

START_TEST(never_ready)
{
	struct dns_helper_cfg c;
	struct dns_helper *h;
	uint64_t t0 = now_us();

	child_pid = mmap(NULL, sizeof(*child_pid), PROT_READ | PROT_WRITE,
			 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(child_pid, MAP_FAILED);
	*child_pid = 0;
	dns_helper_test_child = child_silent;
	cfg_init(&c);
	c.ready_ms = 300;
	ck_assert_int_eq(dns_helper_start(&h, &c), -ETIMEDOUT);
	ck_assert_uint_lt(now_us() - t0, 2000000);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "did not start within 300 ms"));
	/* Nothing left: it was killed and reaped. */
	ck_assert_int_gt(*child_pid, 0);
	ck_assert_int_eq(kill(*child_pid, 0), -1);
	ck_assert_int_eq(errno, ESRCH);
	munmap(child_pid, sizeof(*child_pid));
	child_pid = NULL;
}
END_TEST

static int child_exit(int ctl)
{
	return child_ready(ctl) ? 2 : 3;
}

START_TEST(helper_exit_is_noticed)
{
	struct dns_helper *h;

	uint64_t end = now_us() + 2000000;
	const char *f;

	dns_helper_test_child = child_exit;
	h = start();
	while (dns_helper_pid(h) && now_us() < end)
		serve(h, 10);
	/* Its channel's end or its exit, whichever the loop saw first. */
	f = dns_helper_fault(h);
	ck_assert_msg(f && (strstr(f, "closed its channel") ||
			    strstr(f, "exited with status 3")), "fault: %s", f ?: "none");
	ck_assert_int_eq(dns_helper_pid(h), 0);
	dns_helper_stop(h, NULL);
}
END_TEST

static int child_deaf(int ctl)
{
	if (child_ready(ctl))
		return 2;
	pause();	/* never reads its channel: only PDEATHSIG can end it */
	return 3;
}

/*
 * An intermediate "supervisor" starts a helper and is SIGKILLed; returns
 * the helper's wait status (we are the subreaper it is reparented to).
 */
static int kill_supervisor(void)
{
	int pfd[2], st;
	pid_t sup, helper = 0;

	ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), 0);
	ck_assert_int_eq(pipe(pfd), 0);
	sup = fork();
	ck_assert_int_ge(sup, 0);
	if (sup == 0) {
		struct dns_helper_cfg c;
		struct dns_helper *h;
		pid_t p;

		cfg_init(&c);
		if (dns_helper_start(&h, &c))
			_exit(1);
		p = dns_helper_pid(h);
		if (write(pfd[1], &p, sizeof(p)) != sizeof(p))
			_exit(1);
		pause();
		_exit(0);
	}
	close(pfd[1]);
	ck_assert_int_eq(read(pfd[0], &helper, sizeof(helper)), sizeof(helper));
	close(pfd[0]);
	ck_assert_int_gt(helper, 0);
	ck_assert_int_eq(kill(sup, SIGKILL), 0);
	ck_assert_int_eq(waitpid(sup, &st, 0), sup);
	ck_assert_int_eq(waitpid(helper, &st, 0), helper);
	return st;
}

START_TEST(dies_with_supervisor)
{
	int st;

	/* One that ignores its channel: PR_SET_PDEATHSIG is what kills it. */
	dns_helper_test_child = child_deaf;
	st = kill_supervisor();
	ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "status 0x%x", st);
	/* The real one: the closed channel or the signal, whichever is first. */
	dns_helper_test_child = NULL;
	st = kill_supervisor();
	ck_assert_msg((WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) ||
		      (WIFEXITED(st) && WEXITSTATUS(st) == 0), "status 0x%x", st);
}
END_TEST

Suite *dns_helper_suite(void)
{
	Suite *s = suite_create("dns_helper");
	TCase *tc = tcase_create("process");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 20);
	tcase_add_test(tc, real_helper_answers_after_grant);
	tcase_add_test(tc, real_helper_refused_by_supervisor);
	tcase_add_test(tc, helper_cannot_confine);
	tcase_add_test(tc, garbage_kills_helper);
	tcase_add_test(tc, flood_without_reading_kills_helper);
	tcase_add_test(tc, never_ready);
	tcase_add_test(tc, helper_exit_is_noticed);
	tcase_add_test(tc, dies_with_supervisor);
	suite_add_tcase(s, tc);
	return s;
}
