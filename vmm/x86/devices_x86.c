/*
 * devices_x86: what a guest reaches through port I/O and MMIO exits on a
 * PC-like machine without firmware: COM1 (16550A), the i8042 reset line,
 * husk's control registers, the virtio-mmio slots (virtio_mmio.c), and
 * harmless answers for probes of absent legacy hardware. Runs on vCPU
 * threads; dev_lock serialises the legacy devices' state.
 *
 * husk control registers (port HUSK_CTL_PORT + off, or MMIO
 * HUSK_CTL_MMIO_GPA + off), 32-bit:
 *   off 0  read: magic "HUSK"; write: event code (HUSK_EV_*), timestamped
 *   off 4  write: power off the VM; the value is the guest's status
 */
#include <string.h>
#include <sys/ioctl.h>

#include "x86/layout_x86.h"
#include "lib/util.h"
#include "machine/vm.h"

#define I8042_CMD_RESET 0xfe

static void uart_tx(void *opaque, uint8_t byte)
{
	struct vm *vm = opaque;

	console_put(&vm->console, byte);
}

static void uart_irq(void *opaque, int level)
{
	struct vm *vm = opaque;
	struct kvm_irq_level irq = { .irq = COM1_IRQ, .level = level };

	ioctl(vm->fd, KVM_IRQ_LINE, &irq);
}

void devices_init_x86(struct vm *vm)
{
	uart_init(&vm->uart, uart_tx, uart_irq, vm);
}

static uint32_t get_val(const uint8_t *data, unsigned size)
{
	uint32_t v = 0;

	memcpy(&v, data, size < 4 ? size : 4);
	return v;
}

static void put_val(uint8_t *data, unsigned size, uint64_t v)
{
	memcpy(data, &v, size < 8 ? size : 8);
}

static void ctl_access(struct vcpu *v, unsigned off, bool write, uint8_t *data,
		       unsigned size)
{
	struct vm *vm = v->vm;
	uint32_t val;

	if (!write) {
		put_val(data, size, off == HUSK_CTL_EVENT ? HUSK_CTL_MAGIC : 0);
		return;
	}
	val = get_val(data, size);
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

static void i8042_access(struct vcpu *v, uint16_t port, bool write, uint8_t *data,
			 unsigned size)
{
	char line[CONSOLE_LINE_MAX];

	if (!write) {
		put_val(data, size, 0);	/* no keyboard: empty buffers, no data */
		return;
	}
	if (port != I8042_CMD_PORT || data[0] != I8042_CMD_RESET)
		return;
	console_flush(&v->vm->console);
	if (console_panicked(&v->vm->console, line, sizeof(line)))
		vm_stop(v->vm, VM_STOP_PANIC, 0, "guest kernel panic: %s", line);
	else
		vm_stop(v->vm, VM_STOP_RESET, 0, "guest rebooted (i8042 reset)");
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

void pio_x86(struct vcpu *v, uint16_t port, bool write, uint8_t *data, unsigned size)
{
	struct vm *vm = v->vm;

	if (port >= COM1_PORT && port < COM1_PORT + 8) {
		pthread_mutex_lock(&vm->dev_lock);
		if (write)
			uart_write(&vm->uart, port - COM1_PORT, data[0]);
		else
			put_val(data, size, uart_read(&vm->uart, port - COM1_PORT));
		pthread_mutex_unlock(&vm->dev_lock);
		return;
	}
	if (port == I8042_DATA_PORT || port == I8042_CMD_PORT) {
		i8042_access(v, port, write, data, size);
		return;
	}
	if (port >= HUSK_CTL_PORT && port < HUSK_CTL_PORT + HUSK_CTL_SIZE) {
		ctl_access(v, port - HUSK_CTL_PORT, write, data, size);
		return;
	}
	/* Absent hardware (other COM ports, PCI config, CMOS...) floats high. */
	if (!write)
		put_val(data, size, ~0ull);
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

void mmio_x86(struct vcpu *v, uint64_t gpa, bool write, uint8_t *data, unsigned len)
{
	struct vm *vm = v->vm;

	if (gpa >= HUSK_CTL_MMIO_GPA && gpa - HUSK_CTL_MMIO_GPA < HUSK_CTL_SIZE) {
		ctl_access(v, gpa - HUSK_CTL_MMIO_GPA, write, data, len);
		return;
	}
	if (vm->boot_timer && gpa >= VIRTIO_MMIO_GPA && gpa - VIRTIO_MMIO_GPA < VIRTIO_MMIO_SIZE) {
		boot_timer_access(v, gpa - VIRTIO_MMIO_GPA, write, data, len);
		return;
	}
	if (gpa >= VIRTIO_MMIO_GPA + (uint64_t)vm->virtio_first * VIRTIO_MMIO_SIZE &&
	    gpa - VIRTIO_MMIO_GPA - (uint64_t)vm->virtio_first * VIRTIO_MMIO_SIZE <
	    (uint64_t)vm->nr_virtio * VIRTIO_MMIO_SIZE) {
		uint64_t off = gpa - VIRTIO_MMIO_GPA - (uint64_t)vm->virtio_first * VIRTIO_MMIO_SIZE;

		virtio_mmio_access(vm->virtio[off / VIRTIO_MMIO_SIZE], off % VIRTIO_MMIO_SIZE,
				   write, data, len);
		return;
	}
	husk_debug("unhandled MMIO %s at 0x%llx (%u bytes)", write ? "write" : "read",
		   (unsigned long long)gpa, len);
	if (!write)
		memset(data, 0xff, len);
}
