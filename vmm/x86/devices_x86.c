/*
 * devices_x86: what a guest reaches through port I/O on a PC-like machine
 * without firmware: COM1 (16550A), the i8042 reset line, husk's control
 * registers at HUSK_CTL_PORT (the same as at their MMIO address, devices.c),
 * and harmless answers for probes of absent legacy hardware. Runs on vCPU
 * threads; dev_lock serialises the legacy devices' state.
 */
#include <string.h>
#include <sys/ioctl.h>

#include "x86/layout_x86.h"
#include "lib/util.h"
#include "machine/vm.h"
#include "x86/devices_x86.h"

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

void arch_devices_init(struct vm *vm)
{
	uart_init(&vm->uart, uart_tx, uart_irq, vm);
}

/* Everything on MMIO is the machine's (devices.c): COM1 and the rest are ports. */
bool arch_mmio(struct vcpu *v, uint64_t gpa, bool write, uint8_t *data, unsigned len)
{
	return false;
}

static void i8042_access(struct vcpu *v, uint16_t port, bool write, uint8_t *data,
			 unsigned size)
{
	char line[CONSOLE_LINE_MAX];

	if (!write) {
		dev_put_val(data, size, 0);	/* no keyboard: empty buffers, no data */
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

void pio_x86(struct vcpu *v, uint16_t port, bool write, uint8_t *data, unsigned size)
{
	struct vm *vm = v->vm;

	if (port >= COM1_PORT && port < COM1_PORT + 8) {
		pthread_mutex_lock(&vm->dev_lock);
		if (write)
			uart_write(&vm->uart, port - COM1_PORT, data[0]);
		else
			dev_put_val(data, size, uart_read(&vm->uart, port - COM1_PORT));
		pthread_mutex_unlock(&vm->dev_lock);
		return;
	}
	if (port == I8042_DATA_PORT || port == I8042_CMD_PORT) {
		i8042_access(v, port, write, data, size);
		return;
	}
	if (port >= HUSK_CTL_PORT && port < HUSK_CTL_PORT + HUSK_CTL_SIZE) {
		vm_ctl_access(v, port - HUSK_CTL_PORT, write, data, size);
		return;
	}
	/* Absent hardware (other COM ports, PCI config, CMOS...) floats high. */
	if (!write)
		dev_put_val(data, size, ~0ull);
}

