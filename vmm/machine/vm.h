/*
 * vm: one microVM: KVM VM fd, guest memory, the machine the arch makes
 * (machine/arch.h), the vCPU threads and their exit handling, and the
 * record of how and when it stopped. The first stop reason wins; every later one is ignored, so a
 * guest cannot turn a timeout into a clean exit by racing it.
 */
#ifndef HUSK_VM_H
#define HUSK_VM_H

#include <linux/kvm.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "machine/console.h"
#include "machine/husk_ctl.h"
#include "machine/guest_mem.h"
#include "machine/kvm.h"
#include "machine/arch.h"
#include "machine/evloop.h"
#include "machine/uart.h"
#include "virtio/virtio_mmio.h"

#define VM_MAX_VCPUS 32
/* vm_stop() interrupts KVM_RUN with it (the vCPU seccomp list allows only it). */
#define VCPU_KICK_SIGNAL SIGUSR1

enum vm_stop_reason {
	VM_RUNNING = 0,
	VM_STOP_POWEROFF,	/* guest wrote husk's power-off register */
	VM_STOP_RESET,		/* guest reset through the i8042 (reboot=k) */
	VM_STOP_PANIC,		/* guest kernel panicked */
	VM_STOP_CRASH,		/* triple fault, KVM internal error, bad entry */
	VM_STOP_HOST_ERROR,	/* husk or KVM failed */
	VM_STOP_TIMEOUT,
	VM_STOP_SIGNAL,		/* husk was asked to stop (SIGINT/SIGTERM) */
	VM_STOP_SAVED,		/* paused to be saved as a template */
	VM_STOP__MAX,
};


struct vm_restore;

struct vm_config {
	const char *kernel_path;
	const char *rootfs_path;	/* NULL: no root disk; else read-only virtio-blk */
	bool rng;			/* virtio-rng */
	const char *vsock_uds;		/* NULL: no vsock; else the host-side socket path */
	uint32_t guest_cid;
	const char *initrd_path;	/* NULL: none */
	/*
	 * Descriptors of those three files, already open (and checked) by the
	 * caller: read instead of opening the path again, which then only
	 * names the file in messages. -1 (or 0, as for net_tap_fd) means open
	 * the path. The caller keeps them; the disk takes a copy of its own.
	 */
	int kernel_fd, initrd_fd, rootfs_fd;
	const char *cmdline;		/* appended to husk's own parameters */
	uint64_t mem_bytes;
	unsigned nr_vcpus;
	int console_fd;			/* -1: discard */
	/*
	 * Tap for a virtio-net NIC, owned by the VM from vm_create on. -1 (or
	 * 0, so a zeroed config has no NIC: stdin is never a tap) means none.
	 */
	int net_tap_fd;
	uint8_t net_mac[6];		/* guest MAC when net_tap_fd >= 0 */
	/*
	 * Build the machine to restore this template instead of booting
	 * (vm_snapshot.h): RAM is mapped from restore->mem_fd, kernel_path,
	 * initrd_path and cmdline are ignored; mem_bytes and nr_vcpus must be
	 * the template's. Nothing of the template's state is applied here: the
	 * caller calls vm_restore_state() once it has confined itself, since
	 * that state is input husk did not produce in this process.
	 */
	const struct vm_restore *restore;
	/*
	 * Confine the vCPU and device event loop threads with their seccomp
	 * lists (seccomp.h) before the guest runs; the caller confines its own
	 * thread after vm_start(). Off by default: library users and tests.
	 */
	bool seccomp;
	/*
	 * Firecracker's boot timer: the first virtio-mmio slot answers a guest's
	 * byte write of BOOT_TIMER_MAGIC at its offset 0 as "boot done", and
	 * the virtio devices move up one slot (as in Firecracker).
	 */
	bool boot_timer;
	/* Guest RAM in small pages only (gmem_alloc); a template's never has huge ones. */
	bool no_hugepages;
	/*
	 * Called once KVM_CREATE_VM returned, before guest RAM is allocated. A
	 * kernel thread KVM starts for the VM (x86's NX huge page recovery
	 * worker, before Linux 6.13) joins the cgroup this process is in at
	 * that moment: husk run moves the VM process into its own group only
	 * after this, so that group holds no kernel thread and can be frozen.
	 */
	void (*made)(void *arg);
	void *made_arg;
};

#define BOOT_TIMER_MAGIC 123

struct vcpu {
	struct vm *vm;
	unsigned id;
	int fd;
	struct kvm_run *run;
	pthread_t thread;
	bool started;
};

struct vm_timings {
	uint64_t start;		/* process start (monotonic us) */
	uint64_t first_run;	/* boot vCPU's first KVM_RUN */
	uint64_t event[HUSK_EV_MAX];	/* first time each event was seen */
	uint64_t exit;		/* VM stopped */
	uint64_t boot_timer;	/* the guest wrote the boot timer's magic */
};

struct vm {
	struct kvm_sys kvm;
	int fd;
	struct guest_mem mem;
	struct arch_vm arch;		/* what the arch keeps: the loaded kernel */
	unsigned nr_vcpus;
	struct vcpu vcpus[VM_MAX_VCPUS];
	uint32_t tsc_khz;		/* the guest clock's rate (arch_vcpus_init) */
	bool seccomp;			/* vm_config.seccomp */

	pthread_mutex_t dev_lock;	/* legacy devices: UART, control */
	struct uart uart;
	struct console console;

	struct evloop loop;		/* device backends */
	struct virtio_dev *virtio[VIRTIO_MMIO_MAX_DEVICES];
	unsigned nr_virtio;
	unsigned virtio_first;		/* slot of virtio[0]: 1 behind a boot timer */
	bool boot_timer;
	char dev_cmdline[512];		/* virtio_mmio.device=... parameters */

	pthread_mutex_t stop_lock;
	enum vm_stop_reason reason;
	int guest_status;		/* value written to the power-off register */
	char detail[512];		/* human-readable stop explanation */
	int stop_fd;			/* eventfd: readable once the VM stopped */
	int console_kick;		/* eventfd: a partial console line waits (console.h) */

	struct vm_timings t;
	struct guest_prof *prof;	/* set before vm_start: sample vCPU 0's rip */
};

/* Build the VM, load kernel/initrd, prepare vCPUs; nothing runs yet. */
int vm_create(struct vm *vm, const struct vm_config *cfg, uint64_t start_us);
/* Start the vCPU threads. */
int vm_start(struct vm *vm);
/*
 * Record the stop reason (first caller wins), then kick every vCPU out of
 * KVM_RUN. Safe from any thread.
 */
void vm_stop(struct vm *vm, enum vm_stop_reason r, int status, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* With vm->prof: kick vCPU 0 out of KVM_RUN so it takes one sample. */
void vm_sample_vcpu0(struct vm *vm);
/* Wait for every vCPU thread to leave (after vm_stop); the fds stay. */
void vm_join(struct vm *vm);
/* Join the vCPU threads (after vm_stop) and free everything. */
void vm_destroy(struct vm *vm);
const char *vm_reason_name(enum vm_stop_reason r);

/*
 * Before a stopped vCPU's state is saved: KVM_RUN once with immediate_exit
 * set, so an MMIO or port access husk answered lands in the guest's
 * registers. -errno.
 */
int vm_vcpu_finish_io(struct vcpu *v);

/*
 * An exit neither the machine nor its arch expects (KVM could not enter the
 * vCPU, or one husk never asks for): the VM stops as crashed. False, for
 * the vCPU loop.
 */
bool vm_exit_unexpected(struct vcpu *v);

/*
 * Devices (devices.c): an MMIO exit from a vCPU thread: husk's control
 * registers, the boot timer and the virtio-mmio slots.
 */
void vm_mmio(struct vcpu *v, uint64_t gpa, bool write, uint8_t *data, unsigned len);
/* A device register's value in an exit's data bytes (little-endian hosts). */
static inline uint32_t dev_get_val(const uint8_t *data, unsigned size)
{
	uint32_t v = 0;

	memcpy(&v, data, size < 4 ? size : 4);
	return v;
}

static inline void dev_put_val(uint8_t *data, unsigned size, uint64_t v)
{
	memcpy(data, &v, size < 8 ? size : 8);
}

/* husk's control registers at offset off, whichever way the guest reached them. */
void vm_ctl_access(struct vcpu *v, unsigned off, bool write, uint8_t *data, unsigned size);
/* Host input for the guest's console (the UART's receive FIFO); thread-safe. */
size_t vm_console_room(struct vm *vm);
size_t vm_console_input(struct vm *vm, const uint8_t *buf, size_t len);

#endif
