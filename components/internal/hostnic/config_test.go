package hostnic

import (
	"strings"
	"testing"
	"time"

	"github.com/nicstack/nicstack/runtime/config"
)

func parse(t *testing.T, k *Kind, text string) (Config, error) {
	t.Helper()
	n, err := config.Parse("test", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return k.ParseConfig(n, "uplink")
}

func TestTapConfig(t *testing.T) {
	cfg, err := parse(t, TapNIC, `<config tap_mtu="65520" offload="yes" netns="lan" address="198.18.0.1/24" exec="sleep 1"/>`)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"mtu": "65520", "offload": "yes", "netns": "lan", "address": "198.18.0.1/24", "exec": "sleep 1"}
	if len(cfg.Args) != len(want) {
		t.Errorf("args %v, want %v", cfg.Args, want)
	}
	for k, v := range want {
		if cfg.Args[k] != v {
			t.Errorf("arg %s=%q, want %q", k, cfg.Args[k], v)
		}
	}
	if cfg.MAC.String() != DeriveMAC("uplink").String() || cfg.MAC[0] != 0x02 {
		t.Errorf("MAC %s", cfg.MAC)
	}
	if cfg.RxMinInterval != 0 || cfg.RetireTimeout != 0 {
		t.Errorf("a TAP has no RX throttle: %v %v", cfg.RxMinInterval, cfg.RetireTimeout)
	}
}

// TestTapConfigIPv6: the far end's address6 and gateway6 become the Tap session's arguments;
// an address outside the scenario's IPv6 ranges, or not IPv6, is refused at its line.
func TestTapConfigIPv6(t *testing.T) {
	cfg, err := parse(t, TapNIC, `<config netns="far" address="198.18.0.2/24" address6="2001:db8:ffff::2/64" gateway6="fe80::1" exec="iperf3 -s"/>`)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Args["address6"] != "2001:db8:ffff::2/64" || cfg.Args["gateway6"] != "fe80::1" {
		t.Errorf("args %v", cfg.Args)
	}
	for text, want := range map[string]string{
		`<config address6="2001:4860::2/64"/>`: "2001:db8::/32 or fd00::/8",
		`<config address6="198.18.0.2/24"/>`:   "IPv6 prefix",
		`<config gateway6="198.18.0.1"/>`:      "IPv6 address",
		`<config gateway6="ff02::1"/>`:         "gateway6=",
	} {
		if _, err := parse(t, TapNIC, text); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "test:1:") {
			t.Errorf("%s: error %v, want one naming test:1: and %q", text, err, want)
		}
	}
}

func TestPacketConfigThrottle(t *testing.T) {
	for _, c := range []struct {
		text          string
		gap, retire   time.Duration
		mac, errMatch string
	}{
		{`<config/>`, 166656 * time.Nanosecond, time.Millisecond, "", ""},
		{`<config rx_irq_throttle="0" mac="02:00:00:00:00:07"/>`, 0, 0, "02:00:00:00:00:07", ""},
		{`<config rx_irq_throttle="5580"/>`, 1428480 * time.Nanosecond, 2 * time.Millisecond, "", ""},
		{`<config rx_irq_throttle="70000"/>`, 0, 0, "", "16-bit"},
		{`<config mac="03:00:00:00:00:01"/>`, 0, 0, "", "multicast"},
		{`<config mtu="20"/>`, 0, 0, "", "mtu=20"},
		{`<config address="nope"/>`, 0, 0, "", "prefix"},
	} {
		cfg, err := parse(t, PacketNIC, c.text)
		if c.errMatch != "" {
			if err == nil || !strings.Contains(err.Error(), c.errMatch) {
				t.Errorf("%s: error %v, want one about %q", c.text, err, c.errMatch)
			}
			continue
		}
		if err != nil || cfg.RxMinInterval != c.gap || cfg.RetireTimeout != c.retire {
			t.Errorf("%s: gap %v retire %v (%v), want %v %v", c.text, cfg.RxMinInterval, cfg.RetireTimeout, err, c.gap, c.retire)
		}
		if c.mac != "" && cfg.MAC.String() != c.mac {
			t.Errorf("%s: MAC %s", c.text, cfg.MAC)
		}
	}
}
