package netstack

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	gheader "gvisor.dev/gvisor/pkg/tcpip/header"

	"github.com/nicstack/nicstack/netdev/header"
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
	if len(frame) < gheader.EthernetMinimumSize || gheader.Ethernet(frame).Type() != gheader.IPv4ProtocolNumber {
		return
	}
	ip := gheader.IPv4(frame[gheader.EthernetMinimumSize:])
	if !ip.IsValid(len(ip)) || ip.TransportProtocol() != gheader.UDPProtocolNumber {
		return
	}
	udp := gheader.UDP(ip.Payload())
	if udp.DestinationPort() != 67 {
		return
	}
	if !ipv4ChecksumsValid(ip) { // gVisor's checks of the client's netdev/header frames
		d.t.Errorf("DHCP frame with a bad IPv4 or UDP checksum: % x", frame)
	}
	if dst := gheader.Ethernet(frame).DestinationAddress(); dst != gheader.EthernetBroadcastAddress {
		d.t.Errorf("DHCP frame to %v, want broadcast", dst)
	}
	msg, ok := header.NewDHCP(udp.Payload())
	if !ok {
		d.t.Errorf("not a DHCP message: % x", udp.Payload())
		return
	}
	msgType := msg.MessageType()
	requested, _ := msg.OptionIPv4(header.OptRequestedIP)
	d.mu.Lock()
	d.seen = append(d.seen, msgType)
	nak := d.nakFirst && msgType == header.DHCPRequest && countOf(d.seen, header.DHCPRequest) == 1
	d.mu.Unlock()
	var reply byte
	switch {
	case msgType == header.DHCPDiscover:
		reply = header.DHCPOffer
	case msgType == header.DHCPRequest && nak:
		reply = header.DHCPNak
	case msgType == header.DHCPRequest && netip.AddrFrom4(requested) == offeredIP:
		reply = header.DHCPAck
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

func (d *dhcpServer) reply(req header.DHCP, msgType byte) []byte {
	var yiaddr [4]byte
	if msgType != header.DHCPNak {
		yiaddr = offeredIP.As4()
	}
	m := header.NewDHCPMessage(2, req.XID(), [4]byte{}, yiaddr, [4]byte{}, req.ClientMAC(), true)
	m.Add(header.OptMessageType, msgType)
	m.AddIPv4s(header.OptServerID, routerIP.As4())
	m.Add(header.OptSubnetMask, 255, 255, 255, 0)
	m.AddIPv4s(header.OptRouter, routerIP.As4())
	m.AddIPv4s(header.OptDNSServer, dnsIP.As4())
	lt := leaseTime
	if d.lease != 0 {
		lt = d.lease
	}
	m.AddUint32(header.OptLeaseTime, lt)
	msg := m.End()

	frame := make([]byte, 14+20+8+len(msg))
	gheader.Ethernet(frame).Encode(&gheader.EthernetFields{SrcAddr: routerMAC, DstAddr: gheader.EthernetBroadcastAddress, Type: gheader.IPv4ProtocolNumber})
	ip := gheader.IPv4(frame[14:])
	src, dst := tcpip.AddrFrom4(routerIP.As4()), tcpip.AddrFrom4([4]byte{255, 255, 255, 255})
	ip.Encode(&gheader.IPv4Fields{TotalLength: uint16(len(ip)), TTL: 64, Protocol: uint8(gheader.UDPProtocolNumber), SrcAddr: src, DstAddr: dst})
	ip.SetChecksum(^ip.CalculateChecksum())
	udp := gheader.UDP(ip[20:])
	udp.Encode(&gheader.UDPFields{SrcPort: 67, DstPort: 68, Length: uint16(len(udp))})
	copy(udp[8:], msg)
	udp.SetChecksum(^checksum.Checksum(udp, gheader.PseudoHeaderChecksum(gheader.UDPProtocolNumber, src, dst, uint16(len(udp)))))
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
