package intel

import (
	"bytes"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/nicstack/nicstack/drivers/intel/regs"
)

var testMAC = net.HardwareAddr{0x02, 0x00, 0x00, 0xaa, 0xbb, 0xcc}

type captureWire struct{ frames [][]byte }

func (w *captureWire) Transmit(frames [][]byte) {
	for _, f := range frames {
		w.frames = append(w.frames, bytes.Clone(f))
	}
}

type rig struct {
	d     *Device
	clock *regs.ManualClock
	irq   ChanIRQ
	wire  *captureWire
	dma   []byte
}

func newRig(t *testing.T, model string, partner int) *rig {
	t.Helper()
	m, ok := ModelByName(model)
	if !ok {
		t.Fatalf("no model %q", model)
	}
	r := &rig{clock: &regs.ManualClock{}, irq: NewChanIRQ(), wire: &captureWire{}, dma: make([]byte, 1<<20)}
	d, err := New(make([]byte, regs.RegisterPageSize), r.dma, DeviceConfig{
		Model: m, MAC: testMAC, Clock: r.clock, IRQ: r.irq, Wire: r.wire, Autoneg: time.Millisecond,
		PartnerSpeed: partner,
	})
	if err != nil {
		t.Fatal(err)
	}
	r.d = d
	return r
}

// step advances the clock and lets the device do what is due.
func (r *rig) step(dt time.Duration) {
	r.clock.Advance(dt)
	r.d.Poll()
}

func (r *rig) linkUp(t *testing.T) {
	t.Helper()
	r.step(2 * time.Millisecond)
	if up, _ := r.d.Link(); !up {
		t.Fatal("link did not come up")
	}
	r.d.Read32(regs.ICR)
	r.takeIRQ()
}

func (r *rig) takeIRQ() bool {
	select {
	case <-r.irq:
		return true
	default:
		return false
	}
}

const (
	txRing = 0x0000
	rxRing = 0x1000
	txBufs = 0x10000
	rxBufs = 0x20000
)

// setupRings points 8-entry rings at DMA memory; RX descriptors get 2048-byte buffers.
func (r *rig) setupRings() {
	d := r.d
	d.Write32(regs.TDBAL, txRing)
	d.Write32(regs.TDLEN, 8*regs.DescSize)
	d.Write32(regs.RDBAL, rxRing)
	d.Write32(regs.RDLEN, 8*regs.DescSize)
	for i := range 8 {
		le.PutUint64(r.dma[rxRing+i*regs.DescSize:], uint64(rxBufs+i*2048))
	}
	d.Write32(regs.RDT, 7)
	d.Write32(regs.RCTL, regs.RctlEN|regs.RctlBAM|regs.RctlSECRC)
	d.Write32(regs.TCTL, regs.TctlEN|regs.TctlPSP)
}

// queueTX writes a frame into TX descriptor i.
func (r *rig) queueTX(i int, frame []byte, cmd uint32) {
	buf := txBufs + i*2048
	copy(r.dma[buf:], frame)
	desc := txRing + i*regs.DescSize
	le.PutUint64(r.dma[desc:], uint64(buf))
	le.PutUint32(r.dma[desc+8:], uint32(len(frame))|cmd<<regs.TxCmdShift)
	le.PutUint32(r.dma[desc+12:], 0)
}

func frameTo(dst net.HardwareAddr, n int, seq byte) []byte {
	f := make([]byte, n)
	copy(f, dst)
	copy(f[6:], testMAC)
	f[12], f[13] = 0x88, 0xb5
	for i := 14; i < n; i++ {
		f[i] = seq + byte(i)
	}
	return f
}

func TestResetValues(t *testing.T) {
	r := newRig(t, "82574L", 0)
	d := r.d
	if got := d.Read32(regs.CTRL); got != ctrlReset {
		t.Errorf("CTRL = %#x, want %#x", got, ctrlReset)
	}
	if got := d.Read32(regs.STATUS); got&regs.StatusLU != 0 {
		t.Errorf("STATUS = %#x: link up before auto-negotiation finished", got)
	}
	for _, off := range []uint32{regs.ICR, regs.ITR, regs.IMS, regs.RCTL, regs.TCTL, regs.RDH, regs.RDT, regs.TDH, regs.TDT, regs.RDLEN, regs.TDLEN} {
		if got := d.Read32(off); got != 0 {
			t.Errorf("register %#x = %#x after reset, want 0", off, got)
		}
	}
	if ral, rah := d.Read32(regs.RAL), d.Read32(regs.RAH); ral != 0xaa000002 || rah != regs.RahAV|0xccbb {
		t.Errorf("RAL/RAH = %#x/%#x, want the permanent MAC", ral, rah)
	}
	r.step(2 * time.Millisecond)
	if got := d.Read32(regs.STATUS); got&(regs.StatusLU|regs.StatusFD|regs.StatusSpeedMask) != regs.StatusLU|regs.StatusFD|regs.StatusSpeed1000 {
		t.Errorf("STATUS = %#x after auto-negotiation, want link up, full duplex, 1000", got)
	}
	// A MAC reset keeps the link and restores the registers.
	d.Write32(regs.IMS, regs.IntRXT0)
	d.Write32(regs.ITR, 651)
	d.Write32(regs.CTRL, ctrlReset|regs.CtrlRST)
	if d.Read32(regs.CTRL)&regs.CtrlRST != 0 || d.Read32(regs.IMS) != 0 || d.Read32(regs.ITR) != 0 {
		t.Errorf("after CTRL.RST: CTRL %#x IMS %#x ITR %#x", d.Read32(regs.CTRL), d.Read32(regs.IMS), d.Read32(regs.ITR))
	}
	if d.Read32(regs.STATUS)&regs.StatusLU == 0 {
		t.Error("a MAC reset took the link down")
	}
}

func TestICRReadToClear(t *testing.T) {
	r := newRig(t, "82574L", 0)
	d := r.d
	d.Write32(regs.ICS, regs.IntTXDW|regs.IntRXT0)
	if got := d.Read32(regs.ICR); got != regs.IntTXDW|regs.IntRXT0 && got != regs.IntTXDW|regs.IntRXT0|regs.IntLSC {
		t.Errorf("ICR = %#x, want TXDW|RXT0", got)
	}
	if got := d.Read32(regs.ICR); got != 0 {
		t.Errorf("second ICR read = %#x, want 0", got)
	}
	d.Write32(regs.ICS, regs.IntTXDW|regs.IntRXT0)
	d.Write32(regs.ICR, regs.IntTXDW) // write-1-to-clear
	if got := d.Read32(regs.ICR); got != regs.IntRXT0 {
		t.Errorf("ICR after clearing TXDW = %#x, want RXT0", got)
	}
}

func TestIMSMasking(t *testing.T) {
	r := newRig(t, "82574L", 0)
	d := r.d
	d.Write32(regs.ICS, regs.IntTXDW)
	if r.takeIRQ() || d.Counters().Interrupts.Load() != 0 {
		t.Fatal("a masked cause raised an interrupt")
	}
	d.Write32(regs.IMS, regs.IntTXQE)
	if r.takeIRQ() {
		t.Fatal("TXDW raised an interrupt with only TXQE unmasked")
	}
	d.Write32(regs.IMS, regs.IntTXDW) // the pending cause fires once it is unmasked
	if !r.takeIRQ() {
		t.Fatal("unmasking a pending cause raised no interrupt")
	}
	if got := d.Read32(regs.ICR); got&regs.IntAsserted == 0 || got&regs.IntTXDW == 0 {
		t.Errorf("ICR = %#x, want INT_ASSERTED|TXDW", got)
	}
	if got := d.Read32(regs.IMS); got != regs.IntTXDW|regs.IntTXQE {
		t.Errorf("IMS = %#x", got)
	}
	d.Write32(regs.IMC, regs.IntTXDW)
	d.Write32(regs.ICS, regs.IntTXDW)
	if r.takeIRQ() {
		t.Error("IMC did not mask TXDW")
	}
	d.Write32(regs.ICS, regs.IntTXQE)
	if !r.takeIRQ() {
		t.Error("TXQE still unmasked but raised no interrupt")
	}
	if c := d.Counters(); c.Interrupts.Load() != 2 || c.IntTXDW.Load() != 1 || c.IntTXQE.Load() != 1 {
		t.Errorf("interrupts %d, TXDW %d, TXQE %d; want 2, 1, 1",
			c.Interrupts.Load(), c.IntTXDW.Load(), c.IntTXQE.Load())
	}
}

// TestITRSpacing raises a cause every microsecond and services every interrupt at once: the
// interrupts must still be ITR x 256 ns apart on the model's clock, and with ITR 0 every cause
// fires at once.
func TestITRSpacing(t *testing.T) {
	for _, itr := range []uint32{0, 651, 5580} {
		r := newRig(t, "82574L", 0)
		d := r.d
		d.Write32(regs.IMS, regs.IntRXT0)
		d.Write32(regs.ITR, itr)
		var fired []time.Duration
		const steps = 20000
		service := func() {
			if r.takeIRQ() {
				fired = append(fired, r.clock.Now())
				d.Read32(regs.ICR)
			}
		}
		for range steps {
			d.Write32(regs.ICS, regs.IntRXT0)
			service()
			r.step(time.Microsecond)
			service()
		}
		interval := time.Duration(itr) * 256 * time.Nanosecond
		for i := 1; i < len(fired); i++ {
			if gap := fired[i] - fired[i-1]; gap < interval {
				t.Fatalf("ITR %d: interrupts %v apart, minimum %v", itr, gap, interval)
			}
		}
		want := steps
		if itr > 0 {
			want = int(steps*time.Microsecond/interval) + 1
		}
		if len(fired) < want-1 || len(fired) > want {
			t.Errorf("ITR %d: %d interrupts in %d µs, want about %d", itr, len(fired), steps, want)
		}
		if got := d.Counters().Interrupts.Load(); got != uint64(len(fired)) {
			t.Errorf("ITR %d: counted %d interrupts, saw %d", itr, got, len(fired))
		}
	}
}

// TestWhyNoInterrupt: with ITR 0 every cause event raises an interrupt once the driver has read
// ICR, and one that comes before rides on the outstanding interrupt and is counted as such;
// with ITR set, an interrupt due inside the interval is held back and counted.
func TestWhyNoInterrupt(t *testing.T) {
	r := newRig(t, "82574L", 0)
	d := r.d
	d.Write32(regs.IMS, regs.IntRXT0)
	c := d.Counters()
	d.Write32(regs.ICS, regs.IntRXT0) // fires
	d.Write32(regs.ICS, regs.IntRXT0) // the driver has not read ICR: rides on it
	d.Write32(regs.ICS, regs.IntRXT0)
	if c.Interrupts.Load() != 1 || c.CausesAsserted.Load() != 2 || !r.takeIRQ() {
		t.Fatalf("%d interrupts, %d causes while asserted; want 1 and 2", c.Interrupts.Load(), c.CausesAsserted.Load())
	}
	d.Read32(regs.ICR)
	d.Write32(regs.ICS, regs.IntRXT0) // fires at once: ITR 0
	if c.Interrupts.Load() != 2 || c.ITRHeld.Load() != 0 {
		t.Fatalf("%d interrupts, %d held by ITR; want 2 and 0", c.Interrupts.Load(), c.ITRHeld.Load())
	}
	d.Read32(regs.ICR)
	d.Write32(regs.ITR, 651)
	d.Write32(regs.ICS, regs.IntRXT0) // within 166 µs of the last: held
	d.Write32(regs.ICS, regs.IntRXT0)
	if c.Interrupts.Load() != 2 || c.ITRHeld.Load() != 1 {
		t.Fatalf("%d interrupts, %d held by ITR; want 2 and 1", c.Interrupts.Load(), c.ITRHeld.Load())
	}
	r.step(651 * 256 * time.Nanosecond)
	if c.Interrupts.Load() != 3 {
		t.Fatalf("%d interrupts after the interval, want 3", c.Interrupts.Load())
	}
}

func TestDescriptorWriteBack(t *testing.T) {
	r := newRig(t, "82574L", 0)
	d := r.d
	r.linkUp(t)
	r.setupRings()

	// TX: three frames, the second split over two descriptors; RS on all but the first.
	f0, f1, f2 := frameTo(testMAC, 60, 1), frameTo(testMAC, 1514, 2), frameTo(testMAC, 100, 3)
	r.queueTX(0, f0, regs.TxCmdEOP|regs.TxCmdIFCS)
	r.queueTX(1, f1[:700], regs.TxCmdIFCS|regs.TxCmdRS)
	r.queueTX(2, f1[700:], regs.TxCmdEOP|regs.TxCmdIFCS|regs.TxCmdRS)
	r.queueTX(3, f2, regs.TxCmdEOP|regs.TxCmdIFCS|regs.TxCmdRS)
	d.Write32(regs.IMS, regs.IntTXDW|regs.IntTXQE)
	d.Write32(regs.TDT, 4)
	for range 10 {
		r.step(10 * time.Microsecond)
	}
	if len(r.wire.frames) != 3 || !bytes.Equal(r.wire.frames[0], f0) ||
		!bytes.Equal(r.wire.frames[1], f1) || !bytes.Equal(r.wire.frames[2], f2) {
		t.Fatalf("wire got %d frames, not the three sent intact", len(r.wire.frames))
	}
	for i, want := range []byte{0, regs.TxStaDD, regs.TxStaDD, regs.TxStaDD} {
		if got := r.dma[txRing+i*regs.DescSize+12] & regs.TxStaDD; got != want {
			t.Errorf("TX descriptor %d: DD = %d, want %d", i, got, want)
		}
	}
	if got := d.Read32(regs.TDH); got != 4 {
		t.Errorf("TDH = %d, want 4", got)
	}
	if !r.takeIRQ() {
		t.Error("no TX interrupt")
	}
	if got := d.Read32(regs.ICR); got&(regs.IntTXDW|regs.IntTXQE) != regs.IntTXDW|regs.IntTXQE {
		t.Errorf("ICR = %#x, want TXDW and TXQE", got)
	}

	// RX: one frame lands in descriptor 0 with DD and EOP and its length.
	in := frameTo(testMAC, 1000, 9)
	if n := d.Receive([][]byte{in}); n != 1 {
		t.Fatalf("Receive accepted %d", n)
	}
	desc := r.dma[rxRing:]
	if st := desc[12]; st != regs.RxStatusDD|regs.RxStatusEOP {
		t.Errorf("RX status = %#x, want DD|EOP", st)
	}
	if n := le.Uint16(desc[8:]); n != 1000 || !bytes.Equal(r.dma[rxBufs:rxBufs+1000], in) {
		t.Errorf("RX length %d or bytes wrong", n)
	}
	if got := d.Read32(regs.RDH); got != 1 {
		t.Errorf("RDH = %d, want 1", got)
	}
	if d.Read32(regs.ICR)&regs.IntRXT0 == 0 {
		t.Error("no RXT0 cause")
	}
	// A frame for another unicast address is filtered.
	d.Receive([][]byte{frameTo(net.HardwareAddr{2, 9, 9, 9, 9, 9}, 100, 0)})
	if c := d.Counters(); c.RXFrames.Load() != 1 || c.RXDropped.Load() != 1 {
		t.Error("frame for another MAC accepted without UPE")
	}
}

func TestRXNoDescriptor(t *testing.T) {
	r := newRig(t, "82574L", 0)
	d := r.d
	r.linkUp(t)
	r.setupRings() // RDT 7: seven descriptors free
	var frames [][]byte
	for i := range 10 {
		frames = append(frames, frameTo(testMAC, 200+i, byte(i)))
	}
	if n := d.Receive(frames); n != 10 {
		t.Fatalf("wire took %d of 10 frames", n)
	}
	c := d.Counters()
	if c.RXNoDescriptor.Load() != 3 || c.RXFrames.Load() != 7 {
		t.Errorf("no-descriptor drops %d, frames %d; want 3, 7", c.RXNoDescriptor.Load(), c.RXFrames.Load())
	}
	for i := range 7 {
		n := int(le.Uint16(r.dma[rxRing+i*regs.DescSize+8:]))
		if !bytes.Equal(r.dma[rxBufs+i*2048:rxBufs+i*2048+n], frames[i]) {
			t.Errorf("descriptor %d does not hold frame %d intact", i, i)
		}
	}
	if r.dma[rxRing+7*regs.DescSize+12] != 0 {
		t.Error("the descriptor at RDT was written")
	}
}

func TestPHYNegotiation(t *testing.T) {
	for _, partner := range []int{1000, 100, 10} {
		r := newRig(t, "82574L", partner)
		d := r.d
		d.Write32(regs.IMS, regs.IntLSC)
		r.step(500 * time.Microsecond)
		if up, _ := d.Link(); up {
			t.Fatal("link up before auto-negotiation took its time")
		}
		r.step(600 * time.Microsecond)
		up, speed := d.Link()
		if !up || speed != partner {
			t.Errorf("partner %d: link %v at %d", partner, up, speed)
		}
		want := map[int]uint32{1000: regs.StatusSpeed1000, 100: regs.StatusSpeed100, 10: regs.StatusSpeed10}[partner]
		if got := d.Read32(regs.STATUS) & regs.StatusSpeedMask; got != want {
			t.Errorf("partner %d: STATUS speed bits %#x, want %#x", partner, got, want)
		}
		if !r.takeIRQ() || d.Read32(regs.ICR)&regs.IntLSC == 0 {
			t.Error("no LSC interrupt on link up")
		}
		d.SetCarrier(false)
		if up, _ := d.Link(); up || !r.takeIRQ() || d.Read32(regs.ICR)&regs.IntLSC == 0 {
			t.Error("pulling the cable did not take the link down with LSC")
		}
		d.SetCarrier(true)
		r.step(2 * time.Millisecond)
		if up, _ := d.Link(); !up {
			t.Error("link did not return with the cable")
		}
	}
}

// TestPHYResetQuirk: a PHY reset (CTRL.PHY_RST set, then cleared) renegotiates; on the
// i217-LM the link then comes back at 10 Mbit/s, on the 82574L at 1000.
func TestPHYResetQuirk(t *testing.T) {
	for model, want := range map[string]int{"82574L": 1000, "i217-LM": 10} {
		r := newRig(t, model, 0)
		d := r.d
		r.linkUp(t)
		d.Write32(regs.CTRL, d.Read32(regs.CTRL)|regs.CtrlRST|regs.CtrlPHYRST)
		if up, _ := d.Link(); up || d.Read32(regs.STATUS)&regs.StatusPHYRA == 0 {
			t.Errorf("%s: link up or PHYRA clear while the PHY is held in reset", model)
		}
		r.step(5 * time.Millisecond)
		if up, _ := d.Link(); up {
			t.Errorf("%s: PHY negotiated while held in reset", model)
		}
		d.Write32(regs.CTRL, d.Read32(regs.CTRL)&^regs.CtrlPHYRST)
		r.step(2 * time.Millisecond)
		if up, speed := d.Link(); !up || speed != want {
			t.Errorf("%s after PHY reset: link %v at %d, want up at %d", model, up, speed, want)
		}
	}
}

// TestWirePacing: the wire takes frames at the link rate of the model's clock.
func TestWirePacing(t *testing.T) {
	r := newRig(t, "82574L", 100)
	d := r.d
	r.linkUp(t)
	r.setupRings()
	for i := range 7 {
		r.queueTX(i, frameTo(testMAC, 1514, byte(i)), regs.TxCmdEOP|regs.TxCmdRS)
	}
	d.Write32(regs.TDT, 7)
	perFrame := d.wireTime(1514) // (1514+24)*8 bits at 100 Mbit/s = 123.04 µs
	if perFrame != 123040*time.Nanosecond {
		t.Fatalf("wire time %v", perFrame)
	}
	r.step(0)
	if len(r.wire.frames) != 1 {
		t.Fatalf("%d frames on the wire at once, want 1", len(r.wire.frames))
	}
	r.step(3 * perFrame)
	if len(r.wire.frames) != 4 {
		t.Fatalf("%d frames after 3 frame times, want 4", len(r.wire.frames))
	}
	if next, ok := d.Poll(); !ok || next != r.clock.Now()+perFrame {
		t.Errorf("next deadline %v, want the fifth frame's start %v", next, r.clock.Now()+perFrame)
	}
	r.step(10 * perFrame)
	if len(r.wire.frames) != 7 {
		t.Fatalf("%d frames in the end, want 7", len(r.wire.frames))
	}
}

// TestReceivePacing: the wire brings frames in no faster than the link rate, after letting
// rxBurst's backlog catch up.
func TestReceivePacing(t *testing.T) {
	r := newRig(t, "82574L", 10)
	d := r.d
	r.linkUp(t)
	r.setupRings()
	f := frameTo(testMAC, 1226, 0) // (1226+24)*8 bits = 1 ms at 10 Mbit/s
	frames := [][]byte{f, f, f, f, f}
	if n := d.Receive(frames); n != 3 {
		t.Fatalf("took %d frames at once, want 3 (one now, two caught up)", n)
	}
	if w := d.ReceiveWait(); w != time.Millisecond {
		t.Fatalf("ReceiveWait %v, want 1ms", w)
	}
	if n := d.Receive(frames); n != 0 {
		t.Fatalf("took %d frames while the wire was busy", n)
	}
	r.clock.Advance(time.Millisecond)
	if n := d.Receive(frames); n != 1 {
		t.Fatalf("took %d frames after one frame time, want 1", n)
	}
}

// TestUntrustedMemory fills registers and DMA memory with garbage: the model must count and
// drop, never panic or write outside DMA memory (guard pages around it stay untouched), and
// account for every frame it took.
func TestUntrustedMemory(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const dmaSize, guard = 1 << 20, 64 << 10
	var bad, offered, accounted uint64
	for range 200 {
		mem := make([]byte, guard+dmaSize+guard)
		for i := range mem {
			mem[i] = 0xa5
		}
		dma := mem[guard : guard+dmaSize : guard+dmaSize]
		r := &rig{clock: &regs.ManualClock{}, irq: NewChanIRQ(), wire: &captureWire{}, dma: dma}
		d, err := New(make([]byte, regs.RegisterPageSize), dma, DeviceConfig{Model: Models[0], MAC: testMAC, Clock: r.clock, IRQ: r.irq, Wire: r.wire, Autoneg: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		r.d = d
		r.linkUp(t)
		for i := range r.dma[:0x2000] {
			r.dma[i] = byte(rng.Uint32())
		}
		for _, off := range []uint32{regs.RDBAL, regs.RDBAH, regs.RDLEN, regs.RDH, regs.RDT, regs.TDBAL, regs.TDBAH, regs.TDLEN, regs.TDH, regs.TDT, regs.RCTL, regs.TCTL} {
			v := rng.Uint32()
			if rng.IntN(2) == 0 {
				v %= 0x2000
			}
			d.Write32(off, v)
		}
		d.Write32(regs.RCTL, d.Read32(regs.RCTL)|regs.RctlEN|regs.RctlUPE)
		d.Write32(regs.TCTL, regs.TctlEN)
		d.Write32(d.Read32(regs.TDT)+rng.Uint32()%3, 0) // stray writes, some unaligned
		d.Read32(rng.Uint32())
		n := 1 + rng.IntN(3000)
		took := d.Receive([][]byte{frameTo(testMAC, max(n, 14), 0)[:n]})
		for range 5 {
			r.step(time.Millisecond)
		}
		for i, b := range mem[:guard] {
			if b != 0xa5 {
				t.Fatalf("byte %d before DMA memory written", guard-i)
			}
		}
		for i, b := range mem[guard+dmaSize:] {
			if b != 0xa5 {
				t.Fatalf("byte %d after DMA memory written", i)
			}
		}
		c := d.Counters()
		bad += c.BadDescriptors.Load()
		offered += uint64(took)
		accounted += c.RXFrames.Load() + c.RXDropped.Load() + c.RXNoDescriptor.Load()
	}
	if bad == 0 {
		t.Error("200 rounds of garbage and no bad descriptor counted")
	}
	if accounted < offered {
		t.Errorf("%d frames taken, only %d received or counted as dropped", offered, accounted)
	}
}
