package router

import (
	"bytes"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nicstack/nicstack/netdev/header"
	"github.com/nicstack/nicstack/router/region"
	"github.com/nicstack/nicstack/router/tcpstate"
)

// keptBench is a bench whose router keeps its state in mem, on clock (nil: a new one).
func keptBench(t *testing.T, cfg string, mem []byte, clock *fakeClock) *bench {
	t.Helper()
	b := &bench{t: t, clock: clock, log: &strings.Builder{}}
	if clock == nil {
		b.clock = newBench(t, "<config/>").clock
	}
	b.r = New(Options{Clock: b.clock, Log: slog.New(slog.NewTextHandler(b.log, nil)), State: mem})
	m := modelOf(t, cfg)
	if len(m.Problems) > 0 {
		t.Fatalf("config problems: %v", m.Problems)
	}
	b.r.Configure(m)
	return b
}

// flow is what keptFlow set up: a VM with a DHCP lease and an open TCP connection through
// NAT to a server behind the uplink's gateway.
type flow struct {
	b         *bench
	vm, up    *Interface
	vmp, upp  *fakePort
	natPort   uint16
	vmSeq     uint32
	serverSeq uint32
}

var serverIP = ip4("198.18.5.5")

// keptFlow sets up a flow on a router keeping its state in mem.
func keptFlow(t *testing.T, mem []byte) *flow {
	f := &flow{b: keptBench(t, natConfig, mem, nil), vmSeq: 1000, serverSeq: 9000}
	b := f.b
	f.vm, f.vmp = b.attach("vm", Nic, header.MAC{})
	f.up, f.upp = b.attach("uplink", Uplink, macUplink)
	b.send(f.up, arpFrame(header.ARPReply, macGateway, ip4("198.18.0.1"), macUplink, ip4("198.18.0.10"), macUplink))
	b.send(f.vm, dhcpRequest(f.vm.MAC(), header.DHCPDiscover, 1, [4]byte{}))
	f.vmp.take()
	b.send(f.vm, dhcpRequest(f.vm.MAC(), header.DHCPRequest, 1, ip4("10.0.1.2")))
	if ack := dhcpReplyOf(t, f.vmp); ack.MessageType() != header.DHCPAck {
		t.Fatalf("DHCP reply %d, want ACK", ack.MessageType())
	}
	b.send(f.vm, arpFrame(header.ARPReply, f.vm.MAC(), ip4("10.0.1.2"), routerMACNic, ip4("10.0.1.1"), routerMACNic))
	f.vmp.take()
	b.send(f.vm, tcpFrame(f.vm.MAC(), routerMACNic, ip4("10.0.1.2"), serverIP, 5000, 80, header.TCPSyn, f.vmSeq, 0, nil))
	syn := f.outOf(t, f.upp)
	f.natPort = syn.sport
	b.send(f.up, tcpFrame(macGateway, macUplink, serverIP, ip4("198.18.0.10"), 80, f.natPort, header.TCPSyn|header.TCPAck, f.serverSeq, f.vmSeq+1, nil))
	f.outOf(t, f.vmp)
	f.vmSeq++
	f.serverSeq++
	b.send(f.vm, tcpFrame(f.vm.MAC(), routerMACNic, ip4("10.0.1.2"), serverIP, 5000, 80, header.TCPAck, f.vmSeq, f.serverSeq, nil))
	f.outOf(t, f.upp)
	return f
}

// outOf is the one frame p got.
func (f *flow) outOf(t *testing.T, p *fakePort) parsed {
	t.Helper()
	out := p.take()
	if len(out) != 1 {
		t.Fatalf("%d frames out, want 1", len(out))
	}
	return parse(t, out[0])
}

// restart is a new router on the same state region, as after the old one was killed: the
// sessions come back one by one, the uplink first.
func (f *flow) restart(t *testing.T, cfg string, mem []byte) {
	f.b = keptBench(t, cfg, mem, f.b.clock)
	f.up, f.upp = f.b.attach("uplink", Uplink, macUplink)
	f.vm, f.vmp = f.b.attach("vm", Nic, header.MAC{})
}

// segments sends a data segment each way and checks that they pass with the NAT port of the
// connection, to the MACs known before the restart (no ARP request).
func (f *flow) segments(t *testing.T) {
	t.Helper()
	f.b.send(f.vm, tcpFrame(f.vm.MAC(), routerMACNic, ip4("10.0.1.2"), serverIP, 5000, 80, header.TCPAck, f.vmSeq, f.serverSeq, []byte("up")))
	if p := f.outOf(t, f.upp); p.ip == nil || p.ip.Protocol() != header.ProtoTCP || p.sport != f.natPort || p.src() != ip4("198.18.0.10") || p.eth.Dst() != macGateway {
		t.Fatalf("VM's segment left from %v:%d to %s, want from port %d to the gateway", p.src(), p.sport, p.eth.Dst(), f.natPort)
	}
	f.b.send(f.up, tcpFrame(macGateway, macUplink, serverIP, ip4("198.18.0.10"), 80, f.natPort, header.TCPAck, f.serverSeq, f.vmSeq+2, []byte("down")))
	if p := f.outOf(t, f.vmp); p.ip == nil || p.ip.Protocol() != header.ProtoTCP || p.dst() != ip4("10.0.1.2") || p.dport != 5000 || p.eth.Dst() != f.vm.MAC() {
		t.Fatalf("server's segment reached %v:%d at %s", p.dst(), p.dport, p.eth.Dst())
	}
}

// A router that starts on the state region of one that was killed goes on with the same
// flows: the TCP connection keeps its NAT port and open state, the ARP caches spare asking
// again, and the VM's lease stays its own (a renewal is acknowledged, another client gets
// another address).
func TestRestartResumesFlows(t *testing.T) {
	mem := make([]byte, region.Size(64))
	f := keptFlow(t, mem)
	f.restart(t, natConfig, mem)
	if !strings.Contains(f.b.log.String(), `msg="state region: restored" dhcp_clients=0 arp_entries=2 dhcp_leases=1 link_states=1 dropped=0`) {
		t.Fatalf("log:\n%s", f.b.log)
	}
	f.segments(t)
	for l := range f.b.r.links {
		if l.tcp.State != tcpstate.Open || l.owner != f.vm {
			t.Fatalf("restored link %v owned by %q, want open, the VM's", l.tcp.State, l.owner.label)
		}
	}
	f.b.send(f.vm, dhcpRequest(f.vm.MAC(), header.DHCPRequest, 7, ip4("10.0.1.2")))
	if ack := dhcpReplyOf(t, f.vmp); ack.MessageType() != header.DHCPAck || ack.YIAddr() != ip4("10.0.1.2") {
		t.Fatalf("renewal answered with %d for %v", ack.MessageType(), ack.YIAddr())
	}
	other := header.MAC{2, 9, 9, 9, 9, 9}
	f.b.send(f.vm, dhcpRequest(other, header.DHCPDiscover, 8, [4]byte{}))
	if offer := dhcpReplyOf(t, f.vmp); offer.YIAddr() == ip4("10.0.1.2") {
		t.Fatal("the VM's address offered to another client")
	}
	// The connection closes as the one before the restart would.
	f.b.send(f.vm, tcpFrame(f.vm.MAC(), routerMACNic, ip4("10.0.1.2"), serverIP, 5000, 80, header.TCPFin|header.TCPAck, f.vmSeq, f.serverSeq, nil))
	f.b.send(f.up, tcpFrame(macGateway, macUplink, serverIP, ip4("198.18.0.10"), 80, f.natPort, header.TCPFin|header.TCPAck, f.serverSeq, f.vmSeq+1, nil))
	f.b.send(f.vm, tcpFrame(f.vm.MAC(), routerMACNic, ip4("10.0.1.2"), serverIP, 5000, 80, header.TCPAck, f.vmSeq+1, f.serverSeq+1, nil))
	for l := range f.b.r.links {
		if l.tcp.State != tcpstate.Closed {
			t.Fatalf("link %v after both FINs were acknowledged", l.tcp.State)
		}
	}
}

// A second crash finds what the first restart restored and changed since: the region follows
// the router, not just its first life.
func TestRestartTwice(t *testing.T) {
	mem := make([]byte, region.Size(64))
	f := keptFlow(t, mem)
	f.restart(t, natConfig, mem)
	f.segments(t)
	f.restart(t, natConfig, mem)
	if !strings.Contains(f.b.log.String(), "arp_entries=2 dhcp_leases=1 link_states=1 dropped=0") {
		t.Fatalf("log:\n%s", f.b.log)
	}
	f.segments(t)
}

// Restored entries the config no longer creates are dropped, as a reconfiguration drops
// them, and their slots freed; so are those a live reconfiguration lets go.
func TestRestartDropsWhatTheConfigNoLongerCovers(t *testing.T) {
	mem := make([]byte, region.Size(64))
	f := keptFlow(t, mem)
	noTCP := strings.Replace(natConfig, `<tcp dst="0.0.0.0/0"><permit-any domain="uplink"/></tcp>`, "", 1)
	f.restart(t, noTCP, mem)
	if !strings.Contains(f.b.log.String(), "link_states=0 dropped=1") || len(f.b.r.links) != 0 {
		t.Fatalf("%d links; log:\n%s", len(f.b.r.links), f.b.log)
	}
	if n := f.b.r.keep.InUse(); n != 3 {
		t.Fatalf("%d slots in use, want 3 (two ARP entries, a lease)", n)
	}
	f.b.r.Configure(modelOf(t, strings.Replace(natConfig, `<dhcp-server ip_first="10.0.1.2"`, `<dhcp-server ip_first="10.0.1.3"`, 1)))
	if n := f.b.r.keep.InUse(); n != 2 {
		t.Fatalf("%d slots in use after the lease's address left the range, want 2", n)
	}
}

// A corrupt record is discarded with a log line and the rest restored; a region whose header
// does not hold is discarded as a whole. Either way the router routes as a new one would.
func TestCorruptStateRegionDiscarded(t *testing.T) {
	mem := make([]byte, region.Size(64))
	f := keptFlow(t, mem)
	var slot int32
	for l := range f.b.r.links {
		slot = l.slot
	}
	mem[int(slot)*region.SlotSize+40] ^= 0x10
	f.restart(t, natConfig, mem)
	if log := f.b.log.String(); !strings.Contains(log, "state region: records discarded") || !strings.Contains(log, "checksum does not hold") ||
		!strings.Contains(log, "arp_entries=2 dhcp_leases=1 link_states=0") {
		t.Fatalf("log:\n%s", log)
	}
	// The server's segment has no link now; the VM's opens a new one.
	f.b.send(f.vm, tcpFrame(f.vm.MAC(), routerMACNic, ip4("10.0.1.2"), serverIP, 5000, 80, header.TCPAck, f.vmSeq, f.serverSeq, nil))
	if p := f.outOf(t, f.upp); p.ip == nil || p.ip.Protocol() != header.ProtoTCP || p.sport < 49152 {
		t.Fatalf("segment after the restart left from port %d", p.sport)
	}

	mem[3] ^= 0xff
	f.restart(t, natConfig, mem)
	if log := f.b.log.String(); !strings.Contains(log, "state region discarded") || strings.Contains(log, "state region: restored") {
		t.Fatalf("log:\n%s", log)
	}
	f.b.send(f.vm, tcpFrame(f.vm.MAC(), routerMACNic, ip4("10.0.1.2"), serverIP, 5001, 80, header.TCPSyn, 1, 0, nil))
	if out := f.upp.take(); len(out) != 1 || parse(t, out[0]).arp == nil {
		t.Fatalf("%d frames after a discarded region, want the ARP request for the gateway", len(out))
	}
}

// The Sculpt shape behind DHCP: a restarted router keeps the uplink's DHCP lease (it does not
// ask again) and the DNS config its own DHCP server hands on.
func TestRestartKeepsDHCPClientLease(t *testing.T) {
	lan := newBench(t, lanConfig)
	mem := make([]byte, region.Size(16))
	sculpt := keptBench(t, sculptBehindDHCP, mem, lan.clock)
	wire, wirePort := lan.attach("sculpt", Nic, header.MAC{})
	up, upPort := sculpt.attach("nic_drv -> ", Uplink, wire.MAC())
	for k := 0; k < 4; k++ {
		for _, f := range upPort.take() {
			lan.send(wire, f)
		}
		for _, f := range wirePort.take() {
			sculpt.send(up, f)
		}
	}
	if !up.LinkUp() || !sculpt.r.domains["uplink"].ip.valid {
		t.Fatal("uplink not configured by DHCP")
	}
	sculpt = keptBench(t, sculptBehindDHCP, mem, lan.clock)
	if !strings.Contains(sculpt.log.String(), "dhcp_clients=1") {
		t.Fatalf("log:\n%s", sculpt.log)
	}
	up, upPort = sculpt.attach("nic_drv -> ", Uplink, wire.MAC())
	vm, vmPort := sculpt.attach("vm", Nic, header.MAC{})
	if out := upPort.take(); len(out) != 0 {
		t.Fatalf("restarted router sent %d frames on its uplink (DHCP again?)", len(out))
	}
	sculpt.send(vm, dhcpRequest(vm.MAC(), header.DHCPDiscover, 1, [4]byte{}))
	if d, _ := dhcpReplyOf(t, vmPort).OptionIPv4(header.OptDNSServer); d != ip4("198.18.7.53") {
		t.Fatalf("VM offered DNS %v", d)
	}
	if got := sculpt.r.domains["uplink"].ip.addr; got != ip4("198.18.7.100") {
		t.Fatalf("uplink address %v after the restart", got)
	}
}

// keptState lists what the state region keeps of r, sorted: link states (tuples, NAT port,
// TCP state, owner), ARP entries a route can use and DHCP leases.
func keptState(r *Router) string {
	var lines []string
	for l := range r.links {
		lines = append(lines, fmt.Sprintf("link %s %v %v %v %v %d %v %d %d", l.sides[0].dom.name, l.sides[0].key, l.sides[1].key,
			l.sides[0].key6, l.sides[1].key6, l.natPort, l.tcp, l.closedAt, l.owner.key))
	}
	for _, d := range r.domains {
		for ip, mac := range d.arp {
			if d.ip.inSubnet(ip) && ip != d.ip.addr {
				lines = append(lines, fmt.Sprintf("arp %s %v %v", d.name, ip, mac))
			}
		}
		if d.dhcpServer != nil {
			for _, a := range d.dhcpServer.allocs {
				lines = append(lines, fmt.Sprintf("lease %s %v %v %v %d %d", d.name, a.mac, a.ip, a.bound, a.deadline.UnixNano(), a.ifc.key))
			}
		}
		if c := d.slaac; c != nil && d.ip6.valid {
			lines = append(lines, fmt.Sprintf("slaac %s %x %v %x %v %d %d %d %d %v %d", d.name, d.ip6.addr, d.ip6.prefix, d.ip6.gateway, d.ip6.hasGW,
				c.validEnd, c.preferredEnd, c.routerEnd, c.mtu, c.rdnss, c.rdnssEnd))
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// FuzzRestore restores records that check out in the region but say anything (a router that
// was taken over could write them): the fields come from the input, the names from the
// config's domains and sessions or not. Nothing may panic, what the router takes must be
// consistent (a router restarted on its region finds the same again), and it routes.
func FuzzRestore(f *testing.F) {
	f.Add([]byte("\x00\x06\x01\x00\x0a\x00\x01\x02\xc6\x12\x05\x05\x13\x88\x00\x50\xc0\x00"))
	f.Add([]byte("\x01\x00\x01\x0a\x00\x01\x02\x02\x02\x02\x02\x02\x01\x02\x00\x00\x0a\x00\x01\x02\x01"))
	names := []region.Name{region.NameOf("default"), region.NameOf("uplink"), region.NameOf("vm"), region.NameOf("other")}
	f.Fuzz(func(t *testing.T, data []byte) {
		next := func() byte {
			if len(data) == 0 {
				return 0
			}
			b := data[0]
			data = data[1:]
			return b
		}
		ip := func() [4]byte { // mostly the config's subnets
			switch next() % 4 {
			case 0:
				return [4]byte{10, 0, 1, next()}
			case 1:
				return [4]byte{198, 18, 0, next()}
			case 2:
				return [4]byte{198, 18, 5, 5}
			}
			return [4]byte{next(), next(), next(), next()}
		}
		port := func() uint16 { return uint16(next())<<8 | uint16(next()) }
		name := func() region.Name { return names[int(next())%len(names)] }
		mem := make([]byte, region.Size(32))
		reg, _, err := region.Open(mem)
		if err != nil {
			t.Fatal(err)
		}
		for len(data) > 0 {
			switch next() % 3 {
			case 0:
				l := &region.Link{Proto: []uint8{header.ProtoTCP, header.ProtoUDP, header.ProtoICMP}[next()%3],
					Client: name(), Server: name(), Owner: name(), ClientTuple: region.Tuple{Src: ip(), Dst: ip(), Sport: port(), Dport: port()},
					ServerTuple: region.Tuple{Src: ip(), Dst: ip(), Sport: port(), Dport: port()}, NATPort: port()}
				if l.Proto == header.ProtoICMP {
					l.ClientTuple.Dport, l.ServerTuple.Dport = l.ClientTuple.Sport, l.ServerTuple.Sport
				}
				if l.NATPort < 49152 {
					l.NATPort = 0
				}
				reg.Put(region.None, l)
			case 1:
				reg.Put(region.None, &region.ARP{Domain: name(), IP: ip(), MAC: [6]byte{2, next(), next(), 0, 0, next()}})
			default:
				reg.Put(region.None, &region.Lease{Domain: name(), Owner: name(), MAC: [6]byte{2, 2, 2, 2, 2, next()}, IP: ip(),
					Bound: next()%2 == 0, Deadline: int64(next()) * 1e9})
			}
		}
		b := keptBench(t, natConfig, mem, nil)
		again := keptBench(t, natConfig, bytes.Clone(mem), b.clock)
		if got, want := keptState(again.r), keptState(b.r); got != want {
			t.Fatalf("restarted again with\n%s\nthe restored router had\n%s", got, want)
		}
		vm, vmp := b.attach("vm", Nic, header.MAC{})
		up, _ := b.attach("uplink", Uplink, macUplink)
		b.send(vm, dhcpRequest(vm.MAC(), header.DHCPDiscover, 1, [4]byte{}))
		if len(vmp.take()) != 1 && len(b.r.domains["default"].dhcpServer.allocs) < 3 {
			t.Fatal("no DHCP offer with addresses left")
		}
		b.send(up, tcpFrame(macGateway, macUplink, serverIP, ip4("198.18.0.10"), 80, 49152, header.TCPAck, 1, 1, nil))
		b.r.Detach(vm)
		b.r.Detach(up)
		b.clock.advance(time.Hour)
		b.r.Tick()
	})
}
