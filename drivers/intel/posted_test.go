package intel

import (
	"testing"
	"time"
	"unsafe"

	"github.com/nicstack/nicstack/drivers/intel/regs"
)

// TestSpinningDeviceAppliesPostedWrites: a device spinning toward a near deadline applies the
// writes a driver posts without ringing the doorbell (the doorbell's reader may not run while
// the device's goroutines spin on the process's one P).
func TestSpinningDeviceAppliesPostedWrites(t *testing.T) {
	page := unsafe.Slice((*byte)(unsafe.Pointer(&make([]uint64, regs.RegisterPageSize/8)[0])), regs.RegisterPageSize)
	qmem := unsafe.Slice((*byte)(unsafe.Pointer(&make([]uint64, regs.WriteQueueSize/8)[0])), regs.WriteQueueSize)
	q, err := regs.NewWriteQueue(qmem)
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(page, make([]byte, 4096), DeviceConfig{MAC: DefaultMAC, Posted: q, SpinWait: time.Hour, Autoneg: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { d.Run(stop); close(done) }()
	defer func() { close(stop); <-done }()
	p, err := regs.NewPostedRegisters(page, q, nil) // no doorbell at all
	if err != nil {
		t.Fatal(err)
	}
	p.Write32(regs.ITR, 651)
	p.Read32(regs.ITR)                // Run has polled
	time.Sleep(10 * time.Millisecond) // and spins toward its deadline
	p.Write32(regs.IMS, regs.IntRXT0)
	if got := p.Read32(regs.IMS); got != regs.IntRXT0 || p.Stalls.Load() != 0 {
		t.Fatalf("IMS %#x after a posted write, stalls %d; want %#x and 0", got, p.Stalls.Load(), regs.IntRXT0)
	}
}
