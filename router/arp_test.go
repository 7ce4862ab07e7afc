package router

import (
	"bytes"
	"testing"
	"time"

	"github.com/nicstack/nicstack/netdev"
	"github.com/nicstack/nicstack/netdev/header"
)

func TestARPHoldUntilReply(t *testing.T) {
	b := newBench(t, natConfig)
	vm, vmp := b.attach("vm", Nic, header.MAC{})
	up, upp := b.attach("uplink", Uplink, macUplink)
	f := udpFrameT(vm.MAC(), routerMACNic, ip4("10.0.1.2"), ip4("198.18.1.1"), 5000, 53, nil)
	if v := b.r.Handle(vm, f, nil, 7); v != Held {
		t.Fatalf("verdict %v, want Held", v)
	}
	// One ARP request for the gateway, from the router's address at the uplink.
	out := upp.take()
	if len(out) != 1 {
		t.Fatalf("uplink got %d frames", len(out))
	}
	p := parse(t, out[0])
	if p.arp == nil || p.arp.Op() != header.ARPRequest || p.arp.TargetIP() != ip4("198.18.0.1") ||
		p.arp.SenderIP() != ip4("198.18.0.10") || p.eth.Dst() != header.Broadcast {
		t.Fatal("no proper ARP request")
	}
	// A second frame to the same hop is held without asking again.
	f2 := udpFrameT(vm.MAC(), routerMACNic, ip4("10.0.1.2"), ip4("198.18.1.2"), 5001, 53, nil)
	if b.r.Handle(vm, f2, nil, 8) != Held || len(upp.take()) != 0 {
		t.Fatal("second frame not held quietly")
	}
	if len(vmp.released) != 0 {
		t.Fatal("held frames released early")
	}
	b.send(up, arpFrame(header.ARPReply, macGateway, ip4("198.18.0.1"), macUplink, ip4("198.18.0.10"), macUplink))
	out = upp.take()
	if len(out) != 2 {
		t.Fatalf("held frames sent: %d, want 2", len(out))
	}
	if parse(t, out[0]).eth.Dst() != macGateway {
		t.Fatal("held frame not sent to the resolved MAC")
	}
	if len(vmp.released) != 2 || vmp.released[0] != 7 || vmp.released[1] != 8 {
		t.Fatalf("released %v, want [7 8]", vmp.released)
	}
}

func TestARPTimeoutDropsHeld(t *testing.T) {
	b := newBench(t, natConfig)
	vm, vmp := b.attach("vm", Nic, header.MAC{})
	_, upp := b.attach("uplink", Uplink, macUplink)
	b.r.Handle(vm, udpFrameT(vm.MAC(), routerMACNic, ip4("10.0.1.2"), ip4("198.18.1.1"), 5000, 53, nil), nil, 3)
	upp.take()
	b.clock.advance(9 * time.Second)
	b.r.Tick()
	if len(vmp.released) != 0 {
		t.Fatal("released before arp_request_timeout_sec")
	}
	b.clock.advance(time.Second)
	b.r.Tick()
	if len(vmp.released) != 1 || b.r.Stats().ARPTimeouts.Load() != 1 {
		t.Fatalf("released %v, timeouts %d", vmp.released, b.r.Stats().ARPTimeouts.Load())
	}
	if len(b.r.links) != 0 {
		t.Fatal("a link state was made for a frame that never left")
	}
	// The next frame asks again.
	b.r.Handle(vm, udpFrameT(vm.MAC(), routerMACNic, ip4("10.0.1.2"), ip4("198.18.1.1"), 5000, 53, nil), nil, 4)
	if len(upp.take()) != 1 {
		t.Fatal("no new ARP request after the timeout")
	}
}

// TestARPWaiterPerAddress: as Genode's Arp_waiter, one waiter per address asks once and holds
// every frame for it, however many (only the client's stream bounds them); its timeout runs
// from its first frame; a leaving interface takes its frames along and cancels the waiters it
// made, dropping the frames of others.
func TestARPWaiterPerAddress(t *testing.T) {
	b := newBench(t, natConfig)
	vm, vmp := b.attach("vm", Nic, header.MAC{})
	vm2, vm2p := b.attach("vm2", Nic, header.MAC{})
	_, upp := b.attach("uplink", Uplink, macUplink)
	const n = 200
	for k := 0; k < n; k++ {
		f := udpFrameT(vm.MAC(), routerMACNic, ip4("10.0.1.2"), ip4("198.18.1.1"), uint16(1000+k), 53, nil)
		if v := b.r.Handle(vm, f, nil, uint64(k)); v != Held {
			t.Fatalf("frame %d: verdict %v", k, v)
		}
		if k == 0 {
			b.clock.advance(5 * time.Second)
		}
	}
	b.r.Flush()
	if len(upp.take()) != 1 || len(b.r.waiters) != 1 || len(b.r.waiters[0].frames) != n {
		t.Fatal("not one ARP request and one waiter holding every frame")
	}
	if vm.heldBytes != n*len(udpFrameT(vm.MAC(), routerMACNic, ip4("10.0.1.2"), ip4("198.18.1.1"), 1, 53, nil)) {
		t.Fatalf("held bytes %d", vm.heldBytes)
	}
	// Held shows the queue the batch left: every frame, the oldest held five seconds ago.
	if d := vm.Held(b.clock.t); d.Frames != n || d.Bytes != uint64(vm.heldBytes) || d.Sojourn != 5*time.Second {
		t.Fatalf("vm holds %+v, want %d frames of %d bytes, the oldest 5s", d, n, vm.heldBytes)
	}
	// vm2's frame for another address in the uplink's subnet makes a second waiter.
	b.r.Handle(vm2, udpFrameT(vm2.MAC(), routerMACNic, ip4("10.0.1.3"), ip4("198.18.0.77"), 1, 53, nil), nil, 500)
	// vm's frame for that address joins vm2's waiter.
	b.r.Handle(vm, udpFrameT(vm.MAC(), routerMACNic, ip4("10.0.1.2"), ip4("198.18.0.77"), 1, 53, nil), nil, 501)
	if len(b.r.waiters) != 2 || len(upp.take()) != 1 {
		t.Fatal("no second waiter, or it asked twice")
	}
	// Five seconds on, the first waiter's timeout (from its first frame) drops all its frames.
	b.clock.advance(5 * time.Second)
	b.r.Tick()
	if len(vmp.released) != n || len(b.r.waiters) != 1 || b.r.Stats().ARPTimeouts.Load() != n {
		t.Fatalf("released %d, waiters %d", len(vmp.released), len(b.r.waiters))
	}
	// What is left is counted again: vm's one frame in vm2's waiter is now its oldest.
	for _, i := range []*Interface{vm, vm2} {
		if d := i.Held(b.clock.t); d.Frames != 1 || d.Bytes != uint64(i.heldBytes) || d.Sojourn != 5*time.Second {
			t.Fatalf("%s holds %+v after the timeout, want 1 frame of %d bytes, 5s old", i.Label(), d, i.heldBytes)
		}
	}
	// vm2 leaves: its waiter is cancelled, and vm's frame in it dropped and acknowledged.
	b.r.Detach(vm2)
	if len(b.r.waiters) != 0 || len(vmp.released) != n+1 || vmp.released[n] != 501 || len(vm2p.released) != 0 {
		t.Fatalf("after vm2 left: waiters %d, vm released %d", len(b.r.waiters), len(vmp.released))
	}
	if vm.heldBytes != 0 {
		t.Fatalf("vm still counts %d held bytes", vm.heldBytes)
	}
	b.r.Flush()
	if d := vm.Held(b.clock.t); d != (netdev.Depth{}) {
		t.Fatalf("vm holds %+v after every frame went", d)
	}
}

func TestARPAnswers(t *testing.T) {
	b := newBench(t, natConfig)
	vm, vmp := b.attach("vm", Nic, header.MAC{})
	up, upp := b.attach("uplink", Uplink, macUplink)
	ask := func(i *Interface, p *fakePort, sender header.MAC, sIP, target string) header.ARP {
		b.send(i, arpFrame(header.ARPRequest, sender, ip4(sIP), header.MAC{}, ip4(target), header.Broadcast))
		out := p.take()
		if len(out) == 0 {
			return nil
		}
		return parse(t, out[0]).arp
	}
	// Own address, in a domain with gateway and without.
	if a := ask(up, upp, macGateway, "198.18.0.1", "198.18.0.10"); a == nil || a.SenderMAC() != macUplink || a.Op() != header.ARPReply {
		t.Fatal("no answer for the router's uplink address")
	}
	if a := ask(vm, vmp, vm.MAC(), "10.0.1.2", "10.0.1.1"); a == nil || a.SenderMAC() != routerMACNic {
		t.Fatal("no answer for the router's address toward Nic clients")
	}
	// Addresses outside the subnet: answered where there is no gateway, not where there is one.
	if a := ask(vm, vmp, vm.MAC(), "10.0.1.2", "192.168.5.5"); a == nil || a.SenderIP() != ip4("192.168.5.5") || a.SenderMAC() != routerMACNic {
		t.Fatal("no answer for a foreign address in a domain without gateway")
	}
	if a := ask(up, upp, macGateway, "198.18.0.1", "203.0.113.9"); a != nil {
		t.Fatal("answer for a foreign address in a domain with gateway")
	}
	// Gratuitous requests are dropped.
	if a := ask(vm, vmp, vm.MAC(), "10.0.1.2", "10.0.1.2"); a != nil {
		t.Fatal("answer to a gratuitous request")
	}
}

// TestARPWithinDomainIsHub: requests for, and replies to, other hosts of the subnet are not
// answered by the router but passed unchanged to the domain's other interfaces (Genode's
// _handle_arp_request and _handle_arp_reply); the router still learns from the reply.
func TestARPWithinDomainIsHub(t *testing.T) {
	b := newBench(t, natConfig)
	vm, vmp := b.attach("vm", Nic, header.MAC{})
	vm2, vm2p := b.attach("vm2", Nic, header.MAC{})
	vm3, vm3p := b.attach("vm3", Nic, header.MAC{})
	req := arpFrame(header.ARPRequest, vm.MAC(), ip4("10.0.1.2"), header.MAC{}, ip4("10.0.1.3"), header.Broadcast)
	b.send(vm, req)
	if len(vmp.take()) != 0 {
		t.Fatal("the router answered for another host of the subnet")
	}
	for _, p := range []*fakePort{vm2p, vm3p} {
		if out := p.take(); len(out) != 1 || !bytes.Equal(out[0], req) {
			t.Fatalf("request not passed on unchanged: %d frames", len(out))
		}
	}
	rep := arpFrame(header.ARPReply, vm2.MAC(), ip4("10.0.1.3"), vm.MAC(), ip4("10.0.1.2"), vm.MAC())
	b.send(vm2, rep)
	if out := vmp.take(); len(out) != 1 || !bytes.Equal(out[0], rep) || len(vm3p.take()) != 1 || len(vm2p.take()) != 0 {
		t.Fatal("reply not passed on to the other interfaces")
	}
	if b.r.domains["default"].arp[ip4("10.0.1.3")] != vm2.MAC() {
		t.Fatal("the router did not learn from the passed reply")
	}
	// A reply to the router is not passed on.
	b.send(vm3, arpFrame(header.ARPReply, vm3.MAC(), ip4("10.0.1.4"), routerMACNic, ip4("10.0.1.1"), routerMACNic))
	if len(vmp.take())+len(vm2p.take()) != 0 {
		t.Fatal("reply to the router passed on")
	}
}

// TestARPEntryKeptUntilForgotten: as in Genode, a later reply does not change a known entry;
// the entries of an interface's MAC go with the interface, and all of them with a domain's
// last interface. Link plans follow (they are made again after any such change).
func TestARPEntryKeptUntilForgotten(t *testing.T) {
	b, vm, _, up, upp := natBench(t)
	out := udpFrameT(vm.MAC(), routerMACNic, ip4("10.0.1.2"), ip4("198.18.1.1"), 5000, 53, []byte("x"))
	for range 2 { // the first makes the link and its plan, the second uses the plan
		b.send(vm, out)
		if got := upp.take(); len(got) != 1 || header.Eth(got[0]).Dst() != macGateway {
			t.Fatalf("sent %d frames, want 1 to the gateway", len(got))
		}
	}
	moved := header.MAC{2, 0, 0, 0, 0, 0x77}
	b.send(up, arpFrame(header.ARPReply, moved, ip4("198.18.0.1"), macUplink, ip4("198.18.0.10"), macUplink))
	b.send(vm, out)
	if got := upp.take(); len(got) != 1 || header.Eth(got[0]).Dst() != macGateway {
		t.Fatal("a later ARP reply changed a known entry")
	}
	// The uplink was the domain's only interface: its cache goes with it.
	b.r.Detach(up)
	up, upp = b.attach("uplink", Uplink, macUplink)
	if v := b.r.Handle(vm, out, nil, 9); v != Held {
		t.Fatalf("verdict %v after the cache was emptied, want Held", v)
	}
	upp.take()
	b.send(up, arpFrame(header.ARPReply, moved, ip4("198.18.0.1"), macUplink, ip4("198.18.0.10"), macUplink))
	if got := upp.take(); len(got) != 1 || header.Eth(got[0]).Dst() != moved {
		t.Fatal("held frame not sent to the newly learnt MAC")
	}
	b.send(vm, out)
	if got := upp.take(); len(got) != 1 || header.Eth(got[0]).Dst() != moved {
		t.Fatal("the link's plan kept the forgotten MAC")
	}
	// A Nic client's entry goes with its session.
	vm2, _ := b.attach("vm2", Nic, header.MAC{})
	b.send(vm2, arpFrame(header.ARPReply, vm2.MAC(), ip4("10.0.1.3"), routerMACNic, ip4("10.0.1.1"), routerMACNic))
	def := b.r.domains["default"]
	if _, ok := def.arp[ip4("10.0.1.3")]; !ok {
		t.Fatal("no entry learnt from vm2")
	}
	b.r.Detach(vm2)
	if _, ok := def.arp[ip4("10.0.1.3")]; ok || len(def.arp) != 1 {
		t.Fatalf("vm2's entry outlived its session (cache %v)", def.arp)
	}
}

func TestUseARPNo(t *testing.T) {
	b := newBench(t, `<config>
  <policy label="a" domain="a"/><policy label="b" domain="b"/>
  <domain name="a" interface="10.0.1.1/24"><ip dst="10.0.2.0/24" domain="b"/></domain>
  <domain name="b" interface="10.0.2.1/24" use_arp="no"/>
</config>`)
	a, _ := b.attach("a", Nic, header.MAC{})
	bi, bp := b.attach("b", Uplink, macUplink)
	// use_arp="no" only keeps the router from asking: it still answers (Genode's _handle_arp
	// does not look at it).
	b.send(bi, arpFrame(header.ARPRequest, macServer, ip4("10.0.2.2"), header.MAC{}, ip4("10.0.2.1"), header.Broadcast))
	if out := bp.take(); len(out) != 1 || parse(t, out[0]).arp.Op() != header.ARPReply {
		t.Fatal("ARP request to the router not answered with use_arp=\"no\"")
	}
	if v := b.send(a, udpFrameT(a.MAC(), routerMACNic, ip4("10.0.1.2"), ip4("10.0.2.2"), 1, 2, nil)); v != Done {
		t.Fatal("frame held although use_arp=\"no\"")
	}
	out := bp.take()
	if len(out) != 1 || parse(t, out[0]).eth.Dst() != macUplink {
		t.Fatal("use_arp=\"no\" frame not sent to the interface's MAC")
	}
}
