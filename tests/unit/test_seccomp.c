/*
 * Unit tests for seccomp: each thread kind's filter installed in a forked
 * child, which makes a few calls its list allows (they must work) and then
 * one it does not: the child must end with status 128 + SIGSYS, and the
 * report buffer (a MAP_SHARED page) and its stderr (a memfd) must name the
 * call. Also: argument checks (ioctl requests, PROT_EXEC, socket family,
 * tgkill's signal, unlinkat's flags on arm64), x32 and i386 numbers on
 * x86_64, the quiet EPERM for unlink in the run VM main list, the DNS
 * helper's list (no socket, connect, open, exec or fork), a stop and
 * continue in a timed wait (restart_syscall), HUSK_SECCOMP=log and off, and
 * the lists' size. Written for x86_64 and arm64: expected names and
 * numbers are the host ABI's (__NR_*), and where glibc makes another call
 * for the same function there (mkdir() is mkdirat on arm64), so does the
 * expectation.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <linux/kvm.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sandbox/seccomp.h"
#include "lib/util.h"
#include "suites.h"

#define STATUS_SIGSYS (128 + SIGSYS)
#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define REPORT_LEN 256

/* "name (nr N)" as the report words a refused call of this ABI. */
#define CALL(name) call_text(#name, __NR_##name)

static const char *call_text(const char *name, long nr)
{
	static char buf[4][64];
	static unsigned next;
	char *b = buf[next++ % ARRAY_LEN(buf)];

	snprintf(b, sizeof(buf[0]), "%s (nr %ld)", name, nr);
	return b;
}

/* What glibc's mkdir() and rmdir() call: arm64 has only the *at forms. */
#ifdef __NR_mkdir
#define MKDIR_CALL CALL(mkdir)
#define RMDIR_CALL CALL(rmdir)
#else
#define MKDIR_CALL CALL(mkdirat)
#define RMDIR_CALL CALL(unlinkat)
#endif

/* Shared with the child: its report buffer and where it says what failed. */
struct shared {
	char report[REPORT_LEN];
	char why[128];
	volatile int sleeping;	/* the child is about to wait on futex_word */
	int futex_word;
};

struct outcome {
	int status;		/* raw waitpid status */
	char report[REPORT_LEN];
	char err[2048];		/* the child's stderr */
	char why[128];
};

static struct shared *sh;

/* In the child, an allowed call failed: say where, exit with 70. */
#define MUST(c) do { if (!(c)) child_fail(__LINE__, #c); } while (0)

static void child_fail(int line, const char *what)
{
	snprintf(sh->why, sizeof(sh->why), "line %d: %s (errno %d)", line, what, errno);
	_exit(70);
}

/*
 * Fork; the child redirects stderr to a memfd (*efd), sets HUSK_SECCOMP
 * (NULL: unset), registers the report buffer, runs body(arg) and exits
 * with 0. Returns the child; collect() waits for it.
 */
static pid_t spawn_child(const char *env, void (*body)(const void *), const void *arg, int *efd)
{
	pid_t pid;

	*efd = memfd_create("stderr", 0);
	ck_assert_int_ge(*efd, 0);
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(sh, MAP_FAILED);
	memset(sh, 0, sizeof(*sh));
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		dup2(*efd, STDERR_FILENO);
		if (env)
			setenv("HUSK_SECCOMP", env, 1);
		else
			unsetenv("HUSK_SECCOMP");
		seccomp_set_report(sh->report, sizeof(sh->report));
		body(arg);
		_exit(0);
	}
	return pid;
}

/* The child's end: its status, report, failure note and stderr. */
static void collect(pid_t pid, int efd, struct outcome *o)
{
	ssize_t n;

	memset(o, 0, sizeof(*o));
	ck_assert_int_eq(waitpid(pid, &o->status, 0), pid);
	memcpy(o->report, sh->report, sizeof(o->report));
	memcpy(o->why, sh->why, sizeof(o->why));
	n = pread(efd, o->err, sizeof(o->err) - 1, 0);
	o->err[n > 0 ? n : 0] = '\0';
	close(efd);
	munmap(sh, sizeof(*sh));
	sh = NULL;
}

/* spawn_child() and collect(): what happened. */
static void spawn(const char *env, void (*body)(const void *), const void *arg,
		  struct outcome *o)
{
	int efd;
	pid_t pid = spawn_child(env, body, arg, &efd);

	collect(pid, efd, o);
}

struct confined {
	enum seccomp_kind kind;
	void (*before)(void);
	void (*after)(void);
};

static void confined_body(const void *arg)
{
	const struct confined *c = arg;

	if (c->before)
		c->before();
	MUST(seccomp_install(c->kind) == 0);
	c->after();
}

/* A child that runs before() unconfined, installs kind and runs after(). */
static void run_child(enum seccomp_kind kind, const char *env, void (*before)(void),
		      void (*after)(void), struct outcome *o)
{
	struct confined c = { kind, before, after };

	spawn(env, confined_body, &c, o);
}

static void assert_exit(const struct outcome *o, int code)
{
	ck_assert_msg(WIFEXITED(o->status) && WEXITSTATUS(o->status) == code,
		      "child status 0x%x, wanted exit %d (%s; stderr: %s)", o->status, code,
		      o->why, o->err);
}

/* Killed for name by kind's filter, reported on stderr and in the buffer. */
static void assert_killed(const struct outcome *o, enum seccomp_kind kind, const char *name)
{
	char want[200];

	assert_exit(o, STATUS_SIGSYS);
	snprintf(want, sizeof(want), "seccomp: %s thread made a forbidden system call: %s",
		 seccomp_kind_name(kind), name);
	ck_assert_msg(strstr(o->report, want) == o->report, "report \"%s\", wanted \"%s\"",
		      o->report, want);
	ck_assert_msg(!strchr(o->report, '\n'), "report has a newline");
	snprintf(want, sizeof(want), "husk: %s\n", o->report);
	ck_assert_msg(strstr(o->err, want), "stderr \"%s\" lacks \"%s\"", o->err, want);
}

/* ---- fds the children prepare before they are confined ---- */

static int pfd[2], devnull = -1, epfd = -1, memfd = -1, tfd = -1, lfd = -1, sp[2];
static pid_t tid;

static void prep(void)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	sigset_t set;

	MUST(pipe(pfd) == 0);
	MUST((devnull = open("/dev/null", O_RDWR)) >= 0);
	MUST((epfd = epoll_create1(0)) >= 0);
	MUST((memfd = memfd_create("data", 0)) >= 0);
	MUST(pwrite(memfd, "0123456789", 10, 0) == 10);
	MUST((tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK)) >= 0);
	MUST(socketpair(AF_UNIX, SOCK_STREAM, 0, sp) == 0);
	/* An abstract socket: nothing to clean up in the file system. */
	snprintf(a.sun_path + 1, sizeof(a.sun_path) - 1, "husk-seccomp-test-%d", (int)getpid());
	MUST((lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0)) >= 0);
	MUST(bind(lfd, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(lfd, 1) == 0);
	tid = (pid_t)syscall(SYS_gettid);
	/* A kick that stays pending cannot disturb the child. */
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	MUST(sigprocmask(SIG_BLOCK, &set, NULL) == 0);
}

/* Calls every kind may make. */
static void common_calls(void)
{
	struct timespec ts;

	MUST(write(pfd[1], "x", 1) == 1);
	MUST(syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts) == 0);
	MUST(syscall(SYS_futex, &ts, 1 /* FUTEX_WAKE */, 1, NULL, NULL, 0) == 0);
	MUST(madvise(&ts, 0, MADV_DONTNEED) == 0 || errno == EINVAL);
}

/* ---- vCPU ---- */

static void vcpu_allowed(void)
{
	struct kvm_irq_level irq = { .irq = 4, .level = 1 };

	common_calls();
	/* Not a KVM fd: ENOTTY proves the filter let the request through. */
	MUST(ioctl(devnull, KVM_IRQ_LINE, &irq) < 0 && errno == ENOTTY);
	MUST(ioctl(devnull, KVM_RUN, 0) < 0 && errno == ENOTTY);
	MUST(epoll_ctl(epfd, EPOLL_CTL_DEL, devnull, NULL) < 0);
	MUST(syscall(SYS_tgkill, getpid(), tid, SIGUSR1) == 0);
}

static void vcpu_bad_ioctl(void)
{
	vcpu_allowed();
	ioctl(devnull, KVM_CREATE_VCPU, 0);
}

static void vcpu_bad_signal(void)
{
	vcpu_allowed();
	syscall(SYS_tgkill, getpid(), tid, SIGTERM);
}

static void vcpu_bad_epoll(void)
{
	struct epoll_event ev = { .events = EPOLLIN };

	epoll_ctl(epfd, EPOLL_CTL_ADD, pfd[0], &ev);
}

static void vcpu_bad_execve(void)
{
	char *argv[] = { "/bin/true", NULL };

	vcpu_allowed();
	execve(argv[0], argv, argv + 1);
}

START_TEST(vcpu_list)
{
	struct outcome o;

	run_child(SECCOMP_KIND_VCPU, NULL, prep, vcpu_allowed, &o);
	assert_exit(&o, 0);
	ck_assert_str_eq(o.report, "");
	run_child(SECCOMP_KIND_VCPU, NULL, prep, vcpu_bad_ioctl, &o);
	assert_killed(&o, SECCOMP_KIND_VCPU, CALL(ioctl));
	run_child(SECCOMP_KIND_VCPU, NULL, prep, vcpu_bad_signal, &o);
	assert_killed(&o, SECCOMP_KIND_VCPU, CALL(tgkill));
	run_child(SECCOMP_KIND_VCPU, NULL, prep, vcpu_bad_epoll, &o);
	assert_killed(&o, SECCOMP_KIND_VCPU, "epoll_ctl");
	run_child(SECCOMP_KIND_VCPU, "on", prep, vcpu_bad_execve, &o);
	assert_killed(&o, SECCOMP_KIND_VCPU, CALL(execve));
}
END_TEST

/* ---- device event loop ---- */

static void evloop_allowed(void)
{
	struct epoll_event ev = { .events = EPOLLIN };
	struct itimerspec its = { .it_value = { 100, 0 } };
	char buf[16];
	struct iovec iov = { buf, 4 };
	void *p;
	int s;

	common_calls();
	MUST(epoll_ctl(epfd, EPOLL_CTL_ADD, pfd[0], &ev) == 0);
	MUST(epoll_wait(epfd, &ev, 1, 0) == 1);
	MUST(read(pfd[0], buf, 1) == 1);
	MUST(preadv(memfd, &iov, 1, 2) == 4 && !memcmp(buf, "2345", 4));
	MUST(pwritev(memfd, &iov, 1, 0) == 4);
	MUST(fdatasync(memfd) == 0 || errno == EINVAL);
	MUST(getrandom(buf, sizeof(buf), 0) == sizeof(buf));
	MUST(timerfd_settime(tfd, 0, &its, NULL) == 0);
	MUST((s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) >= 0);
	MUST(close(s) == 0);
	MUST(send(sp[0], "ab", 2, MSG_DONTWAIT) == 2);
	MUST(recv(sp[1], buf, 2, MSG_DONTWAIT) == 2);
	MUST(accept4(lfd, NULL, NULL, SOCK_CLOEXEC) < 0 && errno == EAGAIN);
	MUST(shutdown(sp[0], SHUT_WR) == 0);
	/* A fresh block too big for the arena: malloc's mmap path. */
	p = malloc(1 << 20);
	MUST(p);
	memset(p, 1, 1 << 20);
	free(p);
	p = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	MUST(p != MAP_FAILED);
	MUST(mprotect(p, 4096, PROT_READ) == 0);
	MUST(munmap(p, 8192) == 0);
}

static void evloop_inet(void)
{
	evloop_allowed();
	socket(AF_INET, SOCK_STREAM, 0);
}

static void evloop_exec_mmap(void)
{
	mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
}

static void evloop_exec_mprotect(void)
{
	void *p = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	MUST(p != MAP_FAILED);
	mprotect(p, 4096, PROT_READ | PROT_EXEC);
}

static void evloop_openat(void)
{
	open("/etc/hostname", O_RDONLY);
}

START_TEST(evloop_list)
{
	struct outcome o;

	run_child(SECCOMP_KIND_EVLOOP, NULL, prep, evloop_allowed, &o);
	assert_exit(&o, 0);
	run_child(SECCOMP_KIND_EVLOOP, NULL, prep, evloop_inet, &o);
	assert_killed(&o, SECCOMP_KIND_EVLOOP, CALL(socket));
	run_child(SECCOMP_KIND_EVLOOP, NULL, prep, evloop_exec_mmap, &o);
	assert_killed(&o, SECCOMP_KIND_EVLOOP, CALL(mmap));
	run_child(SECCOMP_KIND_EVLOOP, NULL, prep, evloop_exec_mprotect, &o);
	assert_killed(&o, SECCOMP_KIND_EVLOOP, CALL(mprotect));
	run_child(SECCOMP_KIND_EVLOOP, NULL, prep, evloop_openat, &o);
	assert_killed(&o, SECCOMP_KIND_EVLOOP, CALL(openat));
}
END_TEST

/* ---- husk boot's main thread ---- */

static void boot_allowed(void)
{
	struct pollfd p = { .fd = pfd[0], .events = POLLIN };
	struct kvm_irq_level irq = { .irq = 4, .level = 1 };
	char c;

	common_calls();
	MUST(poll(&p, 1, 0) == 1 && read(pfd[0], &c, 1) == 1);
	MUST(ioctl(devnull, KVM_IRQ_LINE, &irq) < 0 && errno == ENOTTY);
	MUST(syscall(SYS_tgkill, getpid(), tid, SIGUSR1) == 0);
	/* Teardown: vsock's last word to a waiting host client, its socket file. */
	MUST(send(sp[0], "ERR\n", 4, MSG_NOSIGNAL | MSG_DONTWAIT) == 4);
	MUST(unlink("/nonexistent/husk-seccomp-test") < 0 && errno == ENOENT);
	MUST(close(devnull) == 0);
	free(malloc(100));
}

static void boot_openat(void)
{
	boot_allowed();
	open("/dev/null", O_RDONLY);
}

/* unlink() is allowed, rmdir() is not: on arm64 both are unlinkat. */
static void boot_rmdir(void)
{
	rmdir("/nonexistent/husk-seccomp-test");
}

static void boot_tty_ioctl(void)
{
	ioctl(devnull, TCGETS, NULL);
}

static void boot_kvm_run(void)
{
	ioctl(devnull, KVM_RUN, 0);
}

START_TEST(boot_main_list)
{
	struct outcome o;

	run_child(SECCOMP_KIND_BOOT_MAIN, NULL, prep, boot_allowed, &o);
	assert_exit(&o, 0);
	run_child(SECCOMP_KIND_BOOT_MAIN, NULL, prep, boot_openat, &o);
	assert_killed(&o, SECCOMP_KIND_BOOT_MAIN, CALL(openat));
	run_child(SECCOMP_KIND_BOOT_MAIN, NULL, prep, boot_rmdir, &o);
	assert_killed(&o, SECCOMP_KIND_BOOT_MAIN, RMDIR_CALL);
	run_child(SECCOMP_KIND_BOOT_MAIN, NULL, prep, boot_tty_ioctl, &o);
	assert_killed(&o, SECCOMP_KIND_BOOT_MAIN, CALL(ioctl));
	run_child(SECCOMP_KIND_BOOT_MAIN, NULL, prep, boot_kvm_run, &o);
	assert_killed(&o, SECCOMP_KIND_BOOT_MAIN, CALL(ioctl));
}
END_TEST

/* ---- husk run's VM process main thread ---- */

static void run_allowed(void)
{
	struct pollfd p = { .fd = sp[1], .events = POLLIN };
	struct iovec iov = { "hello", 5 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	char buf[8];
	void *q;

	common_calls();
	MUST(pread(memfd, buf, 3, 7) == 3 && !memcmp(buf, "789", 3));
	MUST(sendmsg(sp[0], &m, MSG_NOSIGNAL) == 5);
	MUST(poll(&p, 1, 0) == 1);
	MUST(recv(sp[1], buf, 2, MSG_DONTWAIT) == 2);
	iov.iov_base = buf;
	iov.iov_len = 3;
	MUST(recvmsg(sp[1], &m, MSG_DONTWAIT) == 3 && !memcmp(buf, "llo", 3));
	MUST(accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK) < 0 && errno == EAGAIN);
	MUST(getrandom(buf, sizeof(buf), 0) == sizeof(buf));
	MUST(close(sp[0]) == 0);
	/* Refused quietly: the supervisor cleans the runtime directory up. */
	MUST(unlink("vsock") < 0 && errno == EPERM);
	q = malloc(1 << 20);
	MUST(q);
	q = realloc(q, 4 << 20);
	MUST(q);
	free(q);
}

static void run_execve(void)
{
	char *argv[] = { "/bin/true", NULL };

	run_allowed();
	execve(argv[0], argv, argv + 1);
}

static void run_socket(void)
{
	socket(AF_UNIX, SOCK_STREAM, 0);
}

static void run_mkdir(void)
{
	mkdir("husk-seccomp-test", 0700);
}

START_TEST(run_vm_main_list)
{
	struct outcome o;

	run_child(SECCOMP_KIND_RUN_VM_MAIN, NULL, prep, run_allowed, &o);
	assert_exit(&o, 0);
	run_child(SECCOMP_KIND_RUN_VM_MAIN, NULL, prep, run_execve, &o);
	assert_killed(&o, SECCOMP_KIND_RUN_VM_MAIN, CALL(execve));
	run_child(SECCOMP_KIND_RUN_VM_MAIN, NULL, prep, run_socket, &o);
	assert_killed(&o, SECCOMP_KIND_RUN_VM_MAIN, CALL(socket));
	run_child(SECCOMP_KIND_RUN_VM_MAIN, NULL, prep, run_mkdir, &o);
	assert_killed(&o, SECCOMP_KIND_RUN_VM_MAIN, MKDIR_CALL);
}
END_TEST

/* ---- husk template create's VM process ---- */

/*
 * The run list's calls, KVM's read-out ioctls (on a memfd they fail with
 * ENOTTY, which proves they got past the filter; arm64 saves no KVM state
 * yet and allows none) and the two files.
 */
static void template_allowed(void)
{
	static char page[4096] __attribute__((aligned(4096)));
	unsigned char vec;
#ifdef __x86_64__
	struct kvm_regs regs;
#endif

	run_allowed();
#ifdef __x86_64__
	MUST(ioctl(memfd, KVM_GET_REGS, &regs) < 0 && errno == ENOTTY);
	MUST(ioctl(memfd, KVM_GET_CLOCK, &regs) < 0 && errno == ENOTTY);
	MUST(ioctl(memfd, KVM_CHECK_EXTENSION, 0) < 0 && errno == ENOTTY);
#endif
	MUST(pwrite(memfd, "x", 1, 4096) == 1);
	MUST(ftruncate(memfd, 8192) == 0);
	MUST(mincore(page, 4096, &vec) == 0);
}

static void template_set_regs(void)
{
#ifdef __x86_64__
	struct kvm_regs regs;

	(void)ioctl(memfd, KVM_SET_REGS, &regs);
#else
	uint64_t v = 0;
	struct kvm_one_reg r = { .id = 0, .addr = (uint64_t)(uintptr_t)&v };

	(void)ioctl(memfd, KVM_SET_ONE_REG, &r);
#endif
}

static void template_openat(void)
{
	(void)open("/etc/passwd", O_RDONLY);
}

START_TEST(template_main_list)
{
	struct outcome o;

	run_child(SECCOMP_KIND_TEMPLATE_MAIN, NULL, prep, template_allowed, &o);
	assert_exit(&o, 0);
	/* Saving reads KVM state; nothing may change it. */
	run_child(SECCOMP_KIND_TEMPLATE_MAIN, NULL, prep, template_set_regs, &o);
	assert_killed(&o, SECCOMP_KIND_TEMPLATE_MAIN, CALL(ioctl));
	run_child(SECCOMP_KIND_TEMPLATE_MAIN, NULL, prep, template_openat, &o);
	assert_killed(&o, SECCOMP_KIND_TEMPLATE_MAIN, CALL(openat));
	run_child(SECCOMP_KIND_TEMPLATE_MAIN, NULL, prep, run_execve, &o);
	assert_killed(&o, SECCOMP_KIND_TEMPLATE_MAIN, CALL(execve));
}
END_TEST

/* ---- the DNS helper process ---- */

static void dns_allowed(void)
{
	struct epoll_event ev = { .events = EPOLLIN };
	struct itimerspec its = { .it_value = { 100, 0 } };
	char buf[16];
	void *p;

	common_calls();
	MUST(epoll_ctl(epfd, EPOLL_CTL_ADD, sp[1], &ev) == 0);
	MUST(send(sp[0], "q", 1, MSG_DONTWAIT) == 1);
	MUST(epoll_wait(epfd, &ev, 1, 0) == 1);
	MUST(recv(sp[1], buf, 1, MSG_DONTWAIT) == 1);
	MUST(epoll_ctl(epfd, EPOLL_CTL_DEL, sp[1], NULL) == 0);
	MUST(accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC) < 0 && errno == EAGAIN);
	MUST(timerfd_settime(tfd, 0, &its, NULL) == 0);
	MUST(read(tfd, buf, 8) < 0 && errno == EAGAIN);
	MUST(getrandom(buf, 2, GRND_NONBLOCK) == 2);
	/* malloc: small blocks from the heap, large ones mapped, realloc'd. */
	free(malloc(100));
	p = malloc(1 << 20);
	MUST(p);
	p = realloc(p, 4 << 20);
	MUST(p);
	free(p);
	MUST(close(pfd[0]) == 0);
}

static void dns_socket(void)
{
	dns_allowed();
	socket(AF_INET, SOCK_DGRAM, 0);
}

static void dns_connect(void)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };

	connect(sp[0], (struct sockaddr *)&a, sizeof(a));
}

static void dns_execve(void)
{
	char *argv[] = { "/bin/true", NULL };

	dns_allowed();
	execve(argv[0], argv, argv + 1);
}

static void dns_fork(void)
{
	syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
}

START_TEST(dns_helper_list)
{
	struct outcome o;

	run_child(SECCOMP_KIND_DNS_HELPER, NULL, prep, dns_allowed, &o);
	assert_exit(&o, 0);
	ck_assert_str_eq(o.report, "");
	run_child(SECCOMP_KIND_DNS_HELPER, NULL, prep, dns_socket, &o);
	assert_killed(&o, SECCOMP_KIND_DNS_HELPER, CALL(socket));
	run_child(SECCOMP_KIND_DNS_HELPER, NULL, prep, dns_connect, &o);
	assert_killed(&o, SECCOMP_KIND_DNS_HELPER, CALL(connect));
	run_child(SECCOMP_KIND_DNS_HELPER, NULL, prep, evloop_openat, &o);
	assert_killed(&o, SECCOMP_KIND_DNS_HELPER, CALL(openat));
	run_child(SECCOMP_KIND_DNS_HELPER, NULL, prep, dns_execve, &o);
	assert_killed(&o, SECCOMP_KIND_DNS_HELPER, CALL(execve));
	run_child(SECCOMP_KIND_DNS_HELPER, NULL, prep, dns_fork, &o);
	assert_killed(&o, SECCOMP_KIND_DNS_HELPER, CALL(clone));
	run_child(SECCOMP_KIND_DNS_HELPER, NULL, prep, evloop_exec_mmap, &o);
	assert_killed(&o, SECCOMP_KIND_DNS_HELPER, CALL(mmap));
}
END_TEST

/* ---- real threads: a new malloc arena, then the thread's exit ---- */

static void *thread_main(void *arg)
{
	const enum seccomp_kind *kind = arg;
	void *small[64], *big;
	unsigned i;

	MUST(seccomp_install(*kind) == 0);
	if (*kind != SECCOMP_KIND_EVLOOP)
		return NULL;
	/* The first malloc in this thread creates its arena (mmap, mprotect). */
	for (i = 0; i < ARRAY_LEN(small); i++)
		MUST((small[i] = calloc(1, 1000 + 100 * i)));
	big = malloc(256 * 1024);	/* a vsock connection's buffer */
	MUST(big);
	memset(big, 1, 256 * 1024);
	free(big);
	for (i = 0; i < ARRAY_LEN(small); i++)
		free(small[i]);
	return NULL;
}

static void thread_body(const void *arg)
{
	pthread_t t;

	MUST(pthread_create(&t, NULL, thread_main, (void *)arg) == 0);
	MUST(pthread_join(t, NULL) == 0);
}

START_TEST(threads_run_and_exit)
{
	static const enum seccomp_kind kinds[] = { SECCOMP_KIND_VCPU, SECCOMP_KIND_EVLOOP };
	struct outcome o;
	unsigned i;

	for (i = 0; i < ARRAY_LEN(kinds); i++) {
		spawn(NULL, thread_body, &kinds[i], &o);
		assert_exit(&o, 0);
	}
}
END_TEST

/* ---- a stopped thread resumes ---- */

/*
 * A timed futex wait, the way a mutex or condition variable sleeps. A
 * SIGSTOP or a cgroup freeze interrupts it; on SIGCONT the kernel resumes
 * it through restart_syscall, which every list must allow.
 */
static void timed_wait(void)
{
	struct timespec ts = { 0, 400 * 1000 * 1000 };
	long r;

	sh->sleeping = 1;
	r = syscall(__NR_futex, &sh->futex_word, FUTEX_WAIT_PRIVATE, 0, &ts, NULL, 0);
	MUST(r == -1 && errno == ETIMEDOUT);
}

static void stop_body(const void *arg)
{
	MUST(seccomp_install(*(const enum seccomp_kind *)arg) == 0);
	timed_wait();
}

START_TEST(stopped_and_continued)
{
	struct timespec pause = { 0, 50 * 1000 * 1000 };
	struct outcome o;
	int efd, status, k;
	pid_t pid;

	for (k = 0; k < SECCOMP_KIND__COUNT; k++) {
		pid = spawn_child(NULL, stop_body, &k, &efd);
		while (!sh->sleeping)
			nanosleep(&pause, NULL);
		nanosleep(&pause, NULL);
		ck_assert_int_eq(kill(pid, SIGSTOP), 0);
		ck_assert_int_eq(waitpid(pid, &status, WUNTRACED), pid);
		ck_assert(WIFSTOPPED(status));
		ck_assert_int_eq(kill(pid, SIGCONT), 0);
		collect(pid, efd, &o);
		ck_assert_msg(WIFEXITED(o.status) && WEXITSTATUS(o.status) == 0,
			      "%s: status 0x%x after SIGSTOP/SIGCONT (%s; %s)",
			      seccomp_kind_name(k), o.status, o.report, o.why);
	}
}
END_TEST

/*
 * ---- other ABIs ----
 * x86_64 only: an arm64 process has no way to make an AArch32 call (that
 * takes an AArch32 executable, a process of its own).
 */
#ifdef __x86_64__
static void x32_call(void)
{
	syscall(__X32_SYSCALL_BIT | __NR_getpid);
}

static void i386_call(void)
{
	long ret = 20;	/* i386 getpid */

	__asm__ volatile("int $0x80" : "+a"(ret) : : "memory");
}

START_TEST(foreign_abis)
{
	struct outcome o;

	run_child(SECCOMP_KIND_EVLOOP, NULL, prep, x32_call, &o);
	assert_killed(&o, SECCOMP_KIND_EVLOOP, "x32 ABI call (nr 0x40000027)");
	/* Even in log mode: another ABI's numbers mean other calls. */
	seccomp_env_unlocked = true;
	run_child(SECCOMP_KIND_VCPU, "log", prep, x32_call, &o);
	seccomp_env_unlocked = false;
	assert_killed(&o, SECCOMP_KIND_VCPU, "x32 ABI call");
	/* int 0x80 needs the host kernel's IA32 emulation; without it, SIGSEGV. */
	run_child(SECCOMP_KIND_BOOT_MAIN, NULL, prep, i386_call, &o);
	if (WIFSIGNALED(o.status) && WTERMSIG(o.status) == SIGSEGV) {
		unit_skip("seccomp: i386 ABI call", "the host kernel has no IA32 emulation");
		return;
	}
	assert_killed(&o, SECCOMP_KIND_BOOT_MAIN, "i386 ABI call (nr 0x14)");
}
END_TEST
#endif

/* ---- HUSK_SECCOMP ---- */

static void forbidden_but_logged(void)
{
	int fd = open("/dev/null", O_RDONLY);

	MUST(fd >= 0);
	MUST(socket(AF_INET, SOCK_DGRAM, 0) >= 0);
}

START_TEST(env_log_and_off)
{
	struct outcome o;

	/* Release builds honour log/off only where the jail is off anyway. */
	seccomp_env_unlocked = true;
	run_child(SECCOMP_KIND_VCPU, "log", prep, forbidden_but_logged, &o);
	assert_exit(&o, 0);
	ck_assert_str_eq(o.report, "");
	ck_assert_ptr_nonnull(strstr(o.err, "HUSK_SECCOMP=log"));
	run_child(SECCOMP_KIND_BOOT_MAIN, "off", prep, forbidden_but_logged, &o);
	assert_exit(&o, 0);
	ck_assert_ptr_nonnull(strstr(o.err, "HUSK_SECCOMP=off"));
	run_child(SECCOMP_KIND_BOOT_MAIN, "bogus", prep, evloop_openat, &o);
	assert_killed(&o, SECCOMP_KIND_BOOT_MAIN, "openat");
	ck_assert_ptr_nonnull(strstr(o.err, "HUSK_SECCOMP=bogus is not on, log or off"));
	seccomp_env_unlocked = false;
}
END_TEST

/* Locked (a release build, jail on): log and off are refused, filters stay. */
START_TEST(env_locked)
{
	struct outcome o;

	seccomp_env_unlocked = false;
	setenv("HUSK_SECCOMP", "off", 1);
	ck_assert_int_eq(seccomp_env_check(), -EPERM);
	ck_assert_ptr_nonnull(strstr(husk_lasterr(), "only a debug build"));
	ck_assert_int_eq(seccomp_env(), SECCOMP_ENV_ON);
	setenv("HUSK_SECCOMP", "log", 1);
	ck_assert_int_eq(seccomp_env_check(), -EPERM);
	setenv("HUSK_SECCOMP", "on", 1);
	ck_assert_int_eq(seccomp_env_check(), 0);
	unsetenv("HUSK_SECCOMP");
	ck_assert_int_eq(seccomp_env_check(), 0);
	/* Even if asked for, "off" installs the filter when locked. */
	run_child(SECCOMP_KIND_BOOT_MAIN, "off", prep, evloop_openat, &o);
	assert_killed(&o, SECCOMP_KIND_BOOT_MAIN, "openat");
}
END_TEST

/* ---- the lists themselves ---- */

START_TEST(lists_are_short)
{
	struct sock_filter f[1024];
	unsigned k;

	for (k = 0; k < SECCOMP_KIND__COUNT; k++) {
		unsigned n = seccomp_nr_allowed(k);

		/* Firecracker's VMM thread allows about 50. */
		ck_assert_msg(n >= 10 && n <= 30, "%s allows %u calls", seccomp_kind_name(k), n);
		ck_assert_int_gt(seccomp_build(k, 0, f, 1024), 0);
		ck_assert_int_gt(seccomp_build(k, 1, f, 1024), 0);
		ck_assert_int_eq(seccomp_build(k, 0, f, 10), -E2BIG);
	}
	ck_assert_int_eq(seccomp_build(SECCOMP_KIND__COUNT, 0, f, 1024), -EINVAL);
	ck_assert_str_eq(seccomp_syscall_name(__NR_openat), "openat");
	ck_assert_str_eq(seccomp_syscall_name(__NR_read), "read");
	ck_assert_ptr_null(seccomp_syscall_name(-1));
	ck_assert_ptr_null(seccomp_syscall_name(100000));
}
END_TEST

Suite *seccomp_suite(void)
{
	Suite *s = suite_create("seccomp");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, vcpu_list);
	tcase_add_test(tc, evloop_list);
	tcase_add_test(tc, boot_main_list);
	tcase_add_test(tc, run_vm_main_list);
	tcase_add_test(tc, template_main_list);
	tcase_add_test(tc, dns_helper_list);
	tcase_add_test(tc, threads_run_and_exit);
	tcase_add_test(tc, stopped_and_continued);
#ifdef __x86_64__
	tcase_add_test(tc, foreign_abis);
#endif
	tcase_add_test(tc, env_log_and_off);
	tcase_add_test(tc, env_locked);
	tcase_add_test(tc, lists_are_short);
	suite_add_tcase(s, tc);
	return s;
}
