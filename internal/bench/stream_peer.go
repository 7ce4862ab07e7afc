package bench

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/nicstack/nicstack/runtime/packetstream"
)

// writeAhead is how many frames ahead of the one it writes the source claims lines.
const writeAhead = 2

type streamPeerArgs struct {
	boost bool
	role  string
	size  int
	time  time.Duration
	batch int
	cfg   packetstream.Config
}

// endOfStream in a frame's first 8 bytes tells the sink the run is over.
const endOfStream = ^uint64(0)

// frameTemplate is the content every frame carries after its 8-byte sequence number; the
// sink compares every byte.
func frameTemplate(size int) []byte {
	t := make([]byte, size)
	x := uint32(2463534242)
	for i := range t {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		t[i] = byte(x)
	}
	return t
}

func runStreamPeer(a streamPeerArgs) peerResult {
	if a.size < 8 {
		return peerResult{Error: "frames must have at least 8 bytes"}
	}
	if a.boost {
		// Best effort: without autogroups the write fails and the peer runs as it is.
		os.WriteFile("/proc/self/autogroup", []byte("-20"), 0)
	}
	files, err := packetstream.StreamFilesFrom([]*os.File{os.NewFile(3, "mem"), os.NewFile(4, "to-sink"), os.NewFile(5, "to-source")}, a.cfg)
	if err != nil {
		return peerResult{Error: err.Error()}
	}
	var res peerResult
	switch a.role {
	case "source":
		res, err = streamSource(files, a)
	case "sink":
		res, err = streamSink(files, a)
	case "ref-producer", "ref-consumer":
		res, err = refRing(files, a)
	default:
		err = fmt.Errorf("unknown role %q", a.role)
	}
	if err != nil {
		res.Error = err.Error()
	}
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) == nil {
		res.CPUSeconds = time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
	}
	return res
}

func streamSource(files *packetstream.StreamFiles, a streamPeerArgs) (peerResult, error) {
	src, err := packetstream.OpenSource(files)
	if err != nil {
		return peerResult{}, err
	}
	defer src.Close()
	w, err := packetstream.NewWaiter(src)
	if err != nil {
		return peerResult{}, err
	}
	defer w.Close()
	tmpl := frameTemplate(a.size)
	var stop atomic.Bool
	time.AfterFunc(a.time, func() { stop.Store(true) })
	start := time.Now()
	var seq uint64
	batch := make([]packetstream.Packet, a.batch)
	for !stop.Load() {
		for p, ok := src.GetAcked(); ok; p, ok = src.GetAcked() {
			src.Release(p)
		}
		n := 0
		for ; n < a.batch; n++ {
			p, err := src.Alloc(a.size)
			if err != nil {
				break
			}
			batch[n] = p
		}
		// Each frame's lines were last read by the sink on the other CPU, and a store waits
		// for its line: claim the lines of the frames ahead while this one is written, so
		// that the transfers overlap.
		for _, p := range batch[:min(n, writeAhead)] {
			prefetchW(src.Payload(p))
		}
		sent := 0
		for i, p := range batch[:n] {
			if i+writeAhead < n {
				prefetchW(src.Payload(batch[i+writeAhead]))
			}
			b := src.Payload(p)
			fill(b, tmpl)
			binary.LittleEndian.PutUint64(b, seq)
			if !src.TrySubmit(p) {
				// The sink has acknowledged frames whose submit entries it has not freed yet.
				for _, p := range batch[i:n] {
					src.Release(p)
				}
				break
			}
			seq++
			sent++
		}
		src.Wakeup()
		if sent == 0 {
			if err := w.Wait(); err != nil {
				return peerResult{}, err
			}
		}
	}
	elapsed := time.Since(start)
	// The end marker, submitted eagerly once a buffer and an entry are free.
	for {
		p, err := src.Alloc(a.size)
		if err == nil {
			binary.LittleEndian.PutUint64(src.Payload(p), endOfStream)
			if err := src.Submit(p); err != nil {
				return peerResult{}, err
			}
			break
		}
		if err != packetstream.ErrExhausted {
			return peerResult{}, err
		}
		p, err = src.WaitAcked()
		if err != nil {
			return peerResult{}, err
		}
		src.Release(p)
	}
	c := src.Counters()
	return peerResult{Frames: seq, Bytes: seq * uint64(a.size), Seconds: elapsed.Seconds(),
		SignalsSent: c.SignalsSent.Load(), Sleeps: c.Sleeps.Load(), Invalid: c.Invalid.Load()}, nil
}

func streamSink(files *packetstream.StreamFiles, a streamPeerArgs) (peerResult, error) {
	snk, err := packetstream.OpenSink(files)
	if err != nil {
		return peerResult{}, err
	}
	defer snk.Close()
	w, err := packetstream.NewWaiter(snk)
	if err != nil {
		return peerResult{}, err
	}
	defer w.Close()
	tmpl := frameTemplate(a.size)
	var seq, bad uint64
	var start time.Time
	deadline := time.Now().Add(a.time + 20*time.Second)
	for {
		n := 0
		for ; n < a.batch && snk.CanAck(); n++ {
			p, ok := snk.TryGet()
			if !ok {
				break
			}
			b := snk.Payload(p)
			if len(b) != a.size {
				bad++
			} else if s := binary.LittleEndian.Uint64(b); s == endOfStream {
				snk.TryAck(p)
				snk.Wakeup()
				c := snk.Counters()
				res := peerResult{Frames: seq, Bytes: seq * uint64(a.size), Seconds: time.Since(start).Seconds(),
					SignalsSent: c.SignalsSent.Load(), Sleeps: c.Sleeps.Load(), Invalid: c.Invalid.Load()}
				if bad != 0 {
					return res, fmt.Errorf("%d of %d frames arrived damaged or out of order", bad, seq)
				}
				return res, nil
			} else if s != seq || !bytes.Equal(b[8:], tmpl[8:]) {
				bad++
			}
			if seq == 0 {
				start = time.Now()
			}
			seq++
			snk.TryAck(p)
		}
		snk.Wakeup()
		if n == 0 {
			if err := w.WaitUntil(deadline); err != nil {
				return peerResult{}, fmt.Errorf("after %d frames: %w", seq, err)
			}
		}
	}
}

// refRing is the reference: bare 16-byte descriptors over one ring in the same kind of memfd,
// both sides busy-polling, each publishing its index every 32 entries.
func refRing(files *packetstream.StreamFiles, a streamPeerArgs) (peerResult, error) {
	const n, every = 1024, 32
	var mem []byte
	rc, err := files.Mem.SyscallConn()
	if err != nil {
		return peerResult{}, err
	}
	rc.Control(func(fd uintptr) {
		mem, err = unix.Mmap(int(fd), 0, 256+n*16, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	})
	if err != nil {
		return peerResult{}, err
	}
	defer unix.Munmap(mem)
	head := (*atomic.Uint32)(unsafe.Pointer(&mem[0]))
	tail := (*atomic.Uint32)(unsafe.Pointer(&mem[128]))
	ent := func(i uint32) *[2]uint64 { return (*[2]uint64)(unsafe.Pointer(&mem[256+int(i%n)*16])) }
	var stop atomic.Bool
	start := time.Now()
	if a.role == "ref-producer" {
		time.AfterFunc(a.time, func() { stop.Store(true) })
		var h, t uint32
		for !stop.Load() {
			for k := 0; k < every; k++ {
				for h-t >= n {
					t = tail.Load()
				}
				*ent(h) = [2]uint64{uint64(h), 64}
				h++
			}
			head.Store(h)
		}
		for h-t >= n {
			t = tail.Load()
		}
		*ent(h) = [2]uint64{0, 0}
		head.Store(h + 1)
		return peerResult{Frames: uint64(h), Seconds: time.Since(start).Seconds()}, nil
	}
	var h, t uint32
	var sum uint64
	deadline := time.Now().Add(a.time + 20*time.Second)
	for spins := 0; ; spins++ {
		for t != h {
			e := *ent(t)
			if e[1] == 0 {
				tail.Store(t + 1)
				return peerResult{Frames: uint64(t), Seconds: time.Since(start).Seconds(), Bytes: sum}, nil
			}
			if t == 0 {
				start = time.Now()
			}
			sum += e[0]
			t++
			if t%every == 0 {
				tail.Store(t)
			}
		}
		h = head.Load()
		if spins&0xfffff == 0 && time.Now().After(deadline) {
			return peerResult{}, fmt.Errorf("reference ring stalled after %d entries", t)
		}
	}
}
