/*
 * evloop: the per-VM device event loop, one epoll thread. See evloop.h.
 *
 * Registrations live in a table indexed by fd. The epoll cookie carries the
 * fd and the registration's generation, so an event that was collected
 * before its fd was deleted (or deleted and re-added) is recognised as stale
 * and dropped instead of reaching a callback whose state is gone.
 */
#include <errno.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "machine/evloop.h"
#include "sandbox/seccomp.h"
#include "lib/util.h"

#define EVLOOP_BATCH 32

/* evloop_start() waits on this (on its stack) until the thread is confined. */
struct loop_start {
	struct evloop *el;
	sem_t ready;
	int err;
	char msg[256];
};

static uint64_t cookie(int fd, uint32_t gen)
{
	return (uint64_t)gen << 32 | (uint32_t)fd;
}

int evloop_init(struct evloop *el)
{
	struct epoll_event ev = { .events = EPOLLIN };

	memset(el, 0, sizeof(*el));
	el->epfd = -1;
	el->wake_fd = -1;
	pthread_mutex_init(&el->lock, NULL);
	el->inited = true;
	el->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (el->epfd < 0)
		return husk_seterr(errno, "epoll_create1: %s", strerror(errno));
	el->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (el->wake_fd < 0)
		return husk_seterr(errno, "eventfd: %s", strerror(errno));
	/* The wake fd's cookie is its own fd with generation 0; regs never use 0. */
	ev.data.u64 = cookie(el->wake_fd, 0);
	if (epoll_ctl(el->epfd, EPOLL_CTL_ADD, el->wake_fd, &ev) < 0)
		return husk_seterr(errno, "epoll_ctl: %s", strerror(errno));
	return 0;
}

/* Make room for fd in the table; el->lock held. */
static int grow(struct evloop *el, int fd)
{
	unsigned n = el->nregs ? el->nregs : 64;
	struct evloop_reg *r;

	while (n <= (unsigned)fd)
		n *= 2;
	if (n == el->nregs)
		return 0;
	r = realloc(el->regs, n * sizeof(*r));
	if (!r)
		return -ENOMEM;
	memset(r + el->nregs, 0, (n - el->nregs) * sizeof(*r));
	el->regs = r;
	el->nregs = n;
	return 0;
}

static int ctl(struct evloop *el, int op, int fd, uint32_t events, evloop_cb cb,
	       void *arg)
{
	struct epoll_event ev = { .events = events };
	struct evloop_reg *r;
	int err = 0;

	if (fd < 0 || fd == el->wake_fd || (op != EPOLL_CTL_DEL && !cb))
		return husk_seterr(EINVAL, "evloop: bad registration of fd %d", fd);
	pthread_mutex_lock(&el->lock);
	if (op == EPOLL_CTL_ADD && (err = grow(el, fd))) {
		pthread_mutex_unlock(&el->lock);
		return husk_seterr(-err, "evloop: out of memory");
	}
	if ((unsigned)fd >= el->nregs || el->regs[fd].used != (op != EPOLL_CTL_ADD)) {
		pthread_mutex_unlock(&el->lock);
		return husk_seterr(op == EPOLL_CTL_ADD ? EEXIST : ENOENT,
				   "evloop: fd %d is %s registered", fd,
				   op == EPOLL_CTL_ADD ? "already" : "not");
	}
	r = &el->regs[fd];
	/* A new generation for add and del, kept for mod: pending events stay valid. */
	if (op != EPOLL_CTL_MOD && ++r->gen == 0)
		r->gen = 1;
	ev.data.u64 = cookie(fd, r->gen);
	if (epoll_ctl(el->epfd, op, fd, &ev) < 0) {
		err = husk_seterr(errno, "epoll_ctl on fd %d: %s", fd, strerror(errno));
	} else if (op == EPOLL_CTL_DEL) {
		r->used = false;
		r->cb = NULL;
		r->arg = NULL;
	} else {
		r->used = true;
		r->cb = cb;
		r->arg = arg;
	}
	pthread_mutex_unlock(&el->lock);
	return err;
}

int evloop_add(struct evloop *el, int fd, uint32_t events, evloop_cb cb, void *arg)
{
	return ctl(el, EPOLL_CTL_ADD, fd, events, cb, arg);
}

int evloop_mod(struct evloop *el, int fd, uint32_t events, evloop_cb cb, void *arg)
{
	return ctl(el, EPOLL_CTL_MOD, fd, events, cb, arg);
}

int evloop_del(struct evloop *el, int fd)
{
	return ctl(el, EPOLL_CTL_DEL, fd, 0, NULL, NULL);
}

/* Look the event's registration up again: it may have gone since epoll_wait. */
static void dispatch(struct evloop *el, const struct epoll_event *ev)
{
	int fd = (int)(uint32_t)ev->data.u64;
	uint32_t gen = ev->data.u64 >> 32;
	evloop_cb cb = NULL;
	void *arg = NULL;

	pthread_mutex_lock(&el->lock);
	if ((unsigned)fd < el->nregs && el->regs[fd].used && el->regs[fd].gen == gen) {
		cb = el->regs[fd].cb;
		arg = el->regs[fd].arg;
	}
	pthread_mutex_unlock(&el->lock);
	if (cb)
		cb(arg, ev->events);
}

/* Run one batch of events; true if the wake fd (stop) was among them. */
static bool run_batch(struct evloop *el, int timeout_ms)
{
	struct epoll_event evs[EVLOOP_BATCH];
	bool stop = false;
	int n, i;

	n = epoll_wait(el->epfd, evs, EVLOOP_BATCH, timeout_ms);
	if (n < 0 && errno != EINTR) {
		husk_msg("device event loop: epoll_wait: %s", strerror(errno));
		return true;
	}
	for (i = 0; i < n; i++) {
		if (evs[i].data.u64 == cookie(el->wake_fd, 0))
			stop = true;
		else
			dispatch(el, &evs[i]);
	}
	return stop;
}

static void *loop_thread(void *arg)
{
	struct loop_start *st = arg;
	struct evloop *el = st->el;
	sigset_t all;
	int err = 0;

	/* Signals belong to the main thread (signalfd) and the vCPUs (kick). */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	/* After the mask: installing unblocks SIGSYS for the violation report. */
	if (el->seccomp && (err = seccomp_install(SECCOMP_KIND_EVLOOP)))
		snprintf(st->msg, sizeof(st->msg), "%s", husk_lasterr());
	st->err = err;
	sem_post(&st->ready);	/* st is gone from here on */
	if (err)
		return NULL;
	while (!run_batch(el, -1))
		;
	/*
	 * One last non-blocking pass: work the guest queued just before it
	 * stopped (a notify, then power-off) is still served. One pass only, so
	 * an always-readable fd cannot hold the stop up.
	 */
	run_batch(el, 0);
	return NULL;
}

int evloop_start(struct evloop *el)
{
	struct loop_start st = { .el = el };
	int err;

	if (el->running)
		return 0;
	sem_init(&st.ready, 0, 0);
	err = husk_thread_create(&el->thread, loop_thread, &st);
	if (err) {
		sem_destroy(&st.ready);
		return husk_seterr(err, "cannot start the device event loop: %s", strerror(err));
	}
	while (sem_wait(&st.ready) < 0 && errno == EINTR)
		;
	sem_destroy(&st.ready);
	if (st.err) {
		pthread_join(el->thread, NULL);
		return husk_seterr(st.err, "device event loop: %s", st.msg);
	}
	el->running = true;
	return 0;
}

void evloop_stop(struct evloop *el)
{
	uint64_t v, one = 1;

	if (!el->running)
		return;
	if (write(el->wake_fd, &one, sizeof(one)) < 0)
		husk_msg("device event loop: cannot wake it: %s", strerror(errno));
	pthread_join(el->thread, NULL);
	el->running = false;
	/* Drain the wake count so the loop could be started again. */
	if (read(el->wake_fd, &v, sizeof(v)) < 0)
		(void)0;
}

void evloop_free(struct evloop *el)
{
	if (!el->inited)
		return;
	evloop_stop(el);
	if (el->epfd >= 0)
		close(el->epfd);
	if (el->wake_fd >= 0)
		close(el->wake_fd);
	free(el->regs);
	pthread_mutex_destroy(&el->lock);
	memset(el, 0, sizeof(*el));
	el->epfd = el->wake_fd = -1;
}

/* ---- serving on the caller's thread (a single-threaded helper process) ---- */

int evloop_run_once(struct evloop *el, int timeout_ms)
{
	if (!el->inited || el->running)
		return husk_seterr(EINVAL, "evloop: not initialised, or its thread runs it");
	return run_batch(el, timeout_ms) ? 1 : 0;
}
