package scale

import (
	"testing"
	"time"
)

// The window runs from settle after the sample that saw every guest begun to the last sample
// before one ended; the rates are each guest's bytes over it.
func TestContention(t *testing.T) {
	t0 := time.Unix(0, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	const M = 1 << 20
	samples := []sample{
		{at(0), []uint64{100, 100}, 0},      // baseline: DHCP
		{at(1), []uint64{2 * M, 100}, 0},    // guest 2 not begun
		{at(2), []uint64{4 * M, 1 * M}, 0},  // both begun
		{at(3), []uint64{6 * M, 2 * M}, 0},  // settle: 1 s
		{at(4), []uint64{8 * M, 4 * M}, 0},  //
		{at(5), []uint64{10 * M, 6 * M}, 0}, // the last before an end
		{at(6), []uint64{11 * M, 8 * M}, 1}, // guest 1 finished
		{at(7), []uint64{11 * M, 10 * M}, 2},
	}
	mbps, w, ok := contention(samples, time.Second, time.Second)
	if !ok || w != 2*time.Second {
		t.Fatalf("window %v, ok %v; want 2 s (3 to 5)", w, ok)
	}
	want := []float64{4 * M * 8 / 2 / 1e6, 4 * M * 8 / 2 / 1e6}
	for g := range want {
		if mbps[g] != want[g] {
			t.Errorf("guest %d: %.3f Mbit/s, want %.3f", g+1, mbps[g], want[g])
		}
	}
	if _, _, ok := contention(samples, time.Second, 3*time.Second); ok {
		t.Error("a window of 2 s passed a minimum of 3 s")
	}
	if _, _, ok := contention(samples[:2], time.Second, 0); ok {
		t.Error("a window before every guest began")
	}
}

// A guest has begun at the first sample that saw startedBytes past the baseline.
func TestBegun(t *testing.T) {
	t0 := time.Unix(100, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	samples := []sample{
		{at(0), []uint64{100, 100, 100}, 0},
		{at(0.5), []uint64{100 + startedBytes, 100, 100}, 0},
		{at(1), []uint64{200 + startedBytes, 99 + startedBytes, 100}, 0},
		{at(1.5), []uint64{300 + startedBytes, 100 + startedBytes, 100}, 0},
	}
	got := begun(samples, at(-2))
	want := []float64{2.5, 3.5, -1}
	for g := range want {
		if got[g] != want[g] {
			t.Errorf("guest %d began %v s after the start, want %v", g+1, got[g], want[g])
		}
	}
}
