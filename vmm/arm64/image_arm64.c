/*
 * image_arm64: put an arm64 Linux kernel Image into guest RAM for a direct
 * boot. See image_arm64.h for the contract.
 */
#include <endian.h>
#include <errno.h>
#include <string.h>

#include "arm64/image_arm64.h"
#include "lib/util.h"

/* Offsets of the header fields husk uses (booting.rst). */
#define HDR_TEXT_OFFSET	8
#define HDR_IMAGE_SIZE	16
#define HDR_FLAGS	24
#define HDR_MAGIC	56

/*
 * flags bit 0: a big-endian kernel. Bits 1-2 (page size) and 3 (placement)
 * need nothing from husk: the base it picks, the lowest 2 MiB boundary in
 * RAM, is what bit 3 clear asks for and is also fine when it is set. Bits
 * 4-63 are reserved and ignored, as booting.rst leaves them to future use.
 */
#define FLAG_BE		(1ull << 0)

#define PAGE_4K		0x1000ull

/*
 * text_offset is where in its 2 MiB window the kernel sits: 0x80000 up to
 * Linux 5.7, a random page below 2 MiB with RANDOMIZE_TEXT_OFFSET, 0 since
 * 5.8. No kernel was ever built with 2 MiB or more, so such a value is a
 * corrupt header; refusing it also keeps base + text_offset far from any
 * overflow.
 */
#define TEXT_OFFSET_MAX	ARM64_KERNEL_ALIGN

#define MIB		(1ull << 20)

/* The header may sit at any address: read through memcpy, never a cast. */
static uint64_t rd64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return le64toh(v);
}

static uint32_t rd32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return le32toh(v);
}

static unsigned long long mib_up(uint64_t bytes)
{
	return (bytes >> 20) + !!(bytes & (MIB - 1));
}

static int check_header(const uint8_t *buf, size_t len, struct arm64_image *k)
{
	if (len < ARM64_IMAGE_HDR_LEN)
		return husk_seterr(EINVAL, "arm64 Image is truncated: %zu bytes, shorter than "
				   "its %d-byte header", len, ARM64_IMAGE_HDR_LEN);
	if (rd32(buf + HDR_MAGIC) != ARM64_IMAGE_MAGIC)
		return husk_seterr(EINVAL, "not an arm64 Image (no \"ARM\\x64\" magic at offset "
				   "%d); husk boots an uncompressed Image, not a vmlinux ELF "
				   "or an Image.gz", HDR_MAGIC);
	k->text_offset = rd64(buf + HDR_TEXT_OFFSET);
	k->image_size = rd64(buf + HDR_IMAGE_SIZE);
	k->flags = rd64(buf + HDR_FLAGS);

	if (k->flags & FLAG_BE)
		return husk_seterr(EINVAL, "arm64 Image is a big-endian kernel; husk guests are "
				   "little-endian");
	/* Before 3.17 the header had no size: the kernel's bss could be anywhere. */
	if (!k->image_size)
		return husk_seterr(EINVAL, "arm64 Image has image_size 0: a kernel older than "
				   "Linux 3.17, whose memory footprint is unknown; use a newer kernel");
	if (k->text_offset & (PAGE_4K - 1))
		return husk_seterr(EINVAL, "arm64 Image text_offset 0x%llx is not a multiple of 4 KiB",
				   (unsigned long long)k->text_offset);
	if (k->text_offset >= TEXT_OFFSET_MAX)
		return husk_seterr(EINVAL, "arm64 Image text_offset 0x%llx is not below 2 MiB "
				   "(corrupt header?)", (unsigned long long)k->text_offset);
	/* The file itself must fit in what the kernel claims, or bss would overlap it. */
	if (len > k->image_size)
		return husk_seterr(EINVAL, "arm64 Image is %zu bytes but its header says "
				   "image_size is %llu (corrupt header?)", len,
				   (unsigned long long)k->image_size);
	return 0;
}

/* Set k->load and k->end: the lowest 2 MiB boundary in RAM, + text_offset. */
static int place(uint64_t ram_base, uint64_t ram_size, struct arm64_image *k)
{
	uint64_t ram_end, base, need;

	/* With RAM below 2^64 and need <= ram_size, load and end cannot wrap either. */
	if (__builtin_add_overflow(ram_base, ram_size, &ram_end))
		return husk_seterr(EINVAL, "guest RAM [0x%llx, +0x%llx) wraps around the "
				   "address space", (unsigned long long)ram_base,
				   (unsigned long long)ram_size);
	if (__builtin_add_overflow(ram_base, ARM64_KERNEL_ALIGN - 1, &base))
		return husk_seterr(ENOSPC, "guest RAM at 0x%llx has no 2 MiB boundary for the "
				   "kernel", (unsigned long long)ram_base);
	base &= ~(ARM64_KERNEL_ALIGN - 1);

	/* Bytes of RAM from ram_base: the gap up to base, text_offset, image_size. */
	if (__builtin_add_overflow(base - ram_base + k->text_offset, k->image_size, &need))
		return husk_seterr(EINVAL, "arm64 Image has an impossible image_size 0x%llx "
				   "(corrupt header?)", (unsigned long long)k->image_size);
	if (need > ram_size)
		return husk_seterr(ENOSPC, "arm64 Image needs %llu MiB of RAM (image_size %llu "
				   "bytes at 0x%llx), the VM has %llu MiB; give the VM more "
				   "memory with --mem", mib_up(need),
				   (unsigned long long)k->image_size,
				   (unsigned long long)(base + k->text_offset),
				   (unsigned long long)(ram_size >> 20));
	k->load = base + k->text_offset;
	k->end = k->load + k->image_size;
	return 0;
}

int image_arm64_parse(const uint8_t *buf, size_t len, uint64_t ram_base,
		      uint64_t ram_size, struct arm64_image *k)
{
	int err;

	memset(k, 0, sizeof(*k));
	err = check_header(buf, len, k);
	if (!err)
		err = place(ram_base, ram_size, k);
	if (err)
		memset(k, 0, sizeof(*k));
	return err;
}

/* Host pointer of guest [gpa, gpa + len), or NULL unless all of it is RAM. */
static uint8_t *ram_span(void *ram, uint64_t ram_base, uint64_t ram_size,
			 uint64_t gpa, uint64_t len)
{
	uint64_t off = gpa - ram_base;

	if (gpa < ram_base || off > ram_size || len > ram_size - off)
		return NULL;
	return (uint8_t *)ram + off;
}

int image_arm64_load(void *ram, uint64_t ram_base, uint64_t ram_size,
		     const uint8_t *buf, size_t len, struct arm64_image *k)
{
	uint8_t *dst;
	int err;

	err = image_arm64_parse(buf, len, ram_base, ram_size, k);
	if (err)
		return err;
	/* parse() has placed [load, end) in RAM; this guards the copy on its own. */
	dst = ram_span(ram, ram_base, ram_size, k->load, len);
	if (!dst) {
		err = husk_seterr(EFAULT, "arm64 Image [0x%llx, +0x%zx) is outside guest RAM",
				  (unsigned long long)k->load, len);
		memset(k, 0, sizeof(*k));
		return err;
	}
	memcpy(dst, buf, len);
	return 0;
}

int image_arm64_initrd_addr(const struct arm64_image *k, uint64_t fdt_gpa,
			    uint64_t len, uint64_t *gpa)
{
	/* The initrd starts on a page: the first one at or above the kernel's end. */
	uint64_t pad = -k->end & (PAGE_4K - 1), room;

	if (k->end > fdt_gpa || fdt_gpa - k->end < pad)
		return husk_seterr(ENOSPC, "the kernel (ends at 0x%llx) runs into the device tree "
				   "at 0x%llx: no room for an initrd; give the VM more memory "
				   "with --mem", (unsigned long long)k->end,
				   (unsigned long long)fdt_gpa);
	room = fdt_gpa - k->end - pad;
	if (len > room)
		return husk_seterr(ENOSPC, "initrd (%llu bytes) does not fit between the kernel "
				   "(ends at 0x%llx) and the device tree at 0x%llx: %llu bytes "
				   "of room; give the VM more memory with --mem",
				   (unsigned long long)len, (unsigned long long)k->end,
				   (unsigned long long)fdt_gpa, (unsigned long long)room);
	/*
	 * Right below the device tree, as layout_arm64.h lays RAM out: what is
	 * between the kernel and the initrd stays one free block for the guest.
	 */
	*gpa = (fdt_gpa - len) & ~(PAGE_4K - 1);
	return 0;
}
