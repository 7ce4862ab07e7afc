package supervisor

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/nicstack/nicstack/runtime/component"
	"github.com/nicstack/nicstack/runtime/config"
)

// Check validates a scenario without starting anything, as `nicstack check` does: syntax,
// unknown nodes and attributes, values, binaries missing from binDirs, routes to services
// nobody provides, ambiguous <any-child/>, affinity outside the space, binaries the table of
// components does not know, and each <config> against its component's Spec. Errors come back
// sorted by position.
func Check(file string, data []byte, binDirs []string, table component.Table) []error {
	root, err := config.Parse(file, data)
	if err != nil {
		return flatten(err)
	}
	cfg, err := InitConfig(root)
	if err != nil {
		return []error{err}
	}
	var out []error
	for _, e := range config.Check(cfg, Schema) {
		out = append(out, e)
	}
	sc, err := FromNode(file, root)
	if err != nil {
		return sortErrs(append(out, flatten(err)...))
	}
	out = append(out, sc.Warnings...)
	for _, a := range sc.Aliases {
		if sc.Start(a.Child) == nil {
			out = append(out, config.Errorf(a.Pos, "<alias name=%q> names child %q, which no <start> has", a.Name, a.Child))
		}
	}
	for _, st := range sc.Starts {
		if st.Affinity != nil {
			if v, ok := st.Affinity.In(sc.Space); !ok {
				out = append(out, config.Errorf(st.Affinity.Pos, "affinity %s of %q lies outside the affinity space %s", v, st.Name, sc.Space))
			}
		}
		out = append(out, checkRoutes(sc, st)...)
		if _, ok := programArgs(table, st); ok {
			if _, err := programPath(st.Binary, binDirs); err != nil {
				out = append(out, config.Errorf(binaryPos(st), "program %q of %q: %v", st.Binary, st.Name, err))
			}
			continue
		}
		if st.Privileged {
			out = append(out, config.Errorf(st.Node.Pos, "privileged=\"yes\" of %q: only a program may run as the supervisor's user, a component is always confined", st.Name))
		}
		spec, err := table.Lookup(st.Binary)
		if err != nil {
			out = append(out, config.Errorf(binaryPos(st), "binary of %q: %v", st.Name, err))
			continue
		}
		if len(binDirs) > 0 && !findBinary(st.Binary, binDirs) {
			out = append(out, config.Errorf(binaryPos(st), "binary %q of %q not found in %s", st.Binary, st.Name, strings.Join(binDirs, ", ")))
		}
		_, errs := checkStartConfig(spec, st)
		out = append(out, errs...)
	}
	return sortErrs(out)
}

func binaryPos(st *Start) config.Pos {
	if b := st.Node.Sub("binary"); b != nil {
		return b.Pos
	}
	return st.Node.Pos
}

func findBinary(name string, dirs []string) bool {
	for _, d := range dirs {
		if fi, err := os.Stat(filepath.Join(d, name)); err == nil && fi.Mode().IsRegular() {
			return true
		}
	}
	return false
}

// checkRoutes checks each rule naming a service: its targets must be able to serve it.
func checkRoutes(sc *Scenario, st *Start) []error {
	r, which := st.Route, "route of "+st.Name
	if r == nil {
		r, which = sc.DefaultRoute, "default-route (for "+st.Name+")"
	}
	if r == nil {
		return nil
	}
	var out []error
	for _, rule := range r.Rules {
		for _, t := range rule.Targets {
			if rule.Service == "" && t.Kind != TargetChild {
				continue // which services <any-service> covers is known at run time only
			}
			switch t.Kind {
			case TargetParent:
				if !contains(sc.ParentProvides, rule.Service) {
					out = append(out, config.Errorf(t.Pos, "%s: %s routes %s to the parent, which does not provide it (<parent-provides>)", which, t, rule.Service))
				}
			case TargetChild:
				if c := sc.Child(t.Child); c == nil {
					out = append(out, config.Errorf(t.Pos, "%s: %s names a child no <start> (nor <alias>) has", which, t))
				} else if rule.Service != "" && !contains(c.Provides, rule.Service) {
					out = append(out, config.Errorf(t.Pos, "%s: %s routes %s to %q, which does not provide it (<provides>)", which, t, rule.Service, c.Name))
				}
			case TargetAnyChild:
				var providers []string
				for _, c := range sc.Starts {
					if c != st && contains(c.Provides, rule.Service) {
						providers = append(providers, c.Name)
					}
				}
				switch {
				case len(providers) == 0:
					out = append(out, config.Errorf(t.Pos, "%s: <any-child/> for %s, but no child provides it", which, rule.Service))
				case len(providers) > 1:
					out = append(out, config.Errorf(t.Pos, "%s: <any-child/> for %s is ambiguous: provided by %s", which, rule.Service, strings.Join(providers, ", ")))
				}
			}
		}
	}
	return out
}

// CheckComponent checks a bare config of the component binary against its Spec.
func CheckComponent(table component.Table, binary, file string, data []byte) []error {
	spec, err := table.Lookup(binary)
	if err != nil {
		return []error{err}
	}
	root, err := config.Parse(file, data)
	if err != nil {
		return flatten(err)
	}
	_, errs := checkConfig(spec, root, binary)
	return errs
}

// checkStartConfig checks a start's <config> (an absent one as empty) against its Spec.
func checkStartConfig(spec component.Spec, st *Start) (cfg any, errs []error) {
	n := st.Config
	if n == nil {
		n = &config.Node{Type: "config", Pos: st.Node.Pos}
	}
	return checkConfig(spec, n, st.Name)
}

// checkConfig lists everything spec.Check finds in n, warnings and error alike, with the
// typed config it parsed (nil when refused).
func checkConfig(spec component.Spec, n *config.Node, start string) (cfg any, errs []error) {
	cfg, errs, err := spec.Check(n, start)
	if err != nil {
		errs = append(errs, err)
	}
	return cfg, errs
}

// flatten splits joined errors (a parser's list, FromNode's lines) into one error each.
func flatten(err error) []error {
	var list interface{ Unwrap() []error }
	if errors.As(err, &list) {
		return list.Unwrap()
	}
	var out []error
	for _, line := range strings.Split(err.Error(), "\n") {
		out = append(out, errors.New(line))
	}
	return out
}

// sortErrs orders errors by file position where they have one, keeping duplicates out.
func sortErrs(errs []error) []error {
	pos := func(e error) config.Pos {
		var ce *config.Error
		if errors.As(e, &ce) {
			return ce.Pos
		}
		return config.Pos{Line: 1 << 30}
	}
	sort.SliceStable(errs, func(i, j int) bool {
		a, b := pos(errs[i]), pos(errs[j])
		return a.Line < b.Line || a.Line == b.Line && a.Col < b.Col
	})
	var out []error
	seen := map[string]bool{}
	for _, e := range errs {
		if !seen[e.Error()] {
			seen[e.Error()] = true
			out = append(out, e)
		}
	}
	return out
}
