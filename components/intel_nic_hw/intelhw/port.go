package intelhw

import (
	"errors"
	"os"
	"time"

	"github.com/nicstack/nicstack/drivers/afpacket"
	"github.com/nicstack/nicstack/drivers/tap"
	"github.com/nicstack/nicstack/netdev"
)

// Port is a Linux interface as the NIC's wire: drivers/tap.Device (TapPort) or
// drivers/afpacket.Socket (PacketPort), or a test's. One goroutine Reads while another Writes;
// Close makes both return.
type Port interface {
	netdev.Device
	// Drops are the malformed frames the port dropped so far, received and sent.
	Drops() (rx, tx uint64)
	Close() error
}

type tapPort struct{ *tap.Device }

func (p tapPort) Drops() (uint64, uint64) { return p.Stats.RxDropped.Load(), p.Stats.TxDropped.Load() }

// TapPort is a TAP as the wire. It should have no offloads (the supervisor's Tap service with
// offload=no): frames with offload metadata are refused, as a cable carries no super-frames.
func TapPort(d *tap.Device) Port { return tapPort{d} }

type packetPort struct{ *afpacket.Socket }

func (p packetPort) Drops() (uint64, uint64) {
	return p.Stats.RxDropped.Load(), p.Stats.TxDropped.Load()
}

// PacketPort is an AF_PACKET socket as the wire (its interface's offloads off, see TapPort).
func PacketPort(s *afpacket.Socket) Port { return packetPort{s} }

// portFrame is the longest frame the port reads whole: the model's longest (RCTL.LPE). Longer
// ones (super-frames) are dropped by the port and counted as invalid.
const portFrame = 16384

// AttachPort plugs a Linux interface in as the wire and starts clocking its frames in. The
// NIC closes the port when it is detached.
func (n *NIC) AttachPort(p Port) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.wire != nil {
		return errors.New("emulated NIC: the cable is already plugged into another session")
	}
	n.wire = &wire{port: p}
	wr := n.wire
	n.wireDone.Go(func() { n.portLoop(wr) })
	if n.dev != nil {
		n.dev.SetCarrier(n.carrier())
	}
	return nil
}

// portLoop reads a burst from the port only once the device has taken the previous one at the
// link rate: meanwhile frames wait in the kernel's queue, and what it cannot hold the kernel
// drops, as a sender's queue overflows on a real link. What the device cannot take (no free
// descriptor) it drops and counts itself.
func (n *NIC) portLoop(wr *wire) {
	bufs := make([][]byte, rxBatch)
	for i := range bufs {
		bufs[i] = make([]byte, portFrame)
	}
	sizes, offs, frames := make([]int, rxBatch), make([]netdev.Offload, rxBatch), make([][]byte, rxBatch)
	for !wr.stop.Load() {
		k, err := wr.port.Read(bufs, sizes, offs)
		n.publishDrops(wr)
		if err != nil {
			if wr.stop.Load() || errors.Is(err, os.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond) // the interface went down (AF_PACKET: ENETDOWN)
			continue
		}
		m := 0
		for i := range k {
			if offs[i].GSOType != netdev.GSONone || offs[i].Flags&netdev.OffloadNeedsCsum != 0 {
				n.cnt.WireRXOffload.Add(1)
				continue
			}
			frames[m] = bufs[i][:sizes[i]]
			m++
		}
		if _, lost := n.clockIn(frames[:m], &wr.stop, nil); lost > 0 {
			n.cnt.WireRXLost.Add(uint64(lost))
		}
	}
}

// transmitPort writes the device's batch to the port in one Write; wr.txMu held.
func (n *NIC) transmitPort(wr *wire, frames [][]byte) {
	k, err := wr.port.Write(frames, nil)
	if err != nil {
		n.cnt.WireTXDropped.Add(uint64(len(frames) - k))
	}
	n.publishDrops(wr)
}

// publishDrops adds what the port dropped since the last call to the wire's counters.
func (n *NIC) publishDrops(wr *wire) {
	rx, tx := wr.port.Drops()
	wr.dropMu.Lock()
	defer wr.dropMu.Unlock()
	if rx > wr.rxDrop {
		n.cnt.WireRXInvalid.Add(rx - wr.rxDrop)
		wr.rxDrop = rx
	}
	if tx > wr.txDrop {
		n.cnt.WireTXDropped.Add(tx - wr.txDrop)
		wr.txDrop = tx
	}
}
