package router

import (
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nicstack/nicstack/netdev"
	"github.com/nicstack/nicstack/netdev/header"
)

// threadCPU is the CPU time of the calling OS thread.
func threadCPU(b *testing.B) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchPort reuses one buffer, as a packet stream's bulk allocator would hand out slots.
type benchPort struct {
	buf  []byte
	sent int
}

func (p *benchPort) Alloc(n int) ([]byte, bool)    { return p.buf[:n], true }
func (p *benchPort) Submit([]byte, netdev.Offload) { p.sent++ }
func (p *benchPort) Flush()                        {}
func (p *benchPort) Release(uint64)                {}
func (p *benchPort) LinkState(bool)                {}

// BenchmarkForward measures the forwarding path for an existing link state, as Genode's
// test-nic_perf_router runs it: udp-forward (a client sends to the router's port, forwarded
// to a server in another domain) and NAT (a client behind NAT sends to the uplink). One op is
// one frame; allocs/op must be 0.
func BenchmarkForward(b *testing.B) {
	const cfg = `<config>
  <policy label="client" domain="client"/>
  <policy label="server" domain="server"/>
  <domain name="client" interface="10.0.1.1/24">
    <udp-forward port="7" domain="server" to="10.0.2.2"/>
    <udp dst="198.18.0.0/16"><permit-any domain="server"/></udp>
    <tcp dst="198.18.0.0/16"><permit-any domain="server"/></tcp>
  </domain>
  <domain name="server" interface="10.0.2.1/24" gateway="10.0.2.254">
    <nat domain="client" udp-ports="100" tcp-ports="100"/>
  </domain>
</config>`
	// nat-64flows sends round-robin over 64 flows, so that every frame misses the
	// last-lookup shortcut and takes the hash map; nat-tcp sends the data segments of one TCP
	// connection (its link state follows each).
	for _, mode := range []string{"udp-forward", "nat", "nat-64flows", "nat-tcp"} {
		for _, size := range []int{64, 1500} {
			b.Run(fmt.Sprintf("%s/%d", mode, size), func(b *testing.B) {
				r := New(Options{Clock: &fakeClock{t: time.Unix(1, 0)}, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
				m := modelOf(b, cfg)
				if len(m.Problems) > 0 {
					b.Fatal(m.Problems)
				}
				r.Configure(m)
				cp, sp := &benchPort{buf: make([]byte, 2048)}, &benchPort{buf: make([]byte, 2048)}
				client := r.Attach(Session{Label: "client", Kind: Nic, Port: cp})
				server := r.Attach(Session{Label: "server", Kind: Nic, Port: sp})
				payload := make([]byte, size-header.EthLen-20-8)
				var frames [][]byte
				if mode == "udp-forward" {
					r.Handle(server, arpFrame(header.ARPReply, server.MAC(), ip4("10.0.2.2"), routerMACNic, ip4("10.0.2.1"), routerMACNic), nil, 0)
					frames = append(frames, udpFrame(client.MAC(), routerMACNic, ip4("10.0.1.2"), ip4("10.0.1.1"), 5000, 7, payload))
				} else {
					r.Handle(server, arpFrame(header.ARPReply, macGateway, ip4("10.0.2.254"), routerMACNic, ip4("10.0.2.1"), routerMACNic), nil, 0)
					flows := 1
					if mode == "nat-64flows" {
						flows = 64
					}
					for k := 0; k < flows; k++ {
						if mode == "nat-tcp" {
							frames = append(frames, tcpFrame(client.MAC(), routerMACNic, ip4("10.0.1.2"), ip4("198.18.5.5"), 5000, 80, header.TCPAck, 1, 1, payload[12:]))
							break
						}
						frames = append(frames, udpFrame(client.MAC(), routerMACNic, ip4("10.0.1.2"), ip4("198.18.5.5"), uint16(5000+k), 9, payload))
					}
				}
				for _, f := range frames {
					r.Handle(client, f, nil, 0)
				}
				if sp.sent != len(frames) {
					b.Fatal("setup frames not forwarded")
				}
				max := r.MaxPacketsPerSignal()
				b.SetBytes(int64(size))
				b.ReportAllocs()
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				cpu0 := threadCPU(b)
				b.ResetTimer()
				for k := 0; k < b.N; k++ {
					r.Handle(client, frames[k%len(frames)], nil, 0)
					if k%max == max-1 {
						r.Flush()
					}
				}
				b.StopTimer()
				cpu := threadCPU(b) - cpu0
				if sp.sent != b.N+len(frames) {
					b.Fatalf("sent %d of %d", sp.sent, b.N+len(frames))
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/frame")
				// The machine is shared: CPU time of this thread is the steadier number.
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/frame")
			})
		}
	}
}

// TestForwardingDoesNotAllocate checks the per-frame paths of established traffic: a link
// state with NAT both ways, an <ip> rule and domain-local traffic.
func TestForwardingDoesNotAllocate(t *testing.T) {
	b, vm, _, up, _ := natBench(t)
	b.r.Configure(modelOf(t, strings.Replace(natConfig, `<icmp dst="0.0.0.0/0" domain="uplink"/>`,
		`<icmp dst="0.0.0.0/0" domain="uplink"/><ip dst="198.18.9.0/24" domain="uplink"/>`, 1)))
	bp := &benchPort{buf: make([]byte, 2048)}
	up.port, vm.port = bp, bp
	peer := b.r.Attach(Session{Label: "vm2", Kind: Nic, Port: bp})
	b.send(vm, arpFrame(header.ARPReply, peer.MAC(), ip4("10.0.1.3"), routerMACNic, ip4("10.0.1.1"), routerMACNic))
	out := udpFrameT(vm.MAC(), routerMACNic, ip4("10.0.1.2"), ip4("198.18.1.1"), 5000, 53, make([]byte, 100))
	back := udpFrameT(macGateway, macUplink, ip4("198.18.1.1"), ip4("198.18.0.10"), 53, 49152, make([]byte, 100))
	direct := ethFrame(vm.MAC(), routerMACNic, header.EtherTypeIPv4, ipPacket(47, ip4("10.0.1.2"), ip4("198.18.9.9"), make([]byte, 64)))
	local := udpFrameT(vm.MAC(), routerMACNic, ip4("10.0.1.2"), ip4("10.0.1.3"), 1, 2, make([]byte, 64))
	b.send(vm, out)
	for name, c := range map[string]struct {
		from *Interface
		f    []byte
	}{"nat out": {vm, out}, "nat back": {up, back}, "ip rule": {vm, direct}, "domain-local": {vm, local}} {
		sent := bp.sent
		allocs := testing.AllocsPerRun(200, func() { b.r.Handle(c.from, c.f, nil, 0); b.r.Flush() })
		if allocs != 0 || bp.sent == sent {
			t.Errorf("%s: %.1f allocations per frame, %d sent", name, allocs, bp.sent-sent)
		}
	}
}
