/*
 * fuzz_snapshot: libFuzzer target for a template's state file as a restore
 * reads it: the container (vmm/template/snapshot.c: header, sections,
 * CRCs, SHA-256, seal), the metadata (template.c: template_meta_read),
 * every device section (virtio_mmio.c: virtio_mmio_restore, then a
 * device's own restore and its first queue service on guest RAM), the
 * UART's (uart.c: uart_restore), and the checks of what KVM would be given
 * (restore_check_x86.c, restore_check_arm64.c).
 *
 * Each input is parsed twice: as it is, and resealed -- every section's
 * CRC, the header's SHA-256, the seal under a fixed test key and the
 * header's CRC recomputed over the mutated bytes -- so that the contents
 * of sections reach the code behind the checksums. Every section found is
 * walked with snap_get/snap_get_exact/snap_get_u64, and every pointer
 * handed out must lie inside the input. Guest RAM (64 KiB) is the input
 * repeated: the queues a device section names point into bytes the
 * fuzzer chose. Device sections are tried against a net, block, rng and
 * vsock-shaped device; the vsock one pops and returns an event buffer on
 * restore as virtio_vsock.c's does, and every device serves up to 16
 * chains per queue when it is activated.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "arm64/restore_check_arm64.h"
#include "arm64/vmstate_arm64.h"
#include "lib/util.h"
#include "machine/uart.h"
#include "machine/vm.h"
#include "template/template.h"
#include "template/vm_snapshot.h"
#include "virtio/virtio_mmio.h"
#include "x86/cpuid_x86.h"
#include "x86/restore_check_x86.h"
#include "x86/vmstate_x86.h"

#define RAM_SIZE (64u * 1024)
#define SERVE_MAX 16

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/*
 * What virtio_mmio.c needs of a machine the harness does not have: an
 * interrupt number, and the event loop, which only a VM with a KVM fd
 * (never here) wires its devices into.
 */
unsigned arch_virtio_gsi(unsigned slot)
{
	return 5 + slot;
}

int evloop_add(struct evloop *el, int fd, uint32_t events, evloop_cb cb, void *arg)
{
	abort();
}

int evloop_del(struct evloop *el, int fd)
{
	abort();
}

static const uint8_t key[SNAP_KEY_LEN] = "husk fuzz_snapshot's test key!!";

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = v;
	p[1] = v >> 8;
	p[2] = v >> 16;
	p[3] = v >> 24;
}

static uint32_t get32(const uint8_t *p)
{
	return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Every section's CRC, as far as the section headers hold, then the header. */
static void reseal(uint8_t *buf, size_t len)
{
	size_t off = SNAP_HEADER_LEN;

	while (len - off >= 16) {
		uint32_t n = get32(buf + off + 8);

		if (n > len - off - 16)
			break;
		put32(buf + off + 12, (uint32_t)crc32(crc32(0, Z_NULL, 0), buf + off + 16, n));
		off += 16 + (((size_t)n + 7) & ~(size_t)7);
		if (off > len)
			break;
	}
	digest_sha256(buf + SNAP_HEADER_LEN, len - SNAP_HEADER_LEN, buf + 24);
	snap_seal(buf, len, key);
}

static void walk(const uint8_t *buf, size_t len, const struct snap *s)
{
	uint8_t out[64];
	uint64_t v;
	struct tlv t;
	unsigned i;
	uint16_t tag;

	for (i = 0; i < s->nr; i++) {
		const struct snap_section *sec = &s->sec[i];

		if (sec->len && (sec->data < buf || sec->data + sec->len > buf + len))
			abort();
		if (snap_find(s, sec->type, sec->index) != sec)
			abort();	/* duplicates must have been refused */
		for (tag = 0; tag < 8; tag++) {
			if (snap_get(sec, tag, &t) == 1 &&
			    (t.val < sec->data || t.val + t.len > sec->data + sec->len))
				abort();
			(void)snap_get_exact(sec, tag, out, tag * 8 % sizeof(out));
			(void)snap_get_u64(sec, tag, &v);
		}
	}
}

/* ---- devices ---- */

/* A device serving what the guest queued: read a little, write a little, return. */
static void serve(struct virtio_dev *d, unsigned q)
{
	struct virtqueue *vq = &d->vq[q];
	struct vq_chain c;
	uint8_t b[32];
	unsigned i;

	for (i = 0; i < SERVE_MAX && vq_pop(vq, &c) > 0; i++) {
		uint64_t n = vq_copy_from(c.out, c.n_out, 0, b, sizeof(b));

		n = vq_copy_to(c.in, c.n_in, 0, b, n < c.in_len ? n : c.in_len);
		if (vq_push(vq, c.head, (uint32_t)n))
			break;
	}
	virtio_notify_used(d, q);
}

/* virtio_vsock.c's restore: a transport reset in the guest's first event buffer. */
static int vsock_restore(struct virtio_dev *d, const struct snap_section *sec)
{
	static const uint32_t reset = 0;
	struct virtqueue *vq = &d->vq[2];
	struct vq_chain c;
	int n;

	(void)sec;
	if (!vq->ready)
		return 0;
	n = vq_pop(vq, &c);
	if (n <= 0 || c.in_len < sizeof(reset))
		return husk_seterr(ENOSPC, "no event buffer");
	vq_copy_to(c.in, c.n_in, 0, &reset, sizeof(reset));
	if (vq_push(vq, c.head, sizeof(reset)))
		return husk_seterr(EINVAL, "cannot return the event buffer");
	virtio_notify_used(d, 2);
	return 0;
}

static const struct virtio_dev_ops kinds[] = {
	{ .name = "net", .device_id = 1, .features = ~0ull, .num_queues = 2, .queue_max = 256,
	  .notify = serve },
	{ .name = "blk", .device_id = 2, .features = ~0ull, .num_queues = 1, .queue_max = 256,
	  .notify = serve },
	{ .name = "rng", .device_id = 4, .features = ~0ull, .num_queues = 1, .queue_max = 256,
	  .notify = serve },
	{ .name = "vsock", .device_id = 19, .features = ~0ull, .num_queues = 3, .queue_max = 256,
	  .notify = serve, .restore = vsock_restore },
};

static void devices(const struct snap *s, uint8_t *ram)
{
	uint8_t st[UART_STATE_LEN];
	struct virtio_dev d;
	struct uart u;
	unsigned i, k;

	for (i = 0; i < s->nr; i++) {
		const struct snap_section *sec = &s->sec[i];

		if (sec->type != SNAP_DEVICE)
			continue;
		if (sec->index == SNAP_DEV_UART) {
			memset(&u, 0, sizeof(u));
			if (!snap_get_exact(sec, T_UART_STATE, st, sizeof(st)))
				(void)uart_restore(&u, st);
			continue;
		}
		for (k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
			struct vm *vm = calloc(1, sizeof(*vm));

			if (!vm)
				return;
			vm->fd = -1;
			gmem_init_buffer(&vm->mem, ram, RAM_SIZE);
			if (!virtio_mmio_add(vm, &d, &kinds[k], NULL)) {
				(void)virtio_mmio_restore(&d, sec);
				virtio_mmio_destroy(&d);
			}
			free(vm);
		}
	}
}

/* ---- what KVM would be given ---- */

/* A host's KVM_GET_SUPPORTED_CPUID: vendor, features, topology, KVM's leaf. */
static const struct kvm_cpuid_entry2 host_cpuid[] = {
	{ .function = 0, .eax = 0xd, .ebx = 0x756e6547, .ecx = 0x6c65746e, .edx = 0x49656e69 },
	{ .function = 1, .eax = 0x806f8, .ebx = 0x00010800, .ecx = 0x76fab223,
	  .edx = 0x0f8bfbff },
	{ .function = 7, .flags = KVM_CPUID_FLAG_SIGNIFCANT_INDEX, .ebx = 0xf1bf07ab,
	  .ecx = 0x1b405f6e, .edx = 0xbc000410 },
	{ .function = 0xb, .flags = KVM_CPUID_FLAG_SIGNIFCANT_INDEX, .eax = 1, .ebx = 1,
	  .ecx = 0x100 },
	{ .function = 0xd, .flags = KVM_CPUID_FLAG_SIGNIFCANT_INDEX, .eax = 0x2e7,
	  .ebx = 0x2a88, .ecx = 0x2a88 },
	{ .function = 0x80000000, .eax = 0x80000008 },
	{ .function = 0x80000001, .ecx = 0x121, .edx = 0x2c100800 },
	{ .function = 0x80000008, .eax = 0x3030, .ebx = 0x200 },
	{ .function = KVM_CPUID_FEATURES_LEAF, .eax = 0x01007afb },
};
#define HOST_CPUID_N (sizeof(host_cpuid) / sizeof(host_cpuid[0]))

/* A vCPU's KVM_GET_REG_LIST: X0..X30, SP, PC, PSTATE, a few system registers, PSCI. */
static void host_regs(__u64 *r, unsigned *n)
{
	static const uint64_t sys[] = { 0xc000, 0xc080, 0xc100, 0xc102, 0xde82, 0xdf19,
					0xdf1a, 0xdf1e, 0xd000 };
	unsigned i;

	*n = 0;
	for (i = 0; i < 34; i++)
		r[(*n)++] = KVM_REG_ARM64 | KVM_REG_SIZE_U64 | 0x0010ull << 16 | 2 * i;
	for (i = 0; i < sizeof(sys) / sizeof(sys[0]); i++)
		r[(*n)++] = KVM_REG_ARM64 | KVM_REG_SIZE_U64 | 0x0013ull << 16 | sys[i];
	r[(*n)++] = KVM_REG_ARM64 | KVM_REG_SIZE_U64 | 0x0014ull << 16;
}

/* A fixed-size element, checked when it is there. */
#define FIXED(sec, tag, type, call) do {				\
		type v_;						\
		if (!snap_get_exact(sec, tag, &v_, sizeof(v_)))		\
			(void)call;					\
	} while (0)

static void kvm_inputs(const struct snap *s)
{
	static struct kvm_cpuid2 *sup;
	static struct kvm_cpuid_entry2 cpuid[CPUID_MAX_ENTRIES];
	uint32_t off[RESTORE_GIC_DIST_MAX];
	__u64 regs[64];
	unsigned i, nregs;
	struct tlv t;

	if (!sup) {
		sup = malloc(sizeof(*sup) + sizeof(host_cpuid));
		if (!sup)
			return;
		sup->nent = HOST_CPUID_N;
		memcpy(sup->entries, host_cpuid, sizeof(host_cpuid));
	}
	host_regs(regs, &nregs);
	for (i = 0; i < s->nr; i++) {
		const struct snap_section *sec = &s->sec[i];
		unsigned id = sec->index % 32;

		if (sec->type == SNAP_VCPU) {
			/* Copied out aligned, as vmstate_x86.c does. */
			if (snap_get(sec, T_VCPU_CPUID, &t) == 1 && t.len <= sizeof(cpuid)) {
				memcpy(cpuid, t.val, t.len);
				(void)restore_check_cpuid_x86(sup, true, cpuid, t.len / sizeof(cpuid[0]),
							      id, 32);
			}
			FIXED(sec, T_VCPU_LAPIC, struct kvm_lapic_state,
			      restore_check_lapic_x86(&v_, id));
			FIXED(sec, T_VCPU_MP_STATE, struct kvm_mp_state,
			      restore_check_mp_state_x86(&v_, id));
			FIXED(sec, T_VCPU_EVENTS, struct kvm_vcpu_events,
			      restore_check_events_x86(&v_, id));
			if (snap_get(sec, T_A64_REGS, &t) == 1)
				(void)restore_check_regs_arm64(regs, nregs, t.val, t.len, id);
			if (snap_get(sec, T_A64_GIC_REDIST, &t) == 1)
				(void)restore_check_gic_words_arm64(t.val, t.len, off,
					restore_gic_redist_offsets_arm64(off), "redistributor");
			if (snap_get(sec, T_A64_GIC_CPU, &t) == 1)
				(void)restore_check_gic_cpu_arm64(t.val, t.len, id);
		} else if (sec->type == SNAP_VM) {
			FIXED(sec, T_VM_PIC_MASTER, struct kvm_irqchip, restore_check_irqchip_x86(&v_));
			FIXED(sec, T_VM_PIC_SLAVE, struct kvm_irqchip, restore_check_irqchip_x86(&v_));
			FIXED(sec, T_VM_IOAPIC, struct kvm_irqchip, restore_check_irqchip_x86(&v_));
			FIXED(sec, T_VM_PIT, struct kvm_pit_state2, restore_check_pit_x86(&v_));
			if (snap_get(sec, T_A64_GIC_DIST, &t) == 1)
				(void)restore_check_gic_words_arm64(t.val, t.len, off,
					restore_gic_dist_offsets_arm64(off, RESTORE_GIC_DIST_MAX),
					"distributor");
		}
	}
}

/* ---- one state file ---- */

static void one(const uint8_t *buf, size_t len, struct snap *s, uint8_t *ram)
{
	struct template_meta m;

	if (snap_parse(buf, len, s))
		return;
	walk(buf, len, s);
	/* A restore reads nothing of a file whose seal is not this directory's. */
	if (snap_check_seal(buf, len, key))
		return;
	if (!template_meta_read(s, &m) && (m.nr_devices > 8 || !m.vcpus || m.vcpus > 32))
		abort();	/* template_meta_read's own bounds */
	devices(s, ram);
	kvm_inputs(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t ram[RAM_SIZE];
	struct snap *s = malloc(sizeof(*s));
	uint8_t *copy = NULL;
	size_t i;

	if (!s || !size)
		goto out;
	for (i = 0; i < RAM_SIZE; i += size)
		memcpy(ram + i, data, RAM_SIZE - i < size ? RAM_SIZE - i : size);
	one(data, size, s, ram);
	if (size >= SNAP_HEADER_LEN && size <= SNAP_MAX_LEN) {
		copy = malloc(size);
		if (copy) {
			memcpy(copy, data, size);
			reseal(copy, size);
			one(copy, size, s, ram);
		}
	}
out:
	free(copy);
	free(s);
	return 0;
}
