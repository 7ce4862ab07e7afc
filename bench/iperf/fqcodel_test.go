package iperf

import (
	"bytes"
	"encoding/json"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nicstack/nicstack/internal/iperf"
	"github.com/nicstack/nicstack/router/model"
	"github.com/nicstack/nicstack/runtime/config"
)

// TestFQCodelMatrix: --fq-codel doubles every point, the router's config of an "on" run has
// <fq-codel/> in each domain (valid for model.Parse) and of an "off" run none, the far end
// qdisc="fq_codel" or "none", and a bad
// value or a scenario without nic_router is refused.
func TestFQCodelMatrix(t *testing.T) {
	sc, err := loadScenario("../../deploy/sculpt_iperf.hid")
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Runs: 1, Throttles: []string{"adaptive"}, Batches: []string{"yes"}, Directions: []string{"rx", "tx"}, FQCodel: []string{"on", "off"}}
	m, _, err := o.matrix(sc, "sculpt_iperf.hid", io.Discard)
	if err != nil || len(m) != 4 || m[0].fq != "on" || m[1].fq != "off" || m[0].dir != "rx" || m[2].dir != "tx" {
		t.Fatalf("matrix %v, %v", m, err)
	}
	for _, v := range []string{"on", "off", "on"} {
		text, err := sc.patch(setting{itr: m[0].itr, batch: m[0].batch, dir: "rx", fq: v}, o)
		if err != nil {
			t.Fatal(err)
		}
		root, err := config.ParseXML("patched", text)
		if err != nil {
			t.Fatal(err)
		}
		var cfg *config.Node
		for _, st := range root.Subs("start") {
			if st.Name() == "nic_router" {
				cfg = st.Sub("config")
			}
		}
		c := model.Parse(cfg)
		if len(c.Problems) > 0 {
			t.Fatalf("%s: %v", v, c.Problems)
		}
		if far := map[string]string{"on": `qdisc="fq_codel"`, "off": `qdisc="none"`}[v]; bytes.Count(text, []byte(far)) != 1 {
			t.Errorf("fq-codel %s: the far end's config has no %s", v, far)
		}
		for name, d := range c.Domains {
			if (d.FQCodel != nil) != (v == "on") || bytes.Count(text, []byte("<fq-codel")) != map[string]int{"on": 2, "off": 0}[v] {
				t.Errorf("fq-codel %s: domain %s has %v", v, name, d.FQCodel)
			}
		}
	}
	o.FQCodel = []string{"maybe"}
	if _, _, err := o.matrix(sc, "sculpt_iperf.hid", io.Discard); err == nil || !strings.Contains(err.Error(), "maybe") {
		t.Errorf("--fq-codel maybe: %v", err)
	}
}

// TestBQLLimitMaxMatrix: --bql-limit-max is a dimension beside --fq-codel; a run's driver
// gets tx_bql_limit_max, the guests too where they have qdisc="fq_codel" (their config
// refuses it without), and each <fq-codel> of the router bql_limit_max; the labels tell the
// points apart; a bad value is refused.
func TestBQLLimitMaxMatrix(t *testing.T) {
	sc, err := loadScenario("../../deploy/sculpt_iperf.hid")
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Runs: 1, Throttles: []string{"adaptive"}, Batches: []string{"yes"}, Directions: []string{"rx"}, FQCodel: []string{"on", "off"}, BQLLimitMax: []string{"0", "125000"}}
	m, _, err := o.matrix(sc, "sculpt_iperf.hid", io.Discard)
	if err != nil || len(m) != 4 || m[0].cap != "0" || m[1].cap != "125000" || m[0].fq != "on" || m[2].fq != "off" {
		t.Fatalf("matrix %v, %v", m, err)
	}
	if m[0].label() == m[1].label() {
		t.Errorf("caps 0 and 125000 share the label %q", m[0].label())
	}
	for _, s := range m {
		text, err := sc.patch(s, o)
		if err != nil {
			t.Fatal(err)
		}
		if n := bytes.Count(text, []byte(`bql_limit_max="`+s.cap+`"`)); n != map[string]int{"on": 4, "off": 1}[s.fq] {
			t.Errorf("%s: bql_limit_max=%q %d times, want the driver's, the far end's and each <fq-codel>'s", s, s.cap, n)
		}
		want := map[string]int{"on": 2, "off": 1}[s.fq]
		if n := bytes.Count(text, []byte(`tx_bql_limit_max="`+s.cap+`"`)); n != want || bytes.Count(text, []byte("tx_bql_limit_max")) != want {
			t.Errorf("%s: tx_bql_limit_max=%q %d times, want %d (driver, and the far end with fq_codel)\n%s", s, s.cap, n, want, text)
		}
	}
	o.BQLLimitMax = []string{"1ms"}
	if _, _, err := o.matrix(sc, "sculpt_iperf.hid", io.Discard); err == nil || !strings.Contains(err.Error(), "1ms") {
		t.Errorf("--bql-limit-max 1ms: %v", err)
	}
}

// TestRateMatrix: --rate is a dimension beside --fq-codel; a run's embedded client gets -b at
// the value (none at 0) in both directions, the labels tell the points apart; a bad value, and
// --rate with --udp-rate, are refused naming the flag and the value.
func TestRateMatrix(t *testing.T) {
	sc, err := loadScenario("../../deploy/sculpt_iperf.hid")
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Runs: 1, Throttles: []string{"adaptive"}, Batches: []string{"yes"}, Directions: []string{"rx", "tx"}, FQCodel: []string{"on"}, Rates: []string{"0", "600M", "1G/4"}}
	m, _, err := o.matrix(sc, "sculpt_iperf.hid", io.Discard)
	if err != nil || len(m) != 6 || m[0].rate != "0" || m[1].rate != "600M" || m[2].rate != "1G/4" || m[3].dir != "tx" || m[1].fq != "on" {
		t.Fatalf("matrix %v, %v", m, err)
	}
	if m[0].label() == m[1].label() || !strings.Contains(m[1].String(), "-b 600M") {
		t.Errorf("rates 0 and 600M: labels %q and %q", m[0].label(), m[1].label())
	}
	for _, tc := range []struct {
		m    setting
		want string
	}{
		{m[1], ` -b 600000000 -R"`}, // rx: the far end's server paces, told by the client
		{m[4], ` -b 600000000"`},
		{m[2], ` -b 1000000000/4 -R"`},
		{m[0], `-l 0 -R"`}, // unpaced
	} {
		text, err := sc.patch(tc.m, o)
		if err != nil {
			t.Fatal(err)
		}
		iperfAttr := ""
		for _, line := range strings.Split(string(text), "\n") {
			if strings.Contains(line, `iperf="-c`) {
				iperfAttr = line
			}
		}
		if !strings.Contains(iperfAttr, tc.want) {
			t.Errorf("%s: the client's command %s, want %s", tc.m, iperfAttr, tc.want)
		}
	}
	for _, bad := range []Options{
		{Rates: []string{"fast"}},
		{Rates: []string{"-1M"}},
		{Rates: []string{"600M"}, UDPRate: 1000},
	} {
		bad.Runs, bad.Throttles, bad.Batches, bad.Directions = 1, o.Throttles, o.Batches, o.Directions
		if _, _, err := bad.matrix(sc, "sculpt_iperf.hid", io.Discard); err == nil || !strings.Contains(err.Error(), "--rate "+bad.Rates[0]) && !strings.Contains(err.Error(), `--rate "`+bad.Rates[0]+`"`) {
			t.Errorf("--rate %v --udp-rate %d: %v", bad.Rates, bad.UDPRate, err)
		}
	}
}

// The rate of a point shows in the tables (the CPU table's setting, the fq-codel comparison
// and each hop's queue), in --json as "rate", and reads back from the client's command line.
func TestRateReported(t *testing.T) {
	var pts []point
	for _, rate := range []string{"0", "600M"} {
		p := samplePoints()[7] // rx adaptive, tx_batch yes
		p.FQCodel, p.Rate = "on", rate
		p.RRLoadRatio = 2.5
		p.Queues = map[string]queueFigure{"nic_drv: tx ring": {Frames: 3, Bytes: 4500, SojournUS: 40, MaxFrames: 20}}
		pts = append(pts, p)
	}
	sc := &scenario{roles: map[string]string{driverBinary: "nic_drv", routerBinary: "nic_router", hardwareBinary: "intel_nic_hw"}}
	var out strings.Builder
	writeTables(&out, pts, sc, Options{Directions: []string{dirRX}, Runs: 3, Time: 10 * time.Second, Latency: true})
	writeFQCodel(&out, pts)
	s := out.String()
	for _, want := range [][]string{
		{"yes, fq-codel on, -b 600M", "912"},       // the CPU table
		{"-b 600M rx_irq_throttle", " on ", "2.5"}, // the comparison
		{"-b 600M rx_irq_throttle", "nic_drv: tx ring", "4500"},
	} {
		found := false
		for _, line := range strings.Split(s, "\n") {
			has := true
			for _, w := range want {
				has = has && strings.Contains(line, w)
			}
			found = found || has
		}
		if !found {
			t.Errorf("no line with %q in\n%s", want, s)
		}
	}
	if b, err := json.Marshal(pts[1]); err != nil || !strings.Contains(string(b), `"rate":"600M"`) {
		t.Errorf("JSON %s, %v", b, err)
	}
	if err := drawPlot(filepath.Join(t.TempDir(), "rate.png"), pts, nil); err != nil {
		t.Fatal(err)
	}
	for _, udp := range []bool{false, true} {
		c := &iperf.Command{Client: "198.18.0.2", Port: 5201, Time: 10, Parallel: 1, Rate: 600e6, Burst: 4, UDP: udp}
		back, err := iperf.ParseCommand(strings.Fields(clientCommand(c)))
		if err != nil || back.Rate != c.Rate || back.Burst != 4 || back.UDP != udp {
			t.Errorf("%q read back as %+v, %v", clientCommand(c), back, err)
		}
	}
}
