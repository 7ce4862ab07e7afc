// Package leftover finds what a killed process left behind. What nicstack makes outside its
// own memory carries its maker's pid in the name ("nst<pid>-vm1" namespaces,
// "nicstack-run-<pid>-123" folders), so a later process can tell which ones no live process
// owns, however the maker died.
package leftover

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Alive reports whether process pid exists and is not a zombie (killed, not yet reaped).
func Alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}

// Named is the name prefix<pid>-rest for this process.
func Named(prefix string) string { return fmt.Sprintf("%s%d-", prefix, os.Getpid()) }

// Orphaned reports whether name is prefix<pid> or prefix<pid>-... and process pid is gone
// (and not us).
func Orphaned(name, prefix string) bool {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return false
	}
	pidStr, _, _ := strings.Cut(rest, "-")
	pid, err := strconv.Atoi(pidStr)
	return err == nil && pid > 0 && pid != os.Getpid() && !Alive(pid)
}

// Orphans lists the entries of dir named prefix<pid>[-...] whose process is gone.
func Orphans(dir, prefix string) []string {
	entries, _ := os.ReadDir(dir)
	var paths []string
	for _, e := range entries {
		if Orphaned(e.Name(), prefix) {
			paths = append(paths, filepath.Join(dir, e.Name()))
		}
	}
	return paths
}
