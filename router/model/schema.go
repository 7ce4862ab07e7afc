package model

import "github.com/nicstack/nicstack/runtime/config"

// Schema is the nic_router config as runtime/config checks it: node types and attribute
// names. `nicstack check --component nic_router` and Parse use it.
func Schema() *config.Schema { return RouterSchema().configSchema() }

func (s *Description) configSchema() *config.Schema {
	out := &config.Schema{Type: s.Type}
	for _, a := range s.Attrs {
		out.Attrs = append(out.Attrs, a.Name)
	}
	for _, n := range s.Nodes {
		out.Nodes = append(out.Nodes, n.configSchema())
	}
	return out
}

// Description documents the nic_router config: every node and attribute with its value kind
// and Genode's default ("(config)": the <config> attribute of the same name).
type Description struct {
	Type  string
	Attrs []SchemaAttr
	Nodes []*Description
}

// SchemaAttr is one attribute: Kind is one of bool, seconds, number, port, ipv4,
// ipv4_prefix, ip (either family), ipv6, ipv6_prefix, ipv6_prefix_or_slaac, ra_always_no, ip_prefix (either family), domain, label, name, icmp_code,
// path; Default is empty when the attribute has none.
type SchemaAttr struct {
	Name    string
	Kind    string
	Default string
}

// Attr returns the attribute description called name.
func (s *Description) Attr(name string) (SchemaAttr, bool) {
	for _, a := range s.Attrs {
		if a.Name == name {
			return a, true
		}
	}
	return SchemaAttr{}, false
}

// Node returns the sub-node description of type typ.
func (s *Description) Node(typ string) *Description {
	for _, n := range s.Nodes {
		if n.Type == typ {
			return n
		}
	}
	return nil
}

func permitNodes() []*Description {
	return []*Description{
		{Type: "permit", Attrs: []SchemaAttr{{"port", "port", ""}, {"domain", "domain", ""}}},
		{Type: "permit-any", Attrs: []SchemaAttr{{"domain", "domain", ""}}},
	}
}

func forwardAttrs() []SchemaAttr {
	return []SchemaAttr{{"port", "port", ""}, {"domain", "domain", ""}, {"to", "ip", ""}, {"to_port", "port", "0"}}
}

// RouterSchema describes the nic_router's <config>.
func RouterSchema() *Description {
	return &Description{
		Type: "config",
		Attrs: []SchemaAttr{
			{"max_packets_per_signal", "number", "50"},
			{"verbose", "bool", "no"},
			{"verbose_packets", "bool", "no"},
			{"verbose_packet_drop", "bool", "no"},
			{"verbose_domain_state", "bool", "no"},
			{"trace_packets", "bool", "no"},
			{"ld_verbose", "bool", "no"},
			{"dhcp_discover_timeout_sec", "seconds", "10"},
			{"dhcp_request_timeout_sec", "seconds", "10"},
			{"dhcp_offer_timeout_sec", "seconds", "10"},
			{"udp_idle_timeout_sec", "seconds", "30"},
			{"tcp_idle_timeout_sec", "seconds", "600"},
			{"icmp_idle_timeout_sec", "seconds", "10"},
			{"tcp_max_segm_lifetime_sec", "seconds", "15"},
			{"arp_request_timeout_sec", "seconds", "10"},
			{"icmp_echo_server", "bool", "yes"},
			{"icmp_type_3_code_on_fragm_ipv4", "icmp_code", "no"},
		},
		Nodes: []*Description{
			{Type: "report", Attrs: []SchemaAttr{
				{"config", "bool", "yes"}, {"config_triggers", "bool", "no"},
				{"bytes", "bool", "yes"}, {"stats", "bool", "yes"},
				{"link_state", "bool", "no"}, {"link_state_triggers", "bool", "no"},
				{"quota", "bool", "yes"}, {"interval_sec", "seconds", "5"},
				{"dropped_fragm_ipv4", "bool", "no"},
				// nicstack's one addition: a file the report is written to (.xml gets XML,
				// else HID) instead of the Report session "state" Genode's router opens.
				{"file", "path", ""},
			}},
			{Type: "default-policy", Attrs: []SchemaAttr{{"domain", "domain", ""}}},
			{Type: "policy", Attrs: []SchemaAttr{
				{"domain", "domain", ""}, {"label", "label", ""}, {"label_prefix", "label", ""},
				{"label_suffix", "label", ""},
			}},
			{Type: "nic-client", Attrs: []SchemaAttr{{"label", "label", ""}, {"domain", "domain", ""}}},
			{Type: "domain",
				Attrs: []SchemaAttr{
					{"name", "domain", ""}, {"interface", "ipv4_prefix", ""}, {"gateway", "ipv4", ""},
					{"verbose_packets", "bool", "(config)"}, {"verbose_packet_drop", "bool", "(config)"},
					{"trace_packets", "bool", "no"}, {"label", "label", ""},
					{"icmp_echo_server", "bool", "(config)"}, {"use_arp", "bool", "yes"},
					// Our IPv6 extension (docs/ipv6.md), named as Genode names a family's
					// attributes (dropped_fragm_ipv4, icmp_type_3_code_on_fragm_ipv4).
					{"interface_ipv6", "ipv6_prefix_or_slaac", ""}, {"gateway_ipv6", "ipv6", ""},
					{"mtu", "number", "1500"}, {"dhcpv6", "ra_always_no", "ra"},
				},
				Nodes: []*Description{
					// dst takes a prefix of either family: an IPv6 one routes IPv6.
					{Type: "ip", Attrs: []SchemaAttr{{"dst", "ip_prefix", ""}, {"domain", "domain", ""}}},
					{Type: "icmp", Attrs: []SchemaAttr{{"dst", "ip_prefix", ""}, {"domain", "domain", ""}}},
					{Type: "tcp", Attrs: []SchemaAttr{{"dst", "ip_prefix", ""}}, Nodes: permitNodes()},
					{Type: "udp", Attrs: []SchemaAttr{{"dst", "ip_prefix", ""}}, Nodes: permitNodes()},
					{Type: "tcp-forward", Attrs: forwardAttrs()},
					{Type: "udp-forward", Attrs: forwardAttrs()},
					{Type: "nat", Attrs: []SchemaAttr{
						{"domain", "domain", ""}, {"tcp-ports", "number", "0"},
						{"udp-ports", "number", "0"}, {"icmp-ids", "number", "0"},
					}},
					{Type: "dhcp-server",
						Attrs: []SchemaAttr{
							{"ip_first", "ipv4", ""}, {"ip_last", "ipv4", ""},
							{"ip_lease_time_sec", "seconds", "3600"}, {"dns_config_from", "domain", ""},
						},
						Nodes: []*Description{
							{Type: "dns-server", Attrs: []SchemaAttr{{"ip", "ipv4", ""}}},
							{Type: "dns-domain", Attrs: []SchemaAttr{{"name", "name", ""}}},
						}},
					// Our extension: router advertisements on the domain's links.
					{Type: "ra",
						Attrs: []SchemaAttr{{"max_interval_sec", "seconds", "600"}, {"lifetime_sec", "seconds", "3*max_interval_sec"},
							{"dns_config_from", "domain", ""}},
						Nodes: []*Description{
							{Type: "dns-server", Attrs: []SchemaAttr{{"ip", "ipv6", ""}}},
						}},
				}},
		},
	}
}
