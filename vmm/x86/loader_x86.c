/*
 * loader_x86: put an x86-64 Linux kernel into guest memory for a direct
 * 64-bit entry. See loader_x86.h for the contract.
 */
#include <elf.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "x86/layout_x86.h"
#include "x86/loader_x86.h"
#include "lib/util.h"

#define ELF_MAX_PHDRS 64

/*
 * An image is read through one bounds-checked function, from memory (unit
 * tests) or straight from the file into guest RAM (husk), so a large vmlinux
 * is never copied whole into a host buffer.
 */
struct image_src {
	uint64_t size;
	const uint8_t *buf;	/* in-memory image, or NULL to pread from fd */
	int fd;
};

static int src_read(const struct image_src *s, uint64_t off, void *dst, uint64_t len)
{
	uint8_t *d = dst;

	if (off > s->size || len > s->size - off)
		return husk_seterr(EINVAL, "image read [0x%llx, +0x%llx) beyond its %llu bytes",
				   (unsigned long long)off, (unsigned long long)len,
				   (unsigned long long)s->size);
	if (s->buf) {
		memcpy(d, s->buf + off, len);
		return 0;
	}
	if (read_exact_at(s->fd, d, len, off))
		return husk_seterr(EIO, "image read failed at offset 0x%llx (file changed "
				   "while loading?)", (unsigned long long)off);
	return 0;
}

/* [gpa, gpa + len) must be RAM and must not touch the boot area below 1 MiB. */
static int check_kernel_range(const struct guest_mem *m, uint64_t gpa,
			      uint64_t len, const char *what)
{
	if (gpa < BOOT_AREA_END)
		return husk_seterr(EINVAL, "%s at 0x%llx overlaps the boot area below 1 MiB "
				   "(zero page, page tables)", what, (unsigned long long)gpa);
	if (!gmem_ptr(m, gpa, len))
		return husk_seterr(EINVAL, "%s [0x%llx, +0x%llx) does not fit in guest RAM "
				   "(%llu MiB); give the VM more memory with --mem",
				   what, (unsigned long long)gpa, (unsigned long long)len,
				   (unsigned long long)(m->size >> 20));
	return 0;
}

static int elf_check_header(const Elf64_Ehdr *eh, size_t len)
{
	if (len < sizeof(*eh) || memcmp(eh->e_ident, ELFMAG, SELFMAG))
		return husk_seterr(EINVAL, "not an ELF file (bad magic)");
	if (eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_ident[EI_DATA] != ELFDATA2LSB)
		return husk_seterr(EINVAL, "ELF is not 64-bit little-endian");
	if (eh->e_machine != EM_X86_64)
		return husk_seterr(EINVAL, "ELF machine %u is not x86-64", eh->e_machine);
	if (eh->e_type != ET_EXEC)
		return husk_seterr(EINVAL, "ELF type %u is not an executable (vmlinux)",
				   eh->e_type);
	if (eh->e_phentsize != sizeof(Elf64_Phdr))
		return husk_seterr(EINVAL, "ELF program header size %u is not %zu",
				   eh->e_phentsize, sizeof(Elf64_Phdr));
	if (eh->e_phnum == 0 || eh->e_phnum > ELF_MAX_PHDRS)
		return husk_seterr(EINVAL, "ELF has %u program headers (expected 1..%d)",
				   eh->e_phnum, ELF_MAX_PHDRS);
	if (eh->e_phoff > len || (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr) > len - eh->e_phoff)
		return husk_seterr(EINVAL, "ELF program headers lie outside the file (truncated?)");
	return 0;
}

static int load_elf(struct guest_mem *m, const struct image_src *src,
		    struct kernel_image *k)
{
	Elf64_Ehdr eh;
	uint64_t lo = UINT64_MAX, hi = 0, len = src->size;
	bool entry_ok = false;
	int i, err, loads = 0;

	memset(k, 0, sizeof(*k));
	memset(&eh, 0, sizeof(eh));
	if (len >= sizeof(eh) && src_read(src, 0, &eh, sizeof(eh)))
		return -EIO;
	err = elf_check_header(&eh, len);
	if (err)
		return err;

	for (i = 0; i < eh.e_phnum; i++) {
		Elf64_Phdr ph;
		uint8_t *dst;

		err = src_read(src, eh.e_phoff + i * sizeof(ph), &ph, sizeof(ph));
		if (err)
			return err;
		if (ph.p_type != PT_LOAD)
			continue;
		if (ph.p_filesz > ph.p_memsz)
			return husk_seterr(EINVAL, "ELF segment %d: p_filesz 0x%llx exceeds p_memsz 0x%llx",
					   i, (unsigned long long)ph.p_filesz,
					   (unsigned long long)ph.p_memsz);
		if (ph.p_memsz == 0)
			continue;
		if (ph.p_offset > len || ph.p_filesz > len - ph.p_offset)
			return husk_seterr(EINVAL, "ELF segment %d: file data [0x%llx, +0x%llx) lies "
					   "outside the %llu-byte file (truncated?)", i,
					   (unsigned long long)ph.p_offset,
					   (unsigned long long)ph.p_filesz, (unsigned long long)len);
		err = check_kernel_range(m, ph.p_paddr, ph.p_memsz, "ELF segment");
		if (err)
			return err;
		dst = gmem_ptr(m, ph.p_paddr, ph.p_memsz);
		err = src_read(src, ph.p_offset, dst, ph.p_filesz);
		if (err)
			return err;
		memset(dst + ph.p_filesz, 0, ph.p_memsz - ph.p_filesz);
		if (ph.p_paddr < lo)
			lo = ph.p_paddr;
		if (ph.p_paddr + ph.p_memsz > hi)
			hi = ph.p_paddr + ph.p_memsz;
		if (eh.e_entry >= ph.p_paddr && eh.e_entry - ph.p_paddr < ph.p_memsz)
			entry_ok = true;
		loads++;
	}
	if (!loads)
		return husk_seterr(EINVAL, "ELF has no loadable segments");
	if (!entry_ok)
		return husk_seterr(EINVAL, "ELF entry point 0x%llx is not inside a loaded segment",
				   (unsigned long long)eh.e_entry);
	k->entry = eh.e_entry;
	k->start = lo;
	k->end = hi;
	k->cmdline_max = CMDLINE_MAX;
	/* A 64-bit kernel accepts an initrd anywhere below 2 GiB. */
	k->initrd_max = 0x7fffffffull;
	return 0;
}

/* Offsets into the bzImage file (= offsets in struct boot_params). */
#define BZ_HDR_OFF	0x1f1
#define BZ_MIN_LEN	(BZ_HDR_OFF + sizeof(struct setup_header))

static int load_bzimage(struct guest_mem *m, const struct image_src *src,
			struct kernel_image *k)
{
	struct setup_header h;
	uint64_t setup_len, kernel_len, need_end, base, len = src->size;
	uint8_t jump;
	size_t hdr_len;
	int err;

	memset(k, 0, sizeof(*k));
	if (len < BZ_MIN_LEN)
		return husk_seterr(EINVAL, "bzImage is truncated (%llu bytes)",
				   (unsigned long long)len);
	err = src_read(src, BZ_HDR_OFF, &h, sizeof(h));
	if (!err)
		err = src_read(src, 0x201, &jump, 1);
	if (err)
		return err;
	if (h.boot_flag != 0xaa55 || h.header != 0x53726448)	/* "HdrS" */
		return husk_seterr(EINVAL, "not a bzImage (bad boot_flag/HdrS magic)");
	if (h.version < 0x020c)
		return husk_seterr(EINVAL, "bzImage boot protocol %u.%02u is older than 2.12",
				   h.version >> 8, h.version & 0xff);
	if (!(h.loadflags & LOADED_HIGH))
		return husk_seterr(EINVAL, "bzImage is not loadable high (zImage?)");
	if (!(h.xloadflags & XLF_KERNEL_64))
		return husk_seterr(EINVAL, "bzImage has no 64-bit entry point (XLF_KERNEL_64 clear)");

	setup_len = ((uint64_t)(h.setup_sects ? h.setup_sects : 4) + 1) * 512;
	if (setup_len >= len)
		return husk_seterr(EINVAL, "bzImage setup (%llu bytes) is larger than the file",
				   (unsigned long long)setup_len);
	kernel_len = len - setup_len;
	if ((uint64_t)h.syssize * 16 > kernel_len)
		return husk_seterr(EINVAL, "bzImage is truncated: syssize says %llu bytes, file has %llu",
				   (unsigned long long)h.syssize * 16,
				   (unsigned long long)kernel_len);

	err = check_kernel_range(m, BZIMAGE_LOAD_GPA, kernel_len, "bzImage kernel");
	if (err)
		return err;
	/* The decompressor needs init_size bytes at its run address. */
	base = h.pref_address > BZIMAGE_LOAD_GPA ? h.pref_address : BZIMAGE_LOAD_GPA;
	if (base > GMEM_HOLE_START || h.init_size > GMEM_HOLE_START)
		return husk_seterr(EINVAL, "bzImage asks for an impossible run area "
				   "(pref_address 0x%llx, init_size 0x%x)",
				   (unsigned long long)h.pref_address, h.init_size);
	need_end = base + h.init_size;
	if (need_end < BZIMAGE_LOAD_GPA + kernel_len)
		need_end = BZIMAGE_LOAD_GPA + kernel_len;
	if (!gmem_ptr(m, BZIMAGE_LOAD_GPA, need_end - BZIMAGE_LOAD_GPA))
		return husk_seterr(EINVAL, "bzImage needs RAM up to 0x%llx to decompress; give the VM "
				   "more memory with --mem", (unsigned long long)need_end);

	err = src_read(src, setup_len, gmem_ptr(m, BZIMAGE_LOAD_GPA, kernel_len), kernel_len);
	if (err)
		return err;

	/* The header's own length is given by the jump at 0x200 (byte 0x201). */
	hdr_len = 0x202 + jump - BZ_HDR_OFF;
	if (hdr_len > sizeof(h))
		hdr_len = sizeof(h);
	memcpy(k->hdr, &h, hdr_len);
	k->hdr_len = hdr_len;
	k->bzimage = true;
	k->entry = BZIMAGE_LOAD_GPA + 0x200;
	k->start = BZIMAGE_LOAD_GPA;
	k->end = need_end;
	k->cmdline_max = (uint64_t)h.cmdline_size + 1 < CMDLINE_MAX ?
			 h.cmdline_size + 1 : CMDLINE_MAX;
	k->initrd_max = h.initrd_addr_max;
	return 0;
}

static int load_kernel(struct guest_mem *m, const struct image_src *src,
		       struct kernel_image *k)
{
	uint8_t magic[0x206] = { 0 };
	uint64_t n = src->size < sizeof(magic) ? src->size : sizeof(magic);

	memset(k, 0, sizeof(*k));
	if (src_read(src, 0, magic, n))
		return -EIO;
	if (n >= SELFMAG && !memcmp(magic, ELFMAG, SELFMAG))
		return load_elf(m, src, k);
	if (n >= 0x206 && !memcmp(magic + 0x202, "HdrS", 4))
		return load_bzimage(m, src, k);
	return husk_seterr(EINVAL, "unrecognised kernel format: expected an uncompressed vmlinux "
			   "ELF or a bzImage");
}

static struct image_src buffer_src(const uint8_t *buf, size_t len)
{
	struct image_src s = { .size = len, .buf = buf, .fd = -1 };

	return s;
}

int load_elf_x86(struct guest_mem *m, const uint8_t *buf, size_t len,
		 struct kernel_image *k)
{
	struct image_src s = buffer_src(buf, len);

	return load_elf(m, &s, k);
}

int load_bzimage_x86(struct guest_mem *m, const uint8_t *buf, size_t len,
		     struct kernel_image *k)
{
	struct image_src s = buffer_src(buf, len);

	return load_bzimage(m, &s, k);
}

int load_kernel_x86(struct guest_mem *m, const uint8_t *buf, size_t len,
		    struct kernel_image *k)
{
	struct image_src s = buffer_src(buf, len);

	return load_kernel(m, &s, k);
}

int load_kernel_fd_x86(struct guest_mem *m, int fd, struct kernel_image *k)
{
	struct image_src s = { .fd = fd };
	struct stat st;

	memset(k, 0, sizeof(*k));
	if (fstat(fd, &st) < 0)
		return husk_seterr(errno, "cannot stat the kernel: %s", strerror(errno));
	if (!S_ISREG(st.st_mode))
		return husk_seterr(EINVAL, "the kernel is not a regular file");
	if ((uint64_t)st.st_size > KERNEL_MAX_FILE)
		return husk_seterr(EFBIG, "the kernel is too large (%lld bytes, limit %u)",
				   (long long)st.st_size, KERNEL_MAX_FILE);
	s.size = st.st_size;
	return load_kernel(m, &s, k);
}
