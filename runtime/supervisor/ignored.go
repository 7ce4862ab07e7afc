// What of Genode's init config nicstack accepts without effect: the quotas and scheduling
// that Linux does its own way, and the services of Genode's core a nicstack component never
// requests. `nicstack check` lists them, `nicstack run -v` logs them.

package supervisor

import (
	"fmt"

	"github.com/nicstack/nicstack/runtime/config"
)

// UnusedParentServices are the parent services a Genode <parent-provides> lists for its
// components' own needs (binaries, memory, threads, logging, time, devices). Routes to them
// are fine; no nicstack component requests them: it is a Linux process, and its log goes to
// its stderr.
var UnusedParentServices = []string{"ROM", "PD", "CPU", "RM", "LOG", "Timer", "IRQ", "IO_MEM", "IO_PORT", "TRACE", "VM"}

// Ignored lists what sc says that nicstack accepts and ignores, one note per attribute, node
// or service, at its position.
func Ignored(sc *Scenario) []*config.Error {
	var out []*config.Error
	attr := func(n *config.Node, name, of, why string) {
		if a, ok := n.Attr(name); ok {
			out = append(out, config.Errorf(a.Pos, "%s=%q of %s is accepted and ignored: %s", name, a.Value, of, why))
		}
	}
	node := func(n *config.Node, what, why string) {
		out = append(out, config.Errorf(n.Pos, "%s is accepted and ignored: %s", what, why))
	}
	const (
		noCaps     = "Linux has no capability quota"
		noPriority = "Linux schedules the components"
	)
	root := sc.Root
	attr(root, "prio_levels", "<config>", noPriority)
	attr(root, "verbose", "<config>", "`nicstack run -v` logs the routing and session decisions")
	attr(root, "ld_verbose", "<config>", "components are Go binaries without a dynamic linker")
	if pp := root.Sub("parent-provides"); pp != nil {
		for _, s := range pp.Subs("service") {
			if contains(UnusedParentServices, s.Name()) {
				node(s, fmt.Sprintf("<service name=%q> of <parent-provides>", s.Name()), "no nicstack component requests it")
			}
		}
	}
	if d := root.Sub("default"); d != nil {
		attr(d, "caps", "<default>", noCaps)
	}
	for _, r := range root.Subs("resource") {
		node(r, fmt.Sprintf("init's own <resource name=%q>", r.Name()), "the supervisor keeps no quota of its own")
	}
	if r := sc.Report; r != nil {
		attr(r, "delay_ms", "<report>", "`nicstack run --report` writes the report every second")
		attr(r, "buffer", "<report>", "the report is a file of any size")
	}
	for _, st := range sc.Starts {
		of := fmt.Sprintf("<start name=%q>", st.Name)
		attr(st.Node, "caps", of, noCaps)
		attr(st.Node, "priority", of, noPriority)
		attr(st.Node, "ld", of, "components are Go binaries without a dynamic linker")
		attr(st.Node, "managing_system", of, "no component manages the system")
		for _, r := range st.Node.Subs("resource") {
			if r.Name() != "RAM" {
				node(r, fmt.Sprintf("<resource name=%q> of %s", r.Name(), of), "only the RAM quota means something here (session buffers)")
			}
		}
	}
	return out
}

// IgnoredIn parses a scenario file (or a package's runtime file) and lists what Ignored
// finds; nothing when it does not parse (Check says why).
func IgnoredIn(file string, data []byte) []*config.Error {
	sc, err := ParseScenario(file, data)
	if err != nil {
		return nil
	}
	return Ignored(sc)
}
