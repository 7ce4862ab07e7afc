// Command ipxe_nic is the ipxe-style Intel NIC driver (package drivers/ipxe) as a component:
// it drives the device of a Platform session (intel_nic_hw; port.go) and holds an Uplink
// session to the router while the link is up (uplink.go). Config: <config
// rx_irq_throttle="651" tx_batch="yes" tx_irq="queue_empty" tx_bql="yes" tx_bql_limit_max="0" rx_poll_on_tx="no" phy_reset="auto"/>,
// applied live; rx_irq_throttle="adaptive" moves ITR with the traffic (counters itr_lowest_ms,
// itr_low_ms, itr_bulk_ms, itr_stream_ms, itr_changes); tx_bql="yes" (the default) limits the TX ring's
// bytes in flight by a limit learned from completions (counters tx_bql_limit_bytes,
// tx_bql_stops, tx_bql_errors), capped at tx_bql_limit_max bytes (0: none); rx_poll_on_tx="yes"
// (off by default) takes the RX ring whenever the driver runs to transmit the router's batch while
// interrupts are over 250 µs apart, not only at the interrupt (counter rx_poll_frames). A
// device that vanishes, a DMA fault and garbage
// descriptors are log lines and the counters device_gone, tx_hangs (each a reset:
// device_resets) and rx_bad_descriptors; the sessions stay.
package main

import (
	"github.com/nicstack/nicstack/components"
	"github.com/nicstack/nicstack/runtime/component"
)

func main() {
	component.Main(components.Lookup("ipxe_nic"), func(c *component.Component) (component.Handler, error) {
		return NewHandler(c), nil
	})
}
