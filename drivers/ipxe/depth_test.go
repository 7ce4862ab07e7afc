package ipxe_test

import (
	"net"
	"testing"
	"time"

	"github.com/nicstack/nicstack/drivers/ipxe"
	"github.com/nicstack/nicstack/netdev"
)

// TestTXQueue: frames handed to the NIC stand in the TX ring with their bytes and the age of
// their batch until the NIC writes them back, whether the driver has reaped them or not.
func TestTXQueue(t *testing.T) {
	r := newRig(t, "82574L", plainConfig())
	r.waitLink(t)
	if q := r.drv.TXQueue(); q != (netdev.Depth{}) {
		t.Fatalf("empty ring: %+v", q)
	}
	var bytes uint64
	for _, batch := range []int{3, 4} {
		for i := range batch {
			f := frame(net.HardwareAddr{2, 0, 0, 0, 0, 0x99}, 60+100*i+batch, i)
			r.up.tx = append(r.up.tx, f)
			bytes += uint64(len(f))
		}
		r.drv.Transmit() // the device has not polled: nothing written back
		r.clock.Advance(time.Millisecond)
	}
	if q := r.drv.TXQueue(); q.Frames != 7 || q.Bytes != bytes || q.Sojourn != 2*time.Millisecond {
		t.Fatalf("7 frames of %d bytes queued 2 ms ago: %+v", bytes, q)
	}
	r.clock.Advance(3 * time.Millisecond)
	if q := r.drv.TXQueue(); q.Sojourn != 5*time.Millisecond {
		t.Fatalf("sojourn %v after 5 ms, want 5ms", q.Sojourn)
	}
	for steps := 0; len(r.wire.frames) < 7; steps++ {
		if steps > 100 {
			t.Fatalf("stuck: %d on the wire", len(r.wire.frames))
		}
		r.clock.Advance(frameTime)
		r.dev.Poll() // written back, not reaped: the driver does not run
		if q := r.drv.TXQueue(); q.Frames != uint64(7-len(r.wire.frames)) || q.Frames == 0 && q != (netdev.Depth{}) {
			t.Fatalf("%d of 7 frames on the wire: %+v", len(r.wire.frames), q)
		}
	}
	r.step(time.Millisecond) // reaped
	if q := r.drv.TXQueue(); q != (netdev.Depth{}) {
		t.Fatalf("all sent and reaped: %+v", q)
	}
}

// TestRXQueue: frames the NIC wrote to the RX ring stand there with their bytes until the
// driver takes them; their sojourn is the time since the driver last looked.
func TestRXQueue(t *testing.T) {
	r := newRig(t, "82574L", ipxe.DefaultConfig())
	r.waitLink(t)
	r.step(time.Millisecond) // the driver looks at the empty ring
	if q := r.drv.RXQueue(); q != (netdev.Depth{}) {
		t.Fatalf("empty ring: %+v", q)
	}
	var in [][]byte
	var bytes uint64
	for i := range 5 {
		in = append(in, frame(nicMAC, 64+200*i, i))
		bytes += uint64(64 + 200*i)
	}
	for sent := 0; sent < len(in); r.clock.Advance(frameTime) { // the driver does not run
		sent += r.dev.Receive(in[sent:])
	}
	r.clock.Advance(2 * time.Millisecond)
	q := r.drv.RXQueue()
	if q.Frames != 5 || q.Bytes != bytes || q.Sojourn < 2*time.Millisecond {
		t.Fatalf("5 frames of %d bytes, driver away 2 ms or more: %+v", bytes, q)
	}
	r.step(time.Millisecond)
	sameFrames(t, "uplink", r.up.rx, in)
	if q := r.drv.RXQueue(); q != (netdev.Depth{}) {
		t.Fatalf("all taken: %+v", q)
	}
}

// TestQueuesWhileRunning asks for the rings' depth from another goroutine while frames go
// both ways (under -race: the reads touch only what driver and device write atomically), and
// finds them empty after.
func TestQueuesWhileRunning(t *testing.T) {
	r := newRig(t, "82574L", ipxe.DefaultConfig())
	r.waitLink(t)
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if q := r.drv.TXQueue(); q.Frames > ipxe.RingSize-1 {
				t.Errorf("TX ring holds %d frames", q.Frames)
			}
			if q := r.drv.RXQueue(); q.Frames > ipxe.RingSize-1 {
				t.Errorf("RX ring holds %d frames", q.Frames)
			}
		}
	}()
	var out, in [][]byte
	for i := range 1000 {
		out = append(out, frame(net.HardwareAddr{2, 0, 0, 0, 0, 0x99}, 60+i%1455, i))
		in = append(in, frame(nicMAC, 60+(i*7)%1455, i))
	}
	r.up.tx = append(r.up.tx, out...)
	r.drv.Transmit()
	for sent, steps := 0, 0; sent < len(in) || len(r.wire.frames) < len(out) || len(r.up.rx) < len(in); steps++ {
		if steps > 10000 {
			t.Fatalf("stuck: %d sent, %d on the wire, %d delivered", sent, len(r.wire.frames), len(r.up.rx))
		}
		if sent < len(in) {
			sent += r.dev.Receive(in[sent:min(sent+8, len(in))])
		}
		r.step(8 * frameTime)
	}
	close(stop)
	<-done
	if tx, rx := r.drv.TXQueue(), r.drv.RXQueue(); tx != (netdev.Depth{}) || rx != (netdev.Depth{}) {
		t.Fatalf("after the traffic: tx %+v rx %+v", tx, rx)
	}
}
