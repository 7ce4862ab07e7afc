package bench

import (
	"bytes"
	"os"
	"unsafe"

	"golang.org/x/sys/cpu"
)

// ntMin is the frame size from which the source writes with non-temporal stores: they skip
// fetching lines the sink holds, and a big frame's lines stream to memory, where the sink's
// prefetcher finds them. Below it the round trip through memory costs more than it saves
// (measured: 64 KiB frames 3 times faster, 1500-byte frames 1.7 times slower).
const ntMin = 16 << 10

// The assembly runs only on CPUs that have its instructions: copyNT's are AVX, prefetchLinesW's
// PREFETCHW (the PRFCHW feature, which x/sys/cpu does not report: Linux lists it as
// 3dnowprefetch). Elsewhere the plain Go paths run.
var (
	haveAVX       = cpu.X86.HasAVX
	havePrefetchW = hasCPUFlag("3dnowprefetch")
)

// hasCPUFlag reports whether the kernel lists flag for the CPUs (false when it cannot tell).
func hasCPUFlag(flag string) bool {
	info, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return false
	}
	for _, line := range bytes.Split(info, []byte("\n")) {
		if bytes.HasPrefix(line, []byte("flags")) {
			for _, f := range bytes.Fields(line) {
				if string(f) == flag {
					return true
				}
			}
			return false
		}
	}
	return false
}

// fill writes tmpl into b, which is at least as long.
func fill(b, tmpl []byte) {
	if !haveAVX || len(b) < ntMin || uintptr(unsafe.Pointer(&b[0]))&31 != 0 {
		copy(b, tmpl)
		return
	}
	n := len(b) &^ 31
	copyNT(&b[0], &tmpl[0], n)
	copy(b[n:], tmpl[n:len(b)])
}

// prefetchW claims b's cache lines for writing.
func prefetchW(b []byte) {
	if havePrefetchW && len(b) > 0 {
		prefetchLinesW(&b[0], len(b))
	}
}

// copyNT copies n bytes, a multiple of 32, to a 32-byte aligned dst with non-temporal
// stores, then fences them. It needs AVX.
//
//go:noescape
func copyNT(dst, src *byte, n int)

// prefetchLinesW issues PREFETCHW for every 64-byte line of p[:n].
//
//go:noescape
func prefetchLinesW(p *byte, n int)
