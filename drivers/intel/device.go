package intel

import (
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/nicstack/nicstack/drivers/intel/regs"
	"github.com/nicstack/nicstack/runtime/affinity"
)

// IRQ is the device's interrupt line: an eventfd between processes, a channel in one.
type IRQ interface{ Raise() }

// ChanIRQ is an in-process interrupt line; like an eventfd, raises coalesce until taken.
type ChanIRQ chan struct{}

// NewChanIRQ makes an interrupt line.
func NewChanIRQ() ChanIRQ { return make(ChanIRQ, 1) }

// Raise signals the line without blocking.
func (c ChanIRQ) Raise() {
	select {
	case c <- struct{}{}:
	default:
	}
}

// Wire is where transmitted frames go (a TAP, an AF_PACKET socket, a Nic session, a test).
// Frames are valid only during the call. Frames from the wire enter through Device.Receive.
type Wire interface{ Transmit(frames [][]byte) }

// DeviceConfig describes one emulated NIC: the settings its <config> gives (Config.Device)
// and what it is connected to in this process.
type DeviceConfig struct {
	Model        Model
	MAC          net.HardwareAddr // the permanent address, loaded into RAL/RAH at reset
	Clock        regs.Clock       // nil: the real monotonic clock
	IRQ          IRQ              // nil: interrupts are counted only
	Wire         Wire             // nil: transmitted frames are counted only
	Autoneg      time.Duration    // how long auto-negotiation takes; 0: DefaultAutoneg
	PartnerSpeed int              // the link partner's best speed in Mbit/s; 0: 1000
	NoCarrier    bool             // the cable starts pulled (SetCarrier plugs it in)
	// FlowControl: the link partner advertises 802.3x PAUSE in auto-negotiation, as the PHY
	// does by default, so the link resolves to full flow control and the device sets
	// CTRL.RFCE and CTRL.TFCE when it comes up; while RFCE is set the device honours the
	// partner's PAUSE frames (ReceivePause). false: the partner advertises none.
	FlowControl bool
	// SpinWait: Run busy-waits for deadlines closer than this instead of sleeping, since a
	// loaded kernel wakes short sleeps up to ~1 ms late and ITR intervals are 166 µs. The
	// model stands for hardware, so its spinning is charged to the hardware. 0: always sleep.
	SpinWait time.Duration
	// Posted is the queue of register writes from a driver in another process (nil: the
	// driver calls Write32 directly). Poll applies them; whoever reads the doorbell eventfd
	// calls Kick.
	Posted *regs.WriteQueue
	// Counters: nil, the device's own (NewCounters(nil)).
	Counters *Counters
}

// DefaultAutoneg is how long the PHY negotiates. Real copper PHYs take 1-3 s; the model is
// quicker so that tests and benchmarks do not wait.
const DefaultAutoneg = 20 * time.Millisecond

// Reset values (82574L; CTRL as QEMU's e1000e model has it).
const (
	ctrlReset = regs.CtrlFD | regs.CtrlSLU | regs.CtrlSpd1000 | 1<<18 | 1<<20
	maxFrame  = 16384 // the longest frame the model assembles or receives (RCTL.LPE)
	txArena   = 1 << 20
)

// Device is the emulated NIC. Register reads and writes (Read32, Write32) and frames from the
// wire (Receive) may come from any goroutine; Poll or Run does the device's own work (transmit,
// deferred interrupts, auto-negotiation) from one goroutine.
type Device struct {
	model Model
	regs  []byte
	dma   []byte
	clock regs.Clock
	irq   IRQ
	wire  Wire
	mac   [6]byte
	cnt   *Counters
	kick  chan struct{}
	// posted register writes and the function that applies them (made once: no allocation
	// per poll)
	posted   *regs.WriteQueue
	apply    func(off, v uint32)
	drainMu  sync.Mutex // the queue has one consumer: Poll, or a spinning receive path
	spinWait time.Duration

	mu sync.Mutex
	// interrupts
	everFired  bool
	lastIRQ    time.Duration
	irqPending bool // a cause waits for the ITR interval to pass
	irqAt      time.Duration
	// PHY
	autoneg      time.Duration
	partnerSpeed int
	flowControl  bool
	carrier      bool
	phyInReset   bool
	degraded     bool // the i217-LM quirk has struck
	negotiating  bool
	anegAt       time.Duration
	linkUp       bool
	speed        int
	// transmit
	wireFree   time.Duration // when the wire is free for the next frame to send
	rxWireFree time.Duration // when the wire can bring the next received frame
	txBusy     bool          // descriptors were pending at the last poll
	asm        []byte        // the frame being assembled from descriptors
	asmBad     bool
	arena      []byte
	batch      [][]byte
	// 802.3x: the link partner paused the transmitter (STATUS.TXOFF) until pauseUntil
	paused      bool
	pausedSince time.Duration
	pauseUntil  time.Duration
	// injected faults (fault.go); gone is read without mu by Read32
	fault   Fault
	gone    atomic.Bool
	garbage uint32 // FaultGarbage's next kind
}

// New makes a device over a register page of RegisterPageSize bytes and DMA memory (both
// 16-byte aligned; heap in tests, shared memory between processes). The device comes out of
// power-on reset with its PHY negotiating.
func New(page, dma []byte, cfg DeviceConfig) (*Device, error) {
	if len(page) < regs.RegisterPageSize {
		return nil, fmt.Errorf("intel: register page is %d bytes, needs %d", len(page), regs.RegisterPageSize)
	}
	if len(page) > 0 && uintptr(unsafe.Pointer(&page[0]))%16 != 0 ||
		len(dma) > 0 && uintptr(unsafe.Pointer(&dma[0]))%16 != 0 {
		return nil, errors.New("intel: register page and DMA memory must be 16-byte aligned")
	}
	if cfg.Model.Name == "" {
		cfg.Model = Models[0]
	}
	if len(cfg.MAC) != 6 {
		return nil, fmt.Errorf("intel: MAC address %v is not 6 bytes", cfg.MAC)
	}
	d := &Device{
		model: cfg.Model, regs: page[:regs.RegisterPageSize], dma: dma, clock: cfg.Clock,
		irq: cfg.IRQ, wire: cfg.Wire, kick: make(chan struct{}, 1),
		autoneg: cfg.Autoneg, partnerSpeed: cfg.PartnerSpeed, flowControl: cfg.FlowControl, carrier: !cfg.NoCarrier,
		arena: make([]byte, txArena), asm: make([]byte, 0, maxFrame), cnt: cfg.Counters,
	}
	if d.cnt == nil {
		d.cnt = NewCounters(nil)
	}
	copy(d.mac[:], cfg.MAC)
	d.posted, d.apply, d.spinWait = cfg.Posted, d.Write32, cfg.SpinWait
	if d.clock == nil {
		d.clock = regs.Monotonic()
	}
	if d.autoneg <= 0 {
		d.autoneg = DefaultAutoneg
	}
	if d.partnerSpeed <= 0 || d.partnerSpeed > 1000 {
		d.partnerSpeed = 1000
	}
	d.mu.Lock()
	d.resetMAC()
	d.phyStart(d.clock.Now())
	d.mu.Unlock()
	return d, nil
}

// Model is the part this device poses as.
func (d *Device) Model() Model { return d.model }

// Counters are the device's counters.
func (d *Device) Counters() *Counters { return d.cnt }

// reg is the register at off, accessed atomically: with shared memory the driver's process
// reads the page directly.
func (d *Device) reg(off uint32) *uint32 { return (*uint32)(unsafe.Pointer(&d.regs[off])) }

func (d *Device) load(off uint32) uint32     { return atomic.LoadUint32(d.reg(off)) }
func (d *Device) store(off uint32, v uint32) { atomic.StoreUint32(d.reg(off), v) }

// causesKnown are the interrupt causes the model raises; ICS and IMS ignore the rest.
const causesKnown = regs.IntTXDW | regs.IntTXQE | regs.IntLSC | regs.IntRXO | regs.IntRXT0

// Read32 is an MMIO read. ICR clears on read.
func (d *Device) Read32(off uint32) uint32 {
	if d.gone.Load() {
		return ^uint32(0)
	}
	if !regs.InPage(off) {
		return 0
	}
	if off == regs.ICR {
		return atomic.SwapUint32(d.reg(regs.ICR), 0)
	}
	return d.load(off)
}

// Write32 is an MMIO write with the register's side effects.
func (d *Device) Write32(off, v uint32) {
	if !regs.InPage(off) {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fault == FaultGone {
		return
	}
	now := d.clock.Now()
	switch off {
	case regs.CTRL:
		d.writeCtrl(now, v)
	case regs.STATUS: // read only
	case regs.ICR:
		d.cnt.Doorbells.Add(1)
		d.clearCauses(v)
	case regs.ICS:
		d.cause(now, v&causesKnown)
	case regs.IMS:
		d.cnt.Doorbells.Add(1)
		d.store(regs.IMS, d.load(regs.IMS)|v&causesKnown)
		d.evaluate(now)
	case regs.IMC:
		d.store(regs.IMS, d.load(regs.IMS)&^v)
	case regs.ITR:
		d.store(regs.ITR, v&0xffff)
		if d.irqPending { // a new interval applies at once
			d.irqPending = false
			d.evaluate(now)
		}
	case regs.RDLEN, regs.TDLEN:
		d.store(off, v&0xfff80)
	case regs.RDT:
		d.cnt.Doorbells.Add(1)
		d.cnt.RDTWrites.Add(1)
		d.store(off, v&0xffff)
	case regs.TDT:
		d.cnt.Doorbells.Add(1)
		d.cnt.TDTWrites.Add(1)
		d.store(off, v&0xffff)
		d.wake()
	case regs.RDH, regs.TDH:
		d.store(off, v&0xffff)
	case regs.TCTL:
		d.store(off, v)
		d.wake()
	default:
		d.store(off, v)
	}
}

// wake makes Run poll again soon (new work or an earlier deadline).
func (d *Device) wake() {
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// Kick wakes Run, as a doorbell eventfd's reader does between processes.
func (d *Device) Kick() { d.wake() }

// writeCtrl handles CTRL: RST resets the MAC and clears itself; PHY_RST holds the PHY in reset
// for as long as it is set.
func (d *Device) writeCtrl(now time.Duration, v uint32) {
	wasPHYReset := d.load(regs.CTRL)&regs.CtrlPHYRST != 0
	if v&regs.CtrlRST != 0 {
		d.endPause(now)
		d.resetMAC()
		v = ctrlReset | v&regs.CtrlPHYRST
	}
	d.store(regs.CTRL, v)
	switch isPHYReset := v&regs.CtrlPHYRST != 0; {
	case isPHYReset && !wasPHYReset:
		d.phyInReset = true
		d.negotiating = false
		if d.model.PHYResetDegrades {
			d.degraded = true
		}
		d.setLink(now, false, 0)
	case !isPHYReset && wasPHYReset:
		d.phyInReset = false
		d.phyStart(now)
	}
	d.updateStatus()
}

// resetMAC puts every MAC register back to its reset value; the PHY and its link stay.
func (d *Device) resetMAC() {
	clear(d.regs)
	d.store(regs.CTRL, ctrlReset)
	d.store(regs.RAL, uint32(d.mac[0])|uint32(d.mac[1])<<8|uint32(d.mac[2])<<16|uint32(d.mac[3])<<24)
	d.store(regs.RAH, uint32(d.mac[4])|uint32(d.mac[5])<<8|regs.RahAV)
	d.updateStatus()
	d.irqPending, d.txBusy, d.asmBad = false, false, false
	d.asm = d.asm[:0]
}

// updateStatus mirrors the PHY into STATUS.
func (d *Device) updateStatus() {
	if d.fault == FaultGone {
		return
	}
	var s uint32
	if d.linkUp {
		s = regs.StatusLU | regs.StatusFD
		switch d.speed {
		case 1000:
			s |= regs.StatusSpeed1000
		case 100:
			s |= regs.StatusSpeed100
		}
	}
	if d.phyInReset {
		s |= regs.StatusPHYRA
	}
	if d.paused {
		s |= regs.StatusTXOFF
	}
	d.store(regs.STATUS, s)
}

// cause latches interrupt causes and raises the line if they are unmasked. An unmasked cause
// that arrives while the line is asserted rides on the outstanding interrupt and is counted
// for it.
func (d *Device) cause(now time.Duration, bits uint32) {
	if bits == 0 || d.fault == FaultGone {
		return
	}
	for {
		old := d.load(regs.ICR)
		if atomic.CompareAndSwapUint32(d.reg(regs.ICR), old, old|bits) {
			if old&regs.IntAsserted != 0 {
				d.countCauses(bits &^ old & d.load(regs.IMS))
				if bits&d.load(regs.IMS) != 0 {
					d.cnt.CausesAsserted.Add(1)
				}
			}
			break
		}
	}
	d.evaluate(now)
}

// clearCauses is ICR's write-1-to-clear; clearing every pending cause deasserts the line.
func (d *Device) clearCauses(bits uint32) {
	for {
		old := d.load(regs.ICR)
		v := old &^ bits
		if v&^regs.IntAsserted == 0 {
			v = 0
		}
		if atomic.CompareAndSwapUint32(d.reg(regs.ICR), old, v) {
			return
		}
	}
}

// itrInterval is the ITR's minimum interval between interrupts.
func (d *Device) itrInterval() time.Duration {
	return time.Duration(d.load(regs.ITR)&0xffff) * 256 * time.Nanosecond
}

// evaluate raises the line when an unmasked cause is pending, the line is not already asserted
// (INT_ASSERTED in ICR until the driver reads ICR), and the ITR interval has passed since the
// last interrupt; otherwise it schedules the interrupt for when the interval ends.
func (d *Device) evaluate(now time.Duration) {
	if d.fault == FaultGone {
		d.irqPending = false
		return
	}
	for {
		icr, ims := d.load(regs.ICR), d.load(regs.IMS)
		if icr&regs.IntAsserted != 0 || icr&ims == 0 {
			d.irqPending = false
			return
		}
		if due := d.lastIRQ + d.itrInterval(); d.everFired && now < due {
			if !d.irqPending || d.irqAt != due {
				if !d.irqPending {
					d.cnt.ITRHeld.Add(1)
				}
				d.irqPending, d.irqAt = true, due
				d.wake()
			}
			return
		}
		if !atomic.CompareAndSwapUint32(d.reg(regs.ICR), icr, icr|regs.IntAsserted) {
			continue // the driver read ICR meanwhile
		}
		d.irqPending = false
		d.everFired, d.lastIRQ = true, now
		d.cnt.Interrupts.Add(1)
		d.countCauses(icr & ims)
		if d.irq != nil {
			d.irq.Raise()
		}
		return
	}
}

func (d *Device) countCauses(causes uint32) {
	for _, c := range [...]struct {
		bit uint32
		n   *atomic.Uint64
	}{{regs.IntTXDW, d.cnt.IntTXDW}, {regs.IntTXQE, d.cnt.IntTXQE}, {regs.IntLSC, d.cnt.IntLSC},
		{regs.IntRXT0, d.cnt.IntRXT0}, {regs.IntRXO, d.cnt.IntRXO}} {
		if causes&c.bit != 0 {
			c.n.Add(1)
		}
	}
}

// Poll does what is due at the clock's current time and returns when it next has something to
// do (ok false: nothing until a register write or a frame arrives). Call it from one goroutine.
func (d *Device) Poll() (next time.Duration, ok bool) {
	d.DrainPosted()
	d.mu.Lock()
	if d.fault == FaultGone {
		d.mu.Unlock()
		return 0, false
	}
	now := d.clock.Now()
	if d.negotiating && now >= d.anegAt {
		d.negotiating = false
		d.setLink(now, true, d.negotiatedSpeed())
		d.resolveFlowControl()
	}
	if d.irqPending && now >= d.irqAt {
		d.irqPending = false
		d.evaluate(now)
	}
	batch := d.transmit(now)
	consider := func(t time.Duration) {
		if !ok || t < next {
			next, ok = t, true
		}
	}
	if d.negotiating {
		consider(d.anegAt)
	}
	if d.irqPending {
		consider(d.irqAt)
	}
	switch {
	case d.paused:
		consider(d.pauseUntil)
	case d.txBusy:
		consider(d.wireFree)
	}
	d.mu.Unlock()
	if len(batch) > 0 && d.wire != nil {
		d.wire.Transmit(batch)
	}
	return next, ok
}

// DrainPosted applies the register writes posted by a driver in another process and reports
// whether there were any. Poll does it; a goroutine that spins in the device's process (the
// wire's receive path) calls it too, so that writes land while nobody sleeps on the doorbell.
func (d *Device) DrainPosted() bool {
	if d.posted == nil || d.posted.Empty() {
		return false
	}
	d.drainMu.Lock()
	n, corrupt := d.posted.Drain(d.apply)
	d.drainMu.Unlock()
	if corrupt {
		d.cnt.BadDescriptors.Add(1)
	}
	return n > 0
}

// Run polls until stop closes, sleeping (or spinning, see DeviceConfig.SpinWait) until the next
// deadline or a wakeup. With the real clock only: a manual clock's tests call Poll themselves.
func (d *Device) Run(stop <-chan struct{}) { d.Runner()(stop) }

// Runner makes Run's timer now (and the goroutine that reads it) and returns Run: a caller
// that starts it in a goroutine has every goroutine of the device running when this returns.
func (d *Device) Runner() func(stop <-chan struct{}) {
	timer := newDeadlineTimer()
	return func(stop <-chan struct{}) {
		defer timer.Stop()
		d.run(stop, timer)
	}
}

func (d *Device) run(stop <-chan struct{}, timer *deadlineTimer) {
	for {
		next, ok := d.Poll()
		wait := time.Hour
		if ok {
			wait = max(next-d.clock.Now(), 0)
		}
		if wait < d.spinWait {
			if d.spin(stop, next) {
				return
			}
			continue
		}
		timer.Reset(wait)
		select {
		case <-stop:
			return
		case <-d.kick:
		case <-timer.C:
		}
	}
}

// spin yields until the deadline passes, a wakeup arrives or the driver posts a register
// write (applied at once: a spinning device needs no doorbell); true when stop closed.
func (d *Device) spin(stop <-chan struct{}, deadline time.Duration) (stopped bool) {
	for d.clock.Now() < deadline {
		select {
		case <-stop:
			return true
		case <-d.kick:
			return false
		default:
			if d.DrainPosted() {
				return false
			}
			runtime.Gosched()
			// The driver shares our CPU in the scenarios: let it run when its interrupt
			// woke it, or it waits out our time slice while the RX ring overflows.
			affinity.Yield()
		}
	}
	return false
}
