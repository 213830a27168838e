/*
 * devices_x86: the PC's port I/O (COM1, the i8042 reset line, husk's control
 * ports); arch_x86.c passes KVM_EXIT_IO here. arch_devices_init() is here too.
 */
#ifndef HUSK_DEVICES_X86_H
#define HUSK_DEVICES_X86_H

#include <stdbool.h>
#include <stdint.h>

struct vcpu;

void pio_x86(struct vcpu *v, uint16_t port, bool write, uint8_t *data, unsigned size);

#endif
