package netstack

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/network/arp"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv6"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/icmp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"

	"github.com/nicstack/nicstack/netdev"
)

const nicID tcpip.NICID = 1

// Config sets up a Stack.
type Config struct {
	MAC net.HardwareAddr // the interface's Ethernet address (required)
	MTU int              // IP MTU; 0 means 1500
	// Offload lets TCP send TSO super-frames (up to 64 KiB) with partial checksums, described by
	// Frame.Offload. Turn it on only when whatever takes the frames completes them (a virtio-like
	// session); off, every frame is complete and at most MTU+14 bytes. Inbound, frames with
	// offload metadata are accepted either way.
	Offload bool
	// Address is a static address such as 198.18.0.2/24; the zero value leaves the stack
	// without one until SetAddress or RunDHCP.
	Address netip.Prefix
	Gateway netip.Addr // optional default gateway for a static address
	// Address6 is a static IPv6 address such as 2001:db8::2/64, beside the link-local one and
	// whatever SLAAC makes of router advertisements; Gateway6 an optional default router for it.
	Address6 netip.Prefix
	Gateway6 netip.Addr
	// OnAddress, when set, hears of each IPv6 address that came into use or went out of it;
	// it is called from the stack's own goroutine, one event at a time.
	OnAddress func(AddressEvent)
}

// Stack is one dual-stack host: an interface fed with frames, ARP, NDP, ICMP and ICMPv6 echo,
// TCP and UDP over IPv4 and IPv6.
type Stack struct {
	s    *stack.Stack
	link *link
	out  *sendQueue

	ndp       *ndpEvents
	onAddress func(AddressEvent)
	stop      chan struct{}
	stopped   sync.WaitGroup
	closing   sync.Once

	mu        sync.Mutex
	addr      netip.Prefix
	gateway   netip.Addr
	addr6     netip.Prefix
	gateway6  netip.Addr
	ndpRoutes []tcpip.Route // on-link prefixes and default routers from router advertisements
	global6   bool          // an IPv6 address beyond link-local is in use (ndpEvents.global)
}

// outQueueLen bounds the frames waiting for the Outbound, like a NIC's TX ring.
const outQueueLen = 1024

// New builds a stack that sends through out.
func New(cfg Config, out Outbound) (*Stack, error) {
	if len(cfg.MAC) != 6 {
		return nil, errors.New("netstack: a 6-byte MAC address is required")
	}
	if cfg.MTU == 0 {
		cfg.MTU = 1500
	}
	if cfg.MTU < 576 || cfg.MTU > 65535-14 {
		return nil, fmt.Errorf("netstack: MTU %d out of range", cfg.MTU)
	}
	l := &link{mtu: uint32(cfg.MTU), mac: tcpip.LinkAddress(cfg.MAC), offload: cfg.Offload, out: out}
	l.gro.Init(true)
	ndp := newNDPEvents()
	s := stack.New(stack.Options{
		NetworkProtocols:   []stack.NetworkProtocolFactory{ipv4.NewProtocol, arp.NewProtocol, ipv6.NewProtocolWithOptions(ipv6Options(ndp))},
		TransportProtocols: []stack.TransportProtocolFactory{tcp.NewProtocol, udp.NewProtocol, icmp.NewProtocol4, icmp.NewProtocol6},
	})
	if err := tuneTCP(s); err != nil {
		s.Close()
		return nil, err
	}
	q := newSendQueue(l, outQueueLen, nil)
	if err := s.CreateNICWithOptions(nicID, l, stack.NICOptions{QDisc: q}); err != nil {
		s.Close()
		return nil, fmt.Errorf("netstack: creating the interface: %s", err)
	}
	st := &Stack{s: s, link: l, out: q, ndp: ndp, onAddress: cfg.OnAddress, stop: make(chan struct{})}
	st.stopped.Add(1)
	go func() {
		defer st.stopped.Done()
		st.applyNDP(st.stop)
	}()
	st.mu.Lock()
	st.setRoutes()
	st.mu.Unlock()
	if cfg.Address.IsValid() {
		if err := st.SetAddress(cfg.Address, cfg.Gateway); err != nil {
			st.Close()
			return nil, err
		}
	}
	if cfg.Address6.IsValid() {
		if err := st.SetAddress6(cfg.Address6, cfg.Gateway6); err != nil {
			st.Close()
			return nil, err
		}
	}
	return st, nil
}

// tuneTCP sets what a Linux host would have: SACK, CUBIC, and Linux's buffer sizes (tcp_rmem
// 4K/128K/6M, tcp_wmem 4K/16K/4M), small at first and auto-tuned up to a few MiB, enough for a
// multi-Gbit/s stream at sub-millisecond round trips: the receive buffer by what the reader
// took in a round trip (moderation), the send buffer to twice the congestion window (gVisor's
// computeTCPSendBufferSize). A fixed 256 KiB send buffer lost throughput with every
// millisecond an ITR interval added to the round trip (392 Mbit/s at ITR 5580, 731 with 4
// MiB); grown, it holds (883-895 at 5580, as with 4 MiB). A guest then holds what its stream
// needs, not 4 MiB each way from the start: the buffers are Go heap, most of an embedded
// guest's memory (issue 33's PSS per guest, docs/performance.md "Memory per guest").
// RACK is off: its tail loss probe fires after 2 x SRTT with no floor here (Linux adds at
// least two jiffies), so with sub-millisecond round trips and a scheduler's jitter it
// retransmitted hundreds of segments a test that were never lost (every frame counted
// through) and the seed scenario fell from ~935 to ~800 Mbit/s. Loss recovery is then SACK's
// on duplicate ACKs, and the RTO.
func tuneTCP(s *stack.Stack) error {
	opts := []tcpip.SettableTransportProtocolOption{
		new(tcpip.TCPSACKEnabled),
		&tcpip.TCPReceiveBufferSizeRangeOption{Min: 4 << 10, Default: 128 << 10, Max: 6 << 20},
		&tcpip.TCPSendBufferSizeRangeOption{Min: 4 << 10, Default: 16 << 10, Max: 4 << 20},
		new(tcpip.TCPModerateReceiveBufferOption),
		new(tcpip.TCPRecovery),
	}
	*opts[0].(*tcpip.TCPSACKEnabled) = true
	*opts[3].(*tcpip.TCPModerateReceiveBufferOption) = true
	*opts[4].(*tcpip.TCPRecovery) = 0
	for _, o := range opts {
		if err := s.SetTransportProtocolOption(tcp.ProtocolNumber, o); err != nil {
			return fmt.Errorf("netstack: TCP option %T: %s", o, err)
		}
	}
	cc := tcpip.CongestionControlOption("cubic")
	if err := s.SetTransportProtocolOption(tcp.ProtocolNumber, &cc); err != nil {
		return fmt.Errorf("netstack: congestion control: %s", err)
	}
	return nil
}

// DeliverFrames hands a batch of received frames to the stack; TCP and ACK processing happen in
// gVisor's own goroutines, so it returns quickly. The stack copies what it keeps, so the frames'
// memory may be reused (or acknowledged to a packet stream) once it returns. Concurrent calls
// take turns.
func (s *Stack) DeliverFrames(frames []Frame) { s.link.deliverBatch(frames) }

// Stats returns the link's frame counters.
func (s *Stack) Stats() *Stats { return &s.link.stats }

// TCPStats says how often TCP sent segments again and why: which recovery started it, and
// how often the receiver's D-SACKs or timestamps then showed the segments had arrived after all.
type TCPStats struct {
	Retransmits  uint64 // segments sent again, for any reason
	Timeouts     uint64 // retransmission timer expiries (RTO)
	FastRecovery uint64 // recoveries on three duplicate ACKs without SACK (NewReno)
	SACKRecovery uint64 // recoveries on SACK blocks (RFC 6675)
	// FastRetransmits: the first segment resent on entering a recovery, SlowStartRetransmits
	// the ones resent after an RTO.
	FastRetransmits, SlowStartRetransmits uint64
	DSACKSegments                         uint64 // segments a D-SACK reported received twice
	SpuriousRecovery, SpuriousRTO         uint64 // recoveries (of them, RTOs) found needless
	// SendErrors: segments the interface's queue refused (closed, or its link took nothing
	// for queueWait); gVisor drops the rest of a 64 KiB segment with each.
	SendErrors uint64
}

// TCPStats reads the stack's TCP counters.
func (s *Stack) TCPStats() TCPStats {
	t := s.s.Stats().TCP
	return TCPStats{
		Retransmits: t.Retransmits.Value(), Timeouts: t.Timeouts.Value(),
		FastRecovery: t.FastRecovery.Value(), SACKRecovery: t.SACKRecovery.Value(),
		FastRetransmits: t.FastRetransmit.Value(), SlowStartRetransmits: t.SlowStartRetransmits.Value(),
		DSACKSegments:    t.SegmentsAckedWithDSACK.Value(),
		SpuriousRecovery: t.SpuriousRecovery.Value(), SpuriousRTO: t.SpuriousRTORecovery.Value(),
		SendErrors: t.SegmentSendErrors.Value(),
	}
}

// MAC returns the interface's Ethernet address.
func (s *Stack) MAC() net.HardwareAddr { return net.HardwareAddr(s.link.mac) }

// SetAddress gives the interface its one IPv4 address, replacing any previous one, with a route
// to its subnet and, when gateway is valid, a default route. IPv6 keeps its addresses and routes.
func (s *Stack) SetAddress(p netip.Prefix, gateway netip.Addr) error {
	if !p.Addr().Is4() {
		return fmt.Errorf("netstack: %v is not an IPv4 prefix", p)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.addr.IsValid() {
		_ = s.s.RemoveAddress(nicID, tcpip.AddrFrom4(s.addr.Addr().As4()))
	}
	pa := tcpip.ProtocolAddress{
		Protocol:          ipv4.ProtocolNumber,
		AddressWithPrefix: tcpip.AddressWithPrefix{Address: tcpip.AddrFrom4(p.Addr().As4()), PrefixLen: p.Bits()},
	}
	if err := s.s.AddProtocolAddress(nicID, pa, stack.AddressProperties{}); err != nil {
		return fmt.Errorf("netstack: adding %v: %s", p, err)
	}
	s.addr, s.gateway = p, gateway
	s.setRoutes()
	return nil
}

// setRoutes sets the route table from the addresses and what NDP found, the prefixes before
// the default routes (gVisor takes the first route that matches), IPv6's default routes only
// once a global address is in use. s.mu is held.
func (s *Stack) setRoutes() {
	var prefixes, defaults, defaults6 []tcpip.Route
	if s.addr.IsValid() {
		a := tcpip.AddressWithPrefix{Address: tcpip.AddrFrom4(s.addr.Addr().As4()), PrefixLen: s.addr.Bits()}
		prefixes = append(prefixes, tcpip.Route{Destination: a.Subnet(), NIC: nicID})
		if s.gateway.IsValid() {
			defaults = append(defaults, tcpip.Route{Destination: header.IPv4EmptySubnet, Gateway: tcpip.AddrFrom4(s.gateway.As4()), NIC: nicID})
		}
	}
	if s.addr6.IsValid() {
		a := tcpip.AddressWithPrefix{Address: tcpip.AddrFrom16(s.addr6.Addr().As16()), PrefixLen: s.addr6.Bits()}
		prefixes = append(prefixes, tcpip.Route{Destination: a.Subnet(), NIC: nicID})
		if s.gateway6.IsValid() {
			defaults6 = append(defaults6, tcpip.Route{Destination: header.IPv6EmptySubnet, Gateway: tcpip.AddrFrom16(s.gateway6.As16()), NIC: nicID})
		}
	}
	prefixes = append(prefixes, linkLocal)
	for _, r := range s.ndpRoutes {
		if r.Gateway.Len() == 0 {
			prefixes = append(prefixes, r)
		} else {
			defaults6 = append(defaults6, r)
		}
	}
	if s.global6 {
		defaults = append(defaults, defaults6...)
	}
	s.s.SetRouteTable(append(prefixes, defaults...))
}

// Address returns the interface's address (zero before one is set).
func (s *Stack) Address() netip.Prefix {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Queue is what waits in the interface's transmit queue for the Outbound (sendQueue.Depth):
// the stack's queue toward the link. Inbound frames wait nowhere here: DeliverFrames hands
// them to the stack at once. The sockets' own buffers are not counted: gVisor's TCP answers
// no SendQueueSizeOption, and ReceiveQueueSizeOption takes the endpoint's lock, which the
// data path holds across a read or write.
func (s *Stack) Queue() netdev.Depth { return s.out.Depth() }

// Close tears the stack down; connections fail from then on.
func (s *Stack) Close() {
	s.closing.Do(func() {
		close(s.stop)
		s.stopped.Wait()
		s.s.Close()
		s.s.Wait()
	})
}
