/*
 * Test guest for --boot-timer (Firecracker's convention): writes that are
 * not the one-byte magic at offset 0 must be ignored, the first virtio-mmio
 * slot must belong to the timer (reads zero) and the devices start one slot
 * up. Prints what it read at both slots, then writes the magic and powers
 * off.
 */
#include "guest-common.S"

#define SLOT0		0xd0000000
#define SLOT1		0xd0001000
#define MAGIC		123

	.text
	.globl	_start
_start:
	lea	banner(%rip), %rsi
	call	puts
	mov	$SLOT0, %rbx
	movb	$(MAGIC - 1), (%rbx)	/* another value: not boot done */
	movl	$MAGIC, (%rbx)		/* four bytes: not boot done */
	movb	$MAGIC, 1(%rbx)		/* another offset: not boot done */
	mov	(%rbx), %edi
	call	puthex
	lea	mid(%rip), %rsi
	call	puts
	mov	$SLOT1, %rcx
	mov	(%rcx), %edi
	call	puthex
	lea	nl(%rip), %rsi
	call	puts
	movb	$MAGIC, (%rbx)		/* boot done */
	xor	%eax, %eax
	call	poweroff

	.section .rodata
banner:	.asciz	"boottimer-guest: slot0="
mid:	.asciz	" slot1="
nl:	.asciz	"\n"
