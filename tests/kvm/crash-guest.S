/* Test guest: an invalid opcode with an empty IDT, i.e. a triple fault. */
#include "guest-common.S"
	.globl	_start
_start:
	lea	msg(%rip), %rsi
	call	puts
	ud2
	.section .rodata
msg:	.asciz	"crash-guest: about to triple fault\n"
