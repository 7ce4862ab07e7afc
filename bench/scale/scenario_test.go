package scale

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nicstack/nicstack/bench/benchtest"
	"github.com/nicstack/nicstack/runtime/config"
)

var seed = filepath.Join("..", "..", "deploy", "sculpt_iperf.hid")

// seedBase is the base of the seed scenario, as bench scale loads it.
func seedBase(t *testing.T) *base {
	t.Helper()
	data, err := os.ReadFile(seed)
	if err != nil {
		t.Fatal(err)
	}
	b, err := loadBase(seed, data)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The seed's vm becomes vm1..vmN, each the vm binary with its own server port at the far end,
// which runs N servers; nicstack check accepts the result.
func TestScenarioMultipliesTheGuest(t *testing.T) {
	b := seedBase(t)
	start := time.Date(2026, 12, 5, 10, 0, 5, 250e6, time.UTC)
	text, err := b.scenario(3, test{time: 4 * time.Second, rx: true, start: start}, domainsShared, "")
	if err != nil {
		t.Fatal(err)
	}
	root, err := config.Parse("scale.xml", text)
	if err != nil {
		t.Fatal(err)
	}
	var guests int
	for _, st := range root.Subs("start") {
		cfg := st.Sub("config")
		switch i := guestNumber(st.Name(), "vm"); {
		case i > 0:
			guests++
			want := "-c 198.18.0.2 -p " + strconv.Itoa(5200+i) + " -t 4 -R"
			if startBinary(st) != "vm" || cfg.String("iperf", "") != want || cfg.String("iperf_start", "") != "2026-12-05T10:00:05.25Z" {
				t.Errorf("%s: binary %s, iperf %q at %s; want vm, %q at the common start", st.Name(), startBinary(st), cfg.String("iperf", ""), cfg.String("iperf_start", ""), want)
			}
		case st.Name() == "vm":
			t.Error("the template vm is still there")
		case st.Name() == "remote_host":
			if cfg.String("iperf", "") != "-s -p 5201" || cfg.String("iperf_servers", "") != "3" {
				t.Errorf("remote_host: %s", cfg.XML())
			}
		}
	}
	if guests != 3 {
		t.Errorf("%d guests, want 3:\n%s", guests, text)
	}
	benchtest.CheckScenario(t, "scale.xml", string(text), "vm", "remote_host", "nic_router", "intel_nic_hw", "ipxe_nic")
}

// A router whose DHCP range is smaller than the guests is refused, naming the dhcp-server.
func TestScenarioNeedsTheDHCPRange(t *testing.T) {
	data, err := os.ReadFile(seed)
	if err != nil {
		t.Fatal(err)
	}
	data = []byte(strings.Replace(string(data), "ip_last: 10.0.1.200", "ip_last: 10.0.1.9", 1))
	b, err := loadBase(seed, data)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.scenario(8, test{time: time.Second}, domainsShared, ""); err != nil {
		t.Errorf("8 guests in 10.0.1.2-9: %v", err)
	}
	if _, err := b.scenario(9, test{time: time.Second}, domainsShared, ""); err == nil || !strings.Contains(err.Error(), "dhcp-server 10.0.1.2-10.0.1.9 leases 8 addresses, fewer than the 9 guests") {
		t.Errorf("9 guests in 10.0.1.2-9: %v", err)
	}
}

func TestGuestNumber(t *testing.T) {
	for name, want := range map[string]int{"vm1": 1, "vm32": 32, "vm": 0, "vm0": 0, "vm01": 0, "vmx": 0, "remote_host": 0} {
		if got := guestNumber(name, "vm"); got != want {
			t.Errorf("guestNumber(%q) = %d, want %d", name, got, want)
		}
	}
}

// Per-guest domains: a policy, a domain with its own /24 and DHCP range, and the uplink's NAT
// for each guest; the shared domain and its policy are gone.
func TestScenarioPerGuestDomains(t *testing.T) {
	b := seedBase(t)
	text, err := b.scenario(2, test{time: time.Second}, domainsPerGuest, "")
	if err != nil {
		t.Fatal(err)
	}
	root, err := config.Parse("scale.xml", text)
	if err != nil {
		t.Fatal(err)
	}
	var router *config.Node
	for _, st := range root.Subs("start") {
		if st.Name() == "nic_router" {
			router = st.Sub("config")
		}
	}
	got := map[string]string{}
	for _, p := range router.Subs("policy") {
		got["policy "+p.String("label_prefix", p.String("label", ""))] = p.String("domain", "")
	}
	for _, d := range router.Subs("domain") {
		got["domain "+d.Name()] = d.String("interface", "")
		if dhcp := d.Sub("dhcp-server"); dhcp != nil {
			got["dhcp "+d.Name()] = dhcp.String("ip_first", "") + "-" + dhcp.String("ip_last", "")
		}
		for _, nat := range d.Subs("nat") {
			got["nat "+d.Name()] += nat.String("domain", "") + " "
		}
	}
	want := map[string]string{
		"policy vm1 -> ": "vm1", "policy vm2 -> ": "vm2", "policy nic_drv -> uplink": "uplink",
		"domain uplink": "198.18.0.1/24", "domain vm1": "10.0.1.1/24", "domain vm2": "10.0.2.1/24",
		"dhcp vm1": "10.0.1.2-10.0.1.200", "dhcp vm2": "10.0.2.2-10.0.2.200", "nat uplink": "vm1 vm2 ",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %v, want %v", got, want)
	}
	benchtest.CheckScenario(t, "scale.xml", string(text), "vm", "remote_host", "nic_router", "intel_nic_hw", "ipxe_nic")
}

// --fq-codel on puts <fq-codel/> into every domain of the router, the guests' own with
// per-guest domains too, and the scenario still checks; uplink into the uplink's alone; off
// takes them out.
func TestScenarioFQCodel(t *testing.T) {
	b := seedBase(t)
	for _, fq := range []string{"on", "uplink", "off"} {
		text, err := b.scenario(2, test{time: time.Second}, domainsPerGuest, fq)
		if err != nil {
			t.Fatal(err)
		}
		root, err := config.Parse("scale.xml", text)
		if err != nil {
			t.Fatal(err)
		}
		domains := 0
		for _, st := range root.Subs("start") {
			if st.Name() != "nic_router" {
				continue
			}
			for _, d := range st.Sub("config").Subs("domain") {
				domains++
				want := fq == "on" || fq == "uplink" && d.Name() == "uplink"
				if has := d.Sub("fq-codel") != nil; has != want {
					t.Errorf("fq-codel %s: domain %s has <fq-codel>: %v", fq, d.Name(), has)
				}
			}
		}
		if domains != 3 {
			t.Errorf("fq-codel %s: %d domains, want 3", fq, domains)
		}
		benchtest.CheckScenario(t, "scale.xml", string(text), "vm", "remote_host", "nic_router", "intel_nic_hw", "ipxe_nic")
	}
}

// --far-end-cpu router gives the far end the router's affinity in place of its own (the
// seed's: x 2, beside the guests at x 3); nicstack check accepts the result.
func TestScenarioFarEndWithRouter(t *testing.T) {
	b := seedBase(t)
	text, err := b.scenario(2, test{time: time.Second}, domainsShared, "")
	if err != nil {
		t.Fatal(err)
	}
	if text, err = b.farEndWithRouter(text); err != nil {
		t.Fatal(err)
	}
	root, err := config.Parse("scale.xml", text)
	if err != nil {
		t.Fatal(err)
	}
	affinity := map[string]string{}
	for _, st := range root.Subs("start") {
		var a []string
		for _, n := range st.Subs("affinity") {
			a = append(a, string(n.XML()))
		}
		affinity[st.Name()] = strings.Join(a, "")
	}
	if affinity["remote_host"] != affinity["nic_router"] || !strings.Contains(affinity["remote_host"], `xpos="1"`) || strings.Contains(affinity["vm1"], `xpos="1"`) {
		t.Errorf("affinities %q: want remote_host's the router's (x 1) only", affinity)
	}
	benchtest.CheckScenario(t, "scale.xml", string(text), "vm", "remote_host", "nic_router", "intel_nic_hw", "ipxe_nic")

	data, err := os.ReadFile(seed)
	if err != nil {
		t.Fatal(err)
	}
	noAffinity := strings.Replace(string(data), "  + affinity | xpos: 1 | ypos: 0\n", "", 1)
	if noAffinity == string(data) {
		t.Fatal("the seed's router affinity line moved: fix the test")
	}
	b, err = loadBase(seed, []byte(noAffinity))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.farEndWithRouter([]byte(noAffinity)); err == nil || !strings.Contains(err.Error(), "nic_router has no <affinity>") {
		t.Errorf("a router without affinity: %v", err)
	}
}

func TestOptionsFarEndCPU(t *testing.T) {
	o := Options{Runs: 1, Guests: []int{1}, Domains: domainsShared, Direction: "tx", Time: time.Second, Idle: time.Second}
	for _, c := range []struct {
		v  []string
		ok bool
	}{{nil, true}, {[]string{farEndCPUScenario, farEndCPURouter}, true}, {[]string{farEndCPURouter, "cpu0"}, false}} {
		o.FarEndCPU = c.v
		if err := o.check(); (err == nil) != c.ok {
			t.Errorf("--far-end-cpu %q: %v", c.v, err)
		}
	}
}
