package iperf

import (
	"fmt"
	"io"
	"net/netip"
	"slices"

	"github.com/nicstack/nicstack/runtime/config"
)

// --ip: the IP versions the guests' tests run over, a dimension of the matrix as --direction
// is. Over IPv6 a client's test goes to its far end's IPv6 address (iperf -6): the address6
// (or a netns guest's tap_address6) of the <config> whose address is the IPv4 target.
const (
	ipv4 = 4
	ipv6 = 6
)

// families parses --ip's values.
func (o Options) families() ([]int, error) {
	var ips []int
	for _, v := range o.IPs {
		switch v {
		case "4":
			ips = append(ips, ipv4)
		case "6":
			ips = append(ips, ipv6)
		default:
			return nil, fmt.Errorf("--ip %q: expected 4 or 6", v)
		}
	}
	if len(ips) == 0 {
		ips = []int{ipv4}
	}
	return ips, nil
}

// addressPairs are the attributes of a <config> that give an interface's IPv4 address and
// its IPv6 one: an embedded guest's or linux_nic's, a netns guest's TAP.
var addressPairs = [][2]string{{"address", "address6"}, {"tap_address", "tap_address6"}}

// findTargets6 sets each client's IPv6 target: its far end's IPv6 address, found by the
// IPv4 address it targets; an error names the client that has none.
func (sc *scenario) findTargets6(o Options) error {
	if len(o.Compare) > 0 {
		return fmt.Errorf("--ip 6: the --compare references measure IPv4 only; compare without it")
	}
	for _, c := range sc.clients {
		if c.cmd == nil || c.vmArg != nil || c.guest != nil {
			return fmt.Errorf("--ip 6: %s is a QEMU guest; IPv6 is measured with embedded and netns guests", c.name)
		}
		c.target4 = c.cmd.Client
		to, err := netip.ParseAddr(c.cmd.Client)
		if err != nil || !to.Is4() {
			return fmt.Errorf("--ip 6: %s's iperf server %q is not an IPv4 address", c.name, c.cmd.Client)
		}
		for _, st := range sc.root.Subs("start") {
			if cfg := st.Sub("config"); cfg != nil && c.target6 == "" {
				c.target6 = address6Of(cfg, to)
			}
		}
		if c.target6 == "" {
			return fmt.Errorf("--ip 6: %s's iperf server %s has no IPv6 address in the scenario (address6 beside its address)", c.name, to)
		}
	}
	return nil
}

// address6Of is the IPv6 address cfg gives the interface whose IPv4 address is ip, "" if none.
func address6Of(cfg *config.Node, ip netip.Addr) string {
	for _, pair := range addressPairs {
		p, _, err := cfg.Prefix(pair[0])
		p6, ok6, err6 := cfg.Prefix6(pair[1])
		if err == nil && ok6 && err6 == nil && p.Addr() == ip {
			return p6.Addr().String()
		}
	}
	return ""
}

// setFamily points the client's test at its far end over IP version ip.
func (c *client) setFamily(ip int) {
	c.cmd.Version6 = ip == ipv6
	if c.target4 == "" {
		return // --ip 4 only: the target as written
	}
	c.cmd.Client = c.target4
	if ip == ipv6 {
		c.cmd.Client = c.target6
	}
}

// table is one of the report's tables: the points of one direction over one IP version.
type table struct {
	ip  int
	dir string
}

// tablesOf lists the tables: per IP version, per direction.
func tablesOf(ips []int, dirs []string) []table {
	var ts []table
	for _, ip := range ips {
		for _, d := range dirs {
			ts = append(ts, table{ip, d})
		}
	}
	return ts
}

// familyName names a point's IP version in the tables; empty for an IPv4-only invocation.
func familyName(ip int, ips []int) string {
	if len(ips) == 1 && ips[0] == ipv4 {
		return ""
	}
	return fmt.Sprintf("IPv%d", ip)
}

// writeFamilyRatios prints, for every IPv6 point, its throughput against the IPv4 point of
// the same setting: of the medians, and the range of the rounds' ratios.
func writeFamilyRatios(out io.Writer, points []point) {
	header := false
	for _, p6 := range points {
		if p6.IP != ipv6 || p6.Runs == 0 {
			continue
		}
		i := slices.IndexFunc(points, func(p point) bool {
			return p.IP == ipv4 && p.Direction == p6.Direction && p.settingColumns(true) == p6.settingColumns(true) && p.Runs > 0
		})
		if i < 0 || points[i].Mbps <= 0 {
			continue
		}
		p4 := points[i]
		if !header {
			fmt.Fprintln(out, "\nIPv6 against IPv4, the same setting (medians):")
			header = true
		}
		fmt.Fprintf(out, "  %-40s IPv6 %6.0f / IPv4 %6.0f Mbit/s = %.2f", p4.setting(), p6.Mbps, p4.Mbps, p6.Mbps/p4.Mbps)
		if len(p6.MbpsRuns) > 1 && len(p6.MbpsRuns) == len(p4.MbpsRuns) {
			lo, hi := p6.MbpsRuns[0]/p4.MbpsRuns[0], 0.0
			for j, v := range p4.MbpsRuns {
				r := p6.MbpsRuns[j] / v
				lo, hi = min(lo, r), max(hi, r)
			}
			fmt.Fprintf(out, " (rounds %.2f-%.2f)", lo, hi)
		}
		fmt.Fprintln(out)
	}
}
