package stream

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// hasAVX says whether the assembly may run: copyNT's VMOVDQU and VMOVNTDQ on Y registers
// need AVX. prefetchLinesW's PREFETCHW has no flag in x/sys/cpu (PRFCHW); every x86 CPU
// with AVX runs it (a prefetch on AMD and on Intel since Broadwell, a hint Intel's older
// ones ignore), so the same check covers it. A variable, so that the test can compare the
// two paths.
var hasAVX = cpu.X86.HasAVX

// ntMin is the frame size from which the source writes with non-temporal stores: they skip
// fetching lines the sink holds, and a big frame's lines stream to memory, where the sink's
// prefetcher finds them. Below it the round trip through memory costs more than it saves
// (measured: 64 KiB frames 3 times faster, 1500-byte frames 1.7 times slower).
const ntMin = 16 << 10

// fillNT writes the longest 32-byte multiple of tmpl that it can into b with non-temporal
// stores and returns its length: 0 without AVX, for frames shorter than ntMin and for a b
// that is not 32-byte aligned.
func fillNT(b, tmpl []byte) int {
	if !hasAVX || len(b) < ntMin || uintptr(unsafe.Pointer(&b[0]))&31 != 0 {
		return 0
	}
	n := len(b) &^ 31
	copyNT(&b[0], &tmpl[0], n)
	return n
}

// prefetchW claims b's cache lines for writing.
func prefetchW(b []byte) {
	if hasAVX && len(b) > 0 {
		prefetchLinesW(&b[0], len(b))
	}
}

// copyNT copies n bytes, a multiple of 32, to a 32-byte aligned dst with non-temporal
// stores, then fences them. It needs AVX.
//
//go:noescape
func copyNT(dst, src *byte, n int)

// prefetchLinesW runs PREFETCHW on every 64-byte line of the n bytes at p.
//
//go:noescape
func prefetchLinesW(p *byte, n int)
