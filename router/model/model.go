// Package model is the nic_router config as data: the <config> node tree read into domains,
// rules, NAT quotas, DHCP servers and policies, with Genode's defaults and spellings. A domain
// with any invalid part is invalid as a whole, and so is every domain that refers to it; Parse
// says why for each.
package model

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"time"

	"github.com/nicstack/nicstack/runtime/label"
)

// Config is the whole router config.
type Config struct {
	MaxPacketsPerSignal int // 0: no limit
	Verbose             bool
	VerbosePackets      bool
	VerbosePacketDrop   bool
	VerboseDomainState  bool
	ICMPEchoServer      bool
	// ICMPType3CodeOnFragm is the ICMP destination-unreachable code sent back for an IPv4
	// fragment, or -1 ("no") to drop fragments silently.
	ICMPType3CodeOnFragm int

	DHCPDiscoverTimeout time.Duration
	DHCPRequestTimeout  time.Duration
	DHCPOfferTimeout    time.Duration
	UDPIdleTimeout      time.Duration
	TCPIdleTimeout      time.Duration
	ICMPIdleTimeout     time.Duration
	TCPMaxSegmLifetime  time.Duration
	ARPRequestTimeout   time.Duration

	Report        *Report // nil: no report
	Policies      []Policy
	DefaultPolicy string // domain name, "" when there is none
	NicClients    []NicClient
	Domains       map[string]*Domain // the valid domains
	Invalid       []InvalidDomain    // in the order they were found invalid
	// Problems is what Parse found wrong, each with its position: the router logs them when
	// it applies the config (and runs with what is valid), `nicstack check` reports them.
	Problems []error
}

// Report is <report>.
type Report struct {
	// File is where the report goes (nicstack's one addition to Genode's <report>); "": to a
	// Report session.
	File              string
	Interval          time.Duration
	Bytes, Stats      bool
	Quota, Config     bool
	ConfigTriggers    bool
	LinkState         bool
	LinkStateTriggers bool
	DroppedFragmIPv4  bool
}

// Policy is <policy>: sessions whose label matches go to Domain.
type Policy struct {
	label.Selector
	Domain string
}

// NicClient is <nic-client>: the router opens a Nic session itself.
type NicClient struct {
	Label  string
	Domain string
}

// InvalidDomain names a domain that was dropped and why.
type InvalidDomain struct {
	Name   string
	Reason string
}

// Domain is one <domain>.
type Domain struct {
	Name string
	// Interface is the router's address and the subnet; invalid (zero) means the domain is
	// configured by its DHCP client.
	Interface         netip.Prefix
	Gateway           netip.Addr // zero: none
	VerbosePackets    bool
	VerbosePacketDrop bool
	ICMPEchoServer    bool
	UseARP            bool
	Label             string

	// Our IPv6 extension (docs/ipv6.md); Genode's router has no IPv6.
	// Interface6 is interface_ipv6, the router's global address and the on-link prefix
	// (invalid: the domain has no IPv6, or SLAAC); Gateway6 is gateway_ipv6 (zero: none).
	Interface6 netip.Prefix
	Gateway6   netip.Addr
	// SLAAC is interface_ipv6="slaac": the domain takes its address, gateway and MTU from
	// an upstream router's RA (RFC 4862), as a domain without interface takes its IPv4
	// config by DHCP, and DNS servers from the RA's RDNSS or DHCPv6 (Information-Request).
	SLAAC bool
	// DHCPv6 is dhcpv6: when a SLAAC domain asks for DNS servers by stateless DHCPv6:
	// "ra" when an RA has the O or M flag (the default), "always", or "no".
	DHCPv6 string
	// MTU is the link MTU of the domain's interfaces: an IPv6 packet larger than it gets a
	// packet too big instead, and the RA carries it. IPv4 forwarding ignores it, as Genode's.
	MTU int
	RA  *RA // <ra>: router advertisements; nil: none

	// Rules of both families in one list each, longest prefix first; Dst tells the family.
	IPRules    []DirectRule // longest prefix first
	ICMPRules  []DirectRule // longest prefix first
	TCPRules   []TransportRule
	UDPRules   []TransportRule
	TCPForward map[uint16]ForwardRule
	UDPForward map[uint16]ForwardRule
	// The forward rules whose to is IPv6: they forward IPv6 flows to interface_ipv6.
	TCPForward6 map[uint16]ForwardRule
	UDPForward6 map[uint16]ForwardRule
	NAT         map[string]NAT // by the domain whose packets are translated
	DHCPServer  *DHCPServer
}

// DirectRule is <ip> or <icmp>.
type DirectRule struct {
	Dst    netip.Prefix
	Domain string
}

// TransportRule is <tcp> or <udp> with its permits.
type TransportRule struct {
	Dst       netip.Prefix
	PermitAny string            // domain, "" when there is no <permit-any>
	Permit    map[uint16]string // port to domain
}

// ForwardRule is <tcp-forward> or <udp-forward>.
type ForwardRule struct {
	Port   uint16
	Domain string
	To     netip.Addr
	ToPort uint16 // 0: keep the port
}

// NAT is <nat>: quotas of the named domain at this one (0 disables the protocol).
type NAT struct {
	Domain   string
	TCPPorts int
	UDPPorts int
	ICMPIDs  int
}

// RA is <ra>, our extension: the router advertises itself and the domain's prefix on the
// domain's links (RFC 4861), so that guests configure themselves by SLAAC (RFC 4862).
type RA struct {
	// MaxInterval is MaxRtrAdvInterval, the longest time between unsolicited RAs (RFC 4861
	// 6.2.1: 4 s to 1800 s); the shortest is a third of it.
	MaxInterval time.Duration
	// Lifetime is the router lifetime an RA announces: how long guests keep the router as
	// their default router (0: not a default router; else MaxInterval to 9000 s).
	Lifetime   time.Duration
	DNSServers []netip.Addr // <dns-server ip>, IPv6: the RDNSS option (RFC 8106)
	// DNSConfigFrom names the domain whose IPv6 DNS servers (learned by SLAAC's RDNSS or
	// DHCPv6) the RDNSS carries on. As dns_config_from of <dhcp-server>, it counts only when
	// <ra> has no <dns-server>; Parse leaves it empty otherwise.
	DNSConfigFrom string
}

// DHCPServer is <dhcp-server>.
type DHCPServer struct {
	IPFirst, IPLast netip.Addr
	LeaseTime       time.Duration // ip_lease_time_sec; absent or 0: Genode's 3600 s
	// DNSConfigFrom names the domain whose IPv4 config (from its DHCP client) supplies the
	// DNS servers and domain name. As in Genode it counts only when the <dhcp-server> has no
	// <dns-server> and no valid <dns-domain>; Parse leaves it empty otherwise.
	DNSConfigFrom string
	DNSServers    []netip.Addr
	DNSDomain     string
}

// SameOffer reports whether s hands out what o does, the address range aside: lease time,
// DNS servers, DNS domain and where they come from. A reconfigured DHCP server keeps its
// leases (those the range still holds) only then, as Genode's does.
func (s *DHCPServer) SameOffer(o *DHCPServer) bool {
	return s.LeaseTime == o.LeaseTime && slices.Equal(s.DNSServers, o.DNSServers) &&
		s.DNSDomain == o.DNSDomain && s.DNSConfigFrom == o.DNSConfigFrom
}

// Targets returns every domain name the domain's rules refer to, in config order.
func (d *Domain) Targets() []string {
	var out []string
	for _, r := range d.IPRules {
		out = append(out, r.Domain)
	}
	for _, r := range d.ICMPRules {
		out = append(out, r.Domain)
	}
	for _, rs := range [][]TransportRule{d.TCPRules, d.UDPRules} {
		for _, r := range rs {
			if r.PermitAny != "" {
				out = append(out, r.PermitAny)
			}
			for _, p := range sortedPorts(r.Permit) {
				out = append(out, r.Permit[p])
			}
		}
	}
	for _, fs := range []map[uint16]ForwardRule{d.TCPForward, d.UDPForward, d.TCPForward6, d.UDPForward6} {
		for _, p := range sortedPorts(fs) {
			out = append(out, fs[p].Domain)
		}
	}
	for _, n := range sortedKeys(d.NAT) {
		out = append(out, n)
	}
	if d.DHCPServer != nil && d.DHCPServer.DNSConfigFrom != "" {
		out = append(out, d.DHCPServer.DNSConfigFrom)
	}
	if d.RA != nil && d.RA.DNSConfigFrom != "" {
		out = append(out, d.RA.DNSConfigFrom)
	}
	return out
}

func sortedPorts[V any](m map[uint16]V) []uint16 {
	out := make([]uint16, 0, len(m))
	for p := range m {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// DomainFor returns the domain of the <policy> that selects a session label as Genode's
// Session_policy picks it (label.Best), else of <default-policy>.
func (c *Config) DomainFor(sessionLabel string) (string, bool) {
	if i := label.Best(len(c.Policies), func(i int) label.Selector { return c.Policies[i].Selector }, sessionLabel); i >= 0 {
		return c.Policies[i].Domain, true
	}
	return c.DefaultPolicy, c.DefaultPolicy != ""
}

// NicClientDomain returns the domain of the <nic-client> with label.
func (c *Config) NicClientDomain(label string) (string, bool) {
	for _, n := range c.NicClients {
		if n.Label == label {
			return n.Domain, true
		}
	}
	return "", false
}

// Serves says whether the router would give a session with label a domain, beside the
// sessions with the labels others: nil if so, else why not. A domain with a DHCP server has
// room for as many clients as its range holds addresses, and each of others its policies put
// in that domain counts as one, whether or not it asks for a lease (an approximation: a client
// with a static address takes none, and a lease outlives its client for its lease time).
func (c *Config) Serves(label string, others []string) error {
	name, ok := c.DomainFor(label)
	if !ok {
		return fmt.Errorf("no <policy> of the router selects the label %q, and it has no <default-policy>", label)
	}
	d := c.Domains[name]
	if d == nil {
		return fmt.Errorf("the label %q selects domain %q, which the router's config lacks or disables", label, name)
	}
	if d.DHCPServer == nil {
		return nil
	}
	taken := 0
	for _, o := range others {
		if n, ok := c.DomainFor(o); ok && n == name {
			taken++
		}
	}
	if size := poolSize(d.DHCPServer); taken >= size {
		return fmt.Errorf("the address pool of domain %q (%s..%s, %d addresses) is full: %d clients are in the domain",
			name, d.DHCPServer.IPFirst, d.DHCPServer.IPLast, size, taken)
	}
	return nil
}

// poolSize is the number of addresses a DHCP server's range holds.
func poolSize(s *DHCPServer) int {
	first, last := s.IPFirst.As4(), s.IPLast.As4()
	return int(binary.BigEndian.Uint32(last[:])-binary.BigEndian.Uint32(first[:])) + 1
}
