package model

import (
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"time"

	"github.com/nicstack/nicstack/runtime/config"
	"github.com/nicstack/nicstack/runtime/label"
)

// Parse reads a <config> node. It always returns a usable Config; its Problems list what is
// wrong, each with the file position: unknown nodes and attributes, malformed values (the
// default is used instead) and invalid domains (dropped, with the reason). The router logs
// them as warnings; `nicstack check` rejects a config that has any.
func Parse(n *config.Node) *Config {
	p := &parser{dnsFrom: map[string]config.Pos{}, raDNSFrom: map[string]config.Pos{}}
	for _, e := range config.Check(n, Schema()) {
		p.errs = append(p.errs, e)
	}
	c := &Config{
		MaxPacketsPerSignal:  int(p.number(n, "max_packets_per_signal", 50, 1<<20)),
		Verbose:              p.boolean(n, "verbose", false),
		VerbosePackets:       p.boolean(n, "verbose_packets", false),
		VerbosePacketDrop:    p.boolean(n, "verbose_packet_drop", false),
		VerboseDomainState:   p.boolean(n, "verbose_domain_state", false),
		ICMPEchoServer:       p.boolean(n, "icmp_echo_server", true),
		DHCPDiscoverTimeout:  p.seconds(n, "dhcp_discover_timeout_sec", 10),
		DHCPRequestTimeout:   p.seconds(n, "dhcp_request_timeout_sec", 10),
		DHCPOfferTimeout:     p.seconds(n, "dhcp_offer_timeout_sec", 10),
		UDPIdleTimeout:       p.seconds(n, "udp_idle_timeout_sec", 30),
		TCPIdleTimeout:       p.seconds(n, "tcp_idle_timeout_sec", 600),
		ICMPIdleTimeout:      p.seconds(n, "icmp_idle_timeout_sec", 10),
		TCPMaxSegmLifetime:   p.seconds(n, "tcp_max_segm_lifetime_sec", 15),
		ARPRequestTimeout:    p.seconds(n, "arp_request_timeout_sec", 10),
		ICMPType3CodeOnFragm: -1,
		Domains:              map[string]*Domain{},
	}
	if a, ok := n.Attr("icmp_type_3_code_on_fragm_ipv4"); ok && a.Value != "no" {
		if v, err := strconv.ParseUint(a.Value, 10, 8); err == nil && v <= 15 {
			c.ICMPType3CodeOnFragm = int(v)
		} else {
			p.errorf(a.Pos, "attribute \"icmp_type_3_code_on_fragm_ipv4\": %q is neither \"no\" nor a code 0..15", a.Value)
		}
	}
	if r := n.Sub("report"); r != nil {
		c.Report = &Report{
			File:              r.String("file", ""),
			Interval:          p.seconds(r, "interval_sec", 5),
			Bytes:             p.boolean(r, "bytes", true),
			Stats:             p.boolean(r, "stats", true),
			Quota:             p.boolean(r, "quota", true),
			Config:            p.boolean(r, "config", true),
			ConfigTriggers:    p.boolean(r, "config_triggers", false),
			LinkState:         p.boolean(r, "link_state", false),
			LinkStateTriggers: p.boolean(r, "link_state_triggers", false),
			DroppedFragmIPv4:  p.boolean(r, "dropped_fragm_ipv4", false),
		}
	}
	for _, pn := range n.Subs("policy") {
		c.Policies = append(c.Policies, Policy{Selector: label.SelectorOf(pn), Domain: pn.String("domain", "")})
	}
	if dp := n.Sub("default-policy"); dp != nil {
		c.DefaultPolicy = dp.String("domain", "")
	}
	for _, nc := range n.Subs("nic-client") {
		c.NicClients = append(c.NicClients, NicClient{Label: nc.String("label", ""), Domain: nc.String("domain", "")})
	}

	// First each domain on its own, then the references between them until nothing changes.
	nodes := map[string]*config.Node{}
	var order []string
	for _, dn := range n.Subs("domain") {
		d, why := p.domain(dn, c)
		switch {
		case why != "":
			p.invalid(c, dn, d.Name, why)
		case nodes[d.Name] != nil:
			p.invalid(c, dn, d.Name, "name not unique")
			if c.Domains[d.Name] != nil {
				p.invalid(c, nodes[d.Name], d.Name, "name not unique")
				delete(c.Domains, d.Name)
			}
		default:
			c.Domains[d.Name] = d
			order = append(order, d.Name)
		}
		if d.Name != "" && nodes[d.Name] == nil {
			nodes[d.Name] = dn
		}
	}
	for changed := true; changed; {
		changed = false
		for _, name := range order {
			d := c.Domains[name]
			if d == nil {
				continue
			}
			if why, at := p.references(c, d); why != "" {
				if at == (config.Pos{}) {
					at = nodes[name].Pos
				}
				p.invalidAt(c, at, name, why)
				delete(c.Domains, name)
				changed = true
			}
		}
	}
	c.Problems = p.errs
	return c
}

// references checks that every domain d names exists and is valid; the position is where
// the first that does not is named (zero: d's node).
func (p *parser) references(c *Config, d *Domain) (string, config.Pos) {
	if s := d.DHCPServer; s != nil && s.DNSConfigFrom != "" && c.Domains[s.DNSConfigFrom] == nil {
		return fmt.Sprintf("invalid <dhcp-server>: dns_config_from names unknown or invalid domain %q", s.DNSConfigFrom), p.dnsFrom[d.Name]
	}
	if ra := d.RA; ra != nil && ra.DNSConfigFrom != "" && c.Domains[ra.DNSConfigFrom] == nil {
		return fmt.Sprintf("invalid <ra>: dns_config_from names unknown or invalid domain %q", ra.DNSConfigFrom), p.raDNSFrom[d.Name]
	}
	for _, t := range d.Targets() {
		if c.Domains[t] == nil {
			return fmt.Sprintf("rule refers to unknown or invalid domain %q", t), config.Pos{}
		}
	}
	return "", config.Pos{}
}

type parser struct {
	errs      []error
	dnsFrom   map[string]config.Pos // where each domain's dns_config_from is
	raDNSFrom map[string]config.Pos // and that of its <ra>
}

func (p *parser) errorf(pos config.Pos, format string, args ...any) {
	p.errs = append(p.errs, config.Errorf(pos, format, args...))
}

func (p *parser) invalid(c *Config, n *config.Node, name, why string) {
	p.invalidAt(c, n.Pos, name, why)
}

func (p *parser) invalidAt(c *Config, pos config.Pos, name, why string) {
	c.Invalid = append(c.Invalid, InvalidDomain{Name: name, Reason: why})
	p.errorf(pos, "invalid domain %q: %s", name, why)
}

func (p *parser) boolean(n *config.Node, name string, def bool) bool {
	v, err := n.Bool(name, def)
	if err != nil {
		p.errs = append(p.errs, err)
	}
	return v
}

func (p *parser) number(n *config.Node, name string, def, max uint64) uint64 {
	v, err := n.Number(name, def)
	if err != nil {
		p.errs = append(p.errs, err)
		return def
	}
	if v > max {
		a, _ := n.Attr(name)
		p.errorf(a.Pos, "attribute %q of <%s>: %d is above %d", name, n.Type, v, max)
		return def
	}
	return v
}

func (p *parser) seconds(n *config.Node, name string, def uint64) time.Duration {
	return time.Duration(p.number(n, name, def, 1<<31)) * time.Second
}

// domain reads one <domain>; a non-empty reason means it is invalid.
func (p *parser) domain(n *config.Node, c *Config) (*Domain, string) {
	d := &Domain{
		Name:              n.String("name", ""),
		Label:             n.String("label", ""),
		VerbosePackets:    p.boolean(n, "verbose_packets", c.VerbosePackets),
		VerbosePacketDrop: p.boolean(n, "verbose_packet_drop", c.VerbosePacketDrop),
		ICMPEchoServer:    p.boolean(n, "icmp_echo_server", c.ICMPEchoServer),
		UseARP:            p.boolean(n, "use_arp", true),
		TCPForward:        map[uint16]ForwardRule{},
		UDPForward:        map[uint16]ForwardRule{},
		TCPForward6:       map[uint16]ForwardRule{},
		UDPForward6:       map[uint16]ForwardRule{},
		NAT:               map[string]NAT{},
	}
	if d.Name == "" {
		return d, "missing name"
	}
	if pfx, ok, err := n.Prefix("interface"); err != nil {
		return d, err.Error()
	} else if ok {
		if pfx.Bits() == 0 || pfx.Bits() > 31 || pfx.Addr() == pfx.Masked().Addr() || pfx.Addr() == broadcast(pfx) {
			return d, fmt.Sprintf("interface %s is no host address in a subnet", pfx)
		}
		d.Interface = pfx
	}
	if gw, ok, err := n.IPv4("gateway"); err != nil {
		return d, err.Error()
	} else if ok {
		if d.Interface.IsValid() && !d.Interface.Masked().Contains(gw) {
			return d, fmt.Sprintf("gateway %s is not in the subnet %s", gw, d.Interface.Masked())
		}
		d.Gateway = gw
	}
	if why := p.ipv6(n, d); why != "" {
		return d, why
	}
	for _, rn := range n.Children() {
		var why string
		switch rn.Type {
		case "ip", "icmp":
			var r DirectRule
			if r, why = p.directRule(rn); why == "" {
				if rn.Type == "ip" {
					d.IPRules = append(d.IPRules, r)
				} else {
					d.ICMPRules = append(d.ICMPRules, r)
				}
			}
		case "tcp", "udp":
			var r TransportRule
			if r, why = p.transportRule(rn); why == "" {
				if rn.Type == "tcp" {
					d.TCPRules = append(d.TCPRules, r)
				} else {
					d.UDPRules = append(d.UDPRules, r)
				}
			}
		case "tcp-forward", "udp-forward":
			var r ForwardRule
			if r, why = p.forwardRule(rn, d); why == "" {
				// A rule forwards the family of its to: IPv4 flows to interface, IPv6
				// ones to interface_ipv6; a port may have one rule of each.
				m, family := d.TCPForward, "IPv4"
				switch {
				case rn.Type == "tcp-forward" && r.To.Is6():
					m, family = d.TCPForward6, "IPv6"
				case r.To.Is6():
					m, family = d.UDPForward6, "IPv6"
				case rn.Type == "udp-forward":
					m = d.UDPForward
				}
				if _, dup := m[r.Port]; dup {
					why = fmt.Sprintf("two <%s> rules for port %d to %s addresses", rn.Type, r.Port, family)
				}
				m[r.Port] = r
			}
		case "nat":
			var r NAT
			if r, why = p.nat(rn); why == "" {
				if _, dup := d.NAT[r.Domain]; dup {
					why = fmt.Sprintf("two <nat> rules for domain %q", r.Domain)
				}
				d.NAT[r.Domain] = r
			}
		case "dhcp-server":
			if d.DHCPServer != nil {
				why = "more than one <dhcp-server>"
			} else {
				d.DHCPServer, why = p.dhcpServer(rn, d)
			}
		case "ra":
			if d.RA != nil {
				why = "more than one <ra>"
			} else {
				d.RA, why = p.ra(rn, d)
			}
		}
		if why != "" {
			return d, fmt.Sprintf("invalid <%s> at %s: %s", rn.Type, rn.Pos, why)
		}
	}
	byPrefix := func(rs []DirectRule) {
		sort.SliceStable(rs, func(i, j int) bool { return rs[i].Dst.Bits() > rs[j].Dst.Bits() })
	}
	byPrefix(d.IPRules)
	byPrefix(d.ICMPRules)
	for _, rs := range [][]TransportRule{d.TCPRules, d.UDPRules} {
		sort.SliceStable(rs, func(i, j int) bool { return rs[i].Dst.Bits() > rs[j].Dst.Bits() })
	}
	return d, ""
}

func broadcast(p netip.Prefix) netip.Addr {
	a := p.Masked().Addr().As4()
	host := ^uint32(0) >> p.Bits()
	for i := 0; i < 4; i++ {
		a[i] |= byte(host >> (24 - 8*i))
	}
	return netip.AddrFrom4(a)
}

// dst reads a rule's destination prefix, IPv4 or IPv6, masked.
func dst(n *config.Node) (netip.Prefix, string) {
	a, ok := n.Attr("dst")
	if !ok {
		return netip.Prefix{}, "missing dst"
	}
	pfx, err := netip.ParsePrefix(a.Value)
	if err != nil || pfx.Addr().Is4In6() || pfx.Addr().Zone() != "" {
		return pfx, config.Errorf(a.Pos, "attribute \"dst\" of <%s>: %q is not an IPv4 or IPv6 prefix (like 10.0.1.0/24 or 2001:db8:1::/64)", n.Type, a.Value).Error()
	}
	return pfx.Masked(), ""
}

// ipv6 reads a domain's IPv6 attributes, our extension: interface_ipv6, gateway_ipv6, mtu.
func (p *parser) ipv6(n *config.Node, d *Domain) string {
	d.MTU = 1500
	if a, ok := n.Attr("mtu"); ok {
		v, err := config.ParseNumber(a.Value)
		if err != nil || v < header6MinMTU || v > 65535 {
			return config.Errorf(a.Pos, "attribute \"mtu\" of <domain>: %q is not a number from 1280 (IPv6's minimum) to 65535", a.Value).Error()
		}
		d.MTU = int(v)
	}
	if a, ok := n.Attr("interface_ipv6"); ok && a.Value == "slaac" {
		d.SLAAC = true
	} else if ok {
		pfx, err := netip.ParsePrefix(a.Value)
		if err != nil || !pfx.Addr().Is6() || pfx.Addr().Is4In6() || pfx.Addr().Zone() != "" {
			return config.Errorf(a.Pos, "attribute \"interface_ipv6\" of <domain>: %q is neither an IPv6 prefix (like 2001:db8:1::1/64) nor \"slaac\"", a.Value).Error()
		}
		ip := pfx.Addr()
		switch {
		case !ip.IsGlobalUnicast() && !ip.IsPrivate():
			return fmt.Sprintf("interface_ipv6 %s is no global or unique local unicast address", pfx)
		case pfx.Bits() == 0 || pfx.Bits() > 127 || ip == pfx.Masked().Addr():
			// The prefix's first address is its subnet-router anycast address (RFC 4291 2.6.1).
			return fmt.Sprintf("interface_ipv6 %s is no host address in a prefix", pfx)
		}
		d.Interface6 = pfx
	}
	d.DHCPv6 = "ra"
	if a, ok := n.Attr("dhcpv6"); ok {
		switch {
		case a.Value != "ra" && a.Value != "always" && a.Value != "no":
			return config.Errorf(a.Pos, "attribute \"dhcpv6\" of <domain>: %q is not \"ra\", \"always\" or \"no\"", a.Value).Error()
		case !d.SLAAC:
			return config.Errorf(a.Pos, "attribute \"dhcpv6\" of <domain>: only a domain with interface_ipv6=\"slaac\" asks by DHCPv6").Error()
		}
		d.DHCPv6 = a.Value
	}
	if a, ok := n.Attr("gateway_ipv6"); ok {
		gw, err := netip.ParseAddr(a.Value)
		if err != nil || !gw.Is6() || gw.Is4In6() || gw.Zone() != "" {
			return config.Errorf(a.Pos, "attribute \"gateway_ipv6\" of <domain>: %q is not an IPv6 address (like fe80::1)", a.Value).Error()
		}
		switch {
		case d.SLAAC:
			return config.Errorf(a.Pos, "attribute \"gateway_ipv6\" of <domain>: not with interface_ipv6=\"slaac\": the gateway is the router whose RA gives the address").Error()
		case !d.Interface6.IsValid():
			return "gateway_ipv6 without interface_ipv6"
		case !gw.IsLinkLocalUnicast() && !d.Interface6.Masked().Contains(gw):
			return fmt.Sprintf("gateway_ipv6 %s is neither link-local nor in the prefix %s", gw, d.Interface6.Masked())
		}
		d.Gateway6 = gw
	}
	return ""
}

// header6MinMTU is IPv6's minimum link MTU (RFC 8200 5).
const header6MinMTU = 1280

// ra reads <ra>: RFC 4861 6.2.1's bounds for the intervals and the lifetime.
func (p *parser) ra(n *config.Node, d *Domain) (*RA, string) {
	switch {
	case d.SLAAC:
		// An uplink configured by another router's RA must not advertise itself there.
		return nil, "a domain with interface_ipv6=\"slaac\" has no prefix of its own to advertise"
	case !d.Interface6.IsValid():
		return nil, "a domain without interface_ipv6 has no prefix to advertise"
	}
	maxInt, err := n.Number("max_interval_sec", 600)
	if err != nil {
		return nil, err.Error()
	}
	if maxInt < 4 || maxInt > 1800 {
		return nil, fmt.Sprintf("max_interval_sec %d is not 4 to 1800", maxInt)
	}
	life, err := n.Number("lifetime_sec", 3*maxInt)
	if err != nil {
		return nil, err.Error()
	}
	if life != 0 && (life < maxInt || life > 9000) {
		return nil, fmt.Sprintf("lifetime_sec %d is neither 0 nor max_interval_sec (%d) to 9000", life, maxInt)
	}
	ra := &RA{MaxInterval: time.Duration(maxInt) * time.Second, Lifetime: time.Duration(life) * time.Second}
	for _, dn := range n.Subs("dns-server") {
		a, ok := dn.Attr("ip")
		if !ok {
			return nil, fmt.Sprintf("<dns-server> at %s: missing ip", dn.Pos)
		}
		ip, err := netip.ParseAddr(a.Value)
		if err != nil || !ip.Is6() || ip.Is4In6() || ip.Zone() != "" || ip.IsUnspecified() || ip.IsMulticast() {
			return nil, config.Errorf(a.Pos, "attribute \"ip\" of <dns-server>: %q is not an IPv6 unicast address", a.Value).Error()
		}
		ra.DNSServers = append(ra.DNSServers, ip)
	}
	// As Genode's dns_config_from of <dhcp-server>: it counts only without <dns-server>.
	if a, ok := n.Attr("dns_config_from"); ok && a.Value != "" && len(ra.DNSServers) == 0 {
		ra.DNSConfigFrom = a.Value
		p.raDNSFrom[d.Name] = a.Pos
	}
	return ra, ""
}

func domainAttr(n *config.Node) (string, string) {
	d := n.String("domain", "")
	if d == "" {
		return "", "missing domain"
	}
	return d, ""
}

func (p *parser) directRule(n *config.Node) (DirectRule, string) {
	var r DirectRule
	var why string
	if r.Dst, why = dst(n); why != "" {
		return r, why
	}
	r.Domain, why = domainAttr(n)
	return r, why
}

func port(n *config.Node, name string, required bool, max uint64) (uint16, string) {
	v, err := n.Number(name, 0)
	if err != nil {
		return 0, err.Error()
	}
	if v == 0 && required {
		return 0, "missing or zero " + name
	}
	if v > max {
		return 0, fmt.Sprintf("%s %d is above %d", name, v, max)
	}
	return uint16(v), ""
}

func (p *parser) transportRule(n *config.Node) (TransportRule, string) {
	r := TransportRule{Permit: map[uint16]string{}}
	var why string
	if r.Dst, why = dst(n); why != "" {
		return r, why
	}
	for _, pn := range n.Children() {
		dom, why := domainAttr(pn)
		if why != "" {
			return r, fmt.Sprintf("<%s> at %s: %s", pn.Type, pn.Pos, why)
		}
		switch pn.Type {
		case "permit-any":
			r.PermitAny = dom
		case "permit":
			pt, why := port(pn, "port", true, 65535)
			if why != "" {
				return r, fmt.Sprintf("<permit> at %s: %s", pn.Pos, why)
			}
			r.Permit[pt] = dom
		}
	}
	return r, ""
}

func (p *parser) forwardRule(n *config.Node, d *Domain) (ForwardRule, string) {
	var r ForwardRule
	var why string
	// Only system and registered ports are forwarded: the dynamic range is NAT's.
	if r.Port, why = port(n, "port", true, 49151); why != "" {
		return r, why
	}
	if r.ToPort, why = port(n, "to_port", false, 65535); why != "" {
		return r, why
	}
	if r.Domain, why = domainAttr(n); why != "" {
		return r, why
	}
	a, ok := n.Attr("to")
	if !ok {
		return r, "missing to"
	}
	to, err := netip.ParseAddr(a.Value)
	if err != nil || to.Is4In6() || to.Zone() != "" || to.Is6() && (to.IsUnspecified() || to.IsMulticast() || to.IsLinkLocalUnicast()) {
		return r, config.Errorf(a.Pos, "attribute \"to\" of <%s>: %q is neither an IPv4 address nor an IPv6 unicast one beyond the link", n.Type, a.Value).Error()
	}
	// An IPv6 to forwards IPv6 flows to the domain's interface_ipv6 address.
	if to.Is6() && !d.Interface6.IsValid() && !d.SLAAC {
		return r, config.Errorf(a.Pos, "attribute \"to\" of <%s>: %s is IPv6, but the domain has no interface_ipv6 to forward from", n.Type, to).Error()
	}
	r.To = to
	return r, ""
}

func (p *parser) nat(n *config.Node) (NAT, string) {
	var r NAT
	var why string
	if r.Domain, why = domainAttr(n); why != "" {
		return r, why
	}
	for _, q := range []struct {
		name string
		v    *int
	}{{"tcp-ports", &r.TCPPorts}, {"udp-ports", &r.UDPPorts}, {"icmp-ids", &r.ICMPIDs}} {
		v, err := n.Number(q.name, 0)
		if err != nil {
			return r, err.Error()
		}
		if v > 65536 {
			return r, fmt.Sprintf("%s %d is above 65536", q.name, v)
		}
		*q.v = int(v)
	}
	return r, ""
}

func (p *parser) dhcpServer(n *config.Node, d *Domain) (*DHCPServer, string) {
	if !d.Interface.IsValid() {
		return nil, "a domain without interface is a DHCP client and cannot be a DHCP server too"
	}
	s := &DHCPServer{}
	subnet := d.Interface.Masked()
	for _, a := range []struct {
		name string
		v    *netip.Addr
	}{{"ip_first", &s.IPFirst}, {"ip_last", &s.IPLast}} {
		ip, ok, err := n.IPv4(a.name)
		if err != nil {
			return nil, err.Error()
		}
		if !ok {
			return nil, "missing " + a.name
		}
		if !subnet.Contains(ip) {
			return nil, fmt.Sprintf("%s %s is not in the subnet %s", a.name, ip, subnet)
		}
		*a.v = ip
	}
	if s.IPLast.Less(s.IPFirst) {
		return nil, "ip_last is below ip_first"
	}
	if r := d.Interface.Addr(); !r.Less(s.IPFirst) && !s.IPLast.Less(r) {
		return nil, fmt.Sprintf("the range %s..%s covers the router's address %s", s.IPFirst, s.IPLast, r)
	}
	// Genode reads 0 as absent: the default lease time.
	lease, err := n.Number("ip_lease_time_sec", 0)
	if err != nil {
		return nil, err.Error()
	}
	if lease == 0 {
		lease = 3600
	}
	if lease > 1<<31 {
		return nil, "ip_lease_time_sec is above 2^31"
	}
	s.LeaseTime = time.Duration(lease) * time.Second
	for _, dn := range n.Subs("dns-server") {
		ip, ok, err := dn.IPv4("ip")
		switch {
		case err != nil:
			return nil, "invalid DNS server entry: " + err.Error()
		case !ok:
			return nil, fmt.Sprintf("invalid DNS server entry at %s: missing ip", dn.Pos)
		case ip.IsUnspecified():
			return nil, fmt.Sprintf("invalid DNS server entry at %s: 0.0.0.0", dn.Pos)
		}
		s.DNSServers = append(s.DNSServers, ip)
	}
	// A bad <dns-domain> costs the server only its option 15 in Genode.
	if dd := n.Sub("dns-domain"); dd != nil {
		if name := dd.String("name", ""); name != "" && len(name) <= 253 {
			s.DNSDomain = name
		} else {
			p.errorf(dd.Pos, "<dns-domain>: name %q is not 1 to 253 characters; ignored", name)
		}
	}
	// Genode's README: dns_config_from "takes effect only when the <dhcp-server> tag does not
	// contain any <dns-domain> or <dns-server> sub-tags"; otherwise it is not even looked up.
	if a, ok := n.Attr("dns_config_from"); ok && a.Value != "" && len(s.DNSServers) == 0 && s.DNSDomain == "" {
		s.DNSConfigFrom = a.Value
		p.dnsFrom[d.Name] = a.Pos
	}
	return s, ""
}
