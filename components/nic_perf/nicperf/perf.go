// Package nicperf is nic_perf's logic, Genode's packet-stream test tool: on each Nic session
// it serves or requests it generates UDP (or ICMP echo, or TCP) frames at a configured rate,
// size and destination, counts what it receives, and answers ARP and ICMP echo for its own
// address so that a router can reach it; as Genode's, it gets that address by DHCP when
// configured without one, hands an address to its peer as a DHCP server, and learns its
// destination's MAC by ARP. Every period it logs each session's packets in Genode's words,
// and after count periods it ends. It is not a protocol stack: nothing is retransmitted.
// The nic_perf component runs a Perf per session; tests run it over heap sessions.
package nicperf

import (
	"encoding/binary"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nicstack/nicstack/netdev/header"
	"github.com/nicstack/nicstack/runtime/packetstream"
)

// Counters of one nic_perf; every field is also a component counter of the same name.
type Counters struct {
	TxFrames, TxBytes *atomic.Uint64 // generated frames submitted
	TxFull            *atomic.Uint64 // times the stream had no room for the next frame
	RxFrames, RxBytes *atomic.Uint64 // UDP frames, TCP segments and ICMP echo replies received
	Answers           *atomic.Uint64 // ARP, ICMP echo and DHCP requests, TCP SYNs and FINs answered
	Other             *atomic.Uint64 // frames received that are none of the above (ARP and DHCP replies among them)
}

// NewCounters makes the counters with get (the component's c.Counter), or privately.
func NewCounters(get func(string) *atomic.Uint64) *Counters {
	if get == nil {
		get = func(string) *atomic.Uint64 { return new(atomic.Uint64) }
	}
	return &Counters{
		TxFrames: get("tx_frames"), TxBytes: get("tx_bytes"), TxFull: get("tx_full"),
		RxFrames: get("rx_frames"), RxBytes: get("rx_bytes"), Answers: get("answers"), Other: get("rx_other"),
	}
}

// Perf is one session's generator and sink (Genode's nic_perf calls it an interface).
type Perf struct {
	cfg      Config
	ctr      *Counters
	log      *slog.Logger
	stats    Stats
	template []byte // the generated frame, built once the generator knows its addresses
	seq      uint16
	flow     int                    // index of the next frame's source port
	tcpStep  int                    // which segment of its connection the next TCP frame is
	pending  packetstream.Packet    // a frame being written
	next     atomic.Pointer[Config] // a changed policy (Apply), taken at the next round
	onLease  func(Lease)            // OnLease's
	start    time.Time              // of the generator
	sent     uint64                 // generated frames since start
	// ip is its address: cfg.IP, or what DHCP gave (zero until then); dstMAC the generator's
	// destination: cfg.DstMAC, or what ARP answered.
	ip       [4]byte
	dstMAC   header.MAC
	resolved bool      // dstMAC is known
	arpDue   time.Time // when the generator asks (again) for dstMAC
	dhcp     dhcpClient
	// Per-batch counts, added to ctr and stats once per round: the counters', and for the
	// stats every frame received (seen) and sent (emitted, the generated ones added last).
	txFrames, txBytes, txFull, rxFrames, rxBytes, answers, other uint64
	seen, seenBytes, emitted, emittedBytes                       uint64
	// A round's received packets and their frames.
	batchPkts   [batch]packetstream.Packet
	batchFrames [batch][]byte
}

// New returns a Perf for cfg.
func New(cfg Config, ctr *Counters, log *slog.Logger) *Perf {
	p := &Perf{cfg: cfg, ctr: ctr, log: log, dstMAC: cfg.DstMAC, resolved: !cfg.ResolveDstMAC}
	if !cfg.DHCP {
		p.ip = cfg.IP
	}
	return p
}

// Apply has the session run cfg from its next round on: a changed policy, as Genode's
// nic_perf applies it to an open session. It may be called while Run runs.
func (p *Perf) Apply(cfg Config) { p.next.Store(&cfg) }

// apply is Genode's Interface::apply_config: the address is the policy's (none: a DHCP
// client starts over), the generator's frame follows the new <tx>, and its destination's MAC
// is asked for again when the destination changed. The stats go on.
func (p *Perf) apply(cfg Config, now time.Time) {
	old := p.cfg
	p.cfg, p.template, p.start, p.sent = cfg, nil, now, 0
	p.ip, p.dhcp = [4]byte{}, dhcpClient{}
	if !cfg.DHCP {
		p.ip = cfg.IP
	}
	if cfg.DstIP != old.DstIP || cfg.ResolveDstMAC != old.ResolveDstMAC {
		p.dstMAC, p.resolved, p.arpDue = cfg.DstMAC, !cfg.ResolveDstMAC, time.Time{}
	}
}

// Stats are the session's packets of the current period, for a Registry.
func (p *Perf) Stats() *Stats { return &p.stats }

// frame builds the frame the generator sends (copied for every frame).
func (p *Perf) frame() []byte {
	c := p.cfg
	b := make([]byte, c.Size)
	l4 := b[header.EthLen+header.IPv4Len:]
	for i := 8; i < len(l4); i++ {
		l4[i] = byte(i)
	}
	if c.ICMP {
		m := header.ICMP(putIPv4(b, c.MAC, p.dstMAC, header.ProtoICMP, p.ip, c.DstIP))
		m[0] = header.ICMPEchoRequest
		binary.BigEndian.PutUint16(m[4:], c.SrcPort)
		m.UpdateChecksum()
		return b
	}
	putUDP(b, c.MAC, p.dstMAC, p.ip, c.DstIP, c.SrcPort, c.DstPort)
	return b
}

// putIPv4 writes the Ethernet and IPv4 headers of frame b (the IPv4 packet runs to its end)
// and returns the room behind them for the protocol's header and data.
func putIPv4(b []byte, srcMAC, dstMAC header.MAC, proto uint8, src, dst [4]byte) []byte {
	e := header.Eth(b)
	e.SetDst(dstMAC)
	e.SetSrc(srcMAC)
	e.SetType(header.EtherTypeIPv4)
	ip := b[header.EthLen:]
	header.PutIPv4(ip, len(ip), proto, src, dst)
	return ip[header.IPv4Len:]
}

// putUDP writes the Ethernet, IPv4 and UDP headers of a frame b whose UDP payload is in
// place, the checksums included.
func putUDP(b []byte, srcMAC, dstMAC header.MAC, src, dst [4]byte, sport, dport uint16) {
	header.PutUDP(putIPv4(b, srcMAC, dstMAC, header.ProtoUDP, src, dst), src, dst, sport, dport)
}

// batch bounds the frames received or generated per round, as max_packets_per_signal does.
const batch = 64

// Run serves the session until stop is set: out is where it sends, in where it receives; w
// waits on both.
func (p *Perf) Run(out *packetstream.Source, in *packetstream.Sink, w *packetstream.Waiter, stop *atomic.Bool) {
	p.start = time.Now()
	for !stop.Load() {
		now := time.Now()
		busy, due := p.Step(out, in, now)
		if !busy {
			deadline := now.Add(time.Second)
			if !due.IsZero() && due.Before(deadline) {
				deadline = due
			}
			w.WaitUntil(deadline)
		}
	}
}

// Running is a Perf serving its session on a goroutine of its own (Start).
type Running struct {
	stop atomic.Bool
	w    *packetstream.Waiter
	done sync.WaitGroup
}

// Start runs p on out and in (Run) until Stop; spin is the waiter's (packetstream.Waiter.Spin).
func Start(p *Perf, out *packetstream.Source, in *packetstream.Sink, spin int) (*Running, error) {
	w, err := packetstream.NewWaiter(out, in)
	if err != nil {
		return nil, err
	}
	w.Spin = spin
	r := &Running{w: w}
	r.done.Add(1)
	go func() {
		defer r.done.Done()
		p.Run(out, in, w, &r.stop)
	}()
	return r, nil
}

// Stop ends the run and waits for it; the session's memory is the caller's again.
func (r *Running) Stop() {
	r.stop.Store(true)
	r.w.Wake()
	r.done.Wait()
	r.w.Close()
}

// Step is one round at time now: take back acknowledged frames, receive a batch, ask for an
// address or the destination's MAC when due, generate a batch, publish. It reports whether
// anything happened and, when the rate, DHCP or ARP hold it back, when it wants to go on.
func (p *Perf) Step(out *packetstream.Source, in *packetstream.Sink, now time.Time) (busy bool, due time.Time) {
	if p.start.IsZero() {
		p.start = now
	}
	if c := p.next.Swap(nil); c != nil {
		p.apply(*c, now)
	}
	if out.ReleaseAcked() > 0 {
		busy = true
	}
	if k := in.TryGetBatch(p.batchPkts[:], p.batchFrames[:]); k > 0 {
		busy = true
		for _, b := range p.batchFrames[:k] {
			if b != nil {
				p.receive(out, b, now)
			}
		}
		if !p.cfg.NoAck {
			in.TryAckBatch(p.batchPkts[:k]) // TryGetBatch took no more than the ack queue holds
		}
	}
	if p.cfg.DHCP {
		due = p.dhcp.step(p, out, now)
	}
	if p.cfg.TX && p.ip != ([4]byte{}) && !p.resolved {
		due = earliest(due, p.resolve(out, now))
	} else if p.cfg.TX && p.ip != ([4]byte{}) && (p.cfg.Duration == 0 || now.Sub(p.start) < p.cfg.Duration) {
		want := uint64(batch)
		if p.cfg.Rate > 0 {
			allowed := uint64(now.Sub(p.start).Seconds() * float64(p.cfg.Rate))
			want = min(allowed-min(allowed, p.sent), batch)
			if want == 0 {
				due = earliest(due, p.start.Add(time.Duration(float64(p.sent+1)/float64(p.cfg.Rate)*float64(time.Second))))
			}
		}
		k := p.send(out, want)
		p.sent += k
		busy = busy || k > 0
	}
	out.Wakeup()
	in.Wakeup()
	p.publish()
	return busy, due
}

// earliest is the earlier of two times, where zero is none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// send submits up to want generated frames; it stops when the stream is full.
func (p *Perf) send(out *packetstream.Source, want uint64) uint64 {
	if p.template == nil && !p.cfg.TCP {
		p.template = p.frame()
	}
	var k uint64
	for ; k < want; k++ {
		if !out.CanSubmit() {
			p.txFull++
			break
		}
		n := len(p.template)
		if p.cfg.TCP {
			n = p.tcpLen()
		}
		pk, err := out.Alloc(n)
		if err != nil {
			p.txFull++
			break
		}
		b := out.Payload(pk)
		if p.cfg.TCP {
			p.nextTCP(b)
			out.TrySubmit(pk)
			p.txFrames++
			p.txBytes += uint64(len(b))
			continue
		}
		copy(b, p.template)
		l4 := b[header.EthLen+header.IPv4Len:]
		if p.cfg.ICMP {
			p.seq++
			m := header.ICMP(l4)
			binary.BigEndian.PutUint16(m[6:], p.seq)
			m.SetChecksum(header.Adjust(m.Checksum(), 0, p.seq))
		}
		if p.cfg.Flows > 1 {
			p.setFlow(l4)
		}
		out.TrySubmit(pk)
		p.txFrames++
		p.txBytes += uint64(len(b))
	}
	return k
}

// setFlow gives the frame the next source port (ICMP: echo id) of the configured flows.
func (p *Perf) setFlow(l4 []byte) {
	port := p.cfg.SrcPort + uint16(p.flow)
	p.flow = (p.flow + 1) % p.cfg.Flows
	if p.cfg.ICMP {
		header.ICMP(l4).SetID(port)
		return
	}
	sum := binary.BigEndian.Uint16(l4[header.UDPChecksumOff:])
	binary.BigEndian.PutUint16(l4[header.UDPChecksumOff:], header.Adjust(sum, p.cfg.SrcPort, port))
	header.Ports(l4).SetSrc(port)
}

// receive counts a frame and answers what is asked of it: ARP and ICMP echo requests for
// its address, TCP SYNs and FINs, DHCP requests when it hands out an address; it takes the
// DHCP replies its client waits for and the ARP reply its generator waits for.
func (p *Perf) receive(out *packetstream.Source, b []byte, now time.Time) {
	p.seen++
	p.seenBytes += uint64(len(b))
	e, ok := header.NewEth(b)
	if !ok {
		p.other++
		return
	}
	has := p.ip != [4]byte{}
	switch e.Type() {
	case header.EtherTypeARP:
		a, ok := header.NewARP(e.Payload())
		switch {
		case !ok:
		case a.Op() == header.ARPRequest && has && a.TargetIP() == p.ip:
			p.answerARP(out, a)
			return
		case a.Op() == header.ARPReply:
			p.arpReply(a)
		}
	case header.EtherTypeIPv4:
		ip, ok := header.NewIPv4(e.Payload())
		if !ok {
			break
		}
		switch ip.Protocol() {
		case header.ProtoTCP:
			if seg, ok := header.L4Header(ip); ok {
				p.rxFrames++
				p.rxBytes += uint64(len(b))
				if has && ip.Dst() == p.ip {
					p.answerTCP(out, e, ip, seg)
				}
				return
			}
		case header.ProtoUDP:
			seg, ok := header.L4Header(ip)
			if ok && isDHCP(header.Ports(seg)) {
				p.receiveDHCP(out, e, seg[8:], now)
				return
			}
			p.rxFrames++
			p.rxBytes += uint64(len(b))
			return
		case header.ProtoICMP:
			m := header.ICMP(ip.Payload())
			if len(m) < header.ICMPLen {
				break
			}
			switch {
			case m.Type() == header.ICMPEchoReply:
				p.rxFrames++
				p.rxBytes += uint64(len(b))
				return
			case m.Type() == header.ICMPEchoRequest && has && ip.Dst() == p.ip:
				p.answerEcho(out, e, ip)
				return
			}
		}
	}
	p.other++
}

func (p *Perf) answerEcho(out *packetstream.Source, in header.Eth, ip header.IPv4) {
	n := header.EthLen + ip.TotalLen()
	buf := p.alloc(out, n)
	if buf == nil {
		return
	}
	copy(buf, in[:n])
	e := header.Eth(buf)
	e.SetDst(in.Src())
	e.SetSrc(p.cfg.MAC)
	rip := header.IPv4(e.Payload())
	src, dst := ip.Src(), ip.Dst()
	rip.SetSrc(dst)
	rip.SetDst(src)
	m := header.ICMP(rip.Payload())
	m[0] = header.ICMPEchoReply
	m.UpdateChecksum()
	p.submit(out)
	p.answers++
}

// alloc allocates a frame that is not generated (an answer, a request of its own); nil when
// the stream is full (the frame is dropped; what waits for an answer asks again).
func (p *Perf) alloc(out *packetstream.Source, n int) []byte {
	if !out.CanSubmit() {
		return nil
	}
	pk, err := out.Alloc(n)
	if err != nil {
		return nil
	}
	p.pending = pk
	return out.Payload(pk)
}

// submit sends the frame alloc gave.
func (p *Perf) submit(out *packetstream.Source) {
	out.TrySubmit(p.pending)
	p.emitted++
	p.emittedBytes += uint64(p.pending.Size)
}

func (p *Perf) publish() {
	c, s := p.ctr, &p.stats
	add := func(ctr *atomic.Uint64, n *uint64) {
		if *n != 0 {
			ctr.Add(*n)
			*n = 0
		}
	}
	p.emitted += p.txFrames
	p.emittedBytes += p.txBytes
	add(c.TxFrames, &p.txFrames)
	add(c.TxBytes, &p.txBytes)
	add(c.TxFull, &p.txFull)
	add(c.RxFrames, &p.rxFrames)
	add(c.RxBytes, &p.rxBytes)
	add(c.Answers, &p.answers)
	add(c.Other, &p.other)
	add(&s.txFrames, &p.emitted)
	add(&s.txBytes, &p.emittedBytes)
	add(&s.rxFrames, &p.seen)
	add(&s.rxBytes, &p.seenBytes)
}
