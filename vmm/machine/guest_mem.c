/*
 * guest_mem: guest RAM and the single bounds-checked guest-physical accessor.
 */
#include <errno.h>
#include <string.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "machine/arch.h"
#include "machine/guest_mem.h"
#include "lib/util.h"

static void split(struct guest_mem *m, uint64_t size)
{
	m->size = size;
	m->low_size = size < ARCH_RAM_LOW_MAX ? size : ARCH_RAM_LOW_MAX;
	m->high_size = size - m->low_size;
}

static int check_size(uint64_t size)
{
	if (size < GMEM_MIN_SIZE || size > GMEM_MAX_SIZE || size % 4096)
		return husk_seterr(EINVAL, "guest memory size %llu bytes is outside %llu MiB..%llu MiB",
				   (unsigned long long)size, GMEM_MIN_SIZE >> 20,
				   GMEM_MAX_SIZE >> 20);
	return 0;
}

/*
 * KVM maps a 2 MiB guest page with one nested page-table entry only when
 * the host address is congruent with the guest address modulo 2 MiB and a
 * huge page backs it: RAM starts on a 2 MiB boundary (ARCH_RAM_GPA and
 * 4 GiB are both aligned), so transparent huge pages can serve it.
 */
#define HUGE_ALIGN (2ull << 20)

static void *map_aligned(uint64_t size)
{
	uint8_t *p, *a;
	uint64_t head;

	p = mmap(NULL, size + HUGE_ALIGN, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return p;
	a = (uint8_t *)(((uintptr_t)p + HUGE_ALIGN - 1) & ~(uintptr_t)(HUGE_ALIGN - 1));
	head = a - p;
	if (head)
		munmap(p, head);
	munmap(a + size, HUGE_ALIGN - head);
	return a;
}

int gmem_alloc(struct guest_mem *m, uint64_t size, bool huge)
{
	void *p;

	memset(m, 0, sizeof(*m));
	if (check_size(size))
		return -EINVAL;
	p = map_aligned(size);
	if (p == MAP_FAILED)
		return husk_seterr(errno, "cannot reserve %llu MiB of guest memory: %s",
				   (unsigned long long)(size >> 20), strerror(errno));
	/* Guest memory must not leak into children husk may spawn. */
	madvise(p, size, MADV_DONTFORK);
	/*
	 * A host whose transparent huge pages are "always" uses them anyway;
	 * "madvise" hosts need the hint, "never" hosts ignore it. Fewer,
	 * larger nested page-table entries: fewer guest exits on first
	 * touches, at the price of up to 2 MiB backed per touched region.
	 */
	madvise(p, size, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
	m->host = p;
	m->mapped = true;
	split(m, size);
	return 0;
}

int gmem_map_file(struct guest_mem *m, int fd, uint64_t size)
{
	struct stat st;
	void *p;
	int err;

	memset(m, 0, sizeof(*m));
	err = check_size(size);
	if (err)
		return err;
	if (fstat(fd, &st) < 0 || (uint64_t)st.st_size != size)
		return husk_seterr(EINVAL, "the memory image is %lld bytes, not the %llu the "
				   "template says: truncated or replaced", (long long)st.st_size,
				   (unsigned long long)size);
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_NORESERVE, fd, 0);
	if (p == MAP_FAILED)
		return husk_seterr(errno, "cannot map the %llu MiB memory image: %s",
				   (unsigned long long)(size >> 20), strerror(errno));
	madvise(p, size, MADV_DONTFORK);
	m->host = p;
	m->mapped = true;
	split(m, size);
	return 0;
}

static bool page_is_zero(const uint8_t *p)
{
	const uint64_t *w = (const uint64_t *)p;
	unsigned i;

	for (i = 0; i < 4096 / sizeof(*w); i++)
		if (w[i])
			return false;
	return true;
}

int gmem_save(const struct guest_mem *m, int fd, uint64_t *data_bytes)
{
	const uint64_t chunk = 64ull << 20;	/* mincore vector per 64 MiB */
	unsigned char *vec = malloc(chunk / 4096);
	uint64_t off, pg, n, done = 0;
	int err = 0;

	if (!vec)
		return husk_seterr(ENOMEM, "out of memory");
	/* The size first: holes stay holes, and the file is exactly RAM's size. */
	if (ftruncate(fd, m->size) < 0) {
		free(vec);
		return husk_seterr(errno, "cannot size the memory image: %s", strerror(errno));
	}
	for (off = 0; off < m->size && !err; off += chunk) {
		n = m->size - off < chunk ? m->size - off : chunk;
		/* Pages never touched are not resident: zero without reading them. */
		if (mincore(m->host + off, n, vec) < 0) {
			err = husk_seterr(errno, "mincore on guest memory: %s", strerror(errno));
			break;
		}
		for (pg = 0; pg < n / 4096 && !err; pg++) {
			const uint8_t *p = m->host + off + pg * 4096;

			if (!(vec[pg] & 1) || page_is_zero(p))
				continue;
			err = write_all_at(fd, p, 4096, off + pg * 4096);
			done += 4096;
		}
	}
	free(vec);
	if (err)
		return husk_seterr(err, "cannot write the memory image: %s", strerror(-err));
	*data_bytes = done;
	return 0;
}

void gmem_init_buffer(struct guest_mem *m, void *buf, uint64_t size)
{
	memset(m, 0, sizeof(*m));
	m->host = buf;
	split(m, size);
}

void gmem_free(struct guest_mem *m)
{
	if (m->mapped && m->host)
		munmap(m->host, m->size);
	memset(m, 0, sizeof(*m));
}

void *gmem_ptr(const struct guest_mem *m, uint64_t gpa, uint64_t len)
{
	uint64_t off;

	if (!m->host)
		return NULL;
	/*
	 * Written as subtractions so gpa + len can never wrap; below
	 * ARCH_RAM_GPA, off wraps to far beyond any RAM size.
	 */
	off = gpa - ARCH_RAM_GPA;
	if (off < m->low_size) {
		if (len > m->low_size - off)
			return NULL;
		return m->host + off;
	}
	if (gpa < GMEM_HOLE_END)
		return NULL;
	off = gpa - GMEM_HOLE_END;
	if (off >= m->high_size || len > m->high_size - off)
		return NULL;
	return m->host + m->low_size + off;
}

int gmem_read(const struct guest_mem *m, uint64_t gpa, void *dst, uint64_t len)
{
	void *p = gmem_ptr(m, gpa, len);

	if (!p)
		return -EFAULT;
	memcpy(dst, p, len);
	return 0;
}

int gmem_write(const struct guest_mem *m, uint64_t gpa, const void *src, uint64_t len)
{
	void *p = gmem_ptr(m, gpa, len);

	if (!p)
		return -EFAULT;
	memcpy(p, src, len);
	return 0;
}
