/*
 * fdt_arm64: the arm64 guest's device tree, built and then parsed back
 * with libfdt, node by node and property by property, as the guest kernel
 * reads it; and every configuration the machine cannot have refused.
 */
#include <check.h>
#include <errno.h>
#include <libfdt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arm64/fdt_arm64.h"
#include "suites.h"

static uint8_t blob[ARM64_FDT_MAX];
static const uint8_t seed[32] = { 1, 2, 3, 4, 5, 6, 7, 8, 9 };

static struct fdt_arm64_cfg cfg(void)
{
	return (struct fdt_arm64_cfg){
		.ram_base = ARM64_RAM_BASE, .ram_size = 256ull << 20, .nr_cpus = 4,
		.gic_version = 3, .bootargs = "console=ttyS0 quiet",
		.initrd_start = ARM64_RAM_BASE + (100ull << 20),
		.initrd_end = ARM64_RAM_BASE + (101ull << 20) + 123,
		.rng_seed = seed, .rng_seed_len = sizeof(seed), .nr_virtio = 3,
	};
}

static int node(const char *path)
{
	int off = fdt_path_offset(blob, path);

	ck_assert_msg(off >= 0, "no node %s: %s", path, fdt_strerror(off));
	return off;
}

static const void *getprop(const char *path, const char *name, int *len)
{
	const void *p = fdt_getprop(blob, node(path), name, len);

	ck_assert_msg(p != NULL, "%s has no %s", path, name);
	return p;
}

static void assert_str(const char *path, const char *name, const char *want)
{
	int len;
	const char *s = getprop(path, name, &len);

	ck_assert_int_eq(len, (int)strlen(want) + 1);
	ck_assert_str_eq(s, want);
}

/* The property's cells, big-endian in the tree, host order here. */
static unsigned cells(const char *path, const char *name, uint32_t *out, unsigned max)
{
	int len, i;
	const fdt32_t *p = getprop(path, name, &len);

	ck_assert_int_eq(len % 4, 0);
	ck_assert_uint_le((unsigned)len / 4, max);
	for (i = 0; i < len / 4; i++)
		out[i] = fdt32_to_cpu(p[i]);
	return len / 4;
}

static uint64_t u64_prop(const char *path, const char *name)
{
	int len;
	const fdt64_t *p = getprop(path, name, &len);

	ck_assert_int_eq(len, 8);
	return fdt64_to_cpu(*p);
}

static void build(const struct fdt_arm64_cfg *c)
{
	int n = fdt_arm64_build(blob, sizeof(blob), c);

	ck_assert_msg(n > 0, "build: %d", n);
	ck_assert_int_eq(fdt_check_header(blob), 0);
	ck_assert_int_eq((int)fdt_totalsize(blob), n);
}

START_TEST(every_node_and_property)
{
	struct fdt_arm64_cfg c = cfg();
	uint32_t v[16];
	int len;
	const char *compat;

	build(&c);
	assert_str("/", "compatible", "linux,dummy-virt");
	ck_assert_uint_eq(cells("/", "#address-cells", v, 1), 1);
	ck_assert_uint_eq(v[0], 2);
	cells("/", "#size-cells", v, 1);
	ck_assert_uint_eq(v[0], 2);
	cells("/", "interrupt-parent", v, 1);
	ck_assert_uint_eq(v[0], FDT_ARM64_GIC_PHANDLE);

	assert_str("/chosen", "bootargs", "console=ttyS0 quiet");
	assert_str("/chosen", "stdout-path", "/uart@9000000");
	ck_assert_uint_eq(u64_prop("/chosen", "linux,initrd-start"), c.initrd_start);
	ck_assert_uint_eq(u64_prop("/chosen", "linux,initrd-end"), c.initrd_end);
	ck_assert_int_eq(memcmp(getprop("/chosen", "rng-seed", &len), seed, sizeof(seed)), 0);
	ck_assert_int_eq(len, (int)sizeof(seed));

	assert_str("/memory@80000000", "device_type", "memory");
	ck_assert_uint_eq(cells("/memory@80000000", "reg", v, 4), 4);
	ck_assert_uint_eq(v[0], 0);
	ck_assert_uint_eq(v[1], 0x80000000u);
	ck_assert_uint_eq(v[2], 0);
	ck_assert_uint_eq(v[3], 256u << 20);

	cells("/cpus", "#address-cells", v, 1);
	ck_assert_uint_eq(v[0], 1);
	cells("/cpus", "#size-cells", v, 1);
	ck_assert_uint_eq(v[0], 0);
	for (unsigned i = 0; i < 4; i++) {
		char path[32];

		snprintf(path, sizeof(path), "/cpus/cpu@%u", i);
		assert_str(path, "device_type", "cpu");
		assert_str(path, "compatible", "arm,arm-v8");
		assert_str(path, "enable-method", "psci");
		cells(path, "reg", v, 1);
		ck_assert_uint_eq(v[0], i);
	}
	ck_assert_int_lt(fdt_path_offset(blob, "/cpus/cpu@4"), 0);

	compat = getprop("/psci", "compatible", &len);
	ck_assert_str_eq(compat, "arm,psci-0.2");
	ck_assert_int_gt(len, (int)sizeof("arm,psci-0.2"));
	ck_assert_str_eq(compat + sizeof("arm,psci-0.2"), "arm,psci");
	assert_str("/psci", "method", "hvc");

	assert_str("/intc@8000000", "compatible", "arm,gic-v3");
	ck_assert_uint_eq(cells("/intc@8000000", "reg", v, 8), 8);
	ck_assert_uint_eq(v[1], ARM64_GIC_DIST_BASE);
	ck_assert_uint_eq(v[3], ARM64_GIC_DIST_SIZE);
	ck_assert_uint_eq(v[5], ARM64_GIC_REDIST_BASE);
	ck_assert_uint_eq(v[7], 4 * ARM64_GIC_REDIST_SIZE);
	cells("/intc@8000000", "#interrupt-cells", v, 1);
	ck_assert_uint_eq(v[0], 3);
	cells("/intc@8000000", "#address-cells", v, 1);
	ck_assert_uint_eq(v[0], 0);
	cells("/intc@8000000", "phandle", v, 1);
	ck_assert_uint_eq(v[0], FDT_ARM64_GIC_PHANDLE);
	getprop("/intc@8000000", "interrupt-controller", &len);
	ck_assert_int_eq(len, 0);

	assert_str("/timer", "compatible", "arm,armv8-timer");
	ck_assert_uint_eq(cells("/timer", "interrupts", v, 12), 12);
	{
		static const uint32_t want[] = { 1, 13, 4, 1, 14, 4, 1, 11, 4, 1, 10, 4 };

		for (unsigned i = 0; i < 12; i++)
			ck_assert_uint_eq(v[i], want[i]);
	}

	assert_str("/uart@9000000", "compatible", "ns16550a");
	ck_assert_uint_eq(cells("/uart@9000000", "reg", v, 4), 4);
	ck_assert_uint_eq(v[1], ARM64_UART_BASE);
	ck_assert_uint_eq(v[3], ARM64_UART_SIZE);
	cells("/uart@9000000", "interrupts", v, 3);
	ck_assert_uint_eq(v[0], 0);
	ck_assert_uint_eq(v[1], ARM64_UART_SPI);
	ck_assert_uint_eq(v[2], 4);
	cells("/uart@9000000", "clock-frequency", v, 1);
	ck_assert_uint_eq(v[0], 1843200);

	for (unsigned i = 0; i < 3; i++) {
		char path[48];

		snprintf(path, sizeof(path), "/virtio_mmio@%llx",
			 ARM64_VIRTIO_BASE + i * ARM64_VIRTIO_SIZE);
		assert_str(path, "compatible", "virtio,mmio");
		cells(path, "reg", v, 4);
		ck_assert_uint_eq(v[1], ARM64_VIRTIO_BASE + i * ARM64_VIRTIO_SIZE);
		ck_assert_uint_eq(v[3], ARM64_VIRTIO_SIZE);
		cells(path, "interrupts", v, 3);
		ck_assert_uint_eq(v[0], 0);
		ck_assert_uint_eq(v[1], ARM64_VIRTIO_SPI + i);
		ck_assert_uint_eq(v[2], 1);
		getprop(path, "dma-coherent", &len);
	}
	ck_assert_int_lt(fdt_path_offset(blob, "/virtio_mmio@a000600"), 0);
}
END_TEST

/* Optional parts absent; one vCPU needs no enable-method; a GICv2's PPIs name their CPUs. */
START_TEST(minimal_and_gicv2)
{
	struct fdt_arm64_cfg c = { .ram_base = ARM64_RAM_BASE, .ram_size = 64ull << 20,
				   .nr_cpus = 1, .gic_version = 3 };
	uint32_t v[12];
	int len;

	build(&c);
	ck_assert_ptr_null(fdt_getprop(blob, node("/chosen"), "bootargs", &len));
	ck_assert_ptr_null(fdt_getprop(blob, node("/chosen"), "linux,initrd-start", &len));
	ck_assert_ptr_null(fdt_getprop(blob, node("/chosen"), "rng-seed", &len));
	ck_assert_ptr_null(fdt_getprop(blob, node("/cpus/cpu@0"), "enable-method", &len));
	ck_assert_int_lt(fdt_path_offset(blob, "/virtio_mmio@a000000"), 0);

	c.gic_version = 2;
	c.nr_cpus = 3;
	build(&c);
	assert_str("/intc@8000000", "compatible", "arm,cortex-a15-gic");
	cells("/intc@8000000", "reg", v, 8);
	ck_assert_uint_eq(v[5], ARM64_GIC_CPU_BASE);
	cells("/timer", "interrupts", v, 12);
	ck_assert_uint_eq(v[2], 4 | 0x7 << 8);
}
END_TEST

/* Affinity beyond 16 vCPUs goes to Aff1, as KVM numbers them. */
START_TEST(many_cpus)
{
	struct fdt_arm64_cfg c = cfg();
	uint32_t v[1];

	c.nr_cpus = FDT_ARM64_MAX_CPUS;
	build(&c);
	cells("/cpus/cpu@100", "reg", v, 1);
	ck_assert_uint_eq(v[0], 0x100);
	ck_assert_uint_eq(fdt_arm64_mpidr(17), 0x101);
	ck_assert_uint_eq(fdt_arm64_mpidr(15), 0xf);
}
END_TEST

START_TEST(refusals)
{
	struct fdt_arm64_cfg c;
	uint8_t small[64];

	c = cfg(); c.gic_version = 4;
	ck_assert_int_eq(fdt_arm64_build(blob, sizeof(blob), &c), -EINVAL);
	c = cfg(); c.nr_cpus = 0;
	ck_assert_int_eq(fdt_arm64_build(blob, sizeof(blob), &c), -EINVAL);
	c = cfg(); c.nr_cpus = FDT_ARM64_MAX_CPUS + 1;
	ck_assert_int_eq(fdt_arm64_build(blob, sizeof(blob), &c), -EINVAL);
	c = cfg(); c.gic_version = 2; c.nr_cpus = 9;
	ck_assert_int_eq(fdt_arm64_build(blob, sizeof(blob), &c), -EINVAL);
	c = cfg(); c.ram_size = 0;
	ck_assert_int_eq(fdt_arm64_build(blob, sizeof(blob), &c), -EINVAL);
	c = cfg(); c.ram_base = UINT64_MAX - 10;
	ck_assert_int_eq(fdt_arm64_build(blob, sizeof(blob), &c), -EINVAL);
	c = cfg(); c.initrd_end = c.ram_base + c.ram_size + 1;
	ck_assert_int_eq(fdt_arm64_build(blob, sizeof(blob), &c), -EINVAL);
	c = cfg(); c.initrd_start = c.initrd_end + 1;
	ck_assert_int_eq(fdt_arm64_build(blob, sizeof(blob), &c), -EINVAL);
	c = cfg(); c.initrd_start = ARM64_RAM_BASE - 4096;
	ck_assert_int_eq(fdt_arm64_build(blob, sizeof(blob), &c), -EINVAL);
	c = cfg(); c.nr_virtio = ARM64_VIRTIO_SLOTS + 1;
	ck_assert_int_eq(fdt_arm64_build(blob, sizeof(blob), &c), -EINVAL);
	c = cfg(); c.rng_seed_len = FDT_ARM64_RNG_SEED_MAX + 1;
	ck_assert_int_eq(fdt_arm64_build(blob, sizeof(blob), &c), -EINVAL);
	c = cfg();
	ck_assert_int_eq(fdt_arm64_build(small, sizeof(small), &c), -ENOSPC);
}
END_TEST

Suite *fdt_arm64_suite(void)
{
	Suite *s = suite_create("fdt_arm64");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, every_node_and_property);
	tcase_add_test(tc, minimal_and_gicv2);
	tcase_add_test(tc, many_cpus);
	tcase_add_test(tc, refusals);
	suite_add_tcase(s, tc);
	return s;
}
