package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nicstack/nicstack/internal/testutil"
	"github.com/nicstack/nicstack/runtime/supervisor"
)

// A named run (as nicstack@NAME.service starts it) serves its socket in the instance folder;
// `status -s NAME` finds it, and plain `status` does while it is the only run; the folder goes
// when the run ends.
func TestRunByName(t *testing.T) {
	testutil.Binary(t, "github.com/nicstack/nicstack/components/test_echo")
	testutil.Binary(t, "github.com/nicstack/nicstack/components/test_client")
	bin := testutil.BinDir(t)
	tmp := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", tmp) // where a non-root run's instance folder goes
	t.Setenv("TMPDIR", tmp)          // no unnamed run's default socket there
	name := fmt.Sprintf("test-%d", os.Getpid())
	socket, err := supervisor.InstanceSocket(name)
	if err != nil {
		t.Fatal(err)
	}
	run := exec.Command(filepath.Join(bin, "nicstack"), "run", "--name", name, "../../deploy/test_echo.xml")
	out, _ := os.Create(filepath.Join(tmp, "out.log"))
	run.Stdout, run.Stderr = out, out
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	r := &nicstackRun{cmd: run, socket: socket, bin: bin}
	t.Cleanup(func() {
		run.Process.Kill()
		run.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(out.Name())
			t.Logf("nicstack output:\n%s", b)
		}
	})
	status := func(args ...string) (string, error) {
		b, err := exec.Command(filepath.Join(bin, "nicstack"), append([]string{"status"}, args...)...).CombinedOutput()
		return string(b), err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if got, err := status("-s", name); err == nil && strings.Contains(got, "test_client") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("status -s NAME never answered")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got, err := status(); err != nil || !strings.Contains(got, "test_echo") {
		t.Errorf("plain status with one named run: %v\n%s", err, got)
	}
	if got, err := status("-s", "no-such-run"); err == nil || !strings.Contains(got, "no supervisor answers at") {
		t.Errorf("status -s of a run that is not there: %v\n%s", err, got)
	}
	if got, err := status("-s", "../x"); err == nil || !strings.Contains(got, `instance name "../x"`) {
		t.Errorf("status -s with a path: %v\n%s", err, got)
	}
	r.interrupt(t)
	if _, err := os.Stat(filepath.Dir(socket)); !os.IsNotExist(err) {
		t.Errorf("the instance folder %s stays after the run: %v", filepath.Dir(socket), err)
	}
}

// The unit in deploy/ is hardened to systemd's "OK" level: `systemd-analyze security`
// scores its exposure below 5 (it was 9.6 without the hardening).
func TestServiceUnitExposure(t *testing.T) {
	testutil.RequireCommand(t, "systemd-analyze")
	unit, err := os.ReadFile("../../deploy/nicstack@.service")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "nicstack@test.service")
	if err := os.WriteFile(path, unit, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("systemd-analyze", "security", "--offline=true", path).CombinedOutput()
	m := regexp.MustCompile(`Overall exposure level for nicstack@test.service: ([0-9.]+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("systemd-analyze security: %v\n%s", err, out)
	}
	if score, _ := strconv.ParseFloat(string(m[1]), 64); score >= 5 {
		t.Errorf("exposure %.1f, want below 5:\n%s", score, out)
	}
	if !strings.Contains(string(unit), "--name %i") || !strings.Contains(string(unit), "RuntimeDirectory=nicstack/%i") {
		t.Error("the unit does not name its run after the instance in the folder status -s looks in")
	}
}
