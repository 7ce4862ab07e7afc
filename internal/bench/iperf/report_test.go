package iperf

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nicstack/nicstack/iperf"
)

func samplePoints() []point {
	var pts []point
	for _, dir := range []string{dirRX, dirTX} {
		for _, itr := range []throttle{"0", "651", "5580", "adaptive"} {
			for _, batch := range []bool{false, true} {
				p := point{RxIrqThrottle: &itr, TxBatch: &batch, Direction: dir, Runs: 3, Mbps: 912.4,
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
	for _, want := range []string{directionTitle[dirRX], directionTitle[dirTX], "adaptive       yes", "idle 1 KiB", "145/1210/12345", "adaptive against the fixed settings", "rx rx_irq_throttle=adaptive tx_batch=yes: ITR lowest/low/bulk/stream 3/2/95/0 %"} {
		if !strings.Contains(s, want) {
			t.Errorf("no %q in\n%s", want, s)
		}
	}
	if strings.Index(s, directionTitle[dirTX]) < strings.LastIndex(s, "rx rx_irq_throttle") {
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
