// Package netdev is what every frame carries and every device offers: the offload metadata a
// frame takes through nicstack (the fields of a virtio-net header) and the one batch interface
// of a device (a TAP, an AF_PACKET socket, an emulated NIC's wire). It is a leaf: it imports
// only the standard library, so every layer can use its types without importing another.
package netdev

import "time"

// Offload is the offload metadata a frame carries: the fields of a virtio-net header, so that
// super-frames from a TAP with IFF_VNET_HDR, or from a guest, pass through whole and the
// checksum is filled in only where the frame finally leaves.
type Offload struct {
	Flags      uint8 // OffloadNeedsCsum, OffloadDataValid
	GSOType    uint8 // GSONone, GSOTCPv4, GSOUDP, GSOTCPv6, optionally | GSOECN
	HdrLen     uint16
	GSOSize    uint16
	CsumStart  uint16
	CsumOffset uint16
}

// MaxFrame bounds every frame a device hands out and the router forwards: a 64 KiB super-frame
// (a GSO packet) with its Ethernet and a VLAN header, rounded up. A read buffer of this size
// never truncates.
const MaxFrame = 65536 + 256

// Values as in Linux's virtio_net.h, so a vnet header converts field by field.
const (
	OffloadNeedsCsum = 1
	OffloadDataValid = 2

	GSONone  = 0
	GSOTCPv4 = 1
	GSOUDP   = 3
	GSOTCPv6 = 4
	GSOECN   = 0x80
)

// Device is a network device as nicstack's drivers and tests drive it: frames in batches,
// each with its offload metadata. One goroutine may Read while another Writes; closing the
// device (however its type does that) makes both return an error.
type Device interface {
	// Read waits until the device has frames, then reads a burst: frame i into bufs[i], its
	// length into sizes[i] and its metadata into offs[i]. It returns the number of frames
	// read, at least one unless err is set. len(sizes) and len(offs) are at least len(bufs).
	// A frame that does not fit its buffer, or is malformed, is dropped and counted by the
	// device, never returned cut short.
	Read(bufs [][]byte, sizes []int, offs []Offload) (n int, err error)
	// Write writes bufs[i] with metadata offs[i] (len(offs) >= len(bufs)) and returns how
	// many were taken; a frame the device refuses (malformed, too large, metadata it cannot
	// honour) is dropped and counted, and still counts as taken.
	Write(bufs [][]byte, offs []Offload) (n int, err error)
}

// A Target takes the frames a DirectReader reads, straight into memory it hands out one
// buffer at a time, so that it holds none while the device is quiet. Each attempt at a burst
// starts with Begin and ends with End (a read may make several, one per wakeup, until a frame
// lands); between them Buffer gives room for the next frame (nil ends the burst) and Frame
// reports what landed in the buffer given last: n bytes with their offload metadata, or
// n == 0 for nothing (the device ran empty or failed; the buffer is the target's again).
type Target interface {
	Begin()
	Buffer() []byte
	Frame(n int, off *Offload)
	End()
}

// Buffers is the Target of a device's Read: the caller's buffers in order. Frame i lands in
// Bufs[i][:Sizes[i]] with its offload metadata in Offs[i]; a nil buffer has no room, so its
// frame is dropped and the burst goes on. N is the frames taken.
type Buffers struct {
	Bufs  [][]byte
	Sizes []int
	Offs  []Offload
	N     int
}

// Into makes t a Target for Read(bufs, sizes, offs): sizes and offs at least as long as bufs.
func (t *Buffers) Into(bufs [][]byte, sizes []int, offs []Offload) {
	*t = Buffers{Bufs: bufs, Sizes: sizes[:len(bufs)], Offs: offs[:len(bufs)]}
}

func (t *Buffers) Begin() {}
func (t *Buffers) End()   {}

func (t *Buffers) Buffer() []byte {
	if t.N == len(t.Bufs) {
		return nil
	}
	if t.Bufs[t.N] == nil {
		return []byte{}
	}
	return t.Bufs[t.N]
}

func (t *Buffers) Frame(n int, off *Offload) {
	if n > 0 {
		t.Sizes[t.N], t.Offs[t.N] = n, *off
		t.N++
	}
}

// A SizedTarget is a Target that can also hand out a buffer for a frame whose size the
// device knows before it copies the frame (a vhost-user chain's descriptors say it): BufferOf
// gives room for n bytes, as Buffer does for the largest frame (nil ends the burst).
type SizedTarget interface {
	Target
	BufferOf(n int) []byte
}

// DirectReader is a Device that can read frames straight into memory a Target hands out
// once frames are there (a TAP: one copy fewer per frame than Read into private buffers).
type DirectReader interface {
	ReadTo(t Target) (n int, err error)
}

// Depth is how much stands in one queue of the data path at a moment (a ring, a packet
// stream, frames a router holds): what waits and how long the oldest of it has waited, zero
// when the queue is empty. Every layer reports its queues in it, so that status and metrics
// show where the queue stands without knowing the layer.
type Depth struct {
	Frames  uint64
	Bytes   uint64
	Sojourn time.Duration // age of the oldest frame waiting
}
