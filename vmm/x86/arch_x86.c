/*
 * arch_x86: machine/arch.h for x86-64: a PC without firmware (in-kernel
 * IOAPIC, LAPICs and PIT), entered directly in 64-bit mode, described by the
 * zero page, e820 and an MP table; its legacy devices answer port I/O.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include "machine/arch.h"
#include "machine/vm.h"
#include "lib/util.h"
#include "template/vm_snapshot.h"
#include "x86/bootparams_x86.h"
#include "x86/cpu_x86.h"
#include "x86/cpuid_x86.h"
#include "x86/devices_x86.h"
#include "x86/hostfp_x86.h"
#include "x86/mptable_x86.h"
#include "x86/vmstate_x86.h"

int arch_kvm_init(struct kvm_sys *k)
{
	struct kvm_cpuid2 *c;
	int err;

	err = kvm_require(k, KVM_CAP_PIT2, "KVM_CAP_PIT2 (in-kernel timer)");
	if (!err)
		err = kvm_require(k, KVM_CAP_SET_TSS_ADDR, "KVM_CAP_SET_TSS_ADDR");
	if (!err)
		err = kvm_require(k, KVM_CAP_EXT_CPUID, "KVM_CAP_EXT_CPUID");
	if (err)
		return err;

	k->arch.have_xcrs = kvm_cap(k, KVM_CAP_XCRS) > 0;
	c = calloc(1, sizeof(*c) + CPUID_MAX_ENTRIES * sizeof(c->entries[0]));
	if (!c)
		return husk_seterr(ENOMEM, "out of memory");
	c->nent = CPUID_MAX_ENTRIES;
	if (ioctl(k->fd, KVM_GET_SUPPORTED_CPUID, c) < 0) {
		err = errno;
		free(c);
		return husk_seterr(err, "KVM_GET_SUPPORTED_CPUID: %s", strerror(err));
	}
	k->arch.cpuid = c;
	return 0;
}

void arch_kvm_free(struct kvm_sys *k)
{
	free(k->arch.cpuid);
	k->arch.cpuid = NULL;
}

int arch_host_fp(const struct kvm_sys *k, uint8_t fp[32])
{
	return hostfp_x86(k, fp);
}

int arch_vm_init(struct vm *vm)
{
	uint64_t ident = KVM_IDENTITY_MAP_GPA;
	struct kvm_pit_config pit = { .flags = KVM_PIT_SPEAKER_DUMMY };

	/* Intel VMX needs these pages for real-mode emulation; harmless elsewhere. */
	if (ioctl(vm->fd, KVM_SET_TSS_ADDR, (unsigned long)KVM_TSS_GPA) < 0)
		return husk_seterr(errno, "KVM_SET_TSS_ADDR: %s", strerror(errno));
	if (kvm_cap(&vm->kvm, KVM_CAP_SET_IDENTITY_MAP_ADDR) &&
	    ioctl(vm->fd, KVM_SET_IDENTITY_MAP_ADDR, &ident) < 0)
		return husk_seterr(errno, "KVM_SET_IDENTITY_MAP_ADDR: %s", strerror(errno));
	if (ioctl(vm->fd, KVM_CREATE_IRQCHIP, NULL) < 0)
		return husk_seterr(errno, "KVM_CREATE_IRQCHIP: %s", strerror(errno));
	if (ioctl(vm->fd, KVM_CREATE_PIT2, &pit) < 0)
		return husk_seterr(errno, "KVM_CREATE_PIT2: %s", strerror(errno));
	return 0;
}

/* The irqchip and the PIT live and die with the VM fd. */
void arch_vm_free(struct vm *vm)
{
}

int arch_load_kernel(struct vm *vm, int fd)
{
	return load_kernel_fd_x86(&vm->mem, fd, &vm->arch.kernel);
}

size_t arch_cmdline_max(const struct vm *vm)
{
	return vm->arch.kernel.cmdline_max;
}

int arch_initrd_addr(struct vm *vm, uint64_t len, uint64_t *gpa)
{
	return initrd_addr_x86(&vm->mem, &vm->arch.kernel, len, gpa);
}

int arch_boot_tables(struct vm *vm, const char *cmdline, uint64_t rd_gpa, uint64_t rd_len,
		     const uint8_t *seed)
{
	int err = bootparams_write_x86(&vm->mem, &vm->arch.kernel, cmdline, rd_gpa, rd_len,
				       seed, BOOT_SEED_LEN);

	if (!err)
		err = mptable_write_x86(&vm->mem, EBDA_GPA, vm->nr_vcpus);
	if (!err)
		err = boot_tables_write_x86(&vm->mem);
	husk_debug("kernel entry 0x%llx, cmdline \"%s\"",
		   (unsigned long long)vm->arch.kernel.entry, cmdline);
	return err;
}

/* The in-kernel irqchip exists since arch_vm_init: nothing waits for the vCPUs. */
int arch_vcpus_created(struct vm *vm)
{
	return 0;
}

int arch_vcpus_init(struct vm *vm, bool boot)
{
	struct cpu_config cc;
	unsigned i;
	int khz, err;

	khz = ioctl(vm->vcpus[0].fd, KVM_GET_TSC_KHZ, 0);
	vm->tsc_khz = khz > 0 ? (uint32_t)khz : 0;
	if (!boot)
		return 0;	/* a restore sets every register from the template */
	cc.supported = vm->kvm.arch.cpuid;
	cc.nr_vcpus = vm->nr_vcpus;
	cc.tsc_khz = vm->tsc_khz;
	cc.entry = vm->arch.kernel.entry;
	cc.have_xcrs = vm->kvm.arch.have_xcrs;
	cc.tsc_deadline = kvm_cap(&vm->kvm, KVM_CAP_TSC_DEADLINE_TIMER) > 0;
	for (i = 0; i < vm->nr_vcpus; i++) {
		err = cpu_setup_x86(vm->vcpus[i].fd, i, &cc);
		if (err)
			return err;
	}
	return 0;
}

/* ISA lines free on husk's PC: 4 is COM1, 8 the RTC (absent, but Linux knows it). */
unsigned arch_virtio_gsi(unsigned slot)
{
	static const unsigned slot_irqs[] = { 5, 6, 7, 9, 10, 11, 12, 14 };

	return slot < ARRAY_SIZE(slot_irqs) ? slot_irqs[slot] : 0;
}

static void handle_io(struct vcpu *v)
{
	struct kvm_run *run = v->run;
	uint8_t *data = (uint8_t *)run + run->io.data_offset;
	unsigned i;

	for (i = 0; i < run->io.count; i++, data += run->io.size)
		pio_x86(v, run->io.port, run->io.direction == KVM_EXIT_IO_OUT, data,
			run->io.size);
}

bool arch_handle_exit(struct vcpu *v)
{
	switch (v->run->exit_reason) {
	case KVM_EXIT_IO:
		handle_io(v);
		return true;
	case KVM_EXIT_SHUTDOWN:
		vm_stop(v->vm, VM_STOP_CRASH, 0, "guest triple fault on vCPU %u", v->id);
		return false;
	case KVM_EXIT_HLT:
		vm_stop(v->vm, VM_STOP_CRASH, 0, "vCPU %u halted with interrupts off", v->id);
		return false;
	default:
		return vm_exit_unexpected(v);
	}
}

int arch_vcpu_pc(struct vcpu *v, uint64_t *pc)
{
	struct kvm_regs r;

	if (ioctl(v->fd, KVM_GET_REGS, &r))
		return -errno;
	*pc = r.rip;
	return 0;
}

static const char *suberror_name(uint32_t e)
{
	switch (e) {
	case KVM_INTERNAL_ERROR_EMULATION:
		return "instruction emulation failed";
	case KVM_INTERNAL_ERROR_SIMUL_EX:
		return "exception while delivering an exception";
	case KVM_INTERNAL_ERROR_DELIVERY_EV:
		return "event delivery failed";
	default:
		return "unknown suberror";
	}
}

/* Where, and the instruction's bytes. */
void arch_report_internal_error(struct vcpu *v)
{
	struct kvm_run *run = v->run;
	struct kvm_translation tr = { 0 };
	struct kvm_regs regs;
	char bytes[3 * 16 + 1] = "";
	uint8_t *code;
	unsigned i;

	if (ioctl(v->fd, KVM_GET_REGS, &regs) < 0)
		memset(&regs, 0, sizeof(regs));
	tr.linear_address = regs.rip;
	if (ioctl(v->fd, KVM_TRANSLATE, &tr) == 0 && tr.valid) {
		code = gmem_ptr(&v->vm->mem, tr.physical_address, 16);
		for (i = 0; code && i < 16; i++)
			snprintf(bytes + 3 * i, 4, "%02x ", code[i]);
	}
	vm_stop(v->vm, VM_STOP_CRASH, 0,
		"KVM internal error (%s) on vCPU %u at rip 0x%llx (gpa 0x%llx), "
		"instruction bytes: %s%s", suberror_name(run->internal.suberror), v->id,
		(unsigned long long)regs.rip, (unsigned long long)tr.physical_address,
		bytes[0] ? bytes : "(unreadable)",
		v->vm->kvm.pvm ? "; this host's KVM is PVM, which cannot emulate this "
		"instruction in guest kernel mode: use hardware KVM (VT-x/AMD-V)" : "");
}

int arch_save_state(struct vm *vm, struct snap_writer *w)
{
	int fds[VM_MAX_VCPUS];
	unsigned i;
	int err;

	for (i = 0; i < vm->nr_vcpus; i++) {
		fds[i] = vm->vcpus[i].fd;
		err = vm_vcpu_finish_io(&vm->vcpus[i]);
		if (err)
			return err;
	}
	err = vmstate_save_vm_x86(vm->fd, fds, vm->nr_vcpus, w);
	for (i = 0; !err && i < vm->nr_vcpus; i++)
		err = vmstate_save_vcpu_x86(&vm->kvm, fds[i], i, w);
	return err;
}

int arch_restore_state(struct vm *vm, const struct vm_restore *r)
{
	const struct snap_section *sec;
	int fds[VM_MAX_VCPUS];
	unsigned i;
	int err;

	for (i = 0; i < vm->nr_vcpus; i++) {
		sec = snap_find(r->snap, SNAP_VCPU, i);
		if (!sec)
			return husk_seterr(EINVAL, "the template has no state for vCPU %u", i);
		err = vmstate_restore_vcpu_x86(&vm->kvm, vm->vcpus[i].fd, i, vm->nr_vcpus, sec);
		if (err)
			return err;
	}
	sec = snap_find(r->snap, SNAP_VM, 0);
	if (!sec)
		return husk_seterr(EINVAL, "the template has no VM state");
	for (i = 0; i < vm->nr_vcpus; i++)
		fds[i] = vm->vcpus[i].fd;
	return vmstate_restore_vm_x86(vm->fd, fds, vm->nr_vcpus, sec);
}
