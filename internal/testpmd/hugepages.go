package testpmd

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/nicstack/nicstack/runtime/leftover"
)

// HugepageSize is the size of the pages Reserve reserves: 2 MiB, the one size every x86-64
// kernel has.
const HugepageSize = 2 << 20

const (
	nrHugepages   = "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"
	freeHugepages = "/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages"
	hugeDirPrefix = "nicstack-huge-"
)

// Hugepages is a reservation of 2 MiB pages and the hugetlbfs mounted for it: the memory
// testpmd's EAL maps (its --huge-dir) and shares with a vhost-user back end.
type Hugepages struct {
	Dir   string // the mounted hugetlbfs, testpmd's --huge-dir
	pages int
}

// ReserveHugepages adds pages to the kernel's pool of 2 MiB pages and mounts a hugetlbfs
// on a fresh temporary folder. The pool grows by pages rather than being set to pages, and
// Release shrinks it by as many, so that two holders at once (two benches, two helpers)
// do not take each other's pages away. A pool the kernel cannot grow that far (memory too
// fragmented) is an error, and nothing stays reserved.
func ReserveHugepages(pages int) (*Hugepages, error) {
	SweepHugepages()
	old, err := readCount(nrHugepages)
	if err != nil {
		return nil, err
	}
	freeBefore, err := readCount(freeHugepages)
	if err != nil {
		return nil, err
	}
	h := &Hugepages{pages: pages}
	if err := writeCount(nrHugepages, old+pages); err != nil {
		return nil, fmt.Errorf("reserving %d hugepages of 2 MiB: %v", pages, err)
	}
	if free, _ := readCount(freeHugepages); free < freeBefore+pages {
		h.shrink()
		return nil, fmt.Errorf("reserving %d hugepages of 2 MiB: the kernel found only %d (memory fragmented?)", pages, free-freeBefore)
	}
	dir, err := os.MkdirTemp("", leftover.Named(hugeDirPrefix))
	if err == nil {
		err = unix.Mount("nodev", dir, "hugetlbfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "pagesize=2M")
		if err != nil {
			os.Remove(dir)
			err = fmt.Errorf("mounting hugetlbfs on %s: %v", dir, err)
		}
	}
	if err != nil {
		h.shrink()
		return nil, err
	}
	h.Dir = dir
	return h, nil
}

// Release unmounts the hugetlbfs (freeing what files are left in it), removes its folder and
// gives the pages back. It is safe to call twice.
func (h *Hugepages) Release() error {
	var err error
	if h.Dir != "" {
		if err = unmount(h.Dir); err == nil {
			h.Dir = ""
		}
	}
	if h.pages > 0 {
		if e := h.shrink(); err == nil {
			err = e
		}
	}
	return err
}

func (h *Hugepages) shrink() error {
	cur, err := readCount(nrHugepages)
	if err == nil {
		err = writeCount(nrHugepages, max(cur-h.pages, 0))
	}
	h.pages = 0
	return err
}

// SweepHugepages unmounts and removes the hugetlbfs folders of processes that died without
// releasing them. Their pages stay in the pool: how many were added is lost with the process.
func SweepHugepages() {
	for _, d := range leftover.Orphans(os.TempDir(), hugeDirPrefix) {
		unmount(d)
	}
}

func unmount(dir string) error {
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil && err != unix.EINVAL {
		return fmt.Errorf("unmounting %s: %v", dir, err)
	}
	return os.Remove(dir)
}

func readCount(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("hugepages: %v", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("%s: %v", filepath.Base(path), err)
	}
	return n, nil
}

func writeCount(path string, n int) error {
	return os.WriteFile(path, []byte(strconv.Itoa(n)+"\n"), 0o644)
}
