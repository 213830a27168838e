/*
 * seccomp: per-thread system call allowlists. See seccomp.h.
 *
 * The lists below are tables; seccomp_build() turns one into classic BPF
 * (no libseccomp): the ABI check, then one block per entry that returns as
 * soon as the call number matches, then the default action. Every block
 * ends in a return, so each jump only skips inside its own block and the
 * 8-bit BPF jump offsets never overflow however long a list grows.
 *
 * Argument checks look at the low 32 bits of an argument only. That is
 * exact for what we check: the kernel takes ioctl's request, socket's
 * family, epoll_ctl's op and tgkill's ids and signal as 32-bit ints, and
 * PROT_EXEC is a low bit of mmap/mprotect's prot.
 *
 * Calls glibc makes on our behalf count too: pthread_kill() is getpid +
 * rt_sigprocmask + tgkill, a thread's exit is rt_sigprocmask + madvise (its
 * stack) + exit, and malloc in a new thread creates an arena with mmap +
 * mprotect. (stdio's first write to a stream it buffers would fstat it and
 * ask for a tty; no list allows that.)
 *
 * One set of lists serves x86_64 and arm64: the names are the ABI's own
 * (__NR_* from the compiler's <asm/unistd.h>). arm64 lacks the calls its
 * newer forms replaced, and there glibc makes the newer one for the same
 * function: POLL_CALL and friends below name what each arch's glibc uses.
 * Only the KVM ioctls differ in substance (x86's register and state calls
 * have no arm64 twins).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/kvm.h>
#include <linux/seccomp.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "config.h"
#include "sandbox/seccomp.h"
#include "lib/util.h"
#include "machine/vm.h"

#if defined(__x86_64__)
#define HOST_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define HOST_AUDIT_ARCH AUDIT_ARCH_AARCH64
#else
#error "the seccomp allowlists are written for x86_64 and arm64"
#endif
/* load_arg() reads an argument's low half at its first bytes. */
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the seccomp argument checks assume a little-endian ABI"
#endif
/* si_code of a filter's SIGSYS: the kernel's value, which glibc does not export. */
#ifndef SYS_SECCOMP
#define SYS_SECCOMP 1
#endif

/* Every syscall name of this ABI, generated from <asm/unistd.h>. */
static const char *const syscall_names[] = {
#include "syscall_names.h"
};

enum check_op {
	CK_NONE,
	CK_IN,		/* argument is one of v[0..n) */
	CK_SELF_PID,	/* argument is this process's pid (at install time) */
	CK_CLEAR,	/* argument has none of the bits v[0] */
};

struct arg_check {
	uint8_t op;
	uint8_t arg;		/* 0..5 */
	uint8_t n;
	uint32_t v[20];
};

struct rule {
	int nr;
	uint32_t ret;		/* 0: allow; else this action (SECCOMP_RET_ERRNO | e) */
	struct arg_check c[2];	/* all must hold, else the default action */
};

#define NVALS(...) (sizeof((uint32_t[]){ __VA_ARGS__ }) / sizeof(uint32_t))
#define IN(a, ...) { CK_IN, (a), NVALS(__VA_ARGS__), { __VA_ARGS__ } }
#define SELF_PID(a) { CK_SELF_PID, (a), 0, { 0 } }
#define CLEAR(a, bits) { CK_CLEAR, (a), 1, { (bits) } }
#define ALLOW(name) { .nr = __NR_##name }
#define CHECKED(name, ...) { .nr = __NR_##name, .c = { __VA_ARGS__ } }
#define REFUSE(name, e) { .nr = __NR_##name, .ret = SECCOMP_RET_ERRNO | (e) }

/*
 * The calls glibc makes for poll(), epoll_wait() and unlink(): on arm64
 * ppoll, epoll_pwait and unlinkat(AT_FDCWD, path, 0), since it has no
 * others. The unlinkat check keeps it to what unlink() can do: AT_FDCWD
 * (negative, so compared by its low half) and no AT_REMOVEDIR.
 */
#ifdef __NR_poll
#define POLL_CALL ALLOW(poll)
#else
#define POLL_CALL ALLOW(ppoll)
#endif
#ifdef __NR_epoll_wait
#define EPOLL_WAIT_CALL ALLOW(epoll_wait)
#else
#define EPOLL_WAIT_CALL ALLOW(epoll_pwait)
#endif
#ifdef __NR_unlink
#define UNLINK_CALL ALLOW(unlink)
#define UNLINK_REFUSED(e) REFUSE(unlink, e)
#else
#define UNLINK_CALL CHECKED(unlinkat, IN(0, (uint32_t)AT_FDCWD), IN(2, 0))
#define UNLINK_REFUSED(e) REFUSE(unlinkat, e)
#endif

/* Every kind: what the SIGSYS handler, locks, clocks and glibc need. */
static const struct rule common_rules[] = {
	ALLOW(write),		/* console, eventfds (irqfd, kicks, stop), stderr, the report */
	ALLOW(futex),		/* pthread mutexes and joins */
	ALLOW(rt_sigprocmask),	/* glibc masks signals in pthread_kill() and thread exit */
	ALLOW(clock_gettime),	/* now_us() when the vDSO falls back to the kernel */
	ALLOW(madvise),		/* thread exit drops its stack; malloc returns heap pages */
	ALLOW(rt_sigreturn),	/* return from the vCPU kick handler */
	ALLOW(restart_syscall),	/* a stop (SIGSTOP, a freezer, a debugger) resumes a sleep */
	ALLOW(exit_group),	/* process exit, also the SIGSYS handler's */
};

#ifdef HUSK_SANITIZED
/*
 * ASan/UBSan builds only (./configure --enable-sanitizers): the sanitizer
 * runtime maps its own memory and alternate signal stacks in every thread.
 * Not counted by seccomp_nr_allowed(); release builds never have these.
 */
static const struct rule san_rules[] = {
	ALLOW(sigaltstack),
	CHECKED(mmap, CLEAR(2, PROT_EXEC)),
	CHECKED(mprotect, CLEAR(2, PROT_EXEC)),
	ALLOW(munmap),
	ALLOW(sched_yield),
	ALLOW(gettid),
	ALLOW(getpid),
};
#endif

/* vm_stop() kicks each vCPU out of KVM_RUN with pthread_kill(). */
#define KICK_RULES \
	CHECKED(tgkill, SELF_PID(0), IN(2, VCPU_KICK_SIGNAL)), \
	ALLOW(getpid)		/* pthread_kill() passes it to tgkill */

/* vm.c vcpu_thread(), handle_exit(), the arch's exits and the MMIO registers. */
static const struct rule vcpu_rules[] = {
#if defined(__x86_64__)
	CHECKED(ioctl, IN(1, KVM_RUN,	/* first: by far the most frequent call */
			  KVM_IRQ_LINE,	/* COM1 interrupt from the UART */
			  KVM_GET_REGS,	/* rip and its translation for the */
			  KVM_TRANSLATE)),	/* KVM internal error report */
#else
	CHECKED(ioctl, IN(1, KVM_RUN,	/* first: by far the most frequent call */
			  KVM_IRQ_LINE,	/* the UART's SPI */
			  KVM_GET_ONE_REG)),	/* pc: the profiler, the internal error report */
#endif
	CHECKED(epoll_ctl, IN(1, EPOLL_CTL_DEL)),	/* virtio-net reset stops polling the tap */
	KICK_RULES,
	ALLOW(exit),		/* the thread ends */
};

/* evloop.c and the device backends it runs: blk, rng, vsock, net. */
static const struct rule evloop_rules[] = {
	EPOLL_WAIT_CALL,	/* the loop itself */
	ALLOW(read),		/* ioeventfds, work and kick eventfds, the vsock timerfd */
	ALLOW(preadv),		/* virtio-blk requests on the image fd */
	ALLOW(pwritev),
	ALLOW(fdatasync),	/* virtio-blk flush */
	ALLOW(getrandom),	/* virtio-rng */
	ALLOW(readv),		/* frames from the tap, vsock data from host sockets */
	ALLOW(writev),		/* frames to the tap */
	ALLOW(epoll_ctl),	/* sockets and the tap come and go */
	CHECKED(socket, IN(0, AF_UNIX)),	/* vsock: guest connects to <uds>_<port> */
	ALLOW(connect),
	ALLOW(accept4),		/* vsock: host clients of the listening socket */
	ALLOW(sendto),		/* vsock: send() of replies and buffered guest data */
	ALLOW(recvfrom),	/* vsock: recv() of a host client's CONNECT line */
	ALLOW(sendmsg),		/* vsock: guest data straight from the ring */
	ALLOW(shutdown),	/* vsock: the guest stopped sending */
	ALLOW(close),		/* vsock connections */
	ALLOW(timerfd_settime),	/* vsock: connect and close timeouts */
	CHECKED(mmap, CLEAR(2, PROT_EXEC)),	/* malloc: this thread's arena, vsock buffers */
	CHECKED(mprotect, CLEAR(2, PROT_EXEC)),	/* malloc: an arena heap grows */
	ALLOW(munmap),
	ALLOW(exit),		/* the thread ends */
};

/*
 * husk.c cmd_boot() after vm_start(): event_loop(), vm_destroy(), the report.
 * stdout's stdio buffer is set beforehand, so the --json record needs no
 * fstat or tty ioctl.
 */
static const struct rule boot_main_rules[] = {
	POLL_CALL,		/* stop fd, signalfd, stdin */
	ALLOW(read),		/* stdin for the guest's UART, signalfd, the loop's wake fd */
	CHECKED(ioctl, IN(1, KVM_IRQ_LINE)),	/* stdin bytes raise COM1's interrupt */
	KICK_RULES,		/* timeout and signals stop the VM from here */
	ALLOW(close),		/* teardown: device, vCPU, VM and KVM fds */
	ALLOW(sendto),		/* teardown: vsock tells waiting host clients the VM stopped */
	ALLOW(munmap),		/* teardown: vCPU run areas, guest RAM */
	ALLOW(brk),		/* malloc: stdout's buffer */
	CHECKED(mmap, CLEAR(2, PROT_EXEC)),
	UNLINK_CALL,		/* teardown: virtio-vsock removes its --vsock socket */
};

/*
 * husk run's VM process after vm_start(): the job loop over guest-init's
 * control socket, the supervisor channel, stdin and the signalfd, then
 * vm_destroy(). Host files are the supervisor's: no open, mkdir, rename.
 */
#define RUN_MAIN_RULES \
	POLL_CALL,		/* the job loop; proto_send()'s bounded wait */ \
	ALLOW(read),		/* control socket, stdin, signalfd, the loop's wake fd */ \
	ALLOW(sendmsg),		/* frames to guest-init, messages to the supervisor */ \
	ALLOW(recvfrom),	/* recv() from the supervisor channel */ \
	ALLOW(recvmsg), \
	ALLOW(accept4),		/* guest-init's control connection */ \
	ALLOW(pread64),		/* --put streams from the fd the supervisor passed */ \
	ALLOW(getrandom),	/* the job's RNG seed */ \
	KICK_RULES,		/* deadline, signals and failures stop the VM from here */ \
	ALLOW(close), \
	ALLOW(sendto),		/* teardown: vsock tells waiting host clients the VM stopped */ \
	ALLOW(munmap),		/* teardown: vCPU run areas, guest RAM; large frees */ \
	ALLOW(brk),		/* malloc: frames, the job description, zlib */ \
	CHECKED(mmap, CLEAR(2, PROT_EXEC)), \
	ALLOW(mremap),		/* realloc of large buffers */ \
	/* \
	 * virtio-vsock's teardown unlinks its socket; the supervisor removes \
	 * the whole runtime directory, so a quiet EPERM is enough here. \
	 */ \
	UNLINK_REFUSED(EPERM)

static const struct rule run_main_rules[] = {
	RUN_MAIN_RULES,
};

/*
 * husk template create's VM process: the same loop, and at guest-init's
 * HELLO vm_snapshot(): only KVM's read-out calls, the vCPUs' last KVM_RUN
 * (immediate_exit, pending I/O), and the two files the supervisor opened.
 * arm64 reads its registers one by one and the GIC through its device fd.
 */
static const struct rule template_main_rules[] = {
#if defined(__x86_64__)
	CHECKED(ioctl, IN(1, KVM_RUN, KVM_GET_REGS, KVM_GET_SREGS, KVM_GET_XSAVE,
#ifdef KVM_GET_XSAVE2
			  KVM_GET_XSAVE2,
#endif
			  KVM_GET_XCRS, KVM_GET_DEBUGREGS, KVM_GET_LAPIC, KVM_GET_MSRS,
			  KVM_GET_MP_STATE, KVM_GET_VCPU_EVENTS, KVM_GET_CPUID2, KVM_GET_CLOCK,
			  KVM_GET_IRQCHIP, KVM_GET_PIT2, KVM_GET_MSR_INDEX_LIST,
			  KVM_CHECK_EXTENSION)),
#else
	CHECKED(ioctl, IN(1, KVM_RUN, KVM_GET_REG_LIST, KVM_GET_ONE_REG, KVM_GET_MP_STATE,
			  KVM_GET_DEVICE_ATTR, KVM_CHECK_EXTENSION)),
#endif
	ALLOW(pwrite64),	/* the state file and the RAM image */
	ALLOW(ftruncate),	/* the image's size: holes for untouched RAM */
	ALLOW(mincore),		/* which RAM pages the guest ever touched */
	RUN_MAIN_RULES,
};

/*
 * The DNS helper process (dns_helper.c): dns_proxy.c on evloop_run_once()
 * over the sockets the supervisor made for it, and its learn channel. No
 * socket, connect, bind or open: it can only use the sockets it was given,
 * in a network namespace of its own where a new one would reach nothing.
 */
static const struct rule dns_helper_rules[] = {
	EPOLL_WAIT_CALL,	/* its loop */
	ALLOW(recvfrom),	/* guest queries, upstream answers, acks from the supervisor */
	ALLOW(sendto),		/* answers to the guest, our queries, learn requests */
	ALLOW(accept4),		/* the guest's TCP connections */
	ALLOW(epoll_ctl),	/* which come and go */
	ALLOW(close),
	ALLOW(read),		/* the deadline timerfd */
	ALLOW(timerfd_settime),
	ALLOW(getrandom),	/* query IDs */
	ALLOW(brk),		/* malloc: TCP answer queues */
	CHECKED(mmap, CLEAR(2, PROT_EXEC)),
	ALLOW(mremap),		/* realloc of a large queue */
	ALLOW(munmap),
};

/*
 * husk-metrics (serve/metrics_helper.c): libmicrohttpd on the listening
 * socket serve handed it, one thread of its own on epoll, and the main
 * thread asking serve for the text over their pair. No open, socket,
 * connect or exec: it can only answer on the sockets it was given. Its
 * one thread is made with clone and glibc's fixed thread flags (clone3
 * takes its flags in memory, out of a filter's sight: refused with ENOSYS,
 * which glibc answers with clone).
 */
#define METRICS_THREAD_FLAGS (CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD | \
			      CLONE_SYSVSEM | CLONE_SETTLS | CLONE_PARENT_SETTID | \
			      CLONE_CHILD_CLEARTID)
static const struct rule metrics_rules[] = {
	EPOLL_WAIT_CALL,	/* libmicrohttpd's loop */
	POLL_CALL,		/* the main thread waits for serve to go */
	ALLOW(epoll_create1),	/* libmicrohttpd's, made when it starts */
	ALLOW(epoll_ctl),
	ALLOW(accept4),		/* scrapers */
	ALLOW(recvfrom),	/* requests; serve's answers */
	ALLOW(sendto),		/* responses; requests to serve */
	ALLOW(sendmsg),
	ALLOW(shutdown),
	ALLOW(close),
	ALLOW(fcntl),		/* the listening socket made non-blocking */
	ALLOW(setsockopt),	/* TCP_NODELAY on a connection */
	ALLOW(getsockopt),	/* the listening socket's family, */
	ALLOW(getsockname),	/* and address */
	CHECKED(clone, IN(0, METRICS_THREAD_FLAGS)),
	REFUSE(clone3, ENOSYS),
	ALLOW(rseq),		/* the new thread's start (glibc insists) */
	REFUSE(set_robust_list, ENOSYS),	/* ... (robust mutexes: none here) */
	ALLOW(rt_sigaction),	/* glibc's handler for its own thread signal */
	REFUSE(prctl, EPERM),	/* libmicrohttpd names its thread: it may not */
	/* The time zone for a date header: nothing to find in an empty root anyway. */
	REFUSE(openat, ENOENT),
	ALLOW(brk),		/* malloc */
	REFUSE(mremap, ENOMEM),	/* realloc copies instead */
	CHECKED(mmap, CLEAR(2, PROT_EXEC)),	/* the thread's stack and arena, large answers */
	CHECKED(mprotect, CLEAR(2, PROT_EXEC)),
	ALLOW(munmap),
	ALLOW(exit),		/* the thread ends */
};

struct rule_list {
	const char *name;
	const struct rule *r;
	unsigned n;
};

static const struct rule_list lists[SECCOMP_KIND__COUNT] = {
	[SECCOMP_KIND_VCPU] = { "vCPU", vcpu_rules, ARRAY_SIZE(vcpu_rules) },
	[SECCOMP_KIND_EVLOOP] = { "device event loop", evloop_rules, ARRAY_SIZE(evloop_rules) },
	[SECCOMP_KIND_BOOT_MAIN] = { "boot main", boot_main_rules, ARRAY_SIZE(boot_main_rules) },
	[SECCOMP_KIND_RUN_VM_MAIN] = { "run VM main", run_main_rules,
				       ARRAY_SIZE(run_main_rules) },
	[SECCOMP_KIND_DNS_HELPER] = { "DNS helper", dns_helper_rules,
				      ARRAY_SIZE(dns_helper_rules) },
	[SECCOMP_KIND_TEMPLATE_MAIN] = { "template VM main", template_main_rules,
					 ARRAY_SIZE(template_main_rules) },
	[SECCOMP_KIND_METRICS] = { "husk-metrics", metrics_rules, ARRAY_SIZE(metrics_rules) },
};

const char *seccomp_kind_name(enum seccomp_kind kind)
{
	return (unsigned)kind < SECCOMP_KIND__COUNT ? lists[kind].name : "unknown";
}

const char *seccomp_syscall_name(long nr)
{
	if (nr < 0 || (unsigned long)nr >= ARRAY_SIZE(syscall_names))
		return NULL;
	return syscall_names[nr];
}

static bool listed(const struct rule *r, unsigned n, int nr)
{
	unsigned i;

	for (i = 0; i < n; i++)
		if (r[i].nr == nr && !r[i].ret)
			return true;
	return false;
}

unsigned seccomp_nr_allowed(enum seccomp_kind kind)
{
	const struct rule_list *l;
	unsigned i, count = 0;

	if ((unsigned)kind >= SECCOMP_KIND__COUNT)
		return 0;
	l = &lists[kind];
	for (i = 0; i < l->n; i++)
		if (!l->r[i].ret && !listed(l->r, i, l->r[i].nr))
			count++;
	for (i = 0; i < ARRAY_SIZE(common_rules); i++)
		if (!listed(l->r, l->n, common_rules[i].nr) &&
		    !listed(common_rules, i, common_rules[i].nr))
			count++;
	return count;
}

/* ---- BPF assembly ---- */

struct prog {
	struct sock_filter *f;
	unsigned n, max;
	bool overflow;
};

static void emit(struct prog *p, uint16_t code, uint32_t k, unsigned jt, unsigned jf)
{
	if (p->n >= p->max || jt > 255 || jf > 255) {
		p->overflow = true;
		return;
	}
	p->f[p->n++] = (struct sock_filter)BPF_JUMP(code, k, jt, jf);
}

static void load_arg(struct prog *p, unsigned arg)
{
	/* Low half of the little-endian 64-bit argument. */
	emit(p, BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args) + 8 * arg, 0, 0);
}

/* One check; falls through when it holds, returns deny when it does not. */
static void emit_check(struct prog *p, const struct arg_check *c, uint32_t deny)
{
	const uint32_t *v = c->v;
	unsigned i, n = c->n;
	uint32_t pid;

	if (c->op == CK_SELF_PID) {
		pid = (uint32_t)getpid();
		v = &pid;
		n = 1;
	}

	load_arg(p, c->arg);
	if (c->op == CK_CLEAR) {
		emit(p, BPF_JMP | BPF_JSET | BPF_K, c->v[0], 0, 1);
	} else {
		/* A match jumps over the remaining values and the deny. */
		for (i = 0; i < n; i++)
			emit(p, BPF_JMP | BPF_JEQ | BPF_K, v[i], n - i, 0);
	}
	emit(p, BPF_RET | BPF_K, deny, 0, 0);
}

/* "if (nr == r->nr) { checks; return action; }" with A holding nr. */
static void emit_rule(struct prog *p, const struct rule *r, uint32_t deny)
{
	unsigned at = p->n, i, skip;

	emit(p, BPF_JMP | BPF_JEQ | BPF_K, r->nr, 0, 0);
	for (i = 0; i < ARRAY_SIZE(r->c) && r->c[i].op != CK_NONE; i++)
		emit_check(p, &r->c[i], deny);
	emit(p, BPF_RET | BPF_K, r->ret ? r->ret : SECCOMP_RET_ALLOW, 0, 0);
	if (p->overflow)
		return;
	skip = p->n - at - 1;
	if (skip > 255)
		p->overflow = true;
	else
		p->f[at].jf = skip;
}

int seccomp_build(enum seccomp_kind kind, int log, struct sock_filter *out, unsigned max)
{
	/* RET_DATA tells the SIGSYS handler which kind refused the call. */
	uint32_t trap = SECCOMP_RET_TRAP | (uint32_t)kind;
	uint32_t deny = log ? SECCOMP_RET_LOG : trap;
	struct prog p = { .f = out, .max = max };
	const struct rule_list *l;
	unsigned i;

	if ((unsigned)kind >= SECCOMP_KIND__COUNT)
		return -EINVAL;
	l = &lists[kind];
	/*
	 * Another ABI's numbers (i386 or x32 on x86_64, AArch32 on arm64)
	 * would meet our checks with other meanings: never allowed.
	 */
	emit(&p, BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch), 0, 0);
	emit(&p, BPF_JMP | BPF_JEQ | BPF_K, HOST_AUDIT_ARCH, 1, 0);
	emit(&p, BPF_RET | BPF_K, trap, 0, 0);
	emit(&p, BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr), 0, 0);
#ifdef __x86_64__
	/* x32 shares AUDIT_ARCH_X86_64 and sets this bit in the number. */
	emit(&p, BPF_JMP | BPF_JGE | BPF_K, __X32_SYSCALL_BIT, 0, 1);
	emit(&p, BPF_RET | BPF_K, trap, 0, 0);
#endif
	for (i = 0; i < l->n; i++)
		emit_rule(&p, &l->r[i], deny);
	for (i = 0; i < ARRAY_SIZE(common_rules); i++)
		emit_rule(&p, &common_rules[i], deny);
#ifdef HUSK_SANITIZED
	for (i = 0; i < ARRAY_SIZE(san_rules); i++)
		emit_rule(&p, &san_rules[i], deny);
#endif
	emit(&p, BPF_RET | BPF_K, deny, 0, 0);
	return p.overflow ? -E2BIG : (int)p.n;
}

/* ---- the SIGSYS handler: async-signal-safe code only ---- */

static char *volatile report_buf;
static volatile size_t report_len;
static int reported;

void seccomp_set_report(char *buf, size_t len)
{
	/* Never let the handler see a buffer with another buffer's length. */
	__atomic_store_n(&report_buf, NULL, __ATOMIC_SEQ_CST);
	report_len = buf ? len : 0;
	__atomic_store_n(&report_buf, buf, __ATOMIC_SEQ_CST);
}

static size_t put_str(char *d, size_t at, size_t cap, const char *s)
{
	while (*s && at < cap)
		d[at++] = *s++;
	return at;
}

static size_t put_num(char *d, size_t at, size_t cap, unsigned long v, unsigned base)
{
	char tmp[24];
	unsigned n = 0;

	do {
		tmp[n++] = "0123456789abcdef"[v % base];
		v /= base;
	} while (v);
	while (n && at < cap)
		d[at++] = tmp[--n];
	return at;
}

/* What the report says instead of a name for another ABI's call; NULL for ours. */
static const char *foreign_abi(unsigned arch, unsigned nr)
{
	if (arch != HOST_AUDIT_ARCH) {
#ifdef __x86_64__
		if (arch == AUDIT_ARCH_I386)
			return "i386 ABI call";
#endif
		return "foreign ABI call";
	}
#ifdef __x86_64__
	if (nr & __X32_SYSCALL_BIT)
		return "x32 ABI call";
#endif
	return NULL;
}

static void sigsys_handler(int sig, siginfo_t *si, void *uc)
{
	static const char prefix[] = "husk: ";
	unsigned kind = (unsigned)si->si_errno;	/* the filter's RET_DATA */
	unsigned nr = (unsigned)si->si_syscall;
	const char *name = seccomp_syscall_name(nr), *abi;
	char msg[200];
	size_t n = 0, cap = sizeof(msg) - 1, len, i;
	char *buf;

	(void)sig;
	(void)uc;
	n = put_str(msg, n, cap, prefix);
	if (si->si_code != SYS_SECCOMP) {
		n = put_str(msg, n, cap, "seccomp: SIGSYS from outside the filter");
	} else {
		n = put_str(msg, n, cap, "seccomp: ");
		n = put_str(msg, n, cap, seccomp_kind_name(kind));
		n = put_str(msg, n, cap, " thread made a forbidden system call: ");
		abi = foreign_abi(si->si_arch, nr);
		if (abi) {
			n = put_str(msg, n, cap, abi);
			name = NULL;
		}
		if (name) {
			n = put_str(msg, n, cap, name);
			n = put_str(msg, n, cap, " (nr ");
			n = put_num(msg, n, cap, nr, 10);
		} else {
			n = put_str(msg, n, cap, " (nr 0x");
			n = put_num(msg, n, cap, nr, 16);
		}
		n = put_str(msg, n, cap, ")");
	}
	/* The report: first caller only, without "husk: " and the newline. */
	buf = __atomic_load_n(&report_buf, __ATOMIC_SEQ_CST);
	len = report_len;
	if (buf && len && !__atomic_exchange_n(&reported, 1, __ATOMIC_SEQ_CST)) {
		for (i = 0; i + sizeof(prefix) - 1 < n && i < len - 1; i++)
			buf[i] = msg[i + sizeof(prefix) - 1];
		buf[i] = '\0';
	}
	msg[n++] = '\n';
	if (write(STDERR_FILENO, msg, n) < 0)
		(void)0;	/* nowhere else to say it */
	syscall(SYS_exit_group, 128 + SIGSYS);
}

/* ---- installation ---- */

static bool warn_once(int *flag)
{
	return !__atomic_exchange_n(flag, 1, __ATOMIC_SEQ_CST);
}

#ifdef HUSK_DEBUG_BUILD
bool seccomp_env_unlocked = true;
#else
bool seccomp_env_unlocked;
#endif

/* HUSK_SECCOMP as written, whether or not it may take effect. */
static enum seccomp_env env_asked(void)
{
	static int warned;
	const char *e = getenv("HUSK_SECCOMP");

	if (!e || !*e || !strcmp(e, "on"))
		return SECCOMP_ENV_ON;
	if (!strcmp(e, "log"))
		return SECCOMP_ENV_LOG;
	if (!strcmp(e, "off"))
		return SECCOMP_ENV_OFF;
	if (warn_once(&warned))
		husk_msg("warning: HUSK_SECCOMP=%s is not on, log or off; using on", e);
	return SECCOMP_ENV_ON;
}

int seccomp_env_check(void)
{
	enum seccomp_env e = env_asked();

	if (e == SECCOMP_ENV_ON || seccomp_env_unlocked)
		return 0;
	return husk_seterr(EPERM, "HUSK_SECCOMP=%s would weaken husk's system call filters: only "
			   "a debug build (./configure --enable-debug) honours it; to debug "
			   "without the jail use husk run --no-jail", e == SECCOMP_ENV_LOG ?
			   "log" : "off");
}

enum seccomp_env seccomp_env(void)
{
	enum seccomp_env e = env_asked();

	/* Locked: whatever the environment says, the filters stay on. */
	return seccomp_env_unlocked ? e : SECCOMP_ENV_ON;
}

static void pin_malloc(void)
{
	/*
	 * Fixed thresholds also stop glibc from adapting them. 128 MiB is
	 * above a thread heap's 64 MiB maximum, so shrink_heap(), which opens
	 * /proc/sys/vm/overcommit_memory on first use, is never reached; large
	 * blocks stay mmapped and go back with munmap.
	 */
	mallopt(M_TRIM_THRESHOLD, 128 << 20);
	mallopt(M_MMAP_THRESHOLD, 128 << 10);
}

static int install_handler(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	struct sigaction sa;
	sigset_t set;
	int err;

	pthread_once(&once, pin_malloc);
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = sigsys_handler;
	sa.sa_flags = SA_SIGINFO;
	sigfillset(&sa.sa_mask);
	if (sigaction(SIGSYS, &sa, NULL) < 0)
		return husk_seterr(errno, "seccomp: SIGSYS handler: %s", strerror(errno));
	sigemptyset(&set);
	sigaddset(&set, SIGSYS);
	err = pthread_sigmask(SIG_UNBLOCK, &set, NULL);
	if (err)
		return husk_seterr(err, "seccomp: cannot unblock SIGSYS: %s", strerror(err));
	return 0;
}

int seccomp_install(enum seccomp_kind kind)
{
	static int warned_off, warned_log;
	struct sock_filter f[512];	/* the longest list needs about 100 */
	struct sock_fprog prog;
	enum seccomp_env env = seccomp_env();
	int n, err;

	if (env == SECCOMP_ENV_OFF) {
		if (warn_once(&warned_off))
			husk_msg("warning: HUSK_SECCOMP=off: husk runs without its system call "
				 "filters");
		return 0;
	}
	if (env == SECCOMP_ENV_LOG && warn_once(&warned_log))
		husk_msg("warning: HUSK_SECCOMP=log: forbidden system calls are only logged "
			 "by the kernel (see dmesg or the audit log)");
	n = seccomp_build(kind, env == SECCOMP_ENV_LOG, f, ARRAY_SIZE(f));
	if (n < 0)
		return husk_seterr(n, "seccomp: the %s filter does not fit in BPF",
				   seccomp_kind_name(kind));
	err = install_handler();
	if (err)
		return err;
	/* Required for an unprivileged filter; also keeps setuid binaries powerless. */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return husk_seterr(errno, "seccomp: PR_SET_NO_NEW_PRIVS: %s", strerror(errno));
	prog.len = n;
	prog.filter = f;
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
		return husk_seterr(errno, "seccomp: cannot install the %s filter: %s (set "
				   "HUSK_SECCOMP=off to run without it)",
				   seccomp_kind_name(kind), strerror(errno));
	return 0;
}
