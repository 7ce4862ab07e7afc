package vhostuser

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nicstack/nicstack/netdev"
)

// The ring layouts a test runs on.
var ringLayouts = []struct {
	name     string
	features uint64
}{{"split", allFeatures}, {"packed", allFeatures | featRingPacked}}

func (fe *frontend) packed() bool { return fe.features&featRingPacked != 0 }

// txFrame posts frame behind a zero header on the transmit ring, split or packed: the
// descriptor (split) or buffer id (packed) is its slot, its buffer the slot's.
func (fe *frontend) txFrame(frame []byte) {
	if !fe.packed() {
		fe.sendFrame(vnetHeader(netdev.Offload{}), frame)
		return
	}
	fq := &fe.q[txQueue]
	addr := fq.bufs + uint64(fq.availIdx)*bufSize
	clear(fe.mem[addr : addr+uint64(fe.hdrLen)])
	copy(fe.mem[addr+uint64(fe.hdrLen):], frame)
	fe.offerPacked(txQueue, addr, uint32(fe.hdrLen+len(frame)), 0)
}

// rxPost posts n receive buffers, split or packed, each its slot's.
func (fe *frontend) rxPost(n int) {
	if !fe.packed() {
		fe.postRx(n, bufSize)
		return
	}
	fq := &fe.q[rxQueue]
	for range n {
		fe.offerPacked(rxQueue, fq.bufs+uint64(fq.availIdx)*bufSize, bufSize, descWrite)
	}
}

// used returns ring r's used entries the driver has not seen, split or packed.
func (fe *frontend) used(r int) []usedEntry {
	if fe.packed() {
		return fe.reapPacked(r)
	}
	return fe.reap(r)
}

// readN reads n frames from the device.
func readN(t *testing.T, d *Device, n int) [][]byte {
	t.Helper()
	var out [][]byte
	bufs, sizes, offs := make([][]byte, n), make([]int, n), make([]netdev.Offload, n)
	for i := range bufs {
		bufs[i] = make([]byte, 2048)
	}
	for len(out) < n {
		k, err := d.Read(bufs[:n-len(out)], sizes, offs)
		if err != nil {
			t.Fatal(err)
		}
		for i := range k {
			out = append(out, append([]byte(nil), bufs[i][:sizes[i]]...))
		}
	}
	return out
}

// availHead is the head in a split ring's avail entry pos.
func availHead(q *queue, pos uint16) uint16 { return le.Uint16(q.avail[4+2*uint64(pos%q.num):]) }

// ring is the device's queue i.
func (fe *frontend) ring(i int) *queue { return &fe.dev.q[i] }

// regionPart is ring i's part of the inflight region as the front end maps it.
func (fe *frontend) regionPart(i int) []byte {
	n := inflightQueueLen(fe.packed(), ringNum)
	return fe.inflight[uint64(i)*n : uint64(i+1)*n]
}

// warmUp sends and receives enough frames that both rings have gone round past their end.
func warmUp(t *testing.T, fe *frontend) {
	t.Helper()
	for round := range 5 {
		for k := range 20 {
			fe.txFrame(tcpFrame(100, byte(round*20+k)))
		}
		readN(t, fe.dev, 20)
		if u := fe.used(txQueue); len(u) != 20 {
			t.Fatalf("round %d: %d used on the transmit ring", round, len(u))
		}
		fe.rxPost(20)
		frames := make([][]byte, 20)
		for k := range frames {
			frames[k] = tcpFrame(200, byte(k))
		}
		if n, err := fe.dev.Write(frames, nil); n != 20 || err != nil {
			t.Fatalf("Write: %d, %v", n, err)
		}
		if u := fe.used(rxQueue); len(u) != 20 {
			t.Fatalf("round %d: %d used on the receive ring", round, len(u))
		}
	}
}

// A device dropped mid-burst, with chains taken from both rings and not returned, is taken
// over from the region: the chains inflight are taken again in their order, so every frame the
// guest sent arrives once, every buffer it posted is used once, and frames written after the
// takeover fill the buffers the dead device had taken. Split and packed, both past the rings'
// wrap.
func TestInflightTakeoverResubmits(t *testing.T) {
	for _, l := range ringLayouts {
		t.Run(l.name, func(t *testing.T) {
			fe := newFrontend(t)
			k := startKept(fe, l.features)
			warmUp(t, fe)

			var sent [][]byte
			for i := range 6 {
				sent = append(sent, tcpFrame(300, byte(100+i)))
				fe.txFrame(sent[i])
			}
			fe.rxPost(4)
			tx, rx := fe.ring(txQueue), fe.ring(rxQueue)
			tx.mu.Lock()
			for range 3 {
				if _, ok, err := tx.pop(); !ok || err != nil {
					t.Fatalf("pop: %v %v", ok, err)
				}
			}
			if !fe.packed() {
				tx.push(availHead(tx, tx.lastAvail-3), 0) // written in the used ring, not published
			}
			tx.mu.Unlock()
			rx.mu.Lock()
			for range 2 {
				if _, ok, err := rx.pop(); !ok || err != nil {
					t.Fatalf("pop: %v %v", ok, err)
				}
			}
			rx.mu.Unlock()
			inflight := 0
			for _, part := range [][]byte{fe.regionPart(txQueue), fe.regionPart(rxQueue)} {
				hdr, ent := splitInflightHdr, splitInflightEnt
				if fe.packed() {
					hdr, ent = packedInflightHdr, packedInflightEnt
				}
				for i := range ringNum {
					inflight += int(part[hdr+ent*i])
				}
			}
			if inflight != 5 {
				t.Fatalf("%d descriptors inflight in the region, want 5", inflight)
			}
			crash(t, fe)
			resume(t, fe, k)

			got := readN(t, fe.dev, 6)
			for i := range sent {
				if !bytes.Equal(got[i], sent[i]) {
					t.Fatalf("frame %d after the takeover: %d bytes, want %d", i, len(got[i]), len(sent[i]))
				}
			}
			u := fe.used(txQueue)
			if len(u) != 6 {
				t.Fatalf("%d used on the transmit ring, want 6: %v", len(u), u)
			}
			back := make([][]byte, 4)
			for i := range back {
				back[i] = tcpFrame(400, byte(50+i))
			}
			if n, err := fe.dev.Write(back, nil); n != 4 || err != nil {
				t.Fatalf("Write: %d, %v", n, err)
			}
			u = fe.used(rxQueue)
			if len(u) != 4 {
				t.Fatalf("%d used on the receive ring, want 4: %v", len(u), u)
			}
			seen := map[uint32]bool{}
			for i, e := range u {
				b := fe.mem[fe.q[rxQueue].bufs+uint64(e.id)*bufSize:][:e.n]
				if seen[e.id] || !bytes.Equal(b[fe.hdrLen:], back[i]) {
					t.Fatalf("receive buffer %d (%d) used twice or mangled", e.id, i)
				}
				seen[e.id] = true
			}
			if n, _ := fe.dev.Write(back[:1], nil); n != 1 || len(fe.used(rxQueue)) != 0 || fe.stats.TxDropped.Load() != 1 {
				t.Fatal("a buffer was used twice")
			}
			if fe.stats.Faults.Load() != 0 {
				t.Fatalf("faults: %s", fe.log)
			}
		})
	}
}

// A crash between the used ring's update and the region's: a split ring whose used idx was
// published before its batch was cleared in the region (the batch's list mends it), a packed
// buffer marked used before the region confirmed it (committed) and one noted as being used
// but not yet marked (rolled back). Each resumes with every frame read once and every buffer
// used once.
func TestInflightCrashBetweenNotes(t *testing.T) {
	cases := []struct {
		name     string
		features uint64
		frames   int // sent; all are popped before the crash
		crash    func(q *queue)
		read     int // frames read after the takeover
	}{
		{"split: published, not cleared", allFeatures, 3, func(q *queue) {
			for range 3 {
				q.push(availHead(q, q.usedIdx), 0)
			}
			q.pubUsed = q.usedIdx
			atomic.StoreUint32(q.word(q.used), uint32(q.usedFlags)|uint32(q.pubUsed)<<16)
		}, 0},
		{"packed: marked used, not confirmed", allFeatures | featRingPacked, 2, func(q *queue) {
			p := q.inf
			oldUsed, oldWrap := le.Uint16(p[18:]), p[21]
			first := q.usedIdx
			q.push(first, 0)
			le.PutUint16(p[18:], oldUsed)
			p[21] = oldWrap
			q.entry(q.ids[first])[0] = 1
		}, 1},
		{"packed: noted, not marked used", allFeatures | featRingPacked, 1, func(q *queue) {
			next, wrap := advance(q.usedIdx, q.usedWrap, q.slots[q.usedIdx], q.num)
			q.inflightPackedUsing(next, wrap)
		}, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fe := newFrontend(t)
			k := startKept(fe, c.features)
			warmUp(t, fe)
			var sent [][]byte
			for i := range c.frames {
				sent = append(sent, tcpFrame(300, byte(i)))
				fe.txFrame(sent[i])
			}
			q := fe.ring(txQueue)
			q.mu.Lock()
			for range c.frames {
				if _, ok, err := q.pop(); !ok || err != nil {
					t.Fatalf("pop: %v %v", ok, err)
				}
			}
			c.crash(q)
			q.mu.Unlock()
			crash(t, fe)
			resume(t, fe, k)
			got := readN(t, fe.dev, c.read)
			for i := range got {
				if want := sent[c.frames-c.read+i]; !bytes.Equal(got[i], want) {
					t.Fatalf("frame %d mangled", i)
				}
			}
			more := tcpFrame(500, 9)
			fe.txFrame(more)
			if got := readN(t, fe.dev, 1); !bytes.Equal(got[0], more) {
				t.Fatal("the frame after the takeover mangled or one taken twice")
			}
			u := fe.used(txQueue)
			seen := map[uint32]bool{}
			for _, e := range u {
				if seen[e.id] {
					t.Fatalf("buffer %d used twice: %v", e.id, u)
				}
				seen[e.id] = true
			}
			if len(u) != c.frames+1 {
				t.Fatalf("%d used, want %d: %v", len(u), c.frames+1, u)
			}
			if fe.stats.Faults.Load() != 0 {
				t.Fatalf("faults: %s", fe.log)
			}
		})
	}
}

// A front end's SET_INFLIGHT_FD (as after its reconnect) replaces the region: running rings
// are tracked in the new one from where they stand, and frames flow on.
func TestInflightRegionHandedBack(t *testing.T) {
	fe := newFrontend(t)
	fe.start(allFeatures)
	fe.sendFrame([12]byte{}, tcpFrame(10, 1))
	readOne(t, fe.dev)
	fd, err := unix.Dup(fe.inflightFD)
	if err != nil {
		t.Fatal(err)
	}
	fe.must(reqSetInflightFD, appendInflightDesc(nil, inflightDesc{mmapSize: fe.inflightLen, queues: 2, queueSize: ringNum}), fd)
	fe.sendFrame([12]byte{}, tcpFrame(20, 2))
	readOne(t, fe.dev)
	if got := le.Uint16(fe.regionPart(txQueue)[14:]); got != 2 {
		t.Fatalf("the region's used_idx %d, want 2", got)
	}
}

// Inflight messages the back end refuses, each ending the connection with what is wrong.
func TestHostileInflightMessages(t *testing.T) {
	small := testMemfd(t, "small", 100)
	negotiate := func(fe *frontend, proto uint64) {
		fe.call(reqGetFeatures, nil, 8)
		fe.send(reqSetProtocolFeatures, 0, u64(proto))
		fe.send(reqSetFeatures, 0, u64(featVersion1))
	}
	desc := func(size uint64, queues, num uint16) []byte {
		return appendInflightDesc(nil, inflightDesc{mmapSize: size, queues: queues, queueSize: num})
	}
	size := 2 * inflightQueueLen(false, 64)
	cases := []struct {
		name string
		send func(fe *frontend) error
		want string
	}{
		{"not negotiated", func(fe *frontend) error {
			negotiate(fe, protoReplyAck)
			return fe.send(reqGetInflightFD, 0, desc(0, 2, 64))
		}, "GET_INFLIGHT_FD: INFLIGHT_SHMFD was not negotiated"},
		{"short payload", func(fe *frontend) error {
			return fe.send(reqGetInflightFD, 0, make([]byte, 20))
		}, "GET_INFLIGHT_FD: payload of 20 bytes, want 24"},
		{"no queues", func(fe *frontend) error {
			negotiate(fe, protoInflight)
			return fe.send(reqGetInflightFD, 0, desc(0, 0, 64))
		}, "GET_INFLIGHT_FD: num_queues 0, the device has 2"},
		{"more queues than the device's", func(fe *frontend) error {
			negotiate(fe, protoInflight)
			return fe.send(reqGetInflightFD, 0, desc(0, 3, 64))
		}, "GET_INFLIGHT_FD: num_queues 3, the device has 2"},
		{"queue size", func(fe *frontend) error {
			negotiate(fe, protoInflight)
			return fe.send(reqGetInflightFD, 0, desc(0, 2, 100))
		}, "GET_INFLIGHT_FD: queue_size 100 is not a power of 2"},
		{"region without its descriptor", func(fe *frontend) error {
			negotiate(fe, protoInflight)
			return fe.send(reqSetInflightFD, 0, desc(size, 2, 64))
		}, "SET_INFLIGHT_FD: 0 descriptors, want 1"},
		{"region larger than its file", func(fe *frontend) error {
			negotiate(fe, protoInflight)
			return fe.send(reqSetInflightFD, 0, desc(size, 2, 64), small)
		}, "SET_INFLIGHT_FD: the region ends at byte 2176 of its descriptor, which has 100"},
		{"region of the wrong size", func(fe *frontend) error {
			negotiate(fe, protoInflight)
			return fe.send(reqSetInflightFD, 0, desc(64, 2, 64), small)
		}, "SET_INFLIGHT_FD: mmap_size 64, 2 queues of 64 entries take 2176"},
		{"ring of another size than the region's", func(fe *frontend) error {
			negotiate(fe, protoInflight|protoReplyAck)
			fe.must(reqSetMemTable, memTablePayload(0, guestMem, fe.uaddr(0), 0), fe.memfd)
			big, err := unix.MemfdCreate("region", unix.MFD_CLOEXEC)
			if err != nil {
				return err
			}
			defer unix.Close(big)
			unix.Ftruncate(big, int64(2*inflightQueueLen(false, 128)))
			fe.must(reqSetInflightFD, desc(2*inflightQueueLen(false, 128), 2, 128), big)
			q := &fe.q[txQueue]
			fe.must(reqSetVringNum, state(txQueue, 64))
			fe.must(reqSetVringAddr, vringAddrPayload(txQueue, fe.uaddr(q.desc), fe.uaddr(q.used), fe.uaddr(q.avail)))
			return fe.send(reqSetVringKick, 0, u64(txQueue), q.kick)
		}, "tx queue 1: the inflight region is for 128-entry queues (packed false), the ring has 64"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fe := newFrontend(t)
			fe.wantRefused(t, c.send, c.want)
			if !fe.dev.Broken() || fe.stats.Faults.Load() != 1 {
				t.Fatalf("broken %v, faults %d", fe.dev.Broken(), fe.stats.Faults.Load())
			}
		})
	}
}

// A kept inflight region is as untrusted as the rest of the record: a takeover whose region
// disagrees with itself or the rings is refused, naming the field, and the front end sees its
// connection end.
func TestHostileInflightTakeoverIsRefused(t *testing.T) {
	small := testMemfd(t, "small", 100)
	split, packed := allFeatures, allFeatures|featRingPacked
	cases := []struct {
		name     string
		features uint64
		tamper   func(fe *frontend, p []byte, h *hostileRecord)
		want     string
	}{
		{"version", split, func(fe *frontend, p []byte, h *hostileRecord) { le.PutUint16(p[8:], 2) },
			"tx queue 1: inflight region: version 2, want 1"},
		{"version zero", packed, func(fe *frontend, p []byte, h *hostileRecord) { le.PutUint16(p[8:], 0) },
			"tx queue 1: inflight region: version 0, want 1"},
		{"desc_num", split, func(fe *frontend, p []byte, h *hostileRecord) { le.PutUint16(p[10:], 32) },
			"tx queue 1: inflight region: desc_num 32, the ring has 64"},
		{"inflight field", split, func(fe *frontend, p []byte, h *hostileRecord) { p[splitInflightHdr+splitInflightEnt*9] = 7 },
			"tx queue 1: inflight region: descriptor 9: inflight 7"},
		{"inflight, not available next", split, func(fe *frontend, p []byte, h *hostileRecord) {
			p[splitInflightHdr+splitInflightEnt*2] = 0
			p[splitInflightHdr+splitInflightEnt*40] = 1
		}, "tx queue 1: inflight region: 2 descriptors inflight, but avail entry 2 names 2, which is not"},
		{"more inflight than available", split, func(fe *frontend, p []byte, h *hostileRecord) {
			p[splitInflightHdr+splitInflightEnt*40] = 1
		}, "tx queue 1: inflight region: 3 descriptors inflight, the driver made 2 available past used index 1"},
		{"used_idx far behind", split, func(fe *frontend, p []byte, h *hostileRecord) { le.PutUint16(p[14:], 60000) },
			"tx queue 1: inflight region: used_idx 60000 is 5537 behind the used ring's 1"},
		{"used ring past used_idx", split, func(fe *frontend, p []byte, h *hostileRecord) {
			le.PutUint16(p[14:], 0)
			le.PutUint32(fe.mem[fe.q[txQueue].used+4:], 999)
		}, "inflight region: used entry 0 of the last batch (past used_idx 0) names descriptor 999 of 64"},
		{"packed used_idx", packed, func(fe *frontend, p []byte, h *hostileRecord) { le.PutUint16(p[16:], 64) },
			"tx queue 1: inflight region: used_idx 64 of 64"},
		{"packed old_used_idx", packed, func(fe *frontend, p []byte, h *hostileRecord) { le.PutUint16(p[18:], 700) },
			"tx queue 1: inflight region: old_used_idx 700 of 64"},
		{"packed used_wrap_counter", packed, func(fe *frontend, p []byte, h *hostileRecord) { p[20] = 2 },
			"tx queue 1: inflight region: used_wrap_counter 2"},
		{"packed buffer id", packed, func(fe *frontend, p []byte, h *hostileRecord) {
			first := le.Uint16(p[18:])
			p[packedInflightHdr+packedInflightEnt*int(first)] = 0
			p[packedInflightHdr+packedInflightEnt*int((first+5)%64)] = 1
		}, "is inflight as the 1. taken, but the buffer at slot"},
		{"packed position", packed, func(fe *frontend, p []byte, h *hostileRecord) {
			le.PutUint16(p[16:], (le.Uint16(p[16:])+10)%64)
			le.PutUint16(p[18:], le.Uint16(p[16:]))
		}, "is not available"},
		{"mmap_size", split, func(fe *frontend, p []byte, h *hostileRecord) { h.rec.Inflight.Size += 64 },
			"SET_INFLIGHT_FD: mmap_size 2240, 2 queues of 64 entries take 2176"},
		{"num_queues", split, func(fe *frontend, p []byte, h *hostileRecord) { h.rec.Inflight.Queues = 9 },
			"SET_INFLIGHT_FD: num_queues 9, the device has 2"},
		{"queue_size past the region", split, func(fe *frontend, p []byte, h *hostileRecord) {
			h.rec.Inflight.QueueSize, h.rec.Inflight.Size = 128, 2*inflightQueueLen(false, 128)
		}, "SET_INFLIGHT_FD: the region ends at byte 4224 of its descriptor, which has 2176"},
		{"region too small", split, func(fe *frontend, p []byte, h *hostileRecord) {
			unix.Close(h.fds[len(h.fds)-1])
			h.fds[len(h.fds)-1], _ = unix.Dup(small)
		}, "SET_INFLIGHT_FD: the region ends at byte 2176 of its descriptor, which has 100"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fe := newFrontend(t)
			k := startKept(fe, c.features)
			fe.txFrame(tcpFrame(10, 1))
			readOne(t, fe.dev)
			fe.used(txQueue)
			fe.txFrame(tcpFrame(10, 2))
			fe.txFrame(tcpFrame(10, 3))
			q := fe.ring(txQueue)
			q.mu.Lock()
			q.pop()
			q.pop()
			q.mu.Unlock()
			crash(t, fe)
			h := hostileRecordOf(t, k)
			c.tamper(fe, fe.regionPart(txQueue), h)
			text, _ := json.Marshal(h.rec)
			wantResumeRefused(t, text, h.fds, c.want)
		})
	}
}

// The region a takeover reads is the front end's: reading it never panics, whatever it holds
// and wherever the rings stand, and a base it accepts lies in the ring.
func FuzzInflight(f *testing.F) {
	split := make([]byte, inflightQueueLen(false, 16))
	le.PutUint16(split[8:], 1)
	le.PutUint16(split[10:], 16)
	f.Add(split, false, uint16(0), uint16(0))
	s2 := append([]byte(nil), split...)
	s2[splitInflightHdr] = 1
	le.PutUint16(s2[14:], 65535)
	f.Add(s2, false, uint16(1), uint16(1))
	pk := make([]byte, inflightQueueLen(true, 16))
	le.PutUint16(pk[8:], 1)
	le.PutUint16(pk[10:], 16)
	pk[20], pk[21] = 1, 1
	f.Add(pk, true, uint16(0), uint16(0))
	p2 := append([]byte(nil), pk...)
	p2[packedInflightHdr] = 1
	le.PutUint16(p2[16:], 1)
	f.Add(p2, true, uint16(0), uint16(1))
	f.Fuzz(func(t *testing.T, region []byte, packed bool, usedIdx, availIdx uint16) {
		const num = 16
		mem := make([]byte, 0x4000)
		for i := range uint16(num) { // a ring the driver filled: every slot available
			if packed {
				putPacked(mem, i, fuzzGPA+0x3000, 64, i, 0, true)
			} else {
				le.PutUint16(mem[0x1000+4+2*int(i):], i)
			}
		}
		var r *vring
		if packed {
			r, _ = heapPacked(num, mem)
		} else {
			r, _ = heapRing(num, mem)
			le.PutUint16(mem[0x1000+2:], availIdx)
			r.usedIdx = usedIdx
		}
		q := &queue{vring: *r}
		part := make([]byte, inflightQueueLen(packed, num))
		copy(part, region)
		base, err := q.resumeInflight(part[:min(len(part), len(region))], packed)
		if err != nil {
			return
		}
		if packed && base&0x7fff >= num {
			t.Fatalf("base %#x past the ring", base)
		}
		if !packed && base != uint32(usedIdx) {
			t.Fatalf("base %d, the used idx is %d", base, usedIdx)
		}
	})
}

// postCtrlPacked posts a command on a packed control queue as one buffer of two slots (the
// command, then a writable ack byte, the id the first slot's) and kicks; it returns the first
// slot and the ack byte's guest address.
func (fe *frontend) postCtrlPacked(cmd ...byte) (slot uint16, ack uint64) {
	r := len(fe.q) - 1
	fq := &fe.q[r]
	s0, w0 := fq.availIdx, fq.availWrap
	s1, w1 := advance(s0, w0, 1, fq.num)
	a0, a1 := fq.bufs+uint64(s0)*bufSize, fq.bufs+uint64(s1)*bufSize
	copy(fe.mem[a0:], cmd)
	fe.mem[a1] = 0xff
	putPacked(fe.mem[fq.desc:], s1, a1, 1, s0, descWrite, w1) // the head's flags last
	putPacked(fe.mem[fq.desc:], s0, a0, uint32(len(cmd)), s0, descNext, w0)
	fq.availIdx, fq.availWrap = advance(s1, w1, 1, fq.num)
	fe.kick(r)
	return s0, a1
}

// ctrlUsedPacked returns the ids of the packed control queue's used buffers of two slots the
// driver has not seen.
func (fe *frontend) ctrlUsedPacked() []uint16 {
	fq := &fe.q[len(fe.q)-1]
	var ids []uint16
	for {
		id, _, used := usedAt(fe.mem[fq.desc:], fq.usedSeen, fq.usedWrap)
		if !used {
			return ids
		}
		ids = append(ids, id)
		fq.usedSeen, fq.usedWrap = advance(fq.usedSeen, fq.usedWrap, 2, fq.num)
	}
}

// A packed device of two pairs serving the control queue, taken over with a command it had
// taken and not answered: the command is answered once after the takeover, the pairs the
// driver set stay in use, and frames reach both pairs' receive rings.
func TestInflightTakeoverControlQueue(t *testing.T) {
	fe := newFrontendPairs(t, 2)
	k := startKept(fe, allFeatures|featRingPacked)
	const r = 4
	for range 40 { // round the control ring past its end: 2 slots a command
		_, ack := fe.postCtrlPacked(ctrlMQ, ctrlMQVQPairsSet, 2, 0)
		fe.waitCall(r)
		if u := fe.ctrlUsedPacked(); len(u) != 1 || fe.mem[ack] != ctrlOK {
			t.Fatalf("VQ_PAIRS_SET: used %v, ack %d", u, fe.mem[ack])
		}
	}
	c := fe.ring(r)
	c.mu.Lock()
	slot, ack := fe.postCtrlPacked(ctrlRx, 0, 1)
	if h, ok, err := c.pop(); !ok || err != nil || h != slot {
		t.Fatalf("pop: %d %v %v", h, ok, err)
	}
	c.mu.Unlock()
	crash(t, fe)
	resume(t, fe, k)
	var u []uint16
	for deadline := time.Now().Add(10 * time.Second); len(u) == 0 && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		u = fe.ctrlUsedPacked() // the resumed device's call comes first, then the answer's
	}
	if len(u) != 1 || u[0] != slot || fe.mem[ack] != ctrlOK {
		t.Fatalf("the command taken at the crash: used %v (want [%d]), ack %d", u, slot, fe.mem[ack])
	}
	for _, ring := range []int{0, 2} {
		for range 32 {
			fq := &fe.q[ring]
			fe.offerPacked(ring, fq.bufs+uint64(fq.availIdx)*bufSize, bufSize, descWrite)
		}
	}
	frames := make([][]byte, 16)
	for i := range frames {
		frames[i] = udpFrame(1, 2, uint16(i), 53)
	}
	if n, err := fe.dev.Write(frames, nil); n != 16 || err != nil {
		t.Fatalf("Write: %d, %v", n, err)
	}
	a, b := len(fe.reapPacked(0)), len(fe.reapPacked(2))
	if a == 0 || b == 0 || a+b != 16 {
		t.Fatalf("frames on the receive rings: %d and %d, want 16 over both", a, b)
	}
	if fe.stats.Faults.Load() != 0 {
		t.Fatalf("faults: %s", fe.log)
	}
}

// go test -run '^$' -bench InflightMarks ./drivers/vhostuser: the ring operations alone (pop,
// push, publish of batches of 32 one-descriptor chains, the driver's side a store of the avail
// idx), with and without the region's marks: ns/op is per chain.
func BenchmarkInflightMarks(b *testing.B) {
	for _, l := range []string{"split", "packed"} {
		for _, marks := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/marks=%v", l, marks), func(b *testing.B) {
				const num, batch = 256, 32
				mem := make([]byte, 0x8000)
				var q *vring
				if l == "packed" {
					q, _ = heapPacked(num, mem)
				} else {
					q, _ = heapRing(num, mem)
					q.eventIdx = false
					for i := range num {
						le.PutUint16(q.avail[4+2*i:], uint16(i))
					}
				}
				if marks {
					d := &Device{inflight: &inflightRegion{desc: inflightDesc{queues: 1, queueSize: num}, packed: l == "packed",
						mem: make([]byte, inflightQueueLen(l == "packed", num))}}
					qu := &queue{vring: *q}
					qu.started = true
					if err := d.attachInflight(0, qu); err != nil {
						b.Fatal(err)
					}
					q = &qu.vring
				}
				var slot uint16
				wrap := true
				b.ResetTimer()
				for done := 0; done < b.N; done += batch {
					for range batch { // the driver
						if l == "packed" {
							putPacked(mem, slot, fuzzGPA+0x3000, 64, slot, 0, wrap)
							if slot++; slot == num {
								slot, wrap = 0, !wrap
							}
						} else {
							slot++
						}
					}
					if l != "packed" {
						le.PutUint16(q.avail[2:], slot)
					}
					for range batch {
						h, ok, err := q.pop()
						if !ok || err != nil {
							b.Fatal(ok, err)
						}
						q.push(h, 64)
					}
					q.publish()
				}
			})
		}
	}
}
