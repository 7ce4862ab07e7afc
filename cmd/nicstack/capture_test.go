package main

import (
	"bufio"
	"bytes"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nicstack/nicstack/internal/testutil"
	"github.com/nicstack/nicstack/netdev/header"
	"github.com/nicstack/nicstack/runtime/capture"
	"github.com/nicstack/nicstack/runtime/pcap"
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

// capture prints an IPv6 frame's IPv6 and ICMPv6 in their default style.
func TestCapturePrintsIPv6(t *testing.T) {
	src, dst := netip.MustParseAddr("2001:db8::1").As16(), netip.MustParseAddr("2001:db8::2").As16()
	f := make([]byte, header.EthLen+header.IPv6Len+header.ICMPv6Len+4)
	e := header.Eth(f)
	e.SetDst(header.MAC{2, 2, 2, 2, 2, 0})
	e.SetSrc(header.MAC{2, 0, 0, 0, 0, 1})
	e.SetType(header.EtherTypeIPv6)
	header.PutIPv6(e.Payload(), header.ICMPv6Len+4, header.ProtoICMPv6, 64, src, dst)
	header.PutICMPv6Echo(e.Payload()[header.IPv6Len:], header.ICMPv6EchoRequest, 1, 2, src, dst)

	var out bytes.Buffer
	start := time.Now()
	c := &capturer{cfg: lineStyle, lines: bufio.NewWriter(&out), timing: header.NewTiming(start),
		names: map[uint64][2]string{1: {"test_echo", "client-uplink"}}}
	if err := c.frame(capture.Message{Session: 1, Dir: capture.In}, pcap.Record{Time: start.Add(5 * time.Millisecond), Frame: f}, nil); err != nil {
		t.Fatal(err)
	}
	c.flush()
	want := "(test_echo <- client-uplink) ETH 02:00:00:00:00:01 > 02:02:02:02:02:00  IPV6 2001:db8::1 > 2001:db8::2  ICMP6 echo request id 1 seq 2 time 5 ms (Δ 5 ms)\n"
	if out.String() != want {
		t.Errorf("capture printed\n%q, want\n%q", out.String(), want)
	}
}
