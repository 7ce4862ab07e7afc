package intelhw

import (
	"time"

	"github.com/nicstack/nicstack/drivers/intel"
	"github.com/nicstack/nicstack/runtime/packetstream"
)

// 802.3x flow control on a session wire, the far end's NIC's side of it. That NIC's receive
// FIFO is the wire's RX stream into the far end: the frames the wire put there and the far end
// has not acknowledged. When the wire leaves the stream above the high watermark it sends the
// device a PAUSE frame of the longest time; once the far end's acknowledgements bring the
// stream below the low watermark it sends an XON. Paused, the device fetches no transmit
// descriptor, so its TX ring fills, the driver's byte limit and ring stop taking frames, and
// the backlog waits in the router's scheduler, which decides fairly who backs off, instead of
// a drop-tail at the far end. A pause the far end never lifts runs out after its 33.5 ms (the
// wire does not refresh it): a far end that hangs costs drops again, never a stuck wire.
//
// The watermarks are fractions of the stream's descriptors and bytes (its byte bound, or its
// buffer), as a NIC's FCRTH and FCRTL are of its receive FIFO. High: the room left above it
// takes what the device handed the wire in the batch that crossed it (the pause acts from the
// device's next poll); a quarter of the stream, 256 frames of 1024 or 3 ms at 1 Gbit/s.
// Low: a quarter, so that the stream still holds 3 ms of frames for the far end when the
// device starts again, which covers the XON's way (the far end's signal, this goroutine, the
// device's wakeup), and has room for three quarters of it: a device that runs late on a
// loaded machine sends what the wire carried meanwhile in one batch, and with the XON at half
// such batches overflowed the stream (wire_tx_dropped 575-621 a 32-guest run of bench scale,
// against 37 at a quarter; docs/performance.md).
const (
	flowHighNum, flowHighDen = 3, 4
	flowLowNum, flowLowDen   = 1, 4
)

// flow is a session wire's flow control state; the fields but waiter and kick are guarded by
// the wire's txMu.
type flow struct {
	waiter *packetstream.Waiter // on the RX stream's AckSignal
	kick   chan struct{}        // Transmit paused the device (or DetachWire ends the loop)
	paused bool                 // a PAUSE was sent and neither ran out nor was lifted
	until  time.Time            // when it runs out

	highFrames, lowFrames, highBytes, lowBytes int
}

// newFlow makes the flow control of the stream src, the wire's RX stream.
func newFlow(src *packetstream.Source) (*flow, error) {
	w, err := packetstream.NewSignalWaiter(src.AckSignal())
	if err != nil {
		return nil, err
	}
	frames, bytes := src.Config().QueueSize, src.QueueBytes()
	if bytes == 0 {
		bytes = src.Config().BulkSize
	}
	return &flow{
		waiter: w, kick: make(chan struct{}, 1),
		highFrames: frames * flowHighNum / flowHighDen, lowFrames: frames * flowLowNum / flowLowDen,
		highBytes: bytes * flowHighNum / flowHighDen, lowBytes: bytes * flowLowNum / flowLowDen,
	}, nil
}

func (f *flow) above(src *packetstream.Source) bool {
	return src.InFlight() >= f.highFrames || src.InFlightBytes() >= f.highBytes
}

func (f *flow) below(src *packetstream.Source) bool {
	return src.InFlight() <= f.lowFrames && src.InFlightBytes() <= f.lowBytes
}

func (f *flow) wake() {
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// pauseIfFull sends the device a PAUSE when the stream src is above the high watermark and no
// pause of ours holds it; wr.txMu held, called by Transmit after it wrote the batch.
func (n *NIC) pauseIfFull(wr *wire, src *packetstream.Source) {
	f := wr.flow
	if !f.above(src) || f.paused && time.Now().Before(f.until) {
		return
	}
	n.mu.RLock()
	var pause time.Duration
	honoured := false
	if n.dev != nil {
		pause, honoured = n.dev.ReceivePause(intel.MaxPauseQuanta)
	}
	n.mu.RUnlock()
	if !honoured { // the driver turned RFCE off, or the link is down: drops decide, as without
		return
	}
	f.paused, f.until = true, time.Now().Add(pause)
	f.wake()
}

// flowLoop sends the XON: while a pause of ours holds the device it waits for the far end's
// acknowledgements, collects them, and lifts the pause once the stream is below the low
// watermark, or forgets it once it ran out.
func (n *NIC) flowLoop(wr *wire) {
	f := wr.flow
	for !wr.stop.Load() {
		wr.txMu.Lock()
		if wr.srv == nil {
			wr.txMu.Unlock()
			return
		}
		paused, until := f.paused, f.until
		if paused {
			src := wr.srv.RX
			src.ReleaseAcked()
			src.Wakeup() // publishes what we collected: the AckSignal sleeps until more come
			switch {
			case f.below(src):
				n.mu.RLock()
				if n.dev != nil {
					n.dev.ReceivePause(0)
				}
				n.mu.RUnlock()
				f.paused, paused = false, false
			case !time.Now().Before(until):
				f.paused, paused = false, false
			}
		}
		wr.txMu.Unlock()
		if paused {
			f.waiter.WaitUntil(until)
			continue
		}
		<-f.kick
	}
}
