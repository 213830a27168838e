/*
 * guest_prof: where a guest's boot spends its time, seen from outside. The
 * main thread kicks vCPU 0 out of KVM_RUN about once a millisecond; the
 * vCPU thread records its instruction pointer (KVM_GET_REGS) before it
 * enters again. `husk boot --profile FILE` writes the samples, and
 * tools/bench/profile.py names them from vmlinux's symbols: the way to see
 * where a slow or stuck boot is, with no help from the guest.
 *
 * The buffer is allocated before the threads are confined (vCPU threads
 * may not allocate memory), and each sample slot has a single writer.
 */
#ifndef HUSK_GUEST_PROF_H
#define HUSK_GUEST_PROF_H

#include <stdint.h>

#define GUEST_PROF_MAX (1u << 20)	/* samples kept: ~17 min at 1 kHz */

struct guest_prof {
	uint64_t *t_us;		/* sample time, us since husk started */
	uint64_t *rip;
	uint32_t n, cap;	/* n written by the vCPU thread only */
};

/* Allocate room for cap samples; -ENOMEM. */
int guest_prof_init(struct guest_prof *p, uint32_t cap);
/* One sample (vCPU thread); past cap it is dropped. */
void guest_prof_add(struct guest_prof *p, uint64_t t_us, uint64_t rip);
/* "t_us rip" lines, rip in hex, to fd; -errno. */
int guest_prof_write(const struct guest_prof *p, int fd);
void guest_prof_free(struct guest_prof *p);

#endif
