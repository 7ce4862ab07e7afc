package netstack

import (
	"context"
	"encoding/binary"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// dhcpServer is a test double for the router's DHCP server: it offers 10.0.1.2/24 with gateway
// 10.0.1.1, acknowledges a REQUEST for it, and NAKs the first REQUEST when nakFirst is set.
type dhcpServer struct {
	t        *testing.T
	guest    *Stack
	nakFirst bool
	lease    uint32 // seconds; 0 means leaseTime

	mu   sync.Mutex
	seen []byte // message types received, in order
}

var (
	routerMAC  = tcpip.LinkAddress([]byte{2, 2, 2, 2, 2, 0})
	routerIP   = netip.MustParseAddr("10.0.1.1")
	offeredIP  = netip.MustParseAddr("10.0.1.2")
	dnsIP      = netip.MustParseAddr("10.0.1.53")
	leaseTime  = uint32(3600)
	dhcpClient = net.HardwareAddr{2, 2, 2, 2, 2, 1}
)

func (d *dhcpServer) WriteFrames(frames []Frame) int {
	for _, f := range frames {
		d.handle(f.Data)
	}
	return len(frames)
}

func (d *dhcpServer) handle(frame []byte) {
	if len(frame) < header.EthernetMinimumSize || header.Ethernet(frame).Type() != header.IPv4ProtocolNumber {
		return
	}
	ip := header.IPv4(frame[header.EthernetMinimumSize:])
	if !ip.IsValid(len(ip)) || ip.TransportProtocol() != header.UDPProtocolNumber {
		return
	}
	udp := header.UDP(ip.Payload())
	if udp.DestinationPort() != 67 {
		return
	}
	msg := udp.Payload()
	var msgType byte
	var requested []byte
	for o := msg[240:]; len(o) >= 2 && o[0] != 255; o = o[2+o[1]:] {
		switch o[0] {
		case 53:
			msgType = o[2]
		case 50:
			requested = o[2:6]
		}
	}
	d.mu.Lock()
	d.seen = append(d.seen, msgType)
	nak := d.nakFirst && msgType == 3 && countOf(d.seen, 3) == 1
	d.mu.Unlock()
	var reply byte
	switch {
	case msgType == 1:
		reply = 2 // OFFER
	case msgType == 3 && nak:
		reply = 6
	case msgType == 3 && netip.AddrFrom4([4]byte(requested)) == offeredIP:
		reply = 5 // ACK
	default:
		d.t.Errorf("unexpected DHCP message type %d", msgType)
		return
	}
	d.guest.DeliverFrames([]Frame{{Data: d.reply(msg, reply)}})
}

func countOf(b []byte, v byte) (n int) {
	for _, x := range b {
		if x == v {
			n++
		}
	}
	return n
}

func (d *dhcpServer) reply(req []byte, msgType byte) []byte {
	msg := make([]byte, 300)
	msg[0], msg[1], msg[2] = 2, 1, 6
	copy(msg[4:8], req[4:8]) // xid
	copy(msg[10:12], req[10:12])
	if msgType != 6 {
		copy(msg[16:20], offeredIP.AsSlice())
	}
	copy(msg[28:44], req[28:44])
	binary.BigEndian.PutUint32(msg[236:], 0x63825363)
	opts := []byte{53, 1, msgType, 54, 4}
	opts = append(opts, routerIP.AsSlice()...)
	opts = append(opts, 1, 4, 255, 255, 255, 0, 3, 4)
	opts = append(opts, routerIP.AsSlice()...)
	opts = append(opts, 6, 4)
	opts = append(opts, dnsIP.AsSlice()...)
	opts = append(opts, 51, 4, 0, 0, 0, 0, 255)
	lt := leaseTime
	if d.lease != 0 {
		lt = d.lease
	}
	binary.BigEndian.PutUint32(opts[len(opts)-5:], lt)
	copy(msg[240:], opts)

	frame := make([]byte, 14+20+8+len(msg))
	header.Ethernet(frame).Encode(&header.EthernetFields{SrcAddr: routerMAC, DstAddr: header.EthernetBroadcastAddress, Type: header.IPv4ProtocolNumber})
	ip := header.IPv4(frame[14:])
	src, dst := tcpip.AddrFrom4(routerIP.As4()), tcpip.AddrFrom4([4]byte{255, 255, 255, 255})
	ip.Encode(&header.IPv4Fields{TotalLength: uint16(len(ip)), TTL: 64, Protocol: uint8(header.UDPProtocolNumber), SrcAddr: src, DstAddr: dst})
	ip.SetChecksum(^ip.CalculateChecksum())
	udp := header.UDP(ip[20:])
	udp.Encode(&header.UDPFields{SrcPort: 67, DstPort: 68, Length: uint16(len(udp))})
	copy(udp[8:], msg)
	udp.SetChecksum(^checksum.Checksum(udp, header.PseudoHeaderChecksum(header.UDPProtocolNumber, src, dst, uint16(len(udp)))))
	return frame
}

func TestDHCPClient(t *testing.T) {
	for _, nak := range []bool{false, true} {
		srv := &dhcpServer{t: t, nakFirst: nak}
		guest, err := New(Config{MAC: dhcpClient}, srv)
		if err != nil {
			t.Fatal(err)
		}
		srv.guest = guest
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		lease, err := guest.RunDHCP(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		want := netip.MustParsePrefix("10.0.1.2/24")
		if lease.Address != want || lease.Gateway != routerIP || lease.Server != routerIP ||
			len(lease.DNS) != 1 || lease.DNS[0] != dnsIP || lease.Duration != time.Hour {
			t.Fatalf("lease %+v", lease)
		}
		if guest.Address() != want {
			t.Fatalf("interface address %v, want %v", guest.Address(), want)
		}
		srv.mu.Lock()
		t.Logf("nak first %v: client sent message types %v", nak, srv.seen)
		srv.mu.Unlock()
		guest.Close()
	}
}

func TestDHCPGivesUpWithContext(t *testing.T) {
	guest, err := New(Config{MAC: dhcpClient}, OutboundFunc(func(f []Frame) int { return len(f) }))
	if err != nil {
		t.Fatal(err)
	}
	defer guest.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := guest.RunDHCP(ctx); err == nil {
		t.Fatal("RunDHCP without a server succeeded")
	}
}

func TestDHCPKeepLeaseRenews(t *testing.T) {
	srv := &dhcpServer{t: t, lease: 1}
	guest, err := New(Config{MAC: dhcpClient}, srv)
	if err != nil {
		t.Fatal(err)
	}
	defer guest.Close()
	srv.guest = guest
	ctx, cancel := context.WithTimeout(context.Background(), 1200*time.Millisecond)
	defer cancel()
	lease, err := guest.RunDHCP(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := guest.KeepLease(ctx, lease); err != context.DeadlineExceeded {
		t.Fatalf("KeepLease: %v", err)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	// A 1 s lease renews every 0.5 s: at least one renewal, and never a new DISCOVER.
	if len(srv.seen) < 3 || srv.seen[0] != 1 || countOf(srv.seen, 3) != len(srv.seen)-1 {
		t.Fatalf("client sent message types %v, want DISCOVER, REQUEST and renewals", srv.seen)
	}
}
