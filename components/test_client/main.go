// Command test_client is a test component: it requests one session, sends numbered frames
// through it and checks the replies; its counters show what came back.
package main

import (
	"github.com/nicstack/nicstack/components"
	"github.com/nicstack/nicstack/components/internal/testcomp"
	"github.com/nicstack/nicstack/runtime/component"
)

func main() {
	component.Main(components.Lookup("test_client"), func(c *component.Component) (component.Handler, error) {
		return testcomp.NewClient(c), nil
	})
}
