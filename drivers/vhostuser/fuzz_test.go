package vhostuser

import (
	"log/slog"
	"testing"
	"unsafe"
)

// Messages come from an untrusted front end: the parser never panics, and what it accepts
// has the size and descriptors its type says.
func FuzzMessage(f *testing.F) {
	add := func(req uint32, p []byte, fds uint8) {
		b := le.AppendUint32(nil, req)
		b = le.AppendUint32(b, flagVersion)
		b = le.AppendUint32(b, uint32(len(p)))
		f.Add(append(b, p...), fds)
	}
	add(reqSetMemTable, memTablePayload(0, 1<<20, 0x7f0000000000, 0), 1)
	add(reqSetVringAddr, vringAddrPayload(1, 0x1000, 0x2000, 0x3000), 0)
	add(reqSetVringKick, u64(1), 1)
	add(reqSetVringCall, u64(vringNoFD), 0)
	add(reqSetVringNum, state(0, 256), 0)
	add(reqGetFeatures, nil, 0)
	f.Fuzz(func(t *testing.T, b []byte, fds uint8) {
		if len(b) < msgHdrLen {
			return
		}
		h, err := parseHeader(b)
		if err != nil {
			return
		}
		p := b[msgHdrLen:]
		if uint32(len(p)) < h.size {
			return
		}
		m, err := parseMessage(h, p[:h.size], int(fds%16))
		if err != nil {
			return
		}
		if m.nmem > maxRegions || (h.request == reqSetMemTable && m.nmem != int(fds%16)) {
			t.Fatalf("accepted %d regions with %d descriptors", m.nmem, fds%16)
		}
		if h.size > maxPayload {
			t.Fatalf("accepted a payload of %d bytes", h.size)
		}
	})
}

// ringMem is heap-backed guest memory for the ring logic alone (the race detector sees it):
// one region at guest address fuzzGPA, the descriptor table at its start.
const fuzzGPA = 0x10000

func heapRing(num uint16, mem []byte) (*vring, *memTable) {
	t := &memTable{regions: []region{{gpa: fuzzGPA, uaddr: fuzzGPA, size: uint64(len(mem)), mem: mem}}}
	q := &vring{name: "tx queue 1", num: num, eventIdx: true}
	if err := q.setAreas(t.front(fuzzGPA, descLen*uint64(num)), t.front(fuzzGPA+0x1000, availLen(num)), t.front(fuzzGPA+0x2000, usedLen(num))); err != nil {
		panic(err)
	}
	return q, t
}

// Descriptor tables and avail rings are the guest's: the walker never panics, ends within
// the queue's size, and hands out only buffers inside guest memory.
func FuzzChain(f *testing.F) {
	desc := func(addr uint64, n uint32, flags, next uint16) []byte {
		d := le.AppendUint64(nil, addr)
		d = le.AppendUint32(d, n)
		return le.AppendUint16(le.AppendUint16(d, flags), next)
	}
	f.Add(desc(fuzzGPA+0x3000, 256, 0, 0), uint16(0), uint16(1))
	f.Add(append(desc(fuzzGPA+0x3000, 12, descNext, 1), desc(fuzzGPA+0x3100, 1500, 0, 0)...), uint16(0), uint16(1))
	f.Add(append(desc(fuzzGPA+0x3000, 12, descNext, 1), desc(fuzzGPA+0x3100, 1500, descNext, 0)...), uint16(0), uint16(1))
	f.Add(desc(fuzzGPA+0x3f00, 512, 0, 0), uint16(0), uint16(70))
	f.Fuzz(func(t *testing.T, table []byte, head, availIdx uint16) {
		const num = 16
		mem := make([]byte, 0x4000)
		copy(mem[:descLen*num], table)
		q, mt := heapRing(num, mem)
		le.PutUint16(q.avail[2:], availIdx)
		le.PutUint16(q.avail[4:], head)
		h, ok, err := q.pop()
		if err != nil || !ok {
			return
		}
		base := uintptr(unsafe.Pointer(&mem[0]))
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
			if p < base || p+uintptr(len(b)) > base+uintptr(len(mem)) {
				t.Fatalf("buffer of %d bytes outside guest memory", len(b))
			}
		}
	})
}

// Control commands are the guest's: command never panics, touches only guest memory, and
// leaves the pairs in use within the device's.
func FuzzControlCommand(f *testing.F) {
	desc := func(addr uint64, n uint32, flags, next uint16) []byte {
		d := le.AppendUint64(nil, addr)
		d = le.AppendUint32(d, n)
		return le.AppendUint16(le.AppendUint16(d, flags), next)
	}
	good := append(desc(fuzzGPA+0x3000, 4, descNext, 1), desc(fuzzGPA+0x3100, 1, descWrite, 0)...)
	f.Add(good, []byte{ctrlMQ, ctrlMQVQPairsSet, 3, 0})
	f.Add(good, []byte{ctrlMQ, ctrlMQVQPairsSet, 0xff, 0xff})
	f.Add(good, []byte{ctrlRx, 0, 1, 0})
	f.Add(desc(fuzzGPA+0x3000, 1, 0, 0), []byte{ctrlMQ})
	f.Fuzz(func(t *testing.T, table, cmd []byte) {
		const num = 16
		mem := make([]byte, 0x4000)
		copy(mem[:descLen*num], table)
		copy(mem[0x3000:0x3100], cmd)
		r, mt := heapRing(num, mem)
		c := &queue{vring: *r, mem: mt}
		d := &Device{log: slog.New(slog.DiscardHandler), pairs: 4}
		d.active.Store(1)
		d.command(c, 0)
		if a := d.active.Load(); a < 1 || a > 4 {
			t.Fatalf("%d pairs in use of 4", a)
		}
	})
}
