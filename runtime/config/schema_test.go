package config

import (
	"strings"
	"testing"
)

// A slice of the nic_router's schema, recursive where Genode's is.
var (
	permit     = &Schema{Type: "permit", Attrs: []string{"port", "domain"}}
	permitAny  = &Schema{Type: "permit-any", Attrs: []string{"domain"}}
	tcp        = &Schema{Type: "tcp", Attrs: []string{"dst"}, Nodes: []*Schema{permit, permitAny}}
	nat        = &Schema{Type: "nat", Attrs: []string{"domain", "tcp-ports", "udp-ports", "icmp-ids"}}
	domain     = &Schema{Type: "domain", Attrs: []string{"name", "interface", "gateway"}, Nodes: []*Schema{nat, tcp}}
	policy     = &Schema{Type: "policy", Attrs: []string{"label", "label_prefix", "label_suffix", "domain"}}
	routerConf = &Schema{Type: "config", Attrs: []string{"verbose"}, Nodes: []*Schema{domain, policy,
		{Type: "report", Any: true}, {Type: "script", Content: true}}}
)

func TestCheck(t *testing.T) {
	src := `config | verbos: yes
+ policy | label_prefic: vm | domain: default
+ report | anything: goes
  + below | here: too
+ script
  : echo hi
+ domain uplink | interface: 10.0.0.1/24
  x nat | domain: default | tcp_ports: 1000
+ domain stray
  : content
+ domain default
  + tcp | dst: 0.0.0.0/0 | + permit_any | domain: uplink
  + udp | dst: 0.0.0.0/0
  + zzz
-
`
	n := mustParse(t, "router.hid", []byte(src))
	var got []string
	for _, e := range Check(n, routerConf) {
		got = append(got, e.Error())
	}
	want := []string{
		`router.hid:1:10: unknown attribute "verbos" of <config>; did you mean verbose?`,
		`router.hid:2:12: unknown attribute "label_prefic" of <policy>; did you mean label_prefix?`,
		`router.hid:8:29: unknown attribute "tcp_ports" of <nat>; did you mean tcp-ports?`,
		`router.hid:9:3: <domain> takes no content`,
		`router.hid:12:30: unknown node <permit_any> in <tcp>; did you mean permit-any?`,
		`router.hid:13:5: unknown node <udp> in <domain>`,
		`router.hid:14:5: unknown node <zzz> in <domain>`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if errs := Check(n, &Schema{Type: "start"}); len(errs) != 1 || !strings.Contains(errs[0].Msg, "expected <start>") {
		t.Fatalf("top-level mismatch: %v", errs)
	}
}

func TestSuggest(t *testing.T) {
	known := []string{"tcp-ports", "udp-ports", "icmp-ids", "label_prefix"}
	for name, want := range map[string]string{
		"tcp_ports":    "tcp-ports",
		"udp-port":     "udp-ports",
		"label-prefix": "label_prefix",
		"label_prefic": "label_prefix",
		"icmp":         "",
		"x":            "",
	} {
		got := suggest(name, known)
		if want == "" && got != "" || want != "" && got != "; did you mean "+want+"?" {
			t.Errorf("suggest(%q) = %q, want %q", name, got, want)
		}
	}
}
