package testcomp

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/nicstack/nicstack/drivers/afpacket"
	"github.com/nicstack/nicstack/drivers/tap"
	"github.com/nicstack/nicstack/netdev"
	"github.com/nicstack/nicstack/netdev/header"
	"github.com/nicstack/nicstack/runtime/component"
)

// wire is a parent service's interface (a TAP or an AF_PACKET socket) as the client uses it:
// it answers every IPv4 UDP datagram the namespace's kernel sends by reflecting it (addresses
// and ports swapped, so the sender's socket gets its own datagram back), and counts
// "wire_frames" read and "wire_reflected".
type wire struct {
	port interface {
		Read(bufs [][]byte, sizes []int, offs []netdev.Offload) (int, error)
		Write(bufs [][]byte, offs []netdev.Offload) (int, error)
		Close() error
	}
	done sync.WaitGroup
}

func (cl *Client) openWire(s *component.Session) error {
	if len(s.Files) != 1 {
		return fmt.Errorf("%s session with %d files, want 1", s.Service, len(s.Files))
	}
	w := &wire{}
	var err error
	if s.Service == "Tap" {
		w.port, err = tap.FromFile(s.Files[0])
	} else {
		w.port, err = afpacket.FromFile(s.Files[0], afpacket.Config{Interface: s.Args["interface"]})
	}
	if err != nil {
		return err
	}
	frames, reflected := cl.c.Counter("wire_frames"), cl.c.Counter("wire_reflected")
	w.done.Add(1)
	go func() {
		defer w.done.Done()
		w.reflect(frames, reflected)
	}()
	cl.wire = w
	return nil
}

func (w *wire) reflect(frames, reflected *atomic.Uint64) {
	bufs := [][]byte{make([]byte, netdev.MaxFrame)}
	sizes, offs := make([]int, 1), make([]netdev.Offload, 1)
	for {
		n, err := w.port.Read(bufs, sizes, offs)
		if err != nil {
			return
		}
		for i := range n {
			frames.Add(1)
			if f := bufs[i][:sizes[i]]; swapUDP(f) {
				if _, err := w.port.Write([][]byte{f}, offs[i:i+1]); err != nil {
					return
				}
				reflected.Add(1)
			}
		}
	}
}

// swapUDP turns an Ethernet/IPv4/UDP frame around in place: MACs, addresses and ports
// swapped. The UDP checksum stays right, as it sums over the swapped fields; the IP header's
// is adjusted for each address and comes out the same.
func swapUDP(f []byte) bool {
	e, ok := header.NewEth(f)
	if !ok || e.Type() != header.EtherTypeIPv4 {
		return false
	}
	ip, ok := header.NewIPv4(e.Payload())
	if !ok || ip.Protocol() != header.ProtoUDP {
		return false
	}
	udp, ok := header.L4Header(ip)
	if !ok {
		return false
	}
	src, dst := e.Src(), e.Dst()
	e.SetSrc(dst)
	e.SetDst(src)
	srcIP, dstIP := ip.Src(), ip.Dst()
	ip.SetSrc(dstIP)
	ip.SetDst(srcIP)
	p := header.Ports(udp)
	sport, dport := p.Src(), p.Dst()
	p.SetSrc(dport)
	p.SetDst(sport)
	return true
}

func (w *wire) close() {
	w.port.Close()
	w.done.Wait()
}
