package supervisor

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/nicstack/nicstack/runtime/component"
	"github.com/nicstack/nicstack/runtime/config"
)

// Check validates a scenario without starting anything, as `nicstack check` does: syntax,
// unknown nodes and attributes, values, binaries missing from binDirs, routes to services
// nobody provides, ambiguous <any-child/>, affinity outside the space, and each <config>
// against its component's registered schema. Errors come back sorted by position.
func Check(file string, data []byte, binDirs []string) []error {
	root, err := config.Parse(file, data)
	if err != nil {
		return flatten(err)
	}
	var out []error
	for _, e := range config.Check(root, Schema) {
		out = append(out, e)
	}
	sc, err := FromNode(file, root)
	if err != nil {
		return sortErrs(append(out, flatten(err)...))
	}
	for _, st := range sc.Starts {
		if len(binDirs) > 0 && !findBinary(st.Binary, binDirs) {
			out = append(out, config.Errorf(binaryPos(st), "binary %q of %q not found in %s", st.Binary, st.Name, strings.Join(binDirs, ", ")))
		}
		if st.Affinity != nil {
			if v, ok := st.Affinity.In(sc.Space); !ok {
				out = append(out, config.Errorf(st.Affinity.Pos, "affinity %s of %q lies outside the affinity space %s", v, st.Name, sc.Space))
			}
		}
		out = append(out, checkStartConfig(st)...)
		out = append(out, checkRoutes(sc, st)...)
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
				if c := sc.Start(t.Child); c == nil {
					out = append(out, config.Errorf(t.Pos, "%s: %s names a child no <start> has", which, t))
				} else if !contains(c.Provides, rule.Service) {
					out = append(out, config.Errorf(t.Pos, "%s: %s routes %s to %q, which does not provide it (<provides>)", which, t, rule.Service, t.Child))
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

// CheckComponent checks a bare component config against what the component registered.
func CheckComponent(name, file string, data []byte) []error {
	spec, ok := component.LookupConfig(name)
	if !ok {
		return []error{fmt.Errorf("no config registered for component %q (known: %s)", name, strings.Join(component.ConfigNames(), ", "))}
	}
	root, err := config.Parse(file, data)
	if err != nil {
		return flatten(err)
	}
	return checkConfig(spec, root, name)
}

// checkStartConfig checks a start's <config> against what its binary registered (nothing when
// it registered nothing or has no config).
func checkStartConfig(st *Start) []error {
	if spec, ok := component.LookupConfig(st.Binary); ok && st.Config != nil {
		return checkConfig(spec, st.Config, st.Name)
	}
	return nil
}

// checkConfig reports n's schema problems and, when the schema holds, what the component's own
// parse refuses (its errors name the position already).
func checkConfig(spec component.ConfigSpec, n *config.Node, name string) []error {
	var out []error
	for _, e := range config.Check(n, spec.Schema) {
		out = append(out, e)
	}
	if len(out) == 0 && spec.Parse != nil {
		if err := spec.Parse(n, name); err != nil {
			// An error without a position gets the <config>'s.
			var ce *config.Error
			if !errors.As(err, &ce) {
				err = config.Errorf(n.Pos, "%v", err)
			}
			out = append(out, err)
		}
	}
	return out
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
