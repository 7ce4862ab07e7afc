package vhostuser

import (
	"bytes"
	"strings"
	"testing"
	"unsafe"

	"github.com/nicstack/nicstack/netdev"
)

// heapPacked is a packed ring of num slots in heap-backed guest memory (the race detector
// sees it): descriptors at fuzzGPA, the driver's event structure at +0x1000, the device's at
// +0x2000, both sides at slot 0 with wrap counter 1, as after a reset.
func heapPacked(num uint16, mem []byte) (*vring, *memTable) {
	t := &memTable{regions: []region{{gpa: fuzzGPA, uaddr: fuzzGPA, size: uint64(len(mem)), mem: mem}}}
	q := &vring{name: "tx queue 1", num: num}
	q.setPacked(true)
	if err := q.setAreas(t.front(fuzzGPA, descLen*uint64(num)), t.front(fuzzGPA+0x1000, eventAreaLen), t.front(fuzzGPA+0x2000, eventAreaLen)); err != nil {
		panic(err)
	}
	q.setPackedBase(1 << 15)
	return q, t
}

// putPacked writes slot i as the driver makes it available with wrap counter wrap.
func putPacked(mem []byte, i uint16, addr uint64, n uint32, id, flags uint16, wrap bool) {
	if wrap {
		flags |= packedAvail
	} else {
		flags |= packedUsed
	}
	d := mem[descLen*uint64(i):]
	le.PutUint64(d, addr)
	le.PutUint32(d[8:], n)
	le.PutUint16(d[12:], id)
	le.PutUint16(d[14:], flags)
}

// usedAt returns slot i's id, length and whether it is used for wrap counter wrap.
func usedAt(mem []byte, i uint16, wrap bool) (id uint16, n uint32, used bool) {
	d := mem[descLen*uint64(i):]
	f := le.Uint16(d[14:])
	return le.Uint16(d[12:]), le.Uint32(d[8:]), (f&packedAvail != 0) == wrap && (f&packedUsed != 0) == wrap
}

// Buffers of one and two slots go round a ring of 4 past its end: each is popped whole, its
// buffers walked in order, marked used at the used index with its id and the device's wrap
// counter, and the used index steps over its slots; unpop gives a buffer back.
func TestPackedRingWraps(t *testing.T) {
	mem := make([]byte, 0x4000)
	q, mt := heapPacked(4, mem)
	buf := uint64(fuzzGPA + 0x3000)
	putPacked(mem, 0, buf, 12, 9, descNext, true)
	putPacked(mem, 1, buf+100, 50, 3, 0, true) // the id is the last slot's
	putPacked(mem, 2, buf+200, 60, 1, 0, true)
	head, ok, err := q.pop()
	if err != nil || !ok || head != 0 || q.slots[0] != 2 || q.ids[0] != 3 {
		t.Fatalf("pop: %d %v %v, slots %v ids %v", head, ok, err, q.slots, q.ids)
	}
	c := q.chain(mt, head)
	for _, want := range []int{12, 50} {
		if b, _, err := c.buffer(); err != nil || len(b) != want {
			t.Fatalf("buffer of %d bytes (%v), want %d", len(b), err, want)
		}
	}
	if b, _, _ := c.buffer(); b != nil {
		t.Fatal("the chain goes on past its last slot")
	}
	q.push(head, 62)
	if id, n, used := usedAt(mem, 0, true); id != 3 || n != 62 || !used {
		t.Fatalf("used slot 0: id %d, %d bytes, used %v", id, n, used)
	}
	if h, _, _ := q.pop(); h != 2 {
		t.Fatalf("second buffer at %d", h)
	}
	q.unpop(1)
	if h, _, _ := q.pop(); h != 2 {
		t.Fatalf("after unpop the buffer at %d", h)
	}
	q.push(2, 0)
	if _, ok, _ := q.pop(); ok {
		t.Fatal("a slot not made available was popped")
	}
	// Slot 3 and, past the end with wrap counter 0, slot 0.
	putPacked(mem, 0, buf, 30, 2, 0, false)
	putPacked(mem, 3, buf, 20, 0, descNext, true)
	if h, ok, err := q.pop(); err != nil || !ok || h != 3 || q.lastAvail != 1 || q.availWrap {
		t.Fatalf("pop across the end: %d %v %v, next slot %d wrap %v", h, ok, err, q.lastAvail, q.availWrap)
	}
	q.push(3, 50)
	if id, _, used := usedAt(mem, 3, true); id != 2 || !used || q.usedIdx != 1 || q.usedWrap {
		t.Fatalf("used slot 3: id %d used %v; used index %d wrap %v", id, used, q.usedIdx, q.usedWrap)
	}
	if !q.publish() {
		t.Fatal("a driver with notifications enabled not notified")
	}
	le.PutUint16(mem[0x1000+2:], eventDisable)
	q.push(3, 0) // slot 3's buffer again, as a test of publish only
	if q.publish() {
		t.Fatal("a driver that disabled notifications notified")
	}
}

// A hostile driver's packed ring: each lie is a fault naming the queue, or (a slot whose flags
// do not say available) nothing to take; nothing panics.
func TestHostilePackedRing(t *testing.T) {
	buf := uint64(fuzzGPA + 0x3000)
	cases := []struct {
		name string
		set  func(mem []byte)
		want string // "": nothing available, no fault
	}{
		{"wrap counter lies in a chain", func(mem []byte) {
			putPacked(mem, 0, buf, 10, 0, descNext, true)
			putPacked(mem, 1, buf, 10, 0, 0, false)
		}, "tx queue 1: buffer at slot 0 runs into slot 1, which is not available"},
		{"avail and used both set", func(mem []byte) {
			putPacked(mem, 0, buf, 10, 0, packedUsed, true)
		}, ""},
		{"avail and used both clear", func(mem []byte) {
			le.PutUint16(mem[14:], 0)
		}, ""},
		{"chain loop", func(mem []byte) {
			for i := range uint16(8) {
				putPacked(mem, i, buf, 10, 0, descNext, true)
			}
		}, "tx queue 1: buffer at slot 0 longer than the queue's 8 descriptors"},
		{"id out of range", func(mem []byte) {
			putPacked(mem, 0, buf, 10, 8, 0, true)
		}, "tx queue 1: buffer at slot 0 has id 8 of 8"},
		{"indirect", func(mem []byte) {
			putPacked(mem, 0, buf, 16, 0, descIndirect, true)
		}, "tx queue 1: descriptor 0 is indirect"},
		{"unknown flags", func(mem []byte) {
			putPacked(mem, 0, buf, 16, 0, 1<<3, true)
		}, "tx queue 1: descriptor 0 has unknown flags"},
		{"address outside memory", func(mem []byte) {
			putPacked(mem, 0, fuzzGPA+0x3ff0, 100, 0, 0, true)
		}, "tx queue 1: descriptor 0: 100 bytes at guest address 0x13ff0 lie outside guest memory"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mem := make([]byte, 0x4000)
			q, mt := heapPacked(8, mem)
			c.set(mem)
			head, ok, err := q.pop()
			if err == nil && ok {
				ch := q.chain(mt, head)
				for err == nil {
					var b []byte
					if b, _, err = ch.buffer(); b == nil {
						break
					}
				}
			}
			switch {
			case c.want == "" && (err != nil || ok):
				t.Fatalf("popped %v, %v; want nothing", ok, err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("%v, want %q", err, c.want)
			}
		})
	}
}

// A packed ring's SET_VRING_BASE past the ring is refused with the connection.
func TestPackedBaseOutOfRange(t *testing.T) {
	fe := newFrontend(t)
	fe.call(reqGetFeatures, nil, 8)
	fe.send(reqSetFeatures, 0, u64(featVersion1|featRingPacked))
	fe.send(reqSetVringNum, 0, state(1, 64))
	fe.send(reqSetVringBase, 0, state(1, 1<<15|64))
	if err := <-fe.done; err == nil || !strings.Contains(err.Error(), "tx queue 1: SET_VRING_BASE: slot 64 of a packed ring of 64") {
		t.Fatalf("Serve: %v", err)
	}
}

// Packed rings are the guest's: pop and the walker never panic, end within the queue's size,
// and hand out only buffers inside guest memory.
func FuzzPackedChain(f *testing.F) {
	slot := func(addr uint64, n uint32, id, flags uint16) []byte {
		d := le.AppendUint64(nil, addr)
		d = le.AppendUint32(d, n)
		return le.AppendUint16(le.AppendUint16(d, id), flags)
	}
	f.Add(slot(fuzzGPA+0x3000, 256, 0, packedAvail), uint16(1<<15))
	f.Add(append(slot(fuzzGPA+0x3000, 12, 5, packedAvail|descNext), slot(fuzzGPA+0x3100, 1500, 1, packedAvail)...), uint16(1<<15))
	f.Add(append(slot(fuzzGPA+0x3000, 12, 0, packedAvail|descNext), slot(fuzzGPA+0x3100, 1500, 0, packedUsed)...), uint16(1<<15))
	f.Add(slot(fuzzGPA+0x3000, 64, 15, packedUsed), uint16(15))
	f.Fuzz(func(t *testing.T, table []byte, base uint16) {
		const num = 16
		mem := make([]byte, 0x4000)
		copy(mem[:descLen*num], table)
		q, mt := heapPacked(num, mem)
		q.setPackedBase(uint32(base) & (1<<15 | (num - 1)))
		memBase := uintptr(unsafe.Pointer(&mem[0]))
		for range 3 {
			h, ok, err := q.pop()
			if err != nil || !ok {
				return
			}
			c := q.chain(mt, h)
			for n := 0; ; n++ {
				b, _, err := c.buffer()
				if err != nil || b == nil {
					break
				}
				if n >= num {
					t.Fatal("a chain longer than the queue")
				}
				p := uintptr(unsafe.Pointer(&b[0]))
				if p < memBase || p+uintptr(len(b)) > memBase+uintptr(len(mem)) {
					t.Fatalf("buffer of %d bytes outside guest memory", len(b))
				}
			}
			q.push(h, 1)
			q.publish()
			if q.usedIdx >= num || q.lastAvail >= num {
				t.Fatalf("indices %d, %d past the ring", q.usedIdx, q.lastAvail)
			}
		}
	})
}

// offerPacked makes one single-slot buffer available on packed ring r (id: its slot) and
// kicks unless the device disabled kicks.
func (fe *frontend) offerPacked(r int, addr uint64, n uint32, flags uint16) {
	fq := &fe.q[r]
	slot := fq.availIdx
	putPacked(fe.mem[fq.desc:], slot, addr, n, slot, flags, fq.availWrap)
	if fq.availIdx++; fq.availIdx == fq.num {
		fq.availIdx, fq.availWrap = 0, !fq.availWrap
	}
	if le.Uint16(fe.mem[fq.used+2:]) != eventDisable {
		fe.kick(r)
	}
}

// reapPacked returns the used buffers of packed ring r the driver has not seen.
func (fe *frontend) reapPacked(r int) []usedEntry {
	fq := &fe.q[r]
	var out []usedEntry
	for {
		id, n, used := usedAt(fe.mem[fq.desc:], fq.usedSeen, fq.usedWrap)
		if !used {
			return out
		}
		out = append(out, usedEntry{uint32(id), n})
		if fq.usedSeen++; fq.usedSeen == fq.num {
			fq.usedSeen, fq.usedWrap = 0, !fq.usedWrap
		}
	}
}

// The Go front end on packed rings with 2 pairs: frames from the guest on each pair's transmit
// ring reach that pair's reader, frames to the guest land on both receive rings, several
// times round each ring (past the wrap), whole and in order.
func TestPackedFramesBothWays(t *testing.T) {
	fe := newFrontendPairs(t, 2)
	fe.start(allFeatures&^featCtrlVQ | featRingPacked)
	if fe.features&featRingPacked == 0 {
		t.Fatal("packed rings not negotiated")
	}
	bufs, sizes, offs := make([][]byte, 8), make([]int, 8), make([]netdev.Offload, 8)
	for i := range bufs {
		bufs[i] = make([]byte, 2048)
	}
	for p := range 2 {
		r := 2*p + txQueue
		for round := range 20 { // 160 frames through a ring of 64
			for k := range 8 {
				fq := &fe.q[r]
				addr := fq.bufs + uint64(fq.availIdx)*bufSize
				f := udpFrame(byte(round), byte(k), uint16(p), 1)
				copy(fe.mem[addr+uint64(fe.hdrLen):], f)
				clear(fe.mem[addr : addr+uint64(fe.hdrLen)])
				fe.offerPacked(r, addr, uint32(fe.hdrLen+len(f)), 0)
			}
			got := 0
			for got < 8 {
				n, err := fe.dev.Pair(p).Read(bufs[got:], sizes[got:], offs[got:])
				if err != nil {
					t.Fatal(err)
				}
				got += n
			}
			for k := range 8 {
				if !bytes.Equal(bufs[k][:sizes[k]], udpFrame(byte(round), byte(k), uint16(p), 1)) {
					t.Fatalf("pair %d round %d frame %d: % x", p, round, k, bufs[k][:sizes[k]])
				}
			}
			if u := fe.reapPacked(r); len(u) != 8 {
				t.Fatalf("pair %d round %d: %d used", p, round, len(u))
			}
		}
	}
	arrived, posted := map[int]int{}, map[int]int{}
	for round := range 10 {
		for _, r := range []int{0, 2} {
			for ; posted[r]-arrived[r] < 32; posted[r]++ { // never more than the ring holds
				fq := &fe.q[r]
				fe.offerPacked(r, fq.bufs+uint64(fq.availIdx)*bufSize, bufSize, descWrite)
			}
		}
		frames := make([][]byte, 16)
		for i := range frames {
			frames[i] = udpFrame(1, 2, uint16(100*round+i), 53)
		}
		if n, err := fe.dev.Write(frames, nil); n != 16 || err != nil {
			t.Fatalf("Write: %d, %v", n, err)
		}
		for _, r := range []int{0, 2} {
			for _, e := range fe.reapPacked(r) {
				fq := &fe.q[r]
				b := fe.mem[fq.bufs+uint64(e.id)*bufSize:][:e.n]
				if !bytes.Equal(b[fe.hdrLen:fe.hdrLen+34], frames[0][:34]) {
					t.Fatalf("ring %d: % x", r, b)
				}
				arrived[r]++
			}
		}
	}
	if arrived[0] == 0 || arrived[2] == 0 || arrived[0]+arrived[2] != 160 || fe.stats.TxDropped.Load() != 0 {
		t.Fatalf("arrived %v, dropped %d (log %s)", arrived, fe.stats.TxDropped.Load(), fe.log)
	}
	if fe.stats.Faults.Load() != 0 {
		t.Fatalf("faults: %s", fe.log)
	}
}
