package router

import (
	"net/netip"
	"slices"
	"strconv"

	"github.com/nicstack/nicstack/router/model"
	"github.com/nicstack/nicstack/router/tcpstate"
	"github.com/nicstack/nicstack/runtime/config"
)

// Report returns the <state> report as a node tree (written as XML or HID by the component)
// in the shape of Genode's nic_router (report.cc, Domain::report, Interface::report): per
// domain, in the order of their names, what <report> asks for, and in it its interfaces, the
// last attached first. Nil without <report>.
//
// Where Genode reports its RAM and capability quotas, the router has only what each session's
// client paid for its buffers: an interface's <ram-quota> shows that as its limit and the
// bytes of its frames the router holds for ARP as used. There is no <ram>/<cap> of the router
// itself and no <cap-quota>.
func (r *Router) Report() *config.Node {
	rc := r.cfg.Report
	if rc == nil {
		return nil
	}
	r.publishAll()
	live := r.liveCounts()
	root := &config.Node{Type: "state"}
	for _, name := range sortedDomainNames(r.domains) {
		d := r.domains[name]
		var ifs []*config.Node
		for k := len(d.ifs) - 1; k >= 0; k-- {
			if n := r.reportInterface(rc, d.ifs[k], live[d.ifs[k]]); n != nil {
				ifs = append(ifs, n)
			}
		}
		dn := node("domain", "name", d.name)
		if rc.Bytes {
			// Genode counts from the domain's side: it received what the router sent into
			// it.
			attr(dn, "rx_bytes", u(d.stats.txBytes))
			attr(dn, "tx_bytes", u(d.stats.rxBytes))
		}
		if rc.Config {
			ipv4, gw := "0.0.0.0/32", "0.0.0.0" // Genode's unset interface and gateway
			if d.ip.valid {
				ipv4 = d.ip.prefix().String()
				if d.ip.hasGW {
					gw = netip.AddrFrom4(d.ip.gateway).String()
				}
			}
			attr(dn, "ipv4", ipv4)
			attr(dn, "gw", gw)
			for _, a := range d.ip.dns {
				dn.Nodes = append(dn.Nodes, node("dns", "ip", a.String()))
			}
			if d.ip.dnsDomain != "" {
				dn.Nodes = append(dn.Nodes, node("dns-domain", "name", d.ip.dnsDomain))
			}
			reportIPv6(dn, d)
		}
		stats := false
		if rc.Stats {
			stats = reportStats(dn, &d.stats.left, nil)
		}
		fragm := rc.DroppedFragmIPv4 && d.stats.left.droppedFragmIPv4 > 0
		if fragm {
			dn.Nodes = append(dn.Nodes, node("dropped-fragm-ipv4", "value", u(d.stats.left.droppedFragmIPv4)))
		}
		if !rc.Bytes && !rc.Config && !stats && !fragm && len(ifs) == 0 {
			continue // Genode's Domain::report_empty
		}
		dn.Nodes = append(dn.Nodes, ifs...)
		root.Nodes = append(root.Nodes, dn)
	}
	return root
}

// interfaceCameOrWent asks for a report before the next interval under <report
// link_state_triggers="yes">: Genode counts a new or a gone interface as a change of its link
// state.
func (r *Router) interfaceCameOrWent() {
	if rc := r.cfg.Report; rc != nil && rc.LinkStateTriggers {
		r.reportTrigger = true
	}
}

// liveObjects are the live objects of one interface the report counts: link states by
// protocol and state, ARP waiters, DHCP allocations.
type liveObjects struct {
	links                       [3][4]uint64
	arpWaiters, dhcpAllocations uint64
}

// liveCounts counts every interface's live objects.
func (r *Router) liveCounts() map[*Interface]*liveObjects {
	out := map[*Interface]*liveObjects{}
	of := func(i *Interface) *liveObjects {
		if out[i] == nil {
			out[i] = &liveObjects{}
		}
		return out[i]
	}
	for l := range r.links {
		of(l.owner).links[l.p][l.tcp.State]++
	}
	for _, w := range r.waiters {
		of(w.src).arpWaiters++
	}
	for _, d := range r.domains {
		if d.dhcpServer != nil {
			for _, a := range d.dhcpServer.allocs {
				of(a.ifc).dhcpAllocations++
			}
		}
	}
	return out
}

// reportInterface is an <interface> node, nil when Genode's Interface::report_empty holds.
func (r *Router) reportInterface(rc *model.Report, i *Interface, live *liveObjects) *config.Node {
	if live == nil {
		live = &liveObjects{}
	}
	n := node("interface", "label", i.label)
	ll := rc.Config && i.dom != nil && (i.dom.ip6.valid || i.dom.slaac != nil)
	if ll {
		attr(n, "ipv6_link_local", netip.AddrFrom16(i.ll).String())
		if i.llDup {
			attr(n, "ipv6_link_local_state", "duplicate")
		}
	}
	if rc.LinkState {
		// An uplink's link is up while its session exists; other interfaces' follow their
		// domain.
		attr(n, "link_state", strconv.FormatBool(i.kind == Uplink || i.up))
	}
	quota := rc.Quota && i.kind != NicClient && i.ram > 0
	if quota {
		n.Nodes = append(n.Nodes, node("ram-quota", "used", strconv.Itoa(i.heldBytes),
			"limit", strconv.Itoa(i.ram), "avail", strconv.Itoa(i.ram-i.heldBytes)))
	}
	stats := false
	if rc.Stats {
		stats = reportStats(n, &i.counts, live)
	}
	fragm := rc.DroppedFragmIPv4 && i.counts.droppedFragmIPv4 > 0
	if fragm {
		n.Nodes = append(n.Nodes, node("dropped-fragm-ipv4", "value", u(i.counts.droppedFragmIPv4)))
	}
	if !quota && !rc.LinkState && !stats && !fragm && !ll {
		return nil
	}
	return n
}

// reportIPv6 adds our IPv6 extension to a domain's config in the report: its address and
// gateway, "duplicate" when DAD found the address taken, and the neighbour cache by address.
func reportIPv6(dn *config.Node, d *domain) {
	if !d.ip6.valid {
		return
	}
	attr(dn, "ipv6", netip.PrefixFrom(netip.AddrFrom16(d.ip6.addr), d.ip6.prefix.Bits()).String())
	if d.ip6.hasGW {
		attr(dn, "ipv6_gw", netip.AddrFrom16(d.ip6.gateway).String())
	}
	if d.ip6.dup {
		attr(dn, "ipv6_state", "duplicate")
	}
	for _, a := range d.dns6() { // learned by SLAAC's RDNSS or DHCPv6, beside IPv4's
		dn.Nodes = append(dn.Nodes, node("dns", "ip", a.String()))
	}
	ips := make([]netip.Addr, 0, len(d.nd))
	for ip := range d.nd {
		ips = append(ips, netip.AddrFrom16(ip))
	}
	slices.SortFunc(ips, netip.Addr.Compare)
	for _, ip := range ips {
		dn.Nodes = append(dn.Nodes, node("ipv6-neighbor", "ip", ip.String(), "mac", d.nd[ip.As16()].String()))
	}
}

// reportStats appends the sub-nodes of <report stats="yes"> to n: per protocol a <*-links>
// node, then <arp-waiters> and <dhcp-allocations>, each with a sub-node per count that is not
// 0 and only when one is. live is nil for a domain (which counts no live objects). It reports
// whether it appended any.
func reportStats(n *config.Node, c *reportCounts, live *liveObjects) bool {
	before := len(n.Nodes)
	for p, name := range [...]string{pTCP: "tcp-links", pUDP: "udp-links", pICMP: "icmp-links"} {
		lc := c.links[p]
		var counts []nameCount
		counts = append(counts, nameCount{"refused_for_ram", lc.refusedForRAM}, nameCount{"refused_for_ports", lc.refusedForPorts})
		if live != nil {
			for st := tcpstate.Opening; st <= tcpstate.Closed; st++ {
				counts = append(counts, nameCount{st.String(), live.links[p][st]})
			}
			// Genode's dissolved_timeout_* and dissolved_no_timeout count links dissolved
			// but not yet destroyed; the router destroys a link when it dissolves it.
		}
		counts = append(counts, nameCount{"destroyed", lc.destroyed})
		appendCounts(n, name, counts)
	}
	var arp, dhcp []nameCount
	if live != nil {
		arp = append(arp, nameCount{"alive", live.arpWaiters})
		dhcp = append(dhcp, nameCount{"alive", live.dhcpAllocations})
	}
	appendCounts(n, "arp-waiters", append(arp, nameCount{"destroyed", c.arpWaiters}))
	appendCounts(n, "dhcp-allocations", append(dhcp, nameCount{"destroyed", c.dhcpAllocations}))
	return len(n.Nodes) > before
}

type nameCount struct {
	name  string
	count uint64
}

// appendCounts appends <typ> with a <name value/> per count that is not 0, unless all are.
func appendCounts(n *config.Node, typ string, counts []nameCount) {
	var sub *config.Node
	for _, c := range counts {
		if c.count == 0 {
			continue
		}
		if sub == nil {
			sub = node(typ)
			n.Nodes = append(n.Nodes, sub)
		}
		sub.Nodes = append(sub.Nodes, node(c.name, "value", u(c.count)))
	}
}

func node(typ string, kv ...string) *config.Node {
	n := &config.Node{Type: typ}
	for k := 0; k+1 < len(kv); k += 2 {
		attr(n, kv[k], kv[k+1])
	}
	return n
}

func attr(n *config.Node, name, value string) {
	n.Attrs = append(n.Attrs, config.Attr{Name: name, Value: value})
}

func u(v uint64) string { return strconv.FormatUint(v, 10) }
