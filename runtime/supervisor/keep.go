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
// for its next one. They are kept across a crash like the state region, handed to each
// process (component.KeptEnv), and let go at a deliberate stop or an exit that is not
// restarted (closeKept).

// keep holds files under key for c's next process (on the loop), replacing what key held.
func (c *child) keep(key uint32, files []*os.File) {
	if c.keptFiles == nil {
		c.keptFiles = map[uint32][]*os.File{}
	}
	closeFiles(c.keptFiles[key])
	delete(c.keptFiles, key)
	if len(files) > 0 {
		c.keptFiles[key] = files
	}
}

func (c *child) dropKeptFiles() {
	for _, files := range c.keptFiles {
		closeFiles(files)
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

// keptForLaunch copies c's kept descriptors (on the loop).
func (c *child) keptForLaunch() (keptLaunch, error) {
	var k keptLaunch
	for key := range c.keptFiles {
		k.keys = append(k.keys, key)
	}
	sort.Slice(k.keys, func(i, j int) bool { return k.keys[i] < k.keys[j] })
	for _, key := range k.keys {
		for _, f := range c.keptFiles[key] {
			fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
			if err != nil {
				k.close()
				return keptLaunch{}, fmt.Errorf("%s: kept descriptors: %w", c.start.Name, err)
			}
			k.files = append(k.files, os.NewFile(uintptr(fd), "kept"))
		}
		k.counts = append(k.counts, len(c.keptFiles[key]))
	}
	return k, nil
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
