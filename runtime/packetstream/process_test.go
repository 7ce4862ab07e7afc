package packetstream

import (
	"fmt"

	"golang.org/x/sys/unix"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Cross-process tests: the test binary re-executes itself as the peer (TestMain sees
// peerEnv), with the stream's files as descriptors 3, 4, 5 (a session's as 3-8), over real
// memfds and eventfds.

const peerEnv = "NICSTACK_PACKETSTREAM_PEER"

// stall bounds every single wait in these tests: a lost wakeup fails instead of hanging.
const stall = 10 * time.Second

func TestMain(m *testing.M) {
	if role := os.Getenv(peerEnv); role != "" {
		if err := runPeer(role); err != nil {
			fmt.Fprintf(os.Stderr, "peer %s: %v\n", role, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// peerParams travel to the peer in its environment.
type peerParams struct {
	cfg               Config
	n, maxSize, batch int
	slowEvery         int // the sink pauses 1 ms every slowEvery frames (0: never)
}

func (p peerParams) env() string {
	return fmt.Sprintf("%d,%d,%d,%d,%d,%d", p.cfg.QueueSize, p.cfg.BulkSize, p.n, p.maxSize, p.batch, p.slowEvery)
}

func parseParams(s string) (peerParams, error) {
	var v [6]int
	parts := strings.Split(s, ",")
	if len(parts) != len(v) {
		return peerParams{}, fmt.Errorf("bad params %q", s)
	}
	for i, f := range parts {
		var err error
		if v[i], err = strconv.Atoi(f); err != nil {
			return peerParams{}, err
		}
	}
	return peerParams{cfg: Config{QueueSize: v[0], BulkSize: v[1]}, n: v[2], maxSize: v[3], batch: v[4], slowEvery: v[5]}, nil
}

// frameSize is frame i's size, from 8 (room for the sequence number) to max.
func frameSize(i, max int) int { return 8 + (i*7919)%(max-7) }

func runPeer(role string) error {
	p, err := parseParams(os.Getenv(peerEnv + "_PARAMS"))
	if err != nil {
		return err
	}
	switch role {
	case "sink", "handoff-sink":
		files, err := StreamFilesFrom([]*os.File{os.NewFile(3, "mem"), os.NewFile(4, "to-sink"), os.NewFile(5, "to-source")}, p.cfg)
		if err != nil {
			return err
		}
		snk, err := OpenSink(files)
		if err != nil {
			return err
		}
		defer snk.Close()
		if role == "sink" {
			return receiveFrames(snk, p)
		}
		return handoffSink(snk)
	case "echo-client":
		files := make([]*os.File, 6)
		for i := range files {
			files[i] = os.NewFile(uintptr(3+i), "session-"+strconv.Itoa(i))
		}
		sf, err := SessionFilesFrom(files, p.cfg, p.cfg)
		if err != nil {
			return err
		}
		c, err := OpenClient(sf)
		if err != nil {
			return err
		}
		defer c.Close()
		return echoClient(c, p)
	}
	return fmt.Errorf("unknown role")
}

// receiveFrames checks p.n frames: sizes, every byte, order.
func receiveFrames(snk *Sink, p peerParams) error {
	w, err := NewWaiter(snk)
	if err != nil {
		return err
	}
	defer w.Close()
	for got := 0; got < p.n; {
		k := 0
		for ; k < p.batch && snk.CanAck(); k++ {
			pk, ok := snk.TryGet()
			if !ok {
				break
			}
			if b := snk.Payload(pk); len(b) != frameSize(got, p.maxSize) || !check(b, got) {
				return fmt.Errorf("frame %d: %d bytes, want %d, intact %v", got, len(b), frameSize(got, p.maxSize), check(b, got))
			}
			snk.TryAck(pk)
			got++
			if p.slowEvery > 0 && got%p.slowEvery == 0 {
				snk.Wakeup()
				time.Sleep(time.Millisecond)
			}
		}
		snk.Wakeup()
		if k == 0 {
			if err := w.WaitUntil(time.Now().Add(stall)); err != nil {
				return fmt.Errorf("after %d frames: %w", got, err)
			}
		}
	}
	if inv := snk.Counters().Invalid.Load(); inv != 0 {
		return fmt.Errorf("%d invalid descriptors", inv)
	}
	return nil
}

// sendFrames sends p.n frames through src in batches, refilling from acknowledgements, and
// returns once all are acknowledged.
func sendFrames(src *Source, w *Waiter, n, maxSize, batch int) error {
	for sent := 0; sent < n || src.InFlight() > 0; {
		for pk, ok := src.GetAcked(); ok; pk, ok = src.GetAcked() {
			src.Release(pk)
		}
		k := 0
		for ; k < batch && sent < n && src.CanSubmit(); k++ {
			pk, err := src.Alloc(frameSize(sent, maxSize))
			if err == ErrExhausted {
				break
			}
			if err != nil {
				return err
			}
			fill(src.Payload(pk), sent)
			src.TrySubmit(pk)
			sent++
		}
		src.Wakeup()
		if k == 0 && (sent < n || src.InFlight() > 0) {
			if err := w.WaitUntil(time.Now().Add(stall)); err != nil {
				return fmt.Errorf("after %d frames, %d in flight, %d invalid acks: %w", sent, src.InFlight(), src.Counters().Invalid.Load(), err)
			}
		}
	}
	return nil
}

func startPeer(t *testing.T, role string, p peerParams, files []*os.File) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), peerEnv+"="+role, peerEnv+"_PARAMS="+p.env())
	cmd.ExtraFiles = files
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd
}

func waitPeer(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("peer: %v", err)
		}
	case <-time.After(2 * stall):
		cmd.Process.Kill()
		t.Fatal("peer did not finish")
	}
}

func TestCrossProcess(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    peerParams
	}{
		{"batched", peerParams{cfg: DefaultConfig(), n: 100000, maxSize: 1514, batch: 64}},
		{"full queues", peerParams{cfg: Config{QueueSize: 8, BulkSize: 64 * BlockSize}, n: 20000, maxSize: 1514, batch: 5, slowEvery: 2000}},
		{"exhausted buffers", peerParams{cfg: Config{QueueSize: 256, BulkSize: 6 * BlockSize}, n: 20000, maxSize: 3 * BlockSize, batch: 32, slowEvery: 2000}},
		{"64 KiB frames", peerParams{cfg: Config{QueueSize: 64, BulkSize: 200 * BlockSize}, n: 3000, maxSize: 65536, batch: 16}},
	} {
		if raceEnabled || testing.Short() {
			// The race detector cannot see the mapping anyway; it only slows both sides down.
			tc.p.n /= 5
		}
		t.Run(tc.name, func(t *testing.T) {
			files, err := NewStreamFiles("test", tc.p.cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer files.Close()
			src, err := OpenSource(files)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			w, err := NewWaiter(src)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			peer := startPeer(t, "sink", tc.p, files.Files())
			if err := sendFrames(src, w, tc.p.n, tc.p.maxSize, tc.p.batch); err != nil {
				t.Fatal(err)
			}
			waitPeer(t, peer)
			c := src.Counters()
			t.Logf("%d frames, %d bytes; signals sent %d, received %d; sleeps %d",
				c.Frames.Load(), c.Bytes.Load(), c.SignalsSent.Load(), c.SignalsReceived.Load(), c.Sleeps.Load())
		})
	}
}

// A session between processes: the client sends on TX, the server echoes every frame back on
// RX, the client checks what returns.
func TestSessionEcho(t *testing.T) {
	p := peerParams{cfg: Config{QueueSize: 64, BulkSize: 128 * BlockSize}, n: 20000, maxSize: 1514, batch: 16}
	sf, err := NewSessionFiles("echo", p.cfg, p.cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer sf.Close()
	srv, err := OpenServer(sf)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	w, err := NewWaiter(srv.TX, srv.RX)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	peer := startPeer(t, "echo-client", p, sf.Files())
	var held []Packet // received on TX, not yet echoed
	for echoed := 0; echoed < p.n; {
		progress := false
		for pk, ok := srv.RX.GetAcked(); ok; pk, ok = srv.RX.GetAcked() {
			srv.RX.Release(pk)
			progress = true
		}
		for len(held) < p.batch && srv.TX.CanAck() {
			pk, ok := srv.TX.TryGet()
			if !ok {
				break
			}
			held = append(held, pk)
			progress = true
		}
		for len(held) > 0 && srv.RX.CanSubmit() {
			in := srv.TX.Payload(held[0])
			out, err := srv.RX.Alloc(len(in))
			if err != nil {
				break
			}
			copy(srv.RX.Payload(out), in)
			srv.RX.TrySubmit(out)
			srv.TX.TryAck(held[0])
			held = held[1:]
			echoed++
			progress = true
		}
		srv.TX.Wakeup()
		srv.RX.Wakeup()
		if !progress {
			if err := w.WaitUntil(time.Now().Add(stall)); err != nil {
				t.Fatalf("after %d echoed: %v", echoed, err)
			}
		}
	}
	waitPeer(t, peer)
}

func echoClient(c *Client, p peerParams) error {
	w, err := NewWaiter(c.TX, c.RX)
	if err != nil {
		return err
	}
	defer w.Close()
	sent, got := 0, 0
	for got < p.n {
		progress := false
		for pk, ok := c.TX.GetAcked(); ok; pk, ok = c.TX.GetAcked() {
			c.TX.Release(pk)
			progress = true
		}
		for k := 0; k < p.batch && sent < p.n && c.TX.CanSubmit(); k++ {
			pk, err := c.TX.Alloc(frameSize(sent, p.maxSize))
			if err != nil {
				break
			}
			fill(c.TX.Payload(pk), sent)
			c.TX.TrySubmit(pk)
			sent++
			progress = true
		}
		for c.RX.CanAck() {
			pk, ok := c.RX.TryGet()
			if !ok {
				break
			}
			if b := c.RX.Payload(pk); len(b) != frameSize(got, p.maxSize) || !check(b, got) {
				return fmt.Errorf("echo %d damaged", got)
			}
			c.RX.TryAck(pk)
			got++
			progress = true
		}
		c.TX.Wakeup()
		c.RX.Wakeup()
		if !progress {
			if err := w.WaitUntil(time.Now().Add(stall)); err != nil {
				return fmt.Errorf("sent %d, got %d: %w", sent, got, err)
			}
		}
	}
	return nil
}

// One frame at a time, a million times, between two processes: every frame is a
// packet_avail and an ack_avail that a sleeping side must not miss. A lost wakeup shows as a
// wait that hits the stall deadline, which fails the test. A million takes about 5 s here (a
// handoff is two trips through the scheduler); every one of them runs, however long a crowded
// machine makes that: how fast is the stream bench's question, not this test's.
func TestHandoffMillion(t *testing.T) {
	n := 1000000
	if raceEnabled {
		n = 300000
	}
	if testing.Short() {
		n = 200000
	}
	cfg := Config{QueueSize: 4, BulkSize: 4 * BlockSize}
	files, err := NewStreamFiles("handoff", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer files.Close()
	src, err := OpenSource(files)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	w, err := NewWaiter(src)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	peer := startPeer(t, "handoff-sink", peerParams{cfg: cfg, maxSize: 64, batch: 1}, files.Files())
	start := time.Now()
	handoff := func(i int, mark bool) {
		pk, err := src.Alloc(64)
		if err != nil {
			t.Fatal(err)
		}
		fill(src.Payload(pk), i)
		if mark {
			copy(src.Payload(pk), endMark[:])
		}
		src.TrySubmit(pk)
		src.Wakeup()
		w.Spin = handoffSpin(i)
		for {
			a, ok := src.GetAcked()
			if ok {
				src.Release(a)
				return
			}
			if err := w.WaitUntil(time.Now().Add(stall)); err != nil {
				c := src.Counters()
				var b [8]byte
				n, rerr := unix.Read(src.in, b[:])
				t.Fatalf("handoff %d: no acknowledgement: %v (in flight %d, invalid %d; ack queue head %d tail %d (ours %d), armed %d; signals sent %d, received %d; pending read %d %v %v)",
					i, err, src.InFlight(), c.Invalid.Load()+src.ack.invalid, src.ack.ring.head.Load(), src.ack.ring.tail.Load(), src.ack.tail,
					src.ack.consArmed.Load(), c.SignalsSent.Load(), c.SignalsReceived.Load(), n, b, rerr)
			}
		}
	}
	i := 0
	for ; i < n; i++ {
		handoff(i, false)
	}
	handoff(i, true)
	waitPeer(t, peer)
	c := src.Counters()
	t.Logf("%d handoffs in %v; source slept %d times, sent %d signals, received %d", i, time.Since(start).Round(time.Millisecond),
		c.Sleeps.Load(), c.SignalsSent.Load(), c.SignalsReceived.Load())
}

// endMark in a frame's first bytes ends the handoff peer.
var endMark = [8]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// handoffSpin varies how long each side spins before it arms and sleeps, so that the arming
// races the peer's publishing at every phase.
func handoffSpin(i int) int { return [...]int{2000, 2000, 0, 2000, 200, 2000, 30, 2000}[i%8] }

func handoffSink(snk *Sink) error {
	w, err := NewWaiter(snk)
	if err != nil {
		return err
	}
	defer w.Close()
	for i := 0; ; i++ {
		w.Spin = handoffSpin(i * 3)
		for {
			pk, ok := snk.TryGet()
			if ok {
				b := snk.Payload(pk)
				end := len(b) >= 8 && [8]byte(b[:8]) == endMark
				if !end && !check(b, i) {
					return fmt.Errorf("handoff %d: frame damaged", i)
				}
				snk.TryAck(pk)
				snk.Wakeup()
				if end {
					return nil
				}
				break
			}
			if err := w.WaitUntil(time.Now().Add(stall)); err != nil {
				c := snk.Counters()
				return fmt.Errorf("handoff %d: no packet: %w (signals sent %d received %d; submit head %d ours %d; ack head %d)", i, err,
					c.SignalsSent.Load(), c.SignalsReceived.Load(), snk.submit.ring.head.Load(), snk.submit.tail, snk.ack.head)
			}
		}
	}
}
