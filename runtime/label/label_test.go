package label

import (
	"testing"

	"github.com/nicstack/nicstack/runtime/config"
)

func TestPrefixedAndLast(t *testing.T) {
	for _, c := range []struct{ client, label, full, last string }{
		{"vm", "", "vm -> ", ""},
		{"nic_perf_tx", "uplink", "nic_perf_tx -> uplink", "uplink"},
		{"init", "vm -> nic", "init -> vm -> nic", "nic"},
	} {
		if got := Prefixed(c.client, c.label); got != c.full {
			t.Errorf("Prefixed(%q, %q) = %q, want %q", c.client, c.label, got, c.full)
		}
		if got := Last(c.full); got != c.last {
			t.Errorf("Last(%q) = %q, want %q", c.full, got, c.last)
		}
	}
	// Genode's last_element does not take a separator at the very start as one.
	for label, last := range map[string]string{" -> x": " -> x", "a": "a", "": "", "a -> b -> c": "c"} {
		if got := Last(label); got != last {
			t.Errorf("Last(%q) = %q, want %q", label, got, last)
		}
	}
}

// choose parses a server config and returns which policy (by its domain attribute, or
// "default") selects label.
func choose(t *testing.T, xml, label string) string {
	t.Helper()
	n, err := config.Parse("test.xml", []byte(xml))
	if err != nil {
		t.Fatal(err)
	}
	p := Policy(n, label)
	if p == nil {
		return ""
	}
	if p.Type == "default-policy" {
		return "default"
	}
	return p.String("domain", "")
}

// The cases follow Genode's documented selection (Genode Foundations, "Server-side policy
// selection", and os/session_policy.h): a label match is strongest, then the longest
// prefix, then the longest suffix; a policy without label attributes matches nothing.
func TestPolicySelection(t *testing.T) {
	const cfg = `<config>
		<policy domain="none"/>
		<policy label_suffix=" -> uplink" domain="suffix"/>
		<policy label_suffix="tx -> uplink" domain="longer_suffix"/>
		<policy label_prefix="nic_perf" domain="prefix"/>
		<policy label_prefix="nic_perf_rx" domain="longer_prefix"/>
		<policy label="nic_perf_rx -> " domain="exact"/>
		<policy label="nic_perf_rx -> " domain="exact_second"/>
		<policy label_prefix="vm" label_suffix="-> lan" domain="both"/>
		<policy label="vm -> wan" label_prefix="nope" domain="conflict"/>
		<default-policy domain="fallback"/>
	</config>`
	for label, want := range map[string]string{
		"nic_perf_rx -> ":       "exact",         // label beats every prefix; the first of equals wins
		"nic_perf_rx -> x":      "longer_prefix", // a longer prefix beats a shorter one
		"nic_perf_tx -> uplink": "prefix",        // any prefix beats any suffix
		"drv -> tx -> uplink":   "longer_suffix",
		"drv -> uplink":         "suffix",
		"vm -> lan":             "both",    // both attributes hold
		"vm -> wan":             "default", // label holds, prefix does not: no match
		"":                      "default", // <policy/> without attributes matches nothing
		"uplink":                "default", // " -> uplink" is not a suffix of it
	} {
		if got := choose(t, cfg, label); got != want {
			t.Errorf("label %q: policy %q, want %q", label, got, want)
		}
	}
	if got := choose(t, `<config><policy label_prefix="a" domain="a"/></config>`, "b"); got != "" {
		t.Errorf("no match and no default-policy: got %q", got)
	}
	// An empty prefix is present and matches every label.
	if got := choose(t, `<config><policy label_prefix="" domain="all"/></config>`, "x -> y"); got != "all" {
		t.Errorf("empty label_prefix: got %q", got)
	}
}

func TestSelectorConflicts(t *testing.T) {
	var none Selector
	if none.Conflicts("anything") || none.Matches("anything") {
		t.Error("a selector without attributes conflicts with nothing and matches nothing")
	}
	s := Selector{Suffix: "-> nic", HasSuffix: true}
	if s.Conflicts("vm -> nic") || !s.Conflicts("nic") {
		t.Error("suffix")
	}
}
