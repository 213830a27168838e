/*
 * layout_arm64: the guest-physical map of an arm64 husk VM, in the style of
 * QEMU's `virt` machine so the guest kernel needs nothing unusual: devices
 * below 1 GiB, RAM from 2 GiB. The guest learns all of it from the device
 * tree (fdt_arm64.h); nothing here is guest-visible otherwise.
 *
 * RAM: the kernel Image at its 2 MiB-aligned base + text_offset, the
 * device tree in the last ARM64_FDT_MAX bytes, the initrd right below it.
 */
#ifndef HUSK_LAYOUT_ARM64_H
#define HUSK_LAYOUT_ARM64_H

#define ARM64_RAM_BASE		0x80000000ull

/* GICv3: distributor, then one 128 KiB redistributor (RD + SGI frames) per vCPU. */
#define ARM64_GIC_DIST_BASE	0x08000000ull
#define ARM64_GIC_DIST_SIZE	0x10000ull
#define ARM64_GIC_REDIST_BASE	0x080a0000ull
#define ARM64_GIC_REDIST_SIZE	0x20000ull	/* per vCPU */
#define ARM64_GIC_REDIST_MAX	0x00f60000ull	/* up to 123 vCPUs below the UART */
/* Interrupts the GIC has, SGIs and PPIs included: every SPI below, in a multiple of 32. */
#define ARM64_GIC_NR_IRQS	128
/* GICv2: distributor as above, the CPU interface after it. */
#define ARM64_GIC_CPU_BASE	0x08010000ull
#define ARM64_GIC_CPU_SIZE	0x2000ull

/* A 16550-compatible UART on MMIO (byte registers), SPI ARM64_UART_SPI. */
#define ARM64_UART_BASE		0x09000000ull
#define ARM64_UART_SIZE		0x1000ull
#define ARM64_UART_SPI		1

/* virtio-mmio slots: slot i at BASE + i * SIZE, SPI ARM64_VIRTIO_SPI + i. */
#define ARM64_VIRTIO_BASE	0x0a000000ull
#define ARM64_VIRTIO_SIZE	0x200ull
#define ARM64_VIRTIO_SPI	16
#define ARM64_VIRTIO_SLOTS	32

/* The device tree: at most this large, at the top of RAM. */
#define ARM64_FDT_MAX		(2u << 20)

/* PPIs of the architected timer (GIC INTIDs 16 + n). */
#define ARM64_TIMER_PPI_SEC	13
#define ARM64_TIMER_PPI_PHYS	14
#define ARM64_TIMER_PPI_VIRT	11
#define ARM64_TIMER_PPI_HYP	10

#endif
