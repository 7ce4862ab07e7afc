// Package nicdump is nic_dump's config: which sides it joins, how it logs each protocol and
// where it writes pcap. The log itself is netdev/header's frame printer; the component that
// moves frames is components/nic_dump.
package nicdump

import (
	"github.com/nicstack/nicstack/netdev/header"
	"github.com/nicstack/nicstack/runtime/config"
)

// Schema is nic_dump's <config>: Genode's attributes, and ipv6, icmp6 and pcap, ours.
var Schema = &config.Schema{Type: "config", Attrs: []string{
	"uplink", "downlink", "time", "default", "eth", "arp", "ipv4", "dhcp", "udp", "icmp", "tcp", "ipv6", "icmp6", "pcap",
}}

// Config is what one nic_dump does.
type Config struct {
	// Uplink and Downlink name the two sides in the log: a frame from the client reads
	// "(uplink <- downlink) ...".
	Uplink, Downlink string
	Time             bool // end each line with the ms since start and since the frame before
	Log              header.LogConfig
	// Pcap, when set, is a file every frame passing either way is also written to (ours:
	// Genode's nic_dump only logs).
	Pcap string
}

// maxLabel is the longest label Genode's nic_dump takes (its Interface_label).
const maxLabel = 64

// ParseConfig reads nic_dump's <config>; an error makes cfg unusable. start is unused.
func ParseConfig(n *config.Node, start string) (cfg Config, err error) {
	cfg.Uplink, cfg.Downlink = n.String("uplink", "uplink"), n.String("downlink", "downlink")
	for _, name := range []string{"uplink", "downlink"} {
		if a, ok := n.Attr(name); ok && (a.Value == "" || len(a.Value) > maxLabel) {
			return cfg, config.Errorf(a.Pos, "%s=%q: want a label of 1 to %d characters", name, a.Value, maxLabel)
		}
	}
	if cfg.Time, err = n.Bool("time", false); err != nil {
		return cfg, err
	}
	def, err := style(n, "default", header.StyleDefault)
	if err != nil {
		return cfg, err
	}
	// ipv6 and icmp6 are ours: a default="..." fills them as it fills Genode's, but without
	// one they print nothing, so a config of Genode's logs an IPv6 frame as Genode's nic_dump
	// does, by its Ethernet header alone.
	ours := header.StyleNo
	if _, ok := n.Attr("default"); ok {
		ours = def
	}
	for _, f := range []struct {
		name string
		to   *header.Style
		def  header.Style
	}{{"eth", &cfg.Log.Eth, def}, {"arp", &cfg.Log.ARP, def}, {"ipv4", &cfg.Log.IPv4, def}, {"dhcp", &cfg.Log.DHCP, def},
		{"udp", &cfg.Log.UDP, def}, {"icmp", &cfg.Log.ICMP, def}, {"tcp", &cfg.Log.TCP, def},
		{"ipv6", &cfg.Log.IPv6, ours}, {"icmp6", &cfg.Log.ICMP6, ours}} {
		if *f.to, err = style(n, f.name, f.def); err != nil {
			return cfg, err
		}
	}
	if a, ok := n.Attr("pcap"); ok {
		if a.Value == "" {
			return cfg, config.Errorf(a.Pos, "pcap=\"\": want the path of the capture file")
		}
		cfg.Pcap = a.Value
	}
	return cfg, nil
}

func style(n *config.Node, name string, def header.Style) (header.Style, error) {
	a, ok := n.Attr(name)
	if !ok {
		return def, nil
	}
	s, ok := header.ParseStyle(a.Value)
	if !ok {
		return def, config.Errorf(a.Pos, "%s=%q: want no, name, default or all", name, a.Value)
	}
	return s, nil
}
