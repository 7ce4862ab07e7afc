package netstack

import (
	"sync"
	"sync/atomic"

	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/stack/gro"

	"github.com/nicstack/nicstack/netdev"
	wire "github.com/nicstack/nicstack/netdev/header"
)

// gsoMaxSize keeps a TSO super-frame, Ethernet header included, within 64 KiB.
const gsoMaxSize = 1<<16 - header.EthernetMinimumSize

// link is the gVisor link endpoint between the stack and the frame batches.
type link struct {
	mtu     uint32
	mac     tcpip.LinkAddress
	offload bool
	out     Outbound

	dispatcher atomic.Pointer[dispatcherBox]
	groMu      sync.Mutex // DeliverFrames callers take turns: GRO state is per batch
	gro        gro.GRO
	dhcp       atomic.Pointer[chan []byte] // set while a DHCP client waits for replies

	mu      sync.Mutex // serializes WritePackets: one scratch area, one Outbound caller
	scratch []byte
	frames  []Frame

	stats Stats
}

type dispatcherBox struct{ d stack.NetworkDispatcher }

// Stats counts frames through the link; all fields are read with atomic loads.
type Stats struct {
	RxFrames, RxBytes, RxDropped, RxBadChecksum atomic.Uint64
	TxFrames, TxBytes, TxDropped                atomic.Uint64
}

var (
	_ stack.LinkEndpoint = (*link)(nil)
	_ stack.GSOEndpoint  = (*link)(nil)
)

func (l *link) MTU() uint32                    { return l.mtu }
func (l *link) SetMTU(mtu uint32)              { l.mtu = mtu }
func (l *link) MaxHeaderLength() uint16        { return header.EthernetMinimumSize }
func (l *link) LinkAddress() tcpip.LinkAddress { return l.mac }
func (l *link) SetLinkAddress(a tcpip.LinkAddress) {
	l.mac = a
}
func (l *link) Wait()                                   {}
func (l *link) Close()                                  {}
func (l *link) SetOnCloseAction(func())                 {}
func (l *link) ARPHardwareType() header.ARPHardwareType { return header.ARPHardwareEther }

// Capabilities: we check inbound checksums ourselves (DeliverFrames), because whether a frame
// needs checking is per frame (its Offload flags), while gVisor only knows it per link.
func (l *link) Capabilities() stack.LinkEndpointCapabilities {
	return stack.CapabilityResolutionRequired | stack.CapabilityRXChecksumOffload
}

func (l *link) GSOMaxSize() uint32 { return gsoMaxSize }

// SupportedGSO: with offloads, TCP hands us super-frames to pass on whole; without, gVisor still
// builds 64 KiB segments and cuts them into MTU-sized frames just before the link (its software
// GSO), which takes about a third less CPU per byte than segmenting inside TCP.
func (l *link) SupportedGSO() stack.SupportedGSO {
	if l.offload {
		return stack.HostGSOSupported
	}
	return stack.GVisorGSOSupported
}

func (l *link) Attach(d stack.NetworkDispatcher) {
	if d == nil {
		l.dispatcher.Store(nil)
		return
	}
	l.dispatcher.Store(&dispatcherBox{d})
}

func (l *link) IsAttached() bool { return l.dispatcher.Load() != nil }

func (l *link) AddHeader(pkt *stack.PacketBuffer) {
	eth := header.Ethernet(pkt.LinkHeader().Push(header.EthernetMinimumSize))
	src := pkt.EgressRoute.LocalLinkAddress
	if src == "" {
		src = l.mac
	}
	eth.Encode(&header.EthernetFields{SrcAddr: src, DstAddr: pkt.EgressRoute.RemoteLinkAddress, Type: pkt.NetworkProtocolNumber})
}

func (l *link) ParseHeader(pkt *stack.PacketBuffer) bool {
	hdr, ok := pkt.LinkHeader().Consume(header.EthernetMinimumSize)
	if !ok {
		return false
	}
	pkt.NetworkProtocolNumber = header.Ethernet(hdr).Type()
	return true
}

// WritePackets copies a batch into one reused scratch area and hands it to the Outbound in one
// call: no allocation per frame once the scratch area has grown to the largest batch.
func (l *link) WritePackets(pkts stack.PacketBufferList) (int, tcpip.Error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.scratch = l.scratch[:0]
	l.frames = l.frames[:0]
	for _, pkt := range pkts.AsSlice() {
		off := len(l.scratch)
		views, skip := pkt.AsViewList()
		for v := views.Front(); v != nil; v = v.Next() {
			b := v.AsSlice()
			if skip >= len(b) {
				skip -= len(b)
				continue
			}
			l.scratch = append(l.scratch, b[skip:]...)
			skip = 0
		}
		l.frames = append(l.frames, Frame{Data: l.scratch[off:len(l.scratch):len(l.scratch)], Offload: offloadOf(pkt)})
	}
	// The scratch area may have moved while growing; point every frame at its final copy.
	off := 0
	for i := range l.frames {
		n := len(l.frames[i].Data)
		l.frames[i].Data = l.scratch[off : off+n : off+n]
		off += n
	}
	n := l.out.WriteFrames(l.frames)
	for _, f := range l.frames[:n] {
		l.stats.TxBytes.Add(uint64(len(f.Data)))
	}
	l.stats.TxFrames.Add(uint64(n))
	l.stats.TxDropped.Add(uint64(len(l.frames) - n))
	return pkts.Len(), nil
}

// offloadOf describes a gVisor GSO packet in virtio-net terms (what fdbased writes as a vnet
// header): a partial checksum to complete and, when larger than one segment, the TSO size.
func offloadOf(pkt *stack.PacketBuffer) netdev.Offload {
	g := pkt.GSOOptions
	if g.Type == stack.GSONone || !g.NeedsCsum {
		return netdev.Offload{}
	}
	o := netdev.Offload{
		Flags:      netdev.OffloadNeedsCsum,
		HdrLen:     uint16(pkt.HeaderSize()),
		CsumStart:  header.EthernetMinimumSize + g.L3HdrLen,
		CsumOffset: g.CsumOffset,
	}
	if pkt.Data().Size() > int(g.MSS) {
		o.GSOSize = g.MSS
		switch g.Type {
		case stack.GSOTCPv4:
			o.GSOType = netdev.GSOTCPv4
		case stack.GSOTCPv6:
			o.GSOType = netdev.GSOTCPv6
		}
	}
	return o
}

// deliverBatch hands received frames to the stack (or to a waiting DHCP client). TCP segments
// of one flow within the batch are coalesced (GRO) before TCP sees them, so a burst of 1500-byte
// frames costs TCP about what one super-frame does.
func (l *link) deliverBatch(frames []Frame) {
	l.groMu.Lock()
	defer l.groMu.Unlock()
	box := l.dispatcher.Load()
	if box == nil {
		l.stats.RxDropped.Add(uint64(len(frames)))
		return
	}
	l.gro.Dispatcher = box.d
	for _, f := range frames {
		l.deliver(f)
	}
	l.gro.Flush()
}

func (l *link) deliver(f Frame) {
	l.stats.RxFrames.Add(1)
	l.stats.RxBytes.Add(uint64(len(f.Data)))
	if len(f.Data) < header.EthernetMinimumSize {
		l.stats.RxDropped.Add(1)
		return
	}
	eth := header.Ethernet(f.Data)
	dst := eth.DestinationAddress()
	if dst != l.mac && dst[0]&1 == 0 { // neither ours nor group-addressed
		l.stats.RxDropped.Add(1)
		return
	}
	if eth.Type() == header.IPv4ProtocolNumber {
		if f.Offload.Flags&(netdev.OffloadNeedsCsum|netdev.OffloadDataValid) == 0 && !ipv4ChecksumsValid(f.Data[header.EthernetMinimumSize:]) {
			l.stats.RxBadChecksum.Add(1)
			return
		}
		if ch := l.dhcp.Load(); ch != nil && isDHCPReply(f.Data[header.EthernetMinimumSize:]) {
			select {
			case *ch <- append([]byte(nil), f.Data[header.EthernetMinimumSize:]...):
			default:
			}
			return
		}
	}
	if eth.Type() == header.IPv6ProtocolNumber && f.Offload.Flags&(netdev.OffloadNeedsCsum|netdev.OffloadDataValid) == 0 &&
		!ipv6ChecksumsValid(f.Data[header.EthernetMinimumSize:]) {
		l.stats.RxBadChecksum.Add(1)
		return
	}
	pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(f.Data)})
	defer pkt.DecRef()
	if !l.ParseHeader(pkt) {
		l.stats.RxDropped.Add(1)
		return
	}
	pkt.RXChecksumValidated = true // checked above, or vouched for by the sender's offload flags
	l.gro.Enqueue(pkt)
}

// ipv6ChecksumsValid checks the TCP, UDP or ICMPv6 checksum of an unfragmented IPv6 packet,
// after its extension headers: the link says it checked them all (CapabilityRXChecksumOffload),
// so gVisor checks none. A malformed packet or chain, or a fragment, is left to the stack.
func ipv6ChecksumsValid(b []byte) bool {
	ip, ok := wire.NewIPv6(b)
	if !ok {
		return true
	}
	c := wire.WalkIPv6(ip)
	if c.Drop != wire.ChainOK || c.Frag.Is {
		return true
	}
	payload := ip[c.Offset:]
	switch c.Proto {
	case wire.ProtoTCP, wire.ProtoICMPv6:
	case wire.ProtoUDP:
		if len(payload) >= header.UDPMinimumSize && header.UDP(payload).Checksum() == 0 {
			return false // a UDP checksum is mandatory over IPv6 (RFC 8200 §8.1)
		}
	default:
		return true
	}
	return wire.Checksum(payload, wire.PseudoSum6(ip.Src(), ip.Dst(), c.Proto, len(payload))) == 0
}

// ipv4ChecksumsValid checks the IPv4 header checksum and, for unfragmented TCP and UDP, the
// transport checksum: the work a NIC with RX checksum offload does.
func ipv4ChecksumsValid(b []byte) bool {
	ip := header.IPv4(b)
	if !ip.IsValid(len(b)) {
		return true // malformed: let the stack count and drop it
	}
	if !ip.IsChecksumValid() {
		return false
	}
	if ip.More() || ip.FragmentOffset() != 0 {
		return true
	}
	payload := b[ip.HeaderLength():ip.TotalLength()]
	proto := ip.TransportProtocol()
	switch proto {
	case header.TCPProtocolNumber:
	case header.UDPProtocolNumber:
		if len(payload) >= header.UDPMinimumSize && header.UDP(payload).Checksum() == 0 {
			return true // UDP over IPv4 without a checksum
		}
	default:
		return true
	}
	sum := header.PseudoHeaderChecksum(proto, ip.SourceAddress(), ip.DestinationAddress(), uint16(len(payload)))
	return checksum.Checksum(payload, sum) == 0xffff
}
