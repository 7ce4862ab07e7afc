// Package nicperf is nic_perf's logic, Genode's packet-stream test tool: on one Nic session it
// generates UDP (or ICMP echo) frames at a configured rate, size and destination, counts what
// it receives, and answers ARP and ICMP echo for its own address so that a router can reach
// it. The nic_perf component runs a Perf per session; tests run it over heap sessions.
package nicperf

import (
	"encoding/binary"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nicstack/nicstack/router/header"
	"github.com/nicstack/nicstack/runtime/packetstream"
)

// Counters of one nic_perf; every field is also a component counter of the same name.
type Counters struct {
	TxFrames, TxBytes *atomic.Uint64 // generated frames submitted
	TxFull            *atomic.Uint64 // times the stream had no room for the next frame
	RxFrames, RxBytes *atomic.Uint64 // UDP frames, TCP segments and ICMP echo replies received
	Answers           *atomic.Uint64 // ARP, ICMP echo requests, TCP SYNs and FINs answered
	Other             *atomic.Uint64 // frames received that are none of the above
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

// Perf is one session's generator and sink.
type Perf struct {
	cfg      Config
	ctr      *Counters
	log      *slog.Logger
	template []byte
	seq      uint16
	flow     int                 // index of the next frame's source port
	tcpStep  int                 // which segment of its connection the next TCP frame is
	pending  packetstream.Packet // an answer being written
	start    time.Time           // of the generator
	sent     uint64              // generated frames since start
	// Per-batch counts, added to ctr once per round.
	txFrames, txBytes, txFull, rxFrames, rxBytes, answers, other uint64
	// A round's received packets and their frames.
	batchPkts   [batch]packetstream.Packet
	batchFrames [batch][]byte
}

// New returns a Perf for cfg.
func New(cfg Config, ctr *Counters, log *slog.Logger) *Perf {
	p := &Perf{cfg: cfg, ctr: ctr, log: log}
	if cfg.TX && !cfg.TCP {
		p.template = p.frame()
	}
	return p
}

// frame builds the frame the generator sends (copied for every frame).
func (p *Perf) frame() []byte {
	c := p.cfg
	b := make([]byte, c.Size)
	e := header.Eth(b)
	e.SetDst(c.DstMAC)
	e.SetSrc(c.MAC)
	e.SetType(header.EtherTypeIPv4)
	ip := b[header.EthLen:]
	l4 := ip[20:]
	for i := 8; i < len(l4); i++ {
		l4[i] = byte(i)
	}
	if c.ICMP {
		header.PutIPv4(ip, len(ip), header.ProtoICMP, c.IP, c.DstIP)
		l4[0] = header.ICMPEchoRequest
		binary.BigEndian.PutUint16(l4[4:], c.SrcPort)
		header.ICMP(l4).UpdateChecksum()
		return b
	}
	header.PutIPv4(ip, len(ip), header.ProtoUDP, c.IP, c.DstIP)
	header.Ports(l4).SetSrc(c.SrcPort)
	header.Ports(l4).SetDst(c.DstPort)
	binary.BigEndian.PutUint16(l4[4:], uint16(len(l4)))
	binary.BigEndian.PutUint16(l4[6:], header.Checksum(l4, header.PseudoSum(c.IP, c.DstIP, header.ProtoUDP, len(l4))))
	return b
}

// batch bounds the frames received or generated per round, as max_packets_per_signal does.
const batch = 64

// Run serves the session until stop is set: out is where it sends, in where it receives; w
// waits on both.
func (p *Perf) Run(out *packetstream.Source, in *packetstream.Sink, w *packetstream.Waiter, stop *atomic.Bool) {
	p.start = time.Now()
	nextLog := p.start.Add(p.cfg.Period)
	var last [3]uint64 // tx frames, rx frames, rx bytes at the last log
	for !stop.Load() {
		now := time.Now()
		busy, due := p.Step(out, in, now)
		if p.cfg.Period > 0 && !now.Before(nextLog) {
			tx, rx, rxb := p.ctr.TxFrames.Load(), p.ctr.RxFrames.Load(), p.ctr.RxBytes.Load()
			if tx != last[0] || rx != last[1] {
				sec := (p.cfg.Period + now.Sub(nextLog)).Seconds()
				p.log.Info("rates", "tx_fps", rate(tx-last[0], sec), "rx_fps", rate(rx-last[1], sec),
					"rx_mbit_s", rate(8*(rxb-last[2]), sec)/1e6, "tx_total", tx, "rx_total", rx)
				last = [3]uint64{tx, rx, rxb}
			}
			nextLog = now.Add(p.cfg.Period)
		}
		if !busy {
			deadline := now.Add(time.Second)
			if p.cfg.Period > 0 {
				deadline = nextLog
			}
			if !due.IsZero() && due.Before(deadline) {
				deadline = due
			}
			w.WaitUntil(deadline)
		}
	}
}

// Step is one round at time now: take back acknowledged frames, receive a batch, generate a
// batch, publish. It reports whether anything happened and, when the rate holds the
// generator back, when it wants to send next.
func (p *Perf) Step(out *packetstream.Source, in *packetstream.Sink, now time.Time) (busy bool, due time.Time) {
	if p.start.IsZero() {
		p.start = now
	}
	if out.ReleaseAcked() > 0 {
		busy = true
	}
	if k := in.TryGetBatch(p.batchPkts[:], p.batchFrames[:]); k > 0 {
		busy = true
		for _, b := range p.batchFrames[:k] {
			if b != nil {
				p.receive(out, b)
			}
		}
		if !p.cfg.NoAck {
			in.TryAckBatch(p.batchPkts[:k]) // TryGetBatch took no more than the ack queue holds
		}
	}
	if p.cfg.TX && (p.cfg.Duration == 0 || now.Sub(p.start) < p.cfg.Duration) {
		want := uint64(batch)
		if p.cfg.Rate > 0 {
			allowed := uint64(now.Sub(p.start).Seconds() * float64(p.cfg.Rate))
			want = min(allowed-min(allowed, p.sent), batch)
			if want == 0 {
				due = p.start.Add(time.Duration(float64(p.sent+1) / float64(p.cfg.Rate) * float64(time.Second)))
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

func rate(n uint64, sec float64) uint64 { return uint64(float64(n) / sec) }

// send submits up to want generated frames; it stops when the stream is full.
func (p *Perf) send(out *packetstream.Source, want uint64) uint64 {
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
		l4 := b[header.EthLen+20:]
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
	sum := binary.BigEndian.Uint16(l4[6:])
	binary.BigEndian.PutUint16(l4[6:], header.Adjust(sum, p.cfg.SrcPort, port))
	header.Ports(l4).SetSrc(port)
}

// receive counts a frame and answers ARP and ICMP echo requests for our address.
func (p *Perf) receive(out *packetstream.Source, b []byte) {
	e, ok := header.NewEth(b)
	if !ok {
		p.other++
		return
	}
	switch e.Type() {
	case header.EtherTypeARP:
		if a, ok := header.NewARP(e.Payload()); ok && a.Op() == header.ARPRequest && a.TargetIP() == p.cfg.IP {
			p.answerARP(out, a)
			return
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
				if ip.Dst() == p.cfg.IP {
					p.answerTCP(out, e, ip, seg)
				}
				return
			}
		case header.ProtoUDP:
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
			case m.Type() == header.ICMPEchoRequest && ip.Dst() == p.cfg.IP:
				p.answerEcho(out, e, ip)
				return
			}
		}
	}
	p.other++
}

func (p *Perf) answerARP(out *packetstream.Source, a header.ARP) {
	buf := p.reply(out, header.EthLen+header.ARPLen)
	if buf == nil {
		return
	}
	e := header.Eth(buf)
	e.SetDst(a.SenderMAC())
	e.SetSrc(p.cfg.MAC)
	e.SetType(header.EtherTypeARP)
	header.PutARP(e.Payload(), header.ARPReply, p.cfg.MAC, p.cfg.IP, a.SenderMAC(), a.SenderIP())
	p.submitReply(out)
}

func (p *Perf) answerEcho(out *packetstream.Source, in header.Eth, ip header.IPv4) {
	n := header.EthLen + ip.TotalLen()
	buf := p.reply(out, n)
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
	p.submitReply(out)
}

// reply allocates an answer; nil when the stream is full (the request is dropped).
func (p *Perf) reply(out *packetstream.Source, n int) []byte {
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

func (p *Perf) submitReply(out *packetstream.Source) {
	out.TrySubmit(p.pending)
	p.answers++
}

func (p *Perf) publish() {
	c := p.ctr
	add := func(ctr *atomic.Uint64, n *uint64) {
		if *n != 0 {
			ctr.Add(*n)
			*n = 0
		}
	}
	add(c.TxFrames, &p.txFrames)
	add(c.TxBytes, &p.txBytes)
	add(c.TxFull, &p.txFull)
	add(c.RxFrames, &p.rxFrames)
	add(c.RxBytes, &p.rxBytes)
	add(c.Answers, &p.answers)
	add(c.Other, &p.other)
}
