package ipxe_test

import (
	"fmt"
	"time"

	"github.com/nicstack/nicstack/drivers/intel"
	"github.com/nicstack/nicstack/drivers/intel/regs"
	"github.com/nicstack/nicstack/drivers/ipxe"
)

// Example wires the driver to an emulated NIC in one process, as ipxe_nic and intel_nic_hw do
// across two: the device runs on its own goroutine, the driver's event loop services the
// interrupt line and opens the Uplink session exactly while the link is up.
func Example() {
	dma := make([]byte, ipxe.DMASize)
	irq := intel.NewChanIRQ()
	nic, _ := intel.ParseConfig(nil, "") // defaults: 82574L, 02:00:00:00:00:01
	hw := nic.Device
	hw.IRQ, hw.Autoneg = irq, time.Millisecond
	dev, _ := intel.New(make([]byte, regs.RegisterPageSize), dma, hw)
	stop := make(chan struct{})
	defer close(stop)
	go dev.Run(stop)

	cfg := ipxe.DefaultConfig() // or ipxe.ParseConfig(<config> node, start name)
	var drv *ipxe.Driver
	onLink := func(up bool, speed int) {
		// open the Uplink session with drv.MAC() on up, close it on down
		fmt.Println("link up:", up, speed, "Mbit/s, MAC", drv.MAC())
	}
	drv, _ = ipxe.Open(ipxe.Device{Regs: dev, DMA: dma, DeviceID: hw.Model.DeviceID}, cfg, onLink)
	if up, speed := drv.Link(); up { // Open reads the link without calling back
		onLink(up, speed)
	}
	for up, _ := drv.Link(); !up; up, _ = drv.Link() {
		<-irq
		drv.HandleInterrupt() // in the component: also drv.Transmit on the router's signal
	}
	// Output: link up: true 1000 Mbit/s, MAC 02:00:00:00:00:01
}
