package nicperf

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/nicstack/nicstack/netdev/header"
	"github.com/nicstack/nicstack/runtime/packetstream"
)

// pair is two nic_perfs on one heap session, the client's end and the server's, as Genode's
// test-nic_perf connects nic_perf_tx (client) and nic_perf_rx (server), stepped by hand on a
// clock of the test's.
type pair struct {
	t                 *testing.T
	cl                *packetstream.Client
	srv               *packetstream.Server
	client, server    *Perf
	clientCtr, srvCtr *Counters
	now               time.Time
}

func newPair(t *testing.T, client, server Config) *pair {
	cl, srv, err := packetstream.NewHeapSession(packetstream.DefaultConfig(), packetstream.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close(); srv.Close() })
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	p := &pair{t: t, cl: cl, srv: srv, clientCtr: NewCounters(nil), srvCtr: NewCounters(nil), now: time.Unix(1000, 0)}
	p.client, p.server = New(client, p.clientCtr, quiet), New(server, p.srvCtr, quiet)
	return p
}

// directPair is Genode's test-nic_perf: nic_perf_tx, with an address, the client; nic_perf_rx,
// a DHCP client under its empty <default-policy>, the server.
func directPair(t *testing.T) *pair {
	tx, err := parseText(t, genodeDirectTx)
	if err != nil {
		t.Fatal(err)
	}
	rxCfg, err := parseText(t, genodeDirectRx)
	if err != nil {
		t.Fatal(err)
	}
	rx, _ := rxCfg.Served("nic_perf_tx -> ")
	return newPair(t, tx, rx)
}

// steps runs n rounds of both at the current time.
func (p *pair) steps(n int) {
	for range n {
		p.client.Step(p.cl.TX, p.cl.RX, p.now)
		p.server.Step(p.srv.RX, p.srv.TX, p.now)
	}
}

// Genode's test-nic_perf: the client has an address and hands dhcp_client_ip out, the server's
// empty <default-policy> makes it a DHCP client; once it has the address, it answers the
// client's ARP for it and the client's UDP arrives at it, at Genode's MAC of a served session.
func TestDHCPAndARPBetweenTwoNicPerfs(t *testing.T) {
	p := directPair(t)
	tx := p.client.cfg
	var leases []Lease
	p.server.OnLease(func(l Lease) { leases = append(leases, l) })
	p.steps(3) // the client's ARP request (unanswered), DISCOVER, OFFER, REQUEST, ACK
	if p.server.ip != [4]byte{10, 0, 1, 2} {
		t.Fatalf("server's address after the DHCP exchange: %v", p.server.ip)
	}
	if len(leases) != 1 || leases[0].Completed != "request" || leases[0].Interface.Addr().String() != "10.0.1.2" || leases[0].Seconds == 0 {
		t.Errorf("leases %+v", leases)
	}
	p.now = p.now.Add(arpRetry) // the client asks again, now answered
	p.steps(2)
	if !p.client.resolved || p.client.dstMAC != servedMAC {
		t.Fatalf("client's generator resolved %v to %v", p.client.resolved, p.client.dstMAC)
	}
	if n := p.clientCtr.Answers.Load(); n != 2 {
		t.Errorf("client answered %d DHCP requests, want 2 (DISCOVER, REQUEST)", n)
	}
	p.steps(3)
	if p.srvCtr.RxFrames.Load() == 0 {
		t.Fatal("no UDP at the server")
	}
	// What the server got are Genode's test packets: the mtu, to udp_port from port 0.
	p.client.Step(p.cl.TX, p.cl.RX, p.now)
	pk, ok := p.srv.TX.TryGet()
	if !ok {
		t.Fatal("no frame in the server's queue")
	}
	b := p.srv.TX.Payload(pk)
	ip, _ := header.NewIPv4(b[header.EthLen:])
	seg := ip.Payload()
	ports := header.Ports(seg)
	if len(b) != 1500 || header.Eth(b).Dst() != servedMAC || ip.Src() != tx.IP || ip.Dst() != tx.DstIP ||
		ports.Src() != 0 || ports.Dst() != 12345 ||
		header.Checksum(seg, header.PseudoSum(ip.Src(), ip.Dst(), header.ProtoUDP, len(seg))) != 0 {
		t.Errorf("test packet of %d bytes to %v %v:%d from %v:%d", len(b), header.Eth(b).Dst(), ip.Dst(), ports.Dst(), ip.Src(), ports.Src())
	}
	// Every frame counted in the stats, both ways.
	if p.client.stats.txFrames.Load() < 4 || p.server.stats.rxFrames.Load() < 4 || p.server.stats.txFrames.Load() < 3 {
		t.Errorf("stats: client sent %d, server received %d and sent %d", p.client.stats.txFrames.Load(),
			p.server.stats.rxFrames.Load(), p.server.stats.txFrames.Load())
	}
}

// A DHCP client without answer asks again after 2 s, and after renew, rebind and a new
// DISCOVER with the lease's timing; the generator repeats its ARP request each second.
func TestDHCPAndARPTimeouts(t *testing.T) {
	tx, _ := parseText(t, genodeDirectTx)
	rxCfg, _ := parseText(t, genodeDirectRx)
	rx, _ := rxCfg.Served("nic_perf_tx -> ")
	lonely := newPair(t, Config{}, rx) // a client that answers nothing (and is never stepped)
	step := func(p *pair) { p.server.Step(p.srv.RX, p.srv.TX, p.now) }
	discovers := func() int {
		n := 0
		for {
			pk, ok := lonely.cl.RX.TryGet()
			if !ok {
				return n
			}
			lonely.cl.RX.TryAck(pk)
			n++
		}
	}
	step(lonely)
	lonely.now = lonely.now.Add(dhcpTimeout - time.Millisecond)
	step(lonely)
	if n := discovers(); n != 1 {
		t.Errorf("%d DISCOVERs within 2 s, want 1", n)
	}
	lonely.now = lonely.now.Add(time.Millisecond)
	step(lonely)
	if n := discovers(); n != 1 {
		t.Errorf("%d DISCOVERs after 2 s, want 1 more", n)
	}

	// Bound (lease 86400 s): renew at half the lease, rebind a quarter later, then DISCOVER.
	p := newPair(t, tx, rx)
	p.steps(3)
	state := p.server.dhcp.state
	for _, next := range []struct {
		after time.Duration
		state dhcpState
	}{{43200 * time.Second, dhcpRenewing}, {21600 * time.Second, dhcpRebinding}, {21600 * time.Second, dhcpSelecting}} {
		p.now = p.now.Add(next.after - time.Millisecond)
		step(p) // the client does not answer meanwhile
		if p.server.dhcp.state != state {
			t.Fatalf("state %d before its time, want %d", p.server.dhcp.state, state)
		}
		p.now = p.now.Add(time.Millisecond)
		step(p)
		if state = p.server.dhcp.state; state != next.state {
			t.Fatalf("state %d after %v, want %d", state, next.after, next.state)
		}
	}
	if p.server.ip != [4]byte{10, 0, 1, 2} {
		t.Errorf("address lost while rediscovering: %v", p.server.ip)
	}

	// An unanswered ARP request is repeated each second, and only then.
	deaf := newPair(t, tx, Config{}) // a server that answers nothing (and is never stepped)
	stepClient := func() { deaf.client.Step(deaf.cl.TX, deaf.cl.RX, deaf.now) }
	arps := func() int {
		n := 0
		for {
			pk, ok := deaf.srv.TX.TryGet()
			if !ok {
				return n
			}
			if header.Eth(deaf.srv.TX.Payload(pk)).Type() == header.EtherTypeARP {
				n++
			}
			deaf.srv.TX.TryAck(pk)
		}
	}
	stepClient()
	deaf.now = deaf.now.Add(arpRetry - time.Millisecond)
	stepClient()
	if n := arps(); n != 1 {
		t.Errorf("%d ARP requests within a second, want 1", n)
	}
	deaf.now = deaf.now.Add(time.Millisecond)
	stepClient()
	if n := arps(); n != 1 || deaf.clientCtr.TxFrames.Load() != 0 {
		t.Errorf("%d ARP requests after a second (want 1 more), %d frames generated unresolved", n, deaf.clientCtr.TxFrames.Load())
	}
}

// A changed policy reaches an open session as Genode's apply_config has it: the served
// session, a DHCP client under the empty <default-policy>, takes the new policy's address at
// once, asks for the MAC of its new <tx to> and sends there; its stats go on.
func TestApplyChangesAnOpenSession(t *testing.T) {
	p := directPair(t)
	p.steps(3)
	if p.server.ip != [4]byte{10, 0, 1, 2} {
		t.Fatalf("server's address by DHCP: %v", p.server.ip)
	}
	received := p.server.stats.rxFrames.Load()
	changed, err := parseText(t, `<config> <default-policy> <interface ip="10.0.1.9"/>
		<tx mtu="100" to="10.0.1.1" udp_port="7"/> </default-policy> </config>`)
	if err != nil {
		t.Fatal(err)
	}
	now, _ := changed.Served("nic_perf_tx -> ")
	p.server.Apply(now)
	p.steps(4) // the server's ARP request, the client's reply, then the test packets
	if p.server.ip != [4]byte{10, 0, 1, 9} || !p.server.resolved || p.server.dstMAC != clientMAC {
		t.Fatalf("after the change: address %v, destination resolved %v to %v", p.server.ip, p.server.resolved, p.server.dstMAC)
	}
	for {
		pk, ok := p.cl.RX.TryGet()
		if !ok {
			t.Fatal("no test packet of the new policy at the client")
		}
		b := p.cl.RX.Payload(pk)
		ip, ok := header.NewIPv4(b[header.EthLen:])
		if ok && ip.Protocol() == header.ProtoUDP && header.Ports(ip.Payload()).Dst() == 7 {
			if len(b) != 100 || ip.Src() != [4]byte{10, 0, 1, 9} || ip.Dst() != [4]byte{10, 0, 1, 1} {
				t.Errorf("test packet of %d bytes %v > %v", len(b), ip.Src(), ip.Dst())
			}
			break
		}
	}
	if p.server.stats.rxFrames.Load() < received {
		t.Error("the change reset the session's stats")
	}
}
