package router

import (
	"bytes"
	"testing"

	"github.com/nicstack/nicstack/netdev/header"
)

// TestDomainIsHub: an IPv4 packet to another address of its domain's subnet, the subnet's
// broadcast address included, goes unchanged (Ethernet addresses too) to every other
// interface of the domain and to none of another domain, without ARP (Genode's
// _domain_broadcast from _handle_ip).
func TestDomainIsHub(t *testing.T) {
	b := newBench(t, natConfig)
	vm, vmp := b.attach("vm", Nic, header.MAC{})
	vm2, vm2p := b.attach("vm2", Nic, header.MAC{})
	_, vm3p := b.attach("vm3", Nic, header.MAC{})
	_, upp := b.attach("uplink", Uplink, macUplink)
	for _, f := range [][]byte{
		udpFrameT(vm.MAC(), vm2.MAC(), ip4("10.0.1.2"), ip4("10.0.1.3"), 1, 2, []byte("to vm2")),
		udpFrameT(vm.MAC(), routerMACNic, ip4("10.0.1.2"), ip4("10.0.1.77"), 1, 2, []byte("to nobody known")),
		udpFrameT(vm.MAC(), header.Broadcast, ip4("10.0.1.2"), ip4("10.0.1.255"), 137, 137, []byte("subnet broadcast")),
		tcpFrame(vm.MAC(), vm2.MAC(), ip4("10.0.1.2"), ip4("10.0.1.3"), 4000, 80, header.TCPSyn, 1, 0, nil),
		icmpEcho(vm.MAC(), vm2.MAC(), ip4("10.0.1.2"), ip4("10.0.1.3"), header.ICMPEchoRequest, 1, 1),
	} {
		if v := b.send(vm, f); v != Done {
			t.Fatalf("verdict %v", v)
		}
		for n, p := range map[string]*fakePort{"vm2": vm2p, "vm3": vm3p} {
			if out := p.take(); len(out) != 1 || !bytes.Equal(out[0], f) {
				t.Fatalf("%s got %d frames, want the frame unchanged:\n%s", n, len(out), genodeFrame(f))
			}
		}
		if len(vmp.take()) != 0 || len(upp.take()) != 0 {
			t.Fatalf("frame went back to its sender or out of the domain: %s", genodeFrame(f))
		}
	}
	if len(b.r.links) != 0 || len(b.r.waiters) != 0 {
		t.Fatal("domain-local traffic made a link state or waited for ARP")
	}
	// Alone in its domain, a frame is done without going anywhere.
	b2 := newBench(t, natConfig)
	lone, _ := b2.attach("vm", Nic, header.MAC{})
	if v := b2.send(lone, udpFrameT(lone.MAC(), routerMACNic, ip4("10.0.1.2"), ip4("10.0.1.255"), 1, 2, nil)); v != Done || b2.r.Stats().Dropped.Load() != 0 {
		t.Fatal("a lone interface's domain-local frame was not simply done")
	}
}
