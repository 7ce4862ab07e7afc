// Package router is the nic_router as a library over Ethernet frames: interfaces (Uplink and
// Nic sessions) are put into domains by policy, and frames are routed between domains by the
// rules of section 6 of ARCHITECTURE.md and Genode's nic_router README: domain-local hub
// traffic, link states with NAT, port forwarding, TCP/UDP/ICMP/IP rules, ARP with held
// frames, DHCP server and client, an ICMP echo server and ICMP error translation.
//
// A Router is driven by one goroutine, the component's event loop, which does what Genode's
// nic_router does per signal:
//
//	for each interface with work:
//		release the packets its client acknowledged
//		for n := 0; n < r.MaxPacketsPerSignal() (0: no limit) && a frame f is available; n++ {
//			if r.Handle(ifc, f.bytes, &f.offload, f.id) == router.Done { acknowledge f }
//		}
//		r.Flush() // each destination's Port.Flush once: one wakeup per peer
//	every second: r.Tick(); every r.ReportInterval() or when r.ReportTriggered(): r.Report()
//
// Only that goroutine may call the Router's methods; counters (Stats, Interface.Stats) may be
// read from anywhere and are published once per batch (Flush). Forwarding a frame of an existing link state
// allocates nothing: the frame is copied once into the destination's buffer (Port.Alloc) and
// rewritten there; a full destination drops and counts the frame.
package router

import (
	"log/slog"
	"time"

	"github.com/nicstack/nicstack/netdev"
	"github.com/nicstack/nicstack/router/model"
	"github.com/nicstack/nicstack/router/region"
	"github.com/nicstack/nicstack/runtime/config"
)

// Clock gives the time for link-state, ARP and DHCP timeouts; tests use a fake one.
type Clock interface{ Now() time.Time }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// Options for New.
type Options struct {
	Clock Clock        // default: the system clock
	Log   *slog.Logger // default: slog.Default()
	// State is the state region (package region), shared memory that outlives the process:
	// the router keeps its link states, ARP caches and DHCP leases there, and the first
	// Configure restores what an earlier router kept in it. Nil: none.
	State []byte
}

// Verdict tells the component what to do with a received frame.
type Verdict uint8

const (
	// Done: the router is finished with the frame; acknowledge it.
	Done Verdict = iota
	// Held: the frame waits for an ARP reply; do not acknowledge it. The router calls the
	// interface's Port.Release with the frame's id when it is sent or dropped.
	Held
)

// Router is the routing state of one nic_router.
type Router struct {
	clock   Clock
	log     *slog.Logger
	now     time.Time
	nowNs   int64    // now as Unix nanoseconds, for cheap per-frame timeout arithmetic
	idle    [3]int64 // idle timeouts by protocol index, in nanoseconds
	cfg     *model.Config
	domains map[string]*domain
	ifs     []*Interface
	links   map[*link]struct{}
	waiters []*arpWaiter // of all domains, oldest first
	// heldChanged: frames were held or let go since the last publish; heldRecount: some
	// left, so the counts are made again from the waiters (publishHeld).
	heldChanged, heldRecount bool
	dirty                    []*Interface // to Flush
	touched                  []*Interface // to publish counters of
	macs                     map[uint16]bool
	xid                      uint32
	stats                    Stats
	// gen changes whenever what a link side's plan holds may have: a config, an IPv4
	// config, an ARP cache entry (see side.plan). It starts at 1, so no plan is valid at
	// first.
	gen uint64

	// keep is the state region (nil: none); restored is what it held, for the first
	// Configure; orphans are the interfaces restored entries name, until their sessions
	// attach; arpSlots are the slots of the ARP entries; keepFull: the region was full.
	keep     *region.Region
	restored *region.Contents
	orphans  map[region.Name]*Interface
	arpSlots map[arpSlot]int32
	keepFull bool

	icmp6Full int64 // when the ICMPv6 error bucket is full again (icmp6Allowed)

	reportTrigger bool
	// general routes every frame the general way, without forwardLinked: tests check the
	// fast path against it.
	general bool
}

// New returns a router with an empty config (no domains: every frame is dropped).
func New(opt Options) *Router {
	if opt.Clock == nil {
		opt.Clock = systemClock{}
	}
	if opt.Log == nil {
		opt.Log = slog.Default()
	}
	r := &Router{
		clock:   opt.Clock,
		log:     opt.Log,
		domains: map[string]*domain{},
		links:   map[*link]struct{}{},
		macs:    map[uint16]bool{},
		xid:     0x6e696300,
		gen:     1,
	}
	r.Configure(model.Parse(&config.Node{Type: "config"}))
	if opt.State != nil {
		r.openRegion(opt.State)
	}
	return r
}

func (r *Router) setNow() {
	r.now = r.clock.Now()
	r.nowNs = r.now.UnixNano()
}

// MaxPacketsPerSignal is how many frames the component handles per interface before it
// flushes and turns to the next interface (0: no limit).
func (r *Router) MaxPacketsPerSignal() int { return r.cfg.MaxPacketsPerSignal }

// NicClients lists the <nic-client> sessions the component should open (and Attach with
// Kind NicClient).
func (r *Router) NicClients() []model.NicClient { return r.cfg.NicClients }

// ReportInterval is <report interval_sec>, 0 without <report>.
func (r *Router) ReportInterval() time.Duration {
	if r.cfg.Report == nil {
		return 0
	}
	return r.cfg.Report.Interval
}

// ReportTriggered reports, and clears, whether an event asks for a report before the next
// interval: an IPv4 config change (config_triggers) or an interface link state change
// (link_state_triggers).
func (r *Router) ReportTriggered() bool {
	t := r.reportTrigger
	r.reportTrigger = false
	return t
}

// Stats returns the router-wide counters.
func (r *Router) Stats() *Stats { return &r.stats }

// noOffload is the offload metadata of a frame without any (never written).
var noOffload netdev.Offload

// Handle routes one frame received at interface i, with its offload metadata (nil: none; read
// during the call only). id is the component's handle for the
// frame, given back through Port.Release when the router held it. The frame's bytes must stay
// valid until then; they are never written.
func (r *Router) Handle(i *Interface, frame []byte, off *netdev.Offload, id uint64) Verdict {
	if off == nil {
		off = &noOffload
	}
	r.setNow()
	r.touchInterface(i)
	r.stats.Received.add(1)
	i.stats.RxFrames.add(1)
	i.stats.RxBytes.add(uint64(len(frame)))
	return r.handle(i, frame, off, id)
}

// Flush wakes every interface that got frames since the last Flush, once, and publishes the
// counters.
func (r *Router) Flush() {
	for _, i := range r.dirty {
		i.dirty = false
		i.port.Flush()
	}
	r.dirty = r.dirty[:0]
	r.publish()
}

// Tick runs the timeouts: idle and closed link states, ARP and neighbour solicitations, DHCP
// offers, leases and the DHCP client, and sends the router advertisements that are due. Call
// it about once a second.
func (r *Router) Tick() {
	r.setNow()
	for l := range r.links {
		if r.expired(l) {
			r.dissolve(l, "timeout")
		}
	}
	r.expireWaiters()
	// SLAAC first: what the uplinks learned or lost goes into this Tick's RAs.
	for _, name := range sortedDomainNames(r.domains) {
		if d := r.domains[name]; d.slaac != nil {
			d.slaac.tick(r, d)
		}
	}
	for _, name := range sortedDomainNames(r.domains) {
		d := r.domains[name]
		if d.dhcpServer != nil {
			d.dhcpServer.expire(r, d)
		}
		if d.dhcpClient != nil {
			d.dhcpClient.tick(r, d)
		}
		r.advertiseRAs(d)
	}
	r.Flush()
	r.publishAll()
}

// drop counts a dropped frame and logs why, in Genode's words, when the domain asks for it
// (verbose_packet_drop), or for a frame without domain when the config is verbose.
func (r *Router) drop(d *domain, why string) Verdict {
	r.stats.Dropped.add(1)
	if d != nil {
		if d.m.VerbosePacketDrop {
			r.log.Info("[" + d.name + "] drop packet (" + why + ")")
		}
	} else if r.cfg.Verbose {
		r.log.Info("[?] drop packet (" + why + ")")
	}
	return Done
}
