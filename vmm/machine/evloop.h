/*
 * evloop: the device event loop, one epoll thread per VM. Device backends
 * (queue notifications through ioeventfds, host sockets, timers) register fds
 * with a callback; callbacks run on the loop thread only, so a backend needs
 * no locking against itself.
 */
#ifndef HUSK_EVLOOP_H
#define HUSK_EVLOOP_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

typedef void (*evloop_cb)(void *arg, uint32_t events);

/* One registered fd (internal to evloop.c). */
struct evloop_reg {
	evloop_cb cb;
	void *arg;
	uint32_t gen;		/* bumped on every add/del: stale events are dropped */
	bool used;
};

struct evloop {
	int epfd;
	int wake_fd;		/* eventfd used to stop the loop */
	pthread_t thread;
	bool running;
	pthread_mutex_t lock;	/* regs vs. evloop_add/del from other threads */
	struct evloop_reg *regs;	/* indexed by fd */
	unsigned nregs;
	bool inited;
	/*
	 * Set between evloop_init() and evloop_start(): the loop thread
	 * confines itself (SECCOMP_KIND_EVLOOP) before serving anything, and
	 * evloop_start() fails if it could not.
	 */
	bool seccomp;
};

/* A zeroed struct evloop is safe to evloop_free() even if init never ran. */
int evloop_init(struct evloop *el);
/*
 * events: EPOLLIN/EPOLLOUT...; safe from any thread. An fd deleted from
 * inside a callback gets no further callbacks, even for events already
 * collected in the same epoll_wait batch. Deleting from another thread
 * while that fd's callback runs does not wait for the callback.
 */
int evloop_add(struct evloop *el, int fd, uint32_t events, evloop_cb cb, void *arg);
int evloop_mod(struct evloop *el, int fd, uint32_t events, evloop_cb cb, void *arg);
int evloop_del(struct evloop *el, int fd);
int evloop_start(struct evloop *el);
/*
 * Stop and join the thread; registered fds are not closed. Events already
 * pending when the stop arrives are dispatched once more before it ends.
 */
void evloop_stop(struct evloop *el);
void evloop_free(struct evloop *el);

/*
 * Without a thread: wait up to timeout_ms (-1: forever) on the calling
 * thread and dispatch one batch of events there. For a process that is its
 * own loop (the DNS helper); never while evloop_start() runs one. Returns 0,
 * 1 when the wake fd fired (evloop_stop from elsewhere), or -EINVAL.
 */
int evloop_run_once(struct evloop *el, int timeout_ms);

#endif
