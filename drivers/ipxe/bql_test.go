package ipxe_test

import (
	"net"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/nicstack/nicstack/drivers/intel/regs"
	"github.com/nicstack/nicstack/drivers/ipxe"
)

// bqlRun has the router queue frames (sizes from size) in bursts larger than the ring and
// the wire drain at line rate, the interrupt handler resuming what the ring or the limit held
// back. It returns the rig and the most bytes the TX ring held (TXQueue, the driver's own
// report, not the limit's count).
func bqlRun(t *testing.T, cfg ipxe.Config, frames int, size func(i int) int) (*rig, uint64) {
	t.Helper()
	r := newRig(t, "82574L", cfg)
	r.waitLink(t)
	var want [][]byte
	var most uint64
	for i := 0; i < frames; {
		for range min(2*ipxe.RingSize, frames-i) {
			f := frame(net.HardwareAddr{2, 0, 0, 0, 0, 0x99}, size(i), i)
			r.up.tx = append(r.up.tx, f)
			want = append(want, f)
			i++
		}
		r.drv.Transmit()
		for steps := 0; len(r.up.tx) > 0; steps++ {
			if steps > 100*ipxe.RingSize {
				t.Fatalf("stuck with %d frames waiting in the session", len(r.up.tx))
			}
			r.step(frameTime)
			most = max(most, r.drv.TXQueue().Bytes)
		}
	}
	for range 2 * ipxe.RingSize {
		r.step(frameTime)
	}
	r.drv.Transmit() // reaps: a ring that kept up raises no TX interrupt
	sameFrames(t, "wire", r.wire.frames, want)
	return r, most
}

// TestTxBQL: with tx_bql the TX ring holds a few interrupt intervals' worth of bytes, where
// without it the router's bursts fill the ring; every frame still goes out, in order, with
// one TDT write per batch, and the limit is on the counter.
func TestTxBQL(t *testing.T) {
	const frames = 8 * ipxe.RingSize
	size := func(i int) int { return 60 + (i*397)%1455 }
	cfg := ipxe.DefaultConfig()
	_, without := bqlRun(t, cfg, frames, size)
	cfg.TxBQL = true
	r, with := bqlRun(t, cfg, frames, size)
	cnt := r.drv.Counters()
	limit, inFlight := r.drv.BQL()
	t.Logf("most bytes in the TX ring: tx_bql=no %d, yes %d (limit %d, %d stops, %d TDT writes for %d frames)",
		without, with, limit, cnt.TXBQLStops.Load(), cnt.TDTWrites.Load(), frames)
	// ITR 651 is 166.7 µs, 20.8 KB at 1 Gbit/s: the limit stays within a few intervals.
	if with > 4*21_000 || with*4 > without {
		t.Errorf("tx_bql=yes held up to %d bytes in the ring (without: %d), want a few interrupt intervals' worth", with, without)
	}
	if cnt.TXBQLStops.Load() == 0 || cnt.TXBQLErrors.Load() != 0 {
		t.Errorf("%d stops, %d errors: want some stops and no errors", cnt.TXBQLStops.Load(), cnt.TXBQLErrors.Load())
	}
	if got := cnt.TXBQLLimit.Load(); got != uint64(limit) || got == 0 || inFlight != 0 {
		t.Errorf("tx_bql_limit_bytes %d, limit %d, %d bytes in flight once all went out", got, limit, inFlight)
	}
	if cnt.TDTWrites.Load() > cnt.TXBatches.Load() {
		t.Errorf("%d TDT writes for %d batches: want at most one per batch", cnt.TDTWrites.Load(), cnt.TXBatches.Load())
	}
	if r.dev.Read32(regs.IMS)&(regs.IntTXDW|regs.IntTXQE) != 0 {
		t.Errorf("IMS %#x with nothing left to send: a TX cause still unmasked", r.dev.Read32(regs.IMS))
	}
}

// TestTxBQLLive: tx_bql switched on with frames in flight counts them, switched off drops the
// limit to 0 on the counter and lets the ring fill again.
func TestTxBQLLive(t *testing.T) {
	r := newRig(t, "82574L", ipxe.DefaultConfig())
	r.waitLink(t)
	for i := range 10 {
		r.up.tx = append(r.up.tx, frame(net.HardwareAddr{2, 0, 0, 0, 0, 0x99}, 1000, i))
	}
	r.drv.Transmit() // in flight, not yet written back
	cfg := r.drv.Config()
	cfg.TxBQL = true
	if err := r.drv.Configure(cfg); err != nil {
		t.Fatal(err)
	}
	if _, inFlight := r.drv.BQL(); inFlight != 10000 {
		t.Fatalf("switched on with 10 frames of 1000 bytes in flight: counts %d", inFlight)
	}
	for range 100 {
		r.step(frameTime)
	}
	r.drv.Transmit() // reaps
	cnt := r.drv.Counters()
	if _, inFlight := r.drv.BQL(); inFlight != 0 || cnt.TXBQLErrors.Load() != 0 || cnt.TXBQLLimit.Load() == 0 {
		t.Fatalf("all sent: %d in flight, %d errors, limit %d", inFlight, cnt.TXBQLErrors.Load(), cnt.TXBQLLimit.Load())
	}
	cfg.TxBQL = false
	if err := r.drv.Configure(cfg); err != nil {
		t.Fatal(err)
	}
	if cnt.TXBQLLimit.Load() != 0 {
		t.Errorf("tx_bql_limit_bytes %d after switching off, want 0", cnt.TXBQLLimit.Load())
	}
	for i := range 2 * ipxe.RingSize {
		r.up.tx = append(r.up.tx, frame(net.HardwareAddr{2, 0, 0, 0, 0, 0x99}, 1000, i))
	}
	r.drv.Transmit()
	if q := r.drv.TXQueue(); q.Frames != ipxe.RingSize-1 {
		t.Errorf("tx_bql off: %d frames in the ring, want it full (%d)", q.Frames, ipxe.RingSize-1)
	}
}

// TestTxBQLProperty: whatever the frames, bursts and timing, the driver hands the NIC a frame
// only while the limit admits one, so right after it queued, in flight exceeds the limit by
// less than a frame; and everything the router queued goes out.
func TestTxBQLProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		cfg := ipxe.DefaultConfig()
		cfg.TxBQL = true
		cfg.RxIrqThrottle = rapid.Uint32Range(0, 2000).Draw(rt, "itr")
		r := newRig(t, "82574L", cfg)
		r.waitLink(t)
		cnt := r.drv.Counters()
		sent := 0
		check := func(what string, queuedBefore uint64) {
			if cnt.TXFrames.Load() == queuedBefore {
				return
			}
			if limit, inFlight := r.drv.BQL(); inFlight > limit+ipxe.BufSize {
				rt.Fatalf("after %s: %d bytes in flight, limit %d", what, inFlight, limit)
			}
		}
		for range rapid.IntRange(1, 40).Draw(rt, "bursts") {
			for range rapid.IntRange(0, 600).Draw(rt, "burst") {
				r.up.tx = append(r.up.tx, frame(net.HardwareAddr{2, 0, 0, 0, 0, 0x99}, rapid.IntRange(60, 1514).Draw(rt, "size"), sent))
				sent++
			}
			before := cnt.TXFrames.Load()
			r.drv.Transmit()
			check("Transmit", before)
			for range rapid.IntRange(0, 200).Draw(rt, "steps") {
				before := cnt.TXFrames.Load()
				r.step(time.Duration(rapid.Int64Range(1, int64(200*time.Microsecond)).Draw(rt, "dt")))
				check("an interrupt", before)
			}
		}
		for steps := 0; len(r.wire.frames) < sent; steps++ {
			if steps > 1000*ipxe.RingSize {
				rt.Fatalf("%d of %d frames on the wire", len(r.wire.frames), sent)
			}
			before := cnt.TXFrames.Load()
			r.step(frameTime)
			check("an interrupt", before)
		}
		if cnt.TXBQLErrors.Load() != 0 {
			rt.Fatalf("%d completions of more than was in flight", cnt.TXBQLErrors.Load())
		}
	})
}
