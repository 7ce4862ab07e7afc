package packetstream

import (
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// region is one stream's memory, either a shared mapping of a memfd or (for tests under -race,
// whose detector cannot see mmapped memory) a heap slice. Both sides read everything in it as
// untrusted: the peer may write any byte at any time.
type region struct {
	cfg   Config
	mem   []byte // RegionSize bytes
	unmap func() error
}

func heapRegion(cfg Config) *region {
	// Over-allocate so the region can start on a line boundary, as a mapping does.
	b := make([]byte, cfg.RegionSize()+lineSize)
	skip := (lineSize - int(uintptr(unsafe.Pointer(&b[0]))%lineSize)) % lineSize
	return &region{cfg: cfg, mem: b[skip : skip+cfg.RegionSize() : skip+cfg.RegionSize()], unmap: func() error { return nil }}
}

// mapRegion maps the memfd f, which must be sealed against shrinking: a peer that could shrink
// it would make our next access fault (SIGBUS) instead of reading garbage.
func mapRegion(f *os.File, cfg Config) (*region, error) {
	var mem []byte
	var err error
	cerr := control(f, func(fd int) {
		if err = checkRegionSize(fd, cfg); err != nil {
			err = fmt.Errorf("packetstream: %s: %w", f.Name(), err)
			return
		}
		seals, e := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
		if e != nil || seals&unix.F_SEAL_SHRINK == 0 {
			err = fmt.Errorf("packetstream: memory file %s is not sealed against shrinking", f.Name())
			return
		}
		mem, err = unix.Mmap(fd, 0, cfg.RegionSize(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	})
	if cerr != nil {
		return nil, cerr
	}
	if err != nil {
		return nil, err
	}
	return &region{cfg: cfg, mem: mem, unmap: func() error { return unix.Munmap(mem) }}, nil
}

// checkRegionSize checks that the memory file fd holds a region of cfg's size.
func checkRegionSize(fd int, cfg Config) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Size < int64(cfg.RegionSize()) {
		return fmt.Errorf("memory file has %d bytes, the stream needs %d", st.Size, cfg.RegionSize())
	}
	return nil
}

// control runs fn on f's descriptor without changing its blocking mode (File.Fd would).
func control(f *os.File, fn func(fd int)) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	return rc.Control(func(fd uintptr) { fn(int(fd)) })
}

func (r *region) u32(off int) *atomic.Uint32 {
	return (*atomic.Uint32)(unsafe.Pointer(&r.mem[off]))
}

func (r *region) ptr(off int) unsafe.Pointer { return unsafe.Pointer(&r.mem[off]) }
