package router

import (
	"github.com/nicstack/nicstack/netdev"
	"github.com/nicstack/nicstack/netdev/header"
	"github.com/nicstack/nicstack/router/region"
)

// Kind is the kind of session behind an interface.
type Kind uint8

const (
	// Nic: an application or VM; the router gives it a MAC and is its gateway.
	Nic Kind = iota
	// Uplink: a driver; it brings its own MAC, which is the router's identity on that wire.
	Uplink
	// NicClient: a Nic session the router opened itself (<nic-client label domain>); its
	// server gives no MAC, so Session.MAC is one the component picked for the router, and
	// the domain comes from <nic-client>.
	NicClient
)

func (k Kind) String() string {
	return [...]string{"nic", "uplink", "nic-client"}[k]
}

// Port is how the router reaches the outside of one interface; the component binds it to the
// session's packet streams. The router calls it only from Handle, Flush, Tick, Attach,
// Detach and Configure. Every successful Alloc is followed by exactly one Submit of that
// buffer before the next Alloc on the same port, so a port needs to remember one pending
// packet only.
type Port interface {
	// Alloc reserves size bytes for a frame to the interface's client; false when the
	// stream's submit queue or buffer is full (the router then drops and counts the frame).
	// With a packet stream: Source.Reserve.
	Alloc(size int) ([]byte, bool)
	// Submit queues the buffer Alloc returned, filled (perhaps shorter), with its offload
	// metadata. With a packet stream: Source.Commit.
	Submit(frame []byte, off netdev.Offload)
	// Flush wakes the peer once for everything submitted since the last Flush.
	Flush()
	// Release acknowledges a received frame the router had held (Verdict Held).
	Release(id uint64)
	// LinkState tells a Nic client whether its link is up (its domain is ready): once when
	// the interface is attached, then at every change.
	LinkState(up bool)
}

// Session describes an interface to Attach.
type Session struct {
	Label string
	Kind  Kind
	MAC   header.MAC // Uplink and NicClient: the router's MAC there; Nic: ignored, the router allocates one
	Port  Port
	// RAM is what the session's client paid for it: the bytes of its buffers (Genode's
	// session RAM quota). The state report shows it as the interface's quota; 0 shows none.
	RAM int
}

// Interface is one attached session.
type Interface struct {
	label      string
	key        region.Name // label's, in the state region
	kind       Kind
	routerMAC  header.MAC // the router's source MAC on this interface
	peerMAC    header.MAC // the Nic client's MAC
	macIndex   uint16
	port       Port      // session, or while the link is down, down
	session    Port      // the component's
	down       *downPort // refuses every Alloc: nothing is sent over a link that is down
	dom        *domain
	up         bool
	dirty      bool // submitted to since the last Flush
	touched    bool // counters changed since the last publish
	heldBytes  int  // of frames waiting for ARP
	heldFrames int
	heldSince  int64 // Unix nanoseconds the oldest of them was held
	held       publishedDepth
	links      int // link states this interface opened
	ram        int // Session.RAM
	counts     reportCounts
	stats      InterfaceStats
	// ll is the router's IPv6 link-local address here, from routerMAC; llDup: DAD found it
	// taken; llDAD: till when (Unix nanoseconds) DAD listens for a duplicate.
	ll    [16]byte
	llDup bool
	llDAD int64
	// eg is the egress queue of a domain with <fq-codel> (nil: frames are sent at once);
	// class is the interface's scheduler class there as a sender (egress.go); queued is what
	// eg holds, as last published.
	eg     *egress
	class  int
	queued publishedDepth
}

// Label is the session label.
func (i *Interface) Label() string { return i.label }

// Kind is the session kind.
func (i *Interface) Kind() Kind { return i.kind }

// MAC is the MAC the session's client uses: the allocated one for Nic sessions, the driver's
// own for uplinks.
func (i *Interface) MAC() header.MAC {
	if i.kind == Nic {
		return i.peerMAC
	}
	return i.routerMAC
}

// Domain is the name of the interface's domain, "" when no policy matched.
func (i *Interface) Domain() string {
	if i.dom == nil {
		return ""
	}
	return i.dom.name
}

// LinkUp reports the link state given to the client: up while its domain is ready.
func (i *Interface) LinkUp() bool { return i.up }

// Stats returns the interface's counters.
func (i *Interface) Stats() *InterfaceStats { return &i.stats }

// routerMACNic is the router's own MAC toward Nic clients; clients get 02:02:02:02:02:01 and
// up, by allocMAC's index.
var routerMACNic = header.MAC{2, 2, 2, 2, 2, 0}

// Attach adds a session as an interface and puts it into the domain its label's best policy
// names (none: the interface exists but every frame from it is dropped until a config names
// a domain for it).
func (r *Router) Attach(s Session) *Interface {
	i := &Interface{label: s.Label, key: region.NameOf(s.Label), kind: s.Kind, session: s.Port, down: &downPort{s.Port}, ram: s.RAM}
	i.port = i.down
	if s.Kind != Nic {
		i.routerMAC = s.MAC
	} else {
		i.routerMAC = routerMACNic
		i.macIndex = r.allocMAC()
		i.peerMAC = header.MAC{2, 2, 2, 2, byte(2 + i.macIndex>>8), byte(i.macIndex)}
	}
	r.ifs = append(r.ifs, i)
	r.takeClass(i)
	r.adopt(i)
	r.assign(i)
	if !i.up { // assign told only a change from the initial down
		i.port.LinkState(false)
	}
	r.interfaceCameOrWent()
	return i
}

// allocMAC returns the lowest free client MAC index (index 0 is the router's MAC).
func (r *Router) allocMAC() uint16 {
	for n := uint16(1); n != 0; n++ {
		if !r.macs[n] {
			r.macs[n] = true
			return n
		}
	}
	return 0xffff
}

// Detach removes an interface: its held frames are forgotten (the session's buffers go with
// it), the link states it opened and its DHCP leases are dissolved.
func (r *Router) Detach(i *Interface) {
	r.leave(i)
	r.dropEgress(i)
	r.freeClass(i)
	r.ifs = without(r.ifs, i)
	delete(r.macs, i.macIndex)
	i.stats.publish()
	r.dirty = without(r.dirty, i)
	r.touched = without(r.touched, i)
	r.interfaceCameOrWent()
}

// Orphan detaches interface i of a client whose process crashed and restarts: its link states
// and DHCP allocations pass to the orphan of its label, as a restored region's do, and the
// next session with that label adopts them (Attach). A guest's connections through NAT thus
// outlive a restart of the vm serving it, on the same NAT ports; what no session adopts ends
// with its timeouts.
func (r *Router) Orphan(i *Interface) {
	o := r.orphan(i.key)
	for l := range r.links {
		if l.owner == i {
			l.owner = o
		}
	}
	o.links += i.links
	i.links = 0
	for _, d := range r.domains {
		if d.dhcpServer != nil {
			for _, a := range d.dhcpServer.allocs {
				if a.ifc == i {
					a.ifc = o
				}
			}
		}
	}
	r.Detach(i)
}

// assign puts i into the domain of its best policy (or of its <nic-client>).
func (r *Router) assign(i *Interface) {
	name, ok := r.cfg.DomainFor(i.label)
	if i.kind == NicClient {
		name, ok = r.cfg.NicClientDomain(i.label)
	}
	d := r.domains[name]
	if !ok || d == nil {
		if r.cfg.Verbose {
			r.log.Info("no domain for interface", "label", i.label, "policy_domain", name)
		}
		r.setLink(i, false)
		r.setEgress(i)
		return
	}
	i.dom = d
	d.ifs = append(d.ifs, i)
	if r.cfg.VerboseDomainState {
		r.log.Info("interface joins domain", "domain", d.name, "label", i.label, "interfaces", len(d.ifs))
	}
	r.setLink(i, i.linkState())
	r.setEgress(i)
	if d.dhcpClient != nil {
		d.dhcpClient.interfaceAdded(r, d)
	}
	r.join6(i, d)
}

// leave takes i out of its domain and dissolves what it owns there.
func (r *Router) leave(i *Interface) {
	r.cancelWaiters(i)
	for l := range r.links {
		if l.owner == i {
			r.dissolve(l, "interface detached")
		}
	}
	d := i.dom
	if d == nil {
		return
	}
	d.ifs = without(d.ifs, i)
	if d.dhcpServer != nil {
		d.dhcpServer.forget(r, i)
	}
	i.dom = nil
	r.forgetARP(d, i)
	d.stats.left.add(&i.counts)
	if d.dhcpClient != nil && len(d.ifs) == 0 {
		// The next interface may lead to another network: ask again then.
		d.dhcpClient.state = clientIdle
		if d.ip.valid {
			r.setIPConfig(d, ipConfig{})
		}
		r.keepClient(d)
	}
	if d.slaac != nil && len(d.ifs) == 0 {
		r.resetSLAAC(d)
	}
	if r.cfg.VerboseDomainState {
		r.log.Info("interface leaves domain", "domain", d.name, "label", i.label, "interfaces", len(d.ifs))
	}
}

// linkState is the link state Genode's router gives interface i: an uplink's is always up
// (its driver opens the session only while its link is up); a Nic session's, and a
// nic-client's while its server reports it up, follow the ready state of the domain.
func (i *Interface) linkState() bool {
	return i.kind == Uplink || i.dom != nil && i.dom.ready()
}

// refetchLink sets i's link to linkState. With reset, a Nic session's link goes down first:
// its client, seeing it come up again, knows that what it got by DHCP is outdated and asks
// anew (Genode's reset of the domain ready state).
func (r *Router) refetchLink(i *Interface, reset bool) {
	if reset && i.kind == Nic {
		r.setLink(i, false)
	}
	r.setLink(i, i.linkState())
}

func (r *Router) setLink(i *Interface, up bool) {
	if i.up != up {
		i.up = up
		i.port = i.down
		if up {
			i.port = i.session
		}
		i.port.LinkState(up)
		if rc := r.cfg.Report; rc != nil && rc.LinkStateTriggers {
			r.reportTrigger = true
		}
	}
}

// transmit copies frame into a new buffer of interface i, where the caller rewrites it. A
// full destination, or one whose link is down, drops the frame and counts it; nothing waits.
func (r *Router) transmit(i *Interface, frame []byte) []byte {
	if i.eg != nil {
		return r.transmitQueued(i, frame)
	}
	buf, ok := i.port.Alloc(len(frame))
	if !ok || len(buf) < len(frame) {
		r.full(i)
		return nil
	}
	buf = buf[:len(frame)]
	copy(buf, frame)
	return buf
}

// full counts a frame dropped because i's queue or buffer was full, or its link down. (A call
// of its own keeps transmit small enough to be inlined into the per-frame path.)
func (r *Router) full(i *Interface) {
	if !i.up {
		r.linkDown(i)
		return
	}
	r.stats.DroppedFull.add(1)
	i.stats.DroppedFull.add(1)
}

// linkDown counts a frame not sent because i's link is down: its client is not to get any
// (Genode's router fails to send there, "link down").
func (r *Router) linkDown(i *Interface) {
	r.drop(i.dom, "link down")
}

// downPort is an interface's port while its link is down: it refuses every Alloc, so that
// transmit needs no test of the link per frame (full tells the two refusals apart).
type downPort struct{ Port }

func (*downPort) Alloc(int) ([]byte, bool) { return nil, false }

// submit hands a filled buffer to i's port and marks i for the next Flush. Every frame the
// router sends passes here, where Genode's _send_submit_pkt counts and logs it.
func (r *Router) submit(i *Interface, buf []byte, off *netdev.Offload) {
	if d := i.dom; d != nil {
		d.stats.txBytes += uint64(len(buf))
		if d.m.VerbosePackets {
			r.logPacket(d, "snd", buf)
		}
	}
	if i.eg != nil {
		r.enqueue(i, buf, off)
		return
	}
	i.port.Submit(buf, *off)
	r.sent(i, len(buf))
}

// sent counts a frame of n bytes submitted to i's port and marks i for the next Flush.
func (r *Router) sent(i *Interface, n int) {
	r.stats.Sent.add(1)
	i.stats.TxFrames.add(1)
	i.stats.TxBytes.add(uint64(n))
	if !i.dirty {
		i.dirty = true
		r.dirty = append(r.dirty, i)
	}
	r.touchInterface(i)
}

// emit sends a frame the router made itself out of interface i.
func (r *Router) emit(i *Interface, frame []byte) {
	in := r.ingress
	r.ingress = nil // the router's own class at an egress queue
	if buf := r.transmit(i, frame); buf != nil {
		r.submit(i, buf, &netdev.Offload{})
	}
	r.ingress = in
}

// without removes i from list, keeping the order.
func without(list []*Interface, i *Interface) []*Interface {
	for k, j := range list {
		if j == i {
			return append(list[:k], list[k+1:]...)
		}
	}
	return list
}
