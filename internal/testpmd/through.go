package testpmd

import (
	"fmt"
	"net"
	"net/netip"
)

// Through is the scenario testpmd front ends drive through nicstack: nic_router with a domain
// per front end, UDP from the generator's domain "tx" (10.0.1.0/24) routed to the sink's "rx"
// (10.0.2.0/24), and two vms, vm_tx and vm_rx, whose vhost-user back ends listen on the front
// ends' sockets. A generator sends to RouterMAC from GenIP to SinkIP.
type Through struct {
	GenSock, SinkSock string
	Queues            int  // queue pairs of each vm (0: 1)
	CPU               int  // every component's CPU in a 2x1 affinity space; -1: no placement
	Restart           bool // restart="yes": a killed vm starts again
}

// The generator's addressing: the router's MAC (its Nic clients' gateway) and the two ends.
var (
	RouterMAC = net.HardwareAddr{2, 2, 2, 2, 2, 0}
	GenIP     = netip.MustParseAddr("10.0.1.2")
	SinkIP    = netip.MustParseAddr("10.0.2.2")
)

// XML is the scenario.
func (t Through) XML() string {
	space, at := "", ""
	if t.CPU >= 0 {
		space, at = `<affinity-space width="2" height="1"/>`, fmt.Sprintf(`<affinity xpos="%d" ypos="0"/>`, t.CPU)
	}
	restart := "no"
	if t.Restart {
		restart = "yes"
	}
	vm := func(name, sock string) string {
		return fmt.Sprintf(`<start name="%s" ram="128M"> <binary name="vm"/> %s
		<config guest="vhost-user" socket="%s" queues="%d"/>
	</start>`, name, at, sock, max(t.Queues, 1))
	}
	return fmt.Sprintf(`<config>
	<parent-provides> <service name="LOG"/> </parent-provides>
	<default-route> <any-service> <parent/> <any-child/> </any-service> </default-route>
	<default caps="100" ram="64M" restart="%s"/>
	%s
	<start name="nic_router" ram="32M"> %s
		<provides> <service name="Nic"/> <service name="Uplink"/> </provides>
		<config>
			<policy label_prefix="vm_tx" domain="tx"/>
			<policy label_prefix="vm_rx" domain="rx"/>
			<domain name="tx" interface="10.0.1.1/24">
				<udp dst="10.0.2.0/24"> <permit-any domain="rx"/> </udp>
			</domain>
			<domain name="rx" interface="10.0.2.1/24"/>
		</config>
	</start>
	%s
	%s
</config>
`, restart, space, at, vm("vm_tx", t.GenSock), vm("vm_rx", t.SinkSock))
}
