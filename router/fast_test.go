package router

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/nicstack/nicstack/netdev"
	"github.com/nicstack/nicstack/netdev/header"
)

// pairedBench is the same config twice, one router with forwardLinked and one without, so
// that a test can feed both the same frames and compare everything they do.
type pairedBench struct {
	fast, general       *bench
	fastIfs, generalIfs []*Interface
	fastPorts, genPorts []*fakePort
}

// newPairedBench makes the pair; the fast one keeps its state in state (nil: none).
func newPairedBench(t *testing.T, cfg string, state []byte, labels ...string) *pairedBench {
	t.Helper()
	p := &pairedBench{fast: keptBench(t, cfg, state, nil), general: newBench(t, cfg)}
	p.general.r.general = true
	for _, l := range labels {
		kind, mac := Nic, header.MAC{}
		if l == "uplink" {
			kind, mac = Uplink, macUplink
		}
		i, port := p.fast.attach(l, kind, mac)
		p.fastIfs, p.fastPorts = append(p.fastIfs, i), append(p.fastPorts, port)
		i, port = p.general.attach(l, kind, mac)
		p.generalIfs, p.genPorts = append(p.generalIfs, i), append(p.genPorts, port)
	}
	return p
}

// handle gives both routers frame at interface k and fails the test when they differ in
// verdict, frames sent (bytes and offload), releases, counters or report.
func (p *pairedBench) handle(t *testing.T, k int, frame []byte, off *netdev.Offload, what string) {
	t.Helper()
	v1 := p.fast.r.Handle(p.fastIfs[k], bytes.Clone(frame), off, 7)
	v2 := p.general.r.Handle(p.generalIfs[k], bytes.Clone(frame), off, 7)
	p.fast.r.Flush()
	p.general.r.Flush()
	if v1 != v2 {
		t.Fatalf("%s: verdict %d with the fast path, %d without", what, v1, v2)
	}
	for n := range p.fastPorts {
		a, b := p.fastPorts[n], p.genPorts[n]
		if !slices.EqualFunc(a.sent, b.sent, bytes.Equal) || !slices.Equal(a.offs, b.offs) || !slices.Equal(a.released, b.released) {
			t.Fatalf("%s: interface %d sent\n%x\nwith the fast path, and\n%x\nwithout", what, n, a.sent, b.sent)
		}
		a.take()
		b.take()
	}
	if s1, s2 := statsOf(p.fast.r), statsOf(p.general.r); s1 != s2 {
		t.Fatalf("%s: counters %s with the fast path, %s without", what, s1, s2)
	}
}

func statsOf(r *Router) string {
	s := &r.stats
	return fmt.Sprint(s.Received.Load(), s.Sent.Load(), s.Dropped.Load(), s.DroppedFull.Load(), s.NATRefused.Load(),
		s.FragmentsSeen.Load(), len(r.links), string(r.Report().XML()))
}

// TestFastPathMatchesGeneral feeds random frames of a few flows through NAT both ways,
// with the cases forwardLinked must leave alone mixed in (ICMP, DHCP ports, fragments, IPv4
// options, domain-local and broadcast destinations, TCP closing and resets, link timeouts,
// a gateway's new MAC), offload metadata and full destinations, and checks that the router with the fast path
// does exactly what the one without does.
func TestFastPathMatchesGeneral(t *testing.T) {
	p := newPairedBench(t, natConfig, nil, "vm", "uplink")
	arp := arpFrame(header.ARPReply, macGateway, ip4("198.18.0.1"), macUplink, ip4("198.18.0.10"), macUplink)
	p.handle(t, 1, arp, nil, "gateway ARP reply")
	for _, ip := range []string{"10.0.1.5", "10.0.1.6"} {
		p.handle(t, 0, arpFrame(header.ARPReply, macVM, ip4(ip), routerMACNic, ip4("10.0.1.1"), routerMACNic), nil, "VM ARP reply")
	}
	moved := arpFrame(header.ARPReply, macServer, ip4("198.18.0.1"), macUplink, ip4("198.18.0.10"), macUplink)
	rng := rand.New(rand.NewPCG(5, 6))
	remotes := [][4]byte{ip4("198.18.1.1"), ip4("198.18.1.2"), ip4("10.0.1.7"), ip4("10.0.1.255"), ip4("10.0.1.1")}
	var (
		sport, dport uint16
		local        [4]byte
		remote       [4]byte
		kind, from   int
	)
	for n := range 20000 {
		if n == 0 || rng.IntN(8) == 0 { // a new flow; most frames continue the last one
			sport, dport = uint16(4000+rng.IntN(3)), uint16([]int{53, 80, 67, 68}[rng.IntN(4)])
			local = [][4]byte{ip4("10.0.1.5"), ip4("10.0.1.6")}[rng.IntN(2)]
			remote = remotes[rng.IntN(2)]
			if rng.IntN(8) == 0 {
				remote = remotes[2+rng.IntN(3)]
			}
			kind, from = rng.IntN(10), 0
			if rng.IntN(3) == 0 { // an answer from the uplink side to a NAT port the VM's flows get
				from, sport = 1, uint16(49152+rng.IntN(4))
			}
		}
		var f []byte
		switch {
		case from == 1 && kind < 5:
			f = udpFrameT(macGateway, macUplink, remote, ip4("198.18.0.10"), dport, sport, []byte("answer"))
		case from == 1:
			f = tcpFrame(macGateway, macUplink, remote, ip4("198.18.0.10"), dport, sport, 0x10, 1, 1, nil)
		case kind < 4:
			f = udpFrameT(macVM, routerMACNic, local, remote, sport, dport, []byte("payload"))
		case kind < 8:
			flags := []uint8{0x02, 0x10, 0x10, 0x18, 0x18, 0x11, 0x04}[rng.IntN(7)]
			f = tcpFrame(macVM, routerMACNic, local, remote, sport, dport, flags, rng.Uint32(), rng.Uint32(), nil)
		default:
			f = icmpEcho(macVM, routerMACNic, local, remote, 8, sport, uint16(n))
		}
		var off *netdev.Offload
		switch rng.IntN(40) {
		case 0:
			binary16(f[header.EthLen+6:], 0x2000) // more fragments
		case 1:
			off = &netdev.Offload{Flags: netdev.OffloadNeedsCsum, CsumStart: header.EthLen + 20, CsumOffset: 6}
		case 2:
			f = f[:header.EthLen+10] // truncated
		case 3:
			f[header.EthLen] = 0x46 // an IPv4 header with options (the length no longer fits)
		case 4:
			p.fast.clock.advance(time.Duration(rng.IntN(300)) * time.Second)
			p.general.clock.advance(p.fast.clock.t.Sub(p.general.clock.t))
			p.fast.r.Tick()
			p.general.r.Tick()
		case 5:
			p.fastPorts[1-from].full, p.genPorts[1-from].full = true, true
		case 6: // the gateway's MAC changes, or changes back: plans go stale
			f = arp
			if rng.IntN(2) == 0 {
				f = moved
			}
		case 7: // time passes without a Tick: lookup finds links expired
			d := time.Duration(rng.IntN(200)) * time.Second
			p.fast.clock.advance(d)
			p.general.clock.advance(d)
		}
		at := from
		if bytes.Equal(f, arp) || bytes.Equal(f, moved) {
			at = 1
		}
		p.handle(t, at, f, off, fmt.Sprintf("frame %d", n))
		p.fastPorts[1-from].full, p.genPorts[1-from].full = false, false
	}
}

func binary16(b []byte, v uint16) { b[0], b[1] = byte(v>>8), byte(v) }
