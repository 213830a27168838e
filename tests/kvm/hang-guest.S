/* Test guest: prints a line and halts forever with interrupts off. */
#include "guest-common.S"
	.globl	_start
_start:
	lea	msg(%rip), %rsi
	call	puts
1:	cli
	hlt
	jmp	1b
	.section .rodata
msg:	.asciz	"hang-guest: halting forever\n"
