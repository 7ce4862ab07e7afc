package intel

import (
	"sync/atomic"
	"time"

	"github.com/nicstack/nicstack/drivers/intel/regs"
)

// Fault is a failure of the hardware a test injects, to see a driver live through what a real
// NIC does when it is pulled, when the IOMMU refuses its DMA, or when its firmware goes wrong.
type Fault int

const (
	// FaultNone is a working device. Injected after FaultGone, the device comes back as
	// after a hot plug: out of reset, its PHY negotiating.
	FaultNone Fault = iota
	// FaultGone is a surprise removal: every register reads all ones (as a PCIe read of a
	// device that is not there completes), writes are lost, the device does no DMA and
	// raises no interrupt.
	FaultGone
	// FaultDMA is an IOMMU that refuses the device's DMA: transmit descriptors cannot be
	// fetched, so the transmit queue stops where it is, and received frames are lost.
	// Registers and interrupts still work.
	FaultDMA
	// FaultGarbage is a device that writes nonsense back into receive descriptors: lengths
	// past the buffer, done without end of packet, error bits, zero lengths, in turn. Frame
	// data is not written.
	FaultGarbage
)

func (f Fault) String() string {
	return [...]string{"none", "gone", "dma", "garbage"}[f]
}

// Inject puts the device into fault f (FaultNone heals it).
func (d *Device) Inject(f Fault) {
	d.mu.Lock()
	defer d.mu.Unlock()
	was := d.fault
	d.fault = f
	d.gone.Store(f == FaultGone)
	switch {
	case f == FaultGone:
		// A driver in another process reads the page itself: it must read all ones too.
		for off := uint32(0); off < regs.RegisterPageSize; off += 4 {
			d.store(off, ^uint32(0))
		}
		d.irqPending, d.txBusy = false, false
	case was == FaultGone:
		now := d.clock.Now()
		d.resetMAC()
		d.linkUp, d.speed, d.negotiating, d.phyInReset, d.degraded = false, 0, false, false, false
		d.updateStatus()
		d.phyStart(now)
	}
}

// garbageRX writes the next of FaultGarbage's nonsense into a receive descriptor (d.mu held).
func (d *Device) garbageRX(desc uint64) {
	kinds := [...]struct{ length, status uint32 }{
		{0xffff, regs.RxStatusDD | regs.RxStatusEOP},
		{64, regs.RxStatusDD},
		{64, regs.RxStatusDD | regs.RxStatusEOP | regs.RxErrRXE<<8}, // an error
		{0, regs.RxStatusDD | regs.RxStatusEOP},
		{0x0801, regs.RxStatusDD | regs.RxStatusEOP | 0xfc<<16}, // one byte past 2048, checksum bits
	}
	k := kinds[d.garbage%uint32(len(kinds))]
	d.garbage++
	le.PutUint32(d.dma[desc+regs.DescLenOff:], k.length)
	atomic.StoreUint32(d.statusWord(desc), k.status)
	d.cnt.RXDescriptors.Add(1)
}

// faultReceive takes frames for a device in fault: none reach memory; FaultGarbage still
// writes descriptors back (d.mu held).
func (d *Device) faultReceive(now time.Duration, frames [][]byte) {
	if d.fault != FaultGarbage {
		d.cnt.RXDropped.Add(uint64(len(frames)))
		return
	}
	base, n, head, tail, ok := d.ring(regs.RDBAL, regs.RDBAH, regs.RDLEN, regs.RDH, regs.RDT)
	if !ok {
		return
	}
	for range frames {
		if head == tail {
			break
		}
		d.garbageRX(base + uint64(head)*regs.DescSize)
		head = (head + 1) % n
	}
	d.store(regs.RDH, head)
	d.cause(now, regs.IntRXT0)
}
