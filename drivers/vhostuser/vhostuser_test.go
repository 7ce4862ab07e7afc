package vhostuser

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nicstack/nicstack/netdev"
)

// allFeatures is every feature the Go front end drives: split rings.
const allFeatures = ^uint64(0) &^ featRingPacked

// tcpFrame is Ethernet + IPv4 + a 20-byte TCP header + payload bytes of pattern seed.
func tcpFrame(payload int, seed byte) []byte {
	f := make([]byte, 14+20+20+payload)
	f[12], f[13] = 0x08, 0x00
	f[14] = 0x45
	f[14+20+12] = 5 << 4
	for i := 54; i < len(f); i++ {
		f[i] = seed + byte(i)
	}
	return f
}

func vnetHeader(o netdev.Offload) [12]byte {
	var h [12]byte
	putHeader(h[:], &o)
	return h
}

func readOne(t *testing.T, d *Device) ([]byte, netdev.Offload) {
	t.Helper()
	bufs := [][]byte{make([]byte, 65536)}
	sizes, offs := make([]int, 1), make([]netdev.Offload, 1)
	n, err := d.Read(bufs, sizes, offs)
	if err != nil || n != 1 {
		t.Fatalf("Read: %d frames, %v", n, err)
	}
	return bufs[0][:sizes[0]], offs[0]
}

// A TSO super-frame from the guest reaches Read whole with its offload metadata, and a frame
// written goes into the guest's buffer behind a header carrying its metadata.
func TestFramesBothWaysWithOffloads(t *testing.T) {
	fe := newFrontend(t)
	fe.start(allFeatures)
	o := netdev.Offload{Flags: netdev.OffloadNeedsCsum, GSOType: netdev.GSOTCPv4, HdrLen: 54, GSOSize: 1448, CsumStart: 34, CsumOffset: 16}
	sent := tcpFrame(3000, 1)
	fe.sendFrame(vnetHeader(o), sent)
	got, off := readOne(t, fe.dev)
	if !bytes.Equal(got, sent) || off != o {
		t.Fatalf("read %d bytes %+v, want %d bytes %+v", len(got), off, len(sent), o)
	}
	if u := fe.reap(txQueue); len(u) != 1 {
		t.Fatalf("used entries of the transmit queue: %v", u)
	}

	fe.postRx(4, bufSize)
	frame := tcpFrame(1000, 7)
	w := netdev.Offload{Flags: netdev.OffloadNeedsCsum, GSOType: netdev.GSOTCPv6, HdrLen: 54, GSOSize: 1000, CsumStart: 34, CsumOffset: 16}
	if n, err := fe.dev.Write([][]byte{frame}, []netdev.Offload{w}); n != 1 || err != nil {
		t.Fatalf("Write: %d, %v", n, err)
	}
	u := fe.reap(rxQueue)
	if len(u) != 1 || u[0].n != uint32(12+len(frame)) {
		t.Fatalf("used entries of the receive queue: %v", u)
	}
	hdr, body := fe.received(u[0])
	want := vnetHeader(w)
	le.PutUint16(want[10:], 1)
	if !bytes.Equal(hdr, want[:]) || !bytes.Equal(body, frame) {
		t.Fatalf("guest got header % x and %d bytes, want % x and %d", hdr, len(body), want, len(frame))
	}
	if fe.stats.RxFrames.Load() != 1 || fe.stats.TxFrames.Load() != 1 || fe.stats.Faults.Load() != 0 {
		t.Fatalf("stats rx %d tx %d faults %d", fe.stats.RxFrames.Load(), fe.stats.TxFrames.Load(), fe.stats.Faults.Load())
	}
}

// With MRG_RXBUF a frame larger than one receive buffer spreads over several, num_buffers
// saying how many; without it such a frame is dropped and the buffer stays the guest's.
func TestMergeableBuffersSplitAFrame(t *testing.T) {
	fe := newFrontend(t)
	fe.start(allFeatures)
	fe.postRx(8, 1500)
	frame := tcpFrame(4000, 3) // 4054 bytes + header: 3 buffers
	fe.dev.Write([][]byte{frame}, nil)
	u := fe.reap(rxQueue)
	if len(u) != 3 {
		t.Fatalf("%d buffers used, want 3: %v", len(u), u)
	}
	var got []byte
	for i, e := range u {
		fq := &fe.q[rxQueue]
		d := fe.mem[fq.desc+16*uint64(e.id):]
		b := fe.mem[le.Uint64(d) : le.Uint64(d)+uint64(e.n)]
		if i == 0 {
			if nb := le.Uint16(b[10:]); nb != 3 {
				t.Fatalf("num_buffers %d, want 3", nb)
			}
			b = b[12:]
		}
		got = append(got, b...)
	}
	if !bytes.Equal(got, frame) {
		t.Fatal("the frame did not arrive whole")
	}

	nomrg := newFrontend(t)
	nomrg.start(allFeatures &^ featMrgRxbuf)
	nomrg.postRx(2, 1500)
	nomrg.dev.Write([][]byte{frame, tcpFrame(100, 1)}, nil)
	if u := nomrg.reap(rxQueue); len(u) != 1 || u[0].id != 0 {
		t.Fatalf("without MRG_RXBUF: used %v, want the small frame in buffer 0", u)
	}
	if nomrg.stats.TxDropped.Load() != 1 {
		t.Fatalf("dropped %d, want the large frame", nomrg.stats.TxDropped.Load())
	}
}

// A batch costs one call however many frames it has; with EVENT_IDX a driver that asks for a
// call further on gets none, and while the device is busy the driver kicks once.
func TestEventIdxSuppressesCallsAndKicks(t *testing.T) {
	fe := newFrontend(t)
	fe.start(allFeatures)
	fe.postRx(32, bufSize)
	fe.reap(rxQueue) // used_event = 0: call at the first entry
	frames := make([][]byte, 32)
	for i := range frames {
		frames[i] = tcpFrame(64, byte(i))
	}
	fe.dev.Write(frames[:16], nil)
	if c := fe.calls(rxQueue); c != 1 {
		t.Fatalf("%d calls for a batch of 16, want 1", c)
	}
	// The driver has not looked at the used ring (used_event still 0): no call.
	fe.dev.Write(frames[16:], nil)
	if c := fe.calls(rxQueue); c != 0 {
		t.Fatalf("%d calls while the driver asked for none", c)
	}
	if u := fe.reap(rxQueue); len(u) != 32 {
		t.Fatalf("%d used", len(u))
	}

	// Read waits: the device armed avail_event, so the first frame kicks, the next do not.
	type result struct {
		n   int
		err error
	}
	got := make(chan result, 1)
	bufs := make([][]byte, 32)
	for i := range bufs {
		bufs[i] = make([]byte, 2048)
	}
	sizes, offs := make([]int, 32), make([]netdev.Offload, 32)
	fe.kicks = 0
	go func() {
		n, err := fe.dev.Read(bufs, sizes, offs)
		got <- result{n, err}
	}()
	for !fe.armed(txQueue) {
		time.Sleep(time.Millisecond)
	}
	fe.sendFrame([12]byte{}, tcpFrame(10, 1))
	r := <-got
	if r.err != nil || r.n != 1 {
		t.Fatalf("Read: %d, %v", r.n, r.err)
	}
	for i := range 10 {
		fe.sendFrame([12]byte{}, tcpFrame(10, byte(i)))
	}
	if fe.kicks != 1 {
		t.Fatalf("%d kicks for 11 frames, want 1 (the device was busy)", fe.kicks)
	}
	if n, _ := fe.dev.Read(bufs, sizes, offs); n != 10 {
		t.Fatalf("the second batch has %d frames, want 10", n)
	}
}

// armed reports whether the device waits for a kick on queue q: avail_event at the driver's
// avail idx.
func (fe *frontend) armed(q int) bool {
	fq := &fe.q[q]
	return le.Uint16(fe.mem[fq.used+4+8*uint64(fq.num):]) == fq.availIdx
}

// Without EVENT_IDX the device sets NO_NOTIFY while busy, and honours NO_INTERRUPT.
func TestNotifyFlagsWithoutEventIdx(t *testing.T) {
	fe := newFrontend(t)
	fe.start(allFeatures &^ featEventIdx)
	fe.postRx(4, bufSize)
	le.PutUint16(fe.mem[fe.q[rxQueue].avail:], availNoInterrupt)
	fe.dev.Write([][]byte{tcpFrame(10, 1)}, nil)
	if c := fe.calls(rxQueue); c != 0 {
		t.Fatalf("%d calls with NO_INTERRUPT", c)
	}
	le.PutUint16(fe.mem[fe.q[rxQueue].avail:], 0)
	fe.dev.Write([][]byte{tcpFrame(10, 1)}, nil)
	if c := fe.calls(rxQueue); c != 1 {
		t.Fatalf("%d calls, want 1", c)
	}
	fe.sendFrame([12]byte{}, tcpFrame(10, 1))
	readOne(t, fe.dev)
	if le.Uint16(fe.mem[fe.q[txQueue].used:])&usedNoNotify == 0 {
		t.Fatal("NO_NOTIFY not set after a batch")
	}
}

// Frames Write cannot place wait for the guest's buffers, then are dropped; none are lost
// silently and Write never blocks for long.
func TestWriteWithoutBuffersDrops(t *testing.T) {
	fe := newFrontend(t)
	fe.start(allFeatures)
	n, err := fe.dev.Write([][]byte{tcpFrame(10, 1), tcpFrame(10, 2)}, nil)
	if n != 2 || err != nil || fe.stats.TxDropped.Load() != 2 {
		t.Fatalf("Write %d, %v; dropped %d", n, err, fe.stats.TxDropped.Load())
	}
	// The guest posts while Write waits: its kick lets the frame through.
	fe.dev.rxWait = time.Minute
	done := make(chan struct{})
	go func() {
		defer close(done)
		for !fe.armed(rxQueue) {
			time.Sleep(100 * time.Microsecond)
		}
		fe.postRx(1, bufSize)
	}()
	fe.dev.Write([][]byte{tcpFrame(10, 3)}, nil)
	<-done
	if fe.stats.TxFrames.Load() != 1 || fe.stats.TxDropped.Load() != 2 {
		t.Fatalf("frames %d dropped %d", fe.stats.TxFrames.Load(), fe.stats.TxDropped.Load())
	}
}

// A super-frame that needs more receive buffers than the guest has left waits for its next
// buffers, while the frames placed before it reach the guest (issue 32: two flows of TSO
// super-frames into a QEMU guest stalled for good). The buffers left are no room: the device
// must not retry on them, holding back the used entries the guest needs to post again, and
// must ask for a kick at the guest's next buffer, past the ones it gave back.
func TestSuperFrameWaitsForEnoughBuffers(t *testing.T) {
	for _, tc := range []struct {
		name     string
		features uint64
	}{
		{"split, EVENT_IDX", allFeatures},
		{"split", allFeatures &^ featEventIdx},
		{"packed", allFeatures&^featCtrlVQ | featRingPacked},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fe := newFrontend(t)
			fe.start(tc.features)
			fe.dev.rxWait = time.Minute
			packed := fe.features&featRingPacked != 0
			post := func(n int) {
				if !packed {
					fe.postRx(n, 1500)
					return
				}
				for range n {
					fq := &fe.q[rxQueue]
					fe.offerPacked(rxQueue, fq.bufs+uint64(fq.availIdx)*bufSize, 1500, descWrite)
				}
			}
			reap := func() []usedEntry {
				if packed {
					return fe.reapPacked(rxQueue)
				}
				return fe.reap(rxQueue)
			}
			post(4)
			done := make(chan error, 1)
			go func() {
				_, err := fe.dev.Write([][]byte{tcpFrame(4000, 1), tcpFrame(4000, 2)}, nil) // 3 buffers each
				done <- err
			}()
			fe.waitCall(rxQueue)
			if u := reap(); len(u) != 3 {
				t.Fatalf("the first frame: %d buffers used, want 3: %v", len(u), u)
			}
			select {
			case err := <-done:
				t.Fatalf("Write returned (%v) before the guest posted enough buffers", err)
			default:
			}
			post(4)
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("the guest's buffers did not let the second frame through (log: %s)", fe.log)
			}
			if u := reap(); len(u) != 3 {
				t.Fatalf("the second frame: %d buffers used, want 3: %v", len(u), u)
			}
			if fe.stats.TxFrames.Load() != 2 || fe.stats.TxDropped.Load() != 0 {
				t.Fatalf("frames %d dropped %d", fe.stats.TxFrames.Load(), fe.stats.TxDropped.Load())
			}
		})
	}
}

// A frame larger than all the buffers a full ring holds is dropped at once: no kick can bring
// more, and the frames behind it go through.
func TestFrameLargerThanTheRingIsDropped(t *testing.T) {
	fe := newFrontend(t)
	fe.start(allFeatures)
	fe.postRx(ringNum, 64)
	small := tcpFrame(10, 2) // 2 buffers with the header
	fe.dev.Write([][]byte{tcpFrame(ringNum*64, 1), small}, nil)
	if fe.stats.TxDropped.Load() != 1 || fe.stats.TxFrames.Load() != 1 {
		t.Fatalf("dropped %d frames %d, want the large frame dropped and the small one through", fe.stats.TxDropped.Load(), fe.stats.TxFrames.Load())
	}
	if u := fe.reap(rxQueue); len(u) != 2 || u[0].id != 0 {
		t.Fatalf("used %v, want the small frame in buffers 0 and 1", u)
	}
}

// The front end going away ends the session: Serve returns nil, Read and Write ErrClosed,
// the memory is let go.
func TestDisconnectEndsTheSession(t *testing.T) {
	fe := newFrontend(t)
	fe.start(allFeatures)
	errc := make(chan error, 1)
	go func() {
		_, err := fe.dev.Read(make([][]byte, 1), make([]int, 1), make([]netdev.Offload, 1))
		errc <- err
	}()
	fe.close()
	if err := <-fe.done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if err := <-errc; !errors.Is(err, ErrClosed) {
		t.Fatalf("Read: %v", err)
	}
	if _, err := fe.dev.Write([][]byte{{1}}, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Write: %v", err)
	}
}

// The data path allocates nothing per batch.
func TestDataPathDoesNotAllocate(t *testing.T) {
	fe := newFrontend(t)
	fe.start(allFeatures)
	frame := tcpFrame(1000, 1)
	bufs, sizes, offs := [][]byte{make([]byte, 2048)}, make([]int, 1), make([]netdev.Offload, 1)
	frames := [][]byte{frame}
	var fail error
	allocs := testing.AllocsPerRun(100, func() {
		fe.sendFrame([12]byte{}, frame)
		fe.postRx(1, 2048)
		if _, err := fe.dev.Read(bufs, sizes, offs); err != nil {
			fail = err
		}
		fe.dev.Write(frames, nil)
		fe.q[txQueue].usedSeen = le.Uint16(fe.mem[fe.q[txQueue].used+2:])
		fe.q[rxQueue].usedSeen = le.Uint16(fe.mem[fe.q[rxQueue].used+2:])
	})
	if fail != nil || allocs != 0 {
		t.Fatalf("%v allocations per frame each way (%v)", allocs, fail)
	}
}

// sizedTarget is a netdev.SizedTarget holding room for max frames: it records the sizes it was
// asked for while it had room and the frames that landed.
type sizedTarget struct {
	max    int
	asked  []int
	frames [][]byte
	buf    []byte
}

func (t *sizedTarget) Begin()         {}
func (t *sizedTarget) End()           {}
func (t *sizedTarget) Buffer() []byte { return t.BufferOf(len(t.buf)) }

func (t *sizedTarget) BufferOf(n int) []byte {
	if len(t.frames) == t.max {
		return nil
	}
	t.asked = append(t.asked, n)
	return t.buf[:n]
}

func (t *sizedTarget) Frame(n int, off *netdev.Offload) {
	if n > 0 {
		t.frames = append(t.frames, append([]byte(nil), t.buf[:n]...))
	}
}

// ReadTo asks a SizedTarget for a buffer of each frame's size, header and frame in one
// descriptor or the header in one and the frame in two more, copies the frame into it once,
// and leaves a frame the full target has no room for to the next ReadTo.
func TestReadToSizedTarget(t *testing.T) {
	fe := newFrontend(t)
	fe.start(allFeatures)
	small, large := tcpFrame(6, 1), tcpFrame(1400, 2)
	fe.sendFrame([12]byte{}, small)
	// large: the header, then the frame in two buffers, as a chain of three descriptors.
	fq := &fe.q[txQueue]
	d := fq.availIdx % fq.num
	addr := fq.bufs + uint64(d)*bufSize
	copy(fe.mem[addr+uint64(fe.hdrLen):], large)
	fe.setDesc(txQueue, d, addr, uint32(fe.hdrLen), descNext, d+1)
	fe.setDesc(txQueue, d+1, addr+uint64(fe.hdrLen), 100, descNext, d+2)
	fe.setDesc(txQueue, d+2, addr+uint64(fe.hdrLen)+100, uint32(len(large)-100), 0, 0)
	fe.offer(txQueue, d)

	tg := &sizedTarget{max: 1, buf: make([]byte, 65536)}
	if n, err := fe.dev.ReadTo(tg); n != 1 || err != nil {
		t.Fatalf("ReadTo: %d, %v", n, err)
	}
	tg.max = 2
	if n, err := fe.dev.ReadTo(tg); n != 1 || err != nil {
		t.Fatalf("ReadTo again: %d, %v", n, err)
	}
	if len(tg.frames) != 2 || !bytes.Equal(tg.frames[0], small) || !bytes.Equal(tg.frames[1], large) {
		t.Fatalf("frames %d, want the two sent", len(tg.frames))
	}
	if want := []int{len(small), len(large)}; len(tg.asked) != 2 || tg.asked[0] != want[0] || tg.asked[1] != want[1] {
		t.Errorf("buffers asked for %v, want %v", tg.asked, want)
	}

	// Nothing is allocated per frame.
	frame := tcpFrame(1000, 3)
	one := &oneTarget{buf: make([]byte, 65536)}
	var fail error
	allocs := testing.AllocsPerRun(100, func() {
		fe.sendFrame([12]byte{}, frame)
		one.n = 0
		if n, err := fe.dev.ReadTo(one); n != 1 || err != nil {
			fail = fmt.Errorf("ReadTo: %d, %v", n, err)
		}
	})
	if fail != nil || allocs != 0 {
		t.Fatalf("%v allocations per frame (%v)", allocs, fail)
	}
}

// oneTarget is a SizedTarget with room for one frame, which it does not keep.
type oneTarget struct {
	buf []byte
	n   int
}

func (t *oneTarget) Begin()                         {}
func (t *oneTarget) End()                           {}
func (t *oneTarget) Buffer() []byte                 { return t.BufferOf(len(t.buf)) }
func (t *oneTarget) Frame(n int, _ *netdev.Offload) { t.n += min(n, 1) }

func (t *oneTarget) BufferOf(n int) []byte {
	if t.n == 1 {
		return nil
	}
	return t.buf[:n]
}
