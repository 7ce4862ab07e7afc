// The scenario: an init config parsed into its <start>s, what the supervisor plans a run from
// (with route.go's routes and placement.go's CPUs).

package supervisor

import (
	"errors"
	"os"
	"strings"

	"github.com/nicstack/nicstack/runtime/config"
)

// Scenario is a parsed init config.
type Scenario struct {
	File           string
	ParentProvides []string
	DefaultRoute   *Route
	DefaultRAM     uint64 // <default ram>; 0: no limit for starts without ram
	Space          Space  // <affinity-space>, 1x1 when absent
	HeartbeatMS    uint64 // <heartbeat rate_ms>, 0 when absent
	Report         *config.Node
	Starts         []*Start
	Root           *config.Node
}

// Start is one <start> node.
type Start struct {
	Name     string
	Binary   string
	Version  string
	RAM      uint64 // bytes of session buffers the component may pay for; 0: no limit
	Affinity *Location
	Provides []string
	Route    *Route // nil: the scenario's <default-route>
	Config   *config.Node
	// Heartbeat restarts the component when it stops answering heartbeats.
	Heartbeat bool
	Node      *config.Node
}

// Start returns the start named name, or nil.
func (sc *Scenario) Start(name string) *Start {
	for _, s := range sc.Starts {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// Schema is what init's config may hold; a component's own <config> is not checked here.
var Schema = func() *config.Schema {
	service := &config.Schema{Type: "service", Attrs: []string{"name"}}
	targetAttrs := []string{"label"}
	targets := []*config.Schema{
		{Type: "parent", Attrs: targetAttrs},
		{Type: "child", Attrs: append([]string{"name"}, targetAttrs...)},
		{Type: "any-child", Attrs: targetAttrs},
	}
	route := &config.Schema{Type: "route", Nodes: []*config.Schema{
		{Type: "service", Attrs: []string{"name", "label", "label_prefix", "label_suffix", "label_last", "unscoped_label"}, Nodes: targets},
		{Type: "any-service", Nodes: targets},
	}}
	defaultRoute := *route
	defaultRoute.Type = "default-route"
	return &config.Schema{Type: "config", Attrs: []string{"verbose", "prio_levels"}, Nodes: []*config.Schema{
		{Type: "parent-provides", Nodes: []*config.Schema{service}},
		&defaultRoute,
		{Type: "default", Attrs: []string{"caps", "ram"}},
		{Type: "affinity-space", Attrs: []string{"width", "height"}},
		{Type: "report", Attrs: []string{"ids", "requested", "provided", "session_args", "child_ram", "child_caps", "init_ram", "init_caps", "delay_ms", "buffer"}},
		{Type: "heartbeat", Attrs: []string{"rate_ms"}},
		{Type: "start", Attrs: []string{"name", "caps", "ram", "version", "priority", "ld", "managing_system"}, Nodes: []*config.Schema{
			{Type: "binary", Attrs: []string{"name"}},
			{Type: "affinity", Attrs: []string{"xpos", "ypos", "width", "height"}},
			{Type: "provides", Nodes: []*config.Schema{service}},
			route,
			{Type: "config", Any: true},
			{Type: "heartbeat"},
		}},
	}}
}()

// LoadScenario reads and parses a scenario file.
func LoadScenario(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseScenario(path, data)
}

// ParseScenario parses a scenario and checks what can be checked without looking at the
// machine: structure, numbers, names, routes to children. Unknown nodes and attributes are
// not errors here (Check reports them); they are at run time only warnings.
func ParseScenario(file string, data []byte) (*Scenario, error) {
	root, err := config.Parse(file, data)
	if err != nil {
		return nil, err
	}
	return FromNode(file, root)
}

// errs collects errors in document order.
type errs []error

func (e *errs) add(err error) {
	if list, ok := err.(interface{ Unwrap() []error }); ok {
		*e = append(*e, list.Unwrap()...)
	} else if err != nil {
		*e = append(*e, err)
	}
}

// err joins the errors; each stays reachable (with its position) through Unwrap.
func (e errs) err() error { return errors.Join(e...) }

// FromNode builds a scenario from a parsed <config> node.
func FromNode(file string, root *config.Node) (*Scenario, error) {
	var e errs
	if root.Type != "config" {
		return nil, config.Errorf(root.Pos, "top-level node is <%s>, expected <config>", root.Type)
	}
	sc := &Scenario{File: file, Space: Space{1, 1}, Root: root}
	if pp := root.Sub("parent-provides"); pp != nil {
		for _, s := range pp.Subs("service") {
			sc.ParentProvides = append(sc.ParentProvides, s.Name())
		}
	}
	if dr := root.Sub("default-route"); dr != nil {
		r, err := parseRoute(dr)
		e.add(err)
		sc.DefaultRoute = r
	}
	if d := root.Sub("default"); d != nil {
		var err error
		sc.DefaultRAM, err = d.Number("ram", 0)
		e.add(err)
	}
	if as := root.Sub("affinity-space"); as != nil {
		w, err := as.Number("width", 1)
		e.add(err)
		h, err := as.Number("height", 1)
		e.add(err)
		if w == 0 || h == 0 || w > 1024 || h > 1024 {
			e.add(config.Errorf(as.Pos, "<affinity-space> %dx%d: width and height must be 1 to 1024", w, h))
		} else {
			sc.Space = Space{int(w), int(h)}
		}
	}
	if hb := root.Sub("heartbeat"); hb != nil {
		var err error
		sc.HeartbeatMS, err = hb.Number("rate_ms", 1000)
		e.add(err)
		if sc.HeartbeatMS == 0 {
			e.add(config.Errorf(hb.Pos, "<heartbeat rate_ms> must be above 0"))
		}
	}
	sc.Report = root.Sub("report")
	for _, n := range root.Subs("start") {
		s, err := parseStart(n, sc)
		e.add(err)
		if s == nil {
			continue
		}
		if prev := sc.Start(s.Name); prev != nil {
			e.add(config.Errorf(n.Pos, "<start name=%q> is a duplicate of the one at %s", s.Name, prev.Node.Pos))
			continue
		}
		sc.Starts = append(sc.Starts, s)
	}
	if err := e.err(); err != nil {
		return nil, err
	}
	return sc, nil
}

func parseStart(n *config.Node, sc *Scenario) (*Start, error) {
	var e errs
	s := &Start{Name: n.Name(), Node: n, Version: n.String("version", "")}
	if s.Name == "" {
		return nil, config.Errorf(n.Pos, "<start> needs a name")
	}
	if strings.ContainsAny(s.Name, "/ \t") || strings.Contains(s.Name, "->") {
		return nil, config.Errorf(n.Pos, "<start name=%q>: a name may not contain '/', blanks or '->'", s.Name)
	}
	s.Binary = s.Name
	if b := n.Sub("binary"); b != nil {
		s.Binary = b.Name()
		if s.Binary == "" || strings.Contains(s.Binary, "/") {
			e.add(config.Errorf(b.Pos, "<binary name=%q> of %q: a file name in the binary folder, without '/'", s.Binary, s.Name))
		}
	}
	var err error
	s.RAM, err = n.Number("ram", sc.DefaultRAM)
	e.add(err)
	if a := n.Sub("affinity"); a != nil {
		s.Affinity, err = parseLocation(a)
		e.add(err)
	}
	if p := n.Sub("provides"); p != nil {
		for _, svc := range p.Subs("service") {
			if svc.Name() == "" {
				e.add(config.Errorf(svc.Pos, "<service> of %q needs a name", s.Name))
				continue
			}
			s.Provides = append(s.Provides, svc.Name())
		}
	}
	if r := n.Sub("route"); r != nil {
		s.Route, err = parseRoute(r)
		e.add(err)
	}
	s.Config = n.Sub("config")
	s.Heartbeat = n.Sub("heartbeat") != nil
	return s, e.err()
}
