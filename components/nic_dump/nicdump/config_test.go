package nicdump

import (
	"strings"
	"testing"

	"github.com/nicstack/nicstack/netdev/header"
	"github.com/nicstack/nicstack/runtime/config"
)

func parse(t *testing.T, xml string) (Config, error) {
	t.Helper()
	n, err := config.ParseXML("test", []byte(xml))
	if err != nil {
		t.Fatal(err)
	}
	return ParseConfig(n, "nic_dump")
}

func TestConfigDefaultsAreGenodes(t *testing.T) {
	cfg, err := parse(t, `<config/>`)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Uplink != "uplink" || cfg.Downlink != "downlink" || cfg.Time || cfg.Log != (header.LogConfig{Eth: header.StyleDefault, ARP: header.StyleDefault, IPv4: header.StyleDefault, DHCP: header.StyleDefault, UDP: header.StyleDefault, ICMP: header.StyleDefault, TCP: header.StyleDefault}) || cfg.Pcap != "" {
		t.Errorf("defaults: %+v", cfg)
	}
}

// default="..." is the style of every protocol the config does not name.
func TestDefaultStyleFillsTheRest(t *testing.T) {
	cfg, err := parse(t, `<config uplink="router" downlink="vm" time="yes" default="name" eth="no" arp="all" ipv4="default" dhcp="no" udp="no" icmp="all" tcp="default" pcap="/tmp/x.pcap"/>`)
	if err != nil {
		t.Fatal(err)
	}
	want := header.LogConfig{Eth: header.StyleNo, ARP: header.StyleAll, IPv4: header.StyleDefault, DHCP: header.StyleNo, UDP: header.StyleNo, ICMP: header.StyleAll, TCP: header.StyleDefault,
		IPv6: header.StyleName, ICMP6: header.StyleName}
	if cfg.Log != want || cfg.Uplink != "router" || cfg.Downlink != "vm" || !cfg.Time || cfg.Pcap != "/tmp/x.pcap" {
		t.Errorf("got %+v", cfg)
	}
	cfg, _ = parse(t, `<config default="no" tcp="all"/>`)
	if cfg.Log != (header.LogConfig{TCP: header.StyleAll}) {
		t.Errorf("default=no tcp=all: %+v", cfg.Log)
	}
}

// ipv6 and icmp6 are ours: they take the same values, default="..." fills them, and without
// it they print nothing, so Genode's configs log an IPv6 frame as Genode does.
func TestIPv6StylesAreOurs(t *testing.T) {
	genodes := header.LogConfig{Eth: header.StyleDefault, ARP: header.StyleDefault, IPv4: header.StyleDefault, DHCP: header.StyleDefault,
		UDP: header.StyleDefault, ICMP: header.StyleDefault, TCP: header.StyleDefault}
	withIPv6 := func(l header.LogConfig, ipv6, icmp6 header.Style) header.LogConfig {
		l.IPv6, l.ICMP6 = ipv6, icmp6
		return l
	}
	for xml, want := range map[string]header.LogConfig{
		`<config/>`:                            genodes,
		`<config ipv6="all" icmp6="name"/>`:    withIPv6(genodes, header.StyleAll, header.StyleName),
		`<config ipv6="default"/>`:             withIPv6(genodes, header.StyleDefault, header.StyleNo),
		`<config default="default"/>`:          withIPv6(genodes, header.StyleDefault, header.StyleDefault),
		`<config default="name" icmp6="all"/>`: {Eth: header.StyleName, ARP: header.StyleName, IPv4: header.StyleName, DHCP: header.StyleName, UDP: header.StyleName, ICMP: header.StyleName, TCP: header.StyleName, IPv6: header.StyleName, ICMP6: header.StyleAll},
		`<config default="no" ipv6="name"/>`:   {IPv6: header.StyleName},
	} {
		cfg, err := parse(t, xml)
		if err != nil || cfg.Log != want {
			t.Errorf("%s: %+v (%v), want %+v", xml, cfg.Log, err, want)
		}
	}
}

func TestBadValuesAreRefusedAtTheirPosition(t *testing.T) {
	for xml, want := range map[string]string{
		`<config udp="some"/>`:                                 `test:1:9: udp="some": want no, name, default or all`,
		`<config default="yes"/>`:                              `default="yes"`,
		`<config ipv6="v6"/>`:                                  `test:1:9: ipv6="v6": want no, name, default or all`,
		`<config icmp6="yes"/>`:                                `icmp6="yes": want no, name, default or all`,
		`<config time="1"/>`:                                   `"1" is not a boolean`,
		`<config uplink=""/>`:                                  `uplink="": want a label of 1 to 64 characters`,
		`<config downlink="` + strings.Repeat("x", 65) + `"/>`: `want a label of 1 to 64`,
		`<config pcap=""/>`:                                    `want the path of the capture file`,
	} {
		_, err := parse(t, xml)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", xml, err, want)
		}
	}
}
