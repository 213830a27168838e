/*
 * fuzz_loader: libFuzzer target for the x86-64 kernel loader.
 *
 * The input is the kernel image (vmlinux ELF or bzImage, picked by magic as
 * husk does) loaded into a 32 MiB malloc'd guest RAM. On success the reported
 * kernel extent must be sane: entry and start inside RAM, start <= end, and
 * the setup header copy no larger than its buffer.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "machine/guest_mem.h"
#include "x86/loader_x86.h"

#define RAM_SIZE (32u << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t *ram;
	struct guest_mem gm;
	struct kernel_image k;

	/* Allocated once: 32 MiB per run would dominate the run time. */
	if (!ram) {
		ram = malloc(RAM_SIZE);
		if (!ram)
			abort();
	}
	gmem_init_buffer(&gm, ram, RAM_SIZE);
	memset(&k, 0, sizeof(k));
	if (load_kernel_x86(&gm, data, size, &k) == 0) {
		if (k.start > k.end || k.entry >= RAM_SIZE || k.start >= RAM_SIZE ||
		    k.hdr_len > sizeof(k.hdr))
			abort();
	}
	return 0;
}
