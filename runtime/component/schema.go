package component

import (
	"fmt"
	"sort"
	"sync"

	"github.com/nicstack/nicstack/runtime/config"
)

// ConfigSpec is what a component library registers about its <config>, so that offline tools
// (`nicstack check`, the benches before they start anything) report what the component would
// refuse, with file:line:column, instead of a component that fails to start.
type ConfigSpec struct {
	Schema *config.Schema
	// Parse runs the checks of values the component makes when it is configured (ranges,
	// addresses, attributes that need each other); name is the <start>'s. Nil: schema only.
	Parse func(n *config.Node, name string) error
}

// The registry, by binary name.
var (
	specMu sync.Mutex
	specs  = map[string]ConfigSpec{}
)

// RegisterConfig records the config spec of the component called name (its binary name).
func RegisterConfig(name string, s ConfigSpec) {
	specMu.Lock()
	defer specMu.Unlock()
	if _, dup := specs[name]; dup {
		panic(fmt.Sprintf("component: config of %q registered twice", name))
	}
	specs[name] = s
}

// LookupConfig returns the registered spec of name.
func LookupConfig(name string) (ConfigSpec, bool) {
	specMu.Lock()
	defer specMu.Unlock()
	s, ok := specs[name]
	return s, ok
}

// ConfigNames lists the names with a registered spec.
func ConfigNames() []string {
	specMu.Lock()
	defer specMu.Unlock()
	names := make([]string, 0, len(specs))
	for n := range specs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
