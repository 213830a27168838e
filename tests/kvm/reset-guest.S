/* Test guest: prints a line, then reboots through the i8042 (clean end). */
#include "guest-common.S"
	.globl	_start
_start:
	lea	msg(%rip), %rsi
	call	puts
	jmp	i8042_reset
	.section .rodata
msg:	.asciz	"reset-guest: rebooting\n"
