/*
 * vm: one microVM and its vCPU threads. See vm.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "machine/cmdline.h"
#include "machine/guest_prof.h"
#include "machine/phase.h"
#include "sandbox/seccomp.h"
#include "lib/util.h"
#include "virtio/virtio_blk.h"
#include "virtio/virtio_net.h"
#include "virtio/virtio_rng.h"
#include "virtio/virtio_vsock.h"
#include "machine/vm.h"
#include "template/vm_snapshot.h"

#define INITRD_MAX_FILE (1u << 30)

static const char *const reason_names[] = {
	[VM_RUNNING] = "running",
	[VM_STOP_POWEROFF] = "poweroff",
	[VM_STOP_RESET] = "reset",
	[VM_STOP_PANIC] = "panic",
	[VM_STOP_CRASH] = "crash",
	[VM_STOP_HOST_ERROR] = "host-error",
	[VM_STOP_TIMEOUT] = "timeout",
	[VM_STOP_SIGNAL] = "signal",
	[VM_STOP_SAVED] = "saved",
};

const char *vm_reason_name(enum vm_stop_reason r)
{
	if ((unsigned)r < ARRAY_SIZE(reason_names) && reason_names[r])
		return reason_names[r];
	return "unknown";
}

static int vm_ioctl(struct vm *vm, unsigned long req, void *arg, const char *name)
{
	if (ioctl(vm->fd, req, arg) < 0)
		return husk_seterr(errno, "%s: %s", name, strerror(errno));
	return 0;
}

static int set_memory(struct vm *vm)
{
	struct kvm_userspace_memory_region r = {
		.slot = 0,
		.guest_phys_addr = ARCH_RAM_GPA,
		.memory_size = vm->mem.low_size,
		.userspace_addr = (uint64_t)(uintptr_t)vm->mem.host,
	};
	int err;

	err = vm_ioctl(vm, KVM_SET_USER_MEMORY_REGION, &r, "KVM_SET_USER_MEMORY_REGION (low)");
	if (err || !vm->mem.high_size)
		return err;
	r.slot = 1;
	r.guest_phys_addr = GMEM_HOLE_END;
	r.memory_size = vm->mem.high_size;
	r.userspace_addr = (uint64_t)(uintptr_t)(vm->mem.host + vm->mem.low_size);
	return vm_ioctl(vm, KVM_SET_USER_MEMORY_REGION, &r, "KVM_SET_USER_MEMORY_REGION (high)");
}

static int create_machine(struct vm *vm)
{
	/*
	 * Making the VM takes every lock of our address space, which the
	 * kernel gives up with EINTR when a signal is pending: a SIGSTOP or
	 * a freeze of the host is one. Nothing was made; make it again.
	 */
	do
		vm->fd = ioctl(vm->kvm.fd, KVM_CREATE_VM, 0);
	while (vm->fd < 0 && errno == EINTR);
	if (vm->fd < 0)
		return husk_seterr(errno, "KVM_CREATE_VM: %s", strerror(errno));
	return arch_vm_init(vm);
}

/*
 * A regular file the user named, with a message that names it: fd when the
 * caller opened (and checked) it already, else path opened here. The fd to
 * read, to be closed with close_input.
 */
static int open_input(const char *what, const char *path, int fd, uint64_t max,
		      uint64_t *size)
{
	struct stat st;
	bool given = fd > 0;

	/* O_NONBLOCK: a FIFO is refused below, not waited on for a writer. */
	if (!given)
		fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return husk_seterr(errno, "cannot open %s %s: %s", what, path, strerror(errno));
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		if (!given)
			close(fd);
		return husk_seterr(EINVAL, "%s %s is not a regular file", what, path);
	}
	if ((uint64_t)st.st_size > max) {
		if (!given)
			close(fd);
		return husk_seterr(EFBIG, "%s %s is too large (%lld bytes, limit %llu)", what,
				   path, (long long)st.st_size, (unsigned long long)max);
	}
	*size = st.st_size;
	return fd;
}

/* Only what open_input opened itself. */
static void close_input(int fd, int given)
{
	if (fd != given)
		close(fd);
}

static int load_initrd(struct vm *vm, const struct vm_config *cfg, uint64_t *gpa,
		       uint64_t *len)
{
	const char *path = cfg->initrd_path;
	int fd, err;

	fd = open_input("initrd", path, cfg->initrd_fd, INITRD_MAX_FILE, len);
	if (fd < 0)
		return fd;
	err = arch_initrd_addr(vm, *len, gpa);
	if (err)
		err = husk_seterr(err, "initrd %s: %s", path, husk_lasterr());
	else if ((err = read_exact_at(fd, gmem_ptr(&vm->mem, *gpa, *len), *len, 0)))
		err = husk_seterr(err, "cannot read initrd %s: %s", path, strerror(-err));
	close_input(fd, cfg->initrd_fd);
	return err;
}

/* The kernel and initrd into guest RAM: nothing of the VM's needed yet. */
static int load_images(struct vm *vm, const struct vm_config *cfg, uint64_t *rd_gpa,
		       uint64_t *rd_len)
{
	uint64_t size;
	int fd, err;

	fd = open_input("kernel", cfg->kernel_path, cfg->kernel_fd, ARCH_KERNEL_MAX_FILE, &size);
	if (fd < 0)
		return fd;
	err = arch_load_kernel(vm, fd);
	close_input(fd, cfg->kernel_fd);
	if (err)
		return husk_seterr(err, "kernel %s: %s", cfg->kernel_path, husk_lasterr());
	if (cfg->initrd_path)
		return load_initrd(vm, cfg, rd_gpa, rd_len);
	return 0;
}

/* The command line and boot tables: after the devices, which the command line names. */
static int write_boot_info(struct vm *vm, const struct vm_config *cfg, uint64_t rd_gpa,
			   uint64_t rd_len)
{
	char cmdbuf[CMDLINE_MAX];
	uint8_t seed[BOOT_SEED_LEN];
	struct cmdline cl;
	bool have;
	int err;

	cmdline_init(&cl, cmdbuf, arch_cmdline_max(vm));
	err = cmdline_append(&cl, ARCH_CMDLINE_BASE);
	if (!err && vm->dev_cmdline[0])
		err = cmdline_append(&cl, vm->dev_cmdline + 1);	/* skip the leading space */
	if (!err && cfg->cmdline)
		err = cmdline_append(&cl, cfg->cmdline);
	if (err)
		return err;
	/* The guest's entropy pool starts from this seed, not from nothing. */
	have = getrandom(seed, sizeof(seed), GRND_NONBLOCK) == (ssize_t)sizeof(seed);
	err = arch_boot_tables(vm, cmdbuf, rd_gpa, rd_len, have ? seed : NULL);
	memset(seed, 0, sizeof(seed));
	return err;
}

/*
 * KVM_CREATE_VM mostly sleeps: on 6.1 kernels it starts KVM's NX huge
 * page recovery thread, which joins our cgroups and so waits for an RCU
 * grace period (milliseconds; cgroup2's favordynmods mount option lifts
 * it). A cold boot makes the machine on this thread while the calling one
 * copies the kernel into guest RAM, which needs no VM yet.
 */
struct maker {
	struct vm *vm;
	const struct vm_config *cfg;
	pid_t tid;
	int err;
	char msg[512];
};

static int make_machine(struct vm *vm, const struct vm_config *cfg)
{
	int err = create_machine(vm);

	if (err)
		return err;
	phase_mark(PH_VM_CREATE);
	if (cfg->made)
		cfg->made(cfg->made_arg);
	return 0;
}

static void *maker_thread(void *arg)
{
	struct maker *m = arg;

	m->tid = gettid();
	m->err = make_machine(m->vm, m->cfg);
	if (m->err)
		snprintf(m->msg, sizeof(m->msg), "%s", husk_lasterr());
	return NULL;
}

/* Guest RAM, with the kernel and initrd in it. */
static int fill_ram(struct vm *vm, const struct vm_config *cfg, uint64_t *rd_gpa,
		    uint64_t *rd_len)
{
	int err = gmem_alloc(&vm->mem, cfg->mem_bytes, !cfg->no_hugepages);

	if (!err)
		err = load_images(vm, cfg, rd_gpa, rd_len);
	if (!err)
		phase_mark(PH_IMAGES);
	return err;
}

/*
 * fill_ram, and the machine made meanwhile; the VM process must be
 * single-threaded again on return (its jail checks), so the maker is
 * joined and waited out of the kernel.
 */
static int build_boot(struct vm *vm, const struct vm_config *cfg, uint64_t *rd_gpa,
		      uint64_t *rd_len)
{
	struct maker m = { .vm = vm, .cfg = cfg };
	pthread_t t;
	int err;

	if (husk_thread_create(&t, maker_thread, &m)) {
		/* No thread to spare: one after the other. */
		err = make_machine(vm, cfg);
		return err ? err : fill_ram(vm, cfg, rd_gpa, rd_len);
	}
	err = fill_ram(vm, cfg, rd_gpa, rd_len);
	pthread_join(t, NULL);
	husk_thread_gone(m.tid);
	if (m.err)
		return husk_seterr(m.err, "%s", m.msg);
	return err;
}

/* virtio-mmio devices; before write_boot_info, which announces them on the cmdline. */
static int create_devices(struct vm *vm, const struct vm_config *cfg)
{
	int err = 0;

	if (cfg->rootfs_path)
		err = virtio_blk_create_fd(vm, cfg->rootfs_path, cfg->rootfs_fd, true);
	if (!err && cfg->rng)
		err = virtio_rng_create(vm);
	if (!err && cfg->vsock_uds)
		err = virtio_vsock_create(vm, cfg->guest_cid, cfg->vsock_uds);
	/* virtio_net_create owns the tap fd from here, also on failure. */
	if (!err && cfg->net_tap_fd >= 0)
		err = virtio_net_create(vm, cfg->net_tap_fd, cfg->net_mac);
	else if (cfg->net_tap_fd >= 0)
		close(cfg->net_tap_fd);
	return err;
}

/* Before the devices: an arm64 GIC is completed here, and irqfds need it. */
static int create_vcpus(struct vm *vm)
{
	unsigned i;

	for (i = 0; i < vm->nr_vcpus; i++) {
		struct vcpu *v = &vm->vcpus[i];
		void *run;

		v->vm = vm;
		v->id = i;
		v->fd = ioctl(vm->fd, KVM_CREATE_VCPU, (unsigned long)i);
		if (v->fd < 0)
			return husk_seterr(errno, "KVM_CREATE_VCPU %u: %s", i, strerror(errno));
		run = mmap(NULL, vm->kvm.vcpu_mmap_size, PROT_READ | PROT_WRITE,
			   MAP_SHARED, v->fd, 0);
		if (run == MAP_FAILED)
			return husk_seterr(errno, "mmap of vCPU %u run area: %s", i, strerror(errno));
		v->run = run;
	}
	return arch_vcpus_created(vm);
}

int vm_create(struct vm *vm, const struct vm_config *cfg, uint64_t start_us)
{
	uint64_t rd_gpa = 0, rd_len = 0;
	unsigned i;
	int err;

	memset(vm, 0, sizeof(*vm));
	vm->fd = -1;
	vm->stop_fd = -1;
	vm->console_kick = -1;
	vm->kvm.fd = -1;
	for (i = 0; i < VM_MAX_VCPUS; i++)
		vm->vcpus[i].fd = -1;
	vm->t.start = start_us;
	pthread_mutex_init(&vm->dev_lock, NULL);
	pthread_mutex_init(&vm->stop_lock, NULL);
	console_init(&vm->console, cfg->console_fd);
	err = evloop_init(&vm->loop);
	if (err)
		return err;
	vm->seccomp = cfg->seccomp;
	vm->loop.seccomp = cfg->seccomp;
	if (cfg->boot_timer && cfg->restore)
		return husk_seterr(EINVAL, "the boot timer is for booting, not for restoring");
	vm->boot_timer = cfg->boot_timer;
	vm->virtio_first = cfg->boot_timer ? 1 : 0;

	if (cfg->nr_vcpus < 1 || cfg->nr_vcpus > VM_MAX_VCPUS)
		return husk_seterr(EINVAL, "vCPU count %u is outside 1..%d",
				   cfg->nr_vcpus, VM_MAX_VCPUS);
	vm->nr_vcpus = cfg->nr_vcpus;
	vm->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (vm->stop_fd < 0)
		return husk_seterr(errno, "eventfd: %s", strerror(errno));
	vm->console_kick = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (vm->console_kick < 0)
		return husk_seterr(errno, "eventfd: %s", strerror(errno));
	console_set_kick(&vm->console, vm->console_kick);

	err = kvm_open(&vm->kvm, KVM_DEVICE_PATH);
	if (err)
		return err;
	phase_mark(PH_KVM_OPEN);
	if ((int)vm->nr_vcpus > vm->kvm.max_vcpus)
		return husk_seterr(EINVAL, "this host's KVM supports at most %d vCPUs",
				   vm->kvm.max_vcpus);
	if (cfg->restore) {
		err = make_machine(vm, cfg);
		if (!err)
			err = gmem_map_file(&vm->mem, cfg->restore->mem_fd, cfg->mem_bytes);
	} else {
		err = build_boot(vm, cfg, &rd_gpa, &rd_len);
	}
	if (!err)
		err = set_memory(vm);
	if (err)
		return err;
	phase_mark(PH_MEMORY);
	err = create_vcpus(vm);
	if (err)
		return err;
	arch_devices_init(vm);
	phase_mark(PH_VCPUS);
	err = create_devices(vm, cfg);
	if (err)
		return err;
	phase_mark(PH_DEVICES);
	if (!cfg->restore) {
		err = write_boot_info(vm, cfg, rd_gpa, rd_len);
		if (err)
			return err;
	}
	/* A restore sets the registers from the template instead (vm_restore_state). */
	err = arch_vcpus_init(vm, !cfg->restore);
	if (!err && !cfg->restore)
		phase_mark(PH_LOAD);
	return err;
}

void vm_stop(struct vm *vm, enum vm_stop_reason r, int status, const char *fmt, ...)
{
	uint64_t one = 1;
	unsigned i;
	va_list ap;

	pthread_mutex_lock(&vm->stop_lock);
	if (vm->reason != VM_RUNNING) {
		pthread_mutex_unlock(&vm->stop_lock);
		return;
	}
	vm->reason = r;
	vm->guest_status = status;
	vm->t.exit = now_us();
	va_start(ap, fmt);
	vsnprintf(vm->detail, sizeof(vm->detail), fmt, ap);
	va_end(ap);
	pthread_mutex_unlock(&vm->stop_lock);

	/* immediate_exit makes a vCPU that is just entering KVM_RUN leave at once. */
	for (i = 0; i < vm->nr_vcpus; i++) {
		struct vcpu *v = &vm->vcpus[i];

		if (v->run)
			__atomic_store_n(&v->run->immediate_exit, 1, __ATOMIC_SEQ_CST);
		if (v->started && !pthread_equal(v->thread, pthread_self()))
			pthread_kill(v->thread, VCPU_KICK_SIGNAL);
	}
	if (write(vm->stop_fd, &one, sizeof(one)) < 0)
		husk_debug("stop eventfd write failed: %s", strerror(errno));
}

void vm_sample_vcpu0(struct vm *vm)
{
	struct vcpu *v = &vm->vcpus[0];

	if (vm->prof && v->started)
		pthread_kill(v->thread, VCPU_KICK_SIGNAL);
}

static bool stopping(struct vm *vm)
{
	return __atomic_load_n(&vm->reason, __ATOMIC_ACQUIRE) != VM_RUNNING;
}

/*
 * PSCI's SYSTEM_OFF and SYSTEM_RESET (arm64), served by KVM. A kernel that
 * panics with panic=-1 resets: its console says which it was.
 */
static void handle_system_event(struct vcpu *v)
{
	char line[CONSOLE_LINE_MAX];

	switch (v->run->system_event.type) {
	case KVM_SYSTEM_EVENT_SHUTDOWN:
		vm_stop(v->vm, VM_STOP_POWEROFF, 0, "guest powered off");
		break;
	case KVM_SYSTEM_EVENT_RESET:
		console_flush(&v->vm->console);
		if (console_panicked(&v->vm->console, line, sizeof(line)))
			vm_stop(v->vm, VM_STOP_PANIC, 0, "guest kernel panic: %s", line);
		else
			vm_stop(v->vm, VM_STOP_RESET, 0, "guest reset");
		break;
	default:
		vm_stop(v->vm, VM_STOP_CRASH, 0, "guest crashed (system event %u)",
			v->run->system_event.type);
	}
}

int vm_vcpu_finish_io(struct vcpu *v)
{
	__atomic_store_n(&v->run->immediate_exit, 1, __ATOMIC_SEQ_CST);
	if (ioctl(v->fd, KVM_RUN, 0) < 0 && errno != EINTR)
		return husk_seterr(errno, "KVM_RUN to finish pending I/O: %s", strerror(errno));
	return 0;
}

bool vm_exit_unexpected(struct vcpu *v)
{
	if (v->run->exit_reason == KVM_EXIT_FAIL_ENTRY)
		vm_stop(v->vm, VM_STOP_CRASH, 0, "KVM could not enter vCPU %u "
			"(hardware reason 0x%llx)", v->id,
			(unsigned long long)v->run->fail_entry.hardware_entry_failure_reason);
	else
		vm_stop(v->vm, VM_STOP_CRASH, 0, "unexpected KVM exit %u on vCPU %u",
			v->run->exit_reason, v->id);
	return false;
}

/* Returns false when the vCPU must leave its loop. */
static bool handle_exit(struct vcpu *v)
{
	struct kvm_run *run = v->run;

	switch (run->exit_reason) {
	case KVM_EXIT_MMIO:
		vm_mmio(v, run->mmio.phys_addr, run->mmio.is_write, run->mmio.data,
			run->mmio.len > 8 ? 8 : run->mmio.len);
		return true;
	case KVM_EXIT_INTR:
		return true;
	case KVM_EXIT_INTERNAL_ERROR:
		arch_report_internal_error(v);
		return false;
	case KVM_EXIT_SYSTEM_EVENT:
		handle_system_event(v);
		return false;
	default:
		return arch_handle_exit(v);
	}
}

static void *vcpu_thread(void *arg)
{
	struct vcpu *v = arg;
	struct vm *vm = v->vm;
	sigset_t set;

	/* Only the kick signal may interrupt this thread; the main loop takes the rest. */
	sigemptyset(&set);
	sigaddset(&set, VCPU_KICK_SIGNAL);
	pthread_sigmask(SIG_UNBLOCK, &set, NULL);
	/* Confined before the first KVM_RUN: the guest never meets an unfiltered thread. */
	if (vm->seccomp && seccomp_install(SECCOMP_KIND_VCPU)) {
		vm_stop(vm, VM_STOP_HOST_ERROR, 0, "vCPU %u: %s", v->id, husk_lasterr());
		return NULL;
	}

	while (!stopping(vm)) {
		if (v->id == 0 && !vm->t.first_run) {
			vm->t.first_run = now_us();
			phase_mark(PH_FIRST_RUN);
		}
		if (ioctl(v->fd, KVM_RUN, 0) < 0) {
			if (errno == EINTR && vm->prof && v->id == 0) {
				uint64_t pc;

				if (!arch_vcpu_pc(v, &pc))
					guest_prof_add(vm->prof, now_us() - vm->t.start, pc);
			}
			if (errno == EINTR || errno == EAGAIN)
				continue;
			vm_stop(vm, VM_STOP_HOST_ERROR, 0, "KVM_RUN on vCPU %u: %s", v->id,
				strerror(errno));
			break;
		}
		if (!handle_exit(v))
			break;
	}
	return NULL;
}

static void kick_handler(int sig)
{
	(void)sig;
}

int vm_start(struct vm *vm)
{
	struct sigaction sa;
	unsigned i;
	int err;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = kick_handler;	/* no SA_RESTART: KVM_RUN returns EINTR */
	sigaction(VCPU_KICK_SIGNAL, &sa, NULL);

	/* Devices serve queues from the first notification on. */
	err = evloop_start(&vm->loop);
	if (err) {
		vm_stop(vm, VM_STOP_HOST_ERROR, 0, "%s", husk_lasterr());
		return err;
	}
	for (i = 0; i < vm->nr_vcpus; i++) {
		struct vcpu *v = &vm->vcpus[i];

		err = husk_thread_create(&v->thread, vcpu_thread, v);
		if (err) {
			vm_stop(vm, VM_STOP_HOST_ERROR, 0, "cannot start vCPU thread: %s",
				strerror(err));
			return husk_seterr(err, "cannot start vCPU thread %u: %s", i, strerror(err));
		}
		v->started = true;
	}
	phase_mark(PH_THREADS);
	return 0;
}

void vm_join(struct vm *vm)
{
	unsigned i;

	for (i = 0; i < VM_MAX_VCPUS; i++) {
		struct vcpu *v = &vm->vcpus[i];

		if (v->started)
			pthread_join(v->thread, NULL);
		v->started = false;
	}
}

void vm_destroy(struct vm *vm)
{
	unsigned i;

	vm_join(vm);
	for (i = 0; i < VM_MAX_VCPUS; i++) {
		struct vcpu *v = &vm->vcpus[i];

		if (v->run)
			munmap(v->run, vm->kvm.vcpu_mmap_size);
		if (v->fd >= 0)
			close(v->fd);
	}
	/* No vCPU runs now; stop the loop before devices free what it serves. */
	evloop_stop(&vm->loop);
	for (i = 0; i < vm->nr_virtio; i++)
		virtio_mmio_destroy(vm->virtio[i]);
	vm->nr_virtio = 0;
	evloop_free(&vm->loop);
	console_flush(&vm->console);
	arch_vm_free(vm);
	if (vm->fd >= 0)
		close(vm->fd);
	if (vm->stop_fd >= 0)
		close(vm->stop_fd);
	console_set_kick(&vm->console, -1);
	if (vm->console_kick >= 0)
		close(vm->console_kick);
	gmem_free(&vm->mem);
	if (vm->kvm.fd >= 0)
		kvm_close(&vm->kvm);
}
