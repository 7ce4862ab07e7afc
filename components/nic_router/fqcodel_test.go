package main

import (
	"strings"
	"testing"
	"time"
)

// With <fq-codel> at domain b, frames to its clients wait in the router's egress queue, held
// in the client's stream buffer (Port as a router.QueuePort), and go out as the client
// acknowledges: traffic flows, a client that stops acknowledging gets its queue dropped at
// the limit (counted) without stalling the other.
func TestLoopFQCodel(t *testing.T) {
	l := startLoop(t, strings.Replace(twoDomains, `<domain name="b" interface="10.0.2.1/24"/>`,
		`<domain name="b" interface="10.0.2.1/24"><fq-codel/></domain>`, 1))
	rx := attachPeer(t, l, "rx", perfConfig([4]byte{10, 0, 2, 2}, [4]byte{}, false))
	deaf := attachPeer(t, l, "rx-deaf", perfConfig([4]byte{10, 0, 2, 3}, [4]byte{}, false))
	attachPeer(t, l, "tx", perfConfig([4]byte{10, 0, 1, 2}, [4]byte{10, 0, 2, 2}, true))
	toDeaf := perfConfig([4]byte{10, 0, 1, 3}, [4]byte{10, 0, 2, 3}, true)
	toDeaf.SrcPort++
	attachPeer(t, l, "tx", toDeaf)
	waitFor(t, "frames to the client that turns deaf", func() bool { return deaf.ctr.RxFrames.Load() >= 100 })
	deaf.stop.Store(true)
	deaf.w.Wake()
	deaf.done.Wait()
	ifc := deaf.a.Interface()
	waitFor(t, "overlimit drops at the deaf client", func() bool {
		return ifc.Stats().Overlimit.Load() > 0 && l.Stats().Overlimit.Load() > 0 && ifc.Queued(time.Now()).Frames > 0
	})
	for range 10 { // the queue stands within its limit: a quarter of the stream's 64 entries
		if q := ifc.Queued(time.Now()); q.Frames > 16 {
			t.Fatalf("deaf client's egress queue %d frames, over the limit of 16", q.Frames)
		}
		time.Sleep(5 * time.Millisecond)
	}
	base := rx.ctr.RxFrames.Load()
	waitFor(t, "1000 more frames to the other client", func() bool { return rx.ctr.RxFrames.Load() >= base+1000 })
}
