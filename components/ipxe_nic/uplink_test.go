package main

import (
	"bytes"
	"testing"

	"github.com/nicstack/nicstack/drivers/ipxe"
	"github.com/nicstack/nicstack/netdev"
	"github.com/nicstack/nicstack/runtime/packetstream"
)

// SessionUplink carries frames both ways over a real session: delivered frames reach the
// router in order, the router's frames are fetched and acknowledged, one with offload
// metadata the driver cannot serve is acknowledged and dropped, and a full ack queue holds
// the acknowledgement until there is room instead of losing it.
func TestSessionUplink(t *testing.T) {
	cfg := packetstream.Config{QueueSize: 8, BulkSize: 64 * packetstream.BlockSize}
	client, router, err := packetstream.NewHeapSession(cfg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	defer router.Close()
	cnt := ipxe.NewCounters(nil)
	up := NewSessionUplink(client, cnt)

	frame := func(n int, seq byte) []byte { return bytes.Repeat([]byte{seq}, n) }
	for i := range 5 {
		if !up.Deliver(frame(60+i, byte(i))) {
			t.Fatalf("frame %d refused", i)
		}
	}
	up.DeliverDone()
	for i := range 5 {
		p, ok := router.TX.TryGet()
		if !ok || !bytes.Equal(router.TX.Payload(p), frame(60+i, byte(i))) {
			t.Fatalf("router got frame %d wrong (%v)", i, ok)
		}
		router.TX.TryAck(p)
	}
	router.TX.Wakeup()

	submit := func(f []byte, o netdev.Offload) {
		p, err := router.RX.Alloc(len(f))
		if err != nil {
			t.Fatal(err)
		}
		copy(router.RX.Payload(p), f)
		if !router.RX.TrySubmit(p.WithOffload(o)) {
			t.Fatal("router's submit queue full")
		}
	}
	submit(frame(100, 1), netdev.Offload{})
	submit(frame(100, 2), netdev.Offload{GSOType: netdev.GSOUDP, GSOSize: 10}) // not served
	submit(frame(100, 3), netdev.Offload{})
	router.RX.Wakeup()
	buf := make([]byte, ipxe.BufSize)
	var got [][]byte
	for {
		n, ok := up.Fetch(buf)
		if !ok {
			break
		}
		if n <= len(buf) {
			got = append(got, bytes.Clone(buf[:n]))
		}
	}
	up.FetchDone()
	if len(got) != 2 || got[0][0] != 1 || got[1][0] != 3 {
		t.Fatalf("fetched %d frames, want frames 1 and 3", len(got))
	}
	if cnt.TXOffloadDropped.Load() != 1 || cnt.RXRefused.Load() != 0 {
		t.Errorf("offload drops %d, refused %d; want 1, 0", cnt.TXOffloadDropped.Load(), cnt.RXRefused.Load())
	}
	acked := 0
	for {
		p, ok := router.RX.GetAcked()
		if !ok {
			break
		}
		router.RX.Release(p)
		acked++
	}
	if acked != 3 {
		t.Errorf("router got %d acknowledgements, want 3", acked)
	}

	// The router does not take acknowledgements back: once its ack queue is full, the next
	// fetched frame's acknowledgement is held and given when room appears.
	for i := 0; !up.held; i++ {
		if i > 2*cfg.QueueSize {
			t.Fatal("no acknowledgement held with the ack queue full")
		}
		submit(frame(64, byte(10+i)), netdev.Offload{})
		router.RX.Wakeup()
		if _, ok := up.Fetch(buf); !ok {
			t.Fatalf("frame %d not fetched", i)
		}
		up.FetchDone()
	}
	router.RX.ReleaseAcked()
	router.RX.Wakeup()
	submit(frame(64, 99), netdev.Offload{})
	router.RX.Wakeup()
	if n, ok := up.Fetch(buf); !ok || buf[0] != 99 || n != 64 || up.held {
		t.Fatalf("after room: fetched %v (held %v)", ok, up.held)
	}
}

// SessionUplink is on the hot path: a frame each way, with its signals and acknowledgements,
// allocates nothing.
func TestSessionUplinkAllocatesNothing(t *testing.T) {
	cfg := packetstream.DefaultConfig()
	client, router, err := packetstream.NewHeapSession(cfg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	defer router.Close()
	up := NewSessionUplink(client, ipxe.NewCounters(nil))
	frame := bytes.Repeat([]byte{7}, 1514)
	buf := make([]byte, ipxe.BufSize)
	round := func() {
		if !up.Deliver(frame) {
			t.Fatal("frame refused")
		}
		up.DeliverDone()
		p, ok := router.TX.TryGet()
		if !ok {
			t.Fatal("the router got no frame")
		}
		router.TX.TryAck(p)
		router.TX.Wakeup()

		q, err := router.RX.Alloc(len(frame))
		if err != nil {
			t.Fatal(err)
		}
		copy(router.RX.Payload(q), frame)
		router.RX.TrySubmit(q)
		router.RX.Wakeup()
		if n, ok := up.Fetch(buf); !ok || n != len(frame) {
			t.Fatalf("fetched %d bytes (%v), want %d", n, ok, len(frame))
		}
		up.FetchDone()
		router.RX.ReleaseAcked()
	}
	if a := testing.AllocsPerRun(2000, round); a != 0 {
		t.Errorf("%v allocations a round", a)
	}
}
