package netstack

import (
	"context"
	"io"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	gheader "gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/nicstack/nicstack/internal/iperf"
	"github.com/nicstack/nicstack/netdev/header"
)

// pair6 is two stacks back to back with static IPv6 addresses beside their IPv4 ones.
func pair6(t testing.TB, offload bool) (a, b *Stack) {
	t.Helper()
	ca := Config{MAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, Offload: offload, Address: netip.MustParsePrefix("198.18.0.1/24"),
		Address6: netip.MustParsePrefix("2001:db8::1/64")}
	cb := Config{MAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, Offload: offload, Address: netip.MustParsePrefix("198.18.0.2/24"),
		Address6: netip.MustParsePrefix("2001:db8::2/64")}
	a, b = newPairOf(t, ca, cb)
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// linkLocalOf is the link-local address gVisor makes from mac (modified EUI-64).
func linkLocalOf(mac net.HardwareAddr) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom16(header.LinkLocal(header.MAC(mac))), 64)
}

// waitAddresses waits until st uses every one of want (duplicate address detection takes a
// second), failing after a bound far above that.
func waitAddresses(t testing.TB, st *Stack, want ...netip.Prefix) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; {
		got := st.Addresses6()
		missing := slices.DeleteFunc(slices.Clone(want), func(p netip.Prefix) bool { return slices.Contains(got, p) })
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("addresses %v, still missing %v", got, missing)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// echo serves one TCP connection on ln by sending back what it reads.
func echo(t *testing.T, ln net.Listener) {
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = io.Copy(c, c)
	}()
	t.Cleanup(func() { ln.Close() })
}

// roundTrip dials address from st and checks that a message comes back; it returns the
// connection's local address.
func roundTrip(t *testing.T, st *Stack, network, address string) netip.AddrPort {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := st.DialContext(ctx, network, address, iperf.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	msg := []byte("hello over IPv6")
	if _, err := c.Write(msg); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != string(msg) {
		t.Fatalf("echo: %q, %v", got, err)
	}
	return c.LocalAddr().(*net.TCPAddr).AddrPort()
}

// TestIPv6StaticAndLinkLocal: two stacks talk TCP over their static IPv6 addresses and over
// the link-local ones made from their MACs; IPv4 works beside them on the same listener.
func TestIPv6StaticAndLinkLocal(t *testing.T) {
	a, b := pair6(t, false)
	waitAddresses(t, a, netip.MustParsePrefix("2001:db8::1/64"), linkLocalOf(a.MAC()))
	waitAddresses(t, b, netip.MustParsePrefix("2001:db8::2/64"), linkLocalOf(b.MAC()))

	ln, err := b.Listen("tcp6", ":7")
	if err != nil {
		t.Fatal(err)
	}
	echo(t, ln)
	if local := roundTrip(t, a, "tcp", "[2001:db8::2]:7"); local.Addr() != netip.MustParseAddr("2001:db8::1") {
		t.Fatalf("local address %v, want 2001:db8::1", local)
	}

	ln, err = b.Listen("tcp", ":8") // both families
	if err != nil {
		t.Fatal(err)
	}
	echo(t, ln)
	ll := linkLocalOf(b.MAC()).Addr()
	if local := roundTrip(t, a, "tcp6", netip.AddrPortFrom(ll.WithZone("eth0"), 8).String()); local.Addr().WithZone("") != linkLocalOf(a.MAC()).Addr() {
		t.Fatalf("local address %v, want %v", local, linkLocalOf(a.MAC()).Addr())
	}
	ln, err = b.Listen("tcp", ":9")
	if err != nil {
		t.Fatal(err)
	}
	echo(t, ln)
	if local := roundTrip(t, a, "tcp", "198.18.0.2:9"); local.Addr() != netip.MustParseAddr("198.18.0.1") {
		t.Fatalf("IPv4 through a dual-stack listener: local address %v", local)
	}

	if _, err := a.DialContext(context.Background(), "tcp4", "[2001:db8::2]:7", iperf.Options{}); err == nil {
		t.Fatal("tcp4 dialled an IPv6 address")
	}
	if _, err := b.Listen("tcp6", "198.18.0.2:10"); err == nil {
		t.Fatal("tcp6 listened on an IPv4 address")
	}
}

// TestIPv6Iperf: iperf moves data over IPv6 between two stacks, TCP both ways (with TSO
// super-frames, GSOTCPv6) and UDP, and reports the IPv6 MSS.
func TestIPv6Iperf(t *testing.T) {
	for _, tc := range []struct {
		name    string
		offload bool
		args    string
	}{
		{"tcp", false, "-t 0.5 -6"},
		{"tcp-reverse-tso", true, "-t 0.5 -6 -R -J"},
		{"udp", false, "-t 0.5 -6 -u -b 20M"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client, server := pair6(t, tc.offload)
			waitAddresses(t, client, netip.MustParsePrefix("2001:db8::1/64"))
			waitAddresses(t, server, netip.MustParsePrefix("2001:db8::2/64"))
			ln, err := server.Listen("tcp6", ":5201")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			srvDone := make(chan error, 1)
			go func() { srvDone <- (&iperf.Server{Network: server, OneOff: true, Output: io.Discard}).Serve(ctx, ln) }()
			cmd, err := iperf.ParseCommand(append([]string{"-c", "2001:db8::2"}, strings.Fields(tc.args)...))
			if err != nil {
				t.Fatal(err)
			}
			cfg := cmd.ClientConfig(client)
			cfg.Output = io.Discard
			rep, err := iperf.RunClient(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := <-srvDone; err != nil {
				t.Fatal(err)
			}
			if got := rep.Received(); got.Bytes == 0 {
				t.Fatalf("no data: %+v", rep.End)
			}
			if c := rep.Start.Connected; len(c) == 0 || c[0].LocalHost != "2001:db8::1" || c[0].RemoteHost != "2001:db8::2" {
				t.Fatalf("connected %+v", c)
			}
			if !cmd.UDP && *rep.Start.TCPMSSDefault != 1500-40-20 {
				t.Fatalf("MSS %d, want %d", rep.Start.TCPMSSDefault, 1500-40-20)
			}
			t.Logf("%s: %.0f Mbit/s", tc.name, rep.Received().BitsPerSecond/1e6)
		})
	}
}

// router is a test's IPv6 router on one link: it sends router advertisements to a stack and
// notes the router solicitations the stack sends.
type router struct {
	mu  sync.Mutex
	rss int
}

var (
	routerMAC6 = header.MAC{2, 0, 0, 0, 0, 0xfe}
	routerLL   = header.LinkLocal(routerMAC6)
)

func (r *router) WriteFrames(frames []Frame) int {
	for _, f := range frames {
		eth, ok := header.NewEth(f.Data)
		if !ok || eth.Type() != header.EtherTypeIPv6 {
			continue
		}
		ip, ok := header.NewIPv6(eth.Payload())
		if !ok {
			continue
		}
		c := header.WalkIPv6(ip)
		if c.Proto == header.ProtoICMPv6 && len(ip) > c.Offset && ip[c.Offset] == header.NDPRouterSolicit {
			r.mu.Lock()
			r.rss++
			r.mu.Unlock()
		}
	}
	return len(frames)
}

func (r *router) solicitations() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rss
}

// advertise builds a router advertisement of prefix (on-link, autonomous) from the router's
// link-local address to all nodes, with its MAC, as a frame.
func advertise(prefix netip.Prefix, lifetime uint16) []byte {
	b := make([]byte, 256)
	allNodes := [16]byte{0: 0xff, 1: 0x02, 15: 1}
	w := header.StartRA(b[header.EthLen:], routerLL, allNodes, header.RAFields{CurHopLimit: 64, Lifetime: lifetime})
	w.LinkAddr(header.NDPOptSourceLinkAddr, routerMAC6)
	w.Prefix(header.NDPPrefix{Len: uint8(prefix.Bits()), Flags: header.PrefixL | header.PrefixA, Valid: 3600, Preferred: 1800,
		Prefix: prefix.Addr().As16()})
	ip := w.Finish()
	eth := header.Eth(b)
	eth.SetDst(header.MulticastMAC(allNodes))
	eth.SetSrc(routerMAC6)
	eth.SetType(header.EtherTypeIPv6)
	return b[:header.EthLen+len(ip)]
}

// TestSLAAC: the stack solicits routers when it comes up; from an advertisement it makes a
// SLAAC address of the prefix and its MAC, says so through OnAddress, and routes the prefix
// on-link and everything else through the router's link-local address.
func TestSLAAC(t *testing.T) {
	r := &router{}
	events := make(chan AddressEvent, 16)
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	st, err := New(Config{MAC: mac, OnAddress: func(ev AddressEvent) { events <- ev }}, r)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for deadline := time.Now().Add(20 * time.Second); r.solicitations() == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no router solicitation")
		}
	}
	prefix := netip.MustParsePrefix("2001:db8:1::/64")
	st.DeliverFrames([]Frame{{Data: advertise(prefix, 1800)}})
	want := netip.PrefixFrom(netip.AddrFrom16(header.SLAACAddr(prefix.Addr().As16(), header.MAC(mac))), 64)
	waitAddresses(t, st, want, linkLocalOf(mac))
	seen := map[netip.Prefix]bool{}
	for len(seen) < 2 {
		select {
		case ev := <-events:
			if !ev.Ready {
				t.Fatalf("event %+v", ev)
			}
			seen[ev.Prefix] = true
		case <-time.After(20 * time.Second):
			t.Fatalf("events %v, want %v and %v", seen, want, linkLocalOf(mac))
		}
	}
	if !seen[want] || !seen[linkLocalOf(mac)] {
		t.Fatalf("events %v, want %v and %v", seen, want, linkLocalOf(mac))
	}
	var routes []tcpip.Route
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if routes = st.s.GetRouteTable(); len(routes) >= 3 {
			break
		}
	}
	hasRoute := func(dst tcpip.Subnet, gw tcpip.Address) bool {
		return slices.ContainsFunc(routes, func(r tcpip.Route) bool { return r.Destination == dst && r.Gateway == gw })
	}
	onLink := tcpip.AddressWithPrefix{Address: tcpip.AddrFrom16(prefix.Addr().As16()), PrefixLen: 64}.Subnet()
	if !hasRoute(onLink, tcpip.Address{}) || !hasRoute(gheader.IPv6EmptySubnet, tcpip.AddrFrom16(routerLL)) {
		t.Fatalf("routes %v: want %v on-link and a default route through %v", routes, prefix, netip.AddrFrom16(routerLL))
	}
}

// TestIPv6ChecksumCheck: the link's check of an IPv6 packet's upper-layer checksum, past a
// destination options header: a right UDP checksum passes, a flipped byte or a UDP checksum of
// 0 does not, and the check allocates nothing.
func TestIPv6ChecksumCheck(t *testing.T) {
	src, dst := netip.MustParseAddr("2001:db8::1").As16(), netip.MustParseAddr("2001:db8::2").As16()
	dstOpts := []byte{header.ProtoUDP, 0, 1, 4, 0, 0, 0, 0} // next header UDP, 8 bytes, PadN
	udp := []byte{0x12, 0x34, 0x00, 0x09, 0, 13, 0, 0, 'h', 'e', 'l', 'l', 'o'}
	sum := header.Checksum(udp, header.PseudoSum6(src, dst, header.ProtoUDP, len(udp)))
	udp[6], udp[7] = byte(sum>>8), byte(sum)
	pkt := make([]byte, header.IPv6Len, header.IPv6Len+len(dstOpts)+len(udp))
	pkt = append(append(pkt, dstOpts...), udp...)
	header.PutIPv6(pkt, len(dstOpts)+len(udp), header.ProtoDstOpts, 64, src, dst)
	if !ipv6ChecksumsValid(pkt) {
		t.Fatal("a right checksum failed")
	}
	if n := testing.AllocsPerRun(100, func() { ipv6ChecksumsValid(pkt) }); n != 0 {
		t.Errorf("%v allocations per check", n)
	}
	bad := slices.Clone(pkt)
	bad[len(bad)-1] ^= 1
	if ipv6ChecksumsValid(bad) {
		t.Error("a flipped byte passed")
	}
	zero := slices.Clone(pkt)
	zero[header.IPv6Len+len(dstOpts)+6], zero[header.IPv6Len+len(dstOpts)+7] = 0, 0
	if ipv6ChecksumsValid(zero) {
		t.Error("a UDP checksum of 0 passed over IPv6")
	}
}

// TestSolicitRoutersAgain: SolicitRouters starts gVisor's solicitations anew: after the first
// round's one, a new round brings more than the three a round sends.
func TestSolicitRoutersAgain(t *testing.T) {
	r := &router{}
	st, err := New(Config{MAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}}, r)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for deadline := time.Now().Add(20 * time.Second); r.solicitations() == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no router solicitation")
		}
	}
	st.SolicitRouters()
	for deadline := time.Now().Add(30 * time.Second); r.solicitations() < 4; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d router solicitations, want a new round's on top of the first's", r.solicitations())
		}
	}
}

// TestDefaultRouteWaitsForGlobalAddress: a router's advertisement gives a default route only
// once an address beyond link-local passed duplicate address detection; before, a connection
// to a global address would take the link-local source and be dropped at the router.
func TestDefaultRouteWaitsForGlobalAddress(t *testing.T) {
	d := newNDPEvents()
	ll, global := tcpip.AddrFrom16(routerLL), tcpip.AddrFrom16(netip.MustParseAddr("2001:db8:1::2").As16())
	d.OnOffLinkRouteUpdated(nicID, gheader.IPv6EmptySubnet, ll, gheader.MediumRoutePreference)
	d.OnDuplicateAddressDetectionResult(nicID, tcpip.AddrFrom16(linkLocalOf(net.HardwareAddr{2, 0, 0, 0, 0, 1}).Addr().As16()), &stack.DADSucceeded{})
	if routes, ok, _ := d.take(); ok || len(routes) != 1 {
		t.Fatalf("with a link-local address only: routes %v, global %v", routes, ok)
	}
	d.OnDuplicateAddressDetectionResult(nicID, global, &stack.DADSucceeded{})
	if _, ok, _ := d.take(); !ok {
		t.Fatal("the SLAAC address passed DAD: want the default route")
	}
	d.OnAutoGenAddressInvalidated(nicID, tcpip.AddressWithPrefix{Address: global, PrefixLen: 64})
	if _, ok, _ := d.take(); ok {
		t.Fatal("the address's lifetime ended: want no default route")
	}
}
