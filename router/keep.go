package router

import (
	"net/netip"
	"strings"
	"time"

	"github.com/nicstack/nicstack/router/region"
	"github.com/nicstack/nicstack/router/tcpstate"
)

// The state region (Options.State, package region) keeps what a restarted router needs to go
// on with the same flows: link states with their NAT ports, ARP caches, DHCP leases and the
// DHCP client's lease. An entry is written when it comes, changes (a TCP flag, a lease bound)
// or goes, never per frame: a restored link state starts a new idle timeout. The first
// Configure after New restores what the region holds as far as that config creates it again,
// exactly as a reconfiguration carries state over; the rest is dropped.

// openRegion takes mem as the state region; its contents wait for the first Configure.
func (r *Router) openRegion(mem []byte) {
	reg, c, err := region.Open(mem)
	if reg == nil {
		r.log.Warn("state region not used", "err", err)
		return
	}
	if err != nil {
		r.log.Warn("state region discarded", "reason", err.Error())
	}
	if c.Discarded > 0 {
		r.log.Warn("state region: records discarded", "count", c.Discarded, "why", strings.Join(c.Why, "; "))
	}
	r.keep, r.restored = reg, c
	r.orphans = map[region.Name]*Interface{}
	r.arpSlots = map[arpSlot]int32{}
}

// arpSlot names an ARP entry's slot: its domain and address.
type arpSlot struct {
	dom region.Name
	ip  [4]byte
}

// kept notes an entry the region had no room for: it would not survive a restart.
func (r *Router) kept(s int32) int32 {
	if s == region.None && !r.keepFull {
		r.keepFull = true
		r.log.Warn("state region full: new entries will not survive a restart", "slots", r.keep.Slots())
	}
	return s
}

// unkeep frees the slot *s.
func (r *Router) unkeep(s *int32) {
	if r.keep != nil && *s != region.None {
		r.keep.Free(*s)
		r.keepFull = false
	}
	*s = region.None
}

func tuple(k flowKey) region.Tuple {
	return region.Tuple{Src: k.src, Dst: k.dst, Sport: k.sport, Dport: k.dport}
}

func (r *Router) keepLink(l *link) {
	if r.keep == nil {
		return
	}
	if l.v6 {
		r.keepLink6(l)
		return
	}
	rec := region.Link{Proto: l.sides[0].key.proto, TCP: l.tcp, Client: l.sides[0].dom.key, Server: l.sides[1].dom.key,
		Owner: l.owner.key, ClientTuple: tuple(l.sides[0].key), ServerTuple: tuple(l.sides[1].key),
		NATPort: l.natPort, ClosedAt: l.closedAt}
	l.slot = r.kept(r.keep.Put(l.slot, &rec))
}

// keepLink6 keeps an IPv6 link: its client tuple, and of the server's what NAT66 changed.
func (r *Router) keepLink6(l *link) {
	ck := &l.sides[0].key6
	rec := region.Link6{Proto: ck.proto, TCP: l.tcp, Client: l.sides[0].dom.key, Server: l.sides[1].dom.key, Owner: l.owner.key,
		ClientTuple: region.Tuple6{Src: ck.src, Dst: ck.dst, Sport: ck.sport, Dport: ck.dport},
		ServerDst:   l.sides[1].key6.dst, NATPort: l.natPort, ClosedAt: l.closedAt}
	l.slot = r.kept(r.keep.Put(l.slot, &rec))
}

// keepARP keeps d's entry of ip if a route can use it (an address of the subnet but the
// router's).
func (r *Router) keepARP(d *domain, ip [4]byte) {
	if r.keep == nil || !d.ip.inSubnet(ip) || ip == d.ip.addr {
		return
	}
	k := arpSlot{d.key, ip}
	rec := region.ARP{Domain: d.key, IP: ip, MAC: d.arp[ip]}
	if s := r.kept(r.keep.Put(r.arpSlots[k], &rec)); s != region.None {
		r.arpSlots[k] = s
	}
}

func (r *Router) unkeepARP(d *domain, ip [4]byte) {
	if r.keep == nil {
		return
	}
	k := arpSlot{d.key, ip}
	s := r.arpSlots[k]
	r.unkeep(&s)
	delete(r.arpSlots, k)
}

// clearARP empties d's ARP cache.
func (r *Router) clearARP(d *domain) {
	for ip := range d.arp {
		r.unkeepARP(d, ip)
	}
	clear(d.arp)
}

func (r *Router) keepLease(d *domain, a *allocation) {
	if r.keep == nil {
		return
	}
	rec := region.Lease{Domain: d.key, Owner: a.ifc.key, MAC: a.mac, IP: a.ip, Bound: a.bound, Deadline: a.deadline.UnixNano()}
	a.slot = r.kept(r.keep.Put(a.slot, &rec))
}

// keepClient keeps d's DHCP client while it has a lease; a client without one asks again
// after a restart anyway.
func (r *Router) keepClient(d *domain) {
	c := d.dhcpClient
	if r.keep == nil {
		return
	}
	if c.state != clientBound && c.state != clientRenewing || !d.ip.valid {
		r.unkeep(&c.slot)
		return
	}
	rec := region.Client{Domain: d.key, State: uint8(c.state), XID: c.xid, Offered: c.offered, Server: c.server,
		Deadline: c.deadline.UnixNano(), LeaseEnd: c.leaseEnd.UnixNano(), Addr: d.ip.addr, PrefixBits: uint8(d.ip.prefix().Bits()),
		Gateway: d.ip.gateway, HasGateway: d.ip.hasGW, DNSDomain: d.ip.dnsDomain}
	for _, a := range d.ip.dns {
		rec.DNS = append(rec.DNS, a.As4())
	}
	if !rec.Fits() {
		r.unkeep(&c.slot)
		return
	}
	c.slot = r.kept(r.keep.Put(c.slot, &rec))
}

// sweep frees the slots of entries a reconfiguration let go.
func (r *Router) sweep() {
	if r.keep == nil {
		return
	}
	live := make([]bool, r.keep.Slots()+1)
	for l := range r.links {
		live[l.slot] = true
	}
	arp := map[arpSlot]int32{}
	for _, d := range r.domains {
		for ip := range d.arp {
			k := arpSlot{d.key, ip}
			if s, ok := r.arpSlots[k]; ok {
				live[s], arp[k] = true, s
			}
		}
		if d.dhcpServer != nil {
			for _, a := range d.dhcpServer.allocs {
				live[a.slot] = true
			}
		}
		if d.dhcpClient != nil {
			live[d.dhcpClient.slot] = true
		}
		if d.slaac != nil {
			live[d.slaac.slot] = true
		}
	}
	r.arpSlots = arp
	r.keep.Keep(func(s int32) bool { return live[s] })
	r.keepFull = false
}

// orphan is the interface of session label as restored entries (or Orphan) name it, until a
// session with that label attaches and adopts what it owns (Attach).
func (r *Router) orphan(label region.Name) *Interface {
	i := r.orphans[label]
	if i == nil {
		if r.orphans == nil {
			r.orphans = map[region.Name]*Interface{}
		}
		i = &Interface{key: label}
		r.orphans[label] = i
	}
	return i
}

// adopt hands interface i what restored entries gave the orphan of its label.
func (r *Router) adopt(i *Interface) {
	o := r.orphans[i.key]
	if o == nil {
		return
	}
	delete(r.orphans, i.key)
	for l := range r.links {
		if l.owner == o {
			l.owner = i
		}
	}
	i.links += o.links
	for _, d := range r.domains {
		if d.dhcpServer != nil {
			for _, a := range d.dhcpServer.allocs {
				if a.ifc == o {
					a.ifc = i
				}
			}
		}
	}
}

// restore brings back what the region held, as far as the config creates it again.
func (r *Router) restore(c *region.Contents) {
	byKey := make(map[region.Name]*domain, len(r.domains))
	for _, d := range r.domains {
		byKey[d.key] = d
	}
	var kept, dropped [5]int
	note := func(k int, ok bool, s int32) {
		if ok {
			kept[k]++
			return
		}
		dropped[k]++
		r.keep.Free(s)
	}
	for k := range c.Clients { // first: a lease gives its domain the address the rest needs
		note(0, r.restoreClient(byKey[c.Clients[k].Domain], &c.Clients[k]), c.Clients[k].Slot)
	}
	for k := range c.SLAAC { // as a lease: the address IPv6 links need
		note(4, r.restoreSLAAC(byKey[c.SLAAC[k].Domain], &c.SLAAC[k]), c.SLAAC[k].Slot)
	}
	for k := range c.ARP {
		note(1, r.restoreARP(byKey[c.ARP[k].Domain], &c.ARP[k]), c.ARP[k].Slot)
	}
	for k := range c.Leases {
		note(2, r.restoreLease(byKey[c.Leases[k].Domain], &c.Leases[k]), c.Leases[k].Slot)
	}
	for k := range c.Links {
		rec := &c.Links[k]
		note(3, r.restoreLink(byKey[rec.Client], byKey[rec.Server], rec), rec.Slot)
	}
	for k := range c.Links6 {
		rec := &c.Links6[k]
		note(3, r.restoreLink6(byKey[rec.Client], byKey[rec.Server], rec), rec.Slot)
	}
	r.gen++
	if kept != [5]int{} || dropped != [5]int{} {
		args := []any{"dhcp_clients", kept[0], "arp_entries", kept[1], "dhcp_leases", kept[2], "link_states", kept[3],
			"dropped", dropped[0] + dropped[1] + dropped[2] + dropped[3] + dropped[4]}
		if kept[4] != 0 {
			args = append(args, "slaac_configs", kept[4])
		}
		r.log.Info("state region: restored", args...)
	}
}

func (r *Router) restoreClient(d *domain, rec *region.Client) bool {
	if d == nil || d.dhcpClient == nil || d.ip.valid {
		return false
	}
	st := clientState(rec.State)
	pfx := netip.PrefixFrom(netip.AddrFrom4(rec.Addr), int(rec.PrefixBits))
	if st != clientBound && st != clientRenewing || rec.PrefixBits == 0 || rec.PrefixBits > 31 || pfx.Addr() == pfx.Masked().Addr() {
		return false
	}
	var gw netip.Addr
	if rec.HasGateway {
		if gw = netip.AddrFrom4(rec.Gateway); !pfx.Masked().Contains(gw) {
			return false
		}
	}
	cfg := newIPConfig(pfx, gw)
	for _, a := range rec.DNS {
		cfg.dns = append(cfg.dns, netip.AddrFrom4(a))
	}
	cfg.dnsDomain = rec.DNSDomain
	c := d.dhcpClient
	c.state, c.xid, c.offered, c.server = st, rec.XID, rec.Offered, rec.Server
	c.deadline, c.leaseEnd = time.Unix(0, rec.Deadline), time.Unix(0, rec.LeaseEnd)
	c.slot = rec.Slot
	r.setIPConfig(d, cfg)
	return true
}

func (r *Router) restoreARP(d *domain, rec *region.ARP) bool {
	if d == nil || !d.ip.inSubnet(rec.IP) || rec.IP == d.ip.addr || len(d.arp) >= maxARPEntries {
		return false
	}
	if _, dup := d.arp[rec.IP]; dup {
		return false
	}
	d.arp[rec.IP] = rec.MAC
	r.arpSlots[arpSlot{d.key, rec.IP}] = rec.Slot
	return true
}

func (r *Router) restoreLease(d *domain, rec *region.Lease) bool {
	if d == nil || d.dhcpServer == nil {
		return false
	}
	s, n := d.dhcpServer, be(rec.IP)
	if n < s.first || n > s.last || s.allocs[rec.MAC] != nil || s.used[n] != nil {
		return false
	}
	a := &allocation{ip: rec.IP, mac: rec.MAC, bound: rec.Bound, deadline: time.Unix(0, rec.Deadline),
		ifc: r.orphan(rec.Owner), slot: rec.Slot}
	s.allocs[a.mac], s.used[n] = a, a
	return true
}

// restoreLink makes the link state rec between domains c and s, if the config makes it so:
// the rules route its first packet to s with the tuples and NAT recorded, as newLink would.
func (r *Router) restoreLink(c, s *domain, rec *region.Link) bool {
	if c == nil || s == nil || !c.ip.valid || !s.ip.valid {
		return false
	}
	owner := r.orphan(rec.Owner)
	if owner.links >= maxLinksPerInterface {
		return false
	}
	ck := flowKey{src: rec.ClientTuple.Src, dst: rec.ClientTuple.Dst, sport: rec.ClientTuple.Sport, dport: rec.ClientTuple.Dport, proto: rec.Proto}
	sk := flowKey{src: rec.ServerTuple.Src, dst: rec.ServerTuple.Dst, sport: rec.ServerTuple.Sport, dport: rec.ServerTuple.Dport, proto: rec.Proto}
	p := protoIndex(rec.Proto)
	dec, ok := c.decide(p, ck.dst, ck.dport)
	if !ok || dec.to != s {
		return false
	}
	want := flowKey{src: dec.dst, dst: ck.src, sport: dec.dport, dport: ck.sport, proto: rec.Proto}
	if rec.NATPort != 0 {
		want.dst, want.dport = s.ip.addr, rec.NATPort
		if p == pICMP {
			want.sport = rec.NATPort
		}
	}
	if sk != want {
		return false
	}
	l := &link{p: p, owner: owner, lastActive: r.nowNs, tcp: rec.TCP, natPort: rec.NATPort, slot: rec.Slot}
	if l.tcp.State == tcpstate.Closed {
		l.closedAt = rec.ClosedAt
	}
	l.sides[0] = side{l: l, key: ck, idx: 0}
	l.sides[1] = side{l: l, key: sk, idx: 1}
	if !r.admit(l, c, s) {
		return false
	}
	owner.links++
	return true
}

// restoreLink6 is restoreLink for an IPv6 link state: the server side's tuple is the client
// side's reversed with what NAT66 changed, and admit6 checks it against the config.
func (r *Router) restoreLink6(c, s *domain, rec *region.Link6) bool {
	if c == nil || s == nil {
		return false
	}
	owner := r.orphan(rec.Owner)
	if owner.links >= maxLinksPerInterface {
		return false
	}
	t := &rec.ClientTuple
	ck := flowKey6{src: t.Src, dst: t.Dst, sport: t.Sport, dport: t.Dport, proto: rec.Proto}
	// The server's address and port are the client's destination, or a forward rule's.
	_, addr, port, _ := c.server6(&ck)
	sk := flowKey6{src: addr, dst: rec.ServerDst, sport: port, dport: ck.sport, proto: rec.Proto}
	p := protoIndex(rec.Proto)
	if rec.NATPort != 0 {
		sk.dport = rec.NATPort
		if p == pICMP {
			sk.sport = rec.NATPort
		}
	}
	l := &link{p: p, owner: owner, lastActive: r.nowNs, tcp: rec.TCP, natPort: rec.NATPort, slot: rec.Slot, v6: true}
	if l.tcp.State == tcpstate.Closed {
		l.closedAt = rec.ClosedAt
	}
	l.sides[0].key6, l.sides[1].key6 = ck, sk
	if !r.admit6(l, c, s) {
		return false
	}
	owner.links++
	return true
}
