package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nicstack/nicstack/components"
	"github.com/nicstack/nicstack/internal/scenariotest"
	"github.com/nicstack/nicstack/internal/testutil"
	"github.com/nicstack/nicstack/runtime/pcap"
	"github.com/nicstack/nicstack/runtime/supervisor"
)

// deploy/nic_dump.xml with real processes, as Genode's nic_dump.run: a pinger's Nic session
// through nic_dump to nic_router. Echo requests pass up and replies down; nic_dump logs each
// in Genode's format with the run script's styles, and its capture file holds every frame it
// logged, which tshark reads.
func TestPingThroughNicDump(t *testing.T) {
	testutil.RequireCommand(t, "tshark")
	testutil.Binary(t, "github.com/nicstack/nicstack/components/nic_perf")
	testutil.Binary(t, "github.com/nicstack/nicstack/components/nic_router")
	bin := filepath.Dir(testutil.Binary(t, "github.com/nicstack/nicstack/components/nic_dump"))
	capture := filepath.Join(t.TempDir(), "nic_dump.pcap")
	text := scenariotest.Deploy(t, "nic_dump.xml", "/tmp/nicstack-nic_dump.pcap", capture)
	run := scenariotest.Start(t, "nic_dump.xml", text, supervisor.Options{BinDirs: []string{bin}, Components: components.Table})
	for deadline := time.Now().Add(30 * time.Second); run.Component("ping").Counters["rx_frames"] < 5; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("ping got %d echo replies through nic_dump, want 5", run.Component("ping").Counters["rx_frames"])
		}
	}
	run.Stop()

	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^\[nic_dump\] \(uplink <- downlink\) ETH IPV4 10\.0\.3\.2 > 10\.0\.3\.1  ICMP typ 8 cod 0 crc \d+ roh \d+ time \d+ ms \(Δ \d+ ms\)$`),
		regexp.MustCompile(`(?m)^\[nic_dump\] \(downlink <- uplink\) ETH IPV4 10\.0\.3\.1 > 10\.0\.3\.2  ICMP typ 0 cod 0 crc \d+ roh \d+ time \d+ ms \(Δ \d+ ms\)$`),
	} {
		if !want.MatchString(run.Logs.String()) {
			t.Errorf("no log line matches %s", want)
		}
	}
	logged := regexp.MustCompile(`(?m)^\[nic_dump\] \((uplink <- downlink|downlink <- uplink)\) `).FindAllStringIndex(run.Logs.String(), -1)

	b, err := os.ReadFile(capture)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := pcap.ReadFile(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(logged) || len(recs) < 10 {
		t.Errorf("the capture holds %d frames, the log %d (want the same, at least 10)", len(recs), len(logged))
	}
	out, err := exec.Command("tshark", "-r", capture, "-T", "fields", "-e", "frame.number", "-e", "icmp.type").Output()
	if err != nil {
		t.Fatalf("tshark -r: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(recs) || !strings.Contains(string(out), "\t8\n") || !strings.Contains(string(out), "\t0\n") {
		t.Errorf("tshark read %d frames, want %d with echo requests (8) and replies (0):\n%s", len(lines), len(recs), out)
	}
}
