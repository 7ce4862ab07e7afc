// Package devsession is the layout of the "Platform" device session between the emulated NIC's
// process and its driver, and the mapping of its files on either side. The session carries, in
// this order: an MMIO memfd (the register page, the posted-write queue, a PCI config space), the
// DMA memfd, the interrupt eventfd (device to driver) and the doorbell eventfd (driver to
// device, as a hypervisor's ioeventfd).
package devsession

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/nicstack/nicstack/drivers/intel/regs"
)

const (
	// ConfigSpaceSize is the PCI config space stand-in after the write queue: vendor ID at 0,
	// device ID at 2, written by the device's process, read by the driver to pick its quirks.
	ConfigSpaceSize = 4096
	// MMIOSize is the first memfd's size.
	MMIOSize = regs.RegisterPageSize + regs.WriteQueueSize + ConfigSpaceSize
	// Eventfds is the number of eventfds: interrupt, doorbell.
	Eventfds = 2
	// VendorIntel is the PCI vendor ID the model reports.
	VendorIntel = 0x8086
)

// Mems are the memfd sizes of a session whose DMA memory is dmaSize bytes.
func Mems(dmaSize int) []int { return []int{MMIOSize, dmaSize} }

// Mem is one side's mapping of a device session.
type Mem struct {
	Regs   []byte // the register page
	Queue  *regs.WriteQueue
	Config []byte // the PCI config space
	DMA    []byte
	// IRQ and Doorbell are this side's duplicates of the eventfds, closed by Close.
	IRQ, Doorbell *Eventfd
	mmio          []byte
}

// Map maps a session's files (checked against the layout: they come from another process
// through the supervisor). The caller keeps the files; the mappings and eventfds outlive them
// until Close.
func Map(files []*os.File) (*Mem, error) {
	if len(files) != 2+Eventfds {
		return nil, fmt.Errorf("device session: %d files, want 2 memfds and %d eventfds", len(files), Eventfds)
	}
	m := &Mem{}
	var err error
	if m.mmio, err = mapFile(files[0], MMIOSize); err != nil {
		return nil, err
	}
	if m.DMA, err = mapFile(files[1], 0); err != nil {
		m.Close()
		return nil, err
	}
	m.Regs = m.mmio[:regs.RegisterPageSize]
	m.Config = m.mmio[regs.RegisterPageSize+regs.WriteQueueSize:]
	if m.Queue, err = regs.NewWriteQueue(m.mmio[regs.RegisterPageSize : regs.RegisterPageSize+regs.WriteQueueSize]); err != nil {
		m.Close()
		return nil, err
	}
	for i, e := range []**Eventfd{&m.IRQ, &m.Doorbell} {
		if *e, err = NewEventfd(files[2+i]); err != nil {
			m.Close()
			return nil, err
		}
	}
	return m, nil
}

// mapFile maps a whole memfd of exactly size bytes (0: any non-empty size).
func mapFile(f *os.File, size int) ([]byte, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil, fmt.Errorf("device session: %s: %w", f.Name(), err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size <= 0 || size != 0 && st.Size != int64(size) {
		return nil, fmt.Errorf("device session: %s is %d bytes, want a memfd of %d", f.Name(), st.Size, size)
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, int(st.Size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("device session: mapping %s: %w", f.Name(), err)
	}
	return mem, nil
}

// Eventfd is one side's end of an interrupt line or doorbell. Its reader waits in Go's
// netpoller, not in a blocking read: a thread blocked in a system call keeps the runtime's
// monitor polling every 20 µs to take its P back, which costs a busy driver more than its
// interrupts do.
//
// Raise and the read in Wait are raw system calls (an eventfd's write and non-blocking read
// never block): an ordinary one wakes the runtime's monitor from its deep sleep whenever the
// process was idle, and the monitor then polls every 20 µs for a millisecond before it dozes
// off again. A driver that takes an interrupt every 166 µs and rings a doorbell in each kept it
// awake for good: a third of the driver's CPU time went to it.
type Eventfd struct {
	fd int             // for Raise: the same descriptor as f's, without f's locking
	f  *os.File        // for Wait
	rc syscall.RawConn // f's, for waiting in the netpoller
}

// Raise adds one to the count; signals coalesce until Wait takes them.
func (e *Eventfd) Raise() {
	one := uint64(1)
	syscall.RawSyscall(syscall.SYS_WRITE, uintptr(e.fd), uintptr(unsafe.Pointer(&one)), 8)
}

// Close closes this side's descriptor; a Wait in progress fails.
func (e *Eventfd) Close() error { return e.f.Close() }

// Wait blocks until the eventfd was raised and resets its count; it fails once Close ran.
func (e *Eventfd) Wait() error {
	var count uint64
	var rerr error
	err := e.rc.Read(func(fd uintptr) bool {
		_, _, errno := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&count)), 8)
		switch errno {
		case syscall.EAGAIN:
			return false // not raised yet: wait in the netpoller
		case 0, syscall.EINTR:
		default:
			rerr = errno
		}
		return true
	})
	if err != nil {
		return err
	}
	return rerr
}

// Serve calls fn on a goroutine of its own each time the eventfd is raised: the device's
// doorbell reader, the driver's interrupt loop. stop ends it, raising the eventfd to end the
// wait, and returns once fn has returned for the last time.
func (e *Eventfd) Serve(fn func()) (stop func()) {
	var stopped atomic.Bool
	var done sync.WaitGroup
	done.Go(func() {
		for e.Wait() == nil && !stopped.Load() {
			fn()
		}
	})
	return func() {
		stopped.Store(true)
		e.Raise()
		done.Wait()
	}
}

// NewEventfd duplicates an eventfd (of a session, or VFIO's interrupt), non-blocking so that
// its reader waits in the netpoller. The caller keeps f.
func NewEventfd(f *os.File) (*Eventfd, error) {
	link, _ := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", f.Fd()))
	if link != "anon_inode:[eventfd]" {
		return nil, fmt.Errorf("device session: %s is not an eventfd", f.Name())
	}
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("device session: %s: %w", f.Name(), err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("device session: %s: %w", f.Name(), err)
	}
	ef := &Eventfd{fd: fd, f: os.NewFile(uintptr(fd), f.Name())}
	if ef.rc, err = ef.f.SyscallConn(); err != nil {
		ef.f.Close()
		return nil, fmt.Errorf("device session: %s: %w", f.Name(), err)
	}
	return ef, nil
}

// Close unmaps the memory and closes the eventfds; nothing may use them afterwards.
func (m *Mem) Close() error {
	var errs []error
	for _, b := range [][]byte{m.mmio, m.DMA} {
		if b != nil {
			errs = append(errs, unix.Munmap(b))
		}
	}
	for _, e := range []*Eventfd{m.IRQ, m.Doorbell} {
		if e != nil {
			errs = append(errs, e.Close())
		}
	}
	m.mmio, m.DMA, m.IRQ, m.Doorbell = nil, nil, nil, nil
	return errors.Join(errs...)
}

// SetPCIID writes the vendor and device ID (the device's side).
func (m *Mem) SetPCIID(vendor, device uint16) {
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&m.Config[0])), uint32(vendor)|uint32(device)<<16)
}

// PCIID reads the vendor and device ID (the driver's side).
func (m *Mem) PCIID() (vendor, device uint16) {
	v := atomic.LoadUint32((*uint32)(unsafe.Pointer(&m.Config[0])))
	return uint16(v), uint16(v >> 16)
}

// NewFiles creates a session's files as the supervisor does, for tests and the benchmark's
// own harness: memfds of Mems(dmaSize), then the eventfds.
func NewFiles(dmaSize int) ([]*os.File, error) {
	var files []*os.File
	fail := func(err error) ([]*os.File, error) {
		for _, f := range files {
			f.Close()
		}
		return nil, err
	}
	for i, size := range Mems(dmaSize) {
		fd, err := unix.MemfdCreate(fmt.Sprintf("nic-mem%d", i), unix.MFD_CLOEXEC)
		if err != nil {
			return fail(err)
		}
		files = append(files, os.NewFile(uintptr(fd), fmt.Sprintf("nic-mem%d", i)))
		if err := unix.Ftruncate(fd, int64(size)); err != nil {
			return fail(err)
		}
	}
	for _, name := range []string{"nic-irq", "nic-doorbell"} {
		fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
		if err != nil {
			return fail(err)
		}
		files = append(files, os.NewFile(uintptr(fd), name))
	}
	return files, nil
}
