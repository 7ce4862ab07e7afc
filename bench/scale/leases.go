package scale

import (
	"bytes"
	"strconv"
	"sync"
	"time"
)

// leaseWatch follows the components' log lines for the guests' "dhcp lease" (an embedded
// guest logs it the moment its DHCP client binds) and notes when each guest had its first:
// the log is event-driven, where polling the status would load the machine it measures.
type leaseWatch struct {
	prefix string // the guests' names: PREFIX1..PREFIXn
	n      int
	all    chan struct{} // closed when every guest holds a lease

	mu   sync.Mutex
	part []byte
	at   map[int]time.Time
}

func newLeaseWatch(prefix string, n int) *leaseWatch {
	return &leaseWatch{prefix: prefix, n: n, all: make(chan struct{}), at: map[int]time.Time{}}
}

// leaseLine is what the guest's log line carries (the supervisor's text form: "[NAME] level=INFO msg=...").
var leaseLine = []byte(`msg="dhcp lease" `)

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
	if !ok || !bytes.HasPrefix(name, []byte("["+w.prefix)) || !bytes.Contains(rest, leaseLine) {
		return
	}
	i, err := strconv.Atoi(string(name[1+len(w.prefix):]))
	if err != nil || i < 1 || i > w.n {
		return
	}
	if _, seen := w.at[i]; seen {
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
