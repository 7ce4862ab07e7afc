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
