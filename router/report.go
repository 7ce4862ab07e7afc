package router

import (
	"net/netip"
	"sort"
	"strconv"

	"github.com/nicstack/nicstack/router/tcpstate"
	"github.com/nicstack/nicstack/runtime/config"
)

// Report returns the <state> report as a node tree (written as XML or HID by the component),
// with what <report> asks for: per domain its IPv4 config, byte counters, interfaces with
// their link state, link-state counts per protocol and NAT quota use. Nil without <report>.
func (r *Router) Report() *config.Node {
	rc := r.cfg.Report
	if rc == nil {
		return nil
	}
	r.publishAll()
	root := &config.Node{Type: "state"}
	for _, name := range sortedDomainNames(r.domains) {
		d := r.domains[name]
		dn := node("domain", "name", d.name)
		if rc.Config {
			if d.ip.valid {
				attr(dn, "ipv4", d.ip.prefix().String())
				if d.ip.hasGW {
					attr(dn, "gw", netip.AddrFrom4(d.ip.gateway).String())
				}
				for _, a := range d.ip.dns {
					dn.Nodes = append(dn.Nodes, node("dns", "ip", a.String()))
				}
			} else {
				attr(dn, "ipv4", "none")
			}
		}
		if rc.Bytes {
			attr(dn, "rx_bytes", u(d.stats.RxBytes.Load()))
			attr(dn, "tx_bytes", u(d.stats.TxBytes.Load()))
		}
		if rc.DroppedFragmIPv4 {
			attr(dn, "dropped_fragm_ipv4", u(d.stats.DroppedFragmIPv4.Load()))
		}
		if rc.Stats {
			attr(dn, "dropped", u(d.stats.Dropped.Load()))
			for p := range 3 {
				pn := node(protoNames[p]+"-links",
					"opened", u(d.stats.LinksOpened[p].Load()),
					"dissolved", u(d.stats.LinksDissolved[p].Load()),
					"nat_refused", u(d.stats.NATRefused[p].Load()))
				if rc.LinkState {
					var by [4]int
					active := 0
					for l := range r.links {
						if l.p == p && l.sides[0].dom == d {
							active++
							by[l.tcp.State]++
						}
					}
					attr(pn, "active", strconv.Itoa(active))
					if p == pTCP {
						for st := tcpstate.Opening; st <= tcpstate.Closed; st++ {
							attr(pn, st.String(), strconv.Itoa(by[st]))
						}
					}
				}
				dn.Nodes = append(dn.Nodes, pn)
			}
		}
		if rc.Quota {
			for _, from := range sortedKeysQuota(d.quota) {
				q := d.quota[from]
				n := d.m.NAT[from]
				dn.Nodes = append(dn.Nodes, node("nat", "domain", from,
					"tcp_ports_used", strconv.Itoa(q[pTCP]), "tcp_ports", strconv.Itoa(n.TCPPorts),
					"udp_ports_used", strconv.Itoa(q[pUDP]), "udp_ports", strconv.Itoa(n.UDPPorts),
					"icmp_ids_used", strconv.Itoa(q[pICMP]), "icmp_ids", strconv.Itoa(n.ICMPIDs)))
			}
		}
		for _, i := range d.ifs {
			in := node("interface", "label", i.label, "kind", i.kind.String(), "mac", i.MAC().String())
			if rc.LinkState {
				attr(in, "link_state", strconv.FormatBool(i.up))
			}
			if rc.Bytes {
				attr(in, "rx_bytes", u(i.stats.RxBytes.Load()))
				attr(in, "tx_bytes", u(i.stats.TxBytes.Load()))
				attr(in, "dropped_full", u(i.stats.DroppedFull.Load()))
			}
			dn.Nodes = append(dn.Nodes, in)
		}
		root.Nodes = append(root.Nodes, dn)
	}
	return root
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

func sortedKeysQuota(m map[string]*[3]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
