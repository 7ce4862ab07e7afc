// Package vfio gives a user-space driver a PCI device through Linux's VFIO: its BAR0 mapped,
// bus mastering on, DMA memory mapped into the IOMMU at an IOVA, and its interrupt as an
// eventfd. It is the PCI back end of drivers/ipxe (the emulated NIC is the other); it knows
// no NIC. Opening the VFIO container and group needs root (Group, for the supervisor); the
// rest (Open) works on their descriptors in an unprivileged process.
package vfio

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The VFIO ioctls (linux/vfio.h): _IO(';', 100 + n).
const (
	ioctlGetAPIVersion     = 0x3B64
	ioctlCheckExtension    = 0x3B65
	ioctlSetIOMMU          = 0x3B66
	ioctlGroupGetStatus    = 0x3B67
	ioctlGroupSetContainer = 0x3B68
	ioctlGroupGetDeviceFD  = 0x3B6A
	ioctlDeviceGetInfo     = 0x3B6B
	ioctlDeviceRegionInfo  = 0x3B6C
	ioctlDeviceIRQInfo     = 0x3B6D
	ioctlDeviceSetIRQs     = 0x3B6E
	ioctlIOMMUMapDMA       = 0x3B71
	ioctlIOMMUUnmapDMA     = 0x3B72

	apiVersion     = 0
	type1IOMMU     = 1
	type1v2IOMMU   = 3
	groupViable    = 1 << 0
	deviceFlagsPCI = 1 << 1

	regionBAR0    = 0
	regionConfig  = 7
	regionFlagMap = 1 << 2

	irqINTx             = 0
	irqMSI              = 1
	irqSetDataNone      = 1 << 0
	irqSetDataEventfd   = 1 << 2
	irqSetActionUnmask  = 1 << 4
	irqSetActionTrigger = 1 << 5
	dmaMapRead          = 1 << 0
	dmaMapWrite         = 1 << 1
)

// PCI config space.
const (
	cfgVendor         = 0x00
	cfgCommand        = 0x04
	cmdMemory         = 1 << 1
	cmdBusMaster      = 1 << 2
	cmdINTxDisable    = 1 << 10
	pciAddressPattern = `^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$`
)

var pciAddress = regexp.MustCompile(pciAddressPattern)

// CheckAddress checks a PCI address in the kernel's form, domain:bus:device.function
// ("0000:00:02.0").
func CheckAddress(pci string) error {
	if !pciAddress.MatchString(pci) {
		return fmt.Errorf("vfio: PCI address %q: want domain:bus:device.function in lower-case hex, as 0000:00:02.0", pci)
	}
	return nil
}

// IOVA is where the DMA memory sits in the device's address space: above 4 GiB, so the
// driver's 64-bit descriptor addresses are exercised, and clear of the MSI window at
// 0xfee00000.
const IOVA = 1 << 32

// Device is one PCI device opened through VFIO.
type Device struct {
	PCI      string
	Vendor   uint16
	DeviceID uint16
	BAR0     []byte // mapped register space
	DMA      []byte // DMA memory, at IOVA in the device's address space
	IRQ      *os.File
	// INTx: the line is masked by VFIO at each interrupt until Unmask (MSI needs nothing).
	INTx bool

	container, group, device *os.File
	configOff                int64
}

// Open opens the device at pci in the VFIO group whose container and group descriptors the
// supervisor handed over: sets the type 1 IOMMU, maps BAR0, enables memory space and bus
// mastering, maps dmaSize bytes of DMA memory at IOVA, and routes the device's interrupt
// (MSI, else INTx) to an eventfd. The caller keeps container and group (Close does not
// close them).
func Open(container, group *os.File, pci string, dmaSize int) (*Device, error) {
	if err := CheckAddress(pci); err != nil {
		return nil, err
	}
	d := &Device{PCI: pci, container: container, group: group}
	if err := d.open(dmaSize); err != nil {
		d.Close()
		return nil, fmt.Errorf("vfio: %s: %w", pci, err)
	}
	return d, nil
}

func ioctl(f *os.File, req uintptr, arg uintptr) (uintptr, error) {
	r, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), req, arg)
	if e != 0 {
		return r, e
	}
	return r, nil
}

func (d *Device) open(dmaSize int) error {
	if v, err := ioctl(d.container, ioctlGetAPIVersion, 0); err != nil || v != apiVersion {
		return fmt.Errorf("the container speaks VFIO API %d (%v), want %d", v, err, apiVersion)
	}
	iommu := uintptr(type1v2IOMMU)
	if ok, _ := ioctl(d.container, ioctlCheckExtension, type1v2IOMMU); ok != 1 {
		iommu = type1IOMMU
		if ok, err := ioctl(d.container, ioctlCheckExtension, type1IOMMU); ok != 1 {
			return fmt.Errorf("the kernel offers no type 1 IOMMU (%v): is the IOMMU on (intel_iommu=on) and vfio_iommu_type1 loaded?", err)
		}
	}
	status := struct{ argsz, flags uint32 }{argsz: 8}
	if _, err := ioctl(d.group, ioctlGroupGetStatus, uintptr(unsafe.Pointer(&status))); err != nil {
		return fmt.Errorf("group status: %w", err)
	}
	if status.flags&groupViable == 0 {
		return errors.New("its IOMMU group is not viable: every device in the group must be bound to vfio-pci (or no driver)")
	}
	cfd := int32(d.container.Fd())
	if _, err := ioctl(d.group, ioctlGroupSetContainer, uintptr(unsafe.Pointer(&cfd))); err != nil {
		return fmt.Errorf("putting the group into the container: %w", err)
	}
	if _, err := ioctl(d.container, ioctlSetIOMMU, iommu); err != nil {
		return fmt.Errorf("setting the IOMMU: %w", err)
	}
	name, _ := unix.BytePtrFromString(d.PCI)
	fd, err := ioctl(d.group, ioctlGroupGetDeviceFD, uintptr(unsafe.Pointer(name)))
	if err != nil {
		return fmt.Errorf("the group has no device %s: %w", d.PCI, err)
	}
	d.device = os.NewFile(fd, "vfio-device-"+d.PCI)
	info := struct{ argsz, flags, regions, irqs, capOff, pad uint32 }{argsz: 24}
	if _, err := ioctl(d.device, ioctlDeviceGetInfo, uintptr(unsafe.Pointer(&info))); err != nil {
		return fmt.Errorf("device info: %w", err)
	}
	if info.flags&deviceFlagsPCI == 0 || info.regions <= regionConfig {
		return errors.New("not a PCI device")
	}
	cfg, err := d.region(regionConfig)
	if err != nil {
		return err
	}
	d.configOff = int64(cfg.offset)
	ids, err := d.readConfig(cfgVendor)
	if err != nil {
		return err
	}
	d.Vendor, d.DeviceID = uint16(ids), uint16(ids>>16)
	if err := d.mapBAR0(); err != nil {
		return err
	}
	if err := d.mapDMA(dmaSize); err != nil {
		return err
	}
	if err := d.routeIRQ(); err != nil {
		return err
	}
	cmd, err := d.readConfig(cfgCommand)
	if err != nil {
		return err
	}
	cmd = cmd&0xffff | cmdMemory | cmdBusMaster
	if !d.INTx {
		cmd |= cmdINTxDisable
	}
	return d.writeConfig16(cfgCommand, uint16(cmd))
}

type regionInfo struct {
	argsz, flags, index, capOff uint32
	size, offset                uint64
}

func (d *Device) region(index uint32) (regionInfo, error) {
	r := regionInfo{argsz: uint32(unsafe.Sizeof(regionInfo{})), index: index}
	if _, err := ioctl(d.device, ioctlDeviceRegionInfo, uintptr(unsafe.Pointer(&r))); err != nil {
		return r, fmt.Errorf("region %d info: %w", index, err)
	}
	return r, nil
}

// readConfig reads 32 bits of config space at off.
func (d *Device) readConfig(off int64) (uint32, error) {
	var b [4]byte
	if _, err := d.device.ReadAt(b[:], d.configOff+off); err != nil {
		return 0, fmt.Errorf("reading config space at %#x: %w", off, err)
	}
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24, nil
}

func (d *Device) writeConfig16(off int64, v uint16) error {
	if _, err := d.device.WriteAt([]byte{byte(v), byte(v >> 8)}, d.configOff+off); err != nil {
		return fmt.Errorf("writing config space at %#x: %w", off, err)
	}
	return nil
}

func (d *Device) mapBAR0() error {
	r, err := d.region(regionBAR0)
	if err != nil {
		return err
	}
	if r.flags&regionFlagMap == 0 || r.size == 0 || r.size > 1<<30 {
		return fmt.Errorf("BAR0 (%d bytes, flags %#x) is not a memory BAR VFIO can map", r.size, r.flags)
	}
	d.BAR0, err = unix.Mmap(int(d.device.Fd()), int64(r.offset), int(r.size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("mapping BAR0: %w", err)
	}
	return nil
}

// dmaMap is struct vfio_iommu_type1_dma_map, dmaUnmap its dma_unmap.
type dmaMap struct {
	argsz, flags      uint32
	vaddr, iova, size uint64
}

type dmaUnmap struct {
	argsz, flags uint32
	iova, size   uint64
}

// mapDMA maps anonymous memory (page-aligned, so 16-byte aligned) and hands it to the IOMMU;
// VFIO pins it (charged to RLIMIT_MEMLOCK).
func (d *Device) mapDMA(size int) error {
	size = (size + os.Getpagesize() - 1) &^ (os.Getpagesize() - 1)
	mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANONYMOUS)
	if err != nil {
		return fmt.Errorf("DMA memory: %w", err)
	}
	d.DMA = mem
	m := dmaMap{argsz: uint32(unsafe.Sizeof(dmaMap{})), flags: dmaMapRead | dmaMapWrite,
		vaddr: uint64(uintptr(unsafe.Pointer(&mem[0]))), iova: IOVA, size: uint64(size)}
	if _, err := ioctl(d.container, ioctlIOMMUMapDMA, uintptr(unsafe.Pointer(&m))); err != nil {
		unix.Munmap(mem)
		d.DMA = nil
		return fmt.Errorf("mapping %d bytes of DMA memory at IOVA %#x: %w (RLIMIT_MEMLOCK too low?)", size, uint64(IOVA), err)
	}
	return nil
}

// routeIRQ hands the device's MSI (one vector), or else its INTx line, an eventfd.
func (d *Device) routeIRQ() error {
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		return fmt.Errorf("eventfd: %w", err)
	}
	d.IRQ = os.NewFile(uintptr(fd), "vfio-irq-"+d.PCI)
	var errs []error
	for _, index := range []uint32{irqMSI, irqINTx} {
		info := struct{ argsz, flags, index, count uint32 }{argsz: 16, index: index}
		if _, err := ioctl(d.device, ioctlDeviceIRQInfo, uintptr(unsafe.Pointer(&info))); err != nil || info.count == 0 {
			errs = append(errs, fmt.Errorf("interrupt index %d: %d vectors (%v)", index, info.count, err))
			continue
		}
		if err := d.setIRQs(index, irqSetDataEventfd|irqSetActionTrigger, 1, int32(fd)); err != nil {
			errs = append(errs, err)
			continue
		}
		d.INTx = index == irqINTx
		return nil
	}
	return fmt.Errorf("no interrupt: %w", errors.Join(errs...))
}

// setIRQs is VFIO_DEVICE_SET_IRQS for count (0 or 1) vectors of index from 0, with an
// eventfd (or none).
func (d *Device) setIRQs(index, flags, count uint32, fd int32) error {
	set := struct {
		argsz, flags, index, start, count uint32
		fd                                int32
	}{argsz: 20, flags: flags, index: index, count: count, fd: fd}
	if flags&irqSetDataEventfd != 0 {
		set.argsz = 24
	}
	if _, err := ioctl(d.device, ioctlDeviceSetIRQs, uintptr(unsafe.Pointer(&set))); err != nil {
		return fmt.Errorf("interrupt index %d: set irqs %#x: %w", index, flags, err)
	}
	return nil
}

// Unmask re-enables the INTx line after an interrupt was handled (nothing for MSI).
func (d *Device) Unmask() {
	if d.INTx {
		d.setIRQs(irqINTx, irqSetDataNone|irqSetActionUnmask, 1, 0)
	}
}

// Regs are the device's registers in BAR0, for the driver.
func (d *Device) Regs() *Registers { return &Registers{bar: d.BAR0} }

// Registers are 32-bit MMIO accesses to a mapped BAR. An offset outside it reads all ones
// (what a read of nothing returns) and writes nowhere.
type Registers struct{ bar []byte }

// Read32 reads the register at off.
func (r *Registers) Read32(off uint32) uint32 {
	if off%4 != 0 || uint64(off)+4 > uint64(len(r.bar)) {
		return ^uint32(0)
	}
	return atomic.LoadUint32((*uint32)(unsafe.Pointer(&r.bar[off])))
}

// Write32 writes the register at off.
func (r *Registers) Write32(off, v uint32) {
	if off%4 != 0 || uint64(off)+4 > uint64(len(r.bar)) {
		return
	}
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&r.bar[off])), v)
}

// Close stops the device's DMA and interrupts and releases it: bus mastering off, the
// interrupt unrouted, the DMA memory unmapped from the IOMMU and freed.
func (d *Device) Close() error {
	var errs []error
	if d.device != nil {
		if cmd, err := d.readConfig(cfgCommand); err == nil {
			errs = append(errs, d.writeConfig16(cfgCommand, uint16(cmd)&^cmdBusMaster))
		}
		if d.IRQ != nil {
			index := uint32(irqMSI)
			if d.INTx {
				index = irqINTx
			}
			errs = append(errs, d.setIRQs(index, irqSetDataNone|irqSetActionTrigger, 0, 0)) // count 0: off
		}
	}
	if d.DMA != nil {
		m := dmaUnmap{argsz: uint32(unsafe.Sizeof(dmaUnmap{})), iova: IOVA, size: uint64(len(d.DMA))}
		if _, err := ioctl(d.container, ioctlIOMMUUnmapDMA, uintptr(unsafe.Pointer(&m))); err != nil {
			errs = append(errs, fmt.Errorf("unmapping DMA: %w", err))
		}
		errs = append(errs, unix.Munmap(d.DMA))
		d.DMA = nil
	}
	if d.BAR0 != nil {
		errs = append(errs, unix.Munmap(d.BAR0))
		d.BAR0 = nil
	}
	for _, f := range []*os.File{d.IRQ, d.device} {
		if f != nil {
			errs = append(errs, f.Close())
		}
	}
	d.IRQ, d.device = nil, nil
	return errors.Join(errs...)
}
