/*
 * fdt_arm64: the guest's device tree, with libfdt's sequential writer. See
 * fdt_arm64.h.
 *
 * Interrupt specifiers have three cells, as both GIC bindings want: the
 * kind (SPI or PPI), its number within that kind, and the trigger. A GICv2
 * also wants, in a PPI's trigger cell, the mask of CPUs it reaches.
 */
#include <errno.h>
#include <libfdt.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "arm64/fdt_arm64.h"
#include "lib/util.h"

#define IRQ_SPI			0
#define IRQ_PPI			1
#define IRQ_EDGE_RISING		1
#define IRQ_LEVEL_HIGH		4
#define UART_CLOCK_HZ		1843200

/* The writer: the first libfdt error is kept, and every later call is a no-op. */
struct w {
	void *fdt;
	int err;
};

static void begin(struct w *w, const char *name)
{
	if (!w->err)
		w->err = fdt_begin_node(w->fdt, name);
}

static void end(struct w *w)
{
	if (!w->err)
		w->err = fdt_end_node(w->fdt);
}

static void prop(struct w *w, const char *name, const void *val, int len)
{
	if (!w->err)
		w->err = fdt_property(w->fdt, name, val, len);
}

static void prop_str(struct w *w, const char *name, const char *s)
{
	prop(w, name, s, strlen(s) + 1);
}

static void prop_u32(struct w *w, const char *name, uint32_t v)
{
	if (!w->err)
		w->err = fdt_property_u32(w->fdt, name, v);
}

static void prop_u64(struct w *w, const char *name, uint64_t v)
{
	if (!w->err)
		w->err = fdt_property_u64(w->fdt, name, v);
}

/* Cells, big-endian, as every device tree property holds them. */
static void prop_cells(struct w *w, const char *name, const uint32_t *c, unsigned n)
{
	fdt32_t be[16];
	unsigned i;

	for (i = 0; i < n && i < 16; i++)
		be[i] = cpu_to_fdt32(c[i]);
	prop(w, name, be, i * sizeof(be[0]));
}

/* A reg of (address, size) pairs in two cells each (#address-cells = #size-cells = 2). */
static void prop_reg(struct w *w, const uint64_t *pairs, unsigned n)
{
	uint32_t c[16];
	unsigned i;

	for (i = 0; i < n && i < 4; i++) {
		c[4 * i] = pairs[2 * i] >> 32;
		c[4 * i + 1] = (uint32_t)pairs[2 * i];
		c[4 * i + 2] = pairs[2 * i + 1] >> 32;
		c[4 * i + 3] = (uint32_t)pairs[2 * i + 1];
	}
	prop_cells(w, "reg", c, 4 * i);
}

uint64_t fdt_arm64_mpidr(unsigned cpu)
{
	return (cpu & 0xf) | (uint64_t)((cpu >> 4) & 0xff) << 8;
}

static int check(const struct fdt_arm64_cfg *c, size_t cap)
{
	unsigned max = c->gic_version == 2 ? FDT_ARM64_MAX_CPUS_V2 : FDT_ARM64_MAX_CPUS;
	uint64_t ram_end = c->ram_base + c->ram_size;

	if (c->gic_version != 2 && c->gic_version != 3)
		return husk_seterr(EINVAL, "device tree: GIC version %u (2 or 3)", c->gic_version);
	if (!c->nr_cpus || c->nr_cpus > max)
		return husk_seterr(EINVAL, "device tree: %u vCPUs (1 to %u with a GICv%u)",
				   c->nr_cpus, max, c->gic_version);
	if (!c->ram_size || ram_end < c->ram_base)
		return husk_seterr(EINVAL, "device tree: no RAM, or RAM past the address space");
	if ((c->initrd_start || c->initrd_end) &&
	    (c->initrd_end < c->initrd_start || c->initrd_start < c->ram_base ||
	     c->initrd_end > ram_end))
		return husk_seterr(EINVAL, "device tree: the initrd [%#llx, %#llx) is not in RAM",
				   (unsigned long long)c->initrd_start,
				   (unsigned long long)c->initrd_end);
	if (c->nr_virtio > ARM64_VIRTIO_SLOTS)
		return husk_seterr(EINVAL, "device tree: %u virtio devices (at most %u)",
				   c->nr_virtio, ARM64_VIRTIO_SLOTS);
	if (c->rng_seed && c->rng_seed_len > FDT_ARM64_RNG_SEED_MAX)
		return husk_seterr(EINVAL, "device tree: an RNG seed of %zu bytes (at most %u)",
				   c->rng_seed_len, FDT_ARM64_RNG_SEED_MAX);
	if (cap > ARM64_FDT_MAX)
		return husk_seterr(EINVAL, "device tree: a buffer over the %u-byte limit",
				   ARM64_FDT_MAX);
	return 0;
}

static void cpus(struct w *w, const struct fdt_arm64_cfg *c)
{
	char name[32];
	unsigned i;

	begin(w, "cpus");
	prop_u32(w, "#address-cells", 1);
	prop_u32(w, "#size-cells", 0);
	for (i = 0; i < c->nr_cpus; i++) {
		snprintf(name, sizeof(name), "cpu@%llx", (unsigned long long)fdt_arm64_mpidr(i));
		begin(w, name);
		prop_str(w, "device_type", "cpu");
		prop_str(w, "compatible", "arm,arm-v8");
		prop_u32(w, "reg", (uint32_t)fdt_arm64_mpidr(i));
		/* KVM's in-kernel PSCI 0.2+ starts secondaries and powers off. */
		if (c->nr_cpus > 1)
			prop_str(w, "enable-method", "psci");
		end(w);
	}
	end(w);
}

static void gic(struct w *w, const struct fdt_arm64_cfg *c)
{
	char name[32];

	snprintf(name, sizeof(name), "intc@%llx", ARM64_GIC_DIST_BASE);
	begin(w, name);
	if (c->gic_version == 3) {
		uint64_t reg[] = { ARM64_GIC_DIST_BASE, ARM64_GIC_DIST_SIZE,
				   ARM64_GIC_REDIST_BASE, c->nr_cpus * ARM64_GIC_REDIST_SIZE };

		prop_str(w, "compatible", "arm,gic-v3");
		prop_reg(w, reg, 2);
	} else {
		uint64_t reg[] = { ARM64_GIC_DIST_BASE, 0x1000, ARM64_GIC_CPU_BASE,
				   ARM64_GIC_CPU_SIZE };

		prop_str(w, "compatible", "arm,cortex-a15-gic");
		prop_reg(w, reg, 2);
	}
	prop_u32(w, "#interrupt-cells", 3);
	/* An interrupt map's parent needs it; the GIC has no children here. */
	prop_u32(w, "#address-cells", 0);
	prop(w, "interrupt-controller", NULL, 0);
	prop_u32(w, "phandle", FDT_ARM64_GIC_PHANDLE);
	end(w);
}

static void timer(struct w *w, const struct fdt_arm64_cfg *c)
{
	uint32_t flags = IRQ_LEVEL_HIGH, irq[12];
	static const unsigned ppi[] = { ARM64_TIMER_PPI_SEC, ARM64_TIMER_PPI_PHYS,
					ARM64_TIMER_PPI_VIRT, ARM64_TIMER_PPI_HYP };
	unsigned i;

	if (c->gic_version == 2)
		flags |= ((1u << c->nr_cpus) - 1) << 8;
	for (i = 0; i < 4; i++) {
		irq[3 * i] = IRQ_PPI;
		irq[3 * i + 1] = ppi[i];
		irq[3 * i + 2] = flags;
	}
	begin(w, "timer");
	prop_str(w, "compatible", "arm,armv8-timer");
	prop_cells(w, "interrupts", irq, 12);
	prop(w, "always-on", NULL, 0);
	end(w);
}

static void mmio_dev(struct w *w, const char *kind, const char *compatible, uint64_t base,
		     uint64_t size, unsigned spi, uint32_t trigger)
{
	uint64_t reg[] = { base, size };
	uint32_t irq[] = { IRQ_SPI, spi, trigger };
	char name[48];

	snprintf(name, sizeof(name), "%s@%llx", kind, (unsigned long long)base);
	begin(w, name);
	prop_str(w, "compatible", compatible);
	prop_reg(w, reg, 1);
	prop_cells(w, "interrupts", irq, 3);
}

static void body(struct w *w, const struct fdt_arm64_cfg *c)
{
	static const char psci[] = "arm,psci-0.2\0arm,psci";
	uint64_t mem[] = { c->ram_base, c->ram_size };
	char name[48], uart[48];
	unsigned i;

	snprintf(uart, sizeof(uart), "/uart@%llx", ARM64_UART_BASE);
	begin(w, "");
	prop_str(w, "compatible", "linux,dummy-virt");
	prop_str(w, "model", "husk");
	prop_u32(w, "#address-cells", 2);
	prop_u32(w, "#size-cells", 2);
	prop_u32(w, "interrupt-parent", FDT_ARM64_GIC_PHANDLE);

	begin(w, "chosen");
	if (c->bootargs)
		prop_str(w, "bootargs", c->bootargs);
	prop_str(w, "stdout-path", uart);
	if (c->initrd_start || c->initrd_end) {
		prop_u64(w, "linux,initrd-start", c->initrd_start);
		prop_u64(w, "linux,initrd-end", c->initrd_end);
	}
	if (c->rng_seed && c->rng_seed_len)
		prop(w, "rng-seed", c->rng_seed, c->rng_seed_len);
	end(w);

	snprintf(name, sizeof(name), "memory@%llx", (unsigned long long)c->ram_base);
	begin(w, name);
	prop_str(w, "device_type", "memory");
	prop_reg(w, mem, 1);
	end(w);

	cpus(w, c);
	begin(w, "psci");
	prop(w, "compatible", psci, sizeof(psci));
	prop_str(w, "method", "hvc");
	end(w);
	gic(w, c);
	timer(w, c);

	mmio_dev(w, "uart", "ns16550a", ARM64_UART_BASE, ARM64_UART_SIZE, ARM64_UART_SPI,
		 IRQ_LEVEL_HIGH);
	prop_u32(w, "clock-frequency", UART_CLOCK_HZ);
	end(w);
	for (i = 0; i < c->nr_virtio; i++) {
		mmio_dev(w, "virtio_mmio", "virtio,mmio", ARM64_VIRTIO_BASE + i * ARM64_VIRTIO_SIZE,
			 ARM64_VIRTIO_SIZE, ARM64_VIRTIO_SPI + i, IRQ_EDGE_RISING);
		/* The device reads guest RAM directly: no cache maintenance needed. */
		prop(w, "dma-coherent", NULL, 0);
		end(w);
	}
	end(w);
}

int fdt_arm64_build(void *buf, size_t cap, const struct fdt_arm64_cfg *c)
{
	struct w w = { .fdt = buf };
	int err = check(c, cap);

	if (err)
		return err;
	w.err = fdt_create(buf, (int)cap);
	if (!w.err)
		w.err = fdt_finish_reservemap(buf);
	body(&w, c);
	if (!w.err)
		w.err = fdt_finish(buf);
	if (w.err == -FDT_ERR_NOSPACE)
		return husk_seterr(ENOSPC, "device tree: it does not fit in %zu bytes", cap);
	if (w.err)
		return husk_seterr(EINVAL, "device tree: %s", fdt_strerror(w.err));
	return (int)fdt_totalsize(buf);
}
