package header

import (
	"encoding/binary"
	"testing"

	"pgregory.net/rapid"
)

// Sum agrees with RFC 1071's 16-bit loop for any bytes and accumulator.
func TestSumMatchesRFC1071(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b := rapid.SliceOfN(rapid.Byte(), 0, 3000).Draw(t, "b")
		acc := rapid.Uint64().Draw(t, "acc")
		ref := acc%0xffff + 0 // the accumulator's value mod 0xffff
		for i := 0; i+1 < len(b); i += 2 {
			ref += uint64(binary.BigEndian.Uint16(b[i:]))
		}
		if len(b)%2 == 1 {
			ref += uint64(b[len(b)-1]) << 8
		}
		got, want := Fold64(Sum64(b, acc)), Fold64(ref)
		if got%0xffff != want%0xffff { // 0 and 0xffff are the same number in ones' complement
			t.Fatalf("Fold64(Sum) %#x, want %#x", got, want)
		}
	})
}

// A header whose checksum field holds Checksum over it verifies (sums to 0xffff).
func TestChecksumVerifies(t *testing.T) {
	h := []byte{0x45, 0, 0, 0x54, 0x12, 0x34, 0x40, 0, 64, 1, 0, 0, 198, 18, 0, 1, 198, 18, 0, 2}
	binary.BigEndian.PutUint16(h[10:], Checksum64(h, 0))
	if Fold64(Sum64(h, 0)) != 0xffff {
		t.Fatalf("header with its checksum sums to %#x", Fold64(Sum64(h, 0)))
	}
}
