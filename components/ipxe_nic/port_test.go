package main

import (
	"bytes"
	"encoding/binary"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"

	"testing"
	"time"

	"github.com/nicstack/nicstack/components/intel_nic_hw/intelhw"
	"github.com/nicstack/nicstack/drivers/intel"
	"github.com/nicstack/nicstack/drivers/intel/devsession"
	"github.com/nicstack/nicstack/drivers/intel/regs"
	"github.com/nicstack/nicstack/drivers/ipxe"
	"github.com/nicstack/nicstack/internal/testutil"
	"github.com/nicstack/nicstack/runtime/packetstream"
)

var nicMAC = net.HardwareAddr{0x02, 0x00, 0x00, 0x00, 0x00, 0x42}

// frame is an Ethernet frame of n bytes numbered seq.
func frame(n, seq int) []byte {
	f := make([]byte, n)
	copy(f, []byte{0x02, 0, 0, 0, 0, 0x99})
	copy(f[6:], nicMAC)
	binary.BigEndian.PutUint16(f[12:], 0x88b5) // local experimental ethertype
	binary.BigEndian.PutUint32(f[14:], uint32(seq))
	for i := 18; i < n; i++ {
		f[i] = byte(seq + i)
	}
	return f
}

type link struct {
	up    bool
	speed int
	mac   net.HardwareAddr
}

// rig is the emulated NIC and the driver in one process over a device session's real files,
// the wire's far end and the router's Uplink server played by the test.
type rig struct {
	t       *testing.T
	nic     *intelhw.NIC
	port    *Port
	links   chan link
	farEnd  *packetstream.Client // the wire's far end: a Nic client of the emulated NIC
	wireSrv *packetstream.Server
	router  *packetstream.Server // the router's end of the Uplink session
	upCli   *packetstream.Client
}

func newRig(t *testing.T, model string) *rig {
	return newRigLog(t, model, nil, ipxe.WatchdogInterval)
}

// newRigLog is newRig whose driver logs to log, its watchdog checking every watchdog.
func newRigLog(t *testing.T, model string, log *slog.Logger, watchdog time.Duration) *rig {
	files, err := devsession.NewFiles(ipxe.DMASize)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, f := range files {
			f.Close()
		}
	})
	m, _ := intel.ModelByName(model)
	r := &rig{t: t, links: make(chan link, 16)}
	r.nic = intelhw.New(intel.DeviceConfig{Model: m, MAC: nicMAC, Autoneg: time.Millisecond}, intel.NewCounters(nil), intelhw.NewCounters(nil))
	cfg := packetstream.DefaultConfig()
	if r.farEnd, r.wireSrv, err = packetstream.NewHeapSession(cfg, cfg); err != nil {
		t.Fatal(err)
	}
	if err := r.nic.AttachWire(r.wireSrv); err != nil {
		t.Fatal(err)
	}
	if err := r.nic.OpenDevice(files); err != nil {
		t.Fatal(err)
	}
	r.port = New(ipxe.DefaultConfig(), ipxe.NewCounters(nil), log, func(up bool, speed int, mac net.HardwareAddr) {
		r.links <- link{up, speed, mac}
	})
	r.port.watchdog = watchdog
	if err := r.port.OpenDevice(files); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		r.port.DetachUplink()
		r.port.CloseDevice()
		r.nic.CloseDevice()
		r.nic.DetachWire()
		r.farEnd.Close()
		r.wireSrv.Close()
		if r.upCli != nil {
			r.upCli.Close()
			r.router.Close()
		}
	})
	return r
}

// waitLink waits for the next link report.
func (r *rig) waitLink() link {
	select {
	case l := <-r.links:
		return l
	case <-time.After(5 * time.Second):
		r.t.Fatal("no link change within 5 s")
		return link{}
	}
}

// openUplink does what the component does on link up: a fresh Uplink session.
func (r *rig) openUplink() {
	cfg := packetstream.DefaultConfig()
	var err error
	if r.upCli, r.router, err = packetstream.NewHeapSession(cfg, cfg); err != nil {
		r.t.Fatal(err)
	}
	if err := r.port.AttachUplink(r.upCli); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rig) closeUplink() {
	r.port.DetachUplink()
	r.upCli.Close()
	r.router.Close()
	r.upCli, r.router = nil, nil
}

// send submits frames on src as room allows, releasing acknowledged ones; it returns how many
// went.
func send(src *packetstream.Source, frames [][]byte) int {
	n := 0
	for ; n < len(frames); n++ {
		for {
			p, ok := src.GetAcked()
			if !ok {
				break
			}
			src.Release(p)
		}
		p, err := src.Alloc(len(frames[n]))
		if err != nil {
			break
		}
		copy(src.Payload(p), frames[n])
		if !src.TrySubmit(p) {
			src.Release(p)
			break
		}
	}
	src.Wakeup()
	return n
}

// receive takes what arrived on snk.
func receive(snk *packetstream.Sink, got [][]byte) [][]byte {
	for snk.CanAck() {
		p, ok := snk.TryGet()
		if !ok {
			break
		}
		got = append(got, bytes.Clone(snk.Payload(p)))
		snk.TryAck(p)
	}
	snk.Wakeup()
	return got
}

// exchange sends n frames each way, paced so no ring overflows, and checks they arrive intact
// and in order.
func (r *rig) exchange(n, seq0 int) {
	var toWire, toRouter [][]byte
	for i := range n {
		toWire = append(toWire, frame(60+i*7%1455, seq0+i))
		toRouter = append(toRouter, frame(1514-i*5%1400, seq0+i))
	}
	var atFarEnd, atRouter [][]byte
	sentW, sentR := 0, 0
	deadline := time.Now().Add(10 * time.Second)
	for (len(atFarEnd) < n || len(atRouter) < n) && time.Now().Before(deadline) {
		// at most a hundred frames in flight each way: the device's rings hold 255
		if sentW-len(atFarEnd) < 100 {
			sentW += send(r.router.RX, toWire[sentW:min(sentW+50, n)])
		}
		if sentR-len(atRouter) < 100 {
			sentR += send(r.farEnd.TX, toRouter[sentR:min(sentR+50, n)])
		}
		atFarEnd = receive(r.farEnd.RX, atFarEnd)
		atRouter = receive(r.router.TX, atRouter)
		time.Sleep(200 * time.Microsecond)
	}
	if len(atFarEnd) < n || len(atRouter) < n {
		dc := r.nic.Device().Counters()
		r.t.Logf("sent %d and %d; device: interrupts %d, rx %d, no descriptor %d, rx dropped %d, tx %d, tx dropped %d",
			sentW, sentR, dc.Interrupts.Load(), dc.RXFrames.Load(), dc.RXNoDescriptor.Load(), dc.RXDropped.Load(),
			dc.TXFrames.Load(), dc.TXDropped.Load())
	}
	same(r.t, "router -> wire", atFarEnd, toWire)
	same(r.t, "wire -> router", atRouter, toRouter)
}

func same(t *testing.T, what string, got, want [][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d frames arrived, want %d", what, len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("%s: frame %d differs (%d bytes, want %d)", what, i, len(got[i]), len(want[i]))
		}
	}
}

// The driver and the emulated NIC over a real device session (memfds, eventfds, posted
// writes) in one process: the link comes up with the MAC from RAL/RAH, frames pass both ways
// through the ring's wrap, the cable is pulled while traffic runs (link down: the test closes
// the Uplink session as the component does) and plugged back in (a new session; frames pass).
func TestFramesBothWaysAndLinkDown(t *testing.T) {
	r := newRig(t, "82574L")
	l := r.waitLink()
	if !l.up || l.speed != 1000 || !bytes.Equal(l.mac, nicMAC) {
		t.Fatalf("link %+v, want up at 1000 with MAC %v", l, nicMAC)
	}
	r.openUplink()
	r.exchange(600, 0)

	// pull the cable with frames in flight
	send(r.router.RX, [][]byte{frame(100, 1), frame(100, 2), frame(100, 3)})
	send(r.farEnd.TX, [][]byte{frame(100, 4), frame(100, 5)})
	r.nic.Configure(intel.DeviceConfig{MAC: nicMAC, Autoneg: time.Millisecond, NoCarrier: true})
	if l := r.waitLink(); l.up {
		t.Fatalf("link %+v after the cable was pulled", l)
	}
	r.closeUplink()
	r.nic.Configure(intel.DeviceConfig{MAC: nicMAC, Autoneg: time.Millisecond})
	if l := r.waitLink(); !l.up {
		t.Fatalf("link %+v after the cable was plugged back in", l)
	}
	receive(r.farEnd.RX, nil) // whatever made it before the link went down
	r.openUplink()
	r.exchange(300, 1000)
}

// The far end's session going away is a pulled cable too.
func TestFarEndGoneIsLinkDown(t *testing.T) {
	r := newRig(t, "i217-LM")
	if l := r.waitLink(); !l.up {
		t.Fatalf("link %+v", l)
	}
	r.nic.DetachWire()
	if l := r.waitLink(); l.up {
		t.Fatalf("link %+v with no far end", l)
	}
	if err := r.nic.AttachWire(r.wireSrv); err != nil {
		t.Fatal(err)
	}
	if l := r.waitLink(); !l.up || l.speed != 1000 {
		t.Fatalf("link %+v, want up at 1000 (phy_reset=auto keeps the i217-LM's speed)", l)
	}
}

// waitCount waits for a counter to reach n.
func (r *rig) waitCount(what string, c *atomic.Uint64, n uint64) {
	r.t.Helper()
	for deadline := time.Now().Add(5 * time.Second); c.Load() < n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			r.t.Fatalf("%s is %d, want %d", what, c.Load(), n)
		}
	}
}

// The device vanishing (its registers read all ones, across processes through the posted
// register page) is a link down the watchdog finds, with a log line; the device coming back
// is reset and its link comes up again. A DMA fault stops the transmit queue: the watchdog
// resets the device and the Uplink session stays open throughout.
func TestDeviceFaultsAcrossProcesses(t *testing.T) {
	var logs testutil.SyncBuffer
	r := newRigLog(t, "82574L", slog.New(slog.NewTextHandler(&logs, nil)), 20*time.Millisecond)
	r.waitLink()
	r.openUplink()
	r.exchange(100, 0)

	r.nic.Device().Inject(intel.FaultGone)
	if l := r.waitLink(); l.up {
		t.Fatalf("link %+v with the device gone", l)
	}
	r.closeUplink()
	if !strings.Contains(logs.String(), "registers read all ones") {
		t.Errorf("log %q", logs.String())
	}
	r.nic.Device().Inject(intel.FaultNone)
	if l := r.waitLink(); !l.up {
		t.Fatalf("link %+v after the device came back", l)
	}
	r.openUplink()
	r.exchange(100, 1000)

	resets := r.port.cnt.DeviceResets.Load()
	r.nic.Device().Inject(intel.FaultDMA)
	send(r.router.RX, [][]byte{frame(100, 1), frame(100, 2), frame(100, 3)})
	r.waitCount("device_resets", r.port.cnt.DeviceResets, resets+1) // the frames are gone with it
	r.nic.Device().Inject(intel.FaultNone)
	r.exchange(100, 2000)
	select {
	case l := <-r.links:
		t.Errorf("link changed to %+v over a DMA fault", l)
	default:
	}
	if r.port.cnt.TXHangs.Load() == 0 || !strings.Contains(logs.String(), "transmit queue stood still") {
		t.Errorf("log %q", logs.String())
	}
}

// A config change reaches the device at once: the new ITR value is written through the
// posted-write queue.
func TestConfigureLive(t *testing.T) {
	r := newRig(t, "82574L")
	r.waitLink()
	cfg := ipxe.DefaultConfig()
	cfg.RxIrqThrottle = 5580
	if err := r.port.Configure(cfg); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); r.nic.Device().Read32(regs.ITR) != 5580; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("ITR is %d, want 5580", r.nic.Device().Read32(regs.ITR))
		}
	}
	cfg.RxIrqThrottle = 1 << 16
	if err := r.port.Configure(cfg); err == nil {
		t.Error("an ITR beyond 16 bits was accepted")
	}
}
