package main

import "unsafe"

// ntMin is the frame size from which the source writes with non-temporal stores: they skip
// fetching lines the sink holds, and a big frame's lines stream to memory, where the sink's
// prefetcher finds them. Below it the round trip through memory costs more than it saves
// (measured: 64 KiB frames 3 times faster, 1500-byte frames 1.7 times slower).
const ntMin = 16 << 10

// fill writes tmpl into b, which is at least as long.
func fill(b, tmpl []byte) {
	if len(b) < ntMin || uintptr(unsafe.Pointer(&b[0]))&31 != 0 {
		copy(b, tmpl)
		return
	}
	n := len(b) &^ 31
	copyNT(&b[0], &tmpl[0], n)
	copy(b[n:], tmpl[n:len(b)])
}

// prefetchW claims b's cache lines for writing.
func prefetchW(b []byte) {
	if len(b) > 0 {
		prefetchLinesW(&b[0], len(b))
	}
}

// copyNT copies n bytes, a multiple of 32, to a 32-byte aligned dst with non-temporal
// stores, then fences them.
//
//go:noescape
func copyNT(dst, src *byte, n int)

//go:noescape
func prefetchLinesW(p *byte, n int)
