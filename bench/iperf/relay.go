package iperf

import (
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/nicstack/nicstack/drivers/tap"
	"github.com/nicstack/nicstack/netdev"
)

// relayBatch is how many frames the relay takes from a TAP per wakeup, as linux_nic's stream.
const relayBatch = 64

// tapRelay is the "relay" reference: the simplest user-space path between two TAPs. One
// process (this one) reads each namespace's TAP, with the same vnet headers, offloads and
// batched reads as our components' TAPs, and writes every frame unchanged to the other: two
// copies of a byte, no packet streams, no router. Beside the kernel's path it tells what
// carrying frames through user space costs from what our design (three processes, the
// router's copy between two sessions' memories) adds to that.
type tapRelay struct {
	devs [2]*tap.Device
	wg   sync.WaitGroup
	cpu0 time.Duration
}

// startRelay makes a TAP named name+"a" in namespace srv and name+"b" in vm, both at mtu, and
// relays between them until close.
func startRelay(srv, vm, name string, mtu int) (*tapRelay, error) {
	r := &tapRelay{}
	for i, ns := range []string{srv, vm} {
		f, err := os.Open(filepath.Join("/run/netns", ns))
		if err != nil {
			r.close()
			return nil, err
		}
		r.devs[i], err = tap.Create(tap.Config{Name: name + string(rune('a'+i)), MTU: mtu, NetNS: f})
		f.Close()
		if err != nil {
			r.close()
			return nil, err
		}
	}
	r.cpu0 = processCPU()
	r.wg.Add(2)
	go r.copyFrames(r.devs[1], r.devs[0])
	go r.copyFrames(r.devs[0], r.devs[1])
	return r, nil
}

// copyFrames writes every frame src reads to dst, until either is closed.
func (r *tapRelay) copyFrames(dst, src netdev.Device) {
	defer r.wg.Done()
	bufs, frames := make([][]byte, relayBatch), make([][]byte, relayBatch)
	for i := range bufs {
		bufs[i] = make([]byte, netdev.MaxFrame)
	}
	sizes, offs := make([]int, relayBatch), make([]netdev.Offload, relayBatch)
	for {
		n, err := src.Read(bufs, sizes, offs)
		if err != nil {
			return
		}
		for i := range n {
			frames[i] = bufs[i][:sizes[i]]
		}
		if _, err := dst.Write(frames[:n], offs[:n]); err != nil {
			return
		}
	}
}

// cpu is the relay's CPU since it started, in % of one CPU over d: this process's, which
// does nothing else meanwhile (its children, the iperf3s, are not in it).
func (r *tapRelay) cpu(d time.Duration) float64 {
	return 100 * (processCPU() - r.cpu0).Seconds() / d.Seconds()
}

// close closes both TAPs (they disappear with them) and waits for the relay to stop.
func (r *tapRelay) close() {
	for _, d := range r.devs {
		if d != nil {
			d.Close()
		}
	}
	r.wg.Wait()
}

// processCPU is this process's CPU time, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru) // fails only for a bad "who"
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
