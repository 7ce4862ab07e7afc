package vhostuser

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/nicstack/nicstack/netdev"
)

// A hostile guest's rings: each fault breaks its device with a log line naming the queue and
// the fault; a second session beside it goes on passing frames; nothing panics.
func TestHostileGuestBreaksOnlyItsDevice(t *testing.T) {
	cases := []struct {
		name  string
		queue int
		do    func(fe *frontend)
		want  string
	}{
		{"chain loop", txQueue, func(fe *frontend) {
			a := fe.q[txQueue].bufs
			fe.setDesc(txQueue, 0, a, 100, descNext, 1)
			fe.setDesc(txQueue, 1, a, 100, descNext, 0)
			fe.offer(txQueue, 0)
		}, "tx queue 1: descriptor chain longer than the queue's 64 entries (a loop)"},
		{"address outside memory", txQueue, func(fe *frontend) {
			fe.setDesc(txQueue, 0, guestMem+4096, 100, 0, 0)
			fe.offer(txQueue, 0)
		}, "tx queue 1: descriptor 0: 100 bytes at guest address 0x401000 lie outside guest memory"},
		{"length past the region's end", txQueue, func(fe *frontend) {
			fe.setDesc(txQueue, 0, guestMem-10, 100, 0, 0)
			fe.offer(txQueue, 0)
		}, "tx queue 1: descriptor 0: 100 bytes at guest address 0x3ffff6 lie outside guest memory"},
		{"length wrapping the address space", txQueue, func(fe *frontend) {
			fe.setDesc(txQueue, 0, ^uint64(0)-10, 100, 0, 0)
			fe.offer(txQueue, 0)
		}, "lie outside guest memory"},
		{"next out of range", txQueue, func(fe *frontend) {
			fe.setDesc(txQueue, 0, fe.q[txQueue].bufs, 100, descNext, 999)
			fe.offer(txQueue, 0)
		}, "tx queue 1: descriptor 0 chains to 999 of 64"},
		{"head out of range", txQueue, func(fe *frontend) {
			fe.offer(txQueue, 64)
		}, "tx queue 1: avail entry 0 names descriptor 64 of 64"},
		{"avail idx jumps", txQueue, func(fe *frontend) {
			le.PutUint16(fe.mem[fe.q[txQueue].avail+2:], 65)
			fe.kick(txQueue)
		}, "tx queue 1: avail idx 65 is 65 entries ahead of the device's 0, more than the queue's 64"},
		{"indirect descriptor", txQueue, func(fe *frontend) {
			fe.setDesc(txQueue, 0, fe.q[txQueue].bufs, 16, descIndirect, 0)
			fe.offer(txQueue, 0)
		}, "tx queue 1: descriptor 0 is indirect"},
		{"writable buffer to send", txQueue, func(fe *frontend) {
			fe.setDesc(txQueue, 0, fe.q[txQueue].bufs, 100, descWrite, 0)
			fe.offer(txQueue, 0)
		}, "tx queue 1: descriptor chain at 0 has a device-writable buffer"},
		{"readable receive buffer", rxQueue, func(fe *frontend) {
			fe.setDesc(rxQueue, 0, fe.q[rxQueue].bufs, 2048, 0, 0)
			fe.offer(rxQueue, 0)
		}, "rx queue 0: descriptor chain at 0 has a device-readable buffer"},
		{"receive buffer shorter than the header", rxQueue, func(fe *frontend) {
			fe.setDesc(rxQueue, 0, fe.q[rxQueue].bufs, 4, descWrite, 0)
			fe.offer(rxQueue, 0)
		}, "rx queue 0: receive buffer at 0 has 4 bytes, less than the 12-byte header"},
		{"receive loop", rxQueue, func(fe *frontend) {
			a := fe.q[rxQueue].bufs
			fe.setDesc(rxQueue, 0, a, 12, descWrite|descNext, 1)
			fe.setDesc(rxQueue, 1, a, 1, descWrite|descNext, 0)
			fe.offer(rxQueue, 0)
		}, "rx queue 0: descriptor chain longer than the queue's 64 entries"},
	}
	good := newFrontend(t)
	good.start(allFeatures)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fe := newFrontend(t)
			fe.start(allFeatures)
			reading := make(chan error, 1)
			go func() { // the data path the vm glue runs: Read and Write beside each other
				_, err := fe.dev.Read(make([][]byte, 8), make([]int, 8), make([]netdev.Offload, 8))
				reading <- err
			}()
			c.do(fe)
			if c.queue == rxQueue {
				fe.dev.Write([][]byte{tcpFrame(4000, 1)}, nil)
			}
			fe.waitBroken(c.want)
			if fe.stats.Faults.Load() != 1 {
				t.Errorf("%d faults counted, want 1", fe.stats.Faults.Load())
			}
			if !strings.Contains(fe.log.String(), "needs reset") {
				t.Errorf("log line %q lacks the state", fe.log)
			}
			var ev [8]byte
			if _, err := unix.Read(fe.q[c.queue].err, ev[:]); err != nil {
				t.Errorf("the queue's error eventfd was not signalled: %v", err)
			}
			// Broken: frames to the guest are dropped, none taken from it.
			fe.postRx(1, bufSize)
			before := fe.stats.TxDropped.Load()
			fe.dev.Write([][]byte{tcpFrame(10, 1)}, nil)
			if fe.stats.TxDropped.Load() != before+1 {
				t.Error("a broken device took a frame")
			}
			// The other session is unaffected.
			good.sendFrame([12]byte{}, tcpFrame(100, 2))
			readOne(t, good.dev)
			fe.close()
			if err := <-reading; !errors.Is(err, ErrClosed) {
				t.Errorf("Read of the broken device: %v", err)
			}
		})
	}
	if good.dev.Broken() || good.stats.Faults.Load() != 0 {
		t.Fatal("the well-behaved session was disturbed")
	}
}

// After a fault the driver's reset (every ring stopped with GET_VRING_BASE, then started
// again) gives a working device.
func TestResetAfterFaultWorks(t *testing.T) {
	fe := newFrontend(t)
	fe.start(allFeatures)
	frames := make(chan int, 1)
	go func() {
		for {
			n, err := fe.dev.Read([][]byte{make([]byte, 2048)}, make([]int, 1), make([]netdev.Offload, 1))
			if err != nil {
				return
			}
			frames <- n
		}
	}()
	fe.offer(txQueue, 64)
	fe.waitBroken("names descriptor 64")
	for i := range fe.q {
		base := fe.call(reqGetVringBase, state(uint32(i), 0), 8)
		if got := le.Uint32(base[4:]); got != uint32(fe.q[i].availIdx) && i == rxQueue {
			t.Fatalf("GET_VRING_BASE of queue %d: %d", i, got)
		}
	}
	if fe.dev.Broken() {
		t.Fatal("still broken after every ring stopped")
	}
	fe.q[txQueue].availIdx, fe.q[txQueue].usedSeen = 0, 0
	le.PutUint16(fe.mem[fe.q[txQueue].avail+2:], 0)
	for i := range fe.q {
		fe.startQueue(uint32(i))
	}
	fe.sendFrame([12]byte{}, tcpFrame(10, 1))
	if n := <-frames; n != 1 {
		t.Fatalf("%d frames after the reset", n)
	}
}

// wantRefused sends what send sends and wants Serve to end with an error saying want.
func (fe *frontend) wantRefused(t *testing.T, send func(*frontend) error, want string) {
	t.Helper()
	if err := send(fe); err != nil {
		t.Fatal(err)
	}
	if err := <-fe.done; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Serve: %v, want %q", err, want)
	}
}

// Messages the back end refuses: each breaks the device with a line naming the message and
// the fault and ends the connection; the descriptors that came with it are closed.
func TestHostileMessagesEndTheSession(t *testing.T) {
	small := testMemfd(t, "small", 4096)
	notEventfd := testMemfd(t, "file", 0)
	cases := []struct {
		name string
		send func(fe *frontend) error
		want string
	}{
		{"short payload", func(fe *frontend) error {
			return fe.send(reqSetVringNum, 0, []byte{0, 0, 0, 0})
		}, "SET_VRING_NUM: payload of 4 bytes, want 8"},
		{"huge size", func(fe *frontend) error {
			b := le.AppendUint32(nil, reqSetMemTable)
			b = le.AppendUint32(b, flagVersion)
			b = le.AppendUint32(b, 1<<30)
			_, err := unix.Write(fe.fd, b)
			return err
		}, "SET_MEM_TABLE: payload of 1073741824 bytes, at most 264"},
		{"bad version", func(fe *frontend) error {
			b := le.AppendUint32(nil, reqSetOwner)
			b = le.AppendUint32(b, 2)
			b = le.AppendUint32(b, 0)
			_, err := unix.Write(fe.fd, b)
			return err
		}, "SET_OWNER: protocol version 2, want 1"},
		{"memory table without its descriptor", func(fe *frontend) error {
			return fe.send(reqSetMemTable, 0, memTablePayload(0, guestMem, fe.uaddr(0), 0))
		}, "SET_MEM_TABLE: 0 descriptors, want 1"},
		{"extra descriptor", func(fe *frontend) error {
			return fe.send(reqSetVringNum, 0, state(0, 64), fe.q[0].kick)
		}, "SET_VRING_NUM: 1 descriptors, want 0"},
		{"more descriptors than a message carries", func(fe *frontend) error {
			fds := make([]int, 12)
			for i := range fds {
				fds[i] = fe.q[0].kick
			}
			return fe.send(reqSetVringCall, 0, u64(0), fds...)
		}, "more than 8 descriptors"},
		{"region larger than its file", func(fe *frontend) error {
			return fe.send(reqSetMemTable, 0, memTablePayload(0, 1<<20, fe.uaddr(0), 0), small)
		}, "SET_MEM_TABLE: region 0 ends at byte 1048576 of its descriptor, which has 4096"},
		{"no regions", func(fe *frontend) error {
			return fe.send(reqSetMemTable, 0, le.AppendUint64(nil, 0))
		}, "SET_MEM_TABLE: 0 regions, want 1 to 8"},
		{"queue out of range", func(fe *frontend) error {
			return fe.send(reqSetVringNum, 0, state(40, 64))
		}, "SET_VRING_NUM: queue 40, the device has 2"},
		{"queue size not a power of 2", func(fe *frontend) error {
			return fe.send(reqSetVringNum, 0, state(0, 100))
		}, "rx queue 0: SET_VRING_NUM: size 100 is not a power of 2"},
		{"ring outside memory", func(fe *frontend) error {
			fe.send(reqSetMemTable, 0, memTablePayload(0, guestMem, fe.uaddr(0), 0), fe.memfd)
			fe.send(reqSetVringNum, 0, state(1, 64))
			return fe.send(reqSetVringAddr, 0, vringAddrPayload(1, fe.uaddr(guestMem-512), fe.uaddr(0x8000), fe.uaddr(0x400)))
		}, "tx queue 1: descriptor table (64 entries) outside guest memory"},
		{"kick that is no eventfd", func(fe *frontend) error {
			return fe.send(reqSetVringKick, 0, u64(0), notEventfd)
		}, "SET_VRING_KICK: queue 0: the descriptor is \"/memfd:file (deleted)\", not an eventfd"},
		{"features not offered", func(fe *frontend) error {
			return fe.send(reqSetFeatures, 0, u64(1<<63))
		}, "SET_FEATURES: 0x8000000000000000 were not offered"},
		{"dirty log", func(fe *frontend) error {
			return fe.send(reqSetLogBase, 0, make([]byte, 16), small)
		}, "SET_LOG_BASE: dirty logging (migration) was not offered"},
		{"unknown request", func(fe *frontend) error {
			return fe.send(99, 0, nil)
		}, "request 99 is unknown"},
	}
	good := newFrontend(t)
	good.start(allFeatures)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fe := newFrontend(t)
			fe.wantRefused(t, c.send, c.want)
			quoted := strconv.Quote(c.want) // as the log's text format puts it in a value
			if !fe.dev.Broken() || !strings.Contains(fe.log.String(), quoted[1:len(quoted)-1]) || fe.stats.Faults.Load() != 1 {
				t.Fatalf("broken %v, faults %d, log %q", fe.dev.Broken(), fe.stats.Faults.Load(), fe.log)
			}
			var b [1]byte
			if n, _ := unix.Read(fe.fd, b[:]); n > 0 {
				t.Fatal("the connection is still open")
			}
			good.sendFrame([12]byte{}, tcpFrame(100, 2))
			readOne(t, good.dev)
		})
	}
}

// The front end shrinking guest memory under the mapping makes the device's next access
// fault (SIGBUS): that is a fault of the device, not a crash of the process.
func TestShrunkMemoryFaultsTheDevice(t *testing.T) {
	fe := newFrontend(t)
	fe.start(allFeatures)
	fe.sendFrame([12]byte{}, tcpFrame(10, 1))
	readOne(t, fe.dev)
	if err := unix.Ftruncate(fe.memfd, 0); err != nil {
		t.Fatal(err)
	}
	go fe.dev.Read(make([][]byte, 1), make([]int, 1), make([]netdev.Offload, 1))
	signal(fe.q[txQueue].kick)
	fe.waitBroken("tx queue 1: guest memory faulted")
}
