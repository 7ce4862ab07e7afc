package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nicstack/nicstack/drivers/intel/devsession"
	"github.com/nicstack/nicstack/drivers/intel/regs"
	"github.com/nicstack/nicstack/drivers/ipxe"
	"github.com/nicstack/nicstack/drivers/vfio"
	"github.com/nicstack/nicstack/netdev"
	"github.com/nicstack/nicstack/runtime/packetstream"
)

// LinkFunc hears the link go up (with the MAC from RAL/RAH, for the Uplink session's
// arguments) and down; it must not block (it runs in the interrupt loop).
type LinkFunc func(up bool, speedMbit int, mac net.HardwareAddr)

// Port is ipxe.Driver with the component's event loops around it: the device comes from a
// Platform device session, of the emulated NIC (register page reached through posted writes
// and a doorbell, DMA memory, an interrupt eventfd) or of a PCI device through VFIO (BAR0, DMA
// memory in the IOMMU, the interrupt's eventfd), frames go to and come from the router's Uplink session, which
// the component holds exactly while the link is up. The interrupt loop runs the interrupt
// handler; the uplink loop transmits what the router queued. They take turns on the driver,
// which is single-threaded. Its methods may be called from any goroutine.
type Port struct {
	cnt      *ipxe.Counters
	log      *slog.Logger
	onLink   LinkFunc
	watchdog time.Duration // how often the watchdog checks the device

	mu       sync.Mutex // the driver's turn: interrupt loop, uplink loop, config and sessions
	cfg      ipxe.Config
	drv      *ipxe.Driver
	closeDev func() error // the back end's
	stopIRQ  func()       // ends the interrupt loop
	wd       *loop
	up       *SessionUplink
	upLoop   *loop
	resume   chan struct{} // the interrupt handler made room in a TX ring that was full

	// The driver as the status reads its rings' depth: apart from mu, which a loop holds
	// for a whole burst, and cleared before the DMA memory is unmapped.
	depthMu  sync.Mutex
	depthDrv *ipxe.Driver
}

// loop is one goroutine of the port and how to stop it.
type loop struct {
	stop atomic.Bool
	wake func()
	done sync.WaitGroup
}

func (l *loop) end() {
	l.stop.Store(true)
	l.wake()
	l.done.Wait()
}

// New makes the port with no device yet; log hears the device's faults.
func New(cfg ipxe.Config, cnt *ipxe.Counters, log *slog.Logger, onLink LinkFunc) *Port {
	if cnt == nil {
		cnt = ipxe.NewCounters(nil)
	}
	return &Port{cfg: cfg, cnt: cnt, log: log, onLink: onLink, watchdog: ipxe.WatchdogInterval, resume: make(chan struct{}, 1)}
}

// pciIDWait bounds the wait for the device's process to fill in the PCI IDs.
const pciIDWait = time.Second

// backend is a device as a back end hands it to the port: the emulated NIC's device session
// or a PCI device through VFIO. Only the registers and DMA memory differ; the interrupt is an
// eventfd either way.
type backend struct {
	dev    ipxe.Device // Regs, DMA, DMABase, DeviceID
	irq    *devsession.Eventfd
	unmask func() // after each interrupt (VFIO's INTx line); nil: nothing to do
	close  func() error
}

// OpenDevice maps a Platform session of the emulated NIC, opens the driver (reset, rings,
// ITR, interrupt mask) and starts the interrupt loop. A link already up is reported at once.
func (p *Port) OpenDevice(files []*os.File) error {
	mem, err := devsession.Map(files)
	if err != nil {
		return err
	}
	vendor, device := mem.PCIID()
	for deadline := time.Now().Add(pciIDWait); vendor == 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
		vendor, device = mem.PCIID()
	}
	if _, err := ipxe.LookupModel(vendor, device); err != nil {
		mem.Close()
		return err
	}
	if len(mem.DMA) < ipxe.DMASize {
		mem.Close()
		return fmt.Errorf("ipxe_nic: device session has %d bytes of DMA memory, the driver needs %d", len(mem.DMA), ipxe.DMASize)
	}
	mmio, err := regs.NewPostedRegisters(mem.Regs, mem.Queue, mem.Doorbell.Raise)
	if err != nil {
		mem.Close()
		return err
	}
	return p.open(backend{dev: ipxe.Device{Regs: mmio, DMA: mem.DMA, DeviceID: device}, irq: mem.IRQ, close: mem.Close})
}

// OpenPCI opens the PCI device at pci through VFIO, from the container and group the
// supervisor's Platform service handed over, and drives it as OpenDevice does.
func (p *Port) OpenPCI(files []*os.File, pci string) error {
	if len(files) != 2 {
		return fmt.Errorf("ipxe_nic: the Platform session of %s has %d files, want the VFIO container and group", pci, len(files))
	}
	dev, err := vfio.Open(files[0], files[1], pci, ipxe.DMASize)
	if err != nil {
		return err
	}
	if _, err := ipxe.LookupModel(dev.Vendor, dev.DeviceID); err != nil {
		dev.Close()
		return fmt.Errorf("%s: %w", pci, err)
	}
	irq, err := devsession.NewEventfd(dev.IRQ)
	if err != nil {
		dev.Close()
		return err
	}
	return p.open(backend{
		dev: ipxe.Device{Regs: dev.Regs(), DMA: dev.DMA, DMABase: vfio.IOVA, DeviceID: dev.DeviceID},
		irq: irq, unmask: dev.Unmask,
		close: func() error { return errors.Join(irq.Close(), dev.Close()) },
	})
}

// open opens the driver on b and starts the interrupt and watchdog loops; b is closed on
// failure.
func (p *Port) open(b backend) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drv != nil {
		b.close()
		return errors.New("ipxe_nic: the driver already drives a device")
	}
	b.dev.Counters, b.dev.Log = p.cnt, p.log
	drv, err := ipxe.Open(b.dev, p.cfg, p.linkChanged)
	if err != nil {
		b.close()
		return err
	}
	if p.up != nil {
		drv.SetUplink(p.up)
	}
	p.drv, p.closeDev = drv, b.close
	p.setDepthDriver(drv)
	p.stopIRQ = b.irq.Serve(func() { p.interrupt(drv, b.unmask) })
	stop := make(chan struct{})
	p.wd = &loop{wake: func() { close(stop) }}
	p.wd.done.Go(func() { p.watchdogLoop(drv, stop) })
	if up, speed := drv.Link(); up {
		p.linkChanged(up, speed)
	}
	return nil
}

// CloseDevice stops the interrupt loop and unmaps the session: the device went away, so its
// registers are not touched any more. The link counts as down.
func (p *Port) CloseDevice() {
	p.mu.Lock()
	stopIRQ, wd, closeDev, drv := p.stopIRQ, p.wd, p.closeDev, p.drv
	p.mu.Unlock()
	if drv == nil {
		return
	}
	stopIRQ() // they take the driver's turn: not under mu
	wd.end()
	p.mu.Lock()
	defer p.mu.Unlock()
	if up, _ := drv.Link(); up {
		p.linkChanged(false, 0)
	}
	p.drv, p.closeDev, p.stopIRQ, p.wd = nil, nil, nil, nil
	p.setDepthDriver(nil)
	closeDev()
}

func (p *Port) setDepthDriver(drv *ipxe.Driver) {
	p.depthMu.Lock()
	defer p.depthMu.Unlock()
	p.depthDrv = drv
}

// TXQueue is the TX ring's depth (ipxe.Driver.TXQueue), zero without a device; any goroutine
// may ask, without waiting for the driver's turn.
func (p *Port) TXQueue() netdev.Depth {
	p.depthMu.Lock()
	defer p.depthMu.Unlock()
	if p.depthDrv == nil {
		return netdev.Depth{}
	}
	return p.depthDrv.TXQueue()
}

// RXQueue is the RX ring's depth (ipxe.Driver.RXQueue), as TXQueue.
func (p *Port) RXQueue() netdev.Depth {
	p.depthMu.Lock()
	defer p.depthMu.Unlock()
	if p.depthDrv == nil {
		return netdev.Depth{}
	}
	return p.depthDrv.RXQueue()
}

// linkChanged runs with mu held, from the interrupt handler or OpenDevice.
func (p *Port) linkChanged(up bool, speed int) {
	if !up && p.drv != nil {
		p.drv.SetUplink(nil) // frames are dropped until the session comes back
	}
	if p.onLink != nil {
		var mac net.HardwareAddr
		if p.drv != nil {
			mac = p.drv.MAC()
		}
		p.onLink(up, speed, mac)
	}
}

// interrupt runs the handler for one interrupt (the interrupt eventfd's Serve calls it); when
// the handler made room for a TX backlog it tells the uplink loop.
func (p *Port) interrupt(drv *ipxe.Driver, unmask func()) {
	p.mu.Lock()
	drv.HandleInterrupt()
	stalled := drv.TXStalled()
	p.mu.Unlock()
	if unmask != nil {
		unmask()
	}
	if !stalled {
		select {
		case p.resume <- struct{}{}:
		default:
		}
	}
}

// watchdogLoop runs the driver's watchdog until stop closes: a device that vanished or
// whose DMA fails raises no interrupt to tell of it.
func (p *Port) watchdogLoop(drv *ipxe.Driver, stop <-chan struct{}) {
	t := time.NewTicker(p.watchdog)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		p.mu.Lock()
		drv.Watchdog()
		p.mu.Unlock()
	}
}

// Configure applies a config at once (a new ITR is written to the device).
func (p *Port) Configure(cfg ipxe.Config) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drv != nil {
		if err := p.drv.Configure(cfg); err != nil {
			return err
		}
	}
	p.cfg = cfg
	return nil
}

// AttachUplink binds the router's Uplink session and starts the uplink loop.
func (p *Port) AttachUplink(c *packetstream.Client) error {
	// Interrupt-driven: the driver's CPU time is what throttling saves. In the netpoller, as
	// the router's loop: with only one of the two there the seed scenario lost 3-10 %
	// (834-906 against 930 Mbit/s).
	w, err := packetstream.NewSignalWaiter(c.RX)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.up != nil {
		w.Close()
		return errors.New("ipxe_nic: an Uplink session is already open")
	}
	p.up = NewSessionUplink(c, p.cnt)
	if p.drv != nil {
		if up, _ := p.drv.Link(); up {
			p.drv.SetUplink(p.up)
		}
	}
	l := &loop{wake: w.Wake}
	p.upLoop = l
	l.done.Go(func() {
		defer w.Close()
		p.uplinkLoop(w, l)
	})
	return nil
}

// DetachUplink stops the uplink loop and unbinds the session; it returns once nothing
// touches it.
func (p *Port) DetachUplink() {
	p.mu.Lock()
	l := p.upLoop
	p.upLoop = nil
	p.mu.Unlock()
	if l == nil {
		return
	}
	l.end()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drv != nil {
		p.drv.SetUplink(nil)
	}
	p.up = nil
}

// uplinkLoop transmits what the router queues; while the TX ring is full it leaves the
// backlog to the interrupt handler and waits for it to make room.
func (p *Port) uplinkLoop(w *packetstream.Waiter, l *loop) {
	for !l.stop.Load() {
		p.mu.Lock()
		stalled := false
		if p.drv != nil {
			p.drv.Transmit()
			stalled = p.drv.TXStalled()
		}
		p.mu.Unlock()
		if !stalled {
			w.Wait()
			continue
		}
		select { // Wake from end() lands in the Waiter; poll it now and then
		case <-p.resume:
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// MAC is the device's address (nil without a device).
func (p *Port) MAC() net.HardwareAddr {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drv == nil {
		return nil
	}
	return p.drv.MAC()
}

// TrackCPU stores the process's CPU time in microseconds in ctr every interval until stop
// closes: the driver's cost, read with the other counters.
func TrackCPU(ctr *atomic.Uint64, interval time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		var ru unix.Rusage
		if unix.Getrusage(unix.RUSAGE_SELF, &ru) == nil {
			ctr.Store(uint64(ru.Utime.Nano()/1000 + ru.Stime.Nano()/1000))
		}
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}
