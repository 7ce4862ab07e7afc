// Package ipxe is the NIC driver logic of Genode's ipxe-based Intel driver with nicstack's
// three changes: RX interrupt throttling through ITR (fixed, or adaptive as traffic changes),
// TX batching with one TDT write per batch and queue-empty TX interrupts, and no PHY reset on
// parts that lose speed from it. It drives an 82574L-style device (the emulated NIC of
// drivers/intel, or a PCI device through VFIO) by the register map of drivers/intel/regs,
// through an MMIO interface and DMA memory, and passes frames to and from an Uplink in bursts.
// It knows no processes and no packet streams: the ipxe_nic component (components/ipxe_nic)
// runs its event loops and binds the Uplink to the router's session.
package ipxe

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/nicstack/nicstack/drivers/intel/regs"
	"github.com/nicstack/nicstack/netdev"
	"github.com/nicstack/nicstack/netdev/dql"
)

// MMIO is the device's register page as the driver reaches it.
type MMIO interface {
	Read32(off uint32) uint32
	Write32(off, v uint32)
}

// quietPoster is MMIO (the emulated NIC's, regs.PostedRegisters) that can post a write
// without waking the device, for the RX refill after each burst.
type quietPoster interface{ PostQuiet(off, v uint32) }

// Device is what a back end hands the driver: the register page and DMA memory are the only
// things that differ between the emulated NIC (a device session) and a PCI device (VFIO).
type Device struct {
	Regs MMIO
	DMA  []byte // DMA memory of at least DMASize bytes, 16-byte aligned
	// DMABase is the bus address of DMA[0], what the device sees: 0 for the emulated NIC,
	// the IOVA it is mapped at in the IOMMU for a PCI device.
	DMABase  uint64
	DeviceID uint16    // PCI device ID (the vendor is Intel), one LookupModel knows
	Counters *Counters // where the driver counts; nil: counters of its own
	// Clock times adaptive moderation's intervals (regs.ManualClock in tests); nil: the
	// monotonic clock.
	Clock regs.Clock
	// Log hears the device's faults (fault.go); nil: they are counted only.
	Log *slog.Logger
}

// Uplink is where received frames go and frames to send come from: the router's Uplink
// session while the link is up (components/ipxe_nic binds it), a test's fake. The driver calls
// it from its one event loop, a burst at a time.
type Uplink interface {
	// Deliver passes one received frame on (copied before it returns); false: the session
	// had no room and the frame is dropped.
	Deliver(frame []byte) bool
	// DeliverDone ends an RX burst: one signal to the router.
	DeliverDone()
	// Fetch copies the router's next frame to send into buf and acknowledges it. ok is false
	// when the router has nothing queued; n > len(buf) (the frame did not fit) or n == 0 (it
	// was no frame: an invalid descriptor) means the driver drops it.
	Fetch(buf []byte) (n int, ok bool)
	// FetchDone acknowledges a TX batch to the router with one wakeup.
	FetchDone()
}

// LinkFunc hears link changes; the component opens its Uplink session while the link is up.
type LinkFunc func(up bool, speedMbit int)

// Ring sizes and the DMA memory layout: rings first, then one 2048-byte buffer per descriptor.
// 512 descriptors a ring (e1000e's default is 256, its maximum 4096): a stream received at
// line rate fills 118 in ITR 5580's 1.43 ms, and a driver that ran a few milliseconds late on
// a loaded machine overran 256 (the NIC's rx_no_descriptor 0-300 in a 5 s test at every
// fixed ITR, each a retransmit; none in 18 such tests with 512).
const (
	RingSize = 512
	BufSize  = 2048

	txRing  = 0
	rxRing  = txRing + RingSize*regs.DescSize
	txBufs  = rxRing + RingSize*regs.DescSize
	rxBufs  = txBufs + RingSize*BufSize
	DMASize = rxBufs + RingSize*BufSize
)

// Counters are what the driver counts from its side. The fields point to counters the caller
// may own (a component's named counters), so they outlive one opened device.
type Counters struct {
	Interrupts         *atomic.Uint64 // interrupt handler runs
	TDTWrites          *atomic.Uint64 // TX doorbells
	RDTWrites          *atomic.Uint64
	TXFrames           *atomic.Uint64
	TXBytes            *atomic.Uint64
	RXFrames           *atomic.Uint64
	RXBytes            *atomic.Uint64
	RXBursts           *atomic.Uint64 // signals to the router
	RXPollFrames       *atomic.Uint64 // received frames taken when the driver ran to transmit (rx_poll_on_tx)
	TXBatches          *atomic.Uint64 // wakeups to the router
	RXDropped          *atomic.Uint64 // no session, session full, or a descriptor with errors
	TXDropped          *atomic.Uint64 // frames too long for a buffer
	TXRingFull         *atomic.Uint64 // times the router had more than the ring took
	LinkChanges        *atomic.Uint64
	SpuriousInterrupts *atomic.Uint64 // ICR read zero
	// The Uplink session's and SoftOffload's: received frames the session had no room for,
	// frames to send whose checksum the driver completed, super-frames it cut and the
	// segments they made, frames dropped for offload metadata it cannot serve.
	RXRefused, TXSoftCsum, TXSoftGSO, TXSegments, TXOffloadDropped *atomic.Uint64
	// Adaptive moderation: milliseconds spent in each latency class, and ITR changes.
	ITRLowestMS, ITRLowMS, ITRBulkMS, ITRStreamMS, ITRChanges *atomic.Uint64
	// Faults (fault.go): the device stopped answering (registers read all ones), the
	// transmit queue stood still with frames in it (a DMA fault or a hung device), receive
	// descriptors written back with nonsense, and resets that brought the device back.
	DeviceGone, TXHangs, RXBadDescriptors, DeviceResets *atomic.Uint64
	// The TX byte limit (tx_bql; netdev/dql): the limit now (0 while off), times it left frames
	// waiting in the session, and completions of more than was in flight (a driver bug).
	TXBQLLimit, TXBQLStops, TXBQLErrors *atomic.Uint64
}

// NewCounters makes counters whose storage get returns by name (component.Component.Counter);
// nil get: counters of their own.
func NewCounters(get func(name string) *atomic.Uint64) *Counters {
	if get == nil {
		get = func(string) *atomic.Uint64 { return new(atomic.Uint64) }
	}
	return &Counters{
		Interrupts: get("interrupts"), TDTWrites: get("tdt_writes"), RDTWrites: get("rdt_writes"),
		TXFrames: get("tx_frames"), TXBytes: get("tx_bytes"), RXFrames: get("rx_frames"), RXBytes: get("rx_bytes"),
		RXBursts: get("rx_bursts"), RXPollFrames: get("rx_poll_frames"), TXBatches: get("tx_batches"), RXDropped: get("rx_dropped"),
		TXDropped: get("tx_dropped"), TXRingFull: get("tx_ring_full"), LinkChanges: get("link_changes"),
		SpuriousInterrupts: get("spurious_interrupts"),
		RXRefused:          get("rx_refused"), TXSoftCsum: get("tx_soft_csum"), TXSoftGSO: get("tx_soft_gso"),
		TXSegments: get("tx_segments"), TXOffloadDropped: get("tx_offload_dropped"),
		ITRLowestMS: get("itr_lowest_ms"), ITRLowMS: get("itr_low_ms"), ITRBulkMS: get("itr_bulk_ms"),
		ITRStreamMS: get("itr_stream_ms"), ITRChanges: get("itr_changes"),
		DeviceGone: get("device_gone"), TXHangs: get("tx_hangs"), RXBadDescriptors: get("rx_bad_descriptors"),
		DeviceResets: get("device_resets"),
		TXBQLLimit:   get("tx_bql_limit_bytes"), TXBQLStops: get("tx_bql_stops"), TXBQLErrors: get("tx_bql_errors"),
	}
}

// Driver drives one device. It is not safe for concurrent use: the component calls Open,
// HandleInterrupt, Watchdog, Transmit, Configure and SetUplink from its one event loop.
type Driver struct {
	dev    Device
	model  Model
	regs   MMIO
	dma    []byte
	cfg    Config
	onLink LinkFunc
	up     Uplink
	mac    net.HardwareAddr
	link   bool
	speed  int
	cnt    *Counters
	clock  regs.Clock
	mod    *Moderation // nil: a fixed ITR
	work   Work        // since the last interrupt, for moderation

	rxNext         uint32           // next RX descriptor the device fills
	txTail, txReap uint32           // next free TX descriptor; oldest one in flight
	txStalled      bool             // the router had more than the ring took
	txLimited      bool             // stalled by the byte limit, not a full ring
	txMask         uint32           // the TX interrupt cause unmasked now (txCause)
	txLen          [RingSize]uint16 // each TX descriptor's frame length, for the byte limit
	bql            dql.Limit        // the byte limit, kept while tx_bql is on
	faults         faults
	rings          ringDepth
}

var le = binary.LittleEndian

// resetTimeout bounds the wait for CTRL.RST to clear itself.
const resetTimeout = 100 * time.Millisecond

// Open resets the device and sets up the rings and interrupts. onLink (may be nil) hears every
// later link change from HandleInterrupt; the state at open is Link's.
func Open(dev Device, cfg Config, onLink LinkFunc) (*Driver, error) {
	if dev.Regs == nil || len(dev.DMA) < DMASize {
		return nil, fmt.Errorf("ipxe: device needs registers and %d bytes of DMA memory, has %d", DMASize, len(dev.DMA))
	}
	if uintptr(unsafe.Pointer(&dev.DMA[0]))%16 != 0 {
		return nil, errors.New("ipxe: DMA memory must be 16-byte aligned")
	}
	if cfg.RxIrqThrottle > 0xffff {
		return nil, fmt.Errorf("ipxe: rx_irq_throttle %d does not fit ITR", cfg.RxIrqThrottle)
	}
	if dev.DMABase%16 != 0 || dev.DMABase > math.MaxUint64-DMASize {
		return nil, fmt.Errorf("ipxe: DMA memory at bus address %#x is not 16-byte aligned or wraps", dev.DMABase)
	}
	model, err := LookupModel(VendorIntel, dev.DeviceID)
	if err != nil {
		return nil, err
	}
	d := &Driver{dev: dev, model: model, regs: dev.Regs, dma: dev.DMA[:DMASize], cfg: cfg, onLink: onLink, cnt: dev.Counters, clock: dev.Clock,
		rings: ringDepth{txMarks: netdev.NewMarks(RingSize)}}
	if d.cnt == nil {
		d.cnt = NewCounters(nil)
	}
	if d.clock == nil {
		d.clock = regs.Monotonic()
	}
	d.bql = dql.New(bqlMin, cfg.bqlLimitMax(), bqlHold, d.clock.Now())
	d.faults.log = dev.Log
	if d.regs.Read32(regs.STATUS) == allOnes {
		return nil, errors.New("ipxe: the device does not answer: its registers read all ones (removed, powered down, or memory space not enabled)")
	}
	onLink, d.onLink = d.onLink, nil
	err = d.start()
	d.onLink = onLink
	if err != nil {
		return nil, err
	}
	return d, nil
}

// start resets the device and sets up the MAC address, rings, ITR and interrupt mask, then
// reads the link: at Open, and when the device comes back from a fault.
func (d *Driver) start() error {
	if err := d.reset(); err != nil {
		return err
	}
	ral, rah := d.regs.Read32(regs.RAL), d.regs.Read32(regs.RAH)
	d.mac = net.HardwareAddr{byte(ral), byte(ral >> 8), byte(ral >> 16), byte(ral >> 24), byte(rah), byte(rah >> 8)}
	d.setupRings()
	d.regs.Write32(regs.ITR, d.startThrottle())
	d.regs.Read32(regs.ICR) // drop stale causes
	d.regs.Write32(regs.IMS, regs.IntLSC|regs.IntRXT0)
	d.txMask = 0
	d.txStalled, d.txLimited = false, false
	d.maskTX()
	d.checkLink()
	return nil
}

// reset resets the MAC, and the PHY with it when the link is down and the config allows.
func (d *Driver) reset() error {
	d.regs.Write32(regs.IMC, ^uint32(0))
	ctrl := d.regs.Read32(regs.CTRL)
	d.regs.Write32(regs.CTRL, ctrl|regs.CtrlRST)
	if err := d.waitReset(); err != nil {
		return err
	}
	ctrl = d.regs.Read32(regs.CTRL)&^(regs.CtrlLRST|regs.CtrlPHYRST) | regs.CtrlASDE | regs.CtrlSLU
	d.regs.Write32(regs.CTRL, ctrl)
	if d.regs.Read32(regs.STATUS)&regs.StatusLU != 0 || !d.wantPHYReset() {
		return nil
	}
	d.regs.Write32(regs.CTRL, ctrl|regs.CtrlRST|regs.CtrlPHYRST)
	if err := d.waitReset(); err != nil {
		return err
	}
	d.regs.Write32(regs.CTRL, ctrl) // PHY reset does not clear itself on every part
	return nil
}

func (d *Driver) wantPHYReset() bool {
	switch d.cfg.PhyReset {
	case PhyResetYes:
		return true
	case PhyResetNo:
		return false
	}
	return !d.model.PHYLosesSpeed
}

// waitReset waits for CTRL.RST to clear itself (at once in process; a posted write later).
func (d *Driver) waitReset() error {
	deadline := time.Now().Add(resetTimeout)
	for d.regs.Read32(regs.CTRL)&regs.CtrlRST != 0 {
		if time.Now().After(deadline) {
			return errors.New("ipxe: device did not come out of reset")
		}
		time.Sleep(10 * time.Microsecond)
	}
	return nil
}

func (d *Driver) setupRings() {
	for i := range uint32(RingSize) {
		d.armRX(i)
		desc := txRing + i*regs.DescSize
		clear(d.dma[desc : desc+regs.DescSize])
	}
	d.regs.Write32(regs.TDBAH, uint32(d.bus(txRing)>>32))
	d.regs.Write32(regs.TDBAL, uint32(d.bus(txRing)))
	d.regs.Write32(regs.TDLEN, RingSize*regs.DescSize)
	d.regs.Write32(regs.TDH, 0)
	d.regs.Write32(regs.TDT, 0)
	d.regs.Write32(regs.RDBAH, uint32(d.bus(rxRing)>>32))
	d.regs.Write32(regs.RDBAL, uint32(d.bus(rxRing)))
	d.regs.Write32(regs.RDLEN, RingSize*regs.DescSize)
	d.regs.Write32(regs.RDH, 0)
	d.regs.Write32(regs.RDT, RingSize-1)
	d.rxNext, d.txTail, d.txReap = 0, 0, 0
	now := d.clock.Now()
	d.rings.reset(now)
	d.bql.Reset(now)
	d.publishLimit()
	// collision threshold 15, collision distance 63: the datasheet's full-duplex values
	d.regs.Write32(regs.TCTL, regs.TctlEN|regs.TctlPSP|0x0f<<4|0x3f<<12)
	// Legacy descriptors on one queue, without checksums written into them: a driver before
	// us (Linux's e1000e uses extended descriptors and RSS) may leave these set where a MAC
	// reset keeps them.
	d.regs.Write32(regs.RFCTL, 0)
	d.regs.Write32(regs.MRQC, 0)
	d.regs.Write32(regs.RXCSUM, 0)
	// 2048-byte buffers (BSIZE 00), promiscuous as iPXE is: the router filters
	d.regs.Write32(regs.RCTL, regs.RctlEN|regs.RctlUPE|regs.RctlMPE|regs.RctlBAM|regs.RctlSECRC)
}

// armRX hands RX descriptor i its buffer, with length and status cleared last, in one store
// (RXQueue reads them together from another goroutine).
func (d *Driver) armRX(i uint32) {
	desc := rxRing + i*regs.DescSize
	le.PutUint64(d.dma[desc:], d.bus(rxBufs+i*BufSize))
	atomic.StoreUint64(d.lenStatus(desc), 0)
}

// bus is the address the device reaches DMA memory's offset off at.
func (d *Driver) bus(off uint32) uint64 { return d.dev.DMABase + uint64(off) }

func (d *Driver) statusWord(desc uint32) *uint32 {
	return (*uint32)(unsafe.Pointer(&d.dma[desc+regs.DescStatusWord]))
}

// lenStatus is a descriptor's last 64 bits: the length word, then the status word.
func (d *Driver) lenStatus(desc uint32) *uint64 {
	return (*uint64)(unsafe.Pointer(&d.dma[desc+regs.DescLenOff]))
}

// txCause is the TX interrupt cause the driver wants unmasked now: TXDW always with
// descriptor_done (iPXE's interrupt per sent frame); with queue_empty TXQE only while frames
// wait for room in the ring. The driver reaps written-back descriptors whenever it transmits
// and frees nothing of the router's on completion (frames are copied into the ring's own
// buffers), so a TX interrupt has a use only to resume a backlog; otherwise a queue that ran
// empty would interrupt the driver (or ride on an RX interrupt) for nothing.
//
// With the byte limit (tx_bql) it wants TXDW whatever the config, stalled or not: the limit
// learns from completions as they come (ITR paces them, at bulk's 250 µs under a sent
// stream), as e1000e cleans its ring at every interrupt; without TX interrupts it learned
// only at RX interrupts and the router's batches (about 1000 a second in a sent stream, the
// ring then holding 133 frames in the median), and TXQE would let the ring run dry first,
// which the limit would take for starvation every time. A ring with nothing in flight
// writes no DD back, so the cause costs nothing while idle.
func (d *Driver) txCause() uint32 {
	switch {
	case d.cfg.TxIrq == TxIrqDescriptorDone, d.cfg.TxBQL:
		return regs.IntTXDW
	case d.txStalled:
		return regs.IntTXQE
	}
	return 0
}

// maskTX brings IMS in line with txCause: two register writes when the TX ring fills and
// when it has room again, none per batch.
func (d *Driver) maskTX() {
	want := d.txCause()
	if want == d.txMask {
		return
	}
	if d.txMask != 0 {
		d.regs.Write32(regs.IMC, d.txMask)
	}
	if want == regs.IntTXQE {
		// The queue ran empty before, unmasked or not: clear that latched cause, or it
		// interrupts at once while the ring is full.
		d.regs.Write32(regs.ICR, regs.IntTXQE)
	}
	if want != 0 {
		d.regs.Write32(regs.IMS, want)
	}
	d.txMask = want
}

// Model is the part the driver drives.
func (d *Driver) Model() Model { return d.model }

// MAC is the address read from RAL/RAH, for the Uplink session's arguments.
func (d *Driver) MAC() net.HardwareAddr { return d.mac }

// Link is the link state as last read from STATUS.
func (d *Driver) Link() (up bool, speedMbit int) { return d.link, d.speed }

// Config is the configuration in effect.
func (d *Driver) Config() Config { return d.cfg }

// Counters are the driver's counters.
func (d *Driver) Counters() *Counters { return d.cnt }

// TXStalled reports that the router had more frames than the TX ring took; the interrupt
// handler resumes them, so the component need not wait on the router meanwhile.
func (d *Driver) TXStalled() bool { return d.txStalled }

// SetUplink binds the router's session (nil while it is closed).
func (d *Driver) SetUplink(u Uplink) {
	d.up = u
	d.txStalled, d.txLimited = false, false
	d.maskTX()
}

// startThrottle starts adaptive moderation if the config asks for it and returns the ITR
// value to write.
func (d *Driver) startThrottle() uint32 {
	if !d.cfg.AdaptiveThrottle {
		d.mod = nil
		return d.cfg.RxIrqThrottle
	}
	d.mod = NewModeration(d.clock.Now(), d.cnt)
	d.mod.SetTXLimit(d.cfg.TxBQL)
	return d.mod.Class().ITR()
}

// Configure applies a changed configuration at once: a new ITR is written (adaptive
// moderation starts over from the lowest latency class), the TX interrupt cause swapped, the
// byte limit started over (counting what is in flight) or dropped, its cap moved. phy_reset
// matters only at Open.
func (d *Driver) Configure(cfg Config) error {
	if cfg.RxIrqThrottle > 0xffff {
		return fmt.Errorf("ipxe: rx_irq_throttle %d does not fit ITR", cfg.RxIrqThrottle)
	}
	oldCfg := d.cfg
	d.cfg = cfg
	if cfg.AdaptiveThrottle != oldCfg.AdaptiveThrottle || !cfg.AdaptiveThrottle && cfg.RxIrqThrottle != oldCfg.RxIrqThrottle {
		d.regs.Write32(regs.ITR, d.startThrottle())
	}
	if cfg.TxBQL && !oldCfg.TxBQL {
		d.bql.Reset(d.clock.Now())
		for i := d.txReap; i != d.txTail; i = (i + 1) % RingSize {
			d.bql.Queued(uint32(d.txLen[i]))
		}
	}
	d.bql.SetMax(cfg.bqlLimitMax())
	if !cfg.TxBQL {
		d.txLimited = false // a stall goes on as a full ring's, resumed by TXQE
	}
	if d.mod != nil {
		d.mod.SetTXLimit(cfg.TxBQL)
	}
	d.publishLimit()
	d.maskTX()
	return nil
}

// The byte limit's bounds and hold time, Linux's: from nothing (one frame always goes) up,
// here to a ring of full buffers, shrinking once slack persisted for a second.
const (
	bqlMin  = 0
	bqlMax  = RingSize * BufSize
	bqlHold = time.Second
)

// bqlLimitMax is the byte limit's upper bound: tx_bql_limit_max, or the ring's bytes.
func (c Config) bqlLimitMax() uint32 { return dql.Capped(bqlMax, c.TxBQLLimitMax) }

// publishLimit brings the tx_bql_limit_bytes counter in line with the limit (0 while off).
func (d *Driver) publishLimit() {
	var l uint64
	if d.cfg.TxBQL {
		l = uint64(d.bql.Limit())
	}
	if d.cnt.TXBQLLimit.Load() != l {
		d.cnt.TXBQLLimit.Store(l)
	}
}

// checkLink reads STATUS and reports a change.
func (d *Driver) checkLink() {
	st := d.regs.Read32(regs.STATUS)
	up, speed := st&regs.StatusLU != 0, 0
	if up {
		switch st & regs.StatusSpeedMask {
		case regs.StatusSpeed10:
			speed = 10
		case regs.StatusSpeed100:
			speed = 100
		default:
			speed = 1000
		}
	}
	d.setLink(up, speed)
}

// setLink reports a change of the link.
func (d *Driver) setLink(up bool, speed int) {
	if up == d.link && speed == d.speed {
		return
	}
	d.link, d.speed = up, speed
	d.cnt.LinkChanges.Add(1)
	if d.onLink != nil {
		d.onLink(up, speed)
	}
}

// HandleInterrupt services the interrupt line: read ICR, report a link change, reap TX, take
// the RX burst to the router with one signal, refill RDT once, and resume a TX backlog the
// ring had no room for once a quarter of the ring is free, or the byte limit held back once
// it admits a frame again.
func (d *Driver) HandleInterrupt() {
	d.cnt.Interrupts.Add(1)
	if d.faults.gone {
		return
	}
	icr := d.regs.Read32(regs.ICR)
	if icr == 0 {
		d.cnt.SpuriousInterrupts.Add(1)
	}
	if icr == allOnes || icr == 0 && d.regs.Read32(regs.STATUS) == allOnes {
		d.vanished()
		return
	}
	if icr&regs.IntLSC != 0 {
		d.checkLink()
	}
	d.reapTX()
	d.receive()
	if d.txStalled && (d.txLimited && d.bql.Avail() >= 0 || !d.txLimited && d.txFree() >= txResume) {
		d.transmit()
	}
	if d.mod != nil {
		if class, changed := d.mod.Interrupt(d.clock.Now(), d.work); changed {
			d.regs.Write32(regs.ITR, class.ITR())
		}
	}
	d.work = Work{}
}

// txResume is how many free TX descriptors the interrupt handler waits for before it takes
// more of a backlog the ring had no room for: refilling a few slots at every RX interrupt
// would cost a TDT write per few frames.
const txResume = RingSize / 4

// txFree is the number of TX descriptors the driver may fill (one stays empty: head == tail
// means an empty ring).
func (d *Driver) txFree() uint32 { return (d.txReap + RingSize - d.txTail - 1) % RingSize }

// receive takes every completed RX descriptor and says how many frames it delivered. The
// device fills at most up to RDT, which moves only at the end, so one burst is at most a ring
// (bounded too against a device that keeps setting DD).
func (d *Driver) receive() (delivered uint64) {
	look := d.clock.Now()
	n := 0
	for n < RingSize {
		desc := rxRing + d.rxNext*regs.DescSize
		ls := atomic.LoadUint64(d.lenStatus(desc)) // as the device writes them back: together
		w := uint32(ls >> 32)
		if w&regs.RxStatusDD == 0 {
			break
		}
		length := uint32(ls & 0xffff)
		buf := rxBufs + d.rxNext*BufSize
		switch {
		case w&regs.RxStatusEOP == 0 || length > BufSize || length == 0:
			// Spans buffers (never with 2048-byte buffers), or is no frame: the device
			// wrote back what the driver did not ask for.
			d.cnt.RXDropped.Add(1)
			d.cnt.RXBadDescriptors.Add(1)
		case w>>8&0xff != 0: // the frame came with errors
			d.cnt.RXDropped.Add(1)
		case d.up != nil && d.up.Deliver(d.dma[buf:buf+length]):
			d.cnt.RXFrames.Add(1)
			d.cnt.RXBytes.Add(uint64(length))
			delivered++
			d.work.Frames++
			d.work.Bytes += uint64(length)
			d.work.RXFrames++
			d.work.RXBytes += uint64(length)
		default:
			d.cnt.RXDropped.Add(1)
		}
		d.armRX(d.rxNext)
		d.rxNext = (d.rxNext + 1) % RingSize
		n++
	}
	d.rings.looked(d.rxNext, look)
	if n == 0 {
		return 0
	}
	d.work.RXPass = max(d.work.RXPass, uint64(n))
	if d.up != nil {
		d.up.DeliverDone()
		d.cnt.RXBursts.Add(1)
	}
	if q, ok := d.regs.(quietPoster); ok {
		q.PostQuiet(regs.RDT, (d.rxNext+RingSize-1)%RingSize)
	} else {
		d.regs.Write32(regs.RDT, (d.rxNext+RingSize-1)%RingSize)
	}
	d.cnt.RDTWrites.Add(1)
	return delivered
}

// reapTX frees the TX descriptors the device has written back; with tx_bql their bytes are
// one completion of the byte limit.
func (d *Driver) reapTX() {
	var bytes uint32
	for d.txReap != d.txTail {
		if atomic.LoadUint32(d.statusWord(txRing+d.txReap*regs.DescSize))&regs.TxStaDD == 0 {
			break
		}
		bytes += uint32(d.txLen[d.txReap])
		d.txReap = (d.txReap + 1) % RingSize
		d.rings.reaped++
	}
	d.rings.publishReaped()
	if d.cfg.TxBQL && bytes > 0 {
		if !d.bql.Completed(bytes, d.clock.Now()) {
			d.cnt.TXBQLErrors.Add(1)
		}
		d.publishLimit()
	}
}

// Transmit sends the router's batch (transmit) and, with rx_poll_on_tx, then takes what the
// RX ring holds while the next interrupt may be far (rxPollDue), as a driver that cleans both
// rings in one poll does: the component calls it when the router signals frames, so under a
// received stream the guest's acknowledgements wake the driver every few frames, and a frame
// received meanwhile (the reply to a request) need not wait for the interrupt that adaptive
// moderation's stream class spaces 1.43 ms apart. What it takes is one burst as the
// interrupt's: one signal to the router and one RDT write, none when the ring is empty. Its
// frames count toward the interrupt's work (Work), so moderation still sees the line's
// traffic, not only what the interrupts found: if they did not, the polls would leave the
// interrupts little, and the class would drop to ITRs that interrupt the driver thousands of
// times a second for what the polls already took.
func (d *Driver) Transmit() {
	d.transmit()
	if d.cfg.RxPollOnTx && d.rxPollDue() && d.up != nil && d.link && !d.faults.gone {
		d.cnt.RXPollFrames.Add(d.receive())
	}
}

// rxPollDue says whether the ITR in effect spaces interrupts wider than the bulk class's
// 250 µs (e1000e's slowest dynamic rate): the stream class, or a fixed ITR above 977. Below
// that a frame's wait for its interrupt is short anyway, and a poll at every batch of the
// router's would cut the bursts up for at most that: under a received stream in the stream
// class, polls made bursts of ~30 frames instead of ~120 and cost the driver and the router
// 1.1-1.5x their CPU (docs/isolation.md).
func (d *Driver) rxPollDue() bool {
	itr := d.cfg.RxIrqThrottle
	if d.mod != nil {
		itr = d.mod.Class().ITR()
	}
	return itr > BulkLatency.ITR()
}

// transmit takes as many frames from the router's batch as the ring holds (and, with tx_bql,
// as the byte limit admits), writes TDT once (per frame without tx_batch) and acknowledges the
// batch with one wakeup. Transmit calls it when the router signals frames; the interrupt
// handler resumes it when the ring had no room or the limit held frames back.
func (d *Driver) transmit() {
	if d.up == nil || !d.link || d.faults.gone {
		return
	}
	d.reapTX()
	fetched, queued, bytes := 0, 0, 0
	d.txStalled, d.txLimited = false, false
	for {
		if d.txFree() == 0 {
			d.txStalled = true
			d.cnt.TXRingFull.Add(1)
			break
		}
		if d.cfg.TxBQL && d.bql.Avail() < 0 {
			// The rest waits in the session, not in the ring.
			d.txStalled, d.txLimited = true, true
			d.cnt.TXBQLStops.Add(1)
			break
		}
		buf := txBufs + d.txTail*BufSize
		n, ok := d.up.Fetch(d.dma[buf : buf+BufSize])
		if !ok {
			break
		}
		fetched++
		if n > BufSize || n <= 0 {
			d.cnt.TXDropped.Add(1)
			continue
		}
		desc := txRing + d.txTail*regs.DescSize
		le.PutUint64(d.dma[desc:], d.bus(buf))
		cmd := uint32(regs.TxCmdEOP | regs.TxCmdIFCS | regs.TxCmdRS)
		le.PutUint32(d.dma[desc+regs.DescLenOff:], uint32(n)|cmd<<regs.TxCmdShift)
		atomic.StoreUint32(d.statusWord(desc), 0)
		d.txLen[d.txTail] = uint16(n)
		if d.cfg.TxBQL {
			d.bql.Queued(uint32(n))
		}
		d.txTail = (d.txTail + 1) % RingSize
		queued++
		bytes += n
		d.cnt.TXFrames.Add(1)
		d.cnt.TXBytes.Add(uint64(n))
		d.work.Frames++
		d.work.Bytes += uint64(n)
		if !d.cfg.TxBatch {
			d.kickTX()
		}
	}
	if queued > 0 {
		d.rings.queued(queued, bytes, d.clock.Now())
		if d.cfg.TxBatch {
			d.kickTX()
		}
	}
	if fetched > 0 {
		d.up.FetchDone()
		d.cnt.TXBatches.Add(1)
	}
	d.maskTX()
}

func (d *Driver) kickTX() {
	d.regs.Write32(regs.TDT, d.txTail)
	d.cnt.TDTWrites.Add(1)
}
