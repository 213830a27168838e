/*
 * husk_ctl: husk's control registers, the one guest/host ABI that every
 * side shares (the VMM, guest-init, mini-init, evil-init, the tiny test
 * guests in assembly). Only #defines, so assembly includes it too.
 *
 * The same 8 bytes of registers answer at an MMIO address (every
 * architecture, and x86 ring 3 where port I/O faults) and, on x86, at a
 * port range:
 *   offset 0  read: HUSK_CTL_MAGIC; write: an event code (HUSK_EV_*), the
 *             first write of each timestamped by the host
 *   offset 4  read: 0; write: power off, the low byte is the guest's status
 */
#ifndef HUSK_CTL_H
#define HUSK_CTL_H

#define HUSK_CTL_MAGIC		0x4b535548	/* "HUSK", little-endian */
#define HUSK_CTL_EVENT		0
#define HUSK_CTL_POWEROFF	4
#define HUSK_CTL_SIZE		8

/* Below RAM on every arch: x86 in its 32-bit hole, arm64 after its UART. */
#if defined(__aarch64__)
#define HUSK_CTL_MMIO_GPA	0x09010000
#else
#define HUSK_CTL_MMIO_GPA	0xd1000000
#endif
#define HUSK_CTL_PORT		0x600		/* x86 */

/* Event codes. */
#define HUSK_EV_INIT		1	/* guest userspace (init) is running */
#define HUSK_EV_JOB_STARTED	2	/* guest-init: the job's process runs */
#define HUSK_EV_JOB_ENDED	3	/* guest-init: the job ended, its output drained */
#define HUSK_EV_MAX		8	/* codes are 1..HUSK_EV_MAX-1 */

#endif
