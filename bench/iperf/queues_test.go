package iperf

import (
	"io"
	"strings"
	"testing"
	"time"
)

// --queues 1,2 on the seed topology and the direct one: every point runs once per count, and
// a point with N pairs gives the vm queues="N" and the QEMU guest -netdev ...,queues=N,
// -device ...,mq=on with the scenario's vectors=0 kept, and N vCPUs, and with 2 the guest
// program the whole row of the affinity space (1 keeps the scenario's place); a scenario
// without a vhost-user vm is refused.
func TestQueuesPatch(t *testing.T) {
	for _, file := range []string{"qemu_iperf_vhost.hid", "qemu_iperf_vhost_direct.hid"} {
		sc, err := loadScenario("../../deploy/" + file)
		if err != nil {
			t.Fatal(err)
		}
		o := Options{Runs: 1, Time: time.Second, Directions: []string{dirRX}, Throttles: []string{"651"}, Batches: []string{"yes"}, Queues: []int{1, 2}}
		matrix, _, err := o.matrix(sc, file, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if len(matrix) != 2 || matrix[0].pairs != 1 || matrix[1].pairs != 2 {
			t.Fatalf("%s: matrix %v, want queues 1 and 2", file, matrix)
		}
		for _, tc := range []struct {
			m    setting
			want []string
		}{
			{matrix[1], []string{`queues="2"`, `--netdev=vhost-user,id=net0,chardev=vhu,queues=2"`,
				`--device=virtio-net-pci,netdev=net0,vectors=0,mq=on"`, `--cpus=2"`, `<affinity ypos="1"/>`}},
			{matrix[0], []string{`queues="1"`, `--netdev=vhost-user,id=net0,chardev=vhu,queues=1"`,
				`--device=virtio-net-pci,netdev=net0,vectors=0,mq=off"`, `--cpus=1"`, `<affinity xpos="3" ypos="1"/>`}},
		} {
			text, err := sc.patch(tc.m, o)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if strings.Count(string(text), w) != 1 {
					t.Errorf("%s %s: want %s once in\n%s", file, tc.m, w, text)
				}
			}
		}
		if got := matrix[1].String(); !strings.Contains(got, "queues=2") {
			t.Errorf("%s: setting %q does not name its queues", file, got)
		}
	}
	if got := setOption("virtio-net-pci,netdev=net0", "vectors", "6"); got != "virtio-net-pci,netdev=net0,vectors=6" {
		t.Errorf("setOption: %s", got)
	}
	sc, err := loadScenario("../../deploy/qemu_iperf.hid")
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Runs: 1, Directions: []string{dirRX}, Throttles: []string{"651"}, Batches: []string{"yes"}, Queues: []int{2}}
	if _, _, err := o.matrix(sc, "qemu_iperf.hid", io.Discard); err == nil || !strings.Contains(err.Error(), "vhost-user") {
		t.Errorf("qemu_iperf.hid --queues 2: %v, want an error about vhost-user", err)
	}
	o.Queues = []int{17}
	if _, _, err := o.matrix(sc, "qemu_iperf.hid", io.Discard); err == nil {
		t.Error("--queues 17: no error")
	}
}

// The vm's per-pair counters become each pair's share of the frames, medians over the runs;
// a vm without them (one pair) gives none.
func TestPairShares(t *testing.T) {
	var a counterDeltas
	before := map[string]uint64{"vhost_rx_frames_pair0": 10, "vhost_tx_frames_pair0": 10, "vhost_rx_frames_pair1": 0, "vhost_tx_frames_pair1": 0}
	after := map[string]uint64{"vhost_rx_frames_pair0": 40, "vhost_tx_frames_pair0": 40, "vhost_rx_frames_pair1": 20, "vhost_tx_frames_pair1": 20}
	a.addPairs(after, func(name string) uint64 { return after[name] - before[name] })
	a.addPairs(map[string]uint64{"vhost_rx_frames": 5}, func(string) uint64 { return 5 })
	if got := pairShares(a.pairFrames); len(got) != 2 || got[0] != 60 || got[1] != 40 {
		t.Errorf("shares %v, want 60 40", got)
	}
	if got := pairShares(nil); got != nil {
		t.Errorf("shares without counters %v", got)
	}
	runs := []point{{PairShares: []float64{60, 40}}, {PairShares: []float64{50, 50}}, {PairShares: []float64{70, 30}}, {}}
	if got := medianPairShares(runs); len(got) != 2 || got[0] != 60 || got[1] != 40 {
		t.Errorf("median shares %v, want 60 40", got)
	}
}
