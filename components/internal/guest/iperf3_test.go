package guest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/nicstack/nicstack/runtime/config"
)

// fakeIperf3 answers as iperf3 3.12 does: the first $FAILS runs fail with $ERROR (on stderr
// with status 1, or with -J in the JSON on stdout with status 0), the others print a result.
// Each run appends its arguments to $RUNS.
const fakeIperf3 = `#!/bin/sh
echo "$*" >>"$RUNS"
if [ "$(wc -l <"$RUNS")" -gt "$FAILS" ]; then echo "[  5]   0.00-1.00   sec  1.00 GBytes  8.59 Gbits/sec  receiver"; exit 0; fi
case " $* " in
*" -J "*) printf '{\n\t"start":\t{},\n\t"error":\t"%s"\n}\n' "$ERROR"; exit 0;;
esac
echo "iperf3: error - $ERROR" >&2; exit 1
`

// The netns guest's iperf client: the real iperf3, run again while it cannot connect or the
// server is busy (the far namespace's iperf3 -s may not listen yet: linux_tap's vm once saw
// "Connection refused" and never ran its test), and once only on any other error.
func TestNetnsIperfClientTriesAgain(t *testing.T) {
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "iperf3"), []byte(fakeIperf3), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		iperf, err string
		fails      int
		runs       int  // the runs of iperf3 wanted
		ok         bool // the test's result printed, exit status 0
	}{
		{"-c 198.18.0.2 -R -t 10", "unable to connect to server: Connection refused", 2, 3, true},
		{"-c 198.18.0.2 -R -t 10", "unable to connect to server: No route to host", 1, 2, true},
		{"-c 198.18.0.2  -J", "unable to connect to server: Connection refused", 1, 2, true},
		{"-c 198.18.0.2", "the server is busy running a test. try again later", 1, 2, true},
		{"-c 198.18.0.2 -R", "control socket has closed unexpectedly", 1, 1, false},
	} {
		n, err := config.Parse("vm.xml", []byte(`<config guest="netns" tap_address="10.0.1.2/24" iperf="`+tc.iperf+`"/>`))
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := ParseConfig(n, "vm")
		if err != nil {
			t.Fatal(err)
		}
		runs := filepath.Join(t.TempDir(), "runs")
		cmd := exec.Command("sh", "-c", cfg.Exec)
		cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "RUNS="+runs, "ERROR="+tc.err, "FAILS="+strconv.Itoa(tc.fails))
		out, err := cmd.CombinedOutput()
		b, _ := os.ReadFile(runs)
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		result := strings.Contains(string(out), "receiver")
		switch {
		case len(lines) != tc.runs || strings.Join(strings.Fields(tc.iperf), " ") != lines[0]:
			t.Errorf("%s, %s: iperf3 ran %q, want %d runs of %q", tc.iperf, tc.err, lines, tc.runs, tc.iperf)
		case tc.ok && (err != nil || !result || strings.Contains(string(out), "error")):
			t.Errorf("%s, %s: %v, output:\n%s\nwant the result only", tc.iperf, tc.err, err, out)
		case tc.ok && strings.Count(string(out), "not reachable or busy yet: "+tc.err+"\n") != tc.fails:
			t.Errorf("%s, %s: output:\n%s\nwant %d lines naming why it tries again", tc.iperf, tc.err, out, tc.fails)
		case !tc.ok && (err == nil || string(out) != "iperf3: error - "+tc.err+"\n"):
			t.Errorf("%s, %s: %v, output:\n%s\nwant iperf3's error and its status", tc.iperf, tc.err, err, out)
		}
	}
	// A server has no one to reach: iperf3 as the config says.
	n, _ := config.Parse("vm.xml", []byte(`<config guest="netns" tap_address="10.0.1.2/24" iperf="-s -p 5202"/>`))
	if cfg, err := ParseConfig(n, "vm"); err != nil || cfg.Exec != "iperf3 -s -p 5202" {
		t.Errorf("server: exec %q, %v: want iperf3 -s -p 5202", cfg.Exec, err)
	}
}
