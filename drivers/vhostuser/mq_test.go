package vhostuser

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/nicstack/nicstack/netdev"
)

// udpFrame is Ethernet + IPv4 + UDP from src:sport to dst:dport with a few payload bytes.
func udpFrame(src, dst byte, sport, dport uint16) []byte {
	f := make([]byte, 14+20+8+18)
	f[12], f[13] = 0x08, 0x00
	f[14], f[14+9] = 0x45, 17
	copy(f[26:], []byte{10, 0, 0, src})
	copy(f[30:], []byte{10, 0, 0, dst})
	binary.BigEndian.PutUint16(f[34:], sport)
	binary.BigEndian.PutUint16(f[36:], dport)
	return f
}

// writeFlows writes one frame of each of n flows (source ports 1000 and up) and returns on
// which receive ring each source port arrived; it posts again the buffers they took.
func writeFlows(t *testing.T, fe *frontend, n int) map[uint16]int {
	t.Helper()
	frames := make([][]byte, n)
	for i := range frames {
		frames[i] = udpFrame(1, 2, uint16(1000+i), 53)
	}
	if k, err := fe.dev.Write(frames, nil); k != n || err != nil {
		t.Fatalf("Write: %d, %v", k, err)
	}
	at := map[uint16]int{}
	for ring := 0; ring < len(fe.q)-1; ring += 2 {
		used := fe.reap(ring)
		for _, e := range used {
			_, f := fe.receivedOn(ring, e)
			at[binary.BigEndian.Uint16(f[34:])] = ring
		}
		fe.postRxOn(ring, len(used), bufSize)
	}
	if len(at) != n {
		t.Fatalf("%d of %d frames arrived (log: %s)", len(at), n, fe.log)
	}
	return at
}

// rings returns the receive rings frames arrived on, in order.
func rings(at map[uint16]int) []int {
	var seen [2 * MaxQueuePairs]bool
	for _, r := range at {
		seen[r] = true
	}
	var out []int
	for r, ok := range seen {
		if ok {
			out = append(out, r)
		}
	}
	return out
}

// A front end that keeps the control queue (DPDK's virtio-user, QEMU) and enables 2 or 4
// pairs: GET_QUEUE_NUM answers the pairs, each pair's transmit queue is read by its own
// reader, and frames written to the guest spread over every receive queue, each flow on one.
func TestMultiQueueEveryPairCarriesFrames(t *testing.T) {
	for _, pairs := range []int{2, 4} {
		t.Run(fmt.Sprint(pairs, " pairs"), func(t *testing.T) {
			fe := newFrontendPairs(t, pairs)
			fe.start(allFeatures &^ featCtrlVQ)
			if fe.features&featMQ == 0 {
				t.Fatal("MQ not offered")
			}
			for p := range pairs {
				sent := udpFrame(byte(p), 9, 7, 7)
				fe.sendFrameOn(2*p+txQueue, [12]byte{}, sent)
				bufs, sizes, offs := [][]byte{make([]byte, 2048)}, make([]int, 1), make([]netdev.Offload, 1)
				if n, err := fe.dev.Pair(p).Read(bufs, sizes, offs); n != 1 || err != nil || !bytes.Equal(bufs[0][:sizes[0]], sent) {
					t.Fatalf("pair %d: Read %d, %v", p, n, err)
				}
				fe.postRxOn(2*p+rxQueue, 48, bufSize)
			}
			at := writeFlows(t, fe, 64)
			if got := rings(at); len(got) != pairs {
				t.Fatalf("frames arrived on rings %v, want every pair's", got)
			}
			again := writeFlows(t, fe, 64)
			for port, r := range at {
				if again[port] != r {
					t.Fatalf("flow from port %d on ring %d, then %d", port, r, again[port])
				}
			}
			if fe.stats.Faults.Load() != 0 {
				t.Fatalf("faults: %s", fe.log)
			}
			// Each pair's counters: a frame from the guest on each, and its share of the
			// 128 frames to it, adding up to the totals.
			var toGuest uint64
			for p := range pairs {
				rx, tx := fe.counter(fmt.Sprintf("vhost_rx_frames_pair%d", p)), fe.counter(fmt.Sprintf("vhost_tx_frames_pair%d", p))
				if rx != 1 || tx == 0 {
					t.Errorf("pair %d: vhost_rx_frames_pair %d, vhost_tx_frames_pair %d; want 1 and some", p, rx, tx)
				}
				toGuest += tx
			}
			if toGuest != fe.stats.TxFrames.Load() || toGuest != 128 {
				t.Errorf("pairs' frames to the guest add up to %d, vhost_tx_frames %d; want 128", toGuest, fe.stats.TxFrames.Load())
			}
		})
	}
}

// counter is the device's counter of that name, 0 if it has none.
func (fe *frontend) counter(name string) uint64 {
	if c, ok := fe.counters.Load(name); ok {
		return c.(*atomic.Uint64).Load()
	}
	return 0
}

// Both directions of a flow hash alike; frames that are not IP hash to 0.
func TestFlowHashIsSymmetric(t *testing.T) {
	for port := uint16(1); port < 200; port++ {
		if a, b := flowHash(udpFrame(1, 2, port, 80)), flowHash(udpFrame(2, 1, 80, port)); a != b {
			t.Fatalf("port %d: %#x one way, %#x the other", port, a, b)
		}
	}
	arp := make([]byte, 60)
	arp[12], arp[13] = 0x08, 0x06
	if flowHash(arp) != 0 {
		t.Fatal("ARP hashed")
	}
}

// ctrl posts a command on the control queue as a driver does (the command readable, then a
// writable ack byte), waits for the device's answer and returns the ack.
func (fe *frontend) ctrl(cmd ...byte) byte {
	fe.t.Helper()
	r := len(fe.q) - 1
	fq := &fe.q[r]
	d0 := (2 * fq.availIdx) % fq.num
	a0, a1 := fq.bufs+uint64(d0)*bufSize, fq.bufs+uint64(d0+1)*bufSize
	copy(fe.mem[a0:], cmd)
	fe.mem[a1] = 0xff
	fe.setDesc(r, d0, a0, uint32(len(cmd)), descNext, d0+1)
	fe.setDesc(r, d0+1, a1, 1, descWrite, 0)
	fe.offer(r, d0)
	fe.waitCall(r)
	if u := fe.reap(r); len(u) != 1 || u[0].id != uint32(d0) || u[0].n != 1 {
		fe.t.Fatalf("control queue used entries %v", u)
	}
	return fe.mem[a1]
}

// A front end that hands the device the control queue (it acks CTRL_VQ) starts with one
// pair; VQ_PAIRS_SET spreads frames over the pairs it sets; counts of none or more than the
// device has, and unknown classes, are answered VIRTIO_NET_ERR and change nothing.
func TestControlQueueSetsPairs(t *testing.T) {
	fe := newFrontendPairs(t, 4)
	fe.start(allFeatures)
	for p := range 4 {
		fe.postRxOn(2*p+rxQueue, 60, bufSize)
	}
	if got := rings(writeFlows(t, fe, 16)); len(got) != 1 || got[0] != 0 {
		t.Fatalf("before VQ_PAIRS_SET frames arrived on rings %v, want 0 alone", got)
	}
	if a := fe.ctrl(ctrlMQ, ctrlMQVQPairsSet, 4, 0); a != ctrlOK {
		t.Fatalf("VQ_PAIRS_SET 4: ack %d", a)
	}
	if got := rings(writeFlows(t, fe, 16)); len(got) != 4 {
		t.Fatalf("with 4 pairs frames arrived on rings %v", got)
	}
	for _, c := range []struct {
		name string
		cmd  []byte
		want byte
	}{
		{"no pairs", []byte{ctrlMQ, ctrlMQVQPairsSet, 0, 0}, ctrlErr},
		{"more pairs than the device has", []byte{ctrlMQ, ctrlMQVQPairsSet, 5, 0}, ctrlErr},
		{"pairs without the count", []byte{ctrlMQ, ctrlMQVQPairsSet}, ctrlErr},
		{"unknown class", []byte{9, 0}, ctrlErr},
		{"RSS config", []byte{ctrlMQ, 1, 0, 0}, ctrlErr},
		{"promiscuous", []byte{ctrlRx, 0, 1}, ctrlOK},
		{"announce ack", []byte{ctrlAnnounce, 0}, ctrlOK},
		{"pairs 2", []byte{ctrlMQ, ctrlMQVQPairsSet, 2, 0}, ctrlOK},
	} {
		if a := fe.ctrl(c.cmd...); a != c.want {
			t.Fatalf("%s: ack %d, want %d", c.name, a, c.want)
		}
	}
	if !bytes.Contains([]byte(fe.log.String()), []byte("asked=5 pairs=4")) {
		t.Fatalf("no line for 5 pairs asked: %s", fe.log)
	}
	if got := rings(writeFlows(t, fe, 16)); len(got) != 2 || got[0] != 0 || got[1] != 2 {
		t.Fatalf("with 2 pairs frames arrived on rings %v, want 0 and 2", got)
	}
	if fe.stats.Faults.Load() != 0 {
		t.Fatalf("faults: %s", fe.log)
	}
}

// A front end setting up more pairs than the device has (QEMU queues=4 against queues=2):
// one log line, the rings past the device's are ignored, and it runs with the device's pairs.
func TestMorePairsThanTheDeviceHas(t *testing.T) {
	fe := newFrontendPairs(t, 2)
	fe.start(allFeatures &^ featCtrlVQ)
	for ring := uint32(5); ring < 8; ring++ {
		fe.must(reqSetVringNum, state(ring, ringNum))
		fe.must(reqSetVringCall, u64(uint64(ring)), fe.q[0].err)
		fe.must(reqSetVringEnable, state(ring, 1))
	}
	if b := fe.call(reqGetVringBase, state(7, 0), 8); le.Uint32(b) != 7 {
		t.Fatalf("GET_VRING_BASE of an ignored ring: % x", b)
	}
	if n := bytes.Count([]byte(fe.log.String()), []byte("more rings than the device has")); n != 1 {
		t.Fatalf("%d log lines about the extra rings: %s", n, fe.log)
	}
	fe.postRxOn(0, 40, bufSize)
	fe.postRxOn(2, 40, bufSize)
	if got := rings(writeFlows(t, fe, 32)); len(got) != 2 {
		t.Fatalf("frames arrived on rings %v", got)
	}
	if fe.dev.Broken() {
		t.Fatalf("broken: %s", fe.log)
	}
}

// A hostile driver's control queue: each malformed command breaks the device with a line
// naming the control queue and the fault; nothing panics.
func TestHostileControlQueue(t *testing.T) {
	const r = 4 // the control queue of 2 pairs
	cases := []struct {
		name string
		do   func(fe *frontend)
		want string
	}{
		{"short command", func(fe *frontend) {
			a := fe.q[r].bufs
			fe.setDesc(r, 0, a, 1, descNext, 1)
			fe.setDesc(r, 1, a+bufSize, 1, descWrite, 0)
			fe.offer(r, 0)
		}, "control queue 4: control command at 0 has 1 bytes, less than class and command"},
		{"no ack byte", func(fe *frontend) {
			fe.mem[fe.q[r].bufs] = ctrlMQ
			fe.setDesc(r, 0, fe.q[r].bufs, 4, 0, 0)
			fe.offer(r, 0)
		}, "control queue 4: control command at 0 has no writable ack byte"},
		{"command after the ack", func(fe *frontend) {
			a := fe.q[r].bufs
			fe.setDesc(r, 0, a, 1, descWrite|descNext, 1)
			fe.setDesc(r, 1, a+bufSize, 4, 0, 0)
			fe.offer(r, 0)
		}, "control queue 4: descriptor 1 is readable after a writable one"},
		{"chain loop", func(fe *frontend) {
			a := fe.q[r].bufs
			fe.setDesc(r, 0, a, 4, descNext, 1)
			fe.setDesc(r, 1, a, 4, descNext, 0)
			fe.offer(r, 0)
		}, "control queue 4: descriptor chain longer than the queue's 64 entries (a loop)"},
		{"head out of range", func(fe *frontend) {
			fe.offer(r, 64)
		}, "control queue 4: avail entry 0 names descriptor 64 of 64"},
		{"command outside memory", func(fe *frontend) {
			fe.setDesc(r, 0, guestMem-2, 4, 0, 0)
			fe.offer(r, 0)
		}, "control queue 4: descriptor 0: 4 bytes at guest address 0x3ffffe lie outside guest memory"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fe := newFrontendPairs(t, 2)
			fe.start(allFeatures)
			c.do(fe)
			fe.waitBroken(c.want)
		})
	}
}
