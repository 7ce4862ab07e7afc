package router

import (
	"sync/atomic"
	"time"

	"github.com/nicstack/nicstack/netdev"
	"github.com/nicstack/nicstack/netdev/header"
)

// arpWaiter is Genode's Arp_waiter: the frames waiting for the MAC of ip in domain dom. The
// first frame makes it and broadcasts the ARP request; later frames for the same address join
// it without asking again. When the reply comes, its frames are routed again; when
// arp_request_timeout_sec passes first, they are dropped, and the next frame asks anew.
//
// As in Genode, nothing but the client's own packet stream bounds how many frames an
// interface has waiting: a held frame stays unacknowledged in the client's buffer, so a
// client that sends to dead addresses fills its own buffer (which it paid for), not the
// router's memory.
//
// An IPv6 waiter (v6, ip6) is the same for a neighbour solicitation (ndp.go).
type arpWaiter struct {
	src      *Interface // whose frame made it: the report counts it there
	dom      *domain
	ip       [4]byte
	ip6      [16]byte
	v6       bool
	deadline int64 // Unix nanoseconds
	frames   []heldFrame
}

// heldFrame is one frame an arpWaiter holds.
type heldFrame struct {
	from  *Interface
	in    *domain // the domain it came from, where a drop counts
	frame []byte
	off   netdev.Offload
	id    uint64
	at    int64 // Unix nanoseconds when it was held
}

// hold keeps the frame from interface i in domain src (unacknowledged) until hop's MAC is
// known in d.
func (r *Router) hold(i *Interface, src, d *domain, hop [4]byte, frame []byte, off *netdev.Offload, id uint64) Verdict {
	if len(d.ifs) == 0 {
		return r.drop(src, "destination domain has no interface")
	}
	w := d.waiters[hop]
	if w == nil {
		w = &arpWaiter{src: i, dom: d, ip: hop, deadline: r.now.Add(r.cfg.ARPRequestTimeout).UnixNano()}
		d.waiters[hop] = w
		r.waiters = append(r.waiters, w)
		for _, o := range d.ifs {
			b := make([]byte, arpFrameLen)
			e := header.Eth(b)
			e.SetDst(header.Broadcast)
			e.SetSrc(o.routerMAC)
			e.SetType(header.EtherTypeARP)
			header.PutARP(b[header.EthLen:], header.ARPRequest, o.routerMAC, d.ip.addr, header.Broadcast, hop)
			r.emit(o, b)
		}
	}
	return r.keepHeld(w, i, src, frame, off, id)
}

// keepHeld adds the frame from interface i in domain src to waiter w.
func (r *Router) keepHeld(w *arpWaiter, i *Interface, src *domain, frame []byte, off *netdev.Offload, id uint64) Verdict {
	w.frames = append(w.frames, heldFrame{from: i, in: src, frame: frame, off: *off, id: id, at: r.nowNs})
	i.heldBytes += len(frame)
	if i.heldFrames++; i.heldFrames == 1 {
		i.heldSince = r.nowNs
	}
	r.heldChanged = true
	return Held
}

// unhold destroys waiter w: it leaves its domain and the router, counts as destroyed for
// the interface that made it, and hands back its frames.
func (r *Router) unhold(w *arpWaiter) []heldFrame {
	if w.v6 {
		if w.dom.waiters6[w.ip6] == w {
			delete(w.dom.waiters6, w.ip6)
		}
	} else if w.dom.waiters[w.ip] == w {
		delete(w.dom.waiters, w.ip)
	}
	for k, o := range r.waiters {
		if o == w {
			r.waiters = append(r.waiters[:k], r.waiters[k+1:]...)
			break
		}
	}
	w.src.counts.arpWaiters++
	for _, f := range w.frames {
		f.from.heldBytes -= len(f.frame)
	}
	r.heldRecount = true
	return w.frames
}

// continueWaiter routes again every frame that waited for ip in d, now that its MAC is known.
func (r *Router) continueWaiter(d *domain, ip [4]byte) {
	if w := d.waiters[ip]; w != nil {
		r.rehandle(w)
	}
}

// rehandle routes again every frame of waiter w, whose address is now resolved.
func (r *Router) rehandle(w *arpWaiter) {
	in := r.ingress
	for _, f := range r.unhold(w) {
		r.ingress = f.from // its sender's class at an egress queue
		if r.handle(f.from, f.frame, &f.off, f.id) == Done {
			f.from.port.Release(f.id)
		}
	}
	r.ingress = in
}

// expireWaiters drops the frames of every waiter whose ARP request timed out.
func (r *Router) expireWaiters() {
	now := r.now.UnixNano()
	for k := 0; k < len(r.waiters); {
		w := r.waiters[k]
		if now < w.deadline {
			k++
			continue
		}
		for _, f := range r.unhold(w) {
			r.stats.ARPTimeouts.add(1)
			r.drop(f.in, "ARP request timed out")
			f.from.port.Release(f.id)
		}
	}
}

// cancelWaiters forgets the frames of interface i, which leaves (its session's buffers go
// with it), and cancels the waiters it made: their other frames are dropped, as Genode's
// cancel_arp_waiting drops them.
func (r *Router) cancelWaiters(i *Interface) {
	for k := 0; k < len(r.waiters); {
		w := r.waiters[k]
		kept := w.frames[:0]
		for _, f := range w.frames {
			if f.from == i {
				i.heldBytes -= len(f.frame)
			} else {
				kept = append(kept, f)
			}
		}
		clear(w.frames[len(kept):])
		w.frames = kept
		r.heldRecount = true
		if w.src != i {
			k++
			continue
		}
		for _, f := range r.unhold(w) {
			r.drop(f.in, "ARP got cancelled")
			f.from.port.Release(f.id)
		}
	}
}

// rehandleWaiters routes every held frame again after a new config (the domains it waited in
// are gone); a frame whose interface has no domain now is dropped.
func (r *Router) rehandleWaiters() {
	ws := r.waiters
	r.waiters = nil
	r.heldRecount = true
	for _, w := range ws {
		w.src.counts.arpWaiters++
		for _, f := range w.frames {
			f.from.heldBytes -= len(f.frame)
			if f.from.dom == nil {
				r.drop(nil, "interface lost its domain")
				f.from.port.Release(f.id)
				continue
			}
			if r.handle(f.from, f.frame, &f.off, f.id) == Done {
				f.from.port.Release(f.id)
			}
		}
	}
}

// publishHeld makes what each interface has held for ARP visible to Held, once per batch and
// only after a change. A frame held adds to its interface's count; frames that leave (an ARP
// reply, a timeout, a cancellation) have the counts made again from the waiters, which also
// finds the new oldest.
func (r *Router) publishHeld() {
	if r.heldRecount {
		r.heldRecount = false
		for _, i := range r.ifs {
			i.heldFrames, i.heldSince = 0, 0
		}
		for _, w := range r.waiters {
			for _, f := range w.frames {
				i := f.from
				if i.heldFrames++; i.heldFrames == 1 || f.at < i.heldSince {
					i.heldSince = f.at
				}
			}
		}
	}
	r.heldChanged = false
	for _, i := range r.ifs {
		i.held.publish(i.heldFrames, i.heldBytes, i.heldSince)
	}
}

// publishedDepth is a queue's depth as the router's loop published it at the end of a batch,
// for any goroutine: frames, bytes and when the oldest came (Unix nanoseconds).
type publishedDepth struct {
	frames, bytes atomic.Uint64
	since         atomic.Int64
}

func (d *publishedDepth) publish(frames, bytes int, since int64) {
	d.frames.Store(uint64(frames))
	d.bytes.Store(uint64(bytes))
	d.since.Store(since)
}

// at is the depth with the oldest's sojourn at now (0 when none waits).
func (d *publishedDepth) at(now time.Time) netdev.Depth {
	n := netdev.Depth{Frames: d.frames.Load(), Bytes: d.bytes.Load()}
	if n.Frames > 0 {
		n.Sojourn = max(0, now.Sub(time.Unix(0, d.since.Load())))
	}
	return n
}

// Held reports the frames from i that wait for an ARP reply, at the end of the router's last
// batch: how many, their bytes, and how long the oldest has waited at now. Any goroutine may
// ask.
func (i *Interface) Held(now time.Time) netdev.Depth { return i.held.at(now) }
