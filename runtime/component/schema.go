package component

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/nicstack/nicstack/runtime/config"
)

// Spec is what nicstack knows of a component without starting it: its binary, the schema of
// its <config> and the full validation its parse makes. `nicstack check`, the supervisor's
// start-up warnings, the benches and the component process itself (Main refuses a config
// its Spec refuses) all read the same Spec from the one table (package components).
type Spec struct {
	Binary  string         // the binary's name, as a <start>'s <binary name> (or start name) gives it
	Summary string         // one line for help and `nicstack check --list`
	Schema  *config.Schema // nil: any config
	// Validate makes every check of values the component makes when it is configured
	// (ranges, addresses, attributes that need each other); start is the <start>'s name,
	// which some components derive defaults from. Nil: the schema is all there is.
	Validate func(n *config.Node, start string) error
	// Warn lists what the component accepts but works around when configured (a nic_router
	// domain with an invalid rule is disabled, as in Genode): problems for `nicstack check`.
	// A component with Warn logs its config's problems itself when it is configured, as
	// Genode's router does, the schema's among them, so the supervisor does not. Nil: none.
	Warn func(n *config.Node, start string) []error
	// Files lists the files n names for the component to write (reports): the only paths
	// the supervisor writes for it (Component.WriteFile). Nil: none.
	Files func(n *config.Node, start string) []string
	// State is the size of the state region the supervisor keeps for the component: shared
	// memory it creates before the first launch, hands every process of the component
	// (Component.StateRegion) and keeps across restarts after a crash, so that a restarted
	// process can go on where the killed one was (nic_router's link states). A deliberate
	// restart (a new version, a changed <start>) or the end of the run discards it. 0: none.
	State int
	// Sockets lists the Unix sockets n names for the component to serve (a VM's stream
	// socket): the supervisor binds them, a relative path in the run folder, before it starts
	// any child and hands each life of the component the listening descriptors (Listener).
	// Nil: none.
	Sockets func(n *config.Node, start string) []string
	// Sessions lists the sessions n has the component request, as it asks for them (init
	// puts the client's name before the label): what `nicstack graph` draws. Some it holds
	// only at times (ipxe_nic's Uplink while the link is up, nic_dump's upstream Nic while
	// a client is there). Nil: none.
	Sessions func(n *config.Node, start string) []SessionRequest
}

// SessionRequest is a session a component requests: its service and the label it gives.
type SessionRequest struct {
	Service, Label string
}

// Check checks n as the <config> of start: warnings are what the schema does not know and what
// Warn reports (errors for `nicstack check`, log lines at run time, as in Genode); err is what
// the component refuses. Warn and Validate run only when the schema holds. An error without a
// position gets the <config>'s.
func (s Spec) Check(n *config.Node, start string) (warnings []error, err error) {
	if s.Schema != nil {
		for _, e := range config.Check(n, s.Schema) {
			warnings = append(warnings, e)
		}
	}
	if len(warnings) > 0 {
		return warnings, nil
	}
	if s.Warn != nil {
		for _, w := range s.Warn(n, start) {
			warnings = append(warnings, positioned(n, w))
		}
	}
	if s.Validate != nil {
		if err = s.Validate(n, start); err != nil {
			err = positioned(n, err)
		}
	}
	return warnings, err
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
