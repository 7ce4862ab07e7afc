package intel

import (
	"testing"
	"time"
)

// The timer expires after each Reset, also after an expiry nobody took, and stops.
func TestDeadlineTimer(t *testing.T) {
	tm := newDeadlineTimer()
	defer tm.Stop()
	for _, d := range []time.Duration{0, 100 * time.Microsecond, time.Millisecond} {
		tm.Reset(d)
		select {
		case <-tm.C:
		case <-time.After(10 * time.Second):
			t.Fatalf("Reset(%v) never expired", d)
		}
	}
	tm.Reset(time.Hour)
	select {
	case <-tm.C:
		t.Error("expired an hour early")
	case <-time.After(5 * time.Millisecond):
	}
}
