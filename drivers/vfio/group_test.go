package vfio_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nicstack/nicstack/drivers/vfio"
)

// fakeSysfs makes a sysfs with one PCI device bound to driver (none: "") in IOMMU group 7.
func fakeSysfs(t *testing.T, pci, driver string) (sysfs, dev string) {
	root := t.TempDir()
	sysfs, dev = filepath.Join(root, "sys"), filepath.Join(root, "dev")
	d := filepath.Join(sysfs, "bus/pci/devices", pci)
	for _, p := range []string{d, filepath.Join(sysfs, "kernel/iommu_groups/7"), filepath.Join(sysfs, "bus/pci/drivers/e1000e"),
		filepath.Join(sysfs, "bus/pci/drivers/vfio-pci"), dev} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(d, "vendor"), []byte("0x8086\n"), 0o644)
	os.WriteFile(filepath.Join(d, "device"), []byte("0x10d3\n"), 0o644)
	os.Symlink(filepath.Join(sysfs, "kernel/iommu_groups/7"), filepath.Join(d, "iommu_group"))
	if driver != "" {
		os.Symlink(filepath.Join(sysfs, "bus/pci/drivers", driver), filepath.Join(d, "driver"))
	}
	os.WriteFile(filepath.Join(dev, "vfio"), nil, 0o600)
	os.WriteFile(filepath.Join(dev, "7"), nil, 0o600)
	return sysfs, dev
}

// Group finds the device's IOMMU group and opens it with the container; each way it can
// fail is an error that names the device and says what to do.
func TestGroup(t *testing.T) {
	const pci = "0000:00:02.0"
	sysfs, dev := fakeSysfs(t, pci, "vfio-pci")
	c, g, err := vfio.Group(pci, sysfs, dev)
	if err != nil {
		t.Fatal(err)
	}
	if c.Name() != filepath.Join(dev, "vfio") || g.Name() != filepath.Join(dev, "7") {
		t.Errorf("opened %s and %s", c.Name(), g.Name())
	}
	c.Close()
	g.Close()

	sysfs, dev = fakeSysfs(t, pci, "e1000e")
	if _, _, err := vfio.Group(pci, sysfs, dev); err == nil || !strings.Contains(err.Error(), "bound to e1000e, not vfio-pci") ||
		!strings.Contains(err.Error(), "8086:10d3") || !strings.Contains(err.Error(), "driver_override") {
		t.Errorf("device bound to e1000e: %v", err)
	}
	for _, c := range []struct{ pci, want string }{
		{"0000:00:03.0", "no PCI device 0000:00:03.0"},
		{"00:02.0", "want domain:bus:device.function"},
		{"0000:00:02.0/../../x", "want domain:bus:device.function"},
	} {
		if _, _, err := vfio.Group(c.pci, sysfs, dev); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.pci, err, c.want)
		}
	}
}
