/*
 * layout_x86: where husk places things in an x86-64 guest's physical memory
 * and which port/MMIO addresses its devices answer at.
 *
 * Low memory follows the Firecracker-style direct 64-bit boot: boot GDT and
 * IDT, the zero page, a boot stack and identity page tables all sit below
 * 1 MiB; the kernel image and initrd live above 1 MiB.
 */
#ifndef HUSK_LAYOUT_X86_H
#define HUSK_LAYOUT_X86_H

#define BOOT_GDT_GPA		0x500ull
#define BOOT_IDT_GPA		0x528ull	/* right after the 5-entry GDT */
#define ZERO_PAGE_GPA		0x7000ull
#define BOOT_STACK_GPA		0x8ff0ull	/* initial rsp, grows down */
#define PML4_GPA		0x9000ull
#define PDPT_GPA		0xa000ull
#define PD_GPA			0xb000ull	/* 4 pages: identity map 4 GiB */
#define PD_PAGES		4
#define RNG_SEED_GPA		0x1f000ull	/* setup_data with the guest's RNG seed */
#define CMDLINE_GPA		0x20000ull
#define CMDLINE_MAX		2048u		/* x86 COMMAND_LINE_SIZE incl. NUL */
#define EBDA_GPA		0x9fc00ull	/* end of base RAM, MP table here */
#define HIMEM_GPA		0x100000ull	/* 1 MiB: start of extended RAM */
#define BZIMAGE_LOAD_GPA	0x100000ull	/* protected-mode kernel of a bzImage */

/* Everything below this is husk's boot area: kernels may not load there. */
#define BOOT_AREA_END		HIMEM_GPA

/* Fixed MMIO and KVM-internal addresses inside the 32-bit hole. */
#define VIRTIO_MMIO_GPA		0xd0000000ull	/* device n at + n * 0x1000 */
/* husk's control registers: HUSK_CTL_MMIO_GPA in machine/husk_ctl.h */
#define IOAPIC_GPA		0xfec00000ull
#define LAPIC_GPA		0xfee00000ull
#define KVM_IDENTITY_MAP_GPA	0xfffbc000ull	/* VMX real-mode page, 1 page */
#define KVM_TSS_GPA		0xfffbd000ull	/* VMX real-mode TSS, 3 pages */

/* Legacy ports. */
#define COM1_PORT		0x3f8
#define COM1_IRQ		4
#define I8042_DATA_PORT		0x60
#define I8042_CMD_PORT		0x64
/* HUSK_CTL_PORT (machine/husk_ctl.h): 8 ports, the same registers as MMIO */

#endif
