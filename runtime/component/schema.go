package component

import (
	"fmt"
	"sort"
	"sync"

	"github.com/nicstack/nicstack/runtime/config"
)

// The schema registry: component libraries register the schema of their <config> so that
// `nicstack check --component NAME FILE` can check a bare config without starting anything.
var (
	schemaMu sync.Mutex
	schemas  = map[string]*config.Schema{}
)

// RegisterSchema records the config schema of the component called name (its binary name).
func RegisterSchema(name string, s *config.Schema) {
	schemaMu.Lock()
	defer schemaMu.Unlock()
	if _, dup := schemas[name]; dup {
		panic(fmt.Sprintf("component: schema of %q registered twice", name))
	}
	schemas[name] = s
}

// LookupSchema returns the registered schema of name, or nil.
func LookupSchema(name string) *config.Schema {
	schemaMu.Lock()
	defer schemaMu.Unlock()
	return schemas[name]
}

// Schemas lists the names with a registered schema.
func Schemas() []string {
	schemaMu.Lock()
	defer schemaMu.Unlock()
	names := make([]string, 0, len(schemas))
	for n := range schemas {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
