package supervisor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nicstack/nicstack/internal/leftover"
	"github.com/nicstack/nicstack/internal/testutil"
)

// A program beside a component: it runs in the run folder, where the socket the component's
// config names is bound before either starts (the program finds it at once); it shows in the
// status with its pid; one that ignores SIGTERM is killed when the run ends, and nothing of
// it or the socket remains.
func TestProgramStartsAndStops(t *testing.T) {
	mark := filepath.Join(t.TempDir(), "ran")
	var pid int
	var sock, runDir string
	t.Cleanup(func() { // after the run's own clean-up, which ends it
		if pid != 0 && leftover.Alive(pid) {
			t.Errorf("the program (pid %d) outlived the run", pid)
		}
		if _, err := os.Stat(sock); err == nil {
			t.Error("the socket outlived the run")
		}
	})
	testutil.Binary(t, "github.com/nicstack/nicstack/components/vm") // beside test_echo
	r := startRun(t, `<config>
		<start name="vm" ram="8M"> <binary name="vm"/> <config guest="stream" socket="vm.sock"/> </start>
		<start name="prog">
			<binary name="sh"/>
			<config> <arg value="sh"/> <arg value="-c"/>
				<arg value="test -S vm.sock &amp;&amp; pwd &gt; `+mark+`; trap '' TERM; while :; do sleep 0.1; done"/> </config>
		</start>
	</config>`, func(o *Options) { runDir = o.RunDir })
	r.waitFor("the program's mark", 20*time.Second, func() bool { _, err := os.Stat(mark); return err == nil })
	dir, _ := os.ReadFile(mark)
	if got := strings.TrimSpace(string(dir)); got != runDir {
		t.Errorf("the program ran in %s, want the run folder %s", got, runDir)
	}
	pid, sock = r.component("prog").Pid, filepath.Join(runDir, "vm.sock")
	if pid == 0 {
		t.Error("the program shows no pid")
	}
}
