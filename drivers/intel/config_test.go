package intel

import (
	"strings"
	"testing"
	"time"

	"github.com/nicstack/nicstack/runtime/config"
)

func TestParseConfig(t *testing.T) {
	n, err := config.Parse("hw.xml", []byte(`<config model="i217-LM" mac="02:00:00:00:00:07" partner_speed="100" autoneg_ms="5"/>`))
	if err != nil {
		t.Fatal(err)
	}
	nc, err := ParseConfig(n, "hw")
	c := nc.Device
	if err != nil || c.Model.Name != "i217-LM" || c.MAC.String() != "02:00:00:00:00:07" ||
		c.PartnerSpeed != 100 || c.Autoneg != 5*time.Millisecond {
		t.Errorf("got %+v, %v", c, err)
	}
	if errs := config.Check(n, ConfigSchema); len(errs) != 0 {
		t.Errorf("schema: %v", errs)
	}
	for _, bad := range []string{`<config model="e1000"/>`, `<config mac="x"/>`, `<config partner_speed="2500"/>`} {
		n, _ := config.Parse("hw.xml", []byte(bad))
		if _, err := ParseConfig(n, "hw"); err == nil || !strings.HasPrefix(err.Error(), "hw.xml:1:") {
			t.Errorf("%s: error %v, want one naming hw.xml:1:", bad, err)
		}
	}
}

// <wire> is part of ParseConfig, so what it refuses check reports (the table's Parse).
func TestParseWire(t *testing.T) {
	parse := func(s string) *config.Node {
		n, err := config.Parse("hw.xml", []byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	parseWire := func(n *config.Node) (WireConfig, error) {
		c, err := ParseConfig(n, "hw")
		return c.Wire, err
	}
	for _, s := range []string{`<config/>`, `<config><wire/></config>`, `<config><wire type="session"/></config>`} {
		if w, err := parseWire(parse(s)); err != nil || w.Type != WireSession || w.Service != "" || w.FlowControl != DefaultFlowControl {
			t.Errorf("%s: %+v, %v", s, w, err)
		}
	}
	for s, want := range map[string]bool{`<config><wire flow_control="no"/></config>`: false, `<config><wire type="session" flow_control="yes"/></config>`: true} {
		n := parse(s)
		c, err := ParseConfig(n, "hw")
		if err != nil || c.Wire.FlowControl != want || c.Device.FlowControl != want {
			t.Errorf("%s: wire %+v, device's flow control %v, %v", s, c.Wire, c.Device.FlowControl, err)
		}
		if errs := config.Check(n, ConfigSchema); len(errs) != 0 {
			t.Errorf("schema: %v", errs)
		}
	}
	if c, err := ParseConfig(parse(`<config><wire type="tap" netns="far" flow_control="no"/></config>`), "hw"); err != nil || c.Device.FlowControl {
		t.Errorf("tap wire with flow_control=\"no\": device's flow control %v, %v", c.Device.FlowControl, err)
	}
	n := parse(`<config model="i217-LM"><wire type="tap" netns="far" address="198.18.0.2/24" exec="iperf3 -s"/></config>`)
	if errs := config.Check(n, ConfigSchema); len(errs) != 0 {
		t.Errorf("schema: %v", errs)
	}
	w, err := parseWire(n)
	if err != nil || w.Service != "Tap" || w.Args["netns"] != "far" || w.Args["address"] != "198.18.0.2/24" ||
		w.Args["exec"] != "iperf3 -s" || w.Args["offload"] != "no" || w.Args["mtu"] != "1500" {
		t.Errorf("tap wire: %+v, %v", w, err)
	}
	w, err = parseWire(parse(`<config><wire type="packet" netns="far" exec="x"/></config>`))
	if err != nil || w.Service != "Packet" || !strings.HasSuffix(w.Args["exec"], "; x") || w.Args["offload"] != "" {
		t.Errorf("packet wire: %+v, %v", w, err)
	}
	for bad, attr := range map[string]string{
		`<config><wire type="cable"/></config>`:                              `"type"`,
		`<config><wire type="tap"/></config>`:                                `"netns"`,
		`<config><wire type="tap" netns="far" offload="yes"/></config>`:      `"offload"`,
		`<config><wire type="tap" netns="far" address="x"/></config>`:        `address`,
		`<config><wire type="packet" netns="far" gateway="y"/></config>`:     `gateway`,
		`<config><wire netns="far"/></config>`:                               `"netns"`,
		`<config><wire type="tap" netns="far" offload="maybe"/></config>`:    `offload`,
		`<config><wire type="tap" netns="far" flow_control="yes"/></config>`: `"flow_control"`,
		`<config><wire flow_control="maybe"/></config>`:                      `flow_control`,
	} {
		if _, err := parseWire(parse(bad)); err == nil || !strings.HasPrefix(err.Error(), "hw.xml:1:") || !strings.Contains(err.Error(), attr) {
			t.Errorf("%s: error %v, want one at hw.xml:1: naming %s", bad, err, attr)
		}
	}
	if errs := config.Check(parse(`<config><wire type="tap" netns="far" mtu="9000"/></config>`), ConfigSchema); len(errs) != 1 {
		t.Errorf("schema accepted <wire mtu>: %v", errs)
	}
}
