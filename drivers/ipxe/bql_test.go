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
				t.Fatalf("stuck with %d frames waiting in the session (limit max %d)", len(r.up.tx), cfg.TxBQLLimitMax)
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
	cfg := plainConfig()
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
	// TXDW stays unmasked: completions reach the limit at every (moderated) interrupt, not
	// only when it held frames back; an empty ring writes nothing back to raise it.
	if got := r.dev.Read32(regs.IMS) & (regs.IntTXDW | regs.IntTXQE); got != regs.IntTXDW {
		t.Errorf("IMS %#x with nothing left to send: want TXDW alone of the TX causes", r.dev.Read32(regs.IMS))
	}
}

// TestTxBQLLive: tx_bql switched on with frames in flight counts them, switched off drops the
// limit to 0 on the counter and lets the ring fill again.
func TestTxBQLLive(t *testing.T) {
	r := newRig(t, "82574L", plainConfig())
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

// TestTxBQLReapsOnSubmit: the limit learns of completions whenever the driver runs, not only
// at a TX interrupt: frames the NIC wrote back are reaped when the router's next batch comes,
// so the ring's bytes in flight are the new batch's alone; and with tx_bql TXDW is unmasked
// while frames are in flight even when the limit held nothing back, so a moderated
// interrupt reaps them too.
func TestTxBQLReapsOnSubmit(t *testing.T) {
	cfg := ipxe.DefaultConfig()
	cfg.TxBQL = true
	cfg.RxIrqThrottle = 0xffff // 16.8 ms: no interrupt comes during the batches below
	r := newRig(t, "82574L", cfg)
	r.waitLink(t)
	dst := net.HardwareAddr{2, 0, 0, 0, 0, 0x99}
	send := func(n, seq int) {
		for i := range n {
			r.up.tx = append(r.up.tx, frame(dst, 1000, seq+i))
		}
		r.drv.Transmit()
	}
	send(1, 0) // the limit starts at nothing: one frame goes
	if r.dev.Read32(regs.IMS)&regs.IntTXDW == 0 {
		t.Fatalf("IMS %#x with a frame in flight: TXDW masked", r.dev.Read32(regs.IMS))
	}
	r.clock.Advance(frameTime)
	r.dev.Poll() // the NIC sends it and writes DD back; the interrupt waits for ITR
	send(1, 1)
	if _, inFlight := r.drv.BQL(); inFlight != 1000 {
		t.Fatalf("after the second batch %d bytes in flight, want 1000: the first frame's completion not reaped", inFlight)
	}
	if q := r.drv.TXQueue(); q.Frames != 1 {
		t.Fatalf("the ring holds %d frames, want the second batch's 1", q.Frames)
	}
	// A backlog: the ring's bytes in flight follow the limit (at most a frame beyond it)
	// batch by batch, and every frame written back is reaped by the next batch.
	for k := range 50 {
		r.clock.Advance(frameTime)
		r.dev.Poll()
		send(8, 2+8*k)
		limit, inFlight := r.drv.BQL()
		if q := r.drv.TXQueue(); uint64(inFlight) != q.Bytes || inFlight > limit+1000 {
			t.Fatalf("batch %d: ring %d bytes, limit counts %d in flight against %d", k, q.Bytes, inFlight, limit)
		}
	}
	if r.drv.Counters().TXBQLErrors.Load() != 0 {
		t.Errorf("%d completions of more than was in flight", r.drv.Counters().TXBQLErrors.Load())
	}
}

// TestTxBQLLimitMax: with completions late (ITR 2.1 ms) the limit grows to cover them;
// tx_bql_limit_max caps what the ring holds at the cap plus a frame, every frame still goes
// out in order, and a cap lowered live takes the limit down at once.
func TestTxBQLLimitMax(t *testing.T) {
	const frames = 4 * ipxe.RingSize
	const capped = 16_000
	size := func(i int) int { return 60 + (i*397)%1455 }
	cfg := plainConfig()
	cfg.TxBQL = true
	cfg.RxIrqThrottle = 0x2000
	_, uncapped := bqlRun(t, cfg, frames, size)
	cfg.TxBQLLimitMax = capped
	r, most := bqlRun(t, cfg, frames, size)
	t.Logf("most bytes in the TX ring at ITR 2.1 ms: no cap %d, cap %d: %d", uncapped, capped, most)
	if uncapped <= capped+1514 {
		t.Fatalf("without a cap the ring held at most %d bytes: the test does not grow the limit past the cap", uncapped)
	}
	if most > capped+1514 {
		t.Errorf("with tx_bql_limit_max=%d the ring held %d bytes, over the cap plus a frame", capped, most)
	}
	if limit, _ := r.drv.BQL(); limit > capped {
		t.Errorf("limit %d over the cap %d", limit, capped)
	}
	cfg.TxBQLLimitMax = 3000
	if err := r.drv.Configure(cfg); err != nil {
		t.Fatal(err)
	}
	if limit, _ := r.drv.BQL(); limit > 3000 || r.drv.Counters().TXBQLLimit.Load() != uint64(limit) {
		t.Errorf("cap lowered to 3000: limit %d, counter %d", limit, r.drv.Counters().TXBQLLimit.Load())
	}
}
