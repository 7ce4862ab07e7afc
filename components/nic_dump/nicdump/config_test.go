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
	want := header.LogConfig{Eth: header.StyleNo, ARP: header.StyleAll, IPv4: header.StyleDefault, DHCP: header.StyleNo, UDP: header.StyleNo, ICMP: header.StyleAll, TCP: header.StyleDefault}
	if cfg.Log != want || cfg.Uplink != "router" || cfg.Downlink != "vm" || !cfg.Time || cfg.Pcap != "/tmp/x.pcap" {
		t.Errorf("got %+v", cfg)
	}
	cfg, _ = parse(t, `<config default="no" tcp="all"/>`)
	if cfg.Log != (header.LogConfig{TCP: header.StyleAll}) {
		t.Errorf("default=no tcp=all: %+v", cfg.Log)
	}
}

func TestBadValuesAreRefusedAtTheirPosition(t *testing.T) {
	for xml, want := range map[string]string{
		`<config udp="some"/>`:                                 `test:1:9: udp="some": want no, name, default or all`,
		`<config default="yes"/>`:                              `default="yes"`,
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
