package netstack

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"

	"github.com/nicstack/nicstack/netdev/header"
)

// The DHCP client works on frames, below the stack: before it has an address the stack cannot
// send from 0.0.0.0 nor take broadcast replies, and a dozen lines of header building are simpler
// than convincing it to. Replies are taken out of DeliverFrames while the client waits. The
// frames are netdev/header's codec, as everywhere in nicstack; gVisor's stays inside the stack.

// Lease is what a DHCP server granted.
type Lease struct {
	Address  netip.Prefix // address and subnet (option 1)
	Gateway  netip.Addr   // option 3, first router; invalid when none
	DNS      []netip.Addr // option 6
	Server   netip.Addr   // option 54
	Duration time.Duration
}

// RunDHCP obtains a lease (DISCOVER, OFFER, REQUEST, ACK, retrying with back-off until ctx
// ends), configures the interface with it and returns it.
func (s *Stack) RunDHCP(ctx context.Context) (Lease, error) {
	replies, xid, done := s.dhcpListen()
	defer done()
	for {
		offer, err := s.dhcpExchange(ctx, replies, xid, header.DHCPDiscover, netip.Addr{}, netip.Addr{}, header.DHCPOffer)
		if err != nil {
			return Lease{}, err
		}
		ack, err := s.dhcpExchange(ctx, replies, xid, header.DHCPRequest, netip.AddrFrom4(offer.YIAddr()), offer.server, header.DHCPAck)
		if errors.Is(err, errNak) {
			continue // the offer went stale; start over
		}
		if err != nil {
			return Lease{}, err
		}
		return s.apply(ack)
	}
}

// KeepLease renews lease at half its duration until ctx ends. The REQUEST is broadcast (RFC
// 2131's REBINDING form, as the client sits below its own stack); when the server refuses or
// the lease runs out, it starts over with RunDHCP. It returns only with ctx's error or when
// getting a new lease fails.
func (s *Stack) KeepLease(ctx context.Context, lease Lease) error {
	for {
		if lease.Duration <= 0 { // no lease time given: it does not expire
			<-ctx.Done()
			return ctx.Err()
		}
		t := time.NewTimer(lease.Duration / 2)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(ctx, lease.Duration/2)
		next, err := s.renew(rctx, lease)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if next, err = s.RunDHCP(ctx); err != nil {
				return err
			}
		}
		lease = next
	}
}

func (s *Stack) renew(ctx context.Context, lease Lease) (Lease, error) {
	replies, xid, done := s.dhcpListen()
	defer done()
	ack, err := s.dhcpExchange(ctx, replies, xid, header.DHCPRequest, lease.Address.Addr(), lease.Server, header.DHCPAck)
	if err != nil {
		return Lease{}, err
	}
	return s.apply(ack)
}

// dhcpListen starts taking DHCP replies out of the inbound frames, with a fresh transaction id.
func (s *Stack) dhcpListen() (<-chan []byte, uint32, func()) {
	replies := make(chan []byte, 16)
	s.link.dhcp.Store(&replies)
	var xid [4]byte
	_, _ = rand.Read(xid[:]) // crypto/rand does not fail on Linux
	return replies, binary.BigEndian.Uint32(xid[:]), func() { s.link.dhcp.Store(nil) }
}

// apply configures the interface with an ACK's lease.
func (s *Stack) apply(ack *dhcpMsg) (Lease, error) {
	lease, err := ack.lease()
	if err != nil {
		return Lease{}, err
	}
	if err := s.SetAddress(lease.Address, lease.Gateway); err != nil {
		return Lease{}, err
	}
	return lease, nil
}

var errNak = errors.New("netstack: DHCP server sent NAK")

// dhcpExchange sends a message and waits for the expected reply type, resending with
// exponential back-off (1 s to 8 s). A REQUEST gives up after four tries so DISCOVER restarts.
func (s *Stack) dhcpExchange(ctx context.Context, replies <-chan []byte, xid uint32, msgType byte, requested, server netip.Addr, want byte) (*dhcpMsg, error) {
	wait := time.Second
	for try := 0; ; try++ {
		if msgType == header.DHCPRequest && try == 4 {
			return nil, errNak
		}
		s.link.writeRaw(s.dhcpFrame(xid, msgType, requested, server))
		timer := time.NewTimer(wait)
		for waiting := true; waiting; {
			select {
			case <-ctx.Done():
				timer.Stop()
				return nil, fmt.Errorf("netstack: DHCP: %w", ctx.Err())
			case <-timer.C:
				waiting = false
			case pkt := <-replies:
				m, ok := parseDHCP(pkt, xid, s.link.mac)
				if !ok {
					continue
				}
				if m.msgType == header.DHCPNak && msgType == header.DHCPRequest {
					timer.Stop()
					return nil, errNak
				}
				if m.msgType == want {
					timer.Stop()
					return m, nil
				}
			}
		}
		wait = min(2*wait, 8*time.Second)
	}
}

// dhcpFrame builds a broadcast DHCP message from 0.0.0.0:68 to 255.255.255.255:67.
func (s *Stack) dhcpFrame(xid uint32, msgType byte, requested, server netip.Addr) []byte {
	var mac header.MAC
	copy(mac[:], s.link.mac)
	// broadcast: we cannot take unicast yet
	m := header.NewDHCPMessage(1, xid, [4]byte{}, [4]byte{}, [4]byte{}, mac, true)
	m.Add(header.OptMessageType, msgType)
	m.Add(header.OptClientID, append([]byte{1}, mac[:]...)...)
	if requested.IsValid() {
		m.AddIPv4s(header.OptRequestedIP, requested.As4())
	}
	if server.IsValid() {
		m.AddIPv4s(header.OptServerID, server.As4())
	}
	m.Add(header.OptParamList, header.OptSubnetMask, header.OptRouter, header.OptDNSServer, header.OptLeaseTime)
	msg := m.End()

	frame := make([]byte, header.EthLen+header.IPv4Len+header.UDPLen+len(msg))
	e := header.Eth(frame)
	e.SetDst(header.Broadcast)
	e.SetSrc(mac)
	e.SetType(header.EtherTypeIPv4)
	src, dst := [4]byte{}, [4]byte{255, 255, 255, 255}
	header.PutIPv4(e.Payload(), len(e.Payload()), header.ProtoUDP, src, dst)
	udp := e.Payload()[header.IPv4Len:]
	copy(udp[header.UDPLen:], msg)
	header.PutUDP(udp, src, dst, header.DHCPClientPort, header.DHCPServerPort)
	return frame
}

// writeRaw sends one frame outside the stack (the DHCP client's).
func (l *link) writeRaw(frame []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.out.WriteFrames([]Frame{{Data: frame}}) == 1 {
		l.stats.TxFrames.Add(1)
		l.stats.TxBytes.Add(uint64(len(frame)))
	} else {
		l.stats.TxDropped.Add(1)
	}
}

// isDHCPReply reports whether an IPv4 packet is UDP from port 67 to port 68.
func isDHCPReply(b []byte) bool {
	_, ok := dhcpPayload(b)
	return ok
}

// dhcpPayload is the UDP payload of an unfragmented IPv4 packet from port 67 to port 68.
func dhcpPayload(b []byte) ([]byte, bool) {
	ip, ok := header.NewIPv4(b)
	if !ok || ip.Protocol() != header.ProtoUDP || ip.Fragmented() {
		return nil, false
	}
	udp, ok := header.L4Header(ip)
	if !ok || header.Ports(udp).Src() != header.DHCPServerPort || header.Ports(udp).Dst() != header.DHCPClientPort {
		return nil, false
	}
	return udp[header.UDPLen:], true
}

// dhcpMsg is a server's reply to us.
type dhcpMsg struct {
	msgType byte
	server  netip.Addr
	header.DHCP
}

// parseDHCP reads a server's reply to us (matching xid and hardware address) from an IPv4 packet.
func parseDHCP(b []byte, xid uint32, mac tcpip.LinkAddress) (*dhcpMsg, bool) {
	payload, ok := dhcpPayload(b)
	if !ok {
		return nil, false
	}
	d, ok := header.NewDHCP(payload)
	if !ok || d.Op() != 2 || d.XID() != xid {
		return nil, false
	}
	if chaddr := d.ClientMAC(); string(chaddr[:]) != string(mac) {
		return nil, false
	}
	m := &dhcpMsg{msgType: d.MessageType(), DHCP: d}
	if id, ok := d.OptionIPv4(header.OptServerID); ok {
		m.server = netip.AddrFrom4(id)
	} else if siaddr := netip.AddrFrom4(d.SIAddr()); !siaddr.IsUnspecified() {
		m.server = siaddr
	}
	return m, m.msgType != 0
}

func (m *dhcpMsg) lease() (Lease, error) {
	mask, ok := m.Option(header.OptSubnetMask)
	yiaddr := netip.AddrFrom4(m.YIAddr())
	if !ok || len(mask) != 4 || yiaddr.IsUnspecified() {
		return Lease{}, errors.New("netstack: DHCP ACK without address or subnet mask")
	}
	bits := 0
	for _, b := range mask {
		for ; b&0x80 != 0; b <<= 1 {
			bits++
		}
	}
	l := Lease{Address: netip.PrefixFrom(yiaddr, bits), Server: m.server}
	if r, ok := m.OptionIPv4(header.OptRouter); ok {
		l.Gateway = netip.AddrFrom4(r)
	}
	for _, d := range m.OptionIPv4s(header.OptDNSServer) {
		l.DNS = append(l.DNS, netip.AddrFrom4(d))
	}
	if t, ok := m.OptionUint32(header.OptLeaseTime); ok {
		l.Duration = time.Duration(t) * time.Second
	}
	return l, nil
}
