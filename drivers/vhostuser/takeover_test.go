package vhostuser

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/nicstack/nicstack/netdev"
)

// keeper is a test's supervisor: it holds the last state a device handed over.
type keeper struct {
	mu  sync.Mutex
	rec []byte
	fds []int
}

func (k *keeper) keep(rec []byte, fds []int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	closeAll(k.fds)
	k.rec, k.fds = rec, fds
}

// startKept starts fe with the features, its device handing what it negotiates to the keeper
// it returns.
func startKept(fe *frontend, features uint64) *keeper {
	k := &keeper{}
	fe.dev.SetKeeper(k.keep)
	fe.start(features)
	return k
}

// take hands the held record and descriptors over, the descriptors as files, as a restarted
// process inherits them.
func (k *keeper) take(t *testing.T) ([]byte, []*os.File) {
	t.Helper()
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.fds) == 0 {
		t.Fatal("nothing was kept")
	}
	var files []*os.File
	for _, fd := range k.fds {
		files = append(files, os.NewFile(uintptr(fd), "kept"))
	}
	k.fds = nil
	return k.rec, files
}

// crash ends fe's device as a kill -9 would, without a word to the front end: the kept
// duplicates hold the connection open.
func crash(t *testing.T, fe *frontend) {
	t.Helper()
	fe.dev.Close()
	<-fe.dev.Done()
	if err := <-fe.done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
}

// resume starts the next device from what k holds.
func resume(t *testing.T, fe *frontend, k *keeper) {
	t.Helper()
	rec, files := k.take(t)
	d, err := Resume(rec, files, slog.New(slog.NewTextHandler(fe.log, nil)), fe.stats)
	if err != nil {
		t.Fatal(err)
	}
	d.SetKeeper(k.keep)
	fe.dev = d
	go func() { fe.done <- d.Serve() }()
}

// The state a device keeps resumes its connection in a new device: the front end sends
// nothing and notices nothing, frames flow both ways, including one the guest sent while no
// device served it, and its messages keep being served on the same socket.
func TestTakeoverResumesTheConnection(t *testing.T) {
	fe := newFrontend(t)
	k := startKept(fe, allFeatures)
	frame := tcpFrame(500, 3)
	fe.sendFrame(vnetHeader(netdev.Offload{}), frame)
	if got, _ := readOne(t, fe.dev); !bytes.Equal(got, frame) {
		t.Fatal("first frame mangled")
	}
	fe.reap(txQueue)

	crash(t, fe)
	// The guest goes on while nobody serves it: a frame out, buffers in.
	sent := tcpFrame(700, 4)
	fe.sendFrame(vnetHeader(netdev.Offload{}), sent)
	fe.postRx(4, bufSize)
	resume(t, fe, k)

	if got, _ := readOne(t, fe.dev); !bytes.Equal(got, sent) {
		t.Fatalf("frame sent during the takeover: %d bytes, want %d", len(got), len(sent))
	}
	if u := fe.reap(txQueue); len(u) != 1 {
		t.Fatalf("used entries of the transmit queue after the takeover: %v", u)
	}
	back := tcpFrame(900, 5)
	if n, err := fe.dev.Write([][]byte{back}, nil); n != 1 || err != nil {
		t.Fatalf("Write: %d, %v", n, err)
	}
	u := fe.reap(rxQueue)
	if len(u) != 1 {
		t.Fatalf("used entries of the receive queue: %v", u)
	}
	if _, body := fe.received(u[0]); !bytes.Equal(body, back) {
		t.Fatal("frame written after the takeover mangled")
	}
	if fe.waitCall(rxQueue) == 0 {
		t.Fatal("no call")
	}
	if f := le.Uint64(fe.call(reqGetFeatures, nil, 8)); f != fe.dev.offered() {
		t.Fatalf("GET_FEATURES on the resumed connection: %#x", f)
	}
	fe.must(reqSetVringEnable, state(rxQueue, 1)) // REPLY_ACK still negotiated

	// And again: the resumed device keeps its state too.
	crash(t, fe)
	resume(t, fe, k)
	sent = tcpFrame(100, 6)
	fe.sendFrame(vnetHeader(netdev.Offload{}), sent)
	if got, _ := readOne(t, fe.dev); !bytes.Equal(got, sent) {
		t.Fatal("frame after the second takeover mangled")
	}
	if fe.stats.Faults.Load() != 0 {
		t.Fatalf("faults: %s", fe.log)
	}
}

// A chain the dead device took but did not publish is taken again: the ring resumes at the
// used index the driver was shown.
func TestTakeoverRetakesUnpublishedChains(t *testing.T) {
	fe := newFrontend(t)
	k := startKept(fe, allFeatures)
	sent := tcpFrame(300, 9)
	fe.sendFrame(vnetHeader(netdev.Offload{}), sent)
	// The device takes the chain and dies before publishing it.
	q := &fe.dev.q[txQueue]
	q.mu.Lock()
	if _, ok, err := q.pop(); !ok || err != nil {
		t.Fatalf("pop: %v %v", ok, err)
	}
	q.mu.Unlock()
	crash(t, fe)
	resume(t, fe, k)
	if got, _ := readOne(t, fe.dev); !bytes.Equal(got, sent) {
		t.Fatal("the unpublished frame was not taken again")
	}
}

// hostileRecord is what a test's tampering makes of a kept state: a record and descriptors
// (the connection, the memory's, then each ring's call, error and kick).
type hostileRecord struct {
	rec *record
	fds []int
}

// hostileRecordOf is what k kept, the record parsed and its descriptors duplicated, for a
// test to tamper with; the kept files are closed.
func hostileRecordOf(t *testing.T, k *keeper) *hostileRecord {
	t.Helper()
	text, files := k.take(t)
	h := &hostileRecord{rec: &record{}}
	if err := json.Unmarshal(text, h.rec); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		h.fds = append(h.fds, testDup(t, int(f.Fd())))
		f.Close()
	}
	return h
}

// testDup is another descriptor of fd's file.
func testDup(t *testing.T, fd int) int {
	t.Helper()
	n, err := unix.Dup(fd)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// testMemfd is an anonymous file of size bytes, closed when the test ends.
func testMemfd(t *testing.T, name string, size int64) int {
	t.Helper()
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Ftruncate(fd, size); err != nil {
		t.Fatal(err)
	}
	return fd
}

// A kept state is checked as the messages that made it were: a record that does not parse or
// names other descriptors than come, regions that overlap, rings outside guest memory, bad
// sizes and indices, and descriptors of the wrong kind are each refused with what is wrong.
func TestHostileTakeoverIsRefused(t *testing.T) {
	notEventfd := testMemfd(t, "file", 0)
	const conn, mem, call1, kick0 = 0, 1, 5, 4
	remove := func(h *hostileRecord, i int) {
		unix.Close(h.fds[i])
		h.fds = append(h.fds[:i], h.fds[i+1:]...)
	}
	cases := []struct {
		name   string
		tamper func(h *hostileRecord)
		want   string
	}{
		{"unknown field", func(h *hostileRecord) { h.rec = nil }, "unknown field"},
		{"a descriptor missing", func(h *hostileRecord) { remove(h, len(h.fds)-1) }, "descriptors, the record names"},
		{"regions overlapping", func(h *hostileRecord) {
			r := h.rec.Mem[0]
			r.Size /= 2
			h.rec.Mem = []memRecord{r, {GPA: r.GPA + r.Size/2, Size: r.Size, UAddr: r.UAddr + 2*r.Size}}
			h.fds = append(h.fds[:mem+1], append([]int{testDup(t, h.fds[mem])}, h.fds[mem+1:]...)...)
		}, "overlaps region 0"},
		{"ring outside memory", func(h *hostileRecord) {
			h.rec.Rings[1].Addr.Used = h.rec.Mem[0].UAddr + h.rec.Mem[0].Size - 8
		}, "tx queue 1: used ring outside guest memory"},
		{"ring size", func(h *hostileRecord) { h.rec.Rings[0].Num = 100 }, "size 100 is not a power of 2"},
		{"base", func(h *hostileRecord) {
			h.rec.Rings[0].Started = false
			remove(h, kick0)
			h.rec.Rings[0].Base = 1 << 20
		}, "SET_VRING_BASE: 1048576 is no ring index"},
		{"too many rings", func(h *hostileRecord) {
			h.rec.Rings = append(h.rec.Rings, ringRecord{})
		}, "3 rings, the device has 2"},
		{"call not an eventfd", func(h *hostileRecord) {
			unix.Close(h.fds[call1])
			h.fds[call1] = testDup(t, notEventfd)
		}, "SET_VRING_CALL: queue 1: the descriptor is"},
		{"connection not a socket", func(h *hostileRecord) {
			unix.Close(h.fds[conn])
			h.fds[conn] = testDup(t, notEventfd)
		}, "connection:"},
		{"memory not mappable", func(h *hostileRecord) {
			unix.Close(h.fds[mem])
			h.fds[mem] = testDup(t, h.fds[conn])
		}, "SET_MEM_TABLE: region 0 ends at byte"},
		{"more pairs in use than offered", func(h *hostileRecord) { h.rec.Active = 2 }, "2 queue pairs in use of 1"},
		{"pairs beyond the device's bound", func(h *hostileRecord) { h.rec.Pairs = MaxQueuePairs + 1 }, "queue pairs, want 1 to"},
		{"a running packed ring without the inflight region", func(h *hostileRecord) {
			h.rec.Features |= featRingPacked
			h.rec.Inflight = nil
			remove(h, len(h.fds)-1)
		}, "a running packed ring cannot be resumed without the inflight region"},
		{"record too large", func(h *hostileRecord) {
			h.rec.Rings[0].Addr = &addrRecord{Log: 1}
			h.rec.Mem = make([]memRecord, maxRecord/8)
		}, "at most 16384"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fe := newFrontend(t)
			k := startKept(fe, allFeatures)
			crash(t, fe)
			h := hostileRecordOf(t, k)
			c.tamper(h)
			text := []byte(`{"Bogus":1}`)
			if h.rec != nil {
				text, _ = json.Marshal(h.rec)
			}
			wantResumeRefused(t, text, h.fds, c.want)
		})
	}
}

// wantResumeRefused resumes a tampered record with its descriptors and wants it refused with
// an error that says want.
func wantResumeRefused(t *testing.T, text []byte, fds []int, want string) {
	t.Helper()
	var in []*os.File
	for _, fd := range fds {
		in = append(in, os.NewFile(uintptr(fd), "hostile"))
	}
	d, err := Resume(text, in, nil, nil)
	if err == nil {
		d.Close()
		t.Fatalf("resumed; want %q", want)
	}
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q, want %q", err, want)
	}
}

// A kept record is as untrusted as the messages it stands for: Resume never panics on one,
// with descriptors of every kind in the places a record names (a connection, guest memory,
// eventfds), and a device it accepts runs and ends cleanly.
func FuzzResume(f *testing.F) {
	seed := record{Features: offeredFeatures, Protocol: protoReplyAck, ProtocolSet: true,
		Mem: []memRecord{{GPA: 0, Size: 1 << 20, UAddr: uaddrOf}}}
	for i := range 2 {
		base := uint64(i) * 0x10000
		seed.Rings = append(seed.Rings, ringRecord{Num: 64, Enabled: true, Started: true, Call: true, Err: true,
			Addr: &addrRecord{Desc: uaddrOf + base, Avail: uaddrOf + base + 1024, Used: uaddrOf + base + 0x8000}})
	}
	b, _ := json.Marshal(&seed)
	f.Add(b)
	seed.Protocol |= protoInflight
	seed.Inflight = &inflightRecord{Size: 2 * inflightQueueLen(false, 64), Queues: 2, QueueSize: 64}
	b, _ = json.Marshal(&seed)
	f.Add(b)
	seed.Features |= featRingPacked
	seed.Inflight.Size = 2 * inflightQueueLen(true, 64)
	b, _ = json.Marshal(&seed)
	f.Add(b)
	f.Add([]byte(`{"Features":1,"Rings":[{"Num":8,"Started":true}]}`))
	f.Fuzz(func(t *testing.T, rec []byte) {
		sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		mem, _ := unix.MemfdCreate("guest", unix.MFD_CLOEXEC)
		unix.Ftruncate(mem, 1<<20)
		kinds := []int{sp[1], mem}
		for range 6 {
			e, _ := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
			kinds = append(kinds, e)
		}
		defer closeAll(append(kinds, sp[0]))
		n := len(kinds) // as many as the record names, if it parses; each of the kinds in turn
		var r record
		if json.Unmarshal(rec, &r) == nil {
			n = 1 + len(r.Mem)
			for _, ring := range r.Rings {
				for _, has := range []bool{ring.Call, ring.Err, ring.Started} {
					if has {
						n++
					}
				}
			}
		}
		var files []*os.File
		for i := range min(n, 64) {
			d, _ := unix.Dup(kinds[i%len(kinds)])
			files = append(files, os.NewFile(uintptr(d), "fuzz"))
		}
		if in := r.Inflight; in != nil && n <= 64 && in.Size <= 1<<20 {
			// The last is the region: a file of the size the record names, each queue's
			// part as GET_INFLIGHT_FD made it.
			region, _ := unix.MemfdCreate("inflight", unix.MFD_CLOEXEC)
			unix.Ftruncate(region, int64(in.Size))
			part := inflightQueueLen(r.Features&featRingPacked != 0, in.QueueSize)
			for i := uint64(0); (i+1)*part <= in.Size; i++ {
				unix.Pwrite(region, le.AppendUint16(le.AppendUint16(nil, inflightVersion), in.QueueSize), int64(i*part+8))
			}
			files[n-1].Close()
			files[n-1] = os.NewFile(uintptr(region), "fuzz")
		}
		d, err := Resume(rec, files, nil, nil)
		if err != nil {
			return
		}
		done := make(chan error, 1)
		go func() { done <- d.Serve() }()
		d.Close()
		<-done
		<-d.Done()
	})
}
