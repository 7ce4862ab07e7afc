// The control socket: where `nicstack run` serves its status and `nicstack status` (and the
// other commands that talk to a running supervisor) ask.

package supervisor

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// DefaultSocket is the socket of an unnamed run.
func DefaultSocket() string {
	return fmt.Sprintf("%s/nicstack-%d.sock", os.TempDir(), os.Getuid())
}

// rootInstanceBase is root's instanceBase: nicstack@.service's RuntimeDirectory=nicstack/%i
// makes the folder of each instance in it.
var rootInstanceBase = "/run/nicstack"

// instanceBase holds a folder per named run.
func instanceBase() string {
	if os.Getuid() == 0 {
		return rootInstanceBase
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "nicstack")
	}
	return fmt.Sprintf("%s/nicstack-%d", os.TempDir(), os.Getuid())
}

var instanceName = regexp.MustCompile(`^[A-Za-z0-9_.@-]{1,64}$`)

// InstanceSocket is the socket of the run named name (`nicstack run --name`).
func InstanceSocket(name string) (string, error) {
	if !instanceName.MatchString(name) || name == "." || name == ".." {
		return "", fmt.Errorf("instance name %q: want 1 to 64 letters, digits, '_', '-', '.' or '@'", name)
	}
	return filepath.Join(instanceBase(), name, "control.sock"), nil
}

// FindSocket picks the socket a client command asks: path if given, else that of the run
// named name, else the unnamed run's if one is there, else the one named run there is.
func FindSocket(path, name string) (string, error) {
	switch {
	case path != "":
		return path, nil
	case name != "":
		return InstanceSocket(name)
	}
	if _, err := os.Stat(DefaultSocket()); err == nil {
		return DefaultSocket(), nil
	}
	found, _ := filepath.Glob(filepath.Join(instanceBase(), "*", "control.sock"))
	switch len(found) {
	case 0:
		return DefaultSocket(), nil // its error names the default
	case 1:
		return found[0], nil
	}
	names := make([]string, len(found))
	for i, f := range found {
		names[i] = filepath.Base(filepath.Dir(f))
	}
	sort.Strings(names)
	return "", fmt.Errorf("several nicstack runs are up (%s): say which with -s NAME", strings.Join(names, ", "))
}
