package iperf

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"
)

// Server answers iperf3 clients, one test at a time as iperf3 does: a client that arrives while a
// test runs is told ACCESS_DENIED.
type Server struct {
	Network  Network       // where the listener came from (UDP tests open their socket there); nil means Kernel
	Interval time.Duration // reporting interval; 0 means 1 s
	Format   byte          // -f, as ClientConfig's
	// Output receives what iperf3 -s prints: a banner per test and its text lines, or with JSON
	// each test's -J report. Nil prints nothing; a client's --get-server-output is served either way.
	Output   io.Writer
	JSON     bool
	OneOff   bool                 // -1: return after the first test
	OnReport func(*Report)        // optional: every finished (or failed) test
	Logf     func(string, ...any) // optional: what went wrong, for a log
	// RcvTimeout is --rcv-timeout: a test the server receives in that gets nothing this long
	// fails with "idle timeout for receiving data". 0 means iperf3's 120 s.
	RcvTimeout time.Duration
	// SndTimeout is --snd-timeout: TCP_USER_TIMEOUT on the test's connections; 0 keeps the system's.
	SndTimeout time.Duration
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
	if s.Network == nil {
		s.Network = Kernel
	}
	ctx, cancel := context.WithCancel(ctx)
	go func() { <-ctx.Done(); ln.Close() }()
	arrivals := make(chan arrival)
	acceptErr := make(chan error, 1)
	var wg sync.WaitGroup
	defer func() {
		cancel() // closes ln, which ends the accepting goroutine
		wg.Wait()
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				acceptErr <- err
				return
			}
			// Every connection opens with the cookie; without it in time it is not iperf. They
			// are read in the order they came, as iperf3 reads them: a test numbers its streams
			// by that order, and so does its client.
			_ = conn.SetReadDeadline(time.Now().Add(controlTimeout))
			stop := context.AfterFunc(ctx, func() { conn.Close() })
			var c cookie
			_, err = io.ReadFull(conn, c[:])
			stop()
			if err != nil {
				conn.Close()
				continue
			}
			_ = conn.SetReadDeadline(time.Time{})
			select {
			case arrivals <- arrival{conn, c}:
			case <-ctx.Done():
				conn.Close()
			}
		}
	}()

	number := 0
	var cur *serverTest
	done := make(chan *Report, 1)
	banner := func() {
		number++
		if s.Output != nil && !s.JSON {
			_, port := splitAddr(ln.Addr())
			fmt.Fprintf(s.Output, "%s"+serverListenFormat+"%s", serverBannerRule, port, number, serverBannerRule)
		}
	}
	banner()
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
				cur = &serverTest{srv: s, ctrl: a.conn, cookie: a.cookie, local: ln.Addr(), streams: make(chan net.Conn, 2*maxStreams)}
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
			banner()
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
	local   net.Addr      // the listener's address: a UDP test's socket opens there
	streams chan net.Conn // data connections that presented our cookie
	t       *test
	udp     *udpListener
}

func (st *serverTest) logf(format string, args ...any) {
	if st.srv.Logf != nil {
		st.srv.Logf(format, args...)
	}
}

// run drives one test from PARAM_EXCHANGE to IPERF_DONE and prints it. It returns the report,
// with Error set when the test failed, or nil when it never got its parameters.
func (st *serverTest) run(ctx context.Context) *Report {
	defer st.ctrl.Close()
	from := st.ctrl.RemoteAddr() // a closed connection of the embedded stack has none
	stop := context.AfterFunc(ctx, func() { _ = st.ctrl.SetDeadline(time.Now()) })
	defer stop()
	err := st.test(ctx)
	if st.t != nil {
		st.t.halt()
		st.t.closeStreams()
	}
	if st.udp != nil {
		st.udp.close()
	}
	if err != nil {
		st.logf("iperf: test from %v: %v", from, err)
		if !st.srv.JSON && st.srv.Output != nil {
			fmt.Fprintf(st.srv.Output, "iperf3: error - %s\n", err)
		}
	}
	if st.t == nil {
		return nil
	}
	rep := st.t.rep
	if err != nil {
		rep.Error, rep.Err = err.Error(), err
	}
	if st.srv.JSON && st.srv.Output != nil {
		_ = rep.WriteJSON(st.srv.Output)
	}
	return rep
}

// refuse tells the client why its test cannot go on (SERVER_ERROR) and returns the reason.
func (st *serverTest) refuse(err error) error {
	var ie *Error
	if !errors.As(fail(101, err), &ie) { // IEINITTEST unless it has iperf3's code
		return err
	}
	_ = st.ctrl.SetWriteDeadline(time.Now().Add(time.Second))
	_ = writeServerError(st.ctrl, ie)
	return err
}

func (st *serverTest) test(ctx context.Context) error {
	srv, ctrl := st.srv, st.ctrl
	deadline := func(d time.Duration) { _ = ctrl.SetReadDeadline(time.Now().Add(d)) }
	if srv.SndTimeout > 0 {
		if _, err := srv.Network.Tune(ctrl, Options{UserTimeout: srv.SndTimeout}); err != nil {
			return err
		}
	}
	if err := writeState(ctrl, stateParamExchange); err != nil {
		return fail(111, err)
	}
	deadline(controlTimeout)
	var p params
	if err := readJSON(ctrl, &p); err != nil {
		return st.refuse(fail(CodeRecvParams, err))
	}
	if err := p.check(false); err != nil {
		return st.refuse(err)
	}
	if p.Time == 0 && p.Num == 0 && p.BlockCount == 0 {
		p.Time = 10
	}
	if p.UDP && p.Len == 0 {
		p.Len = defaultUDPBlockSize
	}
	out := &textOut{format: 'a'}
	if srv.Format != 0 {
		out.format = srv.Format
	}
	if !srv.JSON {
		out.w = srv.Output
		if p.GetServerOutput != 0 {
			out.keep = &strings.Builder{}
		}
	}
	t := newTest(false, p, srv.Network, srv.Interval, out)
	t.opts.UserTimeout = srv.SndTimeout
	t.cookie = st.cookie
	st.t = t
	if p.UDP {
		// The test's UDP socket, on the listener's address as iperf3 opens it.
		pc, err := srv.Network.ListenPacket("udp", st.local.String())
		if err != nil {
			return st.refuse(fail(CodeStreamListen, err))
		}
		host, _ := splitAddr(ctrl.LocalAddr())
		_, port := splitAddr(pc.LocalAddr())
		local := &net.UDPAddr{IP: net.ParseIP(host), Port: port}
		st.udp = newUDPListener(pc, local, p.Parallel*len(t.groups()), p.Len)
		if err := t.tune(pc, t.opts); err != nil {
			return st.refuse(err)
		}
	}
	h, port := splitAddr(ctrl.RemoteAddr())
	t.connected(time.Now(), 0)
	t.rep.Start.AcceptedConnection = &HostPort{Host: h, Port: port}
	t.out.printf(acceptedFormat, h, port)
	if err := writeState(ctrl, stateCreateStreams); err != nil {
		return fail(111, err)
	}
	// The client says nothing more until TEST_END, unless it gives up: read for that meanwhile.
	ctrlMsgs := make(chan ctrlMsg, 1)
	go func() {
		_ = ctrl.SetReadDeadline(time.Time{})
		state, err := readState(ctrl)
		ctrlMsgs <- ctrlMsg{state, err}
	}()
	if err := st.acceptStreams(ctx, ctrlMsgs); err != nil {
		return st.refuse(err)
	}

	t.startTest(time.Now())
	if st.udp != nil {
		// From here the socket's reader counts what the receiving streams get.
		for _, s := range t.streams {
			if !s.sender {
				st.udp.receive(s)
			}
		}
	}
	if err := writeState(ctrl, stateTestStart); err != nil {
		return fail(111, err)
	}
	t.run()
	if err := writeState(ctrl, stateTestRunning); err != nil {
		return fail(111, err)
	}
	// Like iperf3's server, give up a test that outlives its time by the grace period.
	var giveUp time.Time
	if p.Time > 0 {
		giveUp = t.begin.Add(time.Duration(p.Time+p.Omit)*time.Second + graceTimeout)
	}
	// As iperf3's server, one that receives gives up when nothing arrives for --rcv-timeout,
	// without a word to the client.
	var idle time.Duration
	if t.mode != modeSender {
		idle = cmp.Or(srv.RcvTimeout, defaultRcvTimeout*time.Millisecond)
	}
	m, err := t.measure(ctx, giveUp, idle, ctrlMsgs)
	t.finish(time.Now())
	t.halt()
	t.reportInterval()
	if errors.Is(err, &Error{Code: CodeNoMessage}) {
		return err
	}
	if err != nil {
		return st.refuse(err)
	}
	if m == nil {
		_ = ctrl.SetReadDeadline(time.Now()) // ends the reader
		<-ctrlMsgs
		return errors.New("the client did not end the test in time")
	}
	switch {
	case m.err != nil:
		return ctrlReadError(m.err)
	case m.state == stateClientTerminate:
		t.summarize()
		return &Error{Code: 119} // IECLIENTTERM
	case m.state != stateTestEnd:
		return st.refuse(&Error{Code: CodeMessage, Err: fmt.Errorf("state %d instead of TEST_END", m.state)})
	}
	t.closeStreams()
	t.summarize()
	if err := writeState(ctrl, stateExchangeResults); err != nil {
		return fail(111, err)
	}
	deadline(controlTimeout)
	var peer results
	if err := readJSON(ctrl, &peer); err != nil {
		return st.refuse(fail(CodeRecvResults, err))
	}
	if err := t.takeResults(peer); err != nil {
		return st.refuse(err)
	}
	ours := t.results()
	if p.GetServerOutput != 0 {
		if srv.JSON {
			ours.ServerOutputJSON, _ = json.Marshal(t.rep)
		} else {
			text := out.keep.String()
			ours.ServerOutputText = &text
		}
	}
	if err := writeJSON(ctrl, ours); err != nil {
		return fail(116, err)
	}
	if err := writeState(ctrl, stateDisplayResults); err != nil {
		return fail(111, err)
	}
	// The numbers are complete: a client that leaves without IPERF_DONE changes nothing.
	_, _ = readState(ctrl)
	return nil
}

// acceptStreams takes the test's data streams in the order iperf3's server does: the ones it
// receives on first, then the ones it sends on.
func (st *serverTest) acceptStreams(ctx context.Context, ctrl <-chan ctrlMsg) error {
	t := st.t
	wait := time.NewTimer(controlTimeout)
	defer wait.Stop()
	for _, sender := range []bool{false, true} {
		if sender && t.mode == modeReceiver || !sender && t.mode == modeSender {
			continue
		}
		for i := 0; i < t.p.Parallel; i++ {
			var conn net.Conn
			if st.udp != nil {
				select {
				case peer := <-st.udp.newPeers:
					conn = peer
				case <-wait.C:
					return &Error{Code: CodeStreamAccept, Err: fmt.Errorf("only %d of the test's UDP streams arrived", len(t.streams))}
				case m := <-ctrl:
					return gaveUp(m)
				case <-ctx.Done():
					return ctx.Err()
				}
			} else {
				select {
				case conn = <-st.streams:
				case <-wait.C:
					return &Error{Code: CodeStreamAccept, Err: fmt.Errorf("only %d of the test's streams connected", len(t.streams))}
				case m := <-ctrl:
					return gaveUp(m)
				case <-ctx.Done():
					return ctx.Err()
				}
				if err := t.tune(conn, t.opts); err != nil {
					conn.Close()
					return err
				}
			}
			if _, err := t.addStream(conn, sender); err != nil {
				return err
			}
		}
	}
	return nil
}

// gaveUp is the error of a client that spoke (or left) while its streams were expected.
func gaveUp(m ctrlMsg) error {
	if m.err != nil {
		return ctrlReadError(m.err)
	}
	if m.state == stateClientTerminate {
		return &Error{Code: 119} // IECLIENTTERM
	}
	return &Error{Code: CodeMessage, Err: fmt.Errorf("state %d while the streams connect", m.state)}
}

// discardStreams closes data connections that arrived too late or in excess.
func (st *serverTest) discardStreams() {
	for {
		select {
		case c := <-st.streams:
			c.Close()
		default:
			return
		}
	}
}
