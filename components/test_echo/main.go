// Command test_echo is a test component: it provides a Nic service (or the one its config
// names) and sends every frame of every session back to its client.
package main

import (
	"github.com/nicstack/nicstack/components"
	"github.com/nicstack/nicstack/components/internal/testcomp"
	"github.com/nicstack/nicstack/runtime/component"
)

func main() {
	component.Main(components.Lookup("test_echo"), func(c *component.Component) (component.Handler, error) {
		return testcomp.NewEcho(c), nil
	})
}
