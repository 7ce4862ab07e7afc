package stream

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/nicstack/nicstack/runtime/packetstream"
)

// writeAhead is how many frames ahead of the one it writes the source claims lines.
const writeAhead = 2

// PeerOptions are one peer's settings: the flags of `nicstack bench stream-peer`, which Run
// passes to the peers it starts (AddFlags reads them there, args writes them here).
type PeerOptions struct {
	Role   string // source, sink, ref-producer or ref-consumer
	Size   int    // frame bytes
	Time   time.Duration
	Batch  int
	Stream packetstream.Config
	Boost  bool
}

// AddFlags defines the peer's flags on f, filling o.
func (o *PeerOptions) AddFlags(f *pflag.FlagSet) {
	f.StringVar(&o.Role, "role", "", "source, sink, ref-producer or ref-consumer")
	f.IntVar(&o.Size, "size", 64, "frame bytes")
	f.DurationVar(&o.Time, "time", 2*time.Second, "how long the source sends")
	f.IntVar(&o.Batch, "batch", 64, "frames per batch")
	f.IntVar(&o.Stream.QueueSize, "queue", 1024, "queue entries")
	f.IntVar(&o.Stream.BulkSize, "bulk", 1024*packetstream.BlockSize, "bulk buffer bytes")
	f.BoolVar(&o.Stream.IPAlign, "ip-align", false, "shift frames 2 bytes into their blocks")
	f.BoolVar(&o.Boost, "boost", false, "raise this process's scheduling group to nice -20 (root)")
}

// args are o as the flags AddFlags reads.
func (o PeerOptions) args() []string {
	return []string{"--role", o.Role, "--size", strconv.Itoa(o.Size),
		"--time", o.Time.String(), "--batch", strconv.Itoa(o.Batch), "--boost=" + strconv.FormatBool(o.Boost),
		"--queue", strconv.Itoa(o.Stream.QueueSize), "--bulk", strconv.Itoa(o.Stream.BulkSize), "--ip-align=" + strconv.FormatBool(o.Stream.IPAlign)}
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

// RunPeer runs one side of a point over the stream files it inherited as fds 3-5 and returns
// what it measured; the peer process prints it for Run.
func RunPeer(a PeerOptions) PeerResult {
	if a.Size < 8 {
		return PeerResult{Error: "frames must have at least 8 bytes"}
	}
	if a.Boost {
		// Best effort: without autogroups the write fails and the peer runs as it is.
		os.WriteFile("/proc/self/autogroup", []byte("-20"), 0)
	}
	files, err := packetstream.StreamFilesFrom([]*os.File{os.NewFile(3, "mem"), os.NewFile(4, "to-sink"), os.NewFile(5, "to-source")}, a.Stream)
	if err != nil {
		return PeerResult{Error: err.Error()}
	}
	var res PeerResult
	switch a.Role {
	case "source":
		res, err = streamSource(files, a)
	case "sink":
		res, err = streamSink(files, a)
	case "ref-producer", "ref-consumer":
		res, err = refRing(files, a)
	default:
		err = fmt.Errorf("unknown role %q", a.Role)
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

func streamSource(files *packetstream.StreamFiles, a PeerOptions) (PeerResult, error) {
	src, err := packetstream.OpenSource(files)
	if err != nil {
		return PeerResult{}, err
	}
	defer src.Close()
	w, err := packetstream.NewWaiter(src)
	if err != nil {
		return PeerResult{}, err
	}
	defer w.Close()
	tmpl := frameTemplate(a.Size)
	var stop atomic.Bool
	time.AfterFunc(a.Time, func() { stop.Store(true) })
	start := time.Now()
	var seq uint64
	batch := make([]packetstream.Packet, a.Batch)
	for !stop.Load() {
		for p, ok := src.GetAcked(); ok; p, ok = src.GetAcked() {
			src.Release(p)
		}
		n := 0
		for ; n < a.Batch; n++ {
			p, err := src.Alloc(a.Size)
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
				return PeerResult{}, err
			}
		}
	}
	elapsed := time.Since(start)
	// The end marker, submitted eagerly once a buffer and an entry are free.
	for {
		p, err := src.Alloc(a.Size)
		if err == nil {
			binary.LittleEndian.PutUint64(src.Payload(p), endOfStream)
			if err := src.Submit(p); err != nil {
				return PeerResult{}, err
			}
			break
		}
		if err != packetstream.ErrExhausted {
			return PeerResult{}, err
		}
		p, err = src.WaitAcked()
		if err != nil {
			return PeerResult{}, err
		}
		src.Release(p)
	}
	c := src.Counters()
	return PeerResult{Frames: seq, Bytes: seq * uint64(a.Size), Seconds: elapsed.Seconds(),
		SignalsSent: c.SignalsSent.Load(), Sleeps: c.Sleeps.Load(), Invalid: c.Invalid.Load()}, nil
}

func streamSink(files *packetstream.StreamFiles, a PeerOptions) (PeerResult, error) {
	snk, err := packetstream.OpenSink(files)
	if err != nil {
		return PeerResult{}, err
	}
	defer snk.Close()
	w, err := packetstream.NewWaiter(snk)
	if err != nil {
		return PeerResult{}, err
	}
	defer w.Close()
	tmpl := frameTemplate(a.Size)
	var seq, bad uint64
	var start time.Time
	deadline := time.Now().Add(a.Time + 20*time.Second)
	for {
		n := 0
		for ; n < a.Batch && snk.CanAck(); n++ {
			p, ok := snk.TryGet()
			if !ok {
				break
			}
			b := snk.Payload(p)
			if len(b) != a.Size {
				bad++
			} else if s := binary.LittleEndian.Uint64(b); s == endOfStream {
				snk.TryAck(p)
				snk.Wakeup()
				c := snk.Counters()
				res := PeerResult{Frames: seq, Bytes: seq * uint64(a.Size), Seconds: time.Since(start).Seconds(),
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
				return PeerResult{}, fmt.Errorf("after %d frames: %w", seq, err)
			}
		}
	}
}

// refRing is the reference: bare 16-byte descriptors over one ring in the same kind of memfd,
// both sides busy-polling, each publishing its index every 32 entries.
func refRing(files *packetstream.StreamFiles, a PeerOptions) (PeerResult, error) {
	const n, every = 1024, 32
	var mem []byte
	rc, err := files.Mem.SyscallConn()
	if err != nil {
		return PeerResult{}, err
	}
	rc.Control(func(fd uintptr) {
		mem, err = unix.Mmap(int(fd), 0, 256+n*16, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	})
	if err != nil {
		return PeerResult{}, err
	}
	defer unix.Munmap(mem)
	head := (*atomic.Uint32)(unsafe.Pointer(&mem[0]))
	tail := (*atomic.Uint32)(unsafe.Pointer(&mem[128]))
	ent := func(i uint32) *[2]uint64 { return (*[2]uint64)(unsafe.Pointer(&mem[256+int(i%n)*16])) }
	var stop atomic.Bool
	start := time.Now()
	if a.Role == "ref-producer" {
		time.AfterFunc(a.Time, func() { stop.Store(true) })
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
		return PeerResult{Frames: uint64(h), Seconds: time.Since(start).Seconds()}, nil
	}
	var h, t uint32
	var sum uint64
	deadline := time.Now().Add(a.Time + 20*time.Second)
	for spins := 0; ; spins++ {
		for t != h {
			e := *ent(t)
			if e[1] == 0 {
				tail.Store(t + 1)
				return PeerResult{Frames: uint64(t), Seconds: time.Since(start).Seconds(), Bytes: sum}, nil
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
			return PeerResult{}, fmt.Errorf("reference ring stalled after %d entries", t)
		}
	}
}
