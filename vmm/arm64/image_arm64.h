/*
 * image_arm64: put an arm64 Linux kernel Image into guest RAM for a direct
 * boot (no firmware, no bootloader), following the kernel's booting.rst.
 *
 * The Image starts with a 64-byte little-endian header that says where in a
 * 2 MiB-aligned window it wants to sit (text_offset) and how much memory it
 * claims from there, bss included (image_size). The file is untrusted input:
 * every field is checked, every sum is overflow-checked, and a bad Image is
 * a clear error (husk_seterr), never a crash or a write outside RAM.
 *
 * Errors: -EINVAL for a file that is not a usable Image, -ENOSPC when it is
 * fine but the RAM (or the room left for an initrd) is too small.
 */
#ifndef HUSK_IMAGE_ARM64_H
#define HUSK_IMAGE_ARM64_H

#include <stddef.h>
#include <stdint.h>

#define ARM64_IMAGE_MAGIC	0x644d5241u	/* "ARM\x64" at offset 56 */
#define ARM64_IMAGE_HDR_LEN	64
#define ARM64_KERNEL_ALIGN	(2ull << 20)

struct arm64_image {
	uint64_t text_offset, image_size, flags;	/* from the header */
	uint64_t load;		/* gpa of the Image's first byte, also the entry point */
	uint64_t end;		/* load + image_size: the first gpa the kernel does not claim */
};

/*
 * Check the header of an untrusted Image of len bytes and place it in RAM
 * [ram_base, ram_base + ram_size): base = ram_base rounded up to 2 MiB,
 * load = base + text_offset, and all of [load, end) must be RAM. 0, or
 * -errno with the reason (husk_seterr); *k is zeroed on failure.
 *
 * Only RAM is checked: the caller keeps [load, end) clear of anything else
 * it puts in RAM (the device tree at the top; image_arm64_initrd_addr()
 * does it for the initrd).
 */
int image_arm64_parse(const uint8_t *buf, size_t len, uint64_t ram_base,
		      uint64_t ram_size, struct arm64_image *k);

/*
 * Parse, then copy the Image's len bytes to k->load in guest RAM, given as
 * ram (host pointer of ram_base, ram_size bytes). The rest of [load, end),
 * the kernel's bss, is left as it is: booting.rst does not ask the loader to
 * zero it, the kernel clears its own bss. Nothing outside [load, load + len)
 * is written, and nothing at all on failure.
 */
int image_arm64_load(void *ram, uint64_t ram_base, uint64_t ram_size,
		     const uint8_t *buf, size_t len, struct arm64_image *k);

/*
 * Where an initrd of len bytes goes: as high as it can, page (4 KiB)
 * aligned, ending at or below fdt_gpa (the device tree's gpa) and starting
 * at or above k->end. -ENOSPC with a message saying how much room there is
 * when it does not fit. len 0 is fine (no initrd) as long as the kernel ends
 * below the device tree.
 */
int image_arm64_initrd_addr(const struct arm64_image *k, uint64_t fdt_gpa,
			    uint64_t len, uint64_t *gpa);

#endif
