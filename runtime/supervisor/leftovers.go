package supervisor

import (
	"context"
	"errors"
	"os"
	"path/filepath"

	"github.com/nicstack/nicstack/proto/supervisorpb"
	"github.com/nicstack/nicstack/runtime/leftover"
	"github.com/nicstack/nicstack/runtime/netns"
)

// runDirPrefix names a run's folder, "nicstack-run-<pid>-<random>", so that the folder of a
// run that was killed can be told from a live one's. The folder is the run's record: besides
// the components' sockets it holds controlRecord, the path of the run's control socket.
const (
	runDirPrefix  = "nicstack-run-"
	controlRecord = "control-socket"
)

// RemoveLeftovers removes what runs that were killed (SIGKILL, a crash: no cleanup ran) left
// behind: the processes inside their namespaces and the namespaces, their run folders, and
// control sockets no supervisor answers on. It says what it removed, a line each. Nothing of
// a live run is touched.
func RemoveLeftovers() []string {
	removed := netns.Sweep()
	bases := []string{os.TempDir()}
	if bases[0] != "/tmp" {
		bases = append(bases, "/tmp") // where a run goes when TMPDIR is too long for sockets
	}
	sockets, _ := filepath.Glob(filepath.Join(instanceBase(), "*", "control.sock"))
	sockets = append(sockets, DefaultSocket())
	for _, b := range bases {
		for _, d := range leftover.Orphans(b, runDirPrefix) {
			if rec, err := os.ReadFile(filepath.Join(d, controlRecord)); err == nil {
				sockets = append(sockets, string(rec))
			}
			if os.RemoveAll(d) == nil {
				removed = append(removed, "run folder "+d)
			}
		}
	}
	for _, path := range sockets {
		if !stale(path) || os.Remove(path) != nil {
			continue
		}
		removed = append(removed, "control socket "+path)
		if filepath.Base(path) == "control.sock" {
			os.Remove(filepath.Dir(path)) // an instance folder, when empty
		}
	}
	return removed
}

// stale reports whether path is a socket no supervisor answers on: a Status call finds no
// one accepting. A supervisor that accepts but is slow to answer (its loop busy) is alive.
func stale(path string) bool {
	if fi, err := os.Stat(path); err != nil || fi.Mode().Type() != os.ModeSocket {
		return false
	}
	err := ask(path, dialTimeout, func(ctx context.Context, c *client) error {
		_, err := c.Status(ctx, &supervisorpb.StatusRequest{})
		return err
	})
	var no *unanswered
	return errors.As(err, &no)
}
