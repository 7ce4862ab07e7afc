package router

import (
	"testing"
	"time"

	"github.com/nicstack/nicstack/netdev/header"
	"github.com/nicstack/nicstack/router/tcpstate"
)

// tcpPair sends segments between the VM (client) and a server behind the uplink, through NAT.
type tcpPair struct {
	b      *bench
	vm, up *Interface
	vmp    *fakePort
	upp    *fakePort
}

func (p *tcpPair) client(flags uint8, seq, ack uint32, n int) int {
	p.b.send(p.vm, tcpFrame(p.vm.MAC(), routerMACNic, ip4("10.0.1.2"), ip4("198.18.1.1"), 4000, 80, flags, seq, ack, make([]byte, n)))
	return len(p.upp.take())
}

func (p *tcpPair) server(flags uint8, seq, ack uint32, n int) int {
	p.b.send(p.up, tcpFrame(macGateway, macUplink, ip4("198.18.1.1"), ip4("198.18.0.10"), 80, 49152, flags, seq, ack, make([]byte, n)))
	return len(p.vmp.take())
}

func (p *tcpPair) state(t *testing.T) (tcpstate.State, bool) {
	t.Helper()
	for l := range p.b.r.links {
		return l.tcp.State, true
	}
	return 0, false
}

func newTCPPair(t *testing.T) *tcpPair {
	b, vm, vmp, up, upp := natBench(t)
	return &tcpPair{b: b, vm: vm, up: up, vmp: vmp, upp: upp}
}

func TestTCPStateMachine(t *testing.T) {
	p := newTCPPair(t)
	const A, S = header.TCPAck, header.TCPSyn
	step := func(name string, sent int, want tcpstate.State) {
		t.Helper()
		if sent != 1 {
			t.Fatalf("%s: segment not forwarded", name)
		}
		if st, ok := p.state(t); !ok || st != want {
			t.Fatalf("%s: state %v (exists %v), want %v", name, st, ok, want)
		}
	}
	step("SYN", p.client(S, 100, 0, 0), tcpstate.Opening)
	step("SYN-ACK", p.server(S|A, 500, 101, 0), tcpstate.Opening)
	step("ACK", p.client(A, 101, 501, 0), tcpstate.Open)
	step("data", p.client(A, 101, 501, 10), tcpstate.Open)
	step("FIN client", p.client(header.TCPFin|A, 111, 501, 0), tcpstate.Closing)
	step("ACK of FIN", p.server(A, 501, 112, 0), tcpstate.Closing)
	step("FIN server", p.server(header.TCPFin|A, 501, 112, 0), tcpstate.Closing)
	step("last ACK", p.client(A, 112, 502, 0), tcpstate.Closed)
	// Closed links still carry stray segments until 2 MSL (15 s each) are over.
	p.b.clock.advance(29 * time.Second)
	if p.server(A, 502, 112, 0) != 1 {
		t.Fatal("closed link dissolved before 2*MSL")
	}
	p.b.clock.advance(2 * time.Second)
	p.b.r.Tick()
	if _, ok := p.state(t); ok {
		t.Fatal("closed link not dissolved after 2*MSL")
	}
	if p.server(A, 502, 112, 0) != 0 {
		t.Fatal("segment passed after the link dissolved")
	}
}

func TestTCPResetCloses(t *testing.T) {
	p := newTCPPair(t)
	p.client(header.TCPSyn, 1, 0, 0)
	p.server(header.TCPRst|header.TCPAck, 0, 2, 0)
	if st, _ := p.state(t); st != tcpstate.Closed {
		t.Fatalf("state after RST %v", st)
	}
	p.b.clock.advance(30 * time.Second)
	p.b.r.Tick()
	if len(p.b.r.links) != 0 {
		t.Fatal("reset link not dissolved after 2*MSL")
	}
	if n := p.b.r.domains["uplink"].ports[pTCP].InUse(); n != 0 {
		t.Fatalf("NAT port not freed: %d in use", n)
	}
}

func TestIdleTimeouts(t *testing.T) {
	for _, c := range []struct {
		name string
		idle time.Duration
		send func(p *tcpPair) int
	}{
		{"tcp", 600 * time.Second, func(p *tcpPair) int { return p.client(header.TCPSyn, 1, 0, 0) }},
		{"udp", 30 * time.Second, func(p *tcpPair) int {
			p.b.send(p.vm, udpFrameT(p.vm.MAC(), routerMACNic, ip4("10.0.1.2"), ip4("198.18.1.1"), 4000, 80, nil))
			return len(p.upp.take())
		}},
		{"icmp", 10 * time.Second, func(p *tcpPair) int {
			p.b.send(p.vm, icmpEcho(p.vm.MAC(), routerMACNic, ip4("10.0.1.2"), ip4("198.18.1.1"), header.ICMPEchoRequest, 5, 1))
			return len(p.upp.take())
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newTCPPair(t)
			if c.send(p) != 1 {
				t.Fatal("first packet not forwarded")
			}
			p.b.clock.advance(c.idle - time.Second)
			p.b.r.Tick()
			if len(p.b.r.links) != 1 {
				t.Fatal("link dissolved before the idle timeout")
			}
			c.send(p) // activity restarts the idle time
			p.b.clock.advance(c.idle - time.Second)
			p.b.r.Tick()
			if len(p.b.r.links) != 1 {
				t.Fatal("activity did not keep the link")
			}
			p.b.clock.advance(time.Second)
			p.b.r.Tick()
			if len(p.b.r.links) != 0 {
				t.Fatal("link not dissolved at the idle timeout")
			}
		})
	}
}
