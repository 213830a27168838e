/*
 * Test guest: runs POPCNT in ring 0, which hardware KVM executes natively
 * but PVM's instruction emulator cannot. On PVM husk must stop with a
 * readable internal-error report (rip and instruction bytes), not hang.
 */
#include "guest-common.S"
	.globl	_start
_start:
	lea	msg(%rip), %rsi
	call	puts
	mov	$0xff, %eax
	popcnt	%rax, %rax
	mov	%rax, %rdi
	call	puthex
	lea	nl(%rip), %rsi
	call	puts
	xor	%eax, %eax
	jmp	poweroff
	.section .rodata
msg:	.asciz	"emul-guest: popcnt(0xff)="
nl:	.asciz	"\n"
