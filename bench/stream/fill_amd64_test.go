package stream

import (
	"bytes"
	"testing"
	"unsafe"
)

// With AVX the assembly (non-temporal stores, PREFETCHW) writes the same bytes as the Go
// fallback that CPUs without AVX take, and it takes the aligned big frames it is meant for.
func TestFillAssemblyMatchesFallback(t *testing.T) {
	if !hasAVX {
		t.Skip("no AVX: only the fallback runs here")
	}
	defer func(v bool) { hasAVX = v }(hasAVX)
	for _, size := range []int{1500, 16 << 10, 64 << 10, 64<<10 + 13} {
		tmpl := frameTemplate(size)
		var got [2][]byte
		for i, avx := range []bool{true, false} {
			hasAVX = avx
			buf := make([]byte, size+32)
			off := int(-uintptr(unsafe.Pointer(&buf[0])) & 31) // 32-byte aligned
			got[i] = buf[off : off+size]
			prefetchW(got[i])
			fill(got[i], tmpl)
		}
		if !bytes.Equal(got[0], got[1]) || !bytes.Equal(got[0], tmpl) {
			t.Errorf("%d bytes: the assembly and the fallback differ", size)
		}
		hasAVX = true
		if n, want := fillNT(got[0], tmpl), size&^31; size >= ntMin && n != want {
			t.Errorf("%d bytes: the assembly wrote %d, want %d", size, n, want)
		}
	}
}
