package affinity

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

func TestParseString(t *testing.T) {
	for _, in := range []string{"0", "0-1", "0-1,3", "1,3-5"} {
		s, err := Parse(in)
		if err != nil {
			t.Fatal(err)
		}
		if s.String() != in {
			t.Errorf("Parse(%q).String() = %q", in, s)
		}
	}
	for _, bad := range []string{"x", "3-1", "-1"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

// A child started under Run carries the mask on its threads: /proc/PID/status says so.
func TestRunPinsChild(t *testing.T) {
	cmd := exec.Command("sleep", "5")
	if err := Run(Set{0}, cmd.Start); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	b, err := os.ReadFile("/proc/" + itoa(cmd.Process.Pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "Cpus_allowed_list:\t0\n") {
		t.Fatalf("child not pinned to cpu 0:\n%s", b)
	}
	cur, _ := Current()
	if len(cur) < 1 {
		t.Fatal("no cpus left on the parent thread")
	}
}

func itoa(i int) string { return Set{i}.String() }
