package main

import (
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nicstack/nicstack/netdev/header"
	ps "github.com/nicstack/nicstack/runtime/packetstream"
	"github.com/nicstack/nicstack/runtime/pcap"
)

// batch bounds the frames one pass takes from a side (Genode's routers handle up to 50 per
// signal; a batch of 32 is what the stream publishes at once).
const batch = 32

// side is one of nic_dump's two sessions as the wire sees it. A side whose session is not
// open has nil endpoints.
type side struct {
	name    string     // its label in the log
	in      *ps.Sink   // frames from it
	out     *ps.Source // frames to it
	dropped *atomic.Uint64
}

// wire moves frames between the two sides on one goroutine, as Genode's nic_dump does on its
// entrypoint: per pass it takes a batch from one side, logs each frame, adds it to the
// capture, copies it to the other side, acknowledges the batch and wakes both sides once; the
// log lines and capture records of the batch go out with one write each. A frame the other
// side has no room for (or no session) is dropped and counted, as the router does.
type wire struct {
	down, up side
	cfg      header.LogConfig
	quiet    bool
	timing   *header.Timing // nil: no time in the lines
	log      io.Writer
	capture  io.Writer                    // nil: no capture file
	onError  func(what string, err error) // a write failed; that output stops

	w      *ps.Waiter
	stop   atomic.Bool
	done   sync.WaitGroup
	line   []byte
	rec    []byte
	pks    [batch]ps.Packet
	frames [batch][]byte
}

// start runs the wire until end.
func (w *wire) start() error {
	var eps []ps.Endpoint
	for _, s := range []*side{&w.down, &w.up} {
		if s.in != nil {
			eps = append(eps, s.in, s.out)
		}
	}
	var err error
	if w.w, err = ps.NewWaiter(eps...); err != nil {
		return err
	}
	w.quiet = w.cfg.Quiet()
	w.done.Add(1)
	go w.run()
	return nil
}

func (w *wire) run() {
	defer w.done.Done()
	for !w.stop.Load() {
		moved := w.pass(&w.down, &w.up) + w.pass(&w.up, &w.down)
		w.flush()
		if moved == 0 && w.w.Wait() != nil {
			return
		}
	}
}

// pass moves one batch from side from to side to and returns how many frames it took.
func (w *wire) pass(from, to *side) int {
	if from.in == nil {
		return 0
	}
	if to.out != nil {
		to.out.ReleaseAcked()
	}
	n := from.in.TryGetBatch(w.pks[:], w.frames[:])
	if n == 0 {
		return 0
	}
	now := time.Now()
	for i, f := range w.frames[:n] {
		if f == nil {
			continue // a descriptor outside the buffer: the sink counted it, it is acknowledged below
		}
		if !w.quiet {
			w.line = header.AppendLine(w.line, to.name, from.name, f, &w.cfg, w.timing, now)
		}
		if w.capture != nil {
			w.rec = pcap.AppendRecord(w.rec, now, f, pcap.Snaplen)
		}
		if !forward(to.out, f, w.pks[i]) {
			to.dropped.Add(1)
		}
	}
	from.in.TryAckBatch(w.pks[:n])
	from.in.Wakeup()
	if to.out != nil {
		to.out.Wakeup()
	}
	return n
}

// forward copies frame, with p's offload metadata, into out; false: out is absent or full.
func forward(out *ps.Source, frame []byte, p ps.Packet) bool {
	if out == nil {
		return false
	}
	dst, ok := out.Reserve(len(frame))
	if !ok && out.ReleaseAcked() > 0 {
		dst, ok = out.Reserve(len(frame))
	}
	if !ok {
		return false
	}
	copy(dst, frame)
	out.Commit(len(frame), p.Offload())
	return true
}

// flush writes the batch's lines and records, one write each.
func (w *wire) flush() {
	if len(w.line) > 0 {
		if _, err := w.log.Write(w.line); err != nil {
			w.onError("log", err)
			w.quiet = true
		}
		w.line = w.line[:0]
	}
	if len(w.rec) > 0 {
		if _, err := w.capture.Write(w.rec); err != nil {
			w.onError("pcap", err)
			w.capture = nil
		}
		w.rec = w.rec[:0]
	}
}

// end stops the wire's goroutine and waits for it; the sessions are then the caller's again.
func (w *wire) end() {
	w.stop.Store(true)
	w.w.Wake()
	w.done.Wait()
	w.w.Close()
}
