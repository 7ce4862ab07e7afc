package nicperf

import (
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Stats is what one session sent and received in the current period, counted as Genode's
// nic_perf counts it: every frame, ARP and DHCP included. Its Perf adds to it once per round;
// the Registry takes it at the end of each period.
type Stats struct{ rxFrames, rxBytes, txFrames, txBytes atomic.Uint64 }

// Registry is the sessions whose stats nic_perf logs each period (Genode's
// Interface_registry): every period it logs each one's in Genode's words and starts it over;
// after count periods nic_perf exits with exit value 0.
type Registry struct {
	mu      sync.Mutex
	entries []entry // in the order added, as they are logged
	retime  chan func(period time.Duration, left int) (time.Duration, int)
}

type entry struct {
	label string
	stats *Stats
}

// Add makes s, the stats of the session called label, part of each period's log.
func (r *Registry) Add(label string, s *Stats) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.entries = append(r.entries, entry{label, s})
}

// Remove takes s out of the log (its session closed).
func (r *Registry) Remove(s *Stats) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, e := range r.entries {
		if e.stats == s {
			r.entries = append(r.entries[:i], r.entries[i+1:]...)
			return
		}
	}
}

// Report ends a period of length period: it writes every session's stats to w in Genode's
// words, so that a log pattern of Genode's tests matches ours,
//
//	# Stats for session nic_perf_tx ->
//	  Received 21 packets in 5000ms at 0.2Mbit/s
//	  Sent     17290 packets in 5000ms at 41.495Mbit/s
//
// and starts each over. The throughput is over the configured period, as Genode's is.
func (r *Registry) Report(w io.Writer, period time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ms := uint64(period / time.Millisecond)
	for _, e := range r.entries {
		rx, rxb := e.stats.rxFrames.Swap(0), e.stats.rxBytes.Swap(0)
		tx, txb := e.stats.txFrames.Swap(0), e.stats.txBytes.Swap(0)
		fmt.Fprintf(w, "# Stats for session %s\n  Received %d packets in %dms at %sMbit/s\n  Sent     %d packets in %dms at %sMbit/s\n",
			e.label, rx, ms, mbits(rxb, ms), tx, ms, mbits(txb, ms))
	}
}

// Run reports to w at the end of every period until stop is closed; after count periods it
// calls exit(0), as Genode's nic_perf calls env.parent().exit(0), and returns. As in Genode,
// the periods run only while count is not 0 (Forever: they never end) and period is not 0.
// A Retime changes period and count as Genode's nic_perf takes a new config: the periods
// start over with the new length when the new count is not 0; with count 0 the running
// periods go on and never end (Genode's count wraps around).
func (r *Registry) Run(period time.Duration, count int, w io.Writer, stop <-chan struct{}, exit func(code int)) {
	var t *time.Ticker
	var tick <-chan time.Time
	arm := func() {
		if t != nil {
			t.Stop()
		}
		t, tick = nil, nil
		if period > 0 && count != 0 {
			t = time.NewTicker(period)
			tick = t.C
		}
	}
	arm()
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	retimes := r.retimes()
	for {
		select {
		case <-stop:
			return
		case f := <-retimes:
			period, count = f(period, count)
			if count != 0 {
				arm()
			}
			continue
		case <-tick:
		}
		r.Report(w, period)
		switch {
		case count == 0:
			count = Forever
		case count > 0:
			count--
			if count == 0 {
				exit(0)
				return
			}
		}
	}
}

// Retime hands Run a config change (see Run, and Retime of a config). It never blocks: a
// change Run has not taken yet is composed with this one.
func (r *Registry) Retime(f func(period time.Duration, left int) (time.Duration, int)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ch := r.retimesLocked()
	select {
	case earlier := <-ch:
		ch <- func(p time.Duration, left int) (time.Duration, int) { return f(earlier(p, left)) }
	default:
		ch <- f
	}
}

func (r *Registry) retimes() chan func(time.Duration, int) (time.Duration, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.retimesLocked()
}

func (r *Registry) retimesLocked() chan func(time.Duration, int) (time.Duration, int) {
	if r.retime == nil {
		r.retime = make(chan func(time.Duration, int) (time.Duration, int), 1)
	}
	return r.retime
}

// mbits is the throughput of bytes in ms as Genode's Packet_stats computes it (in float) and
// prints it.
func mbits(bytes, ms uint64) string {
	if ms == 0 {
		return genodeFloat(0)
	}
	return genodeFloat(float32(bytes*8) / float32(ms*1000))
}

// genodeFloat formats v as Genode's print(float) does: the integer part, a point, then
// decimals cut (not rounded) one by one, at most three, until the rest is zero (2.5 prints
// as "2.50", 3 as "3.0"). Each step is rounded to float32, as Genode's volatile float is.
func genodeFloat(v float32) string {
	b := []byte{}
	if v < 0 {
		b, v = append(b, '-'), -v
	}
	whole := uint64(v)
	b = strconv.AppendUint(b, whole, 10)
	b = append(b, '.')
	for digits := 3; ; {
		v = float32(v - float32(whole))
		v = float32(v * 10)
		whole = uint64(v)
		b = append(b, byte('0'+whole))
		if digits--; digits == 0 || !(v > 0) {
			return string(b)
		}
	}
}
