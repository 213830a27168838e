/*
 * ctl: husk's control registers (machine/husk_ctl.h) as guest userspace
 * reaches them: x86 through the port range (ioperm), other arches through
 * their MMIO page mapped from /dev/mem. Used by guest-init and the test
 * guests' mini-init; single-threaded callers.
 */
#ifndef HUSK_GUEST_CTL_H
#define HUSK_GUEST_CTL_H

#include <stdbool.h>
#include <stdint.h>

/*
 * Get access once (root only). True when the registers answer with husk's
 * magic; false, with the reason in errno where there is one, on a VMM that
 * is not husk or a guest without the access, and every call below is then
 * a no-op.
 */
bool ctl_open(void);
/* Write val to the register at off (HUSK_CTL_EVENT, HUSK_CTL_POWEROFF). */
void ctl_write(unsigned off, uint32_t val);

#endif
