package iperf

import (
	"io"
	"net"
	"runtime"
	"testing"
	"time"
)

// countingConn accepts or produces data without limit and stops its stream after n calls.
type countingConn struct {
	net.Conn
	s     *stream
	calls int
	n     int
}

func (c *countingConn) Write(b []byte) (int, error) { return c.step(len(b)) }
func (c *countingConn) Read(b []byte) (int, error)  { return c.step(len(b)) }

func (c *countingConn) step(n int) (int, error) {
	c.calls++
	if c.calls >= c.n {
		c.s.stop.Store(true)
		return n, io.EOF // ends a reader; a writer checks stop
	}
	return n, nil
}

func (c *countingConn) SetDeadline(time.Time) error { return nil }

// TestStreamLoopDoesNotAllocate checks the data path's promise: no allocation per read or write.
func TestStreamLoopDoesNotAllocate(t *testing.T) {
	for _, sender := range []bool{true, false} {
		conn := &countingConn{n: 10000}
		s := newStream(1, conn, sender, false, DefaultBlockSize, false)
		conn.s = s
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		s.run()
		runtime.ReadMemStats(&after)
		if allocs := after.Mallocs - before.Mallocs; allocs > 100 {
			t.Fatalf("sender %v: %d allocations for %d calls", sender, allocs, conn.calls)
		}
		if got := s.bytes.Load(); got != uint64(conn.n)*DefaultBlockSize {
			t.Fatalf("sender %v: counted %d bytes", sender, got)
		}
	}
}
