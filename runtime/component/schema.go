package component

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/nicstack/nicstack/runtime/config"
)

// Spec is what nicstack knows of a component without starting it: its binary, the schema of
// its <config> and the parse that makes the component's typed config of it. `nicstack check`,
// the supervisor, the benches and the component process itself (Main refuses a config its
// Spec refuses) all read the same Spec from the one table (package components), and each
// config is parsed once, by Check: what the handler, Files and Sockets get is its result.
type Spec struct {
	Binary  string         // the binary's name, as a <start>'s <binary name> (or start name) gives it
	Summary string         // one line for help and `nicstack check --list`
	Schema  *config.Schema // nil: any config
	// Parse reads n into the component's typed config (what Configure, Files and Sockets
	// get), making every check of values the component makes (ranges, addresses, attributes
	// that need each other); start is the <start>'s name, which some components derive
	// defaults from. err is what the component refuses; warnings are what it accepts but works
	// around (a nic_router domain with an invalid rule is disabled, as in Genode). Nil: the
	// schema is all there is, and the typed config is the *config.Node itself.
	Parse ParseFunc
	// LogsWarnings says the component logs its config's warnings itself when it is
	// configured, the schema's among them, as Genode's router does, so the supervisor does
	// not.
	LogsWarnings bool
	// Files lists the files cfg, the typed config, names for the component to write
	// (reports): the only paths the supervisor writes for it (Component.WriteFile). Nil: none.
	Files func(cfg any) []string
	// State is the size of the state region the supervisor keeps for the component: shared
	// memory it creates before the first launch, hands every process of the component
	// (Component.StateRegion) and keeps across restarts after a crash, so that a restarted
	// process can go on where the killed one was (nic_router's link states). A deliberate
	// restart (a new version, a changed <start>) or the end of the run discards it. 0: none.
	State int
	// Sockets lists the Unix sockets cfg, the typed config, names for the component to serve
	// (a VM's stream socket): the supervisor binds them, a relative path in the run folder,
	// before it starts any child and hands each life of the component the listening
	// descriptors (Listener). Nil: none.
	Sockets func(cfg any) []string
	// Sessions lists the sessions cfg, the typed config, has the component request, as it
	// asks for them (init puts the client's name before the label): what `nicstack graph`
	// draws. Some it holds only at times (ipxe_nic's Uplink while the link is up, nic_dump's
	// upstream Nic while a client is there). Nil: none.
	Sessions func(cfg any) []SessionRequest
	// Serves says whether the component, configured with cfg, would serve a session of
	// service whose label (as the server sees it) is label, beside the sessions with the
	// labels others that the scenario routes to it already: nil if so, else why not (no
	// policy selects the label, the address pool of its domain is spent). The supervisor asks
	// it of the server before it attaches a client at run time (`nicstack attach`). Nil: any.
	Serves func(cfg any, service, label string, others []string) error
}

// SessionRequest is a session a component requests: its service and the label it gives.
type SessionRequest struct {
	Service, Label string
}

// ParseFunc is a Spec's Parse.
type ParseFunc func(n *config.Node, start string) (cfg any, warnings []error, err error)

// Parser makes a Spec's Parse of a component's typed parse, which warns of nothing: the
// config is refused exactly when parse refuses it.
func Parser[C any](parse func(n *config.Node, start string) (C, error)) ParseFunc {
	return func(n *config.Node, start string) (any, []error, error) {
		cfg, err := parse(n, start)
		return cfg, nil, err
	}
}

// ConfigOf is cfg, what a Handler's Configure gets, as the type its Spec's Parse makes; an
// error when it is another (a handler driven with another component's Spec).
func ConfigOf[C any](cfg any) (C, error) {
	c, ok := cfg.(C)
	if !ok {
		return c, fmt.Errorf("config of type %T, want %T", cfg, c)
	}
	return c, nil
}

// Check checks n as the <config> of start and parses it, once for whoever needs it: cfg is
// the typed config (nil when err is set); warnings are what the schema does not know and what
// Parse warns of (errors for `nicstack check`, log lines at run time, as in Genode); err is
// what the component refuses. Parse's warnings count only when the schema holds (the
// router's repeat the schema's). An error without a position gets the <config>'s.
func (s Spec) Check(n *config.Node, start string) (cfg any, warnings []error, err error) {
	if s.Schema != nil {
		for _, e := range config.Check(n, s.Schema) {
			warnings = append(warnings, e)
		}
	}
	if s.Parse == nil {
		return n, warnings, nil
	}
	cfg, parsed, err := s.Parse(n, start)
	if err != nil {
		return nil, warnings, positioned(n, err)
	}
	if len(warnings) == 0 {
		for _, w := range parsed {
			warnings = append(warnings, positioned(n, w))
		}
	}
	return cfg, warnings, nil
}

func positioned(n *config.Node, err error) error {
	var ce *config.Error
	if errors.As(err, &ce) {
		return err
	}
	return config.Errorf(n.Pos, "%v", err)
}

// Table is the components nicstack knows, each once, by binary.
type Table []Spec

// Lookup returns the spec of binary, or an error that names the known ones.
func (t Table) Lookup(binary string) (Spec, error) {
	for _, s := range t {
		if s.Binary == binary {
			return s, nil
		}
	}
	return Spec{}, fmt.Errorf("%q is not a nicstack component (known: %s)", binary, strings.Join(t.Names(), ", "))
}

// Names lists the binaries in the table, sorted.
func (t Table) Names() []string {
	names := make([]string, len(t))
	for i, s := range t {
		names[i] = s.Binary
	}
	sort.Strings(names)
	return names
}
