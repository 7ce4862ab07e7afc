package vfio

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Group opens, for the device at pci, the VFIO container and the device's IOMMU group: the
// part that needs root, done by the supervisor, which hands both to the driver's process.
// sysfs is where sysfs is mounted ("/sys"), dev where the VFIO nodes are ("/dev/vfio").
// The errors say what to do: bind the device to vfio-pci, turn the IOMMU on.
func Group(pci, sysfs, dev string) (container, group *os.File, err error) {
	if err := CheckAddress(pci); err != nil {
		return nil, nil, err
	}
	path := filepath.Join(sysfs, "bus/pci/devices", pci)
	if _, err := os.Stat(path); err != nil {
		return nil, nil, fmt.Errorf("vfio: no PCI device %s (lspci -D lists them): %w", pci, err)
	}
	ids := strings.TrimSpace(readFile(filepath.Join(path, "vendor"))) + ":" + strings.TrimSpace(readFile(filepath.Join(path, "device")))
	ids = strings.ReplaceAll(ids, "0x", "")
	driver := "no driver"
	if l, err := os.Readlink(filepath.Join(path, "driver")); err == nil {
		driver = filepath.Base(l)
	}
	if driver != "vfio-pci" {
		return nil, nil, fmt.Errorf("vfio: PCI device %s (%s) is bound to %s, not vfio-pci: echo vfio-pci > %s/driver_override; "+
			"echo %s > %s/driver/unbind; echo %s > %s/bus/pci/drivers_probe", pci, ids, driver, path, pci, path, pci, sysfs)
	}
	l, err := os.Readlink(filepath.Join(path, "iommu_group"))
	if err != nil {
		return nil, nil, fmt.Errorf("vfio: PCI device %s (%s) is in no IOMMU group: is the IOMMU on (intel_iommu=on or amd_iommu=on)? %w", pci, ids, err)
	}
	node := filepath.Join(dev, filepath.Base(l))
	if container, err = os.OpenFile(filepath.Join(dev, "vfio"), os.O_RDWR, 0); err != nil {
		return nil, nil, fmt.Errorf("vfio: the VFIO container (modprobe vfio-pci): %w", err)
	}
	if group, err = os.OpenFile(node, os.O_RDWR, 0); err != nil {
		container.Close()
		if errors.Is(err, unix.EBUSY) {
			return nil, nil, fmt.Errorf("vfio: IOMMU group %s of %s is open in another process", node, pci)
		}
		return nil, nil, fmt.Errorf("vfio: IOMMU group of %s: %w", pci, err)
	}
	return container, group, nil
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}
