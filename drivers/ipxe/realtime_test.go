package ipxe_test

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nicstack/nicstack/drivers/intel"
	"github.com/nicstack/nicstack/drivers/intel/regs"
	"github.com/nicstack/nicstack/drivers/ipxe"
)

// threadClock is the CPU clock of one OS thread (Linux's MAKE_THREAD_CPUCLOCK(tid, SCHED)).
type threadClock int32

func lockedThread() threadClock {
	runtime.LockOSThread()
	return threadClock(unix.Gettid())
}

func (c threadClock) cpu() time.Duration {
	var ts unix.Timespec
	unix.ClockGettime(int32(^int32(c)<<3|6), &ts)
	return time.Duration(ts.Nano())
}

// realTimeResult is one point of the real-time run.
type realTimeResult struct {
	itr                       uint32
	batch                     bool
	irqsPerS, irqsPerKframe   float64
	txIrqs                    uint64
	doorbellsPerKframe        float64
	driverCPU, hwCPU, wireCPU float64 // percent of one CPU
	mbpsTX, mbpsRX            float64
}

// runRealTime is the process layout in goroutines, each on its own OS thread: the device
// (Run, spinning short waits), its doorbell reader (the ioeventfd), the wire feeding frames at
// the link rate, and the driver woken by an interrupt eventfd, writing registers through the
// posted-write queue. CPU is each thread's own.
func runRealTime(tb testing.TB, itr uint32, batch bool, dur time.Duration) realTimeResult {
	cfg := ipxe.Config{RxIrqThrottle: itr, TxBatch: batch, TxIrq: ipxe.TxIrqQueueEmpty}
	if !batch {
		cfg.TxIrq = ipxe.TxIrqDescriptorDone
	}
	var fds [2]int
	for i := range fds {
		fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
		if err != nil {
			tb.Fatal(err)
		}
		fds[i] = fd
	}
	irq, doorbell := regs.Eventfd(fds[0]), regs.Eventfd(fds[1])
	page, dma := make([]byte, regs.RegisterPageSize), make([]byte, ipxe.DMASize)
	q, err := regs.NewWriteQueue(make([]byte, regs.WriteQueueSize))
	if err != nil {
		tb.Fatal(err)
	}
	wire := &countingWire{}
	m, _ := intel.ModelByName("82574L")
	dev, err := intel.New(page, dma, intel.DeviceConfig{
		Model: m, MAC: nicMAC, IRQ: irq, Wire: wire, Posted: q, Autoneg: time.Millisecond,
		SpinWait: 2 * time.Millisecond,
	})
	if err != nil {
		tb.Fatal(err)
	}
	mmio, err := regs.NewPostedRegisters(page, q, doorbell.Raise)
	if err != nil {
		tb.Fatal(err)
	}
	var stop atomic.Bool
	stopDevice := make(chan struct{})
	// the threads: device, doorbell reader, wire, driver
	var threads [4]threadClock
	var wg, started sync.WaitGroup
	started.Add(len(threads))
	thread := func(i int) {
		threads[i] = lockedThread()
		started.Done()
	}
	wg.Go(func() {
		thread(0)
		dev.Run(stopDevice)
	})
	wg.Go(func() { // the hypervisor's ioeventfd: doorbell writes wake the device
		thread(1)
		for doorbell.Wait() == nil && !stop.Load() {
			dev.Kick()
		}
	})
	wg.Go(func() { // the link partner, sending 1514-byte frames at the link rate
		thread(2)
		f := frame(nicMAC, 1514, 3)
		batch := [][]byte{f, f, f, f, f, f, f, f, f, f, f, f, f, f, f, f}
		for !stop.Load() {
			dev.Receive(batch)
			time.Sleep(dev.ReceiveWait())
		}
	})
	up := &saturatedUplink{frame: frame(nicMAC, 1514, 1), bulk: make([]byte, 2048)}
	var drv *ipxe.Driver
	ready := make(chan error, 1)
	var driverRX atomic.Uint64
	wg.Go(func() { // the driver component's event loop
		thread(3)
		var err error
		drv, err = ipxe.Open(ipxe.Device{Regs: mmio, DMA: dma, DeviceID: m.DeviceID}, cfg, nil)
		ready <- err
		if err != nil {
			return
		}
		opened := false
		for irq.Wait() == nil && !stop.Load() {
			drv.HandleInterrupt()
			if linkUp, _ := drv.Link(); linkUp && !opened {
				opened = true
				drv.SetUplink(up)
				drv.Transmit()
			}
			driverRX.Store(uint64(up.rx))
		}
	})
	if err := <-ready; err != nil {
		tb.Fatal(err)
	}
	started.Wait()
	time.Sleep(100 * time.Millisecond) // link up, rings full
	c := dev.Counters()
	type snap struct {
		at                        time.Time
		irqs, txdw, txqe, tdt, tx uint64
		txBytes, rx               uint64
		cpu                       [4]time.Duration
	}
	take := func() (s snap) {
		s.at = time.Now()
		s.irqs, s.txdw, s.txqe, s.tdt = c.Interrupts.Load(), c.IntTXDW.Load(), c.IntTXQE.Load(), c.TDTWrites.Load()
		s.tx, s.txBytes, s.rx = c.TXFrames.Load(), c.TXBytes.Load(), driverRX.Load()
		for i, t := range threads {
			s.cpu[i] = t.cpu()
		}
		return s
	}
	s0 := take()
	time.Sleep(dur)
	s1 := take()
	stop.Store(true)
	close(stopDevice)
	irq.Raise()
	doorbell.Raise()
	wg.Wait()
	unix.Close(fds[0])
	unix.Close(fds[1])

	secs := s1.at.Sub(s0.at).Seconds()
	tx, rx := s1.tx-s0.tx, s1.rx-s0.rx
	irqs := s1.irqs - s0.irqs
	pct := func(i int) float64 { return 100 * (s1.cpu[i] - s0.cpu[i]).Seconds() / secs }
	return realTimeResult{
		itr: itr, batch: batch,
		irqsPerS:           float64(irqs) / secs,
		irqsPerKframe:      float64(irqs) * 1000 / float64(max(tx+rx, 1)),
		txIrqs:             s1.txdw - s0.txdw + s1.txqe - s0.txqe,
		doorbellsPerKframe: float64(s1.tdt-s0.tdt) * 1000 / float64(max(tx, 1)),
		driverCPU:          pct(3),
		hwCPU:              pct(0) + pct(1),
		wireCPU:            pct(2),
		mbpsTX:             float64(s1.txBytes-s0.txBytes) * 8 / secs / 1e6,
		mbpsRX:             float64(rx) * 1514 * 8 / secs / 1e6,
	}
}

// BenchmarkRealTime prints the driver table on the real clock, the component layout in
// goroutines: go test -run '^$' -bench RealTime -benchtime 1x ./drivers/ipxe/ (2 s per point).
// The device spins for waits under 2 ms (it stands for hardware; its CPU is reported apart).
func BenchmarkRealTime(b *testing.B) {
	var rows []realTimeResult
	for _, batch := range []bool{false, true} {
		for _, itr := range []uint32{0, 651, 5580} {
			b.Run(fmt.Sprintf("rx_irq_throttle=%d/tx_batch=%v", itr, batch), func(b *testing.B) {
				var r realTimeResult
				for range b.N {
					r = runRealTime(b, itr, batch, 2*time.Second)
				}
				b.ReportMetric(r.irqsPerS, "irqs/s")
				b.ReportMetric(r.driverCPU, "driver_cpu%")
				rows = append(rows, r)
			})
		}
	}
	fmt.Println("rx_irq_throttle tx_batch   irqs/s irqs/kframe  tx_irqs doorbells/kframe driver_cpu% hw_cpu% wire_cpu% tx_Mbit/s rx_Mbit/s")
	for _, r := range rows {
		fmt.Printf("%15d %8v %8.0f %11.1f %8d %16.1f %11.1f %7.1f %9.1f %9.0f %9.0f\n",
			r.itr, r.batch, r.irqsPerS, r.irqsPerKframe, r.txIrqs, r.doorbellsPerKframe,
			r.driverCPU, r.hwCPU, r.wireCPU, r.mbpsTX, r.mbpsRX)
	}
}
