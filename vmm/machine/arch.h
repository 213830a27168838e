/*
 * arch: what the machine (vm.c, devices.c, virtio_mmio.c, the template code)
 * asks of the architecture, and the one place that knows which it is. Each
 * arch folder implements these functions and gives, in its arch header, the
 * types the machine keeps for it (struct arch_kvm, struct arch_vm), its
 * guest-physical layout and its fixed kernel parameters:
 *
 *   ARCH_CMDLINE_BASE       parameters every guest gets first
 *   ARCH_VIRTIO_ON_CMDLINE  1: virtio-mmio devices are announced on the
 *                           command line; 0: in the guest's description
 *   ARCH_VIRTIO_GPA, ARCH_VIRTIO_STRIDE  where slot n's registers are
 *   ARCH_KERNEL_MAX_FILE    the largest kernel file read
 *   ARCH_KERNEL_KIND, ARCH_KERNEL_NAME  what husk boots (usage texts) and
 *                           the default kernel's file name
 *   ARCH_RAM_GPA            where guest RAM starts
 *   ARCH_RAM_LOW_MAX        how much RAM fits there before a hole (the
 *                           rest goes above 4 GiB, guest_mem.h)
 *
 * All int functions return 0 or -errno with husk_lasterr() set.
 */
#ifndef HUSK_ARCH_H
#define HUSK_ARCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if defined(__x86_64__)
#include "x86/arch_x86.h"
#elif defined(__aarch64__)
#include "arm64/arch_arm64.h"
#else
#error "husk's VMM is built for x86-64 and arm64 hosts"
#endif

struct kvm_sys;
struct snap_writer;
struct vcpu;
struct vm;
struct vm_restore;

/* /dev/kvm is open: what the arch keeps of the host's KVM (x86: its CPUID). */
int arch_kvm_init(struct kvm_sys *k);
void arch_kvm_free(struct kvm_sys *k);
/* A digest of what a template's vCPU state depends on in this host's KVM. */
int arch_host_fp(const struct kvm_sys *k, uint8_t fp[32]);

/* After KVM_CREATE_VM: the machine's own parts (x86: TSS, irqchip, PIT). */
int arch_vm_init(struct vm *vm);
/* What arch_vm_init made, however far it got (vm_destroy; also on a zeroed vm). */
void arch_vm_free(struct vm *vm);
/* The kernel from the open file fd into guest memory (untrusted: checked). */
int arch_load_kernel(struct vm *vm, int fd);
/* The longest command line the loaded kernel takes, NUL included. */
size_t arch_cmdline_max(const struct vm *vm);
/* Where an initrd of len bytes goes, given the loaded kernel. */
int arch_initrd_addr(struct vm *vm, uint64_t len, uint64_t *gpa);
/*
 * The guest's description of its machine: command line, initrd, CPUs,
 * devices, and seed (BOOT_SEED_LEN bytes of host entropy for the kernel's
 * pool; NULL: none).
 */
#define BOOT_SEED_LEN	32
int arch_boot_tables(struct vm *vm, const char *cmdline, uint64_t rd_gpa, uint64_t rd_len,
		     const uint8_t *seed);
/*
 * Every vCPU exists, no device yet: what must be complete before devices
 * wire their interrupts (arm64: KVM_ARM_VCPU_INIT and the GIC's init).
 */
int arch_vcpus_created(struct vm *vm);
/* The guest is loaded: the guest clock, and with boot each vCPU's entry state. */
int arch_vcpus_init(struct vm *vm, bool boot);
/* Devices the machine has on every VM (x86: COM1, the i8042 reset line). */
void arch_devices_init(struct vm *vm);
/*
 * An MMIO exit at gpa that belongs to one of the arch's own devices (arm64:
 * the UART): handled, true; false leaves it to the machine (devices.c).
 */
bool arch_mmio(struct vcpu *v, uint64_t gpa, bool write, uint8_t *data, unsigned len);
/* Slot n of the virtio-mmio devices: its KVM interrupt line (irqfd GSI). */
unsigned arch_virtio_gsi(unsigned slot);

/* An exit vm.c does not handle itself; false when the vCPU must leave its loop. */
bool arch_handle_exit(struct vcpu *v);
/* The guest's program counter, for the profiler. */
int arch_vcpu_pc(struct vcpu *v, uint64_t *pc);
/* KVM could not run the vCPU's instruction: stop the VM saying where and what. */
void arch_report_internal_error(struct vcpu *v);

/* A template's VM and vCPU state (SNAP_VM, SNAP_VCPU sections), and back. */
int arch_save_state(struct vm *vm, struct snap_writer *w);
int arch_restore_state(struct vm *vm, const struct vm_restore *r);

#endif
