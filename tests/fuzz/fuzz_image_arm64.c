/*
 * fuzz_image_arm64: libFuzzer target for the arm64 kernel Image loader.
 *
 * The input is the Image, loaded into a 32 MiB malloc'd guest RAM. Where
 * that RAM starts comes from the header's res2 field (bytes 32-39), which
 * the loader ignores: its low 22 bits are an offset from ARM64_RAM_BASE, so
 * the 2 MiB rounding is exercised, and with bit 63 set the RAM sits at
 * 2^64 - 32 MiB - offset instead, near the top of the address space where
 * the sums would wrap. res3 (bytes 40-47) is the length of an initrd placed
 * below the device tree. On success every promise of image_arm64.h must
 * hold: [load, end) inside RAM, load at a 2 MiB boundary + text_offset, the
 * Image copied byte-exact, the initrd page aligned between end and the fdt.
 */
#include <endian.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "arm64/image_arm64.h"
#include "arm64/layout_arm64.h"

#define RAM_SIZE (32ull << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t field(const uint8_t *data, size_t size, size_t off)
{
	uint64_t v = 0;

	if (size >= off + sizeof(v))
		memcpy(&v, data + off, sizeof(v));
	return le64toh(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t *ram;
	uint64_t res2 = field(data, size, 32), initrd_len = field(data, size, 40);
	uint64_t off = res2 & ((4ull << 20) - 1), ram_base, fdt, gpa;
	struct arm64_image k;

	/* Allocated once: 32 MiB per run would dominate the run time. */
	if (!ram) {
		ram = malloc(RAM_SIZE);
		if (!ram)
			abort();
	}
	ram_base = res2 >> 63 ? 0ull - RAM_SIZE - off : ARM64_RAM_BASE + off;

	memset(&k, 0, sizeof(k));
	if (image_arm64_load(ram, ram_base, RAM_SIZE, data, size, &k))
		return 0;
	if (k.load < ram_base || k.end < k.load || k.end - ram_base > RAM_SIZE ||
	    k.end - k.load != k.image_size || k.image_size < size ||
	    (k.load - k.text_offset) % ARM64_KERNEL_ALIGN ||
	    memcmp(ram + (k.load - ram_base), data, size))
		abort();

	fdt = ram_base + RAM_SIZE - ARM64_FDT_MAX;
	if (image_arm64_initrd_addr(&k, fdt, initrd_len, &gpa) == 0) {
		if (gpa % 4096 || gpa < k.end || gpa > fdt || initrd_len > fdt - gpa)
			abort();
	}
	return 0;
}
