package router

import (
	"github.com/nicstack/nicstack/netdev/header"
	"github.com/nicstack/nicstack/router/nat"
	"github.com/nicstack/nicstack/router/tcpstate"
)

// maxLinksPerInterface bounds the link states one session can open (Genode charges them to
// the session's RAM quota), so that no client can grow the router's memory without bound.
const maxLinksPerInterface = 1 << 14

// flowKey is a packet's 4-tuple as it arrives in a domain; ICMP echo uses the query ID as
// both ports.
type flowKey struct {
	src, dst     [4]byte
	sport, dport uint16
	proto        uint8
}

// side is one end of a link state: the domain and the tuple of packets arriving from there.
type side struct {
	l   *link
	dom *domain
	key flowKey
	idx int // 0: client, 1: server
	// plan is how packets arriving here leave at the other side, as viaLink worked it out
	// last: valid while plan.gen is the router's gen.
	plan plan
	// key6 and rw6 take key's and plan's place in an IPv6 link (link6.go).
	key6 flowKey6
	rw6  rewrite6
}

// plan is viaLink's work for one link side: the destination MAC and the rewrite with its
// checksum changes summed up in advance. A packet that found the side by its 4-tuple carries
// exactly the side's key, so what the rewrite changes is known before the packet is.
type plan struct {
	gen uint64
	mac macOrNone
	rw  rewrite
}

// peer is the other end.
func (s *side) peer() *side { return &s.l.sides[1-s.idx] }

// link is a link state: both directions of one TCP connection, UDP pseudo-connection or
// ICMP echo exchange, with the NAT port it holds. Of a UDP or ICMP link, tcp.State counts only
// (opening, open).
type link struct {
	p          int
	sides      [2]side
	owner      *Interface // the interface that sent the first packet (pays for the link)
	lastActive int64      // Router.nowNs of the last packet
	closedAt   int64
	tcp        tcpstate.Conn
	natPort    uint16 // 0: no NAT; else the port or ID allocated at the server side's domain
	slot       int32  // in the state region; region.None: none
	v6         bool   // an IPv6 link: its sides' tuples are key6, in their domains' links6
}

// newLink creates a link state for a first packet from client side key in domain c routed
// by decision to; with NAT at to for c, the source becomes the router's address there and a
// port from the dynamic range. False when NAT refuses (quota or port space used up) or the
// server-side tuple is taken.
func (r *Router) newLink(owner *Interface, c *domain, key flowKey, to decision) (*link, bool) {
	if owner.links >= maxLinksPerInterface {
		owner.counts.links[protoIndex(key.proto)].refusedForRAM++
		if c.m.VerbosePacketDrop {
			r.log.Info("link state refused", "domain", c.name, "interface", owner.label, "reason", "the session's link states are used up")
		}
		return nil, false
	}
	l := &link{p: protoIndex(key.proto), owner: owner, lastActive: r.nowNs}
	srv := flowKey{src: to.dst, dst: key.src, sport: to.dport, dport: key.sport, proto: key.proto}
	if quota, ok := to.to.natQuota(c, l.p); ok {
		port, ok := r.allocNAT(owner, c, to.to, l.p, quota, &to.to.ports[l.p])
		if !ok {
			return nil, false
		}
		l.natPort = port
		srv.dst, srv.dport = to.to.ip.addr, port
		if l.p == pICMP {
			srv.sport = port
		}
	}
	if _, taken := to.to.links[srv]; taken {
		l.freeNAT(c, to.to)
		return nil, false
	}
	if _, taken := c.links[key]; taken {
		l.freeNAT(c, to.to)
		return nil, false
	}
	l.sides[0] = side{l: l, dom: c, key: key, idx: 0}
	l.sides[1] = side{l: l, dom: to.to, key: srv, idx: 1}
	c.links[key] = &l.sides[0]
	to.to.links[srv] = &l.sides[1]
	r.links[l] = struct{}{}
	owner.links++
	r.keepLink(l)
	if r.cfg.Verbose {
		r.log.Info("new link state", "protocol", protoNames[l.p], "client_domain", c.name, "server_domain", to.to.name,
			"client", addrPort(key.src, key.sport), "server", addrPort(srv.src, srv.sport), "nat_port", l.natPort)
	}
	return l, true
}

// allocNAT takes a port of ports at domain at for a link of protocol p from domain c, within
// c's quota there (shared by both families).
func (r *Router) allocNAT(owner *Interface, c, at *domain, p, quota int, ports *nat.Ports) (uint16, bool) {
	used := at.quota[c.name]
	if used == nil {
		used = &[3]int{}
		at.quota[c.name] = used
	}
	if used[p] >= quota {
		r.refuseNAT(owner, c, at, p, "NAT quota used up")
		return 0, false
	}
	port, ok := ports.Alloc()
	if !ok {
		r.refuseNAT(owner, c, at, p, "NAT port space used up")
		return 0, false
	}
	used[p]++
	return port, true
}

// takeNAT takes link l's NAT port of ports at server domain s again (a link carried over a
// reconfiguration or a restart), within c's quota; a link without one must not need one.
func (r *Router) takeNAT(l *link, c, s *domain, ports *nat.Ports) bool {
	quota, nat := s.natQuota(c, l.p)
	if l.natPort == 0 {
		return !nat
	}
	used := s.quota[c.name]
	if used == nil {
		used = &[3]int{}
		s.quota[c.name] = used
	}
	if !nat || used[l.p] >= quota || !ports.Take(l.natPort) {
		return false
	}
	used[l.p]++
	return true
}

func (r *Router) refuseNAT(owner *Interface, c, at *domain, p int, why string) {
	r.stats.NATRefused.add(1)
	owner.counts.links[p].refusedForPorts++
	if c.m.VerbosePacketDrop || r.cfg.Verbose {
		r.log.Info("NAT refused", "protocol", protoNames[p], "from", c.name, "at", at.name, "reason", why)
	}
}

// freeNAT gives the link's port back at server domain s and lowers c's quota use there.
func (l *link) freeNAT(c, s *domain) {
	if l.natPort == 0 {
		return
	}
	if l.v6 {
		s.ports6[l.p].Free(l.natPort)
	} else {
		s.ports[l.p].Free(l.natPort)
	}
	if used := s.quota[c.name]; used != nil && used[l.p] > 0 {
		used[l.p]--
	}
	l.natPort = 0
}

// dissolve removes a link state.
func (r *Router) dissolve(l *link, why string) {
	c, s := l.sides[0].dom, l.sides[1].dom
	for _, d := range [2]*domain{c, s} {
		if d.last != nil && d.last.l == l {
			d.last = nil
		}
	}
	if l.v6 {
		if c.links6[l.sides[0].key6] == &l.sides[0] {
			delete(c.links6, l.sides[0].key6)
		}
		if s.links6[l.sides[1].key6] == &l.sides[1] {
			delete(s.links6, l.sides[1].key6)
		}
	} else {
		if c.links[l.sides[0].key] == &l.sides[0] {
			delete(c.links, l.sides[0].key)
		}
		if s.links[l.sides[1].key] == &l.sides[1] {
			delete(s.links, l.sides[1].key)
		}
	}
	l.freeNAT(c, s)
	r.unkeep(&l.slot)
	delete(r.links, l)
	l.owner.links--
	l.owner.counts.links[l.p].destroyed++
	if r.cfg.Verbose {
		r.log.Info("dissolve link state", "protocol", protoNames[l.p], "client_domain", c.name, "server_domain", s.name,
			"client", l.client(), "reason", why)
	}
}

// client is the client side's address and port, for the log.
func (l *link) client() string {
	if k := &l.sides[0].key6; l.v6 {
		return addrPort6(k.src, k.sport)
	}
	return addrPort(l.sides[0].key.src, l.sides[0].key.sport)
}

// expired: TCP links dissolve two maximum segment lifetimes after closing, every link after
// its protocol's idle timeout.
func (r *Router) expired(l *link) bool {
	if l.p == pTCP && l.tcp.State == tcpstate.Closed {
		return r.nowNs-l.closedAt >= 2*int64(r.cfg.TCPMaxSegmLifetime)
	}
	return r.nowNs-l.lastActive >= r.idle[l.p]
}

// lookup returns the live link side for key in d, dissolving an expired one it meets.
func (r *Router) lookup(d *domain, key *flowKey) *side {
	s := d.last
	// Field by field: a key just built by narrow stores and compared as words would wait for
	// the stores to complete (no store-to-load forwarding).
	if s == nil || !(s.key.src == key.src && s.key.dst == key.dst && s.key.sport == key.sport && s.key.dport == key.dport && s.key.proto == key.proto) {
		if s = d.links[*key]; s == nil {
			return nil
		}
		d.last = s
	}
	if r.expired(s.l) {
		r.dissolve(s.l, "timeout")
		return nil
	}
	return s
}

// touch notes a packet through the link; TCP segments drive the state machine. A UDP or ICMP
// link is opening until the server side answers, then open (as Genode counts them).
func (r *Router) touch(s *side, seg []byte) {
	l := s.l
	l.lastActive = r.nowNs
	if l.p != pTCP || seg == nil {
		if s.idx == 1 && l.tcp.State != tcpstate.Open {
			l.tcp.State = tcpstate.Open
			r.keepLink(l)
		}
		return
	}
	was := l.tcp.State
	now, changed := l.tcp.Segment(s.idx, header.TCPFlags(seg), header.TCPSeq(seg), header.TCPAckNum(seg), header.TCPPayloadLen(seg))
	if !changed {
		return
	}
	if now == tcpstate.Closed && was != tcpstate.Closed {
		l.closedAt = r.nowNs
	}
	if now != was && r.cfg.Verbose {
		r.log.Info("TCP link state", "domain", l.sides[0].dom.name, "client", l.client(), "state", now.String())
	}
	r.keepLink(l)
}
