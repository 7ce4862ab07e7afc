package iperf

import (
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// stream is one data connection. Its goroutine reads or writes one preallocated block in a loop
// and only adds to an atomic counter, so the data path allocates nothing per write.
type stream struct {
	id     int
	conn   net.Conn
	sender bool
	buf    []byte
	bytes  atomic.Uint64
	stop   atomic.Bool
	done   chan struct{}
}

func newStream(id int, conn net.Conn, sender bool, blockSize int) *stream {
	s := &stream{id: id, conn: conn, sender: sender, buf: make([]byte, blockSize), done: make(chan struct{})}
	if sender {
		// Random payload, as iperf3 sends, so nothing on the path can compress it.
		r := rand.New(rand.NewPCG(uint64(id), uint64(time.Now().UnixNano())))
		for i := range s.buf {
			s.buf[i] = byte(r.Uint32())
		}
	}
	return s
}

func (s *stream) run() {
	defer close(s.done)
	if s.sender {
		for !s.stop.Load() {
			n, err := s.conn.Write(s.buf)
			s.bytes.Add(uint64(n))
			if err != nil {
				return
			}
		}
		return
	}
	for {
		n, err := s.conn.Read(s.buf)
		s.bytes.Add(uint64(n))
		if err != nil {
			return
		}
	}
}

// halt stops the stream's loop at once, even inside a blocked read or write.
func (s *stream) halt() {
	s.stop.Store(true)
	_ = s.conn.SetDeadline(time.Now())
	<-s.done
}

// meter samples the streams' counters once per interval and freezes them when the test ends.
type meter struct {
	streams  []*stream
	interval time.Duration
	onTick   func(Interval)

	mu        sync.Mutex
	start     time.Time
	last      []uint64
	lastAt    time.Time
	intervals []Interval
	final     []uint64
	end       time.Time
	cpu0      cpuTimes
	cpu       cpuPercent
	quit      chan struct{}
	stopped   chan struct{}
}

func newMeter(streams []*stream, interval time.Duration, onTick func(Interval)) *meter {
	if interval <= 0 {
		interval = time.Second
	}
	return &meter{streams: streams, interval: interval, onTick: onTick,
		last: make([]uint64, len(streams)), quit: make(chan struct{}), stopped: make(chan struct{})}
}

func (m *meter) begin() {
	m.start = time.Now()
	m.lastAt = m.start
	m.cpu0 = readCPU()
	go m.loop()
}

func (m *meter) loop() {
	defer close(m.stopped)
	t := time.NewTicker(m.interval)
	defer t.Stop()
	for {
		select {
		case <-m.quit:
			return
		case now := <-t.C:
			m.sample(now)
		}
	}
}

// sample closes the interval that ends at now.
func (m *meter) sample(now time.Time) {
	m.mu.Lock()
	iv := Interval{Streams: make([]StreamInterval, len(m.streams))}
	from, to := m.lastAt.Sub(m.start).Seconds(), now.Sub(m.start).Seconds()
	secs := to - from
	var sum uint64
	for i, s := range m.streams {
		b := s.bytes.Load()
		d := b - m.last[i]
		m.last[i] = b
		sum += d
		iv.Streams[i] = StreamInterval{Socket: s.id, Start: from, End: to, Seconds: secs, Bytes: d,
			BitsPerSecond: rate(d, secs), Sender: s.sender}
	}
	iv.Sum = StreamInterval{Start: from, End: to, Seconds: secs, Bytes: sum, BitsPerSecond: rate(sum, secs),
		Sender: len(m.streams) > 0 && m.streams[0].sender}
	m.lastAt = now
	m.intervals = append(m.intervals, iv)
	m.mu.Unlock()
	if m.onTick != nil {
		m.onTick(iv)
	}
}

// finish freezes the totals; bytes that arrive later (a receiver draining) are not counted.
func (m *meter) finish() {
	now := time.Now()
	close(m.quit)
	<-m.stopped
	if now.Sub(m.lastAt) > m.interval/10 {
		m.sample(now)
	}
	m.end = now
	m.final = make([]uint64, len(m.streams))
	for i, s := range m.streams {
		m.final[i] = s.bytes.Load()
	}
	m.cpu = readCPU().since(m.cpu0, now.Sub(m.start))
}

func (m *meter) seconds() float64 { return m.end.Sub(m.start).Seconds() }

func rate(bytes uint64, secs float64) float64 {
	if secs <= 0 {
		return 0
	}
	return float64(bytes) * 8 / secs
}

type cpuTimes struct{ user, sys time.Duration }

type cpuPercent struct{ total, user, sys float64 }

// readCPU reads this process's CPU time; iperf3 reports the same as cpu_util.
func readCPU() cpuTimes {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return cpuTimes{}
	}
	return cpuTimes{user: time.Duration(ru.Utime.Nano()), sys: time.Duration(ru.Stime.Nano())}
}

func (c cpuTimes) since(c0 cpuTimes, wall time.Duration) cpuPercent {
	if wall <= 0 {
		return cpuPercent{}
	}
	u := 100 * float64(c.user-c0.user) / float64(wall)
	s := 100 * float64(c.sys-c0.sys) / float64(wall)
	return cpuPercent{total: u + s, user: u, sys: s}
}
