package router

import (
	"strings"
	"testing"

	"github.com/nicstack/nicstack/router/proto"
	"github.com/nicstack/nicstack/runtime/packetstream"
)

// FuzzRouterFrame feeds any bytes as frames from any interface: the input is a sequence of
// records (interface byte, offload flag byte, length byte, frame bytes) so that one input can
// open a link state and then hit it. Nothing may panic, and what the router keeps (held
// frames, link states) stays bounded.
func FuzzRouterFrame(f *testing.F) {
	vmMAC := proto.MAC{2, 2, 2, 2, 2, 1}
	seed := func(ifc byte, frames ...[]byte) []byte {
		var out []byte
		for _, fr := range frames {
			if len(fr) > 255 {
				fr = fr[:255]
			}
			out = append(out, ifc, 0, byte(len(fr)))
			out = append(out, fr...)
		}
		return out
	}
	f.Add(seed(0, udpFrameT(vmMAC, routerMACNic, ip4("10.0.1.2"), ip4("198.18.1.1"), 5000, 53, []byte("q"))))
	f.Add(seed(0, dhcpRequest(vmMAC, proto.DHCPDiscover, 1, [4]byte{})))
	f.Add(seed(1, arpFrame(proto.ARPReply, macGateway, ip4("198.18.0.1"), macUplink, ip4("198.18.0.10"), macUplink)))
	f.Add(seed(0, tcpFrame(vmMAC, routerMACNic, ip4("10.0.1.2"), ip4("198.18.1.1"), 4000, 80, proto.TCPSyn, 1, 0, nil)))
	f.Add(seed(0, icmpEcho(vmMAC, routerMACNic, ip4("10.0.1.2"), ip4("10.0.1.1"), proto.ICMPEchoRequest, 1, 1)))
	f.Add(seed(1, tcpFrame(macGateway, macUplink, ip4("198.18.1.1"), ip4("198.18.0.10"), 5, 80, proto.TCPSyn, 1, 0, nil)))
	cfg := xmlNode(f, strings.Replace(natConfig, `verbose_packet_drop="yes"`, ``, 1))
	f.Fuzz(func(t *testing.T, data []byte) {
		b, _ := newBenchNode(t, cfg)
		vm, _ := b.attach("vm", Nic, proto.MAC{})
		up, _ := b.attach("uplink", Uplink, macUplink)
		b.send(up, arpFrame(proto.ARPReply, macGateway, ip4("198.18.0.1"), macUplink, ip4("198.18.0.10"), macUplink))
		ifs := []*Interface{vm, up}
		id := uint64(0)
		for len(data) >= 3 {
			i, flags, n := ifs[int(data[0])%len(ifs)], data[1], int(data[2])
			data = data[3:]
			if n > len(data) {
				n = len(data)
			}
			frame := append([]byte(nil), data[:n]...)
			data = data[n:]
			off := packetstream.Offload{}
			if flags&1 != 0 {
				off.Flags = packetstream.OffloadNeedsCsum
			}
			id++
			b.r.Handle(i, frame, &off, id)
			if flags&2 != 0 {
				b.clock.advance(1e9 * 5)
				b.r.Tick()
			}
		}
		b.r.Flush()
		if len(b.r.waiters) > maxHeldPerInterface*len(ifs) || len(b.r.links) > maxLinksPerInterface*len(ifs) {
			t.Fatalf("%d held frames, %d link states", len(b.r.waiters), len(b.r.links))
		}
		for _, d := range b.r.domains {
			if len(d.arp) > maxARPEntries {
				t.Fatalf("%d ARP entries", len(d.arp))
			}
		}
		b.r.Report()
		b.r.Detach(vm)
		b.r.Detach(up)
		if len(b.r.waiters) != 0 || len(b.r.links) != 0 {
			t.Fatal("held frames or link states left after detaching everything")
		}
	})
}
