package vhostuser

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// region is one region of guest memory, mapped once: mem covers exactly the region's bytes.
// Its descriptor stays open for a takeover (takeover.go) to hand on.
type region struct {
	gpa, uaddr, size uint64
	offset           uint64 // where the region starts in fd
	fd               int
	mem              []byte // within mapping
	mapping          []byte // what mmap returned, for munmap
}

// memTable is the guest's memory as the last SET_MEM_TABLE gave it. Every address the
// guest hands over is translated here and checked: a buffer must lie inside one region.
type memTable struct {
	regions []region
}

// mapMemTable maps the regions of m from their descriptors (MAP_SHARED, read and write),
// which it takes (the table keeps them; closed on failure). A descriptor smaller than its
// region is refused: touching the pages past its end would fault. Regions that overlap, in
// the guest's addresses or the front end's, are refused: no address may mean two places.
func mapMemTable(m *message, fds []int) (*memTable, error) {
	t := &memTable{}
	page := uint64(os.Getpagesize())
	for i := range m.nmem {
		r := m.mem[i]
		if r.size == 0 || r.size > 1<<40 || r.offset > 1<<48 || r.gpa+r.size < r.gpa || r.uaddr+r.size < r.uaddr {
			t.unmap()
			closeAll(fds[i:])
			return nil, fmt.Errorf("SET_MEM_TABLE: region %d (guest %#x, %d bytes at offset %d) is out of range", i, r.gpa, r.size, r.offset)
		}
		for j, o := range t.regions {
			if r.gpa < o.gpa+o.size && o.gpa < r.gpa+r.size || r.uaddr < o.uaddr+o.size && o.uaddr < r.uaddr+r.size {
				t.unmap()
				closeAll(fds[i:])
				return nil, fmt.Errorf("SET_MEM_TABLE: region %d (guest %#x, front end %#x, %d bytes) overlaps region %d", i, r.gpa, r.uaddr, r.size, j)
			}
		}
		var st unix.Stat_t
		if err := unix.Fstat(fds[i], &st); err != nil {
			t.unmap()
			closeAll(fds[i:])
			return nil, fmt.Errorf("SET_MEM_TABLE: region %d: %w", i, err)
		}
		if uint64(st.Size) < r.offset+r.size {
			t.unmap()
			closeAll(fds[i:])
			return nil, fmt.Errorf("SET_MEM_TABLE: region %d ends at byte %d of its descriptor, which has %d", i, r.offset+r.size, st.Size)
		}
		start := r.offset &^ (page - 1)
		mp, err := unix.Mmap(fds[i], int64(start), int(r.offset-start+r.size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if err != nil {
			t.unmap()
			closeAll(fds[i:])
			return nil, fmt.Errorf("SET_MEM_TABLE: mapping region %d (%d bytes): %w", i, r.size, err)
		}
		skip := r.offset - start
		t.regions = append(t.regions, region{gpa: r.gpa, uaddr: r.uaddr, size: r.size, offset: r.offset, fd: fds[i], mem: mp[skip : skip+r.size : skip+r.size], mapping: mp})
	}
	return t, nil
}

func (t *memTable) unmap() {
	if t == nil {
		return
	}
	for _, r := range t.regions {
		if r.mapping != nil {
			unix.Munmap(r.mapping)
			unix.Close(r.fd)
		}
	}
	t.regions = nil
}

// guest returns the n bytes at guest physical address a, or nil if they do not lie inside
// one region.
func (t *memTable) guest(a uint64, n uint32) []byte {
	for i := range t.regions {
		r := &t.regions[i]
		if a >= r.gpa && a-r.gpa < r.size {
			off := a - r.gpa
			if uint64(n) > r.size-off {
				return nil
			}
			return r.mem[off : off+uint64(n) : off+uint64(n)]
		}
	}
	return nil
}

// front returns the n bytes at the front end's address a (vring addresses are QEMU's), or
// nil.
func (t *memTable) front(a, n uint64) []byte {
	for i := range t.regions {
		r := &t.regions[i]
		if a >= r.uaddr && a-r.uaddr < r.size {
			off := a - r.uaddr
			if n > r.size-off {
				return nil
			}
			return r.mem[off : off+n : off+n]
		}
	}
	return nil
}
