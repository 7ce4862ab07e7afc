package config

import "testing"

// The target is a 1 MB config in well under a second.
func BenchmarkParse1MB(b *testing.B) {
	hid := bigConfig(1 << 20)
	n, err := Parse("big.hid", hid)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		data []byte
	}{{"HID", hid}, {"XML", n.XML()}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.data)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Parse("big", c.data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("emit-HID", func(b *testing.B) {
		b.SetBytes(int64(len(hid)))
		for b.Loop() {
			n.HID()
		}
	})
	b.Run("emit-XML", func(b *testing.B) {
		b.SetBytes(int64(len(hid)))
		for b.Loop() {
			n.XML()
		}
	})
}
