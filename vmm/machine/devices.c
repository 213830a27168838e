/*
 * devices: what every husk machine answers on MMIO exits, whatever the arch:
 * husk's control registers, Firecracker's boot timer and the virtio-mmio
 * slots (virtio_mmio.c); and the host's side of the console UART. Runs on
 * vCPU threads; dev_lock serialises the legacy devices' state.
 *
 * husk control registers (HUSK_CTL_MMIO_GPA + off; on x86 also port
 * HUSK_CTL_PORT + off), 32-bit:
 *   off 0  read: magic "HUSK"; write: event code (HUSK_EV_*), timestamped
 *   off 4  write: power off the VM; the value is the guest's status
 */
#include <string.h>

#include "lib/util.h"
#include "machine/vm.h"

void vm_ctl_access(struct vcpu *v, unsigned off, bool write, uint8_t *data, unsigned size)
{
	struct vm *vm = v->vm;
	uint32_t val;

	if (!write) {
		dev_put_val(data, size, off == HUSK_CTL_EVENT ? HUSK_CTL_MAGIC : 0);
		return;
	}
	val = dev_get_val(data, size);
	switch (off) {
	case HUSK_CTL_EVENT:
		if (val > 0 && val < HUSK_EV_MAX) {
			pthread_mutex_lock(&vm->dev_lock);
			if (!vm->t.event[val])
				vm->t.event[val] = now_us();
			pthread_mutex_unlock(&vm->dev_lock);
		}
		break;
	case HUSK_CTL_POWEROFF:
		vm_stop(vm, VM_STOP_POWEROFF, (int)(val & 0xff),
			"guest powered off (status %u)", val & 0xff);
		break;
	}
}

size_t vm_console_room(struct vm *vm)
{
	size_t n;

	pthread_mutex_lock(&vm->dev_lock);
	n = uart_rx_room(&vm->uart);
	pthread_mutex_unlock(&vm->dev_lock);
	return n;
}

size_t vm_console_input(struct vm *vm, const uint8_t *buf, size_t len)
{
	size_t n;

	pthread_mutex_lock(&vm->dev_lock);
	n = uart_receive(&vm->uart, buf, len);
	pthread_mutex_unlock(&vm->dev_lock);
	return n;
}

/*
 * Firecracker's convention, so harnesses written for it run unchanged: one
 * byte, BOOT_TIMER_MAGIC, at offset 0; anything else is ignored, reads see
 * zero. The first such write is the guest's "boot done".
 */
static void boot_timer_access(struct vcpu *v, uint64_t off, bool write, uint8_t *data,
			      unsigned len)
{
	struct vm *vm = v->vm;

	if (!write) {
		memset(data, 0, len);
		return;
	}
	if (off || len != 1 || data[0] != BOOT_TIMER_MAGIC)
		return;
	pthread_mutex_lock(&vm->dev_lock);
	if (!vm->t.boot_timer)
		vm->t.boot_timer = now_us();
	pthread_mutex_unlock(&vm->dev_lock);
}

void vm_mmio(struct vcpu *v, uint64_t gpa, bool write, uint8_t *data, unsigned len)
{
	struct vm *vm = v->vm;

	if (arch_mmio(v, gpa, write, data, len))
		return;
	if (gpa >= HUSK_CTL_MMIO_GPA && gpa - HUSK_CTL_MMIO_GPA < HUSK_CTL_SIZE) {
		vm_ctl_access(v, gpa - HUSK_CTL_MMIO_GPA, write, data, len);
		return;
	}
	if (vm->boot_timer && gpa >= ARCH_VIRTIO_GPA && gpa - ARCH_VIRTIO_GPA < ARCH_VIRTIO_STRIDE) {
		boot_timer_access(v, gpa - ARCH_VIRTIO_GPA, write, data, len);
		return;
	}
	if (gpa >= ARCH_VIRTIO_GPA + (uint64_t)vm->virtio_first * ARCH_VIRTIO_STRIDE &&
	    gpa - ARCH_VIRTIO_GPA - (uint64_t)vm->virtio_first * ARCH_VIRTIO_STRIDE <
	    (uint64_t)vm->nr_virtio * ARCH_VIRTIO_STRIDE) {
		uint64_t off = gpa - ARCH_VIRTIO_GPA - (uint64_t)vm->virtio_first * ARCH_VIRTIO_STRIDE;

		virtio_mmio_access(vm->virtio[off / ARCH_VIRTIO_STRIDE], off % ARCH_VIRTIO_STRIDE,
				   write, data, len);
		return;
	}
	husk_debug("unhandled MMIO %s at 0x%llx (%u bytes)", write ? "write" : "read",
		   (unsigned long long)gpa, len);
	if (!write)
		memset(data, 0xff, len);
}
