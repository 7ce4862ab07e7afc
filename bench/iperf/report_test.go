package iperf

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nicstack/nicstack/internal/iperf"
	"github.com/nicstack/nicstack/runtime/supervisor"
)

func samplePoints() []point {
	var pts []point
	for _, dir := range []string{dirRX, dirTX} {
		for _, itr := range []throttle{"0", "651", "5580", "adaptive"} {
			for _, batch := range []bool{false, true} {
				p := point{RxIrqThrottle: &itr, TxBatch: &batch, Direction: dir, IP: ipv4, Runs: 3, Mbps: 912.4,
					CPU:      map[string]float64{"nic_drv": 31, "nic_router": 24, "intel_nic_hw": 20, "remote_host": 23, "vm": 29},
					IrqsPerS: 11007, TxIrqsPerK: 755.2, DoorbellsPerK: 967.8, SignalsPerK: 112.6, RetransPerS: 12}
				for _, phase := range rrPhases {
					for _, b := range rrSizes {
						p.RR = append(p.RR, rrFigure{Phase: phase, Bytes: b, P50us: 145, P99us: 1210, P999us: 12345, Transactions: 9000})
					}
				}
				if itr == "adaptive" {
					p.ITRPercent = map[string]float64{"lowest": 3, "low": 2, "bulk": 95}
					p.ITRChangesPerS = 28.5
				}
				pts = append(pts, p)
			}
		}
	}
	return pts
}

// The tables group by direction, fit 100 columns, spell tx_batch as the progress lines do,
// and say how adaptive moderation spent its time.
func TestTablesFit(t *testing.T) {
	sc := &scenario{roles: map[string]string{driverBinary: "nic_drv", routerBinary: "nic_router", hardwareBinary: "intel_nic_hw"}}
	var out strings.Builder
	writeTables(&out, samplePoints(), sc, Options{Directions: []string{dirRX, dirTX}, Runs: 3, Time: 10 * time.Second, Latency: true})
	s := out.String()
	for _, want := range []string{directionTitle[dirRX], directionTitle[dirTX], "adaptive       yes", "idle 1 KiB", "idle 1 KiB  145  1210  12345", "adaptive against the fixed settings", "rx_irq_throttle=adaptive tx_batch=yes: ITR lowest/low/bulk/stream 3/2/95/0 %"} {
		if !strings.Contains(s, want) {
			t.Errorf("no %q in\n%s", want, s)
		}
	}
	if rx := s[:max(0, strings.Index(s, directionTitle[dirTX]))]; strings.Count(rx, "ITR lowest/low") != 2 {
		t.Errorf("the directions' rows are mixed:\n%s", s)
	}
	for _, line := range strings.Split(s, "\n") {
		if len([]rune(line)) > 100 {
			t.Errorf("%d columns: %q", len([]rune(line)), line)
		}
	}
	t.Logf("\n%s", s)
}

// --json writes rx_irq_throttle as given: a number, or "adaptive".
func TestThrottleJSON(t *testing.T) {
	b, err := json.Marshal([]throttle{"651", "adaptive"})
	if err != nil || string(b) != `[651,"adaptive"]` {
		t.Errorf("%s, %v", b, err)
	}
}

// The plot draws a categorical throttle axis, adaptive included, with a CPU panel per
// direction, and the references' levels next to the scenario's lines.
func TestPlot(t *testing.T) {
	path := filepath.Join(t.TempDir(), "iperf.png")
	if err := drawPlot(path, samplePoints(), nil); err != nil {
		t.Fatal(err)
	}
	alone, err := os.Stat(path)
	if err != nil || alone.Size() < 10000 {
		t.Fatalf("plot: %v, %v", alone, err)
	}
	refs := []point{{Reference: "passt", Direction: dirRX, Runs: 3, Mbps: 900, CPU: map[string]float64{"qemu": 99, "passt": 40, machine: 180}}}
	if err := drawPlot(path, samplePoints(), refs); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() <= alone.Size() {
		t.Errorf("plot with a reference: %v, %v; without: %d bytes", fi, err, alone.Size())
	}
	for itr, want := range map[string]string{"0": "0\noff", "651": "651\n166.7µs\n≤6000/s", "5580": "5580\n1.43ms\n≤700/s", "adaptive": "adaptive"} {
		if got := throttleLabel(itr); got != want {
			t.Errorf("tick label of %s: %q, want %q", itr, got, want)
		}
	}
}

// A client's command line written back for the guest keeps its direction.
func TestClientCommandDirection(t *testing.T) {
	for _, dir := range []string{dirRX, dirTX, dirBidir} {
		c := &iperf.Command{Client: "198.18.0.2", Port: 5201, Time: 10, Parallel: 1, Length: 128 << 10, Reverse: dir == dirRX, Bidir: dir == dirBidir}
		back, err := iperf.ParseCommand(strings.Fields(clientCommand(c)))
		if err != nil || back.Reverse != c.Reverse || back.Bidir != c.Bidir {
			t.Errorf("%s: %q read back as %+v, %v", dir, clientCommand(c), back, err)
		}
	}
}

// --congestion reaches every Linux iperf3 as -C, and only a name the kernel offers, for guests
// that run Linux's TCP, is taken.
func TestCongestion(t *testing.T) {
	if got := strings.Join(iperfTest{run: 5 * time.Second, congestion: "cubic"}.args(), " "); got != "-t 5 -C cubic" {
		t.Errorf("args: %q", got)
	}
	for _, c := range []struct{ scenario, congestion, want string }{
		{"sculpt_iperf.hid", "cubic", "guest vm does not run Linux's TCP"},
		{"linux_tap.hid", "no-such-algorithm", "this kernel offers"},
	} {
		err := Run(context.Background(), io.Discard, "../../deploy/"+c.scenario, Options{Congestion: c.congestion, Runs: 1, Time: time.Second})
		if err == nil || !strings.Contains(err.Error(), "--congestion "+c.congestion+": "+c.want) {
			t.Errorf("%s --congestion %s: %v, want %q", c.scenario, c.congestion, err, c.want)
		}
	}
	if (Options{Congestion: "cubic"}).congestionTitle() != "TCP congestion control cubic" {
		t.Errorf("title: %q", (Options{Congestion: "cubic"}).congestionTitle())
	}
}

// --omit reaches every iperf client, and the seconds it leaves out count in no CPU figure.
func TestOmit(t *testing.T) {
	c := &iperf.Command{Client: "198.18.0.2", Port: 5201, Time: 5, Omit: 1, Parallel: 1, Length: 128 << 10}
	if back, err := iperf.ParseCommand(strings.Fields(clientCommand(c))); err != nil || back.Omit != 1 || back.Time != 5 {
		t.Errorf("%q read back as %+v, %v", clientCommand(c), back, err)
	}
	if got := strings.Join(iperfTest{run: 5 * time.Second, omit: time.Second}.args(), " "); got != "-t 5 -O 1" {
		t.Errorf("args: %q", got)
	}
	if got := strings.Join(iperfTest{run: 5 * time.Second}.args(), " "); got != "-t 5" {
		t.Errorf("args without omit: %q", got)
	}
	t0 := time.Now()
	at := func(ms int, traffic uint64) sample {
		return sample{at: t0.Add(time.Duration(ms) * time.Millisecond), traffic: traffic,
			status: supervisor.Status{Components: []supervisor.ComponentStatus{{Name: "vm"}}}}
	}
	w := trafficWindow{omit: time.Second}
	// DHCP's trickle, then traffic from 500 ms: measured from 1500 ms on.
	samples := []sample{at(0, 0), at(500, 1000), at(1000, 5<<20), at(1500, 10<<20), at(2000, 15<<20), at(2500, 20<<20)}
	var counted []int
	for i := 1; i < len(samples); i++ {
		if w.counts(samples[i-1], samples[i]) {
			counted = append(counted, i)
		}
	}
	if fmt.Sprint(counted) != "[4 5]" {
		t.Errorf("intervals counted: %v, want those from 1500 ms on: [4 5]", counted)
	}
	for _, bad := range []time.Duration{-time.Second, 1500 * time.Millisecond, 61 * time.Second} {
		err := Run(context.Background(), io.Discard, "../../deploy/sculpt_iperf.hid", Options{Omit: bad, Runs: 1, Time: time.Second})
		if err == nil || !strings.Contains(err.Error(), "--omit") {
			t.Errorf("--omit %v: %v", bad, err)
		}
	}
}
