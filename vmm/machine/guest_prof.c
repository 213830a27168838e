/*
 * guest_prof: samples of vCPU 0's instruction pointer (guest_prof.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "machine/guest_prof.h"
#include "lib/util.h"

int guest_prof_init(struct guest_prof *p, uint32_t cap)
{
	memset(p, 0, sizeof(*p));
	if (!cap || cap > GUEST_PROF_MAX)
		return husk_seterr(EINVAL, "profile: %u samples is outside 1..%u", cap,
				   GUEST_PROF_MAX);
	p->t_us = calloc(cap, sizeof(*p->t_us));
	p->rip = calloc(cap, sizeof(*p->rip));
	if (!p->t_us || !p->rip) {
		guest_prof_free(p);
		return husk_seterr(ENOMEM, "profile: out of memory");
	}
	p->cap = cap;
	return 0;
}

void guest_prof_add(struct guest_prof *p, uint64_t t_us, uint64_t rip)
{
	uint32_t n = __atomic_load_n(&p->n, __ATOMIC_RELAXED);

	if (n >= p->cap)
		return;
	p->t_us[n] = t_us;
	p->rip[n] = rip;
	__atomic_store_n(&p->n, n + 1, __ATOMIC_RELEASE);
}

static int write_out(int fd, const char *b, size_t n)
{
	int err = write_all(fd, b, n);

	if (err)
		return husk_seterr(-err, "profile: cannot write: %s", strerror(-err));
	return 0;
}

int guest_prof_write(const struct guest_prof *p, int fd)
{
	uint32_t i, n = __atomic_load_n(&p->n, __ATOMIC_ACQUIRE);
	char buf[8192];
	size_t len = 0;
	int err;

	for (i = 0; i < n; i++) {
		len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%llu %llx\n",
					(unsigned long long)p->t_us[i],
					(unsigned long long)p->rip[i]);
		if (len > sizeof(buf) - 48 || i + 1 == n) {
			err = write_out(fd, buf, len);
			if (err)
				return err;
			len = 0;
		}
	}
	return 0;
}

void guest_prof_free(struct guest_prof *p)
{
	free(p->t_us);
	free(p->rip);
	memset(p, 0, sizeof(*p));
}
