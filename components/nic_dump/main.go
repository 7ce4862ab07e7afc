// Command nic_dump is Genode's bump in the wire for the Nic service: it serves one client
// (the downlink), requests a Nic session upward (the uplink) and passes every frame both ways
// unchanged, logging each in Genode's format and, with pcap="FILE", writing it to a capture
// file. The log format is package nicdump; handler.go is the glue to the supervisor and
// wire.go the loop that moves the frames.
package main

import (
	"os"

	"github.com/nicstack/nicstack/components"
	"github.com/nicstack/nicstack/runtime/component"
)

func main() {
	component.Main(components.Lookup("nic_dump"), func(c *component.Component) (component.Handler, error) {
		return NewHandler(c, os.Stderr), nil
	})
}
