/*
 * kvm: /dev/kvm through raw ioctls. See kvm.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "machine/kvm.h"
#include "lib/util.h"

static const struct {
	long cap;
	const char *name;
} required_caps[] = {
	{ KVM_CAP_IRQCHIP, "KVM_CAP_IRQCHIP (in-kernel interrupt controllers)" },
	{ KVM_CAP_USER_MEMORY, "KVM_CAP_USER_MEMORY" },
	{ KVM_CAP_IRQFD, "KVM_CAP_IRQFD" },
	{ KVM_CAP_IOEVENTFD, "KVM_CAP_IOEVENTFD" },
	{ KVM_CAP_MP_STATE, "KVM_CAP_MP_STATE" },
};

int kvm_cap(const struct kvm_sys *k, long cap)
{
	int r = ioctl(k->fd, KVM_CHECK_EXTENSION, cap);

	return r < 0 ? 0 : r;
}

int kvm_require(const struct kvm_sys *k, long cap, const char *name)
{
	if (kvm_cap(k, cap))
		return 0;
	return husk_seterr(ENOTSUP, "the host's KVM lacks %s; husk needs a Linux host kernel "
			   ">= 5.10 with KVM", name);
}

bool kvm_host_is_pvm(void)
{
	return access("/sys/module/kvm_pvm", F_OK) == 0;
}

static int open_error(const char *path, int err)
{
	switch (err) {
	case ENOENT:
		return husk_seterr(err, "%s does not exist: this host has no KVM. Enable "
				   "virtualization (VT-x/AMD-V) and load kvm-intel or kvm-amd", path);
	case EACCES:
	case EPERM:
		return husk_seterr(err, "no permission to open %s: run as root or add "
				   "your user to the group that owns it (usually 'kvm')", path);
	default:
		return husk_seterr(err, "cannot open %s: %s", path, strerror(err));
	}
}

int kvm_open(struct kvm_sys *k, const char *path)
{
	unsigned i;
	int v, err;

	memset(k, 0, sizeof(*k));
	k->fd = open(path, O_RDWR | O_CLOEXEC);
	if (k->fd < 0)
		return open_error(path, errno);
	v = ioctl(k->fd, KVM_GET_API_VERSION, 0);
	if (v != KVM_API_VERSION) {
		kvm_close(k);
		return husk_seterr(ENOTSUP, "%s speaks KVM API version %d, husk needs %d",
				   path, v, KVM_API_VERSION);
	}
	for (i = 0; i < ARRAY_SIZE(required_caps); i++) {
		err = kvm_require(k, required_caps[i].cap, required_caps[i].name);
		if (err) {
			kvm_close(k);
			return err;
		}
	}
	k->vcpu_mmap_size = ioctl(k->fd, KVM_GET_VCPU_MMAP_SIZE, 0);
	if (k->vcpu_mmap_size < (int)sizeof(struct kvm_run)) {
		kvm_close(k);
		return husk_seterr(EINVAL, "KVM_GET_VCPU_MMAP_SIZE returned %d",
				   k->vcpu_mmap_size);
	}
	k->max_vcpus = kvm_cap(k, KVM_CAP_MAX_VCPUS);
	if (k->max_vcpus <= 0)
		k->max_vcpus = 4;
	k->have_immediate_exit = kvm_cap(k, KVM_CAP_IMMEDIATE_EXIT) > 0;
	k->pvm = kvm_host_is_pvm();
	err = arch_kvm_init(k);
	if (err) {
		kvm_close(k);
		return err;
	}
	return 0;
}

void kvm_close(struct kvm_sys *k)
{
	if (k->fd >= 0)
		close(k->fd);
	arch_kvm_free(k);
	k->fd = -1;
}
