package intelhw

import (
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nicstack/nicstack/drivers/intel"
	"github.com/nicstack/nicstack/drivers/intel/devsession"
	"github.com/nicstack/nicstack/drivers/intel/regs"
	"github.com/nicstack/nicstack/runtime/packetstream"
)

func newFiles(t *testing.T) []*os.File {
	files, err := devsession.NewFiles(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, f := range files {
			f.Close()
		}
	})
	return files
}

// One driver and one far end at a time; with no driver the device is off and the far end's
// frames fall off the wire (acknowledged and counted, never stuck).
func TestOneDriverOneFarEnd(t *testing.T) {
	cnt := intel.NewCounters(nil)
	nic := New(intel.DeviceConfig{MAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}}, cnt, NewCounters(nil))
	cfg := packetstream.DefaultConfig()
	far, srv, err := packetstream.NewHeapSession(cfg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer far.Close()
	defer srv.Close()
	if err := nic.AttachWire(srv); err != nil {
		t.Fatal(err)
	}
	defer nic.DetachWire()
	if err := nic.AttachWire(srv); err == nil {
		t.Error("a second far end was plugged in")
	}

	// no driver: frames from the far end are taken and dropped
	for i := range 10 {
		p, err := far.TX.Alloc(60)
		if err != nil {
			t.Fatal(err)
		}
		far.TX.Payload(p)[0] = byte(i)
		far.TX.TrySubmit(p)
	}
	far.TX.Wakeup()
	for deadline := time.Now().Add(5 * time.Second); far.TX.InFlight() > 0; time.Sleep(time.Millisecond) {
		for {
			p, ok := far.TX.GetAcked()
			if !ok {
				break
			}
			far.TX.Release(p)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d frames still unacknowledged with no driver", far.TX.InFlight())
		}
	}

	files := newFiles(t)
	if err := nic.OpenDevice(files); err != nil {
		t.Fatal(err)
	}
	defer nic.CloseDevice()
	if err := nic.OpenDevice(newFiles(t)); err == nil {
		t.Error("a second driver got the device")
	}
	m, err := devsession.Map(files)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if v, d := m.PCIID(); v != devsession.VendorIntel || d != intel.Models[0].DeviceID {
		t.Errorf("PCI ID %#x:%#x", v, d)
	}
	if ral := m.Regs[regs.RAL]; ral != 2 {
		t.Errorf("RAL starts with %#x, want the MAC's first byte", ral)
	}
}

// clockIn reports each run of frames the wire took, in order and covering them all, so that
// the receive loop acknowledges frames as they go and not per batch; with no driver they
// all fall off the wire at once.
func TestClockInReportsRuns(t *testing.T) {
	nic := New(intel.DeviceConfig{MAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}}, intel.NewCounters(nil), NewCounters(nil))
	frames := make([][]byte, 10)
	for i := range frames {
		frames[i] = make([]byte, 60)
	}
	var runs [][2]int
	var stop atomic.Bool
	done, lost := nic.clockIn(frames, &stop, func(from, to int) { runs = append(runs, [2]int{from, to}) })
	if done != 10 || lost != 10 {
		t.Fatalf("took %d, lost %d of 10 frames with no driver", done, lost)
	}
	next := 0
	for _, r := range runs {
		if r[0] != next || r[1] <= r[0] {
			t.Fatalf("runs %v: not consecutive from 0", runs)
		}
		next = r[1]
	}
	if next != 10 {
		t.Errorf("runs %v cover %d of 10 frames", runs, next)
	}
}
