package vhostuser

import (
	"fmt"
	"runtime/debug"
	"time"

	"github.com/nicstack/nicstack/netdev"
)

// Multi-queue (virtio-net 5.1.6.5.5): a device of N pairs has rings 0..2N-1, pair p's receive
// queue 2p and transmit queue 2p+1, and with VIRTIO_NET_F_MQ the control queue 2N. Front ends
// (QEMU, DPDK's virtio-user) mostly keep the control queue to themselves and turn
// VQ_PAIRS_SET into SET_VRING_ENABLE of the pairs' rings; a front end that acks CTRL_VQ hands
// it to the device, which then serves it (ctrl.go).
//
// Each pair's transmit queue is read by its own loop (Pair(p).Read), the receive queues are
// written by one (Write), which steers each frame to a pair by its flow: a hash of the IP
// addresses, protocol and ports that is the same both ways, modulo the pairs whose receive
// queue runs. A flow's frames thus stay on one receive queue, and its replies arrive on the
// queue its requests would if the guest hashes alike (Linux picks its transmit queue by
// its own hash, so the two need not meet).

// MaxQueuePairs bounds a device's queue pairs (the vm's queues=).
const MaxQueuePairs = 16

// The virtio-net features of multi-queue.
const (
	featCtrlVQ = 1 << 17
	featMQ     = 1 << 22
)

// SetQueuePairs makes the device offer n queue pairs, 1 to MaxQueuePairs; Serve must not run
// yet. With more than one it offers VIRTIO_NET_F_MQ and the control queue, and GET_QUEUE_NUM
// answers n.
func (d *Device) SetQueuePairs(n int) error {
	if n < 1 || n > MaxQueuePairs {
		return fmt.Errorf("vhost-user: %d queue pairs, want 1 to %d", n, MaxQueuePairs)
	}
	rings := 2
	if n > 1 {
		rings = 2*n + 1
	}
	d.pairs = n
	d.q = make([]queue, rings)
	for i := range d.q {
		q := &d.q[i]
		switch {
		case i == 2*n:
			q.name = fmt.Sprintf("control queue %d", i)
		case i%2 == rxQueue:
			q.name = fmt.Sprintf("rx queue %d", i)
			if n > 1 { // one pair: the totals say it all
				// The guest's receive queue carries what Write hands it: the device's TX.
				q.frames = d.stats.counter(fmt.Sprintf("vhost_tx_frames_pair%d", i/2))
			}
		default:
			q.name = fmt.Sprintf("tx queue %d", i)
			if n > 1 {
				q.frames = d.stats.counter(fmt.Sprintf("vhost_rx_frames_pair%d", i/2))
			}
		}
		q.call, q.errFD, q.changed = -1, -1, make(chan struct{}, 1)
	}
	d.active.Store(int32(n))
	return nil
}

// QueuePairs reports how many queue pairs the device offers.
func (d *Device) QueuePairs() int { return d.pairs }

// offered is the feature set the device offers.
func (d *Device) offered() uint64 {
	if d.pairs > 1 {
		return offeredFeatures | featRingPacked | featInOrder | featMQ | featCtrlVQ
	}
	return offeredFeatures | featRingPacked | featInOrder
}

// ctrlQueue returns the control queue, nil without multi-queue.
func (d *Device) ctrlQueue() *queue {
	if d.pairs == 1 {
		return nil
	}
	return &d.q[2*d.pairs]
}

// Pair is the transmit queue of one queue pair, read by a loop of its own.
type Pair struct {
	d *Device
	p int
}

// Pair returns pair p's reader (0 <= p < QueuePairs()). Device.Read is Pair(0).Read.
func (d *Device) Pair(p int) *Pair { return &Pair{d: d, p: p} }

// Read is Device.Read for the pair's transmit queue: it waits while the pair is not in use.
func (r *Pair) Read(bufs [][]byte, sizes []int, offs []netdev.Offload) (int, error) {
	return r.d.read(r.p, bufs, sizes, offs)
}

// inUse reports whether pair p carries frames (the VQ_PAIRS_SET of a device-served control
// queue); its rings must also be ready.
func (d *Device) inUse(p int) bool { return p < int(d.active.Load()) }

// Write hands frames to the guest, each on the receive queue of its flow's pair (see the top
// of this file); otherwise as writeQueue.
func (d *Device) Write(bufs [][]byte, offs []netdev.Offload) (int, error) {
	live := d.livePairs()
	if len(live) <= 1 {
		p := 0
		if len(live) == 1 {
			p = live[0]
		}
		return d.writeQueue(&d.q[2*p+rxQueue], bufs, offs)
	}
	t := &d.tx
	if cap(t.pair) < len(bufs) {
		t.pair, t.sub, t.subOffs = make([]uint8, len(bufs)), make([][]byte, 0, len(bufs)), make([]netdev.Offload, 0, len(bufs))
	}
	for i, b := range bufs {
		t.pair[i] = uint8(live[flowHash(b)%uint32(len(live))])
	}
	taken := 0
	for _, p := range live {
		t.sub, t.subOffs = t.sub[:0], t.subOffs[:0]
		for i, b := range bufs {
			if int(t.pair[i]) == p {
				t.sub = append(t.sub, b)
				if offs != nil {
					t.subOffs = append(t.subOffs, offs[i])
				} else {
					t.subOffs = append(t.subOffs, netdev.Offload{})
				}
			}
		}
		if len(t.sub) == 0 {
			continue
		}
		n, err := d.writeQueue(&d.q[2*p+rxQueue], t.sub, t.subOffs)
		taken += n
		if err != nil {
			return taken, err
		}
	}
	return taken, nil
}

// livePairs returns the pairs in use whose receive queue runs (Write's scratch).
func (d *Device) livePairs() []int {
	live := d.tx.live[:0]
	for p := 0; p < d.pairs && d.inUse(p); p++ {
		q := &d.q[2*p+rxQueue]
		q.mu.Lock()
		if q.ready() {
			live = append(live, p)
		}
		q.mu.Unlock()
	}
	return live
}

// flowHash hashes an Ethernet frame's flow: IPv4 or IPv6 addresses, protocol, and TCP, UDP
// or SCTP ports when the packet is no later fragment. Each end is hashed alone and the two
// combined by addition, so both directions hash alike. Other frames (ARP) hash to 0.
func flowHash(f []byte) uint32 {
	if len(f) < 14 {
		return 0
	}
	et, l3 := uint16(f[12])<<8|uint16(f[13]), 14
	if et == 0x8100 && len(f) >= 18 {
		et, l3 = uint16(f[16])<<8|uint16(f[17]), 18
	}
	var a, b []byte
	var proto byte
	l4 := -1
	switch {
	case et == 0x0800 && len(f) >= l3+20:
		ihl := int(f[l3]&0xf) * 4
		a, b, proto = f[l3+12:l3+16], f[l3+16:l3+20], f[l3+9]
		if frag := uint16(f[l3+6]&0x1f)<<8 | uint16(f[l3+7]); frag == 0 && ihl >= 20 {
			l4 = l3 + ihl
		}
	case et == 0x86dd && len(f) >= l3+40:
		a, b, proto, l4 = f[l3+8:l3+24], f[l3+24:l3+40], f[l3+6], l3+40
	default:
		return 0
	}
	var pa, pb []byte
	if (proto == 6 || proto == 17 || proto == 132) && l4 >= 0 && len(f) >= l4+4 {
		pa, pb = f[l4:l4+2], f[l4+2:l4+4]
	}
	h := end(a, pa) + end(b, pb) + uint32(proto)
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	return h
}

// end is FNV-1a of one end of a flow: its address and port.
func end(addr, port []byte) uint32 {
	h := uint32(2166136261)
	for _, c := range addr {
		h = (h ^ uint32(c)) * 16777619
	}
	for _, c := range port {
		h = (h ^ uint32(c)) * 16777619
	}
	return h
}

// ReadTo is Device.ReadTo for the pair's transmit queue.
func (r *Pair) ReadTo(t netdev.Target) (int, error) { return r.d.readTo(r.p, t) }

// read is Read for pair p's transmit queue, through the queue's netdev.Buffers.
func (d *Device) read(p int, bufs [][]byte, sizes []int, offs []netdev.Offload) (int, error) {
	if len(bufs) == 0 {
		return 0, nil
	}
	t := &d.q[2*p+txQueue].bufs
	t.Into(bufs, sizes, offs)
	n, err := d.readTo(p, t)
	*t = netdev.Buffers{}
	return n, err
}

// readTo is ReadTo for pair p's transmit queue: it waits while the pair is not in use.
func (d *Device) readTo(p int, t netdev.Target) (n int, err error) {
	q := &d.q[2*p+txQueue]
	defer d.guard(q, debug.SetPanicOnFault(true))
	for {
		if d.closed.Load() {
			return 0, ErrClosed
		}
		n, k, err := d.readBatch(p, q, t)
		if err != nil {
			d.breakDown(err, q)
		}
		if n > 0 {
			return n, nil
		}
		if err == nil && q.waitFor(k, time.Time{}) && k != nil {
			d.stats.Kicks.Add(1)
		}
	}
}

// ignoreRing reports whether a message about ring i is for a ring past the device's that a
// front end asking for more pairs than the device has sets up: logged once, taken and
// ignored, so that it runs with the pairs the device has. A ring no device of MaxQueuePairs
// has is a fault.
func (d *Device) ignoreRing(i uint32) bool {
	if i < uint32(len(d.q)) || i > 2*MaxQueuePairs {
		return false
	}
	if !d.extra.Swap(true) {
		d.log.Warn("the front end sets up more rings than the device has; they are ignored and it runs with the device's pairs",
			"ring", i, "pairs", d.pairs, "rings", len(d.q))
	}
	return true
}
