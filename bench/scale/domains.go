package scale

import (
	"fmt"
	"net/netip"
	"strconv"

	"github.com/nicstack/nicstack/runtime/config"
	"github.com/nicstack/nicstack/runtime/label"
)

// Domains say how the router holds the guests.
const (
	// shared: as the base has it, every guest in the one domain its policy names. The router
	// sends a frame for that domain to each of its interfaces but the one it came from, as
	// Genode's nic_router does (a domain is one segment), so every guest sees every guest's
	// frames, and its stack drops those not for its MAC.
	domainsShared = "shared"
	// per-guest: each guest in a domain of its own, a copy of the base's with its own /24
	// (the third octet the guest's number) and DHCP range, and the base's NAT to it copied
	// per guest: Genode's way to keep guests apart.
	domainsPerGuest = "per-guest"
)

// maxPerGuest bounds per-guest domains: the guest's number is its subnet's third octet.
const maxPerGuest = 254

// splitDomains gives each of the n guests (PREFIX1..) a domain of its own in every router
// of root whose policy takes the guests.
func splitDomains(root *config.Node, prefix string, n int) error {
	if n > maxPerGuest {
		return fmt.Errorf("--domains %s: at most %d guests (a /24 each)", domainsPerGuest, maxPerGuest)
	}
	split := false
	for _, st := range root.Subs("start") {
		cfg := st.Sub("config")
		if startBinary(st) != routerBinary || cfg == nil {
			continue
		}
		ok, err := splitRouter(cfg, prefix, n)
		if err != nil {
			return err
		}
		split = split || ok
	}
	if !split {
		return fmt.Errorf("--domains %s: no router's <policy> takes the guests", domainsPerGuest)
	}
	return nil
}

// splitRouter splits one router's config; false if no policy of it takes the guests.
func splitRouter(cfg *config.Node, prefix string, n int) (bool, error) {
	var policy *config.Node
	for _, p := range cfg.Subs("policy") {
		if !label.SelectorOf(p).Conflicts(label.Prefixed(prefix+"1", "")) {
			policy = p
			break
		}
	}
	if policy == nil {
		return false, nil
	}
	name := policy.String("domain", "")
	var tmpl *config.Node
	for _, d := range cfg.Subs("domain") {
		if d.Name() == name {
			tmpl = d
		}
	}
	if tmpl == nil {
		return false, config.Errorf(policy.Pos, "domain %q: the router has no such domain", name)
	}
	at, _ := tmpl.Attr("interface")
	ifc, err := netip.ParsePrefix(at.Value)
	if err != nil || !ifc.Addr().Is4() || ifc.Bits() != 24 {
		return false, config.Errorf(tmpl.Pos, "domain %q: --domains %s wants an IPv4 /24 interface to copy, not %q", name, domainsPerGuest, at.Value)
	}
	var nodes []*config.Node
	for _, c := range cfg.Nodes {
		switch {
		case c == policy:
			for i := 1; i <= n; i++ {
				g := prefix + strconv.Itoa(i)
				nodes = append(nodes, &config.Node{Type: "policy", Pos: c.Pos, Attrs: []config.Attr{
					{Name: "label_prefix", Value: label.Prefixed(g, "")}, {Name: "domain", Value: g}}})
			}
		case c == tmpl:
			for i := 1; i <= n; i++ {
				d := c.Clone()
				d.Set("name", prefix+strconv.Itoa(i))
				renumber(d, i)
				nodes = append(nodes, d)
			}
		default:
			d := c.Clone()
			if err := copyRefs(d, name, prefix, n); err != nil {
				return false, err
			}
			nodes = append(nodes, d)
		}
	}
	cfg.Nodes = nodes
	return true, nil
}

// renumber moves a copied domain's IPv4 addresses (its interface, its DHCP range) into the
// /24 whose third octet is i.
func renumber(n *config.Node, i int) {
	for k, a := range n.Attrs {
		v, bits, cut := a.Value, "", false
		if p, err := netip.ParsePrefix(v); err == nil {
			v, bits, cut = p.Addr().String(), "/"+strconv.Itoa(p.Bits()), true
		}
		if ip, err := netip.ParseAddr(v); err == nil && ip.Is4() && (cut || a.Name == "ip_first" || a.Name == "ip_last") {
			b := ip.As4()
			b[2] = byte(i)
			n.Attrs[k].Value = netip.AddrFrom4(b).String() + bits
		}
	}
	for _, c := range n.Nodes {
		renumber(c, i)
	}
}

// copyRefs copies each <nat domain="name"> under n once per guest; any other reference to
// the domain cannot be split.
func copyRefs(n *config.Node, name, prefix string, count int) error {
	var nodes []*config.Node
	for _, c := range n.Nodes {
		if c.String("domain", "") != name {
			if err := copyRefs(c, name, prefix, count); err != nil {
				return err
			}
			nodes = append(nodes, c)
			continue
		}
		if c.Type != "nat" {
			return config.Errorf(c.Pos, "<%s domain=%q>: --domains %s copies only <nat> rules to the guests' domains", c.Type, name, domainsPerGuest)
		}
		for i := 1; i <= count; i++ {
			d := c.Clone()
			d.Set("domain", prefix+strconv.Itoa(i))
			nodes = append(nodes, d)
		}
	}
	n.Nodes = nodes
	return nil
}
