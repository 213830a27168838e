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

struct evloop {
	int epfd;
	int wake_fd;		/* eventfd used to stop the loop */
	pthread_t thread;
	bool running;
};

int evloop_init(struct evloop *el);
/* events: EPOLLIN/EPOLLOUT...; safe from any thread. */
int evloop_add(struct evloop *el, int fd, uint32_t events, evloop_cb cb, void *arg);
int evloop_mod(struct evloop *el, int fd, uint32_t events, evloop_cb cb, void *arg);
int evloop_del(struct evloop *el, int fd);
int evloop_start(struct evloop *el);
/* Stop and join the thread; registered fds are not closed. */
void evloop_stop(struct evloop *el);
void evloop_free(struct evloop *el);

#endif
