package intel

import (
	"time"

	"github.com/nicstack/nicstack/drivers/intel/regs"
)

// phyStart begins auto-negotiation when a cable is in and the PHY is out of reset.
func (d *Device) phyStart(now time.Duration) {
	if !d.carrier || d.phyInReset {
		return
	}
	d.negotiating, d.anegAt = true, now+d.autoneg
	d.wake()
}

// negotiatedSpeed is the best speed both ends offer; a degraded PHY advertises 10 Mbit/s only.
func (d *Device) negotiatedSpeed() int {
	if d.degraded {
		return 10
	}
	for _, s := range []int{1000, 100} {
		if d.partnerSpeed >= s {
			return s
		}
	}
	return 10
}

// setLink changes the link state; a change is an LSC interrupt cause.
func (d *Device) setLink(now time.Duration, up bool, speed int) {
	if up == d.linkUp && (!up || speed == d.speed) {
		return
	}
	if !up {
		d.endPause(now)
	}
	d.linkUp, d.speed = up, speed
	d.updateStatus()
	d.cause(now, regs.IntLSC)
}

// SetCarrier plugs the cable in (the link partner is there) or pulls it.
func (d *Device) SetCarrier(up bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.clock.Now()
	d.carrier = up
	if !up {
		d.negotiating = false
		d.setLink(now, false, 0)
		return
	}
	if !d.linkUp && !d.negotiating {
		d.phyStart(now)
	}
}

// Link reports the PHY's link state and speed in Mbit/s.
func (d *Device) Link() (up bool, speed int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.linkUp, d.speed
}

// wireTime is how long a frame of n bytes occupies the wire at the link speed: preamble and
// start delimiter (8), FCS (4) and the inter-frame gap (12) included, short frames padded.
func (d *Device) wireTime(n int) time.Duration {
	bits := int64(max(n, 60)+8+4+12) * 8
	return time.Duration(bits * 1000 / int64(max(d.speed, 10)))
}
