package supervisor

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nicstack/nicstack/components"
	"github.com/nicstack/nicstack/runtime/component"
	"github.com/nicstack/nicstack/runtime/config"
)

func TestCheck(t *testing.T) {
	bin := t.TempDir()
	for _, name := range []string{"test_echo", "test_client"} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name, scenario string
		want           []string
	}{
		{"good", `<config>
<start name="test_echo"> <provides> <service name="Nic"/> </provides> </start>
<start name="test_client"> <route> <any-service> <any-child/> </any-service> </route> </start>
</config>`, nil},
		{"syntax", "<config>\n<start name=\"x\">\n</config>", []string{"f.xml:3:"}},
		{"privileged component", `<config>
<start name="test_echo" privileged="yes"/>
<start name="vm" privileged="yes"> <binary name="sh"/> <config> <arg value="sh"/> </config> </start>
</config>`, []string{
			`f.xml:2:2: privileged="yes" of "test_echo": only a program may run as the supervisor's user, a component is always confined`,
		}},
		{"unknown node and attribute", `<config>
<start name="test_echo" rams="1M"> <provide/> </start>
</config>`, []string{
			`f.xml:2:25: unknown attribute "rams" of <start>; did you mean ram?`,
			`f.xml:2:37: unknown node <provide> in <start>; did you mean provides?`,
		}},
		{"unknown binary", `<config>
<start name="nic_drv"/>
<start name="x"> <binary name="nic_router"/> </start>
</config>`, []string{
			`f.xml:2:2: binary of "nic_drv": "nic_drv" is not a nicstack component (known: `,
			`f.xml:3:19: binary "nic_router" of "x" not found in ` + bin,
		}},
		{"route to nobody", `<config>
<parent-provides> <service name="LOG"/> </parent-provides>
<start name="test_echo"/>
<start name="test_client"> <route>
	<service name="Nic"> <child name="test_echo"/> </service>
	<service name="Timer"> <parent/> </service>
	<service name="Uplink"> <any-child/> </service>
	<service name="Nic"> <child name="ghost"/> </service>
</route> </start>
</config>`, []string{
			`f.xml:5:24: route of test_client: <child name="test_echo"/> routes Nic to "test_echo", which does not provide it (<provides>)`,
			`f.xml:6:26: route of test_client: <parent/> routes Timer to the parent, which does not provide it (<parent-provides>)`,
			`f.xml:7:27: route of test_client: <any-child/> for Uplink, but no child provides it`,
			`f.xml:8:24: route of test_client: <child name="ghost"/> names a child no <start> (nor <alias>) has`,
		}},
		{"ambiguous any-child", `<config>
<default-route> <service name="Nic"> <any-child/> </service> </default-route>
<start name="test_echo"> <provides> <service name="Nic"/> </provides> </start>
<start name="e2"> <binary name="test_echo"/> <provides> <service name="Nic"/> </provides> </start>
<start name="test_client"/>
</config>`, []string{
			`f.xml:2:39: default-route (for test_client): <any-child/> for Nic is ambiguous: provided by test_echo, e2`,
		}},
		{"affinity outside the space", `<config>
<affinity-space width="2" height="1"/>
<start name="test_echo"> <affinity xpos="2" ypos="0"/> </start>
<start name="test_client"> <affinity xpos="0" width="3"/> </start>
</config>`, []string{
			`f.xml:3:27: affinity (2,0) 1x1 of "test_echo" lies outside the affinity space 2x1`,
			`f.xml:4:29: affinity (0,0) 3x1 of "test_client" lies outside the affinity space 2x1`,
		}},
		{"bad values and duplicates", `<config>
<affinity-space width="0"/>
<start name="test_echo" ram="lots"/>
<start name="test_echo"/>
<start/>
</config>`, []string{
			`f.xml:2:2: <affinity-space> 0x1: width and height must be 1 to 1024`,
			`f.xml:3:25: attribute "ram" of <start>: "lots" is not a number (like 42, 0x2a, 16K, 10M, 1G)`,
			`f.xml:4:2: <start name="test_echo"> is a duplicate of the one at f.xml:3:2`,
			`f.xml:5:2: <start> needs a name`,
		}},
		{"aliases", `<config>
<alias name="nic" child="test_echo"/>
<alias name="lost" child="ghost"/>
<alias name="twice" child="nic"/>
<start name="test_echo"> <provides> <service name="Nic"/> </provides> </start>
<start name="test_client"> <route> <service name="Nic"> <child name="nic"/> </service> </route> </start>
</config>`, []string{
			`f.xml:3:2: <alias name="lost"> names child "ghost", which no <start> has`,
			`f.xml:4:2: <alias name="twice"> names child "nic", which no <start> has`,
		}},
		{"alias clash", `<config>
<alias name="test_client" child="test_echo"/>
<start name="test_echo"/> <start name="test_client"/>
</config>`, []string{
			`f.xml:2:2: <alias name="test_client"> clashes with the <start> of that name at f.xml:3:28`,
		}},
		{"alias routes", `<config>
<alias name="nic" child="test_echo"/>
<start name="test_echo"> <provides> <service name="Nic"/> </provides> </start>
<start name="test_client"> <route>
	<service name="Uplink"> <child name="nic"/> </service>
</route> </start>
</config>`, []string{
			`f.xml:5:27: route of test_client: <child name="nic"/> routes Uplink to "test_echo", which does not provide it (<provides>)`,
		}},
		{"ambiguous RAM quota", `<config>
<start name="test_echo" ram="1M"> <resource name="RAM" quantum="2M"/> </start>
</config>`, []string{
			`f.xml:2:36: test_echo: ambiguous RAM quota: ram (of <start> or <default>) and <resource name="RAM">; the <resource> wins`,
		}},
		{"RAM resource without quantum", `<config>
<start name="test_client"> <resource name="RAM"/> </start>
</config>`, []string{
			`f.xml:2:29: <resource name="RAM"> of "test_client" needs a quantum`,
		}},
		{"component config against its schema", `<config>
<start name="test_echo"> <config tag="1" tagg="2"/> </start>
</config>`, []string{
			`f.xml:2:42: unknown attribute "tagg" of <config>; did you mean tag?`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := Check("f.xml", []byte(tc.scenario), []string{bin}, components.Table)
			var got []string
			for _, e := range errs {
				got = append(got, e.Error())
			}
			if tc.want == nil && len(got) > 0 {
				t.Fatalf("unexpected errors:\n%s", strings.Join(got, "\n"))
			}
			all := strings.Join(got, "\n")
			for _, w := range tc.want {
				if !strings.Contains(all, w) {
					t.Errorf("missing error %q\ngot:\n%s", w, all)
				}
			}
		})
	}
}

func TestCheckComponent(t *testing.T) {
	errs := CheckComponent(components.Table, "test_client", "c.hid", []byte("config | window: 8 | sise: 1\n-\n"))
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), `c.hid:1:22: unknown attribute "sise" of <config>; did you mean size?`) {
		t.Errorf("got %v", errs)
	}
	errs = CheckComponent(components.Table, "nope", "c.hid", []byte("config\n-\n"))
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), `"nope" is not a nicstack component (known: `) {
		t.Errorf("got %v", errs)
	}
}

// A component's registered parse runs beside its schema: its positioned errors come as they
// are, one without a position gets the <config>'s.
func TestCheckComponentParse(t *testing.T) {
	table := component.Table{{
		Binary: "lint_parse_test",
		Schema: &config.Schema{Type: "config", Attrs: []string{"mtu", "peer"}},
		Parse: component.Parser(func(n *config.Node, name string) (*config.Node, error) {
			if a, ok := n.Attr("mtu"); ok && a.Value != "1500" {
				return nil, config.Errorf(a.Pos, "mtu=%s of %s is out of range", a.Value, name)
			}
			if _, ok := n.Attr("peer"); ok {
				return nil, errors.New("peer needs an address")
			}
			return n, nil
		}),
	}}
	for in, want := range map[string]string{
		"config | mtu: 9\n-\n":    `c.hid:1:10: mtu=9 of lint_parse_test is out of range`,
		"config | peer: x\n-\n":   `c.hid:1:1: peer needs an address`,
		"config | mtus: 9\n-\n":   `c.hid:1:10: unknown attribute "mtus" of <config>; did you mean mtu?`,
		"config | mtu: 1500\n-\n": "",
	} {
		errs := CheckComponent(table, "lint_parse_test", "c.hid", []byte(in))
		if want == "" && len(errs) != 0 || want != "" && (len(errs) != 1 || errs[0].Error() != want) {
			t.Errorf("%q: got %v, want %q", in, errs, want)
		}
	}
}

// TestIgnored: what nicstack accepts without effect is listed, one note each at its position;
// the scenario checks clean.
func TestIgnored(t *testing.T) {
	const scenario = `<config prio_levels="2" verbose="yes">
<parent-provides> <service name="ROM"/> <service name="LOG"/> <service name="Tap"/> </parent-provides>
<default caps="100"/>
<resource name="RAM" preserve="2M"/>
<start name="test_echo" caps="200" priority="-1" ld="no" managing_system="yes">
	<resource name="RAM" quantum="4M"/> <resource name="CPU" quantum="10"/>
</start>
</config>`
	want := []string{
		`f.xml:1:9: prio_levels="2" of <config> is accepted and ignored: Linux schedules the components`,
		`f.xml:1:25: verbose="yes" of <config> is accepted and ignored: ` + "`nicstack run -v`" + ` logs the routing and session decisions`,
		`f.xml:2:20: <service name="ROM"> of <parent-provides> is accepted and ignored: no nicstack component requests it`,
		`f.xml:2:42: <service name="LOG"> of <parent-provides> is accepted and ignored: no nicstack component requests it`,
		`f.xml:3:10: caps="100" of <default> is accepted and ignored: Linux has no capability quota`,
		`f.xml:4:2: init's own <resource name="RAM"> is accepted and ignored: the supervisor keeps no quota of its own`,
		`f.xml:5:25: caps="200" of <start name="test_echo"> is accepted and ignored: Linux has no capability quota`,
		`f.xml:5:36: priority="-1" of <start name="test_echo"> is accepted and ignored: Linux schedules the components`,
		`f.xml:5:50: ld="no" of <start name="test_echo"> is accepted and ignored: components are Go binaries without a dynamic linker`,
		`f.xml:5:58: managing_system="yes" of <start name="test_echo"> is accepted and ignored: no component manages the system`,
		`f.xml:6:39: <resource name="CPU"> of <start name="test_echo"> is accepted and ignored: only the RAM quota means something here (session buffers)`,
	}
	var got []string
	for _, n := range IgnoredIn("f.xml", []byte(scenario)) {
		got = append(got, n.Error())
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if errs := Check("f.xml", []byte(scenario), nil, components.Table); len(errs) != 0 {
		t.Errorf("check: %v", errs)
	}
}
