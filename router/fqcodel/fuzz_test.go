package fqcodel

import (
	"bytes"
	"testing"

	"github.com/nicstack/nicstack/netdev/header"
)

// Any frame: Classify and MarkCE read and write only within it; MarkCE marks exactly the
// frames Classify calls ECN-capable, keeps a valid IPv4 header checksum valid, and a second
// MarkCE changes nothing.
func FuzzClassifyMarkCE(f *testing.F) {
	f.Add(frame4(header.ProtoTCP, 2, 0))
	f.Add(frame4(header.ProtoUDP, 1, 0x2000))
	f.Add(frame6(header.ProtoUDP, 2, header.ProtoDstOpts))
	f.Add(frame6(header.ProtoTCP, 1, header.ProtoFragment))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, ect := Classify(b)
		var sumOK bool
		ip4, is4 := ipv4Of(b)
		if is4 {
			sumOK = ip4.ComputeChecksum() == ip4.Checksum()
		}
		if got := MarkCE(b); got != ect {
			t.Fatalf("MarkCE %v, Classify's ect %v", got, ect)
		}
		if is4 && sumOK && ip4.ComputeChecksum() != ip4.Checksum() {
			t.Fatalf("checksum broken: %#x, computed %#x", ip4.Checksum(), ip4.ComputeChecksum())
		}
		again := bytes.Clone(b)
		MarkCE(again)
		if !bytes.Equal(again, b) {
			t.Fatal("a second MarkCE changed the frame")
		}
	})
}

func ipv4Of(b []byte) (header.IPv4, bool) {
	eth, ok := header.NewEth(b)
	if !ok || eth.Type() != header.EtherTypeIPv4 {
		return nil, false
	}
	return header.NewIPv4(eth.Payload())
}
