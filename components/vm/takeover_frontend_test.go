package main

import (
	"encoding/binary"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nicstack/nicstack/components"
	"github.com/nicstack/nicstack/internal/scenariotest"
	"github.com/nicstack/nicstack/internal/testutil"
	"github.com/nicstack/nicstack/runtime/supervisor"
)

// keptScenario is a vhost-user vm behind nic_router, its socket at SOCK.
const keptScenario = `<config>
	<parent-provides> <service name="LOG"/> </parent-provides>
	<default-route> <any-service> <parent/> <any-child/> </any-service> </default-route>
	<default caps="100" ram="64M" restart="yes"/>
	<start name="nic_router" ram="32M">
		<provides> <service name="Nic"/> </provides>
		<config>
			<policy label_prefix="vm" domain="default"/>
			<domain name="default" interface="10.0.1.1/24"/>
		</config>
	</start>
	<start name="vm" ram="128M">
		<route> <service name="Nic"> <child name="nic_router"/> </service> <any-service> <parent/> </any-service> </route>
		<config guest="vhost-user" socket="SOCK"/>
	</start>
</config>
`

// le is the byte order of vhost-user and virtio 1.x.
var le = binary.LittleEndian

// goFrontEnd is a minimal vhost-user front end and virtio driver: one memfd of guest memory,
// both rings of 64 entries in it, REPLY_ACK for every message.
type goFrontEnd struct {
	t     *testing.T
	conn  *net.UnixConn
	mem   []byte
	kick  [2]int
	call  [2]int
	avail uint16 // the transmit ring's avail idx (packed: buffers made available)
	// packed: packed rings and VHOST_USER_PROTOCOL_F_INFLIGHT_SHMFD, the region's descriptor
	// kept as QEMU keeps it
	packed bool
}

const (
	feMem   = 1 << 20
	feUaddr = 0x7f0000000000
	feNum   = 64
)

func (fe *goFrontEnd) send(req uint32, p []byte, fds ...int) {
	fe.t.Helper()
	b := le.AppendUint32(nil, req)
	b = le.AppendUint32(b, 1|8) // version 1, NEED_REPLY
	b = le.AppendUint32(b, uint32(len(p)))
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	if _, _, err := fe.conn.WriteMsgUnix(append(b, p...), oob, nil); err != nil {
		fe.t.Fatal(err)
	}
}

// reply reads the answer to req: its payload of n bytes.
func (fe *goFrontEnd) reply(req uint32, n int) []byte {
	fe.t.Helper()
	fe.conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	b := make([]byte, 12+n)
	if _, err := readFull(fe.conn, b); err != nil {
		fe.t.Fatalf("request %d: no answer: %v", req, err)
	}
	if le.Uint32(b) != req || le.Uint32(b[8:]) != uint32(n) {
		fe.t.Fatalf("request %d: answer % x", req, b[:12])
	}
	return b[12:]
}

func (fe *goFrontEnd) must(req uint32, p []byte, fds ...int) {
	fe.t.Helper()
	fe.send(req, p, fds...)
	if v := le.Uint64(fe.reply(req, 8)); v != 0 {
		fe.t.Fatalf("request %d refused: %d", req, v)
	}
}

func readFull(c *net.UnixConn, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		k, err := c.Read(b[n:])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

func state(i, n uint32) []byte { return le.AppendUint32(le.AppendUint32(nil, i), n) }

// ring q's areas in guest memory: descriptors, avail, used.
func ringAt(q int) (desc, avail, used uint64) {
	base := uint64(q) * 0x10000
	return base, base + 16*feNum, base + 0x8000
}

// connect negotiates VERSION_1 and both rings as QEMU does; packed: packed rings and the
// inflight region, which the back end makes (GET_INFLIGHT_FD) before the rings start.
func connect(t *testing.T, sock string, packed bool) *goFrontEnd {
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	fe := &goFrontEnd{t: t, conn: c.(*net.UnixConn), packed: packed}
	t.Cleanup(func() { c.Close() })
	memfd, err := unix.MemfdCreate("guest", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(memfd)
	unix.Ftruncate(memfd, feMem)
	if fe.mem, err = unix.Mmap(memfd, 0, feMem, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(fe.mem) })
	fe.send(15, nil) // GET_PROTOCOL_FEATURES
	fe.reply(15, 8)
	protocols, features, base := uint64(1<<3), uint64(1<<32|1<<30), uint32(0) // REPLY_ACK; VERSION_1, PROTOCOL_FEATURES
	if packed {
		protocols |= 1 << 12 // INFLIGHT_SHMFD
		features |= 1 << 34  // RING_PACKED
		base = 1 << 15       // slot 0, wrap counter 1
	}
	fe.send(16, le.AppendUint64(nil, protocols)) // SET_PROTOCOL_FEATURES
	fe.reply(16, 8)
	fe.must(2, le.AppendUint64(nil, features)) // SET_FEATURES
	table := le.AppendUint64(nil, 1)
	for _, v := range []uint64{0, feMem, feUaddr, 0} {
		table = le.AppendUint64(table, v)
	}
	fe.must(5, table, memfd) // SET_MEM_TABLE
	if packed {
		fe.getInflight()
	}
	for q := range 2 {
		desc, avail, used := ringAt(q)
		addr := le.AppendUint32(le.AppendUint32(nil, uint32(q)), 0)
		for _, v := range []uint64{desc, used, avail, 0} {
			addr = le.AppendUint64(addr, feUaddr+v)
		}
		for _, p := range []*int{&fe.kick[q], &fe.call[q]} {
			if *p, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
				t.Fatal(err)
			}
			fd := *p
			t.Cleanup(func() { unix.Close(fd) })
		}
		fe.must(8, state(uint32(q), feNum))                      // SET_VRING_NUM
		fe.must(10, state(uint32(q), base))                      // SET_VRING_BASE
		fe.must(9, addr)                                         // SET_VRING_ADDR
		fe.must(13, le.AppendUint64(nil, uint64(q)), fe.call[q]) // SET_VRING_CALL
		fe.must(12, le.AppendUint64(nil, uint64(q)), fe.kick[q]) // SET_VRING_KICK
		fe.must(18, state(uint32(q), 1))                         // SET_VRING_ENABLE
	}
	return fe
}

// getInflight asks for the back end's inflight region (GET_INFLIGHT_FD: 2 queues of feNum)
// and keeps its descriptor, as QEMU keeps it for a reconnect.
func (fe *goFrontEnd) getInflight() {
	fe.t.Helper()
	p := le.AppendUint64(le.AppendUint64(nil, 0), 0)
	fe.send(31, le.AppendUint32(le.AppendUint16(le.AppendUint16(p, 2), feNum), 0))
	fe.conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	b, oob := make([]byte, 12+24), make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := fe.conn.ReadMsgUnix(b, oob)
	if err != nil || n != len(b) || le.Uint32(b) != 31 || le.Uint64(b[12:]) == 0 {
		fe.t.Fatalf("GET_INFLIGHT_FD: % x, %v", b[:n], err)
	}
	cms, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(cms) != 1 {
		fe.t.Fatalf("GET_INFLIGHT_FD: no descriptor (%v)", err)
	}
	fds, err := unix.ParseUnixRights(&cms[0])
	if err != nil || len(fds) != 1 {
		fe.t.Fatalf("GET_INFLIGHT_FD: descriptors %v (%v)", fds, err)
	}
	fe.t.Cleanup(func() { unix.Close(fds[0]) })
}

// sendFrame posts a 60-byte frame behind a zero header on the transmit ring and kicks.
func (fe *goFrontEnd) sendFrame() {
	desc, avail, _ := ringAt(1)
	slot := fe.avail % feNum
	buf := 0x80000 + uint64(slot)*2048
	frame := fe.mem[buf : buf+12+60]
	clear(frame)
	copy(frame[12:], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 9, 0x88, 0xb5})
	d := fe.mem[desc+16*uint64(slot):]
	le.PutUint64(d, buf)
	le.PutUint32(d[8:], uint32(len(frame)))
	fe.avail++
	if fe.packed { // id: the slot; flags AVAIL as the wrap counter (1 on the first round)
		flags := uint16(1 << 7)
		if (fe.avail-1)/feNum%2 == 1 {
			flags = 1 << 15
		}
		le.PutUint32(d[12:], uint32(slot)|uint32(flags)<<16)
	} else {
		le.PutUint32(d[12:], 0)
		le.PutUint16(fe.mem[avail+4+2*uint64(slot):], slot)
		le.PutUint16(fe.mem[avail+2:], fe.avail)
	}
	unix.Write(fe.kick[1], le.AppendUint64(nil, 1))
}

// usedIdx is the transmit ring's used idx; packed, the buffers marked used (one slot each,
// in the first round).
func (fe *goFrontEnd) usedIdx() uint16 {
	desc, _, used := ringAt(1)
	if !fe.packed {
		return le.Uint16(fe.mem[used+2:])
	}
	n := uint16(0)
	for ; n < feNum && le.Uint16(fe.mem[desc+16*uint64(n)+14:])&(1<<7|1<<15) == 1<<7|1<<15; n++ {
	}
	return n
}

// The vm killed with -9 while a front end is connected: the supervisor holds the connection,
// the restarted vm resumes it, and the front end notices nothing: its connection never ends,
// the frame it sent while no back end ran is taken from the ring where the dead process left
// it, and its next message is answered on the connection. How long after the kill that frame
// was taken is logged. No QEMU, no root.
func TestVMKilledKeepsTheFrontEndsConnection(t *testing.T) { killedKeepsConnection(t, false) }

// The same with packed rings, whose position only the inflight region holds: the supervisor
// keeps the region's descriptor with the others, and the restarted vm resumes the rings from it.
func TestVMKilledKeepsAPackedFrontEndsConnection(t *testing.T) { killedKeepsConnection(t, true) }

func killedKeepsConnection(t *testing.T, packed bool) {
	for _, c := range []string{"vm", "nic_router"} {
		testutil.Binary(t, "github.com/nicstack/nicstack/components/"+c)
	}
	sock := filepath.Join(testutil.ReachableTempDir(t), "vm.sock")
	r := scenariotest.Start(t, "kept.xml", strings.ReplaceAll(keptScenario, "SOCK", sock),
		supervisor.Options{BinDirs: []string{testutil.BinDir(t)}, Components: components.Table})
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no socket")
		}
	}
	fe := connect(t, sock, packed)
	waitFrames := func(want uint64) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if c := r.Component("vm"); c.State == "running" && c.Counters["vhost_rx_frames"] == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("vm counters %v, want vhost_rx_frames %d; log:\n%s", r.Component("vm").Counters, want, r.Logs.String())
			}
		}
	}
	fe.sendFrame()
	waitFrames(1)
	old := r.Kill("vm")
	killed := time.Now()
	fe.sendFrame() // while no back end runs
	for deadline := killed.Add(30 * time.Second); fe.usedIdx() != 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("used idx %d, want 2; log:\n%s", fe.usedIdx(), r.Logs.String())
		}
	}
	t.Logf("the frame sent at the kill was taken %v after it", time.Since(killed).Round(time.Millisecond))
	r.WaitRestarted("vm", old)
	waitLog(t, r, `msg="front end's connection resumed"`, 1)
	waitFrames(1)   // the new process counts from zero
	fe.send(1, nil) // GET_FEATURES, on the same connection
	if f := le.Uint64(fe.reply(1, 8)); f&(1<<32) == 0 {
		t.Fatalf("features %#x", f)
	}
	fe.sendFrame()
	waitFrames(2)
	if logs := r.Logs.String(); strings.Contains(logs, "cannot be resumed") || strings.Contains(logs, "front end disconnected") || strings.Contains(logs, "panic") {
		t.Errorf("the log:\n%s", logs)
	}
}
