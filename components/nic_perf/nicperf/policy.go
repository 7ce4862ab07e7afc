package nicperf

import (
	"slices"
	"time"

	"github.com/nicstack/nicstack/netdev/header"
	"github.com/nicstack/nicstack/runtime/config"
	"github.com/nicstack/nicstack/runtime/label"
)

// Genode's form of nic_perf's <config>:
//
//	<config period_ms="5000" count="10">
//		<default-policy> <interface ip="10.0.2.55" dhcp_client_ip="10.0.2.56"/>
//		                 <tx mtu="1500" to="10.0.2.56" udp_port="12345"/> </default-policy>
//		<policy label_prefix="..."> ... </policy>
//		<nic-client> <interface .../> <tx .../> </nic-client>
//	</config>
//
// Each of <policy>, <default-policy> and <nic-client> says what nic_perf does on one
// session: <interface> its own address (absent: DHCP) and the address it hands out as a
// DHCP server, <tx> the UDP frames it generates.

var (
	// policyInterface is <interface> of a session nic_perf serves, whose MAC the policy may set.
	policyInterface = &config.Schema{Type: "interface", Attrs: []string{"ip", "dhcp_client_ip", "mac"}}
	// clientInterface is <interface> of <nic-client>: Genode's nic_perf takes no mac there.
	clientInterface = &config.Schema{Type: "interface", Attrs: []string{"ip", "dhcp_client_ip"}}
	txSchema        = &config.Schema{Type: "tx", Attrs: []string{"mtu", "to", "udp_port"}}
)

// Policy is a <policy>: the sessions whose label it selects run Config.
type Policy struct {
	Selector label.Selector
	Config   Config
}

// Served returns what a session nic_perf serves under label runs: the Config of the <policy>
// that selects the label (as Genode's Session_policy picks it), else of the
// <default-policy>; false when neither does: Genode's nic_perf denies a new session then, and
// runs an open one as an empty policy says (the Config returned). In the older form every
// session runs c.
func (c Config) Served(sessionLabel string) (Config, bool) {
	if c.Policies == nil && c.Default == nil {
		return c, true
	}
	if i := label.Best(len(c.Policies), func(i int) label.Selector { return c.Policies[i].Selector }, sessionLabel); i >= 0 {
		return c.Policies[i].Config, true
	}
	if c.Default != nil {
		return *c.Default, true
	}
	return sessionDefaults(servedMAC), false
}

// The MACs of Genode's nic_perf: its own on a Nic session it serves (a <policy>'s
// <interface mac> replaces it). Its <nic-client> sends from 00:00:00:00:00:00, having never
// asked its server; ours sends from the older form's default MAC instead, a valid address
// that a router's ARP cache and DHCP server can key on.
var (
	servedMAC = header.MAC{2, 3, 4, 5, 6, 7}
	clientMAC = header.MAC{2, 0, 0, 0, 0, 1}
)

// Genode's defaults, as its code has them (its README says logging is off by default): log
// every 5 s, exit after 10000 periods; 1024-byte frames.
const (
	genodePeriod = 5 * time.Second
	genodeCount  = 10000
	genodeMTU    = 1024
)

// parseGenode reads Genode's form. The older form's attributes for a session are refused in
// it: the nodes say what each session does.
func parseGenode(n *config.Node) (cfg Config, err error) {
	for _, a := range n.Attrs {
		if slices.Contains(sessionAttrs, a.Name) {
			return cfg, config.Errorf(a.Pos, "%s: with <policy>, <default-policy> or <nic-client> (Genode's form) "+
				"their <interface> and <tx> say what nic_perf does on a session; "+
				"the <config>'s own session attributes (nicstack's older form) do not mix with them", a.Name)
		}
	}
	num := numbers{n: n}
	num.component(&cfg.Component, genodePeriod, genodeCount)
	if num.err != nil {
		return cfg, num.err
	}
	cfg.Session, cfg.Genode = "Nic", true
	for _, p := range n.Subs("policy") {
		pc, err := parseSession(p, servedMAC, true)
		if err != nil {
			return cfg, err
		}
		cfg.Policies = append(cfg.Policies, Policy{Selector: label.SelectorOf(p), Config: pc})
	}
	if d := n.Sub("default-policy"); d != nil {
		dc, err := parseSession(d, servedMAC, true)
		if err != nil {
			return cfg, err
		}
		cfg.Default = &dc
	}
	if cfg.Policies != nil || cfg.Default != nil {
		cfg.Service = "Nic"
	}
	if c := n.Sub("nic-client"); c != nil {
		cc, err := parseSession(c, clientMAC, false)
		if err != nil {
			return cfg, err
		}
		cc.Component, cc.Client = cfg.Component, true
		cc.Genode = true
		cfg = cc
	}
	return cfg, nil
}

// sessionDefaults is what a session runs under an empty policy: its own MAC, an address by
// DHCP, no generator.
func sessionDefaults(own header.MAC) Config {
	return Config{MAC: own, DHCP: true, Flows: 1, Size: genodeMTU}
}

// parseSession reads the <interface> and <tx> of a <policy>, <default-policy> or
// <nic-client> n into the settings of one session; policyMAC says whether <interface mac>
// may replace its MAC.
func parseSession(n *config.Node, own header.MAC, policyMAC bool) (cfg Config, err error) {
	cfg = sessionDefaults(own)
	if i := n.Sub("interface"); i != nil {
		// Genode's nic_perf asks by DHCP only when <interface> is absent (an <interface>
		// without ip leaves it without an address); its README says an absent ip does. We
		// follow the README: an interface without an address is of no use.
		a, ok, err := i.IPv4("ip")
		if err != nil {
			return cfg, err
		}
		if ok {
			cfg.IP, cfg.DHCP = a.As4(), false
		}
		if cfg.DHCPClientIP, err = ip(i, "dhcp_client_ip", [4]byte{}); err != nil {
			return cfg, err
		}
		if policyMAC {
			if cfg.MAC, err = mac(i, "mac", own); err != nil {
				return cfg, err
			}
		}
	}
	t := n.Sub("tx")
	if t == nil {
		return cfg, nil
	}
	// Genode's README calls to and udp_port mandatory: without them its generator sends nothing.
	for _, need := range []string{"to", "udp_port"} {
		if !t.Has(need) {
			return cfg, config.Errorf(t.Pos, "<tx> needs %s (the generator's destination)", need)
		}
	}
	cfg.TX, cfg.ResolveDstMAC = true, true
	num := numbers{n: t}
	cfg.Size = int(num.get("mtu", genodeMTU, minSize, maxSize))
	cfg.DstPort = uint16(num.get("udp_port", 0, 1, 65535))
	if num.err != nil {
		return cfg, num.err
	}
	cfg.DstIP, err = ip(t, "to", [4]byte{})
	return cfg, err
}
