package supervisor

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/nicstack/nicstack/runtime/component"
)

// Kept descriptors (component.Keep): what a component's process asks the supervisor to hold
// for its next one, descriptors and a few bytes saying what they are. They are kept across a
// crash like the state region, handed to each process (component.KeptEnv, the bytes as a
// sealed memfd first), and let go at a deliberate stop or an exit that is not restarted
// (closeKept).

// kept is what one key holds.
type kept struct {
	data  []byte
	files []*os.File
}

// keep holds data and files under key for c's next process (on the loop), replacing what
// key held; no files let it go.
func (c *child) keep(key uint32, data []byte, files []*os.File) {
	if c.keptFiles == nil {
		c.keptFiles = map[uint32]kept{}
	}
	closeFiles(c.keptFiles[key].files)
	delete(c.keptFiles, key)
	if len(files) > 0 {
		c.keptFiles[key] = kept{data, files}
	}
}

func (c *child) dropKeptFiles() {
	for _, k := range c.keptFiles {
		closeFiles(k.files)
	}
	c.keptFiles = nil
}

// keptLaunch is a copy of a child's kept descriptors for a launch, which runs beside the
// loop (a stop meanwhile closes the child's).
type keptLaunch struct {
	files  []*os.File
	keys   []uint32
	counts []int
}

// keptForLaunch copies c's kept descriptors (on the loop), each key's bytes first as a
// sealed memfd.
func (c *child) keptForLaunch() (keptLaunch, error) {
	var k keptLaunch
	for key := range c.keptFiles {
		k.keys = append(k.keys, key)
	}
	sort.Slice(k.keys, func(i, j int) bool { return k.keys[i] < k.keys[j] })
	fail := func(err error) (keptLaunch, error) {
		k.close()
		return keptLaunch{}, fmt.Errorf("%s: kept descriptors: %w", c.start.Name, err)
	}
	for _, key := range k.keys {
		data, err := dataFile(c.keptFiles[key].data)
		if err != nil {
			return fail(err)
		}
		k.files = append(k.files, data)
		for _, f := range c.keptFiles[key].files {
			fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
			if err != nil {
				return fail(err)
			}
			k.files = append(k.files, os.NewFile(uintptr(fd), "kept"))
		}
		k.counts = append(k.counts, 1+len(c.keptFiles[key].files))
	}
	return k, nil
}

// dataFile is a sealed memfd holding b.
func dataFile(b []byte) (*os.File, error) {
	fd, err := unix.MemfdCreate("nicstack-kept", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), "kept-data")
	if _, err := f.Write(b); err != nil {
		f.Close()
		return nil, err
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_WRITE|unix.F_SEAL_GROW|unix.F_SEAL_SHRINK|unix.F_SEAL_SEAL); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// env is the environment line that names the files, the first being descriptor first.
func (k keptLaunch) env(first int) string {
	if len(k.keys) == 0 {
		return ""
	}
	lines := make([]string, len(k.keys))
	for i, key := range k.keys {
		lines[i] = strconv.FormatUint(uint64(key), 10)
		for range k.counts[i] {
			lines[i] += " " + strconv.Itoa(first)
			first++
		}
	}
	return component.KeptEnv + "=" + strings.Join(lines, "\n")
}

func (k keptLaunch) close() { closeFiles(k.files) }
