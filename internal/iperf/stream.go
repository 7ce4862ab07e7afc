package iperf

import (
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// stream is one data connection. Its goroutine reads or writes one preallocated block in a loop
// and only adds to atomic counters, so the data path allocates nothing per block; the test's
// goroutine samples the counters.
type stream struct {
	id     int
	sender bool
	udp    bool
	conn   net.Conn // a TCP connection, a client's connected UDP socket or a server's UDP peer
	buf    []byte
	pace   *pacer   // nil: as fast as the connection takes it
	limit  *limit   // nil: no -n or -k
	file   *os.File // -Z: the block as a file, sent with sendfile
	sent   io.LimitedReader
	u64    bool // UDP counters are 64 bits (--udp-counters-64bit)

	bytes   atomic.Uint64 // sent or received since the test began
	packets atomic.Uint64 // UDP sender: datagrams sent
	rx      udpReceiver   // UDP receiver: sequence, loss and jitter
	err     atomic.Pointer[error]
	fails   chan<- struct{} // told when the stream fails
	stop    atomic.Bool
	done    chan struct{}
	running bool // its goroutine was started (or it is fed by a server's UDP socket)

	// Owned by the test's goroutine.
	last    tally // at the close of the previous interval
	omitted tally // at the end of the omitted seconds
	final   tally // when the test ended
	tcp     tcpTally
	peer    streamResult // what the other end measured (EXCHANGE_RESULTS)
}

// tally is a stream's counters at one moment.
type tally struct {
	bytes   uint64
	packets int64 // UDP: datagrams sent (sender) or the highest sequence number seen (receiver)
	lost    int64 // UDP receiver: datagrams missing from the sequence
	ooo     int64 // UDP receiver: datagrams that arrived out of order
}

// tcpTally is what TCP_INFO told of a stream over the test, as iperf3 keeps it.
type tcpTally struct {
	prevRetrans     uint64 // tcpi_total_retrans at the last sample
	intervalRetrans uint64 // in the last interval
	retrans         uint64 // since the measured time began
	cwnd, wnd       uint64 // at the last sample
	rtt, rttvar     uint32
	pmtu            uint32
	maxCwnd, maxWnd uint64
	maxRTT, minRTT  uint64
	sumRTT          uint64
	countRTT        uint64
}

func newStream(id int, conn net.Conn, sender, udp bool, blockSize int, repeating bool) *stream {
	s := &stream{id: id, conn: conn, sender: sender, udp: udp, buf: make([]byte, blockSize), done: make(chan struct{})}
	if repeating {
		// --repeating-payload: iperf3's "0123456789" pattern, for paths that compress.
		for i := range s.buf {
			s.buf[i] = '0' + byte(i%10)
		}
	} else if sender {
		// Random payload, as iperf3 sends, so nothing on the path can compress it.
		r := rand.New(rand.NewPCG(uint64(id), uint64(time.Now().UnixNano())))
		for i := range s.buf {
			s.buf[i] = byte(r.Uint32())
		}
	}
	return s
}

// zeroCopy makes the stream send with sendfile from a memory file holding its block (-Z). It
// fails when the connection is not a kernel TCP socket: sendfile needs one.
func (s *stream) zeroCopy() error {
	if _, ok := s.conn.(io.ReaderFrom); !ok || s.udp {
		return &Error{Code: CodeNoSendfile}
	}
	if _, ok := s.conn.(syscall.Conn); !ok {
		return &Error{Code: CodeNoSendfile}
	}
	fd, err := unix.MemfdCreate("iperf-block", unix.MFD_CLOEXEC)
	if err != nil {
		return fail(200, err) // IECREATESTREAM
	}
	f := os.NewFile(uintptr(fd), "iperf-block")
	if _, err := f.Write(s.buf); err != nil {
		f.Close()
		return fail(200, err)
	}
	s.file = f
	s.sent.R = f
	return nil
}

// run moves data until halted or until the connection fails; a failure while the test runs is
// kept for the test to report.
func (s *stream) run() {
	defer close(s.done)
	var err error
	switch {
	case s.sender && s.udp:
		err = s.sendDatagrams()
	case s.sender:
		err = s.sendBlocks()
	case s.udp:
		err = s.receiveDatagrams()
	default:
		err = s.receiveBlocks()
	}
	if err != nil && !s.stop.Load() {
		s.err.Store(&err)
		select {
		case s.fails <- struct{}{}:
		default:
		}
	}
}

func (s *stream) sendBlocks() error {
	for !s.stop.Load() {
		var n int
		var err error
		if s.file != nil {
			n, err = s.sendFile()
		} else {
			n, err = s.conn.Write(s.buf)
		}
		s.count(n)
		if err != nil {
			return fail(CodeStreamWrite, err)
		}
		if !s.stop.Load() {
			s.pace.wait(s.bytes.Load())
		}
	}
	return nil
}

// sendFile sends the block from its memory file; sendfile moves the file's offset.
func (s *stream) sendFile() (int, error) {
	if _, err := s.file.Seek(0, io.SeekStart); err != nil {
		return 0, err
	}
	s.sent.N = int64(len(s.buf))
	n, err := s.conn.(io.ReaderFrom).ReadFrom(&s.sent)
	return int(n), err
}

func (s *stream) receiveBlocks() error {
	for {
		n, err := s.conn.Read(s.buf)
		s.count(n)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil // the sender closed: the test is ending
			}
			return fail(CodeStreamRead, err)
		}
	}
}

func (s *stream) count(n int) {
	if n > 0 {
		s.bytes.Add(uint64(n))
		if s.limit.add(uint64(n), s.sender) && s.sender {
			s.stop.Store(true) // -n or -k is reached: not one block more
		}
	}
}

// halt stops the stream's loop at once, even inside a blocked read or write, and waits until
// it has.
func (s *stream) halt() {
	if !s.running {
		return
	}
	if !s.stop.Swap(true) {
		_ = s.conn.SetDeadline(time.Now())
		if s.pace != nil {
			close(s.pace.halt)
		}
	}
	<-s.done
}

// failure is what ended the stream early, if anything did.
func (s *stream) failure() error {
	if p := s.err.Load(); p != nil {
		return *p
	}
	return nil
}

func (s *stream) close() {
	s.conn.Close()
	if s.file != nil {
		s.file.Close()
	}
}

// now reads the stream's counters.
func (s *stream) now() tally {
	t := tally{bytes: s.bytes.Load()}
	if s.udp {
		if s.sender {
			t.packets = int64(s.packets.Load())
		} else {
			t.packets, t.lost, t.ooo, _ = s.rx.counts()
		}
	}
	return t
}

// pacer holds a sender to its share of -b: like iperf3 it lets a block go while the average
// rate since the test began is below the target, and checks again every burst blocks. Its wait
// ends early when the stream halts: at a low rate one block can be seconds apart.
type pacer struct {
	rate  float64 // bits per second
	burst int
	begin time.Time
	n     int
	timer *time.Timer
	halt  chan struct{} // closed when the stream halts
}

func newPacer(rate float64, burst int, begin time.Time) *pacer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &pacer{rate: rate, burst: burst, begin: begin, timer: t, halt: make(chan struct{})}
}

func (p *pacer) wait(sent uint64) {
	if p == nil {
		return
	}
	if p.n++; p.n < p.burst {
		return
	}
	p.n = 0
	ahead := time.Duration(float64(sent)*8/p.rate*float64(time.Second)) - time.Since(p.begin)
	if ahead <= 0 {
		return
	}
	p.timer.Reset(ahead)
	select {
	case <-p.timer.C:
	case <-p.halt:
		p.timer.Stop()
	}
}

// limit ends a test after -n bytes or -k blocks, counted by the client's streams outside the
// omitted seconds, in either direction as iperf3 counts them.
type limit struct {
	bytes, blocks    uint64
	counting         atomic.Bool
	sent, received   atomic.Uint64
	sentBlocks, rcvd atomic.Uint64
	reached          chan struct{}
	once             atomicOnce
}

// add counts n bytes in one block and says whether the limit is reached.
func (l *limit) add(n uint64, sender bool) bool {
	if l == nil || !l.counting.Load() {
		return false
	}
	var total, blocks uint64
	if sender {
		total, blocks = l.sent.Add(n), l.sentBlocks.Add(1)
	} else {
		total, blocks = l.received.Add(n), l.rcvd.Add(1)
	}
	if (l.bytes > 0 && total >= l.bytes) || (l.blocks > 0 && blocks >= l.blocks) {
		l.once.do(func() { close(l.reached) })
		return true
	}
	return false
}

// atomicOnce is a sync.Once that the data path can call without taking a lock.
type atomicOnce struct{ done atomic.Bool }

func (o *atomicOnce) do(f func()) {
	if o.done.CompareAndSwap(false, true) {
		f()
	}
}
