package iperf

import (
	"bytes"
	"io"
	"strings"
	"testing"

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
