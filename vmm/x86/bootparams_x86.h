/*
 * bootparams_x86: the Linux zero page (struct boot_params) for a direct
 * 64-bit entry: e820 memory map, kernel command line and initrd placement.
 */
#ifndef HUSK_BOOTPARAMS_X86_H
#define HUSK_BOOTPARAMS_X86_H

#include <asm/bootparam.h>
#include <stddef.h>
#include <stdint.h>

#include "machine/guest_mem.h"
#include "x86/loader_x86.h"

#define E820_TYPE_RAM		1
#define E820_TYPE_RESERVED	2

/* Fill tab (room for max entries) with the guest's memory map; returns count. */
int e820_build_x86(const struct guest_mem *m, struct boot_e820_entry *tab, int max);

/*
 * Where an initrd of len bytes goes: as high as allowed, below the kernel's
 * initrd_addr_max and the top of low RAM, above the kernel's own footprint,
 * page aligned.
 */
int initrd_addr_x86(const struct guest_mem *m, const struct kernel_image *k,
		    uint64_t len, uint64_t *gpa);
/* initrd_addr_x86() and a copy of data there. */
int initrd_place_x86(struct guest_mem *m, const struct kernel_image *k,
		     const uint8_t *data, size_t len, uint64_t *gpa);

/*
 * Write the command line and the zero page. initrd_len 0 means no initrd.
 * seed (seed_len bytes, at most RNG_SEED_MAX; NULL: none) goes to the
 * kernel as a SETUP_RNG_SEED setup_data entry. Fails if the command line
 * does not fit the kernel's limit.
 */
#define RNG_SEED_MAX	64
int bootparams_write_x86(struct guest_mem *m, const struct kernel_image *k,
			 const char *cmdline, uint64_t initrd_gpa, uint64_t initrd_len,
			 const uint8_t *seed, size_t seed_len);

#endif
