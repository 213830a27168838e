/*
 * guest_mem: guest RAM and the single bounds-checked guest-physical accessor.
 *
 * RAM is one host mapping split into at most two guest-physical regions:
 * [ARCH_RAM_GPA, + low) and, where the arch has a hole at the top of the
 * first 4 GiB (x86: [3 GiB, 4 GiB), for devices), [4 GiB, 4 GiB + high)
 * above it. The arch header (machine/arch.h) says where RAM starts and how
 * large the low region may grow (ARCH_RAM_GPA, ARCH_RAM_LOW_MAX). Every access
 * to guest memory in husk goes through gmem_ptr(), which returns NULL unless
 * the whole range lies inside one region; the guest controls the addresses,
 * so nothing else may turn a gpa into a pointer.
 */
#ifndef HUSK_GUEST_MEM_H
#define HUSK_GUEST_MEM_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

/* x86's 32-bit MMIO hole: devices, IOAPIC, LAPIC live in [3 GiB, 4 GiB). */
#define GMEM_HOLE_START 0xc0000000ull
#define GMEM_HOLE_END 0x100000000ull

#define GMEM_MIN_SIZE (16ull << 20)
#define GMEM_MAX_SIZE (64ull << 30)

struct guest_mem {
	uint8_t *host;		/* low region at host[0], high right after it */
	uint64_t size;		/* total RAM in bytes */
	uint64_t low_size;	/* RAM at gpa [ARCH_RAM_GPA, + low_size) */
	uint64_t high_size;	/* RAM at gpa [4 GiB, 4 GiB + high_size) */
	bool mapped;		/* host was mmap'd by gmem_alloc() */
};

/*
 * Reserve size bytes of anonymous, lazily backed memory (MAP_NORESERVE),
 * aligned to 2 MiB; huge: backed by transparent huge pages where the host
 * has them (otherwise they are refused for it).
 */
int gmem_alloc(struct guest_mem *m, uint64_t size, bool huge);
/*
 * Map size bytes of a memory image (a template's memory file, guest-physical
 * order as gmem_save writes it) copy on write: MAP_PRIVATE, so every clone
 * shares the file's page cache and no write ever reaches the file.
 */
int gmem_map_file(struct guest_mem *m, int fd, uint64_t size);
/*
 * Write guest RAM into fd (opened for writing, empty) as an image of m->size
 * bytes in the layout gmem_map_file maps: pages never touched or all zero
 * are holes, not written. *data_bytes gets what was written. -errno.
 */
int gmem_save(const struct guest_mem *m, int fd, uint64_t *data_bytes);
/* Describe caller-owned memory (unit tests use malloc'd "guest RAM"). */
void gmem_init_buffer(struct guest_mem *m, void *buf, uint64_t size);
void gmem_free(struct guest_mem *m);

/* Host pointer for [gpa, gpa + len), or NULL if any byte is outside RAM. */
void *gmem_ptr(const struct guest_mem *m, uint64_t gpa, uint64_t len);

/* Copies through gmem_ptr(); -EFAULT when the range is not RAM. */
int gmem_read(const struct guest_mem *m, uint64_t gpa, void *dst, uint64_t len);
int gmem_write(const struct guest_mem *m, uint64_t gpa, const void *src, uint64_t len);

#endif
