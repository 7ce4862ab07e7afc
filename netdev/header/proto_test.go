package header

import (
	"encoding/binary"
	"testing"

	"pgregory.net/rapid"
)

// Incremental updates must agree with computing the checksum again, for any data and any
// change of any aligned word (RFC 1624).
func TestAdjustMatchesRecompute(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 40).Draw(t, "words") * 2
		data := rapid.SliceOfN(rapid.Byte(), n, n).Draw(t, "data")
		k := rapid.IntRange(0, n/2-1).Draw(t, "word") * 2
		v := rapid.Uint16().Draw(t, "value")
		c := Checksum(data, 0)
		old := binary.BigEndian.Uint16(data[k:])
		binary.BigEndian.PutUint16(data[k:], v)
		got, want := Adjust(c, old, v), Checksum(data, 0)
		if got != want && !(got == 0xffff && want == 0) && !(got == 0 && want == 0xffff) {
			t.Fatalf("adjusted %#04x, recomputed %#04x", got, want)
		}
	})
}

func TestAdjust4AndIPv4Setters(t *testing.T) {
	b := make([]byte, 20)
	PutIPv4(b, 20, ProtoUDP, [4]byte{10, 0, 0, 1}, [4]byte{10, 0, 0, 2})
	ip, ok := NewIPv4(b)
	if !ok || Checksum(ip.Header(), 0) != 0 {
		t.Fatal("PutIPv4 checksum")
	}
	ip.SetSrc([4]byte{198, 18, 0, 10})
	ip.SetDst([4]byte{255, 1, 2, 3})
	if Checksum(ip.Header(), 0) != 0 {
		t.Fatal("incremental IPv4 checksum wrong")
	}
}

func TestViewsRejectShortOrBad(t *testing.T) {
	if _, ok := NewEth(make([]byte, 13)); ok {
		t.Error("short Ethernet accepted")
	}
	if _, ok := NewARP(make([]byte, 28)); ok {
		t.Error("ARP with hardware type 0 accepted")
	}
	bad := make([]byte, 40)
	bad[0] = 0x4f // header length 60 > packet
	binary.BigEndian.PutUint16(bad[2:], 40)
	if _, ok := NewIPv4(bad); ok {
		t.Error("IPv4 with header beyond the packet accepted")
	}
	bad[0] = 0x45
	binary.BigEndian.PutUint16(bad[2:], 41)
	if _, ok := NewIPv4(bad); ok {
		t.Error("IPv4 longer than the frame accepted")
	}
	binary.BigEndian.PutUint16(bad[2:], 0) // TSO: length left to the segmenter
	if ip, ok := NewIPv4(bad); !ok || ip.TotalLen() != 40 {
		t.Error("IPv4 with total length 0 not taken as the whole frame")
	}
	seg := make([]byte, 20)
	PutIPv4(bad, 40, ProtoTCP, [4]byte{}, [4]byte{})
	copy(bad[20:], seg) // data offset 0
	if _, ok := L4Header(IPv4(bad)); ok {
		t.Error("TCP header with data offset 0 accepted")
	}
}

func TestDHCPOptions(t *testing.T) {
	w := NewDHCPMessage(1, 7, [4]byte{}, [4]byte{}, [4]byte{}, MAC{1, 2, 3, 4, 5, 6}, true)
	w.Add(OptMessageType, DHCPDiscover)
	w.AddIPv4s(OptDNSServer, [4]byte{1, 1, 1, 1}, [4]byte{9, 9, 9, 9})
	w.AddUint32(OptLeaseTime, 3600)
	m, ok := NewDHCP(w.End())
	if !ok || m.MessageType() != DHCPDiscover || m.XID() != 7 || m.ClientMAC() != (MAC{1, 2, 3, 4, 5, 6}) {
		t.Fatal("DHCP round trip")
	}
	if d := m.OptionIPv4s(OptDNSServer); len(d) != 2 || d[1] != [4]byte{9, 9, 9, 9} {
		t.Fatalf("DNS option %v", d)
	}
	// A truncated option list ends the search instead of reading past the message.
	trunc := append([]byte(nil), m[:243]...)
	trunc[241] = 200
	if _, ok := DHCP(trunc).Option(OptLeaseTime); ok {
		t.Fatal("option found behind a truncated one")
	}
}

func TestPutUDPChecksumVerifies(t *testing.T) {
	src, dst := [4]byte{10, 0, 0, 1}, [4]byte{255, 255, 255, 255}
	seg := append(make([]byte, UDPLen), "payload of odd length"...)
	PutUDP(seg, src, dst, DHCPClientPort, DHCPServerPort)
	p := Ports(seg)
	if p.Src() != DHCPClientPort || p.Dst() != DHCPServerPort || int(binary.BigEndian.Uint16(seg[4:])) != len(seg) {
		t.Fatalf("UDP header % x", seg[:UDPLen])
	}
	if Checksum(seg, PseudoSum(src, dst, ProtoUDP, len(seg))) != 0 {
		t.Fatal("UDP checksum does not verify")
	}
}
