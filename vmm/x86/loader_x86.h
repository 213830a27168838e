/*
 * loader_x86: put an x86-64 Linux kernel into guest memory for a direct
 * 64-bit entry (no firmware, no real mode).
 *
 * Two formats: an uncompressed vmlinux ELF (PT_LOAD segments copied to
 * their p_paddr, entered at e_entry) and a bzImage (boot protocol >= 2.12
 * with XLF_KERNEL_64; protected-mode part loaded at 1 MiB and entered at
 * +0x200). The image is untrusted input: every size and offset is checked
 * before use, and a bad image is a clear error, never a crash.
 */
#ifndef HUSK_LOADER_X86_H
#define HUSK_LOADER_X86_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <asm/bootparam.h>

#include "machine/guest_mem.h"

#define KERNEL_MAX_FILE (512u << 20)

struct kernel_image {
	bool bzimage;
	uint64_t entry;		/* gpa of the 64-bit entry point */
	uint64_t start;		/* lowest gpa the kernel occupies */
	uint64_t end;		/* first gpa above everything it may use */
	uint32_t cmdline_max;	/* bytes including the terminating NUL */
	uint64_t initrd_max;	/* highest gpa an initrd byte may occupy */
	/* bzImage only: setup header bytes to copy into the zero page. */
	uint8_t hdr[sizeof(struct setup_header)];
	size_t hdr_len;
};

int load_elf_x86(struct guest_mem *m, const uint8_t *buf, size_t len,
		 struct kernel_image *k);
int load_bzimage_x86(struct guest_mem *m, const uint8_t *buf, size_t len,
		     struct kernel_image *k);
/* Pick the format from the image's magic bytes. */
int load_kernel_x86(struct guest_mem *m, const uint8_t *buf, size_t len,
		    struct kernel_image *k);
/*
 * Same, reading an open regular file: only the headers and the loadable
 * bytes are read, straight into guest RAM.
 */
int load_kernel_fd_x86(struct guest_mem *m, int fd, struct kernel_image *k);

#endif
