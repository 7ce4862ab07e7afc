// Package components is the one table of nicstack's components: for each binary its config
// schema and the parse that makes its typed config. `nicstack check`, the supervisor, the
// benches and each component process (through component.Main) read it; a component's home is
// components/<binary>/, its main and its glue, and its entry here is how nicstack knows it.
//
// The table links only config code: no packet path, no TCP/IP stack.
package components

import (
	"github.com/nicstack/nicstack/components/dynamic_rom/dynamicrom"
	"github.com/nicstack/nicstack/components/internal/guest"
	"github.com/nicstack/nicstack/components/internal/hostnic"
	"github.com/nicstack/nicstack/components/internal/testcomp"
	"github.com/nicstack/nicstack/components/nic_dump/nicdump"
	"github.com/nicstack/nicstack/components/nic_perf/nicperf"
	"github.com/nicstack/nicstack/components/report_rom/reportrom"
	"github.com/nicstack/nicstack/drivers/intel"
	"github.com/nicstack/nicstack/drivers/ipxe"
	"github.com/nicstack/nicstack/router/model"
	"github.com/nicstack/nicstack/runtime/component"
	"github.com/nicstack/nicstack/runtime/config"
)

// Table lists every component nicstack ships.
var Table = component.Table{
	{
		Binary:  "nic_router",
		Summary: "Genode's NIC router: domains, policies, NAT, link states, ARP, DHCP, ICMP",
		Schema:  model.Schema(),
		// The router refuses no config: a rule it cannot use disables its domain, with a log
		// line, as Genode's does. model.Parse checks the schema too.
		Parse: func(n *config.Node, _ string) (any, []error, error) {
			cfg := model.Parse(n)
			return cfg, cfg.Problems, nil
		},
		LogsWarnings: true,
		Files: path(func(cfg *model.Config) string {
			if cfg.Report == nil {
				return ""
			}
			return cfg.Report.File
		}),
		Sessions: routerSessions,
		// A client attached at run time must land in a domain of a policy, with room in its
		// DHCP pool; the router's Nic and Uplink sessions both select by policy.
		Serves: func(cfg any, _ string, label string, others []string) error {
			c, err := component.ConfigOf[*model.Config](cfg)
			if err != nil {
				return err
			}
			return c.Serves(label, others)
		},
		// 1 MiB: 8191 entries of 128 bytes (router/region): link states, ARP entries and
		// DHCP leases beyond them are served but do not survive a crash. Pages are touched
		// only as far as used.
		State: 1 << 20,
	},
	{
		Binary:  "intel_nic_hw",
		Summary: "the emulated Intel 82574L / i217-LM NIC, its wire a session, a TAP or AF_PACKET",
		Schema:  intel.ConfigSchema,
		Parse:   component.Parser(intel.ParseConfig),
		Sessions: typed(func(cfg intel.Config) []component.SessionRequest {
			if cfg.Wire.Service == "" {
				return nil
			}
			return []component.SessionRequest{{Service: cfg.Wire.Service}}
		}),
	},
	{
		Binary:   "ipxe_nic",
		Summary:  "the ipxe-style Intel NIC driver: RX interrupt throttling, TX batching",
		Schema:   ipxe.ConfigSchema,
		Parse:    component.Parser(ipxe.ParseConfig),
		Sessions: fixedSessions(component.SessionRequest{Service: "Platform"}, component.SessionRequest{Service: "Uplink", Label: "uplink"}),
	},
	{
		Binary:   "linux_nic",
		Summary:  "an Uplink driver on a Linux TAP with IFF_VNET_HDR offloads",
		Schema:   hostnic.TapNIC.Schema,
		Parse:    component.Parser(hostnic.TapNIC.ParseConfig),
		Sessions: hostNICSessions(hostnic.TapNIC),
	},
	{
		Binary:   "packet_nic",
		Summary:  "an Uplink driver on AF_PACKET TPACKET_V3 rings",
		Schema:   hostnic.PacketNIC.Schema,
		Parse:    component.Parser(hostnic.PacketNIC.ParseConfig),
		Sessions: hostNICSessions(hostnic.PacketNIC),
	},
	{
		Binary:  "vm",
		Summary: "the VM side: an embedded TCP/IP stack, a TAP into a network namespace, or a QEMU over a stream socket or vhost-user",
		Schema:  guest.Schema,
		Parse:   component.Parser(guest.ParseConfig),
		Files:   guestFiles,
		// the socket a stream or vhost-user guest's QEMU connects to
		Sockets:  path(func(cfg guest.Config) string { return cfg.Socket }),
		Sessions: guestSessions,
	},
	{
		Binary:   "remote_host",
		Summary:  "the far end of a wire: an embedded stack with a static address and iperf server",
		Schema:   guest.Schema,
		Parse:    component.Parser(guest.ParseConfig),
		Files:    guestFiles,
		Sessions: guestSessions,
	},
	{
		Binary:  "nic_perf",
		Summary: "Genode's packet-stream test tool: UDP generator and sink",
		Schema:  nicperf.Schema,
		Parse:   component.Parser(nicperf.ParseConfig),
		Sessions: typed(func(cfg nicperf.Config) []component.SessionRequest {
			if !cfg.Client {
				return nil
			}
			return []component.SessionRequest{{Service: cfg.Session, Label: cfg.Label}}
		}),
	},
	{
		Binary:   "nic_dump",
		Summary:  "Genode's bump in the wire: passes a Nic session's frames both ways and logs each (and pcap)",
		Schema:   nicdump.Schema,
		Parse:    component.Parser(nicdump.ParseConfig),
		Files:    path(func(cfg nicdump.Config) string { return cfg.Pcap }),
		Sessions: fixedSessions(component.SessionRequest{Service: "Nic"}),
	},
	{
		Binary:  "dynamic_rom",
		Summary: "Genode's ROM server whose modules change by a timeline: configs that change at run time",
		Schema:  dynamicrom.Schema,
		Parse:   component.Parser(dynamicrom.ParseConfig),
	},
	{
		Binary:  "report_rom",
		Summary: "Genode's report_rom: keeps the reports of Report sessions, serves them as ROMs by policy",
		Schema:  reportrom.Schema,
		Parse:   component.Parser(reportrom.ParseConfig),
	},
	{
		Binary:   "test-nic_router_dhcp-client",
		Summary:  "Genode's test component: a DHCP client that starts over at each link up and logs each lease",
		Schema:   &config.Schema{Type: "config", Attrs: []string{"verbose"}},
		Sessions: fixedSessions(component.SessionRequest{Service: "Nic"}),
	},
	{
		Binary:  "test-nic_router_dhcp-manager",
		Summary: "Genode's test component: writes nic_router_2's config with the DNS config of its uplink's lease",
		Schema:  &config.Schema{Type: "config"},
		Sessions: fixedSessions(component.SessionRequest{Service: "ROM", Label: "router_state"},
			component.SessionRequest{Service: "Report", Label: "router_config"}),
	},
	{
		Binary:  "test_echo",
		Summary: "test component: sends every frame back",
		Schema:  testcomp.EchoSchema,
	},
	{
		Binary:  "test_client",
		Summary: "test component: sends numbered frames and checks the replies",
		Schema:  testcomp.ClientSchema,
		Sessions: typed(func(n *config.Node) []component.SessionRequest {
			return []component.SessionRequest{{Service: n.String("service", "Nic"), Label: n.String("label", "")}}
		}),
	},
}

// guestFiles is the iperf report file a guest's config names.
var guestFiles = path(func(cfg guest.Config) string { return cfg.Report })

// path makes a Spec's Files or Sockets of the one path ("": none) a component's typed config
// names.
func path[C any](of func(C) string) func(any) []string {
	return func(cfg any) []string {
		if c, ok := cfg.(C); ok && of(c) != "" {
			return []string{of(c)}
		}
		return nil
	}
}

// typed makes a Spec's Sessions of a function of a component's typed config.
func typed[C any](of func(C) []component.SessionRequest) func(any) []component.SessionRequest {
	return func(cfg any) []component.SessionRequest {
		if c, ok := cfg.(C); ok {
			return of(c)
		}
		return nil
	}
}

// routerSessions are the router's <nic-client> sessions and, when its <report> names no
// file, its Report session.
var routerSessions = typed(func(cfg *model.Config) []component.SessionRequest {
	var out []component.SessionRequest
	if cfg.Report != nil && cfg.Report.File == "" {
		out = append(out, component.SessionRequest{Service: "Report", Label: "state"})
	}
	for _, nc := range cfg.NicClients {
		out = append(out, component.SessionRequest{Service: "Nic", Label: nc.Label})
	}
	return out
})

// hostNICSessions are a host NIC driver's device session and the Uplink it serves the
// router with.
func hostNICSessions(k *hostnic.Kind) func(any) []component.SessionRequest {
	return typed(func(cfg hostnic.Config) []component.SessionRequest {
		return []component.SessionRequest{{Service: k.Service}, {Service: "Uplink", Label: cfg.Label}}
	})
}

// guestSessions are a guest's Nic (or Uplink) session and, of a netns guest, its Tap.
var guestSessions = typed(func(cfg guest.Config) []component.SessionRequest {
	out := []component.SessionRequest{{Service: cfg.Session, Label: cfg.Label}}
	if cfg.Guest == "netns" {
		out = append(out, component.SessionRequest{Service: "Tap"})
	}
	return out
})

// fixedSessions is the Sessions of a component that requests the same whatever its config.
func fixedSessions(reqs ...component.SessionRequest) func(any) []component.SessionRequest {
	return func(any) []component.SessionRequest { return reqs }
}

// Lookup returns the spec of binary; it panics on a binary the table lacks, for the mains,
// whose own entry is there by construction.
func Lookup(binary string) component.Spec {
	s, err := Table.Lookup(binary)
	if err != nil {
		panic(err)
	}
	return s
}
