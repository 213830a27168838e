/*
 * guest_mem: guest RAM and the single bounds-checked guest-physical accessor.
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "guest_mem.h"
#include "util.h"

static void split(struct guest_mem *m, uint64_t size)
{
	m->size = size;
	m->low_size = size < GMEM_HOLE_START ? size : GMEM_HOLE_START;
	m->high_size = size - m->low_size;
}

int gmem_alloc(struct guest_mem *m, uint64_t size)
{
	void *p;

	memset(m, 0, sizeof(*m));
	if (size < GMEM_MIN_SIZE || size > GMEM_MAX_SIZE || size % 4096)
		return husk_seterr(EINVAL, "guest memory size %llu bytes is outside %llu MiB..%llu MiB",
				   (unsigned long long)size, GMEM_MIN_SIZE >> 20,
				   GMEM_MAX_SIZE >> 20);
	p = mmap(NULL, size, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return husk_seterr(errno, "cannot reserve %llu MiB of guest memory: %s",
				   (unsigned long long)(size >> 20), strerror(errno));
	/* Guest memory must not leak into children husk may spawn. */
	madvise(p, size, MADV_DONTFORK);
	m->host = p;
	m->mapped = true;
	split(m, size);
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
	/* Written as subtractions so gpa + len can never wrap. */
	if (gpa < m->low_size) {
		if (len > m->low_size - gpa)
			return NULL;
		return m->host + gpa;
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
