#include "textflag.h"

// func Syscall(nr, a1, a2, a3 uintptr) uintptr
//
// The i386 convention: number in EAX, arguments in EBX, ECX, EDX.
TEXT ·Syscall(SB), NOSPLIT, $0-40
	MOVQ	nr+0(FP), AX
	MOVQ	a1+8(FP), BX
	MOVQ	a2+16(FP), CX
	MOVQ	a3+24(FP), DX
	INT	$0x80
	MOVQ	AX, ret+32(FP)
	RET
