// Command report_rom is Genode's report_rom: it serves Report sessions, whose reports (the
// nic_router's state, say) it keeps, and ROM sessions, each of which reads the report its
// <policy report> names, again at each new report. Which report a ROM reads is package
// reportrom; handler.go serves the sessions.
package main

import (
	"github.com/nicstack/nicstack/components"
	"github.com/nicstack/nicstack/runtime/component"
)

func main() {
	component.Main(components.Lookup("report_rom"), func(c *component.Component) (component.Handler, error) {
		return NewHandler(c), nil
	})
}
