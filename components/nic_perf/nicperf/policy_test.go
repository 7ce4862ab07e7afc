package nicperf

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nicstack/nicstack/netdev/header"
	"github.com/nicstack/nicstack/runtime/config"
)

func parseText(t *testing.T, text string) (Config, error) {
	t.Helper()
	n, err := config.Parse("nic_perf.cfg", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return ParseConfig(n, "nic_perf")
}

// The <config>s of Genode's test-nic_perf and test-nic_perf_router runtimes, as they are.
const (
	genodeDirectTx = `config | period_ms: 5000 | count: 8
+ nic-client
  + interface | ip: 10.0.1.1 | dhcp_client_ip: 10.0.1.2
  + tx | mtu: 1500 | to: 10.0.1.2 | udp_port: 12345
-
`
	genodeDirectRx = `config | period_ms: 5000
+ default-policy
-
`
	genodeRouterTx = `<config period_ms="5000" count="8">
	<nic-client> <tx mtu="1500" to="10.0.1.1" udp_port="12345"/> </nic-client>
</config>`
	genodeRouterRx = `<config period_ms="5000"> <nic-client/> </config>`
)

func TestParseGenodeConfigs(t *testing.T) {
	tx, err := parseText(t, genodeDirectTx)
	if err != nil {
		t.Fatal(err)
	}
	want := Config{MAC: clientMAC, IP: [4]byte{10, 0, 1, 1}, DHCPClientIP: [4]byte{10, 0, 1, 2}, TX: true,
		DstIP: [4]byte{10, 0, 1, 2}, ResolveDstMAC: true, Flows: 1, DstPort: 12345, Size: 1500}
	if got := tx; got.Client != true || got.Service != "" || got.Session != "Nic" || got.Period != 5*time.Second || got.Count != 8 {
		t.Errorf("test-nic_perf's nic_perf_tx: %+v", got.Component)
	}
	tx.Component = Component{}
	if !reflect.DeepEqual(tx, want) {
		t.Errorf("test-nic_perf's nic-client runs %+v, want %+v", tx, want)
	}

	rx, err := parseText(t, genodeDirectRx)
	if err != nil {
		t.Fatal(err)
	}
	if rx.Client || rx.Service != "Nic" || rx.Count != genodeCount || rx.Default == nil {
		t.Fatalf("test-nic_perf's nic_perf_rx: %+v", rx.Component)
	}
	served, ok := rx.Served("nic_perf_tx -> ")
	if !ok || !served.DHCP || served.TX || served.MAC != servedMAC || served.DHCPClientIP != ([4]byte{}) {
		t.Errorf("an empty <default-policy> runs %+v, %v: want a DHCP client that sends nothing", served, ok)
	}

	rtx, err := parseText(t, genodeRouterTx)
	if err != nil {
		t.Fatal(err)
	}
	if !rtx.Client || !rtx.DHCP || !rtx.TX || rtx.DstIP != [4]byte{10, 0, 1, 1} || rtx.Service != "" {
		t.Errorf("test-nic_perf_router's nic_perf_tx: %+v", rtx)
	}
	rrx, err := parseText(t, genodeRouterRx)
	if err != nil {
		t.Fatal(err)
	}
	if !rrx.Client || !rrx.DHCP || rrx.TX || rrx.Count != genodeCount || rrx.Period != genodePeriod {
		t.Errorf("test-nic_perf_router's nic_perf_rx: %+v", rrx)
	}

	// Genode's defaults: 1024-byte frames; and the older form's: log each second, never exit.
	if c, err := parseText(t, `<config><nic-client><tx to="10.0.0.1" udp_port="9"/></nic-client></config>`); err != nil || c.Size != genodeMTU {
		t.Errorf("mtu default: %d, %v", c.Size, err)
	}
	if c, err := parseText(t, `<config service="Nic"/>`); err != nil || c.Period != time.Second || c.Count != Forever || c.Client {
		t.Errorf("older form's defaults: %+v, %v", c.Component, err)
	}
}

// What Genode's form refuses, each at the position of its cause.
func TestGenodeConfigErrors(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{"<config ip=\"10.0.0.1\">\n <default-policy/>\n</config>", "nic_perf.cfg:1:9: ip: with <policy>"},
		{"<config>\n <nic-client> <tx mtu=\"1500\" udp_port=\"1\"/> </nic-client>\n</config>", "nic_perf.cfg:2:16: <tx> needs to"},
		{"<config>\n <default-policy> <tx to=\"10.0.0.1\"/> </default-policy>\n</config>", "nic_perf.cfg:2:20: <tx> needs udp_port"},
		{"<config>\n <nic-client> <tx mtu=\"20\" to=\"10.0.0.1\" udp_port=\"1\"/> </nic-client>\n</config>", "nic_perf.cfg:2:19: mtu=20 is not in"},
		{"<config>\n <policy label=\"x\"> <interface ip=\"10.0.0\"/> </policy>\n</config>", "nic_perf.cfg:2:32: attribute \"ip\""},
		{"<config count=\"-1\">\n <default-policy/>\n</config>", "nic_perf.cfg:1:9:"},
	} {
		_, err := parseText(t, c.text)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q...", c.text, err, c.want)
		}
	}
}

// A served session runs what the <policy> that selects its label says, ranked as Genode's
// Session_policy ranks them; else the <default-policy>; without one it is refused.
func TestPolicySelection(t *testing.T) {
	cfg, err := parseText(t, `<config>
		<policy label_prefix="vm">          <interface ip="10.0.0.1"/> </policy>
		<policy label_prefix="vm -> lan">   <interface ip="10.0.0.2"/> </policy>
		<policy label_suffix="-> uplink">   <interface ip="10.0.0.3" mac="02:00:00:00:00:33"/> </policy>
		<policy label="vm -> lan">          <interface ip="10.0.0.4"/> </policy>
		<default-policy>                    <interface ip="10.0.0.9"/> </default-policy>
	</config>`)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		label string
		ip    byte
		mac   header.MAC
	}{
		{"vm -> lan", 4, servedMAC},                              // the exact label beats every prefix
		{"vm -> lan2", 2, servedMAC},                             // the longer prefix
		{"vm -> uplink", 1, servedMAC},                           // a prefix beats a suffix
		{"router -> uplink", 3, header.MAC{2, 0, 0, 0, 0, 0x33}}, // <interface mac> of a policy
		{"other -> ", 9, servedMAC},                              // none: the default policy
	} {
		got, ok := cfg.Served(c.label)
		if !ok || got.IP != [4]byte{10, 0, 0, c.ip} || got.MAC != c.mac {
			t.Errorf("%q runs ip %v mac %v (%v), want 10.0.0.%d %v", c.label, got.IP, got.MAC, ok, c.ip, c.mac)
		}
	}
	cfg.Default = nil
	if _, ok := cfg.Served("other -> "); ok {
		t.Error("without <default-policy>, a session no policy selects is served")
	}
}
