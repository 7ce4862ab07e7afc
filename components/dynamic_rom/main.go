// Command dynamic_rom is Genode's ROM server whose modules change over time by a timeline in
// its config, to test components that follow config changes: a child whose route sends its
// "config" ROM here gets each version as its config. The timeline is package dynamicrom;
// handler.go serves the sessions.
package main

import (
	"github.com/nicstack/nicstack/components"
	"github.com/nicstack/nicstack/runtime/component"
)

func main() {
	component.Main(components.Lookup("dynamic_rom"), func(c *component.Component) (component.Handler, error) {
		return NewHandler(c), nil
	})
}
