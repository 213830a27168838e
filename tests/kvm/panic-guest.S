/* Test guest: prints Linux's panic banner, then resets like panic=-1 does. */
#include "guest-common.S"
	.globl	_start
_start:
	lea	msg(%rip), %rsi
	call	puts
	jmp	i8042_reset
	.section .rodata
msg:	.asciz	"Kernel panic - not syncing: panic-guest\n"
