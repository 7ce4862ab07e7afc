#include "textflag.h"

// func copyNT(dst, src *byte, n int)
TEXT ·copyNT(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
loop128:
	CMPQ CX, $128
	JB   loop32
	VMOVDQU 0(SI), Y0
	VMOVDQU 32(SI), Y1
	VMOVDQU 64(SI), Y2
	VMOVDQU 96(SI), Y3
	VMOVNTDQ Y0, 0(DI)
	VMOVNTDQ Y1, 32(DI)
	VMOVNTDQ Y2, 64(DI)
	VMOVNTDQ Y3, 96(DI)
	ADDQ $128, SI
	ADDQ $128, DI
	SUBQ $128, CX
	JMP  loop128
loop32:
	CMPQ CX, $32
	JB   done
	VMOVDQU 0(SI), Y0
	VMOVNTDQ Y0, 0(DI)
	ADDQ $32, SI
	ADDQ $32, DI
	SUBQ $32, CX
	JMP  loop32
done:
	SFENCE
	VZEROUPPER
	RET

// func prefetchLinesW(p *byte, n int)
TEXT ·prefetchLinesW(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), DI
	MOVQ n+8(FP), CX
	ADDQ DI, CX
loop:
	CMPQ DI, CX
	JAE  done
	BYTE $0x0F; BYTE $0x0D; BYTE $0x0F // PREFETCHW (DI); the assembler lacks the mnemonic
	ADDQ $64, DI
	JMP  loop
done:
	RET
