package testcomp

import (
	"testing"

	"github.com/nicstack/nicstack/netdev/header"
)

func TestSwapUDPTurnsTheFrameAround(t *testing.T) {
	a, b := header.MAC{2, 0, 0, 0, 0, 1}, header.MAC{2, 0, 0, 0, 0, 2}
	ipA, ipB := [4]byte{10, 0, 0, 1}, [4]byte{10, 0, 0, 2}
	f := make([]byte, header.EthLen+header.IPv4Len+header.UDPLen+5)
	e := header.Eth(f)
	e.SetDst(b)
	e.SetSrc(a)
	e.SetType(header.EtherTypeIPv4)
	header.PutIPv4(e.Payload(), len(e.Payload()), header.ProtoUDP, ipA, ipB)
	copy(f[len(f)-5:], "hello")
	header.PutUDP(e.Payload()[header.IPv4Len:], ipA, ipB, 1000, 2000)

	if !swapUDP(f) {
		t.Fatal("UDP frame not swapped")
	}
	ip, _ := header.NewIPv4(e.Payload())
	udp, _ := header.L4Header(ip)
	if e.Src() != b || e.Dst() != a || ip.Src() != ipB || ip.Dst() != ipA ||
		header.Ports(udp).Src() != 2000 || header.Ports(udp).Dst() != 1000 {
		t.Fatalf("swapped frame % x", f)
	}
	if header.Checksum(ip.Header(), 0) != 0 || header.Checksum(udp, header.PseudoSum(ipB, ipA, header.ProtoUDP, len(udp))) != 0 {
		t.Fatal("checksums no longer verify")
	}
	e.SetType(header.EtherTypeARP)
	if swapUDP(f) {
		t.Fatal("ARP frame swapped")
	}
}
