/*
 * Test guest: reads one line from COM1 by polling LSR.DR (husk feeds its
 * stdin into the UART's receive FIFO), echoes it back and powers off.
 */
#include "guest-common.S"
#define MAXLEN	64
	.globl	_start
_start:
	lea	ready(%rip), %rsi
	call	puts
	lea	buf(%rip), %rdi
	xor	%ecx, %ecx
1:	mov	$(COM1 + 5), %dx
	inb	%dx, %al
	test	$1, %al
	jz	1b
	mov	$COM1, %dx
	inb	%dx, %al
	cmp	$'\n', %al
	je	2f
	cmp	$MAXLEN, %ecx
	jae	1b
	stosb
	inc	%ecx
	jmp	1b
2:	movb	$0, (%rdi)
	lea	got(%rip), %rsi
	call	puts
	lea	buf(%rip), %rsi
	call	puts
	lea	nl(%rip), %rsi
	call	puts
	xor	%eax, %eax
	jmp	poweroff
	.section .rodata
ready:	.asciz	"echo-guest: ready\n"
got:	.asciz	"echo-guest: got "
nl:	.asciz	"\n"
	.bss
buf:	.skip	MAXLEN + 1
