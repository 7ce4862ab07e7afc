package config

import (
	"strings"
	"testing"
	"time"
)

func TestAccessors(t *testing.T) {
	n := mustParse(t, "a.hid", []byte(`config
  yes: yes | no: false | maybe: perhaps
  ram: 10M | caps: 0x2a | big: 1G | kb: 16K | under: 1_000 | bin: 0b1 | huge: 17179869184G
  ip: 10.0.1.1 | ip6: ::1 | prefix: 10.0.1.1/24 | noprefix: 10.0.1.1
  mac: 02:02:02:02:02:01 | badmac: 02:02
  prefix6: 2001:db8::2/64 | mapped: ::ffff:10.0.1.1 | zoned: fe80::1%eth0
  sec: 10 | ms: 200ms | neg: -1s | long: 4294967295
-
`))
	for name, want := range map[string]bool{"yes": true, "no": false} {
		if v, err := n.Bool(name, !want); err != nil || v != want {
			t.Errorf("Bool(%s) = %v, %v", name, v, err)
		}
	}
	if v, err := n.Bool("absent", true); err != nil || !v {
		t.Errorf("Bool default = %v, %v", v, err)
	}
	if _, err := n.Bool("maybe", false); err == nil || err.Error() != `a.hid:2:26: attribute "maybe" of <config>: "perhaps" is not a boolean (yes, no, true, false)` {
		t.Errorf("Bool(maybe) error %v", err)
	}
	for name, want := range map[string]uint64{"ram": 10 << 20, "caps": 42, "big": 1 << 30, "kb": 16 << 10, "absent": 7} {
		if v, err := n.Number(name, 7); err != nil || v != want {
			t.Errorf("Number(%s) = %d, %v", name, v, err)
		}
	}
	for _, name := range []string{"under", "bin", "huge", "ip"} {
		if _, err := n.Number(name, 0); err == nil || !strings.Contains(err.Error(), "is not a number") {
			t.Errorf("Number(%s) error %v", name, err)
		}
	}
	if ip, ok, err := n.IPv4("ip"); err != nil || !ok || ip.String() != "10.0.1.1" {
		t.Errorf("IPv4 = %v %v %v", ip, ok, err)
	}
	if _, ok, err := n.IPv4("ip6"); !ok || err == nil || !strings.Contains(err.Error(), "4:18: attribute \"ip6\"") {
		t.Errorf("IPv4(ip6) error %v", err)
	}
	if p, _, err := n.Prefix("prefix"); err != nil || p.String() != "10.0.1.1/24" {
		t.Errorf("Prefix = %v %v", p, err)
	}
	if _, _, err := n.Prefix("noprefix"); err == nil {
		t.Error("Prefix accepted an address without length")
	}
	if ip, ok, err := n.IPv6("ip6"); err != nil || !ok || ip.String() != "::1" {
		t.Errorf("IPv6 = %v %v %v", ip, ok, err)
	}
	for _, name := range []string{"ip", "mapped", "zoned", "prefix6"} {
		if _, _, err := n.IPv6(name); err == nil || !strings.Contains(err.Error(), "is not an IPv6 address") {
			t.Errorf("IPv6(%s) error %v", name, err)
		}
	}
	if p, _, err := n.Prefix6("prefix6"); err != nil || p.String() != "2001:db8::2/64" {
		t.Errorf("Prefix6 = %v %v", p, err)
	}
	if _, _, err := n.Prefix6("prefix"); err == nil || !strings.Contains(err.Error(), "a.hid:4:29: attribute \"prefix\"") {
		t.Errorf("Prefix6(prefix) error %v", err)
	}
	if m, _, err := n.MAC("mac"); err != nil || m.String() != "02:02:02:02:02:01" {
		t.Errorf("MAC = %v %v", m, err)
	}
	if _, _, err := n.MAC("badmac"); err == nil || !strings.Contains(err.Error(), "MAC address") {
		t.Errorf("MAC(badmac) error %v", err)
	}
	if d, err := n.Duration("sec", time.Second, 0); err != nil || d != 10*time.Second {
		t.Errorf("Duration(sec) = %v %v", d, err)
	}
	if d, err := n.Duration("ms", time.Second, 0); err != nil || d != 200*time.Millisecond {
		t.Errorf("Duration(ms) = %v %v", d, err)
	}
	for _, name := range []string{"neg", "long"} {
		if _, err := n.Duration(name, time.Hour, 0); err == nil {
			t.Errorf("Duration(%s) accepted", name)
		}
	}
}

// Diff names the first difference with both positions, and nothing for the same tree in the
// other syntax.
func TestDiff(t *testing.T) {
	x := mustParse(t, "a.xml", []byte(`<config> <a n="1"/> <b> <c/> </b> </config>`))
	for _, c := range []struct{ hid, want string }{
		{"config\n+ a | n: 1\n+ b\n  + c\n-\n", ""},
		{"config\n+ a | n: 2\n+ b\n  + c\n-\n", `a.xml:1:13: n="1" of <a>, but b.hid:2:7: n="2"`},
		{"config\n+ a | n: 1 | m: 3\n+ b\n  + c\n-\n", `a.xml:1:11: no more attributes of <a>, but b.hid:2:14: m="3"`},
		{"config\n+ a | n: 1\n+ b\n  + d\n-\n", `a.xml:1:26: <c>, but b.hid:4:5: <d>`},
		{"config\n+ a | n: 1\n+ b\n-\n", `a.xml:1:26: <c> in <b>, but b.hid:3:3: no more sub-nodes`},
	} {
		if got := x.Diff(mustParse(t, "b.hid", []byte(c.hid))); got != c.want {
			t.Errorf("%q:\n got %s\nwant %s", c.hid, got, c.want)
		}
	}
}
