/*
 * ctl: husk's control registers from guest userspace. See ctl.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "guest-init/ctl.h"
#include "machine/husk_ctl.h"

#if defined(__x86_64__)
#include <sys/io.h>

static bool open_ok;

bool ctl_open(void)
{
	/* The ports, not the MMIO page: a port exit is the cheaper of the two. */
	open_ok = ioperm(HUSK_CTL_PORT, HUSK_CTL_SIZE, 1) == 0 &&
		  inl(HUSK_CTL_PORT + HUSK_CTL_EVENT) == HUSK_CTL_MAGIC;
	return open_ok;
}

void ctl_write(unsigned off, uint32_t val)
{
	if (open_ok && off < HUSK_CTL_SIZE)
		outl(val, HUSK_CTL_PORT + off);
}

#else

#define PAGE 4096ul

static volatile uint32_t *regs;

bool ctl_open(void)
{
	volatile uint32_t *p;
	void *map;
	int fd, err;

	fd = open("/dev/mem", O_RDWR | O_SYNC | O_CLOEXEC);
	if (fd < 0)
		return false;
	/* Not RAM, so the kernel maps it as device memory: every access exits. */
	map = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		   HUSK_CTL_MMIO_GPA & ~(PAGE - 1));
	err = errno;
	close(fd);
	if (map == MAP_FAILED) {
		errno = err;
		return false;
	}
	p = (volatile uint32_t *)((char *)map + (HUSK_CTL_MMIO_GPA & (PAGE - 1)));
	if (p[HUSK_CTL_EVENT / 4] != HUSK_CTL_MAGIC) {
		munmap(map, PAGE);
		errno = ENODEV;
		return false;
	}
	regs = p;
	return true;
}

void ctl_write(unsigned off, uint32_t val)
{
	if (regs && off < HUSK_CTL_SIZE && !(off & 3))
		regs[off / 4] = val;
}

#endif
