/*
 * vmstate_arm64: KVM state of a paused arm64 VM to and from template
 * sections. See vmstate_arm64.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include "arm64/fdt_arm64.h"
#include "arm64/hostfp_arm64.h"
#include "arm64/restore_check_arm64.h"
#include "arm64/vmstate_arm64.h"
#include "lib/util.h"
#include "machine/vm.h"
#include "template/snapshot.h"
#include "template/vm_snapshot.h"

#define MAX_REGS	1024	/* KVM lists some 300 on a vCPU without SVE */

/* A growing byte buffer for one tag's records. */
struct rec {
	uint8_t *p;
	size_t len, cap;
	int err;
};

static void rec_put(struct rec *r, const void *v, size_t n)
{
	uint8_t *np;

	if (r->err)
		return;
	if (r->len + n > r->cap) {
		r->cap = (r->len + n) * 2;
		np = realloc(r->p, r->cap);
		if (!np) {
			r->err = -ENOMEM;
			return;
		}
		r->p = np;
	}
	memcpy(r->p + r->len, v, n);
	r->len += n;
}

/* Put the records under tag and free them; -ENOMEM if one did not fit. */
static int rec_flush(struct rec *r, struct snap_writer *w, uint16_t tag)
{
	int err = r->err;

	if (!err)
		snap_put(w, tag, r->p, r->len);
	free(r->p);
	memset(r, 0, sizeof(*r));
	return err ? husk_seterr(ENOMEM, "out of memory") : 0;
}

static uint64_t reg_size(uint64_t id)
{
	return restore_reg_size_arm64(id);
}

/* ---- the GIC ---- */

/* A redistributor's or CPU interface's vCPU, in the attr's Aff fields (Aff0..Aff3). */
static uint64_t gic_mpidr_attr(unsigned cpu)
{
	uint64_t m = fdt_arm64_mpidr(cpu);

	return (m & 0xffffff) << 32;
}

static int gic_get(struct vm *vm, uint32_t group, uint64_t attr, void *val)
{
	struct kvm_device_attr a = { .group = group, .attr = attr,
				     .addr = (uint64_t)(uintptr_t)val };

	return ioctl(vm->arch.gic_fd, KVM_GET_DEVICE_ATTR, &a) < 0 ? -errno : 0;
}

static int gic_set(struct vm *vm, uint32_t group, uint64_t attr, void *val)
{
	struct kvm_device_attr a = { .group = group, .attr = attr,
				     .addr = (uint64_t)(uintptr_t)val };

	return ioctl(vm->arch.gic_fd, KVM_SET_DEVICE_ATTR, &a) < 0 ? -errno : 0;
}

/*
 * Registers the host's GIC does not have (APxR1..3 with few priority
 * bits, IGRPMODR without security) answer ENXIO or EINVAL: not saved.
 */
static bool gic_absent(int err)
{
	return err == -ENXIO || err == -EINVAL;
}

static int save_words(struct vm *vm, uint32_t group, uint64_t base, const uint32_t *off,
		      unsigned n, struct rec *r, const char *what)
{
	uint32_t v;
	unsigned i;
	int err;

	for (i = 0; i < n; i++) {
		err = gic_get(vm, group, base | off[i], &v);
		if (gic_absent(err))
			continue;
		if (err)
			return husk_seterr(-err, "GIC %s register 0x%x: %s", what, off[i],
					   strerror(-err));
		rec_put(r, &off[i], 4);
		rec_put(r, &v, 4);
	}
	return 0;
}

static int restore_words(struct vm *vm, uint32_t group, uint64_t base, const struct tlv *t,
			 const char *what)
{
	uint32_t rec[2];
	uint32_t i;
	int err;

	if (t->len % 8)
		return husk_seterr(EINVAL, "the template's GIC %s state is malformed", what);
	for (i = 0; i < t->len; i += 8) {
		memcpy(rec, t->val + i, 8);
		err = gic_set(vm, group, base | rec[0], &rec[1]);
		if (err)
			return husk_seterr(-err, "GIC %s register 0x%x: %s", what, rec[0],
					   strerror(-err));
	}
	return 0;
}

/* A section's element: 0, or -errno saying which is missing or malformed. */
static int get_tag(const struct snap_section *sec, uint16_t tag, struct tlv *t)
{
	int n = snap_get(sec, tag, t);

	if (n == 1)
		return 0;
	return husk_seterr(n < 0 ? -n : ENOENT, "the template's state section %u %s element %u",
			   sec->type, n < 0 ? "has a malformed" : "lacks", tag);
}

/* ---- vCPUs ---- */

static int reg_list(struct vcpu *v, struct kvm_reg_list **out)
{
	struct kvm_reg_list probe = { .n = 0 }, *l;

	/* The first call fails with E2BIG and says how many there are. */
	if (ioctl(v->fd, KVM_GET_REG_LIST, &probe) == 0 || errno != E2BIG || probe.n > MAX_REGS)
		return husk_seterr(EIO, "KVM_GET_REG_LIST on vCPU %u: %s", v->id,
				   probe.n > MAX_REGS ? "too many registers" : strerror(errno));
	l = calloc(1, sizeof(*l) + probe.n * sizeof(l->reg[0]));
	if (!l)
		return husk_seterr(ENOMEM, "out of memory");
	l->n = probe.n;
	if (ioctl(v->fd, KVM_GET_REG_LIST, l) < 0) {
		int err = errno;

		free(l);
		return husk_seterr(err, "KVM_GET_REG_LIST on vCPU %u: %s", v->id, strerror(err));
	}
	*out = l;
	return 0;
}

static int save_vcpu(struct vm *vm, struct vcpu *v, struct snap_writer *w)
{
	uint8_t buf[ARM64_MAX_REG_BYTES];
	struct kvm_reg_list *l = NULL;
	struct kvm_mp_state mp;
	struct rec r = { 0 };
	uint64_t i, attr = gic_mpidr_attr(v->id), val;
	uint32_t off[RESTORE_GIC_REDIST_MAX];
	int err;

	err = reg_list(v, &l);
	if (err)
		return err;
	for (i = 0; i < l->n && !err; i++) {
		struct kvm_one_reg one = { .id = l->reg[i], .addr = (uint64_t)(uintptr_t)buf };

		/* Only what a restore takes (restore_check_arm64.h). */
		if (!restore_reg_allowed_arm64(one.id))
			continue;
		if (reg_size(one.id) > sizeof(buf)) {
			err = husk_seterr(EOPNOTSUPP, "vCPU %u register 0x%llx is %llu bytes",
					  v->id, (unsigned long long)one.id,
					  (unsigned long long)reg_size(one.id));
		} else if (ioctl(v->fd, KVM_GET_ONE_REG, &one) < 0) {
			err = husk_seterr(errno, "KVM_GET_ONE_REG 0x%llx on vCPU %u: %s",
					  (unsigned long long)one.id, v->id, strerror(errno));
		} else {
			rec_put(&r, &one.id, sizeof(one.id));
			rec_put(&r, buf, reg_size(one.id));
		}
	}
	free(l);
	if (!err && ioctl(v->fd, KVM_GET_MP_STATE, &mp) < 0)
		err = husk_seterr(errno, "KVM_GET_MP_STATE on vCPU %u: %s", v->id, strerror(errno));
	if (err) {
		free(r.p);
		return err;
	}
	snap_begin(w, SNAP_VCPU, v->id);
	err = rec_flush(&r, w, T_A64_REGS);
	snap_put(w, T_A64_MP_STATE, &mp, sizeof(mp));
	if (!err)
		err = save_words(vm, KVM_DEV_ARM_VGIC_GRP_REDIST_REGS, attr, off,
				 restore_gic_redist_offsets_arm64(off), &r, "redistributor");
	if (!err)
		err = rec_flush(&r, w, T_A64_GIC_REDIST);
	for (i = 0; !err && i < restore_gic_nr_icc_regs_arm64; i++) {
		uint32_t icc = restore_gic_icc_regs_arm64[i];

		err = gic_get(vm, KVM_DEV_ARM_VGIC_GRP_CPU_SYSREGS, attr | icc, &val);
		if (gic_absent(err)) {
			err = 0;
			continue;
		}
		if (err) {
			err = husk_seterr(-err, "GIC CPU register 0x%x of vCPU %u: %s",
					  icc, v->id, strerror(-err));
			break;
		}
		rec_put(&r, &icc, 4);
		rec_put(&r, &val, 8);
	}
	if (!err)
		err = rec_flush(&r, w, T_A64_GIC_CPU);
	free(r.p);
	snap_end(w);
	return err;
}

/*
 * Every record of vCPU v's section against what may be restored, before
 * any of it reaches KVM (restore_check_arm64.h).
 */
static int check_vcpu(struct vcpu *v, const struct snap_section *sec)
{
	struct kvm_reg_list *l = NULL;
	uint32_t off[RESTORE_GIC_REDIST_MAX];
	struct tlv t;
	int err;

	err = get_tag(sec, T_A64_GIC_REDIST, &t);
	if (!err)
		err = restore_check_gic_words_arm64(t.val, t.len, off,
						    restore_gic_redist_offsets_arm64(off),
						    "redistributor");
	if (!err)
		err = get_tag(sec, T_A64_GIC_CPU, &t);
	if (!err)
		err = restore_check_gic_cpu_arm64(t.val, t.len, v->id);
	if (!err)
		err = get_tag(sec, T_A64_REGS, &t);
	if (!err)
		err = reg_list(v, &l);
	if (!err)
		err = restore_check_regs_arm64(l->reg, l->n, t.val, t.len, v->id);
	free(l);
	if (err)
		return husk_seterr(err, "vCPU %u: %s", v->id, husk_lasterr());
	return 0;
}

/* A section check_vcpu accepted. */
static int restore_vcpu(struct vm *vm, struct vcpu *v, const struct snap_section *sec)
{
	struct kvm_mp_state mp;
	struct tlv t;
	uint64_t attr = gic_mpidr_attr(v->id), id, val;
	uint32_t i, instr;
	int err;

	err = get_tag(sec, T_A64_GIC_REDIST, &t);
	if (!err)
		err = restore_words(vm, KVM_DEV_ARM_VGIC_GRP_REDIST_REGS, attr, &t,
				    "redistributor");
	if (!err)
		err = get_tag(sec, T_A64_GIC_CPU, &t);
	if (err)
		return husk_seterr(err, "vCPU %u: %s", v->id, husk_lasterr());
	for (i = 0; i + 12 <= t.len; i += 12) {
		memcpy(&instr, t.val + i, 4);
		memcpy(&val, t.val + i + 4, 8);
		err = gic_set(vm, KVM_DEV_ARM_VGIC_GRP_CPU_SYSREGS,
			      attr | (instr & KVM_DEV_ARM_VGIC_SYSREG_INSTR_MASK), &val);
		if (err)
			return husk_seterr(-err, "GIC CPU register 0x%x of vCPU %u: %s", instr,
					   v->id, strerror(-err));
	}

	err = get_tag(sec, T_A64_REGS, &t);
	if (err)
		return husk_seterr(err, "vCPU %u: %s", v->id, husk_lasterr());
	for (i = 0; i + 8 <= t.len; i += 8 + reg_size(id)) {
		struct kvm_one_reg one;

		memcpy(&id, t.val + i, 8);
		one.id = id;
		one.addr = (uint64_t)(uintptr_t)(t.val + i + 8);
		if (ioctl(v->fd, KVM_SET_ONE_REG, &one) < 0)
			return husk_seterr(errno, "KVM_SET_ONE_REG 0x%llx on vCPU %u: %s",
					   (unsigned long long)id, v->id, strerror(errno));
	}
	err = snap_get_exact(sec, T_A64_MP_STATE, &mp, sizeof(mp));
	if (err)
		return husk_seterr(err, "vCPU %u: %s", v->id, husk_lasterr());
	if (ioctl(v->fd, KVM_SET_MP_STATE, &mp) < 0)
		return husk_seterr(errno, "KVM_SET_MP_STATE on vCPU %u: %s", v->id,
				   strerror(errno));
	return 0;
}

static int need_gicv3(struct vm *vm)
{
	if (vm->arch.gic_version != 3)
		return husk_seterr(EOPNOTSUPP, "templates need a GICv3 host; this one has a "
				   "GICv%u", vm->arch.gic_version);
	return 0;
}

int vmstate_save_arm64(struct vm *vm, struct snap_writer *w)
{
	uint32_t off[RESTORE_GIC_DIST_MAX];
	struct rec r = { 0 };
	unsigned i;
	int err = need_gicv3(vm);

	for (i = 0; !err && i < vm->nr_vcpus; i++)
		err = vm_vcpu_finish_io(&vm->vcpus[i]);
	if (err)
		return err;
	err = save_words(vm, KVM_DEV_ARM_VGIC_GRP_DIST_REGS, 0, off,
			 restore_gic_dist_offsets_arm64(off, ARRAY_SIZE(off)), &r, "distributor");
	if (err) {
		free(r.p);
		return err;
	}
	snap_begin(w, SNAP_VM, 0);
	err = rec_flush(&r, w, T_A64_GIC_DIST);
	snap_end(w);
	for (i = 0; !err && i < vm->nr_vcpus; i++)
		err = save_vcpu(vm, &vm->vcpus[i], w);
	return err;
}

/* The whole template against what may be restored; nothing set yet. */
static int check_all(struct vm *vm, const struct vm_restore *r)
{
	uint32_t off[RESTORE_GIC_DIST_MAX];
	const struct snap_section *sec;
	struct tlv t;
	unsigned i;
	int err;

	sec = snap_find(r->snap, SNAP_VM, 0);
	if (!sec)
		return husk_seterr(EINVAL, "the template has no VM state");
	err = get_tag(sec, T_A64_GIC_DIST, &t);
	if (!err)
		err = restore_check_gic_words_arm64(t.val, t.len, off,
						    restore_gic_dist_offsets_arm64(off,
										   ARRAY_SIZE(off)),
						    "distributor");
	for (i = 0; !err && i < vm->nr_vcpus; i++) {
		sec = snap_find(r->snap, SNAP_VCPU, i);
		if (!sec)
			return husk_seterr(EINVAL, "the template has no state for vCPU %u", i);
		err = check_vcpu(&vm->vcpus[i], sec);
	}
	return err;
}

int vmstate_restore_arm64(struct vm *vm, const struct vm_restore *r)
{
	const struct snap_section *sec;
	struct tlv t;
	unsigned i;
	int err = need_gicv3(vm);

	if (!err)
		err = check_all(vm, r);
	if (err)
		return err;
	sec = snap_find(r->snap, SNAP_VM, 0);
	err = get_tag(sec, T_A64_GIC_DIST, &t);
	if (!err)
		err = restore_words(vm, KVM_DEV_ARM_VGIC_GRP_DIST_REGS, 0, &t, "distributor");
	for (i = 0; !err && i < vm->nr_vcpus; i++)
		err = restore_vcpu(vm, &vm->vcpus[i], snap_find(r->snap, SNAP_VCPU, i));
	return err;
}

/* The ID registers Linux lets EL0 read (it emulates the MRS): the CPU's kind. */
#define ID_REG(name) ({ uint64_t v_; __asm__ volatile("mrs %0, " name : "=r"(v_)); v_; })

int hostfp_arm64(const struct kvm_sys *k, uint8_t fp[32])
{
	struct hostfp_arm64_in in;
	unsigned i;

	memset(&in, 0, sizeof(in));
	in.id[0] = ID_REG("midr_el1");
	in.id[1] = ID_REG("id_aa64pfr0_el1");
	in.id[2] = ID_REG("id_aa64isar0_el1");
	in.id[3] = ID_REG("id_aa64isar1_el1");
	in.id[4] = ID_REG("id_aa64mmfr0_el1");
	in.id[5] = ID_REG("id_aa64mmfr1_el1");
	for (i = 0; i < HOSTFP_ARM64_NR_CAPS; i++)
		in.cap[i] = kvm_cap(k, hostfp_arm64_caps[i]);
	in.pvm = k->pvm;
	in.extra = getenv("HUSK_FINGERPRINT_EXTRA");
	hostfp_arm64_digest(&in, fp);
	return 0;
}
