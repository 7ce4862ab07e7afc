package devsession_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nicstack/nicstack/drivers/intel/devsession"
)

func closeAll(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

// Both sides map the same files: what the device writes the driver reads.
func TestMapBothSides(t *testing.T) {
	files, err := devsession.NewFiles(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(files)
	dev, err := devsession.Map(files)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	drv, err := devsession.Map(files)
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	dev.SetPCIID(devsession.VendorIntel, 0x153A)
	if v, d := drv.PCIID(); v != devsession.VendorIntel || d != 0x153A {
		t.Errorf("PCI ID %#x:%#x", v, d)
	}
	dev.DMA[12345] = 7
	if drv.DMA[12345] != 7 || len(drv.DMA) != 1<<20 {
		t.Error("DMA memory is not shared")
	}
	dev.IRQ.Raise()
	if err := drv.IRQ.Wait(); err != nil {
		t.Error(err)
	}
}

// Files from another process are checked, never trusted: wrong count, a short MMIO region, an
// empty DMA region, a memfd where an eventfd belongs.
func TestMapRejects(t *testing.T) {
	files, err := devsession.NewFiles(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(files)
	short, err := devsession.NewFiles(0)
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(short)
	unix.Ftruncate(int(short[0].Fd()), 4096)
	for _, c := range []struct {
		name  string
		files []*os.File
		want  string
	}{
		{"three files", files[:3], "3 files"},
		{"short MMIO", []*os.File{short[0], files[1], files[2], files[3]}, "want a memfd of"},
		{"empty DMA", []*os.File{files[0], short[1], files[2], files[3]}, "is 0 bytes"},
		{"memfd as eventfd", []*os.File{files[0], files[1], files[1], files[3]}, "not an eventfd"},
		{"eventfd as memory", []*os.File{files[2], files[1], files[2], files[3]}, "want a memfd"},
	} {
		m, err := devsession.Map(c.files)
		if err == nil {
			m.Close()
			t.Errorf("%s: mapped", c.name)
		} else if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

// Serve calls its function for raises of the eventfd, and none once stop has returned.
func TestServe(t *testing.T) {
	files, err := devsession.NewFiles(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(files)
	m, err := devsession.Map(files)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	calls := make(chan struct{}, 8)
	stop := m.Doorbell.Serve(func() { calls <- struct{}{} })
	m.Doorbell.Raise()
	select {
	case <-calls:
	case <-time.After(5 * time.Second):
		t.Fatal("no call for a raise")
	}
	stop()
	m.Doorbell.Raise()
	time.Sleep(10 * time.Millisecond)
	if len(calls) != 0 {
		t.Fatal("called after stop")
	}
}
