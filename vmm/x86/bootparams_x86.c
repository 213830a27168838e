/*
 * bootparams_x86: the Linux zero page for a direct 64-bit entry.
 */
#include <errno.h>
#include <string.h>

#include "x86/bootparams_x86.h"
#include "x86/layout_x86.h"
#include "lib/util.h"

static int e820_add(struct boot_e820_entry *tab, int n, int max,
		    uint64_t addr, uint64_t size, uint32_t type)
{
	if (n >= max || !size)
		return n;
	tab[n].addr = addr;
	tab[n].size = size;
	tab[n].type = type;
	return n + 1;
}

int e820_build_x86(const struct guest_mem *m, struct boot_e820_entry *tab, int max)
{
	int n = 0;

	/* Base memory ends where the EBDA (holding the MP table) begins. */
	n = e820_add(tab, n, max, 0, EBDA_GPA, E820_TYPE_RAM);
	n = e820_add(tab, n, max, EBDA_GPA, HIMEM_GPA - EBDA_GPA, E820_TYPE_RESERVED);
	if (m->low_size > HIMEM_GPA)
		n = e820_add(tab, n, max, HIMEM_GPA, m->low_size - HIMEM_GPA, E820_TYPE_RAM);
	if (m->high_size)
		n = e820_add(tab, n, max, GMEM_HOLE_END, m->high_size, E820_TYPE_RAM);
	return n;
}

int initrd_addr_x86(const struct guest_mem *m, const struct kernel_image *k,
		    uint64_t len, uint64_t *gpa)
{
	uint64_t top = m->low_size, addr;

	if (!len)
		return husk_seterr(EINVAL, "initrd is empty");
	if (k->initrd_max + 1 < top)
		top = k->initrd_max + 1;
	if (len > top || ((top - len) & ~0xfffull) < k->end)
		return husk_seterr(ENOSPC, "initrd (%llu bytes) does not fit between the kernel "
				   "(ends at 0x%llx) and 0x%llx; give the VM more memory with --mem",
				   (unsigned long long)len, (unsigned long long)k->end,
				   (unsigned long long)top);
	addr = (top - len) & ~0xfffull;
	if (!gmem_ptr(m, addr, len))
		return husk_seterr(EFAULT, "initrd placement at 0x%llx is outside RAM",
				   (unsigned long long)addr);
	*gpa = addr;
	return 0;
}

int initrd_place_x86(struct guest_mem *m, const struct kernel_image *k,
		     const uint8_t *data, size_t len, uint64_t *gpa)
{
	int err = initrd_addr_x86(m, k, len, gpa);

	if (!err)
		memcpy(gmem_ptr(m, *gpa, len), data, len);
	return err;
}

/*
 * The kernel mixes a SETUP_RNG_SEED entry into its entropy pool in
 * setup_arch(), before anything draws from it, and wipes it; a kernel
 * built with CONFIG_RANDOM_TRUST_BOOTLOADER (husk's default guest) counts
 * it, and its CRNG is ready from the start, not once a device has
 * delivered entropy. Boot protocol 2.09 and later: every 64-bit kernel.
 */
static int seed_write(struct guest_mem *m, struct boot_params *bp, const uint8_t *seed,
		      size_t len)
{
	struct {
		struct setup_data h;
		uint8_t data[RNG_SEED_MAX];
	} sd;

	if (!seed || !len || bp->hdr.version < 0x0209)
		return 0;
	if (len > RNG_SEED_MAX)
		return husk_seterr(E2BIG, "RNG seed of %zu bytes; at most %d", len, RNG_SEED_MAX);
	memset(&sd, 0, sizeof(sd));
	sd.h.type = SETUP_RNG_SEED;
	sd.h.len = (uint32_t)len;
	memcpy(sd.data, seed, len);
	if (gmem_write(m, RNG_SEED_GPA, &sd, sizeof(sd.h) + len)) {
		memset(&sd, 0, sizeof(sd));
		return husk_seterr(EFAULT, "no room for the RNG seed in guest RAM");
	}
	memset(&sd, 0, sizeof(sd));
	bp->hdr.setup_data = RNG_SEED_GPA;
	return 0;
}

int bootparams_write_x86(struct guest_mem *m, const struct kernel_image *k,
			 const char *cmdline, uint64_t initrd_gpa, uint64_t initrd_len,
			 const uint8_t *seed, size_t seed_len)
{
	struct boot_params bp;
	size_t clen = strlen(cmdline);
	int err;

	if (clen + 1 > k->cmdline_max)
		return husk_seterr(E2BIG, "kernel command line is %zu bytes; this kernel accepts at "
				   "most %u", clen, k->cmdline_max - 1);
	if (gmem_write(m, CMDLINE_GPA, cmdline, clen + 1))
		return husk_seterr(EFAULT, "no room for the command line in guest RAM");

	memset(&bp, 0, sizeof(bp));
	if (k->bzimage) {
		memcpy(&bp.hdr, k->hdr, k->hdr_len);
	} else {
		bp.hdr.boot_flag = 0xaa55;
		bp.hdr.header = 0x53726448;	/* "HdrS" */
		bp.hdr.version = 0x020c;
		bp.hdr.kernel_alignment = 0x1000000;
		bp.hdr.cmdline_size = k->cmdline_max - 1;
	}
	bp.hdr.type_of_loader = 0xff;		/* "other" boot loader */
	bp.hdr.cmd_line_ptr = CMDLINE_GPA;
	if (initrd_len) {
		bp.hdr.ramdisk_image = (uint32_t)initrd_gpa;
		bp.hdr.ramdisk_size = (uint32_t)initrd_len;
	}
	bp.e820_entries = e820_build_x86(m, bp.e820_table, E820_MAX_ENTRIES_ZEROPAGE);
	err = seed_write(m, &bp, seed, seed_len);
	if (err)
		return err;
	if (gmem_write(m, ZERO_PAGE_GPA, &bp, sizeof(bp)))
		return husk_seterr(EFAULT, "no room for the zero page in guest RAM");
	return 0;
}
