package scale

import (
	"bytes"
	"sync"
	"time"
)

// leaseWatch follows the components' log lines for the guests' "dhcp lease" (an embedded
// guest logs it the moment its DHCP client binds) and notes when each guest had its first,
// and its "link up" (its session to the router opened) before: the log is event-driven,
// where polling the status would load the machine it measures.
type leaseWatch struct {
	prefix string // the guests' names: PREFIX1..PREFIXn
	n      int
	all    chan struct{} // closed when every guest holds a lease

	mu   sync.Mutex
	part []byte
	at   map[int]time.Time
	up   map[int]time.Time // link up
}

func newLeaseWatch(prefix string, n int) *leaseWatch {
	return &leaseWatch{prefix: prefix, n: n, all: make(chan struct{}), at: map[int]time.Time{}, up: map[int]time.Time{}}
}

// What the guest's log lines carry (the supervisor's text form: "[NAME] level=INFO msg=...").
var (
	leaseLine  = []byte(`msg="dhcp lease" `)
	linkUpLine = []byte(`msg="link up" `)
)

func (w *leaseWatch) Write(b []byte) (int, error) {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.part = append(w.part, b...)
	for {
		i := bytes.IndexByte(w.part, '\n')
		if i < 0 {
			break
		}
		w.line(w.part[:i], now)
		w.part = w.part[i+1:]
	}
	return len(b), nil
}

func (w *leaseWatch) line(l []byte, now time.Time) {
	name, rest, ok := bytes.Cut(l, []byte("] "))
	if !ok || !bytes.HasPrefix(name, []byte("[")) {
		return
	}
	i := guestNumber(string(name[1:]), w.prefix)
	if i < 1 || i > w.n {
		return
	}
	if _, seen := w.up[i]; !seen && bytes.Contains(rest, linkUpLine) {
		w.up[i] = now
	}
	if _, seen := w.at[i]; seen || !bytes.Contains(rest, leaseLine) {
		return
	}
	w.at[i] = now
	if len(w.at) == w.n {
		close(w.all)
	}
}

// last is when the last guest got its lease.
func (w *leaseWatch) last() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	var t time.Time
	for _, at := range w.at {
		if at.After(t) {
			t = at
		}
	}
	return t
}

// count is how many guests hold a lease.
func (w *leaseWatch) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.at)
}

// dhcpTime is the longest a guest waited from its link up to its lease: the DHCP exchange
// with the router, without the processes' start.
func (w *leaseWatch) dhcpTime() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	var d time.Duration
	for i, at := range w.at {
		if up, ok := w.up[i]; ok {
			d = max(d, at.Sub(up))
		}
	}
	return d
}
