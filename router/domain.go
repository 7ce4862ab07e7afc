package router

import (
	"encoding/binary"
	"net/netip"
	"sort"

	"github.com/nicstack/nicstack/netdev/header"
	"github.com/nicstack/nicstack/router/model"
	"github.com/nicstack/nicstack/router/nat"
	"github.com/nicstack/nicstack/router/region"
)

// Protocol indexes for per-protocol tables: link states, NAT port spaces, quotas.
const (
	pTCP = iota
	pUDP
	pICMP
)

func protoIndex(p uint8) int {
	switch p {
	case header.ProtoTCP:
		return pTCP
	case header.ProtoUDP:
		return pUDP
	}
	return pICMP
}

var protoNames = [3]string{"tcp", "udp", "icmp"}

// ipConfig is a domain's IPv4 identity: from the config, or from its DHCP client.
type ipConfig struct {
	valid     bool
	addr      [4]byte
	net, mask uint32
	gateway   [4]byte
	hasGW     bool
	dns       []netip.Addr
	dnsDomain string
}

func newIPConfig(p netip.Prefix, gw netip.Addr) ipConfig {
	c := ipConfig{valid: true, addr: p.Addr().As4(), mask: ^uint32(0) << (32 - p.Bits())}
	c.net = be(c.addr) & c.mask
	if gw.IsValid() {
		c.gateway, c.hasGW = gw.As4(), true
	}
	return c
}

func be(a [4]byte) uint32 { return binary.BigEndian.Uint32(a[:]) }

// inSubnet reports whether a is in the subnet (the router's address, network and broadcast
// addresses included).
func (c *ipConfig) inSubnet(a [4]byte) bool { return c.valid && be(a)&c.mask == c.net }

func (c *ipConfig) broadcast() [4]byte {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], c.net|^c.mask)
	return b
}

func (c *ipConfig) prefix() netip.Prefix {
	bits := 0
	for m := c.mask; m != 0; m <<= 1 {
		bits++
	}
	return netip.PrefixFrom(netip.AddrFrom4(c.addr), bits)
}

// domain is a model.Domain at run time.
type domain struct {
	m    *model.Domain
	name string
	key  region.Name // name's, in the state region
	ip   ipConfig
	ifs  []*Interface

	ipRules, icmpRules []directRule
	tcpRules, udpRules []transportRule
	forward            [2]map[uint16]forwardRule // pTCP, pUDP
	forward6           [2]map[uint16]forwardRule // those to IPv6 addresses (forward6.go)
	// The rules with IPv6 dst prefixes (ipv6.go), apart so that IPv4's stay as they were.
	ip6Rules, icmp6Rules []directRule
	tcp6Rules, udp6Rules []transportRule

	arp     map[[4]byte]header.MAC
	waiters map[[4]byte]*arpWaiter // by the address they wait for (Genode's foreign ARP waiters)

	// IPv6, our extension (ipv6.go, ndp.go, ra.go): the identity, the neighbour cache and
	// its waiters as ARP's, the router advertisements.
	ip6      ip6Config
	nd       map[[16]byte]header.MAC
	waiters6 map[[16]byte]*arpWaiter
	ra       raState
	slaac    *slaacClient // interface_ipv6="slaac" (slaac.go)

	links map[flowKey]*side
	// last is the side the previous lookup found: bulk transfers hit it frame after frame
	// and skip hashing the key.
	last  *side
	ports [3]nat.Ports
	quota map[string]*[3]int // NAT ports in use here per translated domain, of both families
	// The IPv6 link states and NAT66's port spaces (link6.go): a port of each family is
	// paired with a different address, so the two spaces do not collide; the quota is shared.
	links6 map[flowKey6]*side
	ports6 [3]nat.Ports

	dhcpServer *dhcpServer
	dhcpClient *dhcpClient
	stats      *domainStats // kept across reconfigurations of the same domain
}

type prefixMatch struct{ net, mask uint32 }

func newPrefixMatch(p netip.Prefix) prefixMatch {
	m := uint32(0)
	if p.Bits() > 0 {
		m = ^uint32(0) << (32 - p.Bits())
	}
	return prefixMatch{net: be(p.Addr().As4()) & m, mask: m}
}

func (p prefixMatch) matches(a [4]byte) bool { return be(a)&p.mask == p.net }

// directRule and transportRule match IPv4 destinations by dst, IPv6 ones by dst6.
type directRule struct {
	dst  prefixMatch
	dst6 netip.Prefix
	to   *domain
}

type transportRule struct {
	dst       prefixMatch
	dst6      netip.Prefix
	permitAny *domain
	permit    map[uint16]*domain
}

type forwardRule struct {
	to     *domain
	addr   [4]byte
	addr6  [16]byte // of a rule in forward6
	toPort uint16
}

func newDomain(m *model.Domain) *domain {
	d := &domain{
		m:        m,
		name:     m.Name,
		key:      region.NameOf(m.Name),
		arp:      map[[4]byte]header.MAC{},
		waiters:  map[[4]byte]*arpWaiter{},
		links:    map[flowKey]*side{},
		links6:   map[flowKey6]*side{},
		nd:       map[[16]byte]header.MAC{},
		waiters6: map[[16]byte]*arpWaiter{},
		quota:    map[string]*[3]int{},
		stats:    &domainStats{},
	}
	if m.Interface.IsValid() {
		d.ip = newIPConfig(m.Interface, m.Gateway)
	} else {
		d.dhcpClient = &dhcpClient{}
	}
	if m.DHCPServer != nil {
		d.dhcpServer = newDHCPServer(m.DHCPServer)
	}
	if m.Interface6.IsValid() {
		d.ip6 = newIP6Config(m.Interface6, m.Gateway6)
	} else if m.SLAAC {
		d.slaac = &slaacClient{}
	}
	return d
}

// resolveRules turns domain names into domains; model.Parse made sure they all exist.
func (d *domain) resolveRules(all map[string]*domain) {
	direct := func(rs []model.DirectRule, v6 bool) []directRule {
		var out []directRule
		for _, r := range rs {
			if r.Dst.Addr().Is6() != v6 {
				continue
			}
			dr := directRule{to: all[r.Domain]}
			if v6 {
				dr.dst6 = r.Dst
			} else {
				dr.dst = newPrefixMatch(r.Dst)
			}
			out = append(out, dr)
		}
		return out
	}
	transport := func(rs []model.TransportRule, v6 bool) []transportRule {
		var out []transportRule
		for _, r := range rs {
			if r.Dst.Addr().Is6() != v6 {
				continue
			}
			t := transportRule{permit: map[uint16]*domain{}}
			if v6 {
				t.dst6 = r.Dst
			} else {
				t.dst = newPrefixMatch(r.Dst)
			}
			if r.PermitAny != "" {
				t.permitAny = all[r.PermitAny]
			}
			for p, n := range r.Permit {
				t.permit[p] = all[n]
			}
			out = append(out, t)
		}
		return out
	}
	forward := func(rs map[uint16]model.ForwardRule) map[uint16]forwardRule {
		out := map[uint16]forwardRule{}
		for p, r := range rs {
			f := forwardRule{to: all[r.Domain], toPort: r.ToPort}
			if r.To.Is6() {
				f.addr6 = r.To.As16()
			} else {
				f.addr = r.To.As4()
			}
			out[p] = f
		}
		return out
	}
	if s := d.dhcpServer; s != nil && s.m.DNSConfigFrom != "" {
		s.from = all[s.m.DNSConfigFrom]
	}
	if ra := d.m.RA; ra != nil && ra.DNSConfigFrom != "" {
		d.ra.from = all[ra.DNSConfigFrom]
	}
	d.ipRules, d.icmpRules = direct(d.m.IPRules, false), direct(d.m.ICMPRules, false)
	d.tcpRules, d.udpRules = transport(d.m.TCPRules, false), transport(d.m.UDPRules, false)
	d.ip6Rules, d.icmp6Rules = direct(d.m.IPRules, true), direct(d.m.ICMPRules, true)
	d.tcp6Rules, d.udp6Rules = transport(d.m.TCPRules, true), transport(d.m.UDPRules, true)
	d.forward = [2]map[uint16]forwardRule{forward(d.m.TCPForward), forward(d.m.UDPForward)}
	d.forward6 = [2]map[uint16]forwardRule{forward(d.m.TCPForward6), forward(d.m.UDPForward6)}
}

// ready is Genode's domain ready state: false while the domain's DHCP server takes its DNS
// config from a domain that has no IPv4 config (dns_config_from). The links of its Nic
// sessions follow it (Interface.linkState).
func (d *domain) ready() bool {
	s := d.dhcpServer
	return s == nil || s.from == nil || s.from.ip.valid
}

// ipRule is the longest-prefix <ip> rule for dst.
func (d *domain) ipRule(dst [4]byte) *domain {
	for _, r := range d.ipRules {
		if r.dst.matches(dst) {
			return r.to
		}
	}
	return nil
}

// decision is where a rule sends the first packet of a new link state.
type decision struct {
	to    *domain
	dst   [4]byte
	dport uint16
}

// decide applies the rules that create link states, in Genode's order after domain-local
// traffic and link states: forward rules for packets to the router, then the longest-prefix
// <tcp>/<udp> rule (permit-any before permit) or <icmp> rule.
func (d *domain) decide(p int, dst [4]byte, dport uint16) (decision, bool) {
	if p != pICMP && dst == d.ip.addr {
		if f, ok := d.forward[p][dport]; ok {
			out := decision{to: f.to, dst: f.addr, dport: dport}
			if f.toPort != 0 {
				out.dport = f.toPort
			}
			return out, true
		}
	}
	switch p {
	case pICMP:
		for _, r := range d.icmpRules {
			if r.dst.matches(dst) {
				return decision{to: r.to, dst: dst, dport: dport}, true
			}
		}
	default:
		rules := d.tcpRules
		if p == pUDP {
			rules = d.udpRules
		}
		for _, r := range rules {
			if !r.dst.matches(dst) {
				continue
			}
			if r.permitAny != nil {
				return decision{to: r.permitAny, dst: dst, dport: dport}, true
			}
			if to := r.permit[dport]; to != nil {
				return decision{to: to, dst: dst, dport: dport}, true
			}
			break // only the longest-prefix rule counts
		}
	}
	return decision{}, false
}

// natQuota returns the quota of domain from at d for protocol p, and whether d translates
// from at all.
func (d *domain) natQuota(from *domain, p int) (int, bool) {
	n, ok := d.m.NAT[from.name]
	if !ok {
		return 0, false
	}
	return [3]int{n.TCPPorts, n.UDPPorts, n.ICMPIDs}[p], true
}

func sortedDomainNames(m map[string]*domain) []string {
	out := make([]string, 0, len(m))
	for n := range m {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
