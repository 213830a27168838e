/*
 * Entry of vsock-guest (the work is in vsock-guest.c): set a stack, call
 * main() and power off with its return value as the status.
 */
#include "guest-common.S"
	.globl	_start
_start:
	lea	stack_top(%rip), %rsp
	call	main
	jmp	poweroff

	.bss
	.balign	16
stack:
	.skip	16384
stack_top:
	.section .note.GNU-stack,"",@progbits
