package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nicstack/nicstack/internal/testutil"
)

// nicstack capture taps a running scenario without restarting anything: -c frames of a
// component into a pcap file tshark reads, a session by id printed as Genode's nic_dump lines
// naming both sides, --duration, and Ctrl-C, after which the session can be captured again
// (a session takes one capture at a time, so the first one detached).
func TestCaptureOfARunningScenario(t *testing.T) {
	testutil.RequireCommand(t, "tshark")
	r := startEcho(t)
	pids := r.pids(t)
	capture := func(args ...string) *exec.Cmd {
		return exec.Command(filepath.Join(r.bin, "nicstack"), append([]string{"capture", "--socket", r.socket}, args...)...)
	}

	file := filepath.Join(t.TempDir(), "echo.pcap")
	if out, err := capture("test_echo", "-c", "20", "-w", file).CombinedOutput(); err != nil || !strings.Contains(string(out), "20 frames captured") {
		t.Fatalf("capture -c 20 -w: %v\n%s", err, out)
	}
	out, err := exec.Command("tshark", "-r", file, "-T", "fields", "-e", "frame.len").Output()
	if lens := strings.Fields(string(out)); err != nil || len(lens) != 20 || lens[0] != "256" {
		t.Errorf("tshark -r read %q (%v), want 20 frames of 256 bytes", out, err)
	}

	var stdout, stderr bytes.Buffer
	cmd := capture("1", "-c", "40")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("capture 1 -c 40: %v\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n")
	sides := map[string]bool{}
	for _, l := range lines {
		side, rest, _ := strings.Cut(l, ") ")
		sides[side+")"] = true
		if !strings.HasPrefix(rest, "ETH ") || !strings.Contains(rest, " time ") {
			t.Errorf("line %q is not nic_dump's", l)
		}
	}
	if len(lines) != 40 || !sides["(test_echo <- client-uplink)"] || !sides["(client-uplink <- test_echo)"] {
		t.Errorf("capture of session 1 printed\n%s\nwant 40 lines, both ways", stdout.String())
	}

	if out, err := capture("test_client", "--duration", "300ms").CombinedOutput(); err != nil || !strings.Contains(string(out), "the duration is over") {
		t.Errorf("capture --duration: %v\n%s", err, out)
	}

	cmd = capture("1")
	pipe, _ := cmd.StdoutPipe()
	stderr.Reset()
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if !bufio.NewScanner(pipe).Scan() {
		t.Fatal("the capture printed nothing")
	}
	cmd.Process.Signal(os.Interrupt)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil || !strings.Contains(stderr.String(), "stopped") {
			t.Errorf("capture after Ctrl-C: %v\n%s", err, stderr.String())
		}
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatal("capture did not stop on Ctrl-C")
	}
	if out, err := capture("1", "-c", "3").CombinedOutput(); err != nil {
		t.Errorf("capturing the session again after Ctrl-C: %v\n%s", err, out)
	}
	if now := r.pids(t); !slices.Equal(now, pids) {
		t.Errorf("the components' pids went from %v to %v", pids, now)
	}
	if out, err := capture("nic_drv").CombinedOutput(); err == nil || !strings.Contains(string(out), `no component and no session "nic_drv"`) {
		t.Errorf("capture of what the run lacks: %v\n%s", err, out)
	}
}
