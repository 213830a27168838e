/*
 * arch_arm64: the arm64 side of machine/arch.h: the types the machine keeps
 * for it, its guest-physical layout (layout_arm64.h) and the kernel
 * parameters every arm64 guest gets.
 */
#ifndef HUSK_ARCH_ARM64_H
#define HUSK_ARCH_ARM64_H

#include <linux/kvm.h>
#include <stdbool.h>
#include <stdint.h>

#include "arm64/image_arm64.h"
#include "arm64/layout_arm64.h"

/*
 * The console is the device tree's stdout-path (the MMIO 16550); a
 * panicking kernel resets through PSCI, which ends the VM (vm.c tells a
 * panic from a reset by the console).
 */
#define ARCH_CMDLINE_BASE "console=ttyS0 panic=-1"
/* Linux finds virtio-mmio devices in the device tree (fdt_arm64.c). */
#define ARCH_VIRTIO_ON_CMDLINE 0
#define ARCH_VIRTIO_GPA ARM64_VIRTIO_BASE
#define ARCH_VIRTIO_STRIDE ARM64_VIRTIO_SIZE
/* An Image is uncompressed: 64 MiB holds any kernel husk boots, with room. */
#define ARCH_KERNEL_MAX_FILE (64ull << 20)
/* What husk boots, for usage texts; the default kernel's file name. */
#define ARCH_KERNEL_KIND "an arm64 Linux kernel (an uncompressed Image)"
#define ARCH_KERNEL_NAME "Image"
/* RAM from 2 GiB up in one piece: no hole above it (guest_mem.h). */
#define ARCH_RAM_GPA ARM64_RAM_BASE
#define ARCH_RAM_LOW_MAX GMEM_MAX_SIZE
/* arm64's COMMAND_LINE_SIZE, NUL included. */
#define CMDLINE_MAX 2048u

/* What the host's KVM told us once (kvm_sys.arch): nothing arm64 needs yet. */
struct arch_kvm {
	char unused;
};

/* The machine as built (vm.arch). */
struct arch_vm {
	struct arm64_image kernel;
	struct kvm_vcpu_init init;	/* KVM_ARM_PREFERRED_TARGET: every vCPU's kind */
	int gic_fd;			/* the in-kernel GIC (KVM_CREATE_DEVICE)... */
	bool gic_open;			/* ...when this is set (a zeroed vm has none) */
	unsigned gic_version;		/* 3, or 2 where only that exists */
	uint64_t fdt_gpa;		/* the device tree: x0 of the boot vCPU */
};

#endif
