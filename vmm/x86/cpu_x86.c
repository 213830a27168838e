/*
 * cpu_x86: boot-time machine state for a 64-bit Linux entry. See cpu_x86.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include "x86/cpu_x86.h"
#include "x86/cpuid_x86.h"
#include "x86/layout_x86.h"
#include "lib/util.h"

#define PTE_P 0x1ull
#define PTE_RW 0x2ull
#define PTE_PS 0x80ull

#define MSR_IA32_SYSENTER_CS 0x174
#define MSR_IA32_SYSENTER_ESP 0x175
#define MSR_IA32_SYSENTER_EIP 0x176
#define MSR_IA32_MISC_ENABLE 0x1a0
#define MSR_MTRR_DEF_TYPE 0x2ff
#define MSR_STAR 0xc0000081
#define MSR_LSTAR 0xc0000082
#define MSR_CSTAR 0xc0000083
#define MSR_SYSCALL_MASK 0xc0000084
#define MSR_KERNEL_GS_BASE 0xc0000102
#define MISC_ENABLE_FAST_STRING 0x1ull
#define MTRR_ENABLE_WB ((1ull << 11) | 6)

#define APIC_LVT0 0x350
#define APIC_LVT1 0x360
#define APIC_MODE_NMI 0x4
#define APIC_MODE_EXTINT 0x7

uint64_t gdt_entry(uint16_t flags, uint32_t base, uint32_t limit)
{
	return ((uint64_t)(base & 0xff000000u) << 32) |
	       ((uint64_t)(flags & 0xf0ffu) << 40) |
	       ((uint64_t)(limit & 0x000f0000u) << 32) |
	       ((uint64_t)(base & 0x00ffffffu) << 16) |
	       (uint64_t)(limit & 0x0000ffffu);
}

int boot_tables_write_x86(struct guest_mem *m)
{
	uint64_t gdt[BOOT_GDT_ENTRIES] = {
		[BOOT_CS_SEL >> 3] = gdt_entry(0xa09b, 0, 0xfffff),	/* 64-bit code */
		[BOOT_DS_SEL >> 3] = gdt_entry(0xc093, 0, 0xfffff),	/* flat data */
		[BOOT_TSS_SEL >> 3] = gdt_entry(0x808b, 0, 0xfffff),	/* busy TSS */
	};
	uint64_t idt = 0, *pml4, *pdpt, *pd;
	unsigned i;

	if (gmem_write(m, BOOT_GDT_GPA, gdt, sizeof(gdt)) ||
	    gmem_write(m, BOOT_IDT_GPA, &idt, sizeof(idt)))
		return husk_seterr(EFAULT, "no room for the boot GDT/IDT");
	pml4 = gmem_ptr(m, PML4_GPA, 4096);
	pdpt = gmem_ptr(m, PDPT_GPA, 4096);
	pd = gmem_ptr(m, PD_GPA, 4096 * PD_PAGES);
	if (!pml4 || !pdpt || !pd)
		return husk_seterr(EFAULT, "no room for the boot page tables");
	memset(pml4, 0, 4096);
	memset(pdpt, 0, 4096);
	/* Identity-map 4 GiB with 2 MiB pages: the kernel, zero page and initrd. */
	pml4[0] = PDPT_GPA | PTE_P | PTE_RW;
	for (i = 0; i < PD_PAGES; i++)
		pdpt[i] = (PD_GPA + i * 4096ull) | PTE_P | PTE_RW;
	for (i = 0; i < 512 * PD_PAGES; i++)
		pd[i] = ((uint64_t)i << 21) | PTE_P | PTE_RW | PTE_PS;
	return 0;
}

static void seg_from_gdt(struct kvm_segment *s, uint64_t d, uint16_t sel)
{
	uint32_t limit = (uint32_t)((d & 0xffff) | ((d >> 32) & 0xf0000));

	s->base = ((d >> 16) & 0xffffff) | ((d >> 32) & 0xff000000u);
	s->selector = sel;
	s->type = (d >> 40) & 0xf;
	s->s = (d >> 44) & 1;
	s->dpl = (d >> 45) & 3;
	s->present = (d >> 47) & 1;
	s->avl = (d >> 52) & 1;
	s->l = (d >> 53) & 1;
	s->db = (d >> 54) & 1;
	s->g = (d >> 55) & 1;
	s->limit = s->g ? (limit << 12) | 0xfff : limit;
	s->unusable = !s->present;
}

void boot_sregs_x86(struct kvm_sregs *s)
{
	struct kvm_segment code, data, tss;

	seg_from_gdt(&code, gdt_entry(0xa09b, 0, 0xfffff), BOOT_CS_SEL);
	seg_from_gdt(&data, gdt_entry(0xc093, 0, 0xfffff), BOOT_DS_SEL);
	seg_from_gdt(&tss, gdt_entry(0x808b, 0, 0xfffff), BOOT_TSS_SEL);
	s->cs = code;
	s->ds = s->es = s->fs = s->gs = s->ss = data;
	s->tr = tss;
	s->gdt.base = BOOT_GDT_GPA;
	s->gdt.limit = BOOT_GDT_ENTRIES * 8 - 1;
	s->idt.base = BOOT_IDT_GPA;
	s->idt.limit = 7;
	/* Caches on (CD/NW clear), paging in long mode over the identity map. */
	s->cr0 = X86_CR0_PE | X86_CR0_MP | X86_CR0_ET | X86_CR0_NE | X86_CR0_PG;
	s->cr3 = PML4_GPA;
	s->cr4 = X86_CR4_PAE;
	s->efer = EFER_LME | EFER_LMA;
}

void boot_regs_x86(struct kvm_regs *r, uint64_t entry)
{
	memset(r, 0, sizeof(*r));
	r->rflags = 2;		/* bit 1 is reserved and always set */
	r->rip = entry;
	r->rsp = BOOT_STACK_GPA;
	r->rbp = BOOT_STACK_GPA;
	r->rsi = ZERO_PAGE_GPA;	/* 64-bit boot protocol: boot_params pointer */
}

static int set_cpuid(int fd, unsigned id, const struct cpu_config *cfg)
{
	const struct kvm_cpuid2 *sup = cfg->supported;
	struct kvm_cpuid2 *c;
	unsigned nent = sup->nent;
	int err;

	c = calloc(1, sizeof(*c) + CPUID_MAX_ENTRIES * sizeof(c->entries[0]));
	if (!c)
		return husk_seterr(ENOMEM, "out of memory for CPUID");
	if (nent > CPUID_MAX_ENTRIES)
		nent = CPUID_MAX_ENTRIES;
	memcpy(c->entries, sup->entries, nent * sizeof(c->entries[0]));
	err = cpuid_normalize_x86(c->entries, &nent, CPUID_MAX_ENTRIES, id, cfg->nr_vcpus,
				  cfg->tsc_khz);
	if (cfg->tsc_deadline)
		cpuid_set_tsc_deadline_x86(c->entries, nent);
	c->nent = nent;
	if (!err && ioctl(fd, KVM_SET_CPUID2, c) < 0)
		err = husk_seterr(errno, "KVM_SET_CPUID2 on vCPU %u: %s", id, strerror(errno));
	free(c);
	return err;
}

static int set_msrs(int fd, unsigned id)
{
	static const struct { uint32_t index; uint64_t data; } boot_msrs[] = {
		{ MSR_IA32_SYSENTER_CS, 0 }, { MSR_IA32_SYSENTER_ESP, 0 },
		{ MSR_IA32_SYSENTER_EIP, 0 }, { MSR_STAR, 0 }, { MSR_LSTAR, 0 },
		{ MSR_CSTAR, 0 }, { MSR_SYSCALL_MASK, 0 }, { MSR_KERNEL_GS_BASE, 0 },
		{ MSR_IA32_MISC_ENABLE, MISC_ENABLE_FAST_STRING },
		{ MSR_MTRR_DEF_TYPE, MTRR_ENABLE_WB },
	};
	struct {
		struct kvm_msrs hdr;
		struct kvm_msr_entry e[ARRAY_SIZE(boot_msrs)];
	} msrs;
	unsigned i;
	int ret;

	memset(&msrs, 0, sizeof(msrs));
	for (i = 0; i < ARRAY_SIZE(boot_msrs); i++) {
		msrs.e[i].index = boot_msrs[i].index;
		msrs.e[i].data = boot_msrs[i].data;
	}
	msrs.hdr.nmsrs = ARRAY_SIZE(boot_msrs);
	ret = ioctl(fd, KVM_SET_MSRS, &msrs);
	if (ret < 0)
		return husk_seterr(errno, "KVM_SET_MSRS on vCPU %u: %s", id, strerror(errno));
	if ((unsigned)ret != ARRAY_SIZE(boot_msrs))
		return husk_seterr(EINVAL, "KVM refused MSR 0x%x on vCPU %u",
				   boot_msrs[ret].index, id);
	return 0;
}

static int set_lint(int fd, unsigned id)
{
	struct kvm_lapic_state la;
	uint32_t v;

	if (ioctl(fd, KVM_GET_LAPIC, &la) < 0)
		return husk_seterr(errno, "KVM_GET_LAPIC on vCPU %u: %s", id, strerror(errno));
	memcpy(&v, la.regs + APIC_LVT0, 4);
	v = (v & ~0x700u) | (APIC_MODE_EXTINT << 8);
	memcpy(la.regs + APIC_LVT0, &v, 4);
	memcpy(&v, la.regs + APIC_LVT1, 4);
	v = (v & ~0x700u) | (APIC_MODE_NMI << 8);
	memcpy(la.regs + APIC_LVT1, &v, 4);
	if (ioctl(fd, KVM_SET_LAPIC, &la) < 0)
		return husk_seterr(errno, "KVM_SET_LAPIC on vCPU %u: %s", id, strerror(errno));
	return 0;
}

static int set_boot_state(int fd, uint64_t entry, int have_xcrs)
{
	struct kvm_sregs sregs;
	struct kvm_regs regs;
	struct kvm_fpu fpu;

	if (ioctl(fd, KVM_GET_SREGS, &sregs) < 0)
		return husk_seterr(errno, "KVM_GET_SREGS: %s", strerror(errno));
	boot_sregs_x86(&sregs);
	if (ioctl(fd, KVM_SET_SREGS, &sregs) < 0)
		return husk_seterr(errno, "KVM_SET_SREGS: %s", strerror(errno));
	boot_regs_x86(&regs, entry);
	if (ioctl(fd, KVM_SET_REGS, &regs) < 0)
		return husk_seterr(errno, "KVM_SET_REGS: %s", strerror(errno));
	memset(&fpu, 0, sizeof(fpu));
	fpu.fcw = 0x37f;	/* x87 default control word */
	fpu.mxcsr = 0x1f80;	/* SSE: all exceptions masked */
	if (ioctl(fd, KVM_SET_FPU, &fpu) < 0)
		return husk_seterr(errno, "KVM_SET_FPU: %s", strerror(errno));
	if (have_xcrs) {
		struct kvm_xcrs x;

		memset(&x, 0, sizeof(x));
		x.nr_xcrs = 1;
		x.xcrs[0].xcr = 0;
		x.xcrs[0].value = 1;	/* XCR0: x87 only, as after reset */
		if (ioctl(fd, KVM_SET_XCRS, &x) < 0)
			return husk_seterr(errno, "KVM_SET_XCRS: %s", strerror(errno));
	}
	return 0;
}

int cpu_setup_x86(int vcpu_fd, unsigned id, const struct cpu_config *cfg)
{
	int err;

	err = set_cpuid(vcpu_fd, id, cfg);
	if (!err)
		err = set_msrs(vcpu_fd, id);
	if (!err)
		err = set_lint(vcpu_fd, id);
	if (!err && id == 0)
		err = set_boot_state(vcpu_fd, cfg->entry, cfg->have_xcrs);
	return err;
}
