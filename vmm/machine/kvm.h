/*
 * kvm: /dev/kvm through raw ioctls: open it, check the API version and the
 * capabilities husk needs (each missing piece is named with what to do),
 * let the arch read what it needs (x86: the supported CPUID) and detect PVM
 * hosts, where guest kernel code is
 * emulated instruction by instruction.
 */
#ifndef HUSK_KVM_H
#define HUSK_KVM_H

#include <linux/kvm.h>
#include <stdbool.h>
#include <stdint.h>

#include "machine/arch.h"

#define KVM_DEVICE_PATH "/dev/kvm"

struct kvm_sys {
	int fd;
	int vcpu_mmap_size;
	int max_vcpus;
	bool pvm;		/* host KVM is PVM: kernel code is emulated */
	bool have_immediate_exit;
	struct arch_kvm arch;	/* arch_kvm_init() */
};

int kvm_open(struct kvm_sys *k, const char *path);
void kvm_close(struct kvm_sys *k);
/* KVM_CHECK_EXTENSION on the system fd; >0 means present. */
int kvm_cap(const struct kvm_sys *k, long cap);
/* 0 when the capability is there, else -ENOTSUP saying which is missing. */
int kvm_require(const struct kvm_sys *k, long cap, const char *name);
/* True when /sys says the loaded KVM is PVM (no VT-x/AMD-V underneath). */
bool kvm_host_is_pvm(void);

#endif
