package intel

import (
	"testing"
	"time"

	"github.com/nicstack/nicstack/drivers/intel/regs"
)

// TestPause: with flow control negotiated, a PAUSE frame from the link partner stops the
// transmitter from fetching descriptors for its time while receiving and interrupts go on;
// the transmitter resumes when the time runs out, at once on an XON, and when the link goes
// down; with RFCE cleared PAUSE frames are ignored.
func TestPause(t *testing.T) {
	r := newRig(t, "82574L", 0)
	d := r.d
	if _, ok := d.ReceivePause(100); ok {
		t.Fatal("a PAUSE frame was honoured before the link came up")
	}
	d.flowControl = true // the partner advertises PAUSE (DeviceConfig.FlowControl)
	r.linkUp(t)
	if ctrl := d.Read32(regs.CTRL); ctrl&(regs.CtrlRFCE|regs.CtrlTFCE) != regs.CtrlRFCE|regs.CtrlTFCE {
		t.Fatalf("CTRL = %#x after auto-negotiation with a PAUSE partner, want RFCE and TFCE", ctrl)
	}
	r.setupRings()
	d.Write32(regs.IMS, regs.IntRXT0|regs.IntTXDW)

	// XOFF of 100 quanta: 51.2 µs at 1 Gbit/s.
	pause, ok := d.ReceivePause(100)
	if !ok || pause != 51200*time.Nanosecond {
		t.Fatalf("ReceivePause(100) = %v, %v; want 51.2µs, honoured", pause, ok)
	}
	if s := d.Read32(regs.STATUS); s&regs.StatusTXOFF == 0 {
		t.Errorf("STATUS = %#x while paused, want TXOFF", s)
	}
	r.queueTX(0, frameTo(testMAC, 1514, 0), regs.TxCmdEOP|regs.TxCmdRS)
	d.Write32(regs.TDT, 1)
	r.step(10 * time.Microsecond)
	if len(r.wire.frames) != 0 || d.Read32(regs.TDH) != 0 || r.dma[txRing+12]&regs.TxStaDD != 0 {
		t.Fatalf("paused: %d frames sent, TDH %d: a descriptor was fetched", len(r.wire.frames), d.Read32(regs.TDH))
	}
	if next, ok := d.Poll(); !ok || next != 51200*time.Nanosecond+r.clock.Now()-10*time.Microsecond {
		t.Errorf("next deadline %v while paused, want the pause's end", next)
	}
	// Receiving and its interrupt go on.
	if n := d.Receive([][]byte{frameTo(testMAC, 100, 1)}); n != 1 || d.Read32(regs.RDH) != 1 {
		t.Fatalf("paused: took %d frames, RDH %d; want the frame in the RX ring", n, d.Read32(regs.RDH))
	}
	if !r.takeIRQ() || d.Read32(regs.ICR)&regs.IntRXT0 == 0 {
		t.Fatal("no RX interrupt while paused")
	}
	// The time runs out: the frame goes.
	r.step(50 * time.Microsecond)
	if len(r.wire.frames) != 1 || d.Paused() || d.Read32(regs.STATUS)&regs.StatusTXOFF != 0 {
		t.Fatalf("after the pause's time: %d frames sent, paused %v", len(r.wire.frames), d.Paused())
	}
	if got := d.cnt.TXPausedTime.Load(); got != 51 {
		t.Errorf("tx_paused_us = %d, want 51", got)
	}

	// The longest pause, ended by an XON.
	if pause, _ := d.ReceivePause(MaxPauseQuanta); pause != 65535*512*time.Nanosecond {
		t.Fatalf("longest pause %v", pause)
	}
	r.queueTX(1, frameTo(testMAC, 1514, 1), regs.TxCmdEOP|regs.TxCmdRS)
	d.Write32(regs.TDT, 2)
	r.step(time.Millisecond)
	if len(r.wire.frames) != 1 {
		t.Fatalf("%d frames sent during a 33 ms pause", len(r.wire.frames))
	}
	if _, ok := d.ReceivePause(0); !ok {
		t.Fatal("XON not honoured")
	}
	r.step(0)
	if len(r.wire.frames) != 2 {
		t.Fatalf("%d frames sent after the XON, want 2", len(r.wire.frames))
	}
	if x, o := d.cnt.XOFFReceived.Load(), d.cnt.XONReceived.Load(); x != 2 || o != 1 {
		t.Errorf("xoff_rx %d, xon_rx %d; want 2, 1", x, o)
	}
	if got := d.cnt.TXPausedTime.Load(); got != 51+1000 {
		t.Errorf("tx_paused_us = %d, want 1051", got)
	}

	// The link going down ends a pause.
	d.ReceivePause(MaxPauseQuanta)
	d.SetCarrier(false)
	if d.Paused() {
		t.Error("still paused with the link down")
	}
	d.SetCarrier(true)
	r.step(2 * time.Millisecond)

	// A driver that clears RFCE: PAUSE frames are ignored.
	d.Write32(regs.CTRL, d.Read32(regs.CTRL)&^regs.CtrlRFCE)
	if _, ok := d.ReceivePause(MaxPauseQuanta); ok || d.Paused() {
		t.Error("a PAUSE frame was honoured with RFCE clear")
	}
	r.queueTX(2, frameTo(testMAC, 1514, 2), regs.TxCmdEOP|regs.TxCmdRS)
	d.Write32(regs.TDT, 3)
	r.step(0)
	if len(r.wire.frames) != 3 {
		t.Fatalf("%d frames sent with RFCE clear, want 3", len(r.wire.frames))
	}
}
