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
	Aliases        []*Alias
	Root           *config.Node // the init config (of a runtime file: its <config>)
	// Warnings are what Genode's init warns of and runs anyway (a RAM quota given twice);
	// `nicstack check` counts them as problems.
	Warnings []error
}

// Start is one <start> node.
type Start struct {
	Name    string
	Binary  string
	Version string
	// RAM is the bytes of session buffers the component may pay for (ram, or the old
	// <resource name="RAM" quantum>, or <default ram>); 0: no limit.
	RAM      uint64
	Affinity *Location
	Provides []string
	Route    *Route // nil: the scenario's <default-route>
	Config   *config.Node
	// parsed is Config as its component's Spec parsed it, in the supervisor's one check of
	// each scenario (checkConfigs): what it reads of the config (files, sockets). Nil for a
	// program, a config the component refuses, or before the check.
	parsed any
	// Heartbeat: init counts the heartbeats the component skips (<heartbeat/>) and restarts
	// it once it skipped more than RestartAfterSkipped (0: never), as Genode's init does.
	Heartbeat           bool
	RestartAfterSkipped uint64
	// Propagate (<exit propagate="yes"/>): the component's exit ends the run with its exit
	// value.
	Propagate bool
	// Restart (restart="yes", our extension; default from <default restart>): a component that
	// exited or could not be launched starts again after the back-off. Genode's init leaves
	// it exited.
	Restart bool
	// Privileged (privileged="yes", our extension, for a program): the program runs as the
	// supervisor's user, not confined as every other is (program.go).
	Privileged bool
	Node       *config.Node
}

// Alias is an <alias name child/>: sessions routed to child Name go to child Child.
type Alias struct {
	Name, Child string
	Pos         config.Pos
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

// Alias returns the alias named name, or nil.
func (sc *Scenario) Alias(name string) *Alias {
	for _, a := range sc.Aliases {
		if a.Name == name {
			return a
		}
	}
	return nil
}

// Child is the start a route's <child name/> means: an alias's child, or the start of that
// name (one level, as Genode's init resolves aliases); nil when there is none.
func (sc *Scenario) Child(name string) *Start {
	if a := sc.Alias(name); a != nil {
		name = a.Child
	}
	return sc.Start(name)
}

// Schema is what init's config may hold; a component's own <config> is not checked here.
// Ignored lists what of it nicstack accepts without effect.
var Schema = func() *config.Schema {
	service := &config.Schema{Type: "service", Attrs: []string{"name"}}
	targetAttrs := []string{"label", "tx_queue_bytes", "rx_queue_bytes"}
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
	return &config.Schema{Type: "config", Attrs: []string{"verbose", "prio_levels", "ld_verbose"}, Nodes: []*config.Schema{
		{Type: "parent-provides", Nodes: []*config.Schema{service}},
		&defaultRoute,
		{Type: "default", Attrs: []string{"caps", "ram", "restart"}},
		{Type: "affinity-space", Attrs: []string{"width", "height"}},
		{Type: "report", Attrs: []string{"ids", "requested", "provided", "session_args", "child_ram", "child_caps", "init_ram", "init_caps", "delay_ms", "buffer"}},
		{Type: "heartbeat", Attrs: []string{"rate_ms"}},
		{Type: "resource", Attrs: []string{"name", "preserve"}},
		{Type: "alias", Attrs: []string{"name", "child"}},
		{Type: "start", Attrs: []string{"name", "caps", "ram", "version", "priority", "ld", "managing_system", "restart", "privileged"}, Nodes: []*config.Schema{
			{Type: "binary", Attrs: []string{"name"}},
			{Type: "affinity", Attrs: []string{"xpos", "ypos", "width", "height"}},
			{Type: "resource", Attrs: []string{"name", "quantum"}},
			{Type: "provides", Nodes: []*config.Schema{service}},
			route,
			{Type: "config", Any: true},
			{Type: "heartbeat", Attrs: []string{"restart_after_skipped"}},
			{Type: "exit", Attrs: []string{"propagate"}},
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

// InitConfig returns the init config a file's top node holds: the node itself when it is a
// <config>, or the <config> of a Genode package's <runtime> whose binary is init (as Genode's
// depot tools start one).
func InitConfig(root *config.Node) (*config.Node, error) {
	switch root.Type {
	case "config":
		return root, nil
	case "runtime":
		if b := root.String("binary", ""); b != "init" {
			return nil, config.Errorf(root.Pos, "<runtime binary=%q>: nicstack runs the runtime files of packages whose binary is init", b)
		}
		if c := root.Sub("config"); c != nil {
			return c, nil
		}
		if a, ok := root.Attr("config"); ok {
			return nil, config.Errorf(a.Pos, "<runtime config=%q> names a ROM of the package; nicstack runs runtime files with the init config inline (<config>)", a.Value)
		}
		return nil, config.Errorf(root.Pos, "<runtime> has no <config>")
	}
	return nil, config.Errorf(root.Pos, "top-level node is <%s>, expected <config> (or a package's <runtime>)", root.Type)
}

// FromNode builds a scenario from a parsed file: an init <config>, or a package's <runtime>
// (InitConfig).
func FromNode(file string, root *config.Node) (*Scenario, error) {
	var e errs
	root, err := InitConfig(root)
	if err != nil {
		return nil, err
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
	var defaults startDefaults
	if d := root.Sub("default"); d != nil {
		var err error
		sc.DefaultRAM, err = d.Number("ram", 0)
		e.add(err)
		defaults.ram = d.Has("ram")
		_, err = d.Number("caps", 0)
		e.add(err)
		defaults.restart, err = d.Bool("restart", false)
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
		s, err := parseStart(n, sc, defaults)
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
	// Aliases and starts share one name space (Genode's init keeps both in one model).
	for _, n := range root.Subs("alias") {
		a := &Alias{Name: n.Name(), Child: n.String("child", ""), Pos: n.Pos}
		switch {
		case a.Name == "":
			e.add(config.Errorf(n.Pos, "<alias> needs a name"))
		case !n.Has("child"):
			e.add(config.Errorf(n.Pos, "<alias name=%q> needs a child", a.Name))
		case sc.Start(a.Name) != nil:
			e.add(config.Errorf(n.Pos, "<alias name=%q> clashes with the <start> of that name at %s", a.Name, sc.Start(a.Name).Node.Pos))
		case sc.Alias(a.Name) != nil:
			e.add(config.Errorf(n.Pos, "<alias name=%q> is a duplicate of the one at %s", a.Name, sc.Alias(a.Name).Pos))
		default:
			sc.Aliases = append(sc.Aliases, a)
		}
	}
	if err := e.err(); err != nil {
		return nil, err
	}
	return sc, nil
}

// startDefaults is what <default> gives every <start> besides ram.
type startDefaults struct {
	ram     bool // <default ram> is there
	restart bool
}

func parseStart(n *config.Node, sc *Scenario, defaults startDefaults) (*Start, error) {
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
	for _, r := range n.Subs("resource") {
		if r.Name() != "RAM" {
			continue // CPU and CAP quotas are accepted and ignored (Ignored)
		}
		if !r.Has("quantum") {
			e.add(config.Errorf(r.Pos, "<resource name=\"RAM\"> of %q needs a quantum", s.Name))
			continue
		}
		if n.Has("ram") || defaults.ram {
			sc.Warnings = append(sc.Warnings, config.Errorf(r.Pos, "%s: ambiguous RAM quota: ram (of <start> or <default>) and <resource name=\"RAM\">; the <resource> wins", s.Name))
		}
		s.RAM, err = r.Number("quantum", 0)
		e.add(err)
	}
	_, err = n.Number("caps", 0)
	e.add(err)
	s.Restart, err = n.Bool("restart", defaults.restart)
	e.add(err)
	s.Privileged, err = n.Bool("privileged", false)
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
	if hb := n.Sub("heartbeat"); hb != nil {
		s.Heartbeat = true
		s.RestartAfterSkipped, err = hb.Number("restart_after_skipped", 0)
		e.add(err)
	}
	if x := n.Sub("exit"); x != nil {
		s.Propagate, err = x.Bool("propagate", false)
		e.add(err)
	}
	return s, e.err()
}
