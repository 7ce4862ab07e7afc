package router

import (
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"testing"
	"time"

	"github.com/nicstack/nicstack/netdev/header"
)

// familyConfig routes the client's UDP to the server domain's gateway, over both IP versions;
// %s is the server domain's <nat> (empty: routed, the addresses as they were).
const familyConfig = `<config>
  <policy label="client" domain="client"/> <policy label="server" domain="server"/>
  <domain name="client" interface="10.0.1.1/24" interface_ipv6="2001:db8:1::1/64">
    <udp dst="198.18.0.0/16"><permit-any domain="server"/></udp>
    <udp dst="2001:db8:9::/48"><permit-any domain="server"/></udp>
  </domain>
  <domain name="server" interface="10.0.2.1/24" gateway="10.0.2.254" interface_ipv6="2001:db8:2::1/64" gateway_ipv6="fe80::1">
    %s
  </domain>
</config>`

// BenchmarkForwardFamilies measures BenchmarkForward's path for an existing link state over
// IPv4 and IPv6 side by side, routed and translated (NAT, NAT66): one UDP flow from the client
// to an off-link host through the server domain's gateway. One op is one frame of the size
// on the wire; allocs/op must be 0. cpu-ns/frame of ipv6 against ipv4 is the router's cost
// of IPv6 (issue 35).
func BenchmarkForwardFamilies(b *testing.B) {
	for _, mode := range []string{"routed", "nat"} {
		for _, ip := range []int{4, 6} {
			for _, size := range []int{64, 1500} {
				b.Run(fmt.Sprintf("%s/ipv%d/%d", mode, ip, size), func(b *testing.B) { benchFamily(b, mode, ip, size) })
			}
		}
	}
}

func benchFamily(b *testing.B, mode string, ip, size int) {
	nat := ""
	if mode == "nat" {
		nat = `<nat domain="client" udp-ports="100"/>`
	}
	r := New(Options{Clock: &fakeClock{t: time.Unix(1, 0)}, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	m := modelOf(b, fmt.Sprintf(familyConfig, nat))
	if len(m.Problems) > 0 {
		b.Fatal(m.Problems)
	}
	r.Configure(m)
	cp, sp := &benchPort{buf: make([]byte, 2048)}, &benchPort{buf: make([]byte, 2048)}
	client := r.Attach(Session{Label: "client", Kind: Nic, Port: cp})
	server := r.Attach(Session{Label: "server", Kind: Nic, Port: sp})
	var frame []byte
	if ip == 4 {
		r.Handle(server, arpFrame(header.ARPReply, macGateway, ip4("10.0.2.254"), routerMACNic, ip4("10.0.2.1"), routerMACNic), nil, 0)
		frame = udpFrame(client.MAC(), routerMACNic, ip4("10.0.1.2"), ip4("198.18.5.5"), 5000, 9, make([]byte, size-header.EthLen-20-header.UDPLen))
	} else {
		r.domains["server"].nd[gwLL6] = macGateway
		src, dst := addr6("2001:db8:1::2"), addr6("2001:db8:9::5")
		frame = ip6Frame(client.MAC(), routerMACNic, src, dst, header.ProtoUDP, 64,
			udp6(src, dst, 5000, 9, make([]byte, size-header.EthLen-header.IPv6Len-header.UDPLen)))
	}
	sp.sent = 0
	r.Handle(client, frame, nil, 0)
	if sp.sent != 1 {
		b.Fatal("the setup frame was not forwarded")
	}
	max := r.MaxPacketsPerSignal()
	b.SetBytes(int64(size))
	b.ReportAllocs()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cpu0 := threadCPU(b)
	b.ResetTimer()
	for k := 0; k < b.N; k++ {
		r.Handle(client, frame, nil, 0)
		if k%max == max-1 {
			r.Flush()
		}
	}
	b.StopTimer()
	cpu := threadCPU(b) - cpu0
	if sp.sent != b.N+1 {
		b.Fatalf("sent %d of %d", sp.sent, b.N+1)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/frame")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/frame")
}
