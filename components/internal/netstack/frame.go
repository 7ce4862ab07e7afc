// Package netstack is a user-space TCP/IP stack over Ethernet frames: gVisor's netstack behind a
// narrow link endpoint, for guests that need no privileges (the VM component's embedded guest,
// the remote host). Frames come in as batches through Stack.DeliverFrames and leave as batches
// through an Outbound; with offloads on, TCP leaves as TSO super-frames up to 64 KiB described
// by netdev.Offload, exactly as a virtio-net guest would send them.
package netstack

import "github.com/nicstack/nicstack/netdev"

// Frame is one Ethernet frame (no FCS) with its offload metadata.
type Frame struct {
	Data    []byte
	Offload netdev.Offload
}

// Outbound takes the stack's outgoing frames, in batches (up to 47 frames, gathered while the
// previous batch was being written). Frame data is valid only during the call: an implementation
// copies it (into a packet stream's bulk buffer, say) and signals its peer once per call.
// WriteFrames returns how many frames it took, in order; the rest are dropped and TCP recovers.
// It may block while its queue is full, which holds back the stack's transmit goroutine like
// a full NIC ring. It is never called concurrently with itself.
type Outbound interface {
	WriteFrames(frames []Frame) int
}

// OutboundFunc adapts a function to Outbound.
type OutboundFunc func(frames []Frame) int

func (f OutboundFunc) WriteFrames(frames []Frame) int { return f(frames) }
