/*
 * Shared routines for the tiny test guests. They start in 64-bit mode as
 * husk leaves a Linux kernel (CS 0x10, identity paging, rsp 0x8ff0) and run
 * in ring 0, where port I/O works even on PVM hosts. Each instruction at
 * CPL0 may be emulated (~1 us on PVM), so keep ring-0 paths short.
 */
#define COM1		0x3f8
#include "machine/husk_ctl.h"
#define HUSK_CTL	HUSK_CTL_PORT
#define HUSK_CTL_MMIO	HUSK_CTL_MMIO_GPA
#define EV_INIT		HUSK_EV_INIT

	.text
/* puts: write the NUL-terminated string at %rsi to COM1. */
puts:
	mov	$COM1, %dx
1:	lodsb
	test	%al, %al
	jz	2f
	outb	%al, %dx
	jmp	1b
2:	ret

/* puthex: write %rdi as 16 hex digits to COM1. */
puthex:
	mov	$16, %ecx
	mov	$COM1, %dx
1:	rol	$4, %rdi
	mov	%edi, %eax
	and	$0xf, %eax
	cmp	$10, %eax
	jb	2f
	add	$('a' - 10 - '0'), %eax
2:	add	$'0', %eax
	outb	%al, %dx
	dec	%ecx
	jnz	1b
	ret

/* poweroff: husk's power-off register with status %eax; never returns. */
poweroff:
	mov	$(HUSK_CTL + 4), %dx
	outl	%eax, %dx
1:	cli
	hlt
	jmp	1b

/* i8042_reset: pulse the reset line as Linux does with reboot=k. */
i8042_reset:
	mov	$0xfe, %al
	outb	%al, $0x64
1:	cli
	hlt
	jmp	1b
