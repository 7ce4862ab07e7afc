package iperf

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"fmt"
	"io"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/nicstack/nicstack/runtime/config"
)

// deploy/qemu_e1000e.hid's guest runs the patched inner scenario: the driver's settings and the
// vm's test as the point says, carried gzip'd and base64'd within the kernel command line; the
// host's guest start no longer ends the run; a reference runs the same test on Linux's sockets.
func TestGuestScenarioPatch(t *testing.T) {
	sc, err := loadScenario("../../deploy/qemu_e1000e.hid")
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.clients) != 1 || sc.clients[0].guest == nil || sc.clients[0].server != "remote_host" || sc.driver == nil || sc.roles[driverBinary] != "nic_drv" {
		t.Fatalf("clients %+v, driver %v, roles %v: want the guest, counted by remote_host, and the inner driver", sc.clients, sc.driver, sc.roles)
	}
	itr, batch := throttle("5580"), true
	o := Options{Time: 7 * time.Second, UDPRate: 2000}
	text, err := sc.patch(setting{itr: &itr, batch: &batch, dir: dirRX, ip: ipv4}, o)
	if err != nil {
		t.Fatal(err)
	}
	host, err := config.Parse("host", text)
	if err != nil {
		t.Fatal(err)
	}
	var run string
	for _, st := range host.Subs("start") {
		if st.Name() == "guest" {
			if st.Sub("exit") != nil {
				t.Error("the guest start still ends the run")
			}
			for _, a := range st.Sub("config").Subs("arg") {
				if v, ok := strings.CutPrefix(a.String("value", ""), "--run="); ok {
					run = v
				}
			}
		}
	}
	if len(run) > maxGuestCommand || !strings.HasSuffix(run, "guest-scenario /tmp/bench.hid dhcp.lease iperf.result 180 0000:00:02.0") {
		t.Fatalf("%d bytes: %q", len(run), run)
	}
	b64 := strings.Fields(run)[1]
	z, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(z))
	if err != nil {
		t.Fatal(err)
	}
	inner, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`rx_irq_throttle="5580"`, `tx_batch="yes"`, `tx_irq="queue_empty"`, `iperf="-c 198.18.0.2 -p 5201 -t 7 -P 1 -l 64 -u -b 1024000 -R"`} {
		if !bytes.Contains(inner, []byte(want)) {
			t.Errorf("no %q in the guest's scenario:\n%s", want, inner)
		}
	}
	if _, err := sc.patch(setting{dir: dirTX, ref: "linux"}, Options{Time: 3 * time.Second}); err != nil {
		t.Fatal(err)
	}
	v := sc.clients[0].guest.arg.String("value", "")
	if !strings.Contains(v, "guest-linux-router 198.18.0.1/24 10.0.1.1/24 10.0.1.2 -c 198.18.0.2 -p 5201 -t 3 ") || strings.Contains(v, "-R") || strings.Contains(v, " -u ") || strings.Contains(v, `"`) {
		t.Errorf("the reference's command: %q", v)
	}
}

// statusJSON is a guest supervisor's status with nic_drv's counters and CPU time.
func statusJSON(cpuSeconds float64, interrupts, tdt, txFrames int) string {
	return fmt.Sprintf(`{"components": [{"name": "nic_drv", "binary": "ipxe_nic", "cpu_seconds": %g, `+
		`"counters": {"interrupts": %d, "tdt_writes": %d, "tx_frames": %d}}, `+
		`{"name": "vm", "binary": "vm", "cpu_seconds": 1}]}`, cpuSeconds, interrupts, tdt, txFrames)
}

// The guest's markers, as the host's log carries them behind kernel messages and in pieces,
// give the guest's components' CPU over the test's time (from the guest's CPU times) and the
// driver's interrupt and doorbell rates; a reference's give its interrupts from
// /proc/interrupts. QEMU's CPU is the only host figure that stays.
func TestReadGuest(t *testing.T) {
	console := "[guest] [    1.2] e1000e: link up\n" +
		"[guest] NICSTACK-GUEST: status-start " + statusJSON(1.5, 100, 40, 1000) + "\n" +
		"[guest] NICSTACK-GUEST: stat-start cpu  1000 0 500 2000 100 0 100 0 0 0\n" +
		"[guest] [nic_drv] level=INFO msg=x\n" +
		"[guest] NICSTACK-GUEST: status " + statusJSON(3.5, 1100, 50, 11000) + "\n" +
		// 800 ticks on 2 vCPUs: 4 s; busy 400 of them
		"[guest] NICSTACK-GUEST: stat cpu  1200 0 600 2400 100 0 200 0 0 0\n"
	var m consoleMarkers
	for i := 0; i < len(console); i += 7 {
		m.Write([]byte(console[i:min(i+7, len(console))]))
	}
	if strings.Contains(m.String(), "level=INFO") || !strings.Contains(m.String(), "stat cpu") {
		t.Fatalf("kept:\n%s", m.String())
	}
	g, err := readGuest(m.String(), 2)
	if err != nil {
		t.Fatal(err)
	}
	p := point{CPU: map[string]float64{"guest": 90, "remote_host": 20}, SignalsPerK: 3}
	g.fill(&p, "guest")
	near := func(got, want float64) bool { return math.Abs(got-want) < 1e-6 }
	if !near(p.Seconds, 4) || !near(p.CPU["guest"], 100) || !near(p.CPU["qemu"], 90) || !near(p.CPU["nic_drv"], 50) ||
		!near(p.CPU["vm"], 0) || len(p.CPU) != 4 || !near(p.IrqsPerS, 250) || !near(p.DoorbellsPerK, 1) || p.SignalsPerK != 0 {
		t.Errorf("%+v", p)
	}

	ref := "NICSTACK-GUEST: irq-start 10\nNICSTACK-GUEST: stat-start cpu 0 0 0 100 0 0 0 0 0 0\n" +
		"NICSTACK-GUEST: irq 2010\nNICSTACK-GUEST: stat cpu 50 0 0 250 0 0 0 0 0 0\n"
	g, err = readGuest(ref, 2)
	if err != nil {
		t.Fatal(err)
	}
	p = point{CPU: map[string]float64{}}
	g.fill(&p, "guest")
	if !near(p.Seconds, 1) || !near(p.IrqsPerS, 2000) || !near(p.CPU["guest"], 50) {
		t.Errorf("reference: %+v", p)
	}

	for _, bad := range []string{
		"NICSTACK-GUEST: stat-start cpu 1 2 3\nNICSTACK-GUEST: stat cpu 1 2 3 4 5 6 7 8\n",
		"NICSTACK-GUEST: stat-start cpu 0 0 0 100 0 0 0 0 0 0\n",
		"NICSTACK-GUEST: stat-start cpu 0 0 0 100 0 0 0 0 0 0\nNICSTACK-GUEST: stat cpu 0 0 0 100 0 0 0 0 0 0\n",
		"NICSTACK-GUEST: status-start {\nNICSTACK-GUEST: stat-start cpu 0 0 0 100 0 0 0 0 0 0\nNICSTACK-GUEST: stat cpu 0 0 0 200 0 0 0 0 0 0\n",
	} {
		if _, err := readGuest(bad, 1); err == nil {
			t.Errorf("no error for %q", bad)
		}
	}
}
