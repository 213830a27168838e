/*
 * fdt_arm64: the device tree that describes an arm64 husk VM to its guest
 * kernel, built with libfdt. An arm64 guest has no firmware tables to
 * probe: memory, CPUs (brought up through PSCI), the interrupt controller,
 * the architected timer, the console UART and every virtio-mmio device are
 * what this tree says, at the addresses of layout_arm64.h. The tree also
 * carries the kernel command line, the initrd's bounds and a seed for the
 * guest's entropy pool.
 *
 * Pure: the blob is written into a caller's buffer, which the caller then
 * copies into guest RAM (the kernel gets its address in x0).
 */
#ifndef HUSK_FDT_ARM64_H
#define HUSK_FDT_ARM64_H

#include <stddef.h>
#include <stdint.h>

#include "arm64/layout_arm64.h"

/* The GICv3 redistributor region bounds the vCPUs; a GICv2 takes eight. */
#define FDT_ARM64_MAX_CPUS	(ARM64_GIC_REDIST_MAX / ARM64_GIC_REDIST_SIZE)
#define FDT_ARM64_MAX_CPUS_V2	8
#define FDT_ARM64_RNG_SEED_MAX	64
/* The phandle of the interrupt controller, the tree's only one. */
#define FDT_ARM64_GIC_PHANDLE	1

/* What the guest is told (see fdt_arm64_build). */
struct fdt_arm64_cfg {
	uint64_t ram_base, ram_size;
	unsigned nr_cpus;
	unsigned gic_version;			/* 3, or 2 where only that exists */
	const char *bootargs;			/* NULL: none */
	uint64_t initrd_start, initrd_end;	/* gpa range; both 0: no initrd */
	const uint8_t *rng_seed;		/* NULL: none */
	size_t rng_seed_len;			/* at most FDT_ARM64_RNG_SEED_MAX */
	unsigned nr_virtio;			/* virtio-mmio slots 0..nr_virtio-1 in use */
};

/*
 * The vCPU's MPIDR affinity as KVM assigns it by default (Aff0: the low
 * four bits of the vCPU index, Aff1: the next eight), which the cpu nodes'
 * reg must match for PSCI CPU_ON to find each vCPU.
 */
uint64_t fdt_arm64_mpidr(unsigned cpu);

/*
 * Write the tree into buf (cap bytes, at most ARM64_FDT_MAX). Returns its
 * size, or -errno with the reason in husk_lasterr(): -EINVAL for a
 * configuration the machine cannot have (no RAM, vCPUs beyond the GIC's
 * limit, an initrd outside RAM, too many virtio slots, a seed too long),
 * -ENOSPC when the tree does not fit.
 */
int fdt_arm64_build(void *buf, size_t cap, const struct fdt_arm64_cfg *c);

#endif
