// Package intelhw is the emulated NIC as a process: it runs one intel.Device on the memory of
// the Platform device session its driver opens (register page, posted-write queue, DMA memory,
// doorbell and interrupt eventfds), and connects the device's wire to a Nic session served to
// the far end, the cable's other end, or to a Linux interface (a Port: a TAP or an AF_PACKET
// socket the supervisor hands over). The link partner is there while that session or port is
// attached and the config does not pull the cable. It is intel_nic_hw's glue, here so that
// ipxe_nic's tests can run the hardware side in their own process; it is not a device model
// (package drivers/intel is).
package intelhw

import (
	"errors"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nicstack/nicstack/drivers/intel"
	"github.com/nicstack/nicstack/drivers/intel/devsession"
	"github.com/nicstack/nicstack/drivers/intel/regs"
	"github.com/nicstack/nicstack/netdev"
	"github.com/nicstack/nicstack/runtime/affinity"
	"github.com/nicstack/nicstack/runtime/packetstream"
)

// Counters are the wire's own counts, beside the device's.
type Counters struct {
	WireTXDropped *atomic.Uint64 // frames sent while the far end had no room or was not there, or that a Port refused
	WireRXInvalid *atomic.Uint64 // invalid descriptors from the far end; malformed or too long frames from a Port
	WireRXOffload *atomic.Uint64 // frames from a Port with offload metadata (super-frames, partial checksums): refused
	WireRXLost    *atomic.Uint64 // frames from a Port that fell off the wire: no driver had the device
}

// NewCounters makes the wire counters with storage from get (nil: their own).
func NewCounters(get func(string) *atomic.Uint64) *Counters {
	if get == nil {
		get = func(string) *atomic.Uint64 { return new(atomic.Uint64) }
	}
	return &Counters{WireTXDropped: get("wire_tx_dropped"), WireRXInvalid: get("wire_rx_invalid"),
		WireRXOffload: get("wire_rx_offload"), WireRXLost: get("wire_rx_lost")}
}

// NIC is the emulated NIC's process state. Its methods may be called from any goroutine.
type NIC struct {
	devCnt *intel.Counters
	cnt    *Counters

	mu       sync.RWMutex // guards dev against CloseDevice; the receive path holds it shared
	cfg      intel.DeviceConfig
	dev      *intel.Device
	mem      *devsession.Mem
	stopDev  chan struct{}
	stopBell func() // ends the doorbell's reader
	devDone  sync.WaitGroup

	wire     *wire
	wireDone sync.WaitGroup
	rxWait   wireQueue
}

// New makes the NIC with no device yet; its counters go to devCnt and cnt.
func New(cfg intel.DeviceConfig, devCnt *intel.Counters, cnt *Counters) *NIC {
	clock := cfg.Clock
	if clock == nil {
		clock = regs.Monotonic()
	}
	return &NIC{cfg: cfg, devCnt: devCnt, cnt: cnt, rxWait: wireQueue{clock: clock}}
}

// WireQueue is what waits on the paced wire toward the device now (wireQueue); any goroutine
// may ask.
func (n *NIC) WireQueue() netdev.Depth { return n.rxWait.Depth() }

// carrier is whether the link partner is there; mu held.
func (n *NIC) carrier() bool { return !n.cfg.NoCarrier && n.wire != nil }

// Configure applies a new config: the cable at once, the rest (model, MAC, PHY) from the next
// device session on, as a new card would.
func (n *NIC) Configure(cfg intel.DeviceConfig) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.cfg = cfg
	if n.dev != nil {
		n.dev.SetCarrier(n.carrier())
	}
}

// OpenDevice brings the device up on a Platform session's files: out of power-on reset, its
// PHY negotiating if the cable is in.
func (n *NIC) OpenDevice(files []*os.File) error {
	mem, err := devsession.Map(files)
	if err != nil {
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.dev != nil {
		mem.Close()
		return errors.New("emulated NIC: a driver already has the device")
	}
	cfg := n.cfg
	cfg.IRQ, cfg.Posted, cfg.Counters = mem.IRQ, mem.Queue, n.devCnt
	cfg.Wire = (*wireOut)(n)
	cfg.NoCarrier = !n.carrier()
	dev, err := intel.New(mem.Regs, mem.DMA, cfg)
	if err != nil {
		mem.Close()
		return err
	}
	mem.SetPCIID(devsession.VendorIntel, dev.Model().DeviceID)
	n.dev, n.mem, n.stopDev = dev, mem, make(chan struct{})
	run := dev.Runner()
	n.devDone.Go(func() { run(n.stopDev) })
	// The hypervisor's ioeventfd: a doorbell write wakes the device. Its reader waits in the
	// netpoller, which holds no P: a reader blocked in poll(2) kept the process's one P (it
	// is pinned to one CPU) until the runtime's monitor took it back, 20 µs to 10 ms later,
	// stalling the device's spinning goroutines after every doorbell (half of their time at
	// a doorbell per 50 µs). While they spin, they apply posted writes themselves.
	n.stopBell = mem.Doorbell.Serve(dev.Kick)
	return nil
}

// CloseDevice stops the device and unmaps the session; the driver went away.
func (n *NIC) CloseDevice() {
	n.mu.Lock()
	mem, stop, stopBell := n.mem, n.stopDev, n.stopBell
	n.dev, n.mem, n.stopBell = nil, nil, nil // the receive path lets go of it
	n.mu.Unlock()
	if mem == nil {
		return
	}
	close(stop) // not under mu: the device's goroutine transmits, which reads the wire under mu
	stopBell()
	n.devDone.Wait()
	mem.Close()
}

// Device is the running device, or nil (tests).
func (n *NIC) Device() *intel.Device {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.dev
}

// wire is the far end's Nic session: frames the device sends go out on its RX stream, frames
// the far end sends arrive on its TX stream. Or it is a Port.
type wire struct {
	srv  *packetstream.Server
	w    *packetstream.Waiter
	port Port
	flow *flow // a session's flow control (nil for a Port)
	stop atomic.Bool
	txMu sync.Mutex // Transmit (the device's goroutine) against DetachWire and the flow loop

	dropMu         sync.Mutex // the receive loop and Transmit both publish the port's drops
	rxDrop, txDrop uint64     // the port's drop counts as last published
}

// AttachWire plugs the far end's Nic session in and starts clocking its frames in.
func (n *NIC) AttachWire(srv *packetstream.Server) error {
	w, err := packetstream.NewWaiter(srv.TX)
	if err != nil {
		return err
	}
	w.Spin = 0 // the device paces the wire: no point polling between its bursts
	fl, err := newFlow(srv.RX)
	if err != nil {
		w.Close()
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.wire != nil {
		w.Close()
		fl.waiter.Close()
		return errors.New("emulated NIC: the cable is already plugged into another session")
	}
	n.wire = &wire{srv: srv, w: w, flow: fl}
	wr := n.wire
	n.wireDone.Go(func() { n.receiveLoop(wr) })
	n.wireDone.Go(func() { n.flowLoop(wr) })
	if n.dev != nil {
		n.dev.SetCarrier(n.carrier())
	}
	return nil
}

// DetachWire unplugs the far end; it returns once nothing touches the session any more.
func (n *NIC) DetachWire() {
	n.mu.Lock()
	wr := n.wire
	if wr == nil {
		n.mu.Unlock()
		return
	}
	n.wire = nil
	if n.dev != nil {
		n.dev.SetCarrier(false)
	}
	n.mu.Unlock()
	wr.stop.Store(true)
	if wr.port != nil {
		wr.port.Close() // a Read or Write in progress returns
	} else {
		wr.w.Wake()
		wr.flow.wake()
		wr.flow.waiter.Wake()
	}
	n.wireDone.Wait()
	wr.txMu.Lock() // a Transmit in progress ends
	wr.srv, wr.port = nil, nil
	wr.txMu.Unlock()
	if wr.w != nil {
		wr.w.Close()
		wr.flow.waiter.Close()
	}
}

// wireOut is the NIC as the device's intel.Wire.
type wireOut NIC

// Transmit puts frames on the wire: copied to the far end's session, dropped when it has no
// room (a wire does not wait), with one signal per batch. With flow control, a stream left
// above its high watermark pauses the device (flow.go).
func (o *wireOut) Transmit(frames [][]byte) {
	n := (*NIC)(o)
	n.mu.RLock()
	wr, flowControl := n.wire, n.cfg.FlowControl
	n.mu.RUnlock()
	if wr == nil {
		n.cnt.WireTXDropped.Add(uint64(len(frames)))
		return
	}
	wr.txMu.Lock()
	defer wr.txMu.Unlock()
	if wr.port != nil {
		n.transmitPort(wr, frames)
		return
	}
	if wr.srv == nil {
		n.cnt.WireTXDropped.Add(uint64(len(frames)))
		return
	}
	src := wr.srv.RX
	src.ReleaseAcked()
	for _, f := range frames {
		p, err := src.Alloc(len(f))
		if err != nil {
			n.cnt.WireTXDropped.Add(1)
			continue
		}
		copy(src.Payload(p), f)
		if !src.TrySubmit(p) {
			src.Release(p)
			n.cnt.WireTXDropped.Add(1)
		}
	}
	if flowControl {
		n.pauseIfFull(wr, src)
	}
	src.Wakeup()
}

// rxBatch is how many frames from the far end go to the device at once.
const rxBatch = 64

// receiveLoop clocks the far end's frames into the device at the link rate: frames the wire
// has not carried yet stay unacknowledged, so the far end is held back as a real link would.
func (n *NIC) receiveLoop(wr *wire) {
	sink := wr.srv.TX
	var pkts [rxBatch]packetstream.Packet
	var frames [rxBatch][]byte
	// Each frame is acknowledged once the wire took it, as a NIC fetches descriptors while
	// it sends, not once the whole batch is on the wire: the far end's byte limit learns
	// from acknowledgements, and with a batch's 64 frames (~0.8 ms at 1 Gbit/s) acknowledged
	// at once it had to keep two batches in the stream to keep the wire busy.
	took := func(from, to int) { ackAll(sink, pkts[from:to], &wr.stop) }
	for !wr.stop.Load() {
		k := 0
		for k < rxBatch && sink.CanAck() {
			p, ok := sink.TryGet()
			if !ok {
				break
			}
			if b := sink.Payload(p); b != nil {
				pkts[k], frames[k] = p, b
				k++
			} else {
				n.cnt.WireRXInvalid.Add(1)
				sink.TryAck(p)
			}
		}
		if k == 0 {
			sink.Wakeup()
			wr.w.Wait()
			continue
		}
		if done, _ := n.clockIn(frames[:k], &wr.stop, took); done < k {
			ackAll(sink, pkts[done:k], &wr.stop) // the wire unplugged
		}
	}
}

// clockIn offers frames to the device at the link rate, waiting while the wire carries the
// ones before; took (may be nil) hears each run of frames the wire took, lost or not. It
// returns how many it took and how many fell off the wire because no driver had the device.
func (n *NIC) clockIn(frames [][]byte, stop *atomic.Bool, took func(from, to int)) (done, lost int) {
	n.rxWait.hold(frames)
	for k := len(frames); done < k && !stop.Load(); {
		n.mu.RLock()
		taken := k - done
		if n.dev != nil {
			taken = n.dev.Receive(frames[done:k])
		} else { // no driver, the device is off: the frames fall off the wire
			lost += taken
		}
		wait := time.Duration(0)
		if done+taken < k {
			wait = n.dev.ReceiveWait()
		}
		n.mu.RUnlock()
		n.rxWait.took(frames[done:done+taken], frames[done+taken:])
		if took != nil && taken > 0 {
			took(done, done+taken)
		}
		done += taken
		n.waitWire(wait)
	}
	n.rxWait.clear() // taken, lost, or the wire unplugged
	return done, lost
}

// waitWire waits until the wire brings the next frame: it spins for waits shorter than the
// config's SpinWait, so that frames arrive one by one at their time as on a real link (with
// ITR off, each raises its own interrupt), and sleeps for longer ones.
func (n *NIC) waitWire(d time.Duration) {
	if d <= 0 {
		return
	}
	n.mu.RLock()
	spin := n.cfg.SpinWait
	n.mu.RUnlock()
	if d >= spin {
		time.Sleep(d)
		return
	}
	for deadline := time.Now().Add(d); time.Now().Before(deadline); {
		n.mu.RLock() // CloseDevice unmaps the queue once dev is nil
		if n.dev != nil {
			n.dev.DrainPosted()
		}
		n.mu.RUnlock()
		runtime.Gosched()
		affinity.Yield() // as the device's own spin: the driver may share our CPU
	}
}

// ackAll acknowledges what the device took, waiting for room in the ack queue (the far end
// releases acknowledgements at its pace) unless the wire is being unplugged.
func ackAll(sink *packetstream.Sink, pkts []packetstream.Packet, stop *atomic.Bool) {
	for len(pkts) > 0 && !stop.Load() {
		if sink.TryAck(pkts[0]) {
			pkts = pkts[1:]
			continue
		}
		sink.Wakeup()
		time.Sleep(50 * time.Microsecond)
	}
	sink.Wakeup()
}
