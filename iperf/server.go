package iperf

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Server answers iperf3 clients, one test at a time as iperf3 does: a client that arrives while a
// test runs is told ACCESS_DENIED.
type Server struct {
	Interval   time.Duration  // reporting interval; 0 means 1 s
	OnInterval func(Interval) // optional: every interval of the running test as it closes
	OnReport   func(*Report)  // optional: every finished (or failed) test
	OneOff     bool           // -1: return after the first test
	Logf       func(string, ...any)
}

// Timeouts on the control channel outside the measured time, like iperf3's cntl_msg_wait and
// its grace period after the test's duration.
const (
	controlTimeout = 10 * time.Second
	graceTimeout   = 40 * time.Second
)

type arrival struct {
	conn   net.Conn
	cookie cookie
}

// Serve accepts on ln until ctx ends (or after one test with OneOff) and closes ln.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { <-ctx.Done(); ln.Close() }()

	arrivals := make(chan arrival)
	acceptErr := make(chan error, 1)
	var wg sync.WaitGroup
	defer wg.Wait()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				acceptErr <- err
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Every connection opens with the cookie; without it in time it is not iperf.
				_ = conn.SetReadDeadline(time.Now().Add(controlTimeout))
				var c cookie
				if _, err := io.ReadFull(conn, c[:]); err != nil {
					conn.Close()
					return
				}
				_ = conn.SetReadDeadline(time.Time{})
				select {
				case arrivals <- arrival{conn, c}:
				case <-ctx.Done():
					conn.Close()
				}
			}()
		}
	}()

	var cur *serverTest
	done := make(chan *Report, 1)
	for {
		select {
		case <-ctx.Done():
			if cur != nil {
				<-done
			}
			return nil
		case err := <-acceptErr:
			if cur != nil {
				cancel()
				<-done
			}
			if ctx.Err() != nil {
				return nil
			}
			return err
		case a := <-arrivals:
			switch {
			case cur != nil && a.cookie == cur.cookie:
				select {
				case cur.streams <- a.conn:
				default:
					deny(a.conn)
				}
			case cur != nil:
				deny(a.conn)
			default:
				cur = &serverTest{srv: s, ctrl: a.conn, cookie: a.cookie, streams: make(chan net.Conn, maxStreams)}
				go func(t *serverTest) { done <- t.run(ctx) }(cur)
			}
		case rep := <-done:
			cur.discardStreams()
			cur = nil
			if s.OnReport != nil && rep != nil {
				s.OnReport(rep)
			}
			if s.OneOff {
				return nil
			}
		}
	}
}

func deny(c net.Conn) {
	_ = c.SetWriteDeadline(time.Now().Add(time.Second))
	_ = writeState(c, stateAccessDenied)
	c.Close()
}

type serverTest struct {
	srv     *Server
	ctrl    net.Conn
	cookie  cookie
	streams chan net.Conn // data connections that presented our cookie
	params  params
	active  []*stream
	meter   *meter
}

func (t *serverTest) logf(format string, args ...any) {
	if t.srv.Logf != nil {
		t.srv.Logf(format, args...)
	}
}

// run drives one test from PARAM_EXCHANGE to IPERF_DONE. It returns the report, with Error set
// when the test failed after it started, or nil when it never started.
func (t *serverTest) run(ctx context.Context) *Report {
	defer t.ctrl.Close()
	stop := context.AfterFunc(ctx, func() { _ = t.ctrl.SetDeadline(time.Now()) })
	defer stop()
	defer func() {
		for _, s := range t.active {
			s.conn.Close()
		}
	}()
	t.logf("iperf: accepted connection from %s", t.ctrl.RemoteAddr())
	rep, err := t.test(ctx)
	if err != nil {
		t.logf("iperf: test from %s: %v", t.ctrl.RemoteAddr(), err)
		if rep != nil {
			rep.Error = err.Error()
		}
	}
	return rep
}

func (t *serverTest) test(ctx context.Context) (*Report, error) {
	deadline := func(d time.Duration) { _ = t.ctrl.SetReadDeadline(time.Now().Add(d)) }
	if err := writeState(t.ctrl, stateParamExchange); err != nil {
		return nil, err
	}
	deadline(controlTimeout)
	if err := readJSON(t.ctrl, &t.params); err != nil {
		return nil, fmt.Errorf("reading parameters: %w", err)
	}
	if err := t.checkParams(); err != nil {
		_ = writeState(t.ctrl, stateServerTerminate)
		return nil, err
	}
	if err := writeState(t.ctrl, stateCreateStreams); err != nil {
		return nil, err
	}
	wait := time.NewTimer(controlTimeout)
	defer wait.Stop()
	for i := 0; i < t.params.Parallel; i++ {
		select {
		case c := <-t.streams:
			t.active = append(t.active, newStream(streamID(i), c, t.params.Reverse, t.params.Len))
		case <-wait.C:
			return nil, fmt.Errorf("only %d of %d streams connected", i, t.params.Parallel)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	t.meter = newMeter(t.active, t.srv.Interval, t.srv.OnInterval)
	rep := &Report{Start: newStart(t.cookie, t.params, t.active, time.Now())}
	h, p := splitAddr(t.ctrl.RemoteAddr())
	rep.Start.AcceptedConnection = &HostPort{Host: h, Port: p}
	if err := writeState(t.ctrl, stateTestStart); err != nil {
		return rep, err
	}
	t.meter.begin()
	for _, s := range t.active {
		go s.run()
	}
	if err := writeState(t.ctrl, stateTestRunning); err != nil {
		t.halt()
		return rep, err
	}
	deadline(time.Duration(t.params.Time+t.params.Omit)*time.Second + graceTimeout)
	st, err := readState(t.ctrl)
	t.halt()
	rep.Intervals = t.meter.intervals
	if err != nil {
		return rep, fmt.Errorf("waiting for TEST_END: %w", err)
	}
	if st != stateTestEnd {
		return rep, fmt.Errorf("client sent state %d instead of TEST_END", st)
	}
	if err := writeState(t.ctrl, stateExchangeResults); err != nil {
		return rep, err
	}
	deadline(controlTimeout)
	var peer results
	if err := readJSON(t.ctrl, &peer); err != nil {
		return rep, fmt.Errorf("reading client results: %w", err)
	}
	if err := writeJSON(t.ctrl, localResults(t.meter)); err != nil {
		return rep, err
	}
	rep.End = buildEnd(t.meter, peer)
	if err := writeState(t.ctrl, stateDisplayResults); err != nil {
		return rep, err
	}
	if st, err := readState(t.ctrl); err != nil || st != stateIperfDone {
		// The numbers are complete; a client that leaves without IPERF_DONE changes nothing.
		t.logf("iperf: client ended without IPERF_DONE (state %d, %v)", st, err)
	}
	return rep, nil
}

func (t *serverTest) checkParams() error {
	p := &t.params
	switch {
	case p.UDP || p.SCTP || !p.TCP:
		return errors.New("only TCP tests are supported")
	case p.Bidirectional:
		return errors.New("bidirectional tests are not supported")
	case p.Parallel < 1 || p.Parallel > maxStreams:
		return fmt.Errorf("parallel %d out of range 1..%d", p.Parallel, maxStreams)
	case p.Num != 0 || p.BlockCount != 0:
		return errors.New("only timed tests (-t) are supported")
	}
	if p.Len <= 0 {
		p.Len = DefaultBlockSize
	}
	if p.Len > 1<<20 {
		return fmt.Errorf("block size %d too large", p.Len)
	}
	if p.Time <= 0 {
		p.Time = 10
	}
	return nil
}

// halt ends the measurement and the streams, as iperf3 does on TEST_END.
func (t *serverTest) halt() {
	t.meter.finish()
	for _, s := range t.active {
		s.halt()
		s.conn.Close()
	}
}

// discardStreams closes data connections that arrived too late or in excess.
func (t *serverTest) discardStreams() {
	for {
		select {
		case c := <-t.streams:
			c.Close()
		default:
			return
		}
	}
}
