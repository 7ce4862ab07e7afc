package ipxe_test

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nicstack/nicstack/drivers/intel"
	"github.com/nicstack/nicstack/drivers/intel/regs"
	"github.com/nicstack/nicstack/drivers/ipxe"
)

// The driver knows its parts by PCI ids: QEMU's e1000e is an 82574L, the PCH parts lose
// speed on a PHY reset, and anything else is refused by name.
func TestLookupModel(t *testing.T) {
	for _, c := range []struct {
		device   uint16
		name     string
		losesPHY bool
	}{{0x10D3, "82574L", false}, {0x153A, "i217-LM", true}, {0x15BD, "i219-LM", true}, {0x15FA, "i219-V", true}} {
		m, err := ipxe.LookupModel(0x8086, c.device)
		if err != nil || m.Name != c.name || m.PHYLosesSpeed != c.losesPHY || m.DeviceID != c.device {
			t.Errorf("%04x: %+v, %v; want %s (PHY loses speed: %v)", c.device, m, err, c.name, c.losesPHY)
		}
	}
	for _, c := range []struct{ vendor, device uint16 }{{0x8086, 0x10FB}, {0x1AF4, 0x1000}, {0x10EC, 0x10D3}} {
		_, err := ipxe.LookupModel(c.vendor, c.device)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%04x:%04x", c.vendor, c.device)) || !strings.Contains(err.Error(), "82574L") {
			t.Errorf("%04x:%04x: %v, want an error naming it and the supported parts", c.vendor, c.device, err)
		}
	}
	if _, err := ipxe.Open(ipxe.Device{Regs: hostileRegs{}, DMA: make([]byte, ipxe.DMASize), DeviceID: 0x10FB}, ipxe.DefaultConfig(), nil); err == nil ||
		!strings.Contains(err.Error(), "8086:10fb") {
		t.Errorf("Open of an 82599: %v", err)
	}
}

// With DMA memory at a bus address other than 0 (an IOVA in an IOMMU), the driver writes
// ring bases and buffer addresses the device finds: frames pass both ways.
func TestDMABase(t *testing.T) {
	const base = 1 << 21
	mem := make([]byte, base+ipxe.DMASize)
	clock := &regs.ManualClock{}
	irq := intel.NewChanIRQ()
	wire := &captureWire{}
	dev, err := intel.New(make([]byte, regs.RegisterPageSize), mem, intel.DeviceConfig{
		MAC: nicMAC, Clock: clock, IRQ: irq, Wire: wire, Autoneg: time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	up := &fakeUplink{}
	drv, err := ipxe.Open(ipxe.Device{Regs: dev, DMA: mem[base:], DMABase: base, DeviceID: 0x10D3, Clock: clock}, ipxe.DefaultConfig(),
		func(up bool, _ int) {})
	if err != nil {
		t.Fatal(err)
	}
	drv.SetUplink(up)
	step := func() {
		clock.Advance(100 * time.Microsecond)
		dev.Poll()
		select {
		case <-irq:
			drv.HandleInterrupt()
		default:
		}
	}
	for i := 0; i < 100; i++ {
		if l, _ := drv.Link(); l {
			break
		}
		step()
	}
	out := frame(net.HardwareAddr{2, 0, 0, 0, 0, 0x99}, 1514, 1)
	in := frame(nicMAC, 1000, 2)
	up.tx = append(up.tx, out)
	drv.Transmit()
	dev.Receive([][]byte{in})
	for range 10 {
		step()
	}
	sameFrames(t, "wire", wire.frames, [][]byte{out})
	sameFrames(t, "uplink", up.rx, [][]byte{in})
	if c := dev.Counters(); c.BadDescriptors.Load() != 0 {
		t.Errorf("%d bad descriptors", c.BadDescriptors.Load())
	}
	if _, err := ipxe.Open(ipxe.Device{Regs: dev, DMA: mem[base:], DMABase: base + 8, DeviceID: 0x10D3}, ipxe.DefaultConfig(), nil); err == nil {
		t.Error("a DMA base off 16-byte alignment was accepted")
	}
}
