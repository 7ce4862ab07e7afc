// Package layers states which of nicstack's folders may import which, and checks an import
// graph against it; its test runs the check over `go list` of the whole module, so a change
// that runs an import up a floor fails `make test`. It is a rule book, not a build tool.
package layers

import (
	"fmt"
	"sort"
	"strings"
)

// Module is the module path every rule is relative to.
const Module = "github.com/nicstack/nicstack"

// Floors, from the top down: a package may import packages on lower floors, and on its own
// floor only as sameFloor allows.
var floors = []struct {
	floor    int
	prefixes []string
}{
	{5, []string{"cmd"}},
	{4, []string{"bench"}},
	{3, []string{"components"}},
	{2, []string{"internal"}},
	{1, []string{"runtime", "router", "drivers", "proto"}},
	{0, []string{"netdev"}},
}

// Floor is the floor of a module-relative package path, -1 for one the rules do not know.
func Floor(pkg string) int {
	for _, f := range floors {
		for _, p := range f.prefixes {
			if under(pkg, p) {
				return f.floor
			}
		}
	}
	return -1
}

func under(pkg, dir string) bool { return pkg == dir || strings.HasPrefix(pkg, dir+"/") }

// The libraries' floor (1) has an order of its own: the runtime is the framework and knows
// neither drivers nor the router; drivers and the router use its config language, labels and
// helpers but none of its process glue (component, supervisor, packet streams and what pumps
// them), so each stays a library over memory and frames that tests drive without processes.
var glue = []string{
	"runtime/component", "runtime/supervisor", "runtime/packetstream", "runtime/nicbridge",
	"runtime/pkgtest", "runtime/capture", "runtime/sandbox",
}

// Pairs on one floor that are refused although the floors would allow them.
var refused = []struct{ from, to, why string }{
	// The driver shares the register map with the emulation, not the emulation itself.
	{"drivers/ipxe", "drivers/intel", "the driver may use drivers/intel/regs, the register map it shares with the emulated NIC, not the emulation"},
}

// sameFloor reports whether from may import to, both on floor f.
func sameFloor(f int, from, to string) (bool, string) {
	top := func(p string) string { return strings.SplitN(p, "/", 2)[0] }
	for _, r := range refused {
		if under(from, r.from) && (to == r.to || (under(to, r.to) && !under(to, r.to+"/regs"))) {
			return false, r.why
		}
	}
	switch f {
	case 0:
		return true, ""
	case 1:
		switch {
		case top(from) == top(to):
			return true, ""
		case top(to) == "proto":
			return top(from) == "runtime", "only the runtime speaks the control protocol"
		case top(to) == "runtime" && top(from) != "proto":
			for _, g := range glue {
				if under(to, g) {
					return false, to + " is process glue: a library (" + top(from) + "/) stays free of it"
				}
			}
			return true, ""
		}
		return false, top(from) + "/ and " + top(to) + "/ are libraries beside each other: neither imports the other"
	}
	return true, ""
}

// A Violation is one import the rules refuse.
type Violation struct{ From, To, Why string }

func (v Violation) String() string { return fmt.Sprintf("%s imports %s: %s", v.From, v.To, v.Why) }

// Check checks an import graph: for each module-relative package path, its direct non-test
// imports (full paths). Leaves (netdev/...) may import only the standard library and
// golang.org/x/sys; other packages may import anything outside the module.
func Check(imports map[string][]string) []Violation {
	var out []Violation
	for from, list := range imports {
		ff := Floor(from)
		for _, imp := range list {
			rel, ours := strings.CutPrefix(imp, Module+"/")
			if !ours {
				if ff == 0 && !std(imp) && !under(imp, "golang.org/x/sys") {
					out = append(out, Violation{from, imp, "a leaf imports only the standard library and golang.org/x/sys"})
				}
				continue
			}
			ft := Floor(rel)
			switch {
			case ff < 0:
				out = append(out, Violation{from, rel, "the rules know no floor for " + from + ": add its folder to layers.floors"})
			case ft < 0:
				out = append(out, Violation{from, rel, "the rules know no floor for " + rel + ": add its folder to layers.floors"})
			case ft > ff:
				out = append(out, Violation{from, rel, fmt.Sprintf("runs up from floor %d to floor %d (%s)", ff, ft, order())})
			case ft == ff:
				if ok, why := sameFloor(ff, from, rel); !ok {
					out = append(out, Violation{from, rel, why})
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// std reports whether an import path is the standard library's: no dot in its first element.
func std(path string) bool { return !strings.Contains(strings.SplitN(path, "/", 2)[0], ".") }

// order is the floors as one line, for messages.
func order() string {
	var s []string
	for _, f := range floors {
		s = append(s, strings.Join(f.prefixes, ", "))
	}
	return "top down: " + strings.Join(s, " -> ")
}
