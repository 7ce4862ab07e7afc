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
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// The DHCP client works on frames, below the stack: before it has an address the stack cannot
// send from 0.0.0.0 nor take broadcast replies, and a dozen lines of header building are simpler
// than convincing it to. Replies are taken out of DeliverFrames while the client waits.

// Lease is what a DHCP server granted.
type Lease struct {
	Address  netip.Prefix // address and subnet (option 1)
	Gateway  netip.Addr   // option 3, first router; invalid when none
	DNS      []netip.Addr // option 6
	Server   netip.Addr   // option 54
	Duration time.Duration
}

const (
	dhcpServerPort = 67
	dhcpClientPort = 68
	dhcpMagic      = 0x63825363

	dhcpDiscover = 1
	dhcpOffer    = 2
	dhcpRequest  = 3
	dhcpAck      = 5
	dhcpNak      = 6

	optSubnetMask = 1
	optRouter     = 3
	optDNS        = 6
	optRequested  = 50
	optLeaseTime  = 51
	optMsgType    = 53
	optServerID   = 54
	optParamList  = 55
	optClientID   = 61
	optEnd        = 255

	bootpFixed = 236 // op .. file, before the magic cookie
)

// RunDHCP obtains a lease (DISCOVER, OFFER, REQUEST, ACK, retrying with back-off until ctx
// ends), configures the interface with it and returns it.
func (s *Stack) RunDHCP(ctx context.Context) (Lease, error) {
	replies, xid, done := s.dhcpListen()
	defer done()
	for {
		offer, err := s.dhcpExchange(ctx, replies, xid, dhcpDiscover, netip.Addr{}, netip.Addr{}, dhcpOffer)
		if err != nil {
			return Lease{}, err
		}
		ack, err := s.dhcpExchange(ctx, replies, xid, dhcpRequest, offer.yiaddr, offer.server, dhcpAck)
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
	ack, err := s.dhcpExchange(ctx, replies, xid, dhcpRequest, lease.Address.Addr(), lease.Server, dhcpAck)
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
		if msgType == dhcpRequest && try == 4 {
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
				if m.msgType == dhcpNak && msgType == dhcpRequest {
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
	mac := []byte(s.link.mac)
	opts := []byte{optMsgType, 1, msgType, optClientID, 7, 1}
	opts = append(opts, mac...)
	if requested.IsValid() {
		opts = append(opts, optRequested, 4)
		opts = append(opts, requested.AsSlice()...)
	}
	if server.IsValid() {
		opts = append(opts, optServerID, 4)
		opts = append(opts, server.AsSlice()...)
	}
	opts = append(opts, optParamList, 4, optSubnetMask, optRouter, optDNS, optLeaseTime, optEnd)
	msg := make([]byte, max(bootpFixed+4+len(opts), 300)) // BOOTP's minimum message is 300 bytes
	msg[0], msg[1], msg[2] = 1, 1, 6                      // BOOTREQUEST, Ethernet, 6-byte address
	binary.BigEndian.PutUint32(msg[4:], xid)
	binary.BigEndian.PutUint16(msg[10:], 0x8000) // broadcast: we cannot take unicast yet
	copy(msg[28:], mac)
	binary.BigEndian.PutUint32(msg[bootpFixed:], dhcpMagic)
	copy(msg[bootpFixed+4:], opts)

	frame := make([]byte, header.EthernetMinimumSize+header.IPv4MinimumSize+header.UDPMinimumSize+len(msg))
	header.Ethernet(frame).Encode(&header.EthernetFields{SrcAddr: s.link.mac, DstAddr: header.EthernetBroadcastAddress, Type: header.IPv4ProtocolNumber})
	ip := header.IPv4(frame[header.EthernetMinimumSize:])
	src, dst := tcpip.AddrFrom4([4]byte{}), tcpip.AddrFrom4([4]byte{255, 255, 255, 255})
	ip.Encode(&header.IPv4Fields{TotalLength: uint16(len(ip)), TTL: 64, Protocol: uint8(header.UDPProtocolNumber), SrcAddr: src, DstAddr: dst})
	ip.SetChecksum(^ip.CalculateChecksum())
	udp := header.UDP(ip[header.IPv4MinimumSize:])
	udp.Encode(&header.UDPFields{SrcPort: dhcpClientPort, DstPort: dhcpServerPort, Length: uint16(len(udp))})
	copy(udp[header.UDPMinimumSize:], msg)
	sum := header.PseudoHeaderChecksum(header.UDPProtocolNumber, src, dst, uint16(len(udp)))
	udp.SetChecksum(^checksum.Checksum(udp, sum))
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
	ip := header.IPv4(b)
	if !ip.IsValid(len(b)) || ip.TransportProtocol() != header.UDPProtocolNumber || ip.FragmentOffset() != 0 {
		return false
	}
	udp := header.UDP(b[ip.HeaderLength():])
	return len(udp) >= header.UDPMinimumSize && udp.SourcePort() == dhcpServerPort && udp.DestinationPort() == dhcpClientPort
}

type dhcpMsg struct {
	msgType byte
	yiaddr  netip.Addr
	server  netip.Addr
	options map[byte][]byte
}

// parseDHCP reads a server's reply to us (matching xid and hardware address) from an IPv4 packet.
func parseDHCP(b []byte, xid uint32, mac tcpip.LinkAddress) (*dhcpMsg, bool) {
	ip := header.IPv4(b)
	start, end := int(ip.HeaderLength())+header.UDPMinimumSize, min(int(ip.TotalLength()), len(b))
	if start > end {
		return nil, false
	}
	msg := b[start:end]
	if len(msg) < bootpFixed+4 || msg[0] != 2 || binary.BigEndian.Uint32(msg[4:]) != xid ||
		string(msg[28:34]) != string(mac) || binary.BigEndian.Uint32(msg[bootpFixed:]) != dhcpMagic {
		return nil, false
	}
	m := &dhcpMsg{yiaddr: netip.AddrFrom4([4]byte(msg[16:20])), options: map[byte][]byte{}}
	for o := msg[bootpFixed+4:]; len(o) > 0; {
		code := o[0]
		if code == optEnd {
			break
		}
		if code == 0 { // pad
			o = o[1:]
			continue
		}
		if len(o) < 2 || len(o) < 2+int(o[1]) {
			return nil, false
		}
		m.options[code] = o[2 : 2+o[1]]
		o = o[2+o[1]:]
	}
	if t := m.options[optMsgType]; len(t) == 1 {
		m.msgType = t[0]
	}
	if id := m.options[optServerID]; len(id) == 4 {
		m.server = netip.AddrFrom4([4]byte(id))
	} else if siaddr := netip.AddrFrom4([4]byte(msg[20:24])); !siaddr.IsUnspecified() {
		m.server = siaddr
	}
	return m, m.msgType != 0
}

func (m *dhcpMsg) lease() (Lease, error) {
	mask := m.options[optSubnetMask]
	if len(mask) != 4 || !m.yiaddr.Is4() || m.yiaddr.IsUnspecified() {
		return Lease{}, errors.New("netstack: DHCP ACK without address or subnet mask")
	}
	bits := 0
	for _, b := range mask {
		for ; b&0x80 != 0; b <<= 1 {
			bits++
		}
	}
	l := Lease{Address: netip.PrefixFrom(m.yiaddr, bits), Server: m.server}
	if r := m.options[optRouter]; len(r) >= 4 {
		l.Gateway = netip.AddrFrom4([4]byte(r[:4]))
	}
	for d := m.options[optDNS]; len(d) >= 4; d = d[4:] {
		l.DNS = append(l.DNS, netip.AddrFrom4([4]byte(d[:4])))
	}
	if t := m.options[optLeaseTime]; len(t) == 4 {
		l.Duration = time.Duration(binary.BigEndian.Uint32(t)) * time.Second
	}
	return l, nil
}
