/*
 * Test guest: the full path a guest exercises, fast even on PVM hosts.
 * Ring 0 prints a banner on COM1 and records the "init" event; it then
 * installs its own GDT and user-accessible page tables and drops to ring 3,
 * where a 1e6-step LCG runs at native speed and husk's control register is
 * read through MMIO. A syscall returns to ring 0, which prints the LCG
 * result and the magic it read, and powers off with status 0.
 */
#include "guest-common.S"

#define LOOPS		1000000
#define KCODE		0x08
#define KDATA		0x10
#define UDATA		0x18
#define UCODE		0x20
#define MSR_EFER	0xc0000080
#define MSR_STAR	0xc0000081
#define MSR_LSTAR	0xc0000082
#define MSR_FMASK	0xc0000084

	.text
	.globl	_start
_start:
	lea	banner(%rip), %rsi
	call	puts
	mov	$EV_INIT, %eax
	mov	$HUSK_CTL, %dx
	outl	%eax, %dx

	lgdt	gdtr(%rip)
	pushq	$KCODE
	lea	1f(%rip), %rax
	pushq	%rax
	lretq
1:	mov	$KDATA, %ax
	mov	%ax, %ds
	mov	%ax, %es
	mov	%ax, %ss
	lea	pml4(%rip), %rax
	mov	%rax, %cr3

	/* syscall lands in ring 0 at syscall_entry with interrupts masked. */
	mov	$MSR_EFER, %ecx
	rdmsr
	or	$1, %eax
	wrmsr
	mov	$MSR_STAR, %ecx
	xor	%eax, %eax
	mov	$((KDATA << 16) | KCODE), %edx
	wrmsr
	mov	$MSR_LSTAR, %ecx
	lea	syscall_entry(%rip), %rax
	mov	%rax, %rdx
	shr	$32, %rdx
	wrmsr
	mov	$MSR_FMASK, %ecx
	mov	$0x200, %eax
	xor	%edx, %edx
	wrmsr

	pushq	$(UDATA | 3)
	lea	user_stack_top(%rip), %rax
	pushq	%rax
	pushq	$0x2
	pushq	$(UCODE | 3)
	lea	user_code(%rip), %rax
	pushq	%rax
	iretq

user_code:
	xor	%eax, %eax
	mov	$LOOPS, %ecx
	movabs	$6364136223846793005, %r8
	movabs	$1442695040888963407, %r9
1:	imul	%r8, %rax
	add	%r9, %rax
	dec	%ecx
	jnz	1b
	mov	%rax, %rdi
	mov	$HUSK_CTL_MMIO, %ebx
	mov	(%rbx), %esi
	syscall

syscall_entry:
	mov	%rdi, %r12
	mov	%rsi, %r13
	lea	msg_lcg(%rip), %rsi
	call	puts
	mov	%r12, %rdi
	call	puthex
	lea	msg_magic(%rip), %rsi
	call	puts
	mov	%r13, %rdi
	call	puthex
	lea	msg_nl(%rip), %rsi
	call	puts
	xor	%eax, %eax
	jmp	poweroff

	.section .rodata
banner:		.asciz	"serial-guest: hello from ring 0\n"
msg_lcg:	.asciz	"serial-guest: ring 3 done lcg="
msg_magic:	.asciz	" magic="
msg_nl:		.asciz	"\n"

	.data
	.balign	8
gdt:
	.quad	0
	.quad	0x00af9b000000ffff	/* KCODE: 64-bit, DPL 0 */
	.quad	0x00cf93000000ffff	/* KDATA */
	.quad	0x00cff3000000ffff	/* UDATA: DPL 3 */
	.quad	0x00affb000000ffff	/* UCODE: 64-bit, DPL 3 */
gdt_end:
gdtr:
	.word	gdt_end - gdt - 1
	.quad	gdt

	/* Identity map of 4 GiB in 2 MiB pages, user-accessible (U bit). */
	.balign	4096
pml4:
	.quad	pdpt + 7
	.fill	511, 8, 0
pdpt:
	.quad	pd + 7, pd + 0x1000 + 7, pd + 0x2000 + 7, pd + 0x3000 + 7
	.fill	508, 8, 0
pd:
	.set	i, 0
	.rept	2048
	.quad	(i << 21) | 0x87
	.set	i, i + 1
	.endr

	.bss
	.balign	4096
user_stack:
	.skip	4096
user_stack_top:
