package scale

import "time"

// The guests' tests start together (test.start), unless a lease comes late, and even then
// they begin over a few hundred milliseconds, so that each test's own average mixes the time
// it ran alone or ramped up with the time it shared the wire. Fairness is about the sharing:
// the bench samples each guest's session while the tests run and takes the throughput of each
// over the window in which all of them ran.

// sample is the guests' traffic at one status.
type sample struct {
	at       time.Time
	bytes    []uint64 // per guest: the data direction of its session
	finished int      // guests whose test had ended
}

// startedBytes is the traffic after which a guest's test counts as begun (not DHCP or the
// control connection's handshake).
const startedBytes = 256 << 10

// contention is each guest's throughput in Mbit/s over the window in which every guest's test
// ran: from settle after the first sample that saw all of them begun (their TCP's slow start)
// to the last sample before any had ended; samples[0] is the baseline. ok is false when that
// window is shorter than minWindow or has fewer than two samples.
func contention(samples []sample, settle, minWindow time.Duration) (mbps []float64, window time.Duration, ok bool) {
	if len(samples) < 2 {
		return nil, 0, false
	}
	base := samples[0]
	begun := -1
	for i, s := range samples {
		if s.finished > 0 {
			break
		}
		all := true
		for g := range s.bytes {
			if s.bytes[g]-base.bytes[g] < startedBytes {
				all = false
				break
			}
		}
		if all {
			begun = i
			break
		}
	}
	if begun < 0 {
		return nil, 0, false
	}
	from, to := -1, -1
	for i := begun; i < len(samples) && samples[i].finished == 0; i++ {
		if from < 0 && samples[i].at.Sub(samples[begun].at) >= settle {
			from = i
		}
		to = i
	}
	if from < 0 || to <= from || samples[to].at.Sub(samples[from].at) < minWindow {
		return nil, 0, false
	}
	a, z := samples[from], samples[to]
	window = z.at.Sub(a.at)
	mbps = make([]float64, len(a.bytes))
	for g := range mbps {
		mbps[g] = float64(z.bytes[g]-a.bytes[g]) * 8 / window.Seconds() / 1e6
	}
	return mbps, window, true
}

// begun is, per guest, how long after start its test had begun (sent or received
// startedBytes since the baseline), as the first sample that saw it, 500 ms apart; -1 when
// none did. A guest that begins late (its connection's handshake lost, its lease late) has
// the wire to fewer at its test's end, and shortens the window in which all ran.
func begun(samples []sample, start time.Time) []float64 {
	if len(samples) == 0 {
		return nil
	}
	base := samples[0]
	at := make([]float64, len(base.bytes))
	for g := range at {
		at[g] = -1
		for _, s := range samples {
			if s.bytes[g]-base.bytes[g] >= startedBytes {
				at[g] = s.at.Sub(start).Seconds()
				break
			}
		}
	}
	return at
}
