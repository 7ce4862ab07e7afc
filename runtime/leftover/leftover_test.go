package leftover

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

func TestOrphans(t *testing.T) {
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	gone := strconv.Itoa(dead.Process.Pid)
	live := strconv.Itoa(os.Getppid())
	dir := t.TempDir()
	for _, n := range []string{"run-" + gone + "-1", "run-" + gone, "run-" + live + "-2", Named("run-") + "3", "run-x-4", "other-" + gone + "-5"} {
		os.Mkdir(filepath.Join(dir, n), 0o700)
	}
	orphans := Orphans(dir, "run-")
	if len(orphans) != 2 || orphans[0] != filepath.Join(dir, "run-"+gone) || orphans[1] != filepath.Join(dir, "run-"+gone+"-1") {
		t.Errorf("orphans %v, want only the dead process's folders", orphans)
	}
	if Alive(dead.Process.Pid) || !Alive(os.Getpid()) {
		t.Error("Alive")
	}
}
