/*
 * arch_arm64: machine/arch.h for arm64: a machine in the style of QEMU's
 * virt board without firmware. The in-kernel GIC (v3, or v2 where only that
 * exists) and the architected timer come from KVM, PSCI too (CPU bring-up,
 * SYSTEM_OFF and SYSTEM_RESET end in KVM_EXIT_SYSTEM_EVENT, handled by
 * vm.c). The kernel Image is entered directly with the device tree in x0;
 * the console is a 16550 on MMIO.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "arm64/cpu_arm64.h"
#include "arm64/fdt_arm64.h"
#include "arm64/vmstate_arm64.h"
#include "machine/arch.h"
#include "machine/vm.h"
#include "lib/util.h"

#define GIC_SPI_BASE	32	/* INTIDs below are SGIs and PPIs */

int arch_kvm_init(struct kvm_sys *k)
{
	/* Guests start their secondary CPUs and stop the machine through it. */
	return kvm_require(k, KVM_CAP_ARM_PSCI_0_2, "KVM_CAP_ARM_PSCI_0_2 (PSCI in the kernel)");
}

void arch_kvm_free(struct kvm_sys *k)
{
}

int arch_host_fp(const struct kvm_sys *k, uint8_t fp[32])
{
	return hostfp_arm64(k, fp);
}

static int gic_attr(struct vm *vm, uint32_t group, uint64_t attr, void *val, const char *what)
{
	struct kvm_device_attr a = {
		.group = group,
		.attr = attr,
		.addr = (uint64_t)(uintptr_t)val,
	};

	if (ioctl(vm->arch.gic_fd, KVM_SET_DEVICE_ATTR, &a) < 0)
		return husk_seterr(errno, "GICv%u %s: %s", vm->arch.gic_version, what,
				   strerror(errno));
	return 0;
}

/* The GIC, placed where the device tree says; it is finished once every vCPU exists. */
static int gic_create(struct vm *vm)
{
	struct kvm_create_device d = { .type = KVM_DEV_TYPE_ARM_VGIC_V3 };
	uint64_t dist = ARM64_GIC_DIST_BASE, redist = ARM64_GIC_REDIST_BASE;
	uint64_t cpu = ARM64_GIC_CPU_BASE;
	int err;

	vm->arch.gic_version = 3;
	if (ioctl(vm->fd, KVM_CREATE_DEVICE, &d) < 0) {
		int v3_err = errno;

		d.type = KVM_DEV_TYPE_ARM_VGIC_V2;
		if (ioctl(vm->fd, KVM_CREATE_DEVICE, &d) < 0)
			return husk_seterr(v3_err, "this host's KVM has no in-kernel GIC "
					   "(KVM_CREATE_DEVICE GICv3: %s, GICv2: %s)",
					   strerror(v3_err), strerror(errno));
		vm->arch.gic_version = 2;
	}
	vm->arch.gic_fd = d.fd;
	vm->arch.gic_open = true;
	if (vm->arch.gic_version == 2) {
		if (vm->nr_vcpus > FDT_ARM64_MAX_CPUS_V2)
			return husk_seterr(EINVAL, "this host's GICv2 serves at most %d vCPUs, "
					   "not %u", FDT_ARM64_MAX_CPUS_V2, vm->nr_vcpus);
		err = gic_attr(vm, KVM_DEV_ARM_VGIC_GRP_ADDR, KVM_VGIC_V2_ADDR_TYPE_DIST, &dist,
			       "distributor address");
		if (!err)
			err = gic_attr(vm, KVM_DEV_ARM_VGIC_GRP_ADDR, KVM_VGIC_V2_ADDR_TYPE_CPU,
				       &cpu, "CPU interface address");
		return err;
	}
	if (vm->nr_vcpus > FDT_ARM64_MAX_CPUS)
		return husk_seterr(EINVAL, "husk's arm64 machine has room for %llu vCPUs, not %u",
				   (unsigned long long)FDT_ARM64_MAX_CPUS, vm->nr_vcpus);
	err = gic_attr(vm, KVM_DEV_ARM_VGIC_GRP_ADDR, KVM_VGIC_V3_ADDR_TYPE_DIST, &dist,
		       "distributor address");
	if (!err)
		err = gic_attr(vm, KVM_DEV_ARM_VGIC_GRP_ADDR, KVM_VGIC_V3_ADDR_TYPE_REDIST,
			       &redist, "redistributor address");
	return err;
}

static int gic_finish(struct vm *vm)
{
	uint32_t nr = ARM64_GIC_NR_IRQS;
	int err;

	err = gic_attr(vm, KVM_DEV_ARM_VGIC_GRP_NR_IRQS, 0, &nr, "interrupt count");
	if (!err)
		err = gic_attr(vm, KVM_DEV_ARM_VGIC_GRP_CTRL, KVM_DEV_ARM_VGIC_CTRL_INIT, NULL,
			       "init");
	return err;
}

int arch_vm_init(struct vm *vm)
{
	/* A zeroed vm: fd 0 is not a GIC until gic_create says so. */
	vm->arch.gic_open = false;
	if (ioctl(vm->fd, KVM_ARM_PREFERRED_TARGET, &vm->arch.init) < 0)
		return husk_seterr(errno, "KVM_ARM_PREFERRED_TARGET: %s", strerror(errno));
	return gic_create(vm);
}

void arch_vm_free(struct vm *vm)
{
	if (vm->arch.gic_open)
		close(vm->arch.gic_fd);
	vm->arch.gic_open = false;
}

static uint64_t ram_end(const struct vm *vm)
{
	return ARM64_RAM_BASE + vm->mem.size;
}

/*
 * The header is checked first; the file then goes straight into guest RAM
 * at the place it asked for, with no copy of the whole Image in between.
 */
int arch_load_kernel(struct vm *vm, int fd)
{
	struct arm64_image *k = &vm->arch.kernel;
	uint8_t hdr[ARM64_IMAGE_HDR_LEN];
	uint64_t size;
	void *dst;
	int err;

	size = lseek(fd, 0, SEEK_END);
	if (size == (uint64_t)-1)
		return husk_seterr(errno, "cannot size the Image: %s", strerror(errno));
	if (size < sizeof(hdr))
		return image_arm64_parse(hdr, size, ARM64_RAM_BASE, vm->mem.size, k);
	err = read_exact_at(fd, hdr, sizeof(hdr), 0);
	if (err)
		return husk_seterr(err, "cannot read the Image header: %s", strerror(-err));
	err = image_arm64_parse(hdr, size, ARM64_RAM_BASE, vm->mem.size, k);
	if (err)
		return err;
	/* The device tree takes the top of RAM: the kernel must end below it. */
	vm->arch.fdt_gpa = ram_end(vm) - ARM64_FDT_MAX;
	if (k->end > vm->arch.fdt_gpa)
		return husk_seterr(ENOSPC, "the arm64 Image (ends at 0x%llx) runs into the device "
				   "tree at 0x%llx: give the VM more memory with --mem",
				   (unsigned long long)k->end, (unsigned long long)vm->arch.fdt_gpa);
	dst = gmem_ptr(&vm->mem, k->load, size);
	if (!dst)
		return husk_seterr(EFAULT, "the arm64 Image [0x%llx, +0x%llx) is outside RAM",
				   (unsigned long long)k->load, (unsigned long long)size);
	err = read_exact_at(fd, dst, size, 0);
	if (err)
		return husk_seterr(err, "cannot read the Image: %s", strerror(-err));
	husk_debug("arm64 Image: %llu bytes at 0x%llx, claims up to 0x%llx",
		   (unsigned long long)size, (unsigned long long)k->load,
		   (unsigned long long)k->end);
	return 0;
}

size_t arch_cmdline_max(const struct vm *vm)
{
	return CMDLINE_MAX;
}

int arch_initrd_addr(struct vm *vm, uint64_t len, uint64_t *gpa)
{
	return image_arm64_initrd_addr(&vm->arch.kernel, vm->arch.fdt_gpa, len, gpa);
}

int arch_boot_tables(struct vm *vm, const char *cmdline, uint64_t rd_gpa, uint64_t rd_len,
		     const uint8_t *seed)
{
	struct fdt_arm64_cfg c = {
		.ram_base = ARM64_RAM_BASE,
		.ram_size = vm->mem.size,
		.nr_cpus = vm->nr_vcpus,
		.gic_version = vm->arch.gic_version,
		.bootargs = cmdline,
		.initrd_start = rd_len ? rd_gpa : 0,
		.initrd_end = rd_len ? rd_gpa + rd_len : 0,
		/* Slot 0 is the boot timer's when it is on: the guest finds no device there. */
		.nr_virtio = vm->virtio_first + vm->nr_virtio,
		.rng_seed = seed,
		.rng_seed_len = seed ? BOOT_SEED_LEN : 0,
	};
	void *dst = gmem_ptr(&vm->mem, vm->arch.fdt_gpa, ARM64_FDT_MAX);
	int n;

	if (!dst)
		return husk_seterr(EFAULT, "no RAM for the device tree at 0x%llx",
				   (unsigned long long)vm->arch.fdt_gpa);
	n = fdt_arm64_build(dst, ARM64_FDT_MAX, &c);
	if (n < 0)
		return n;
	husk_debug("kernel entry 0x%llx, device tree at 0x%llx (%d bytes), cmdline \"%s\"",
		   (unsigned long long)vm->arch.kernel.load,
		   (unsigned long long)vm->arch.fdt_gpa, n, cmdline);
	return 0;
}

static int set_reg(struct vcpu *v, uint64_t id, uint64_t val)
{
	struct kvm_one_reg r = { .id = id, .addr = (uint64_t)(uintptr_t)&val };

	if (ioctl(v->fd, KVM_SET_ONE_REG, &r) < 0)
		return husk_seterr(errno, "vCPU %u: KVM_SET_ONE_REG 0x%llx: %s", v->id,
				   (unsigned long long)id, strerror(errno));
	return 0;
}

/* The counter's rate, which every vCPU sees as CNTFRQ_EL0: the guest clock. */
static uint32_t counter_khz(void)
{
	uint64_t hz;

	__asm__ volatile("mrs %0, cntfrq_el0" : "=r"(hz));
	return (uint32_t)(hz / 1000);
}

int arch_vcpus_created(struct vm *vm)
{
	unsigned i;

	for (i = 0; i < vm->nr_vcpus; i++) {
		struct kvm_vcpu_init init = vm->arch.init;

		memset(init.features, 0, sizeof(init.features));
		init.features[0] = arm64_vcpu_features(i);
		if (ioctl(vm->vcpus[i].fd, KVM_ARM_VCPU_INIT, &init) < 0)
			return husk_seterr(errno, "KVM_ARM_VCPU_INIT on vCPU %u: %s", i,
					   strerror(errno));
	}
	return gic_finish(vm);
}

int arch_vcpus_init(struct vm *vm, bool boot)
{
	struct arm64_reg regs[ARM64_BOOT_REGS];
	unsigned i, n;
	int err = 0;

	vm->tsc_khz = counter_khz();
	if (!boot)
		return 0;
	n = arm64_boot_regs(vm->arch.kernel.load, vm->arch.fdt_gpa, regs);
	for (i = 0; i < n && !err; i++)
		err = set_reg(&vm->vcpus[0], regs[i].id, regs[i].val);
	return err;
}

static void uart_tx(void *opaque, uint8_t byte)
{
	struct vm *vm = opaque;

	console_put(&vm->console, byte);
}

static void uart_irq(void *opaque, int level)
{
	struct vm *vm = opaque;
	struct kvm_irq_level irq = {
		.irq = KVM_ARM_IRQ_TYPE_SPI << KVM_ARM_IRQ_TYPE_SHIFT |
		       (GIC_SPI_BASE + ARM64_UART_SPI),
		.level = level,
	};

	ioctl(vm->fd, KVM_IRQ_LINE, &irq);
}

void arch_devices_init(struct vm *vm)
{
	uart_init(&vm->uart, uart_tx, uart_irq, vm);
}

/* The UART's byte registers, one per address (the device tree gives no reg-shift). */
bool arch_mmio(struct vcpu *v, uint64_t gpa, bool write, uint8_t *data, unsigned len)
{
	struct vm *vm = v->vm;
	uint64_t off = gpa - ARM64_UART_BASE;

	if (gpa < ARM64_UART_BASE || off >= ARM64_UART_SIZE)
		return false;
	if (off >= 8) {
		/* Past the 16550's eight registers: nothing answers. */
		if (!write)
			memset(data, 0, len);
		return true;
	}
	pthread_mutex_lock(&vm->dev_lock);
	if (write)
		uart_write(&vm->uart, off, data[0]);
	else
		dev_put_val(data, len, uart_read(&vm->uart, off));
	pthread_mutex_unlock(&vm->dev_lock);
	return true;
}

/* With the in-kernel GIC: the irqfd GSI of an SPI is its number among SPIs. */
unsigned arch_virtio_gsi(unsigned slot)
{
	return ARM64_VIRTIO_SPI + slot;
}

/* Every exit an arm64 guest causes is the machine's (MMIO, PSCI's system events). */
bool arch_handle_exit(struct vcpu *v)
{
	return vm_exit_unexpected(v);
}

int arch_vcpu_pc(struct vcpu *v, uint64_t *pc)
{
	struct kvm_one_reg r = { .id = arm64_core_reg_pc(), .addr = (uint64_t)(uintptr_t)pc };

	if (ioctl(v->fd, KVM_GET_ONE_REG, &r) < 0)
		return -errno;
	return 0;
}

void arch_report_internal_error(struct vcpu *v)
{
	uint64_t pc = 0;

	arch_vcpu_pc(v, &pc);
	vm_stop(v->vm, VM_STOP_CRASH, 0, "KVM internal error (suberror %u) on vCPU %u at "
		"pc 0x%llx", v->run->internal.suberror, v->id, (unsigned long long)pc);
}

int arch_save_state(struct vm *vm, struct snap_writer *w)
{
	return vmstate_save_arm64(vm, w);
}

int arch_restore_state(struct vm *vm, const struct vm_restore *r)
{
	return vmstate_restore_arm64(vm, r);
}
