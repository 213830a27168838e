/*
 * Entry of desc-guest (the work is in desc-guest.c): a stack, main(), and
 * power off with main's return value as the status.
 */
#include "guest-common.S"
	.globl	_start
_start:
	lea	desc_stack_top(%rip), %rsp
	call	main
	jmp	poweroff

	.bss
	.balign	16
desc_stack:
	.skip	16384
desc_stack_top:
	.section .note.GNU-stack,"",@progbits
