//go:build amd64

package bench

import (
	"bytes"
	"testing"
)

// fill writes the same bytes whichever path it takes: the assembly (non-temporal AVX stores,
// on a CPU that has AVX, for large aligned frames) or the plain copy, for every size and
// alignment around the threshold.
func TestFillPathsAgree(t *testing.T) {
	tmpl := make([]byte, 3*ntMin)
	for i := range tmpl {
		tmpl[i] = byte(i*7 + 3)
	}
	buf := make([]byte, len(tmpl)+64)
	check := func() {
		t.Helper()
		for _, n := range []int{0, 1, 63, ntMin - 1, ntMin, ntMin + 31, ntMin + 32, 2*ntMin + 5} {
			for _, off := range []int{0, 1, 32} {
				b := buf[off : off+n]
				clear(buf)
				fill(b, tmpl)
				prefetchW(b)
				if !bytes.Equal(b, tmpl[:n]) {
					t.Fatalf("%d bytes at offset %d (AVX %v): fill wrote something else", n, off, haveAVX)
				}
			}
		}
	}
	check()
	if haveAVX {
		haveAVX = false
		defer func() { haveAVX = true }()
		check()
	}
}
