package ipxe

import (
	"log/slog"
	"time"

	"github.com/nicstack/nicstack/drivers/intel/regs"
)

// A NIC fails in three ways a driver must live through (the device is the driver's peer:
// untrusted). Pulled from its slot or lost behind a dead bridge, it answers every register
// read with all ones, the value a PCIe read of nothing completes with: the driver sees the
// link go down and touches nothing more until the device answers again. Its DMA refused by
// the IOMMU (or the device hung), its transmit queue stops: the watchdog sees frames in flight
// that did not move for a whole tick, as e1000e's "Detected Hardware Unit Hang", and resets
// the device. Its write-back garbage (lengths past the buffer, no end of packet) is dropped
// and counted. Each is a log line and a counter; the sessions stay.

// allOnes is what a register read returns when no device answers.
const allOnes = ^uint32(0)

// faults is the driver's fault state.
type faults struct {
	log  *slog.Logger
	gone bool // the device's registers read all ones
	// the watchdog's view of the TX ring at its last tick
	txReap uint32
	txBusy bool
	// bad receive descriptors already logged
	badRXLogged uint64
}

func (f *faults) warn(msg string, args ...any) {
	if f.log != nil {
		f.log.Warn(msg, args...)
	}
}

// vanished handles a device that stopped answering: the link is down, the TX frames in
// flight are lost, and the registers are left alone.
func (d *Driver) vanished() {
	if d.faults.gone {
		return
	}
	d.faults.gone = true
	d.cnt.DeviceGone.Add(1)
	d.faults.warn("ipxe: the device does not answer (registers read all ones): link down until it is back")
	d.lostInFlight()
	d.txStalled = false
	d.setLink(false, 0)
}

// lostInFlight counts the TX frames the device holds as dropped: a reset or a vanished device
// never sends them.
func (d *Driver) lostInFlight() {
	d.cnt.TXDropped.Add(uint64((d.txTail + RingSize - d.txReap) % RingSize))
	d.txReap = d.txTail
}

// WatchdogInterval is how often the component calls Watchdog: e1000e's watchdog runs every
// 2 s, and a transmit queue that stands still for a whole interval with frames in it is hung.
const WatchdogInterval = 2 * time.Second

// Watchdog checks the device from time to time, as e1000e's watchdog task does, and reports
// what the interrupt handler cannot see: a device that vanished raises no interrupt, one
// whose DMA fails raises none for the frames it does not send. A device that answers again,
// and a hung transmit queue, get a reset; the rings start over and the sessions stay.
func (d *Driver) Watchdog() {
	status := d.regs.Read32(regs.STATUS)
	switch {
	case status == allOnes:
		d.vanished()
		return
	case d.faults.gone:
		d.faults.gone = false
		d.faults.warn("ipxe: the device answers again: resetting it")
		d.restart()
		return
	}
	if n := d.cnt.RXBadDescriptors.Load(); n != d.faults.badRXLogged {
		d.faults.warn("ipxe: the device wrote back receive descriptors the driver did not ask for (lengths past the buffer, no end of packet); dropped",
			"count", n-d.faults.badRXLogged)
		d.faults.badRXLogged = n
	}
	d.reapTX()
	busy := d.txReap != d.txTail
	// A queue the link partner's PAUSE holds still is no hang (e1000e checks TXOFF too).
	paused := status&regs.StatusTXOFF != 0
	hung := busy && d.faults.txBusy && d.txReap == d.faults.txReap && d.link && !paused
	d.faults.txReap, d.faults.txBusy = d.txReap, busy
	if hung {
		d.cnt.TXHangs.Add(1)
		d.faults.warn("ipxe: the transmit queue stood still with frames in it (a DMA fault or a hung device): resetting the device",
			"in_flight", (d.txTail+RingSize-d.txReap)%RingSize)
		d.restart()
	}
}

// restart resets the device and starts over, keeping the configuration and the Uplink.
func (d *Driver) restart() {
	d.lostInFlight()
	d.faults.txBusy = false
	if err := d.start(); err != nil {
		d.faults.warn("ipxe: resetting the device failed", "err", err)
	}
	d.cnt.DeviceResets.Add(1) // counted once the device came out of reset
	if d.regs.Read32(regs.STATUS) == allOnes {
		d.vanished()
	}
}
