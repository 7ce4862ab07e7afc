package layers

import (
	"os/exec"
	"strings"
	"testing"
)

// TestModuleKeepsItsFloors runs the rules over `go list` of every package of the module (its
// non-test imports): no import runs up a floor, and the libraries keep apart.
func TestModuleKeepsItsFloors(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", Module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	graph := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		rel, ok := strings.CutPrefix(f[0], Module+"/")
		if !ok { // the module's root has no package
			continue
		}
		graph[rel] = f[1:]
	}
	if len(graph) < 50 {
		t.Fatalf("go list gave %d packages: not the whole module", len(graph))
	}
	for _, v := range Check(graph) {
		t.Error(v)
	}
	// What DESIGN.md promises in words, over the whole closure (go list -deps).
	deps, err := exec.Command("go", "list", "-deps", Module+"/runtime/...").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, d := range strings.Fields(string(deps)) {
		for _, up := range []string{"drivers", "router", "components", "internal", "bench", "cmd"} {
			if under(strings.TrimPrefix(d, Module+"/"), up) && strings.HasPrefix(d, Module+"/") {
				t.Errorf("runtime/... depends on %s", d)
			}
		}
	}
}

// Each kind of broken rule is caught, so the test above fails when a change adds one.
func TestCheckRefusesUpwardImports(t *testing.T) {
	m := func(p string) string { return Module + "/" + p }
	cases := []struct {
		from string
		imp  string
	}{
		{"runtime/supervisor", m("drivers/tap")},     // the runtime imports a driver
		{"drivers/tap", m("internal/hostservice")},   // a library imports a floor up
		{"router", m("components/nic_dump/nicdump")}, // the router imports a component's library
		{"bench", m("cmd/nicstack")},                 // the harness imports the command
		{"components/nic_router", m("bench/iperf")},  // a component imports the harness
		{"drivers/ipxe", m("drivers/intel")},         // the driver links the emulation
		{"router", m("drivers/tap")},                 // libraries beside each other
		{"drivers/tap", m("runtime/packetstream")},   // a driver imports process glue
		{"netdev/header", "github.com/spf13/cobra"},  // a leaf imports a third party
		{"netdev/header", m("runtime/config")},       // a leaf imports a library
		{"newfolder/x", m("netdev")},                 // a folder the rules do not know
	}
	for _, c := range cases {
		if v := Check(map[string][]string{c.from: {c.imp}}); len(v) != 1 {
			t.Errorf("%s -> %s: %d violations, want 1", c.from, c.imp, len(v))
		}
	}
	ok := map[string][]string{
		"cmd/nicstack":          {m("bench"), m("components"), m("internal/hostservice"), m("runtime/supervisor")},
		"components/nic_router": {m("router"), m("runtime/component"), m("netdev/header")},
		"drivers/ipxe":          {m("drivers/intel/regs"), m("runtime/config"), m("netdev")},
		"router":                {m("runtime/config"), m("router/model"), m("netdev/header")},
		"runtime/component":     {m("proto"), m("runtime/config")},
		"netdev/header":         {"encoding/binary", "golang.org/x/sys/unix"},
	}
	if v := Check(ok); len(v) != 0 {
		t.Errorf("allowed imports refused: %v", v)
	}
}
