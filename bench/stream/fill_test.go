package stream

import (
	"bytes"
	"testing"
)

// fill writes the template's first len(b) bytes into b, whatever b's length and alignment,
// on every CPU: the frames the sink checks byte by byte.
func TestFillWritesTemplate(t *testing.T) {
	for _, size := range []int{8, 64, 1500, 16<<10 - 1, 16 << 10, 64<<10 + 13} {
		tmpl := frameTemplate(size + 64)
		buf := make([]byte, size+64)
		for _, off := range []int{0, 2, 32} {
			b := buf[off : off+size]
			clear(buf)
			fill(b, tmpl)
			if !bytes.Equal(b, tmpl[:size]) {
				t.Errorf("%d bytes at offset %d: not the template", size, off)
			}
		}
	}
}
