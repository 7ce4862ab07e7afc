package testcomp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/nicstack/nicstack/runtime/component"
)

// DeviceSpec is the test device session: one page both sides share, a doorbell eventfd the
// client rings and an interrupt eventfd the server raises. The client writes a number into
// the page's first word and rings; the server writes twice that into the second word and
// raises the interrupt; the client checks it.
var DeviceSpec = component.DeviceSpec{Mems: []int{4096}, Eventfds: 2}

// deviceRounds is how many exchanges a client makes per session.
const deviceRounds = 100

// device is one device session's mapping and eventfds, with the goroutine that uses them.
type device struct {
	mem           []byte
	doorbell, irq *os.File // non-blocking duplicates, so that closing one ends a Read
	stopped       sync.WaitGroup
}

func openDevice(s *component.Session) (*device, error) {
	if len(s.Files) != 3 {
		return nil, fmt.Errorf("device session with %d files, want a memfd and two eventfds", len(s.Files))
	}
	fds := make([]int, 3)
	for i, f := range s.Files {
		var err error
		// Control, not Fd: Fd would switch the shared file description to blocking mode.
		raw, cerr := f.SyscallConn()
		if cerr == nil {
			cerr = raw.Control(func(fd uintptr) { fds[i], err = unix.Dup(int(fd)) })
		}
		if err = errors.Join(cerr, err); err != nil {
			for _, fd := range fds[:i] {
				unix.Close(fd)
			}
			return nil, err
		}
	}
	d := &device{}
	var err error
	d.mem, err = unix.Mmap(fds[0], 0, DeviceSpec.Mems[0], unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	unix.Close(fds[0])
	if err == nil {
		err = errors.Join(unix.SetNonblock(fds[1], true), unix.SetNonblock(fds[2], true))
	}
	if err != nil {
		unix.Close(fds[1])
		unix.Close(fds[2])
		if d.mem != nil {
			unix.Munmap(d.mem)
		}
		return nil, err
	}
	d.doorbell, d.irq = os.NewFile(uintptr(fds[1]), "doorbell"), os.NewFile(uintptr(fds[2]), "irq")
	return d, nil
}

// word is the i-th 64-bit word of the shared page, accessed atomically since the peer writes
// it from another process.
func (d *device) word(i int) *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Pointer(&d.mem[8*i]))
}

func (d *device) run(fn func()) {
	d.stopped.Add(1)
	go func() { defer d.stopped.Done(); fn() }()
}

func signal(f *os.File) error {
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	_, err := f.Write(one[:])
	return err
}

func wait(f *os.File) error {
	var v [8]byte
	_, err := f.Read(v[:])
	return err
}

// close ends the goroutine (its Read returns once the file closes) and unmaps the page.
func (d *device) close() {
	d.doorbell.Close()
	d.irq.Close()
	d.stopped.Wait()
	unix.Munmap(d.mem)
}

// serveDevice answers each doorbell until the session closes.
func (e *Echo) serveDevice(s *component.Session) error {
	d, err := openDevice(s)
	if err != nil {
		return err
	}
	d.run(func() {
		for wait(d.doorbell) == nil {
			d.word(1).Store(2 * d.word(0).Load())
			if signal(d.irq) != nil {
				return
			}
		}
	})
	e.devices[s.ID] = d
	return nil
}

// useDevice makes deviceRounds exchanges, counting "device_rounds" and "mismatches".
func (cl *Client) useDevice(s *component.Session) error {
	d, err := openDevice(s)
	if err != nil {
		return err
	}
	d.run(func() {
		for n := uint64(1); n <= deviceRounds; n++ {
			d.word(0).Store(n)
			if signal(d.doorbell) != nil || wait(d.irq) != nil {
				return
			}
			if d.word(1).Load() != 2*n {
				cl.mismatches.Add(1)
			}
			cl.deviceRounds.Add(1)
		}
	})
	cl.device = d
	return nil
}
