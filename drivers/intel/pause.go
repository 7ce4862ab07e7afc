package intel

import (
	"time"

	"github.com/nicstack/nicstack/drivers/intel/regs"
)

// 802.3x flow control, the receiving of it: a link partner whose receive buffer fills sends a
// PAUSE frame (MAC control, opcode 1) naming a time in quanta of 512 bit times; the MAC
// finishes the frame on the wire and fetches no transmit descriptor until the time runs out
// or a PAUSE of 0 quanta (XON) comes. Everything else goes on: receiving, interrupts, the
// PHY. The model's own sending of PAUSE frames (FCRTH, FCRTL, FCTTV) is not modelled: its
// receive ring drops what finds no descriptor, counted in rx_no_descriptor.

// MaxPauseQuanta is the longest pause a PAUSE frame can ask: 33.5 ms at 1 Gbit/s.
const MaxPauseQuanta = 0xffff

// resolveFlowControl is the hardware's resolution of auto-negotiation's pause bits at link
// up (8254x manual, 8.7.2: it may change CTRL.RFCE and CTRL.TFCE to what both ends offer):
// our PHY advertises symmetric PAUSE at its reset default, so a partner that does too gives
// full flow control. A driver may clear RFCE afterwards; the model then ignores PAUSE frames,
// as the MAC filters them like any other frame.
func (d *Device) resolveFlowControl() {
	if d.flowControl {
		d.store(regs.CTRL, d.load(regs.CTRL)|regs.CtrlRFCE|regs.CtrlTFCE)
	}
}

// pauseQuantum is 512 bit times at the link speed.
func (d *Device) pauseQuantum() time.Duration {
	return time.Duration(512 * 1000 / max(d.speed, 10))
}

// ReceivePause is a valid PAUSE frame from the link partner arriving, asking quanta pause
// quanta: with the link up and CTRL.RFCE set, a non-zero time stops the transmitter for that
// long from now (a pause in progress takes the new time, as the MAC reloads its timer), and 0
// (XON) ends a pause at once. It returns how long the transmitter is now paused (0 after an
// XON) and whether the frame was honoured. Any goroutine may call it; it never blocks on the
// wire.
func (d *Device) ReceivePause(quanta uint16) (pause time.Duration, honoured bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fault == FaultGone || !d.linkUp || d.load(regs.CTRL)&regs.CtrlRFCE == 0 {
		return 0, false
	}
	now := d.clock.Now()
	if quanta == 0 {
		d.cnt.XONReceived.Add(1)
		d.endPause(now)
		d.wake()
		return 0, true
	}
	d.cnt.XOFFReceived.Add(1)
	pause = time.Duration(quanta) * d.pauseQuantum()
	if !d.paused {
		d.paused, d.pausedSince = true, now
		d.updateStatus()
	}
	d.pauseUntil = now + pause
	d.wake() // Run's next deadline is the pause's end
	return pause, true
}

// endPause lets the transmitter go on from at, when a pause ended (its time ran out, an XON,
// a reset, the link went down); mu held.
func (d *Device) endPause(at time.Duration) {
	if !d.paused {
		return
	}
	d.paused = false
	d.cnt.TXPausedTime.Add(uint64(max(at-d.pausedSince, 0) / time.Microsecond))
	d.wireFree = max(d.wireFree, at) // the frames held back start now, not in a burst
	d.updateStatus()
}

// Paused reports whether the link partner holds the transmitter paused now.
func (d *Device) Paused() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.paused && d.clock.Now() < d.pauseUntil
}
