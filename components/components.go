// Package components is the one table of nicstack's components: for each binary its config
// schema and the full validation its parse makes. `nicstack check`, the supervisor, the
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
		Warn: func(n *config.Node, _ string) []error { return model.Parse(n).Problems },
		Files: func(n *config.Node, _ string) []string {
			if r := model.Parse(n).Report; r != nil {
				return nonEmpty(r.File)
			}
			return nil
		},
		// 1 MiB: 8191 entries of 128 bytes (router/region): link states, ARP entries and
		// DHCP leases beyond them are served but do not survive a crash. Pages are touched
		// only as far as used.
		State: 1 << 20,
	},
	{
		Binary:   "intel_nic_hw",
		Summary:  "the emulated Intel 82574L / i217-LM NIC, its wire a session, a TAP or AF_PACKET",
		Schema:   intel.ConfigSchema,
		Validate: validate(intel.ParseConfig),
	},
	{
		Binary:   "ipxe_nic",
		Summary:  "the ipxe-style Intel NIC driver: RX interrupt throttling, TX batching",
		Schema:   ipxe.ConfigSchema,
		Validate: validate(ipxe.ParseConfig),
	},
	{
		Binary:   "linux_nic",
		Summary:  "an Uplink driver on a Linux TAP with IFF_VNET_HDR offloads",
		Schema:   hostnic.TapNIC.Schema,
		Validate: validate(hostnic.TapNIC.ParseConfig),
	},
	{
		Binary:   "packet_nic",
		Summary:  "an Uplink driver on AF_PACKET TPACKET_V3 rings",
		Schema:   hostnic.PacketNIC.Schema,
		Validate: validate(hostnic.PacketNIC.ParseConfig),
	},
	{
		Binary:   "vm",
		Summary:  "the VM side: an embedded TCP/IP stack, a TAP into a network namespace, or a QEMU over a stream socket or vhost-user",
		Schema:   guest.Schema,
		Validate: validate(guest.ParseConfig),
		Files:    guestFiles,
		Sockets:  guestSockets,
	},
	{
		Binary:   "remote_host",
		Summary:  "the far end of a wire: an embedded stack with a static address and iperf server",
		Schema:   guest.Schema,
		Validate: validate(guest.ParseConfig),
		Files:    guestFiles,
	},
	{
		Binary:   "nic_perf",
		Summary:  "Genode's packet-stream test tool: UDP generator and sink",
		Schema:   nicperf.Schema,
		Validate: validate(nicperf.ParseConfig),
	},
	{
		Binary:   "nic_dump",
		Summary:  "Genode's bump in the wire: passes a Nic session's frames both ways and logs each (and pcap)",
		Schema:   nicdump.Schema,
		Validate: validate(nicdump.ParseConfig),
		Files: func(n *config.Node, start string) []string {
			cfg, err := nicdump.ParseConfig(n, start)
			if err != nil {
				return nil
			}
			return nonEmpty(cfg.Pcap)
		},
	},
	{
		Binary:   "dynamic_rom",
		Summary:  "Genode's ROM server whose modules change by a timeline: configs that change at run time",
		Schema:   dynamicrom.Schema,
		Validate: validate(dynamicrom.ParseConfig),
	},
	{
		Binary:   "report_rom",
		Summary:  "Genode's report_rom: keeps the reports of Report sessions, serves them as ROMs by policy",
		Schema:   reportrom.Schema,
		Validate: validate(reportrom.ParseConfig),
	},
	{
		Binary:  "test-nic_router_dhcp-client",
		Summary: "Genode's test component: a DHCP client that starts over at each link up and logs each lease",
		Schema:  &config.Schema{Type: "config", Attrs: []string{"verbose"}},
	},
	{
		Binary:  "test-nic_router_dhcp-manager",
		Summary: "Genode's test component: writes nic_router_2's config with the DNS config of its uplink's lease",
		Schema:  &config.Schema{Type: "config"},
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
	},
}

// validate makes a Spec's Validate of a component's ParseConfig: the config is refused
// exactly when the component's own parse refuses it.
func validate[C any](parse func(n *config.Node, start string) (C, error)) func(*config.Node, string) error {
	return func(n *config.Node, start string) error {
		_, err := parse(n, start)
		return err
	}
}

// guestFiles is the iperf report file a guest's config names.
func guestFiles(n *config.Node, start string) []string {
	cfg, err := guest.ParseConfig(n, start)
	if err != nil {
		return nil
	}
	return nonEmpty(cfg.Report)
}

// guestSockets is the socket a stream or vhost-user guest's QEMU connects to.
func guestSockets(n *config.Node, start string) []string {
	cfg, err := guest.ParseConfig(n, start)
	if err != nil {
		return nil
	}
	return nonEmpty(cfg.Socket)
}

func nonEmpty(path string) []string {
	if path == "" {
		return nil
	}
	return []string{path}
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
