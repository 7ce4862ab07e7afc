// Package region is the nic_router's state region: the dynamic state a restarted router needs
// to go on with the same flows (link states of both families with their NAT ports, ARP caches, DHCP leases, the
// DHCP client's lease), kept in shared memory that outlives the router process. It is a table
// of fixed-size slots written in place when an entry comes, changes or goes, never per frame.
// It is not a log and not a snapshot: the router knows which slot holds what.
//
// The region is untrusted input to the process that loads it (a crashed router wrote it, maybe
// half): a header names the layout and its version, and every slot carries a sequence number,
// odd while it is written, and a CRC-32C of its contents and position. Open keeps only the
// slots whose sequence is even and whose checksum holds and that decode to well-formed
// records; it frees every other slot and counts it, and formats a region whose header does
// not hold.
package region

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"sync/atomic"
	"unsafe"
)

// Layout. Slot 0 holds the header; record slots follow.
const (
	SlotSize = 128
	Version  = 1
	magic    = "nicstRS\x00"
	hdrLen   = 24 // magic, version, slot size, slots, CRC of the rest
	// bodyOff: a slot is seq (4 bytes), CRC (4), kind (1), then the record.
	bodyOff = 9
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Kind says what a slot holds.
type Kind uint8

const (
	free Kind = iota
	KindLink
	KindARP
	KindLease
	KindClient
	KindLink6
	KindSLAAC
	kinds
)

func (k Kind) String() string {
	switch k {
	case KindLink:
		return "link state"
	case KindARP:
		return "ARP entry"
	case KindLease:
		return "DHCP lease"
	case KindClient:
		return "DHCP client"
	case KindLink6:
		return "IPv6 link state"
	case KindSLAAC:
		return "SLAAC config"
	}
	return fmt.Sprintf("kind %d", uint8(k))
}

// Region is a state region in use: the memory and which of its slots are free. Only one
// goroutine may use it (the router's).
type Region struct {
	mem   []byte
	slots int32
	free  []int32 // free slot numbers, the lowest last
	used  []bool
}

// Size is the bytes of a region of n record slots.
func Size(n int) int { return (n + 1) * SlotSize }

// Contents is what Open found in a region.
type Contents struct {
	Links   []Link
	Links6  []Link6
	ARP     []ARP
	Leases  []Lease
	Clients []Client
	SLAAC   []SLAAC
	// Discarded counts the slots that held something Open did not trust: torn (a write the
	// crash interrupted), a checksum that does not hold, a record that does not decode.
	Discarded int
	// Why is the reason for the first discarded slots, at most a few, for the log.
	Why []string
}

// Formatted is Open's error for a region whose header did not hold: Open formatted it, and
// Err says why. (A region of zeros, new, is formatted without an error.)
type Formatted struct{ Err error }

func (f *Formatted) Error() string { return "state region formatted: " + f.Err.Error() }

// maxWhy bounds Contents.Why.
const maxWhy = 4

// Open takes mem (its length a multiple of SlotSize, at least two slots) as a state region. A
// region with a valid header is loaded: its trusted records are returned, every other slot is
// freed. A region without one is formatted, and the error (a *Formatted) says why, unless it
// was all zeros (new).
func Open(mem []byte) (*Region, *Contents, error) {
	if len(mem) < 2*SlotSize || len(mem)%SlotSize != 0 || uintptr(unsafe.Pointer(&mem[0]))%8 != 0 {
		return nil, nil, fmt.Errorf("state region: %d bytes; want a multiple of %d, at least %d, 8-byte aligned", len(mem), SlotSize, 2*SlotSize)
	}
	r := &Region{mem: mem, slots: int32(len(mem)/SlotSize - 1)}
	r.used = make([]bool, r.slots+1)
	if err := r.checkHeader(); err != nil {
		fresh := isZero(mem[:SlotSize])
		r.format()
		if fresh {
			return r, &Contents{}, nil
		}
		return r, &Contents{}, &Formatted{err}
	}
	c := &Contents{}
	for s := int32(1); s <= r.slots; s++ {
		if err := r.load(s, c); err != nil {
			c.Discarded++
			if len(c.Why) < maxWhy {
				c.Why = append(c.Why, fmt.Sprintf("slot %d: %v", s, err))
			}
			r.clear(s)
		}
	}
	for s := r.slots; s >= 1; s-- {
		if !r.used[s] {
			r.free = append(r.free, s)
		}
	}
	return r, c, nil
}

func isZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

func (r *Region) checkHeader() error {
	h := r.mem[:hdrLen]
	switch {
	case string(h[:8]) != magic:
		return errors.New("no state region header (magic)")
	case binary.LittleEndian.Uint32(h[20:]) != crc32.Checksum(h[:20], castagnoli):
		return errors.New("header checksum does not hold")
	case binary.LittleEndian.Uint32(h[8:]) != Version:
		return fmt.Errorf("version %d, this router writes %d", binary.LittleEndian.Uint32(h[8:]), Version)
	case binary.LittleEndian.Uint32(h[12:]) != SlotSize:
		return fmt.Errorf("slot size %d, want %d", binary.LittleEndian.Uint32(h[12:]), SlotSize)
	case binary.LittleEndian.Uint32(h[16:]) != uint32(r.slots):
		return fmt.Errorf("%d slots, the region has room for %d", binary.LittleEndian.Uint32(h[16:]), r.slots)
	}
	return nil
}

// format clears every slot, then writes the header: a crash in between leaves no header, and
// the next Open formats again.
func (r *Region) format() {
	clear(r.mem)
	h := r.mem[:hdrLen]
	copy(h[:8], magic)
	binary.LittleEndian.PutUint32(h[8:], Version)
	binary.LittleEndian.PutUint32(h[12:], SlotSize)
	binary.LittleEndian.PutUint32(h[16:], uint32(r.slots))
	binary.LittleEndian.PutUint32(h[20:], crc32.Checksum(h[:20], castagnoli))
	r.free = r.free[:0]
	for s := r.slots; s >= 1; s-- {
		r.free = append(r.free, s)
	}
}

// Slots is the number of record slots.
func (r *Region) Slots() int { return int(r.slots) }

// InUse is the number of slots holding a record.
func (r *Region) InUse() int { return int(r.slots) - len(r.free) }

// None is the slot number of a record that has none (not kept, or the region was full).
// Records are in slots 1 to Slots (slot 0 is the header's place).
const None int32 = 0

func (r *Region) slot(s int32) []byte {
	off := int(s) * SlotSize
	return r.mem[off : off+SlotSize : off+SlotSize]
}

func (r *Region) seq(s int32) *uint32 { return (*uint32)(unsafe.Pointer(&r.slot(s)[0])) }

// sum is the checksum of slot s as it is: its kind and record, and its number, so that a
// record copied into another slot does not hold either.
func sum(b []byte, s int32) uint32 {
	return crc32.Checksum(b[8:], castagnoli) ^ uint32(s)*0x9e3779b1
}

// begin opens slot s (None, or one not in use: a free one) for writing a record of kind k and returns it with
// the slot's body cleared; false when s is None and no slot is free. The slot's sequence is
// odd until commit: a crash in between leaves a torn slot, which Open discards.
func (r *Region) begin(s int32, k Kind) ([]byte, int32, bool) {
	if s < 1 || s > r.slots || !r.used[s] {
		if len(r.free) == 0 {
			return nil, None, false
		}
		s = r.free[len(r.free)-1]
		r.free = r.free[:len(r.free)-1]
		r.used[s] = true
	}
	b := r.slot(s)
	q := r.seq(s)
	atomic.StoreUint32(q, atomic.LoadUint32(q)|1)
	clear(b[4:])
	b[8] = byte(k)
	return b[bodyOff:], s, true
}

// commit closes slot s: the checksum, then an even sequence, a new one.
func (r *Region) commit(s int32) {
	b := r.slot(s)
	q := r.seq(s)
	next := atomic.LoadUint32(q) + 1 // even
	if next == 0 {
		next = 2
	}
	binary.LittleEndian.PutUint32(b[4:], sum(b, s))
	atomic.StoreUint32(q, next)
}

// Free empties slot s (None: nothing to do).
func (r *Region) Free(s int32) {
	if s < 1 || s > r.slots || !r.used[s] {
		return
	}
	r.clear(s)
	r.used[s] = false
	r.free = append(r.free, s)
}

// clear marks slot s free in memory: a zero sequence is one store, never torn.
func (r *Region) clear(s int32) {
	atomic.StoreUint32(r.seq(s), 0)
	clear(r.slot(s)[4:])
}

// load decodes slot s into c; an error discards it.
func (r *Region) load(s int32, c *Contents) error {
	b := r.slot(s)
	q := binary.LittleEndian.Uint32(b[0:])
	switch {
	case q == 0:
		if !isZero(b[4:]) {
			return errors.New("free slot with contents")
		}
		return nil
	case q&1 != 0:
		return errors.New("torn (written when the router ended)")
	case binary.LittleEndian.Uint32(b[4:]) != sum(b, s):
		return errors.New("checksum does not hold")
	}
	var rec interface {
		decode(b []byte) error
		addTo(c *Contents, s int32)
	}
	switch Kind(b[8]) {
	case KindLink:
		rec = new(Link)
	case KindARP:
		rec = new(ARP)
	case KindLease:
		rec = new(Lease)
	case KindClient:
		rec = new(Client)
	case KindLink6:
		rec = new(Link6)
	case KindSLAAC:
		rec = new(SLAAC)
	default:
		return fmt.Errorf("unknown record kind %d", b[8])
	}
	if err := rec.decode(b[bodyOff:]); err != nil {
		return fmt.Errorf("%v: %w", Kind(b[8]), err)
	}
	rec.addTo(c, s)
	r.used[s] = true
	return nil
}
