/*
 * arch_x86: the x86-64 side of machine/arch.h: the types the machine keeps
 * for it, its guest-physical layout, and the kernel parameters every x86
 * guest gets.
 */
#ifndef HUSK_ARCH_X86_H
#define HUSK_ARCH_X86_H

#include <linux/kvm.h>
#include <stdbool.h>
#include <stdint.h>

#include "x86/layout_x86.h"
#include "x86/loader_x86.h"

/*
 * Serial console, reset through the i8042, no hang on panic. noreplace-smp:
 * a kernel that finds one CPU rewrites every lock prefix of its text, one
 * text_poke (an mm switch and a TLB flush) each, thousands of them; keeping
 * the prefixes costs a one-vCPU guest a few cycles per atomic instead
 * (kernel-config/README.md has the measured saving).
 */
#define ARCH_CMDLINE_BASE "console=ttyS0 reboot=k panic=-1 no_timer_check noreplace-smp"
/* Linux finds virtio-mmio devices on its command line (virtio_mmio.device=). */
#define ARCH_VIRTIO_ON_CMDLINE 1
#define ARCH_VIRTIO_GPA VIRTIO_MMIO_GPA
#define ARCH_VIRTIO_STRIDE 0x1000ull
#define ARCH_KERNEL_MAX_FILE KERNEL_MAX_FILE
/* What husk boots, for usage texts; the default kernel's file name. */
#define ARCH_KERNEL_KIND "an x86-64 Linux kernel (vmlinux ELF or bzImage)"
#define ARCH_KERNEL_NAME "vmlinux"
/* RAM from gpa 0 up to the 32-bit MMIO hole, the rest above 4 GiB (guest_mem.h). */
#define ARCH_RAM_GPA 0ull
#define ARCH_RAM_LOW_MAX GMEM_HOLE_START

/* What the host's KVM told us once (kvm_sys.arch). */
struct arch_kvm {
	bool have_xcrs;
	struct kvm_cpuid2 *cpuid;	/* KVM_GET_SUPPORTED_CPUID */
};

/* The guest kernel as loaded (vm.arch). */
struct arch_vm {
	struct kernel_image kernel;
};

#endif
