package iperf

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/nicstack/nicstack/bench"
	"github.com/nicstack/nicstack/runtime/config"
)

// --queues N runs a scenario whose QEMU guest reaches a vm over vhost-user with N queue pairs
// (docs/vms.md, Multi-queue): the vm's <config queues="N"/>, and the guest program's QEMU
// -netdev vhost-user,...,queues=N, -device virtio-net-pci,...,mq=on and N vCPUs, as Linux's
// virtio_net uses min(pairs, online CPUs) pairs. The device's MSI-X vectors stay as written
// where the scenario sets them (vectors=0: QEMU 7.2 under TCG crashes with a vhost-user NIC's
// MSI-X, and the pairs then share the legacy interrupt); where it does not, 2N+2 (a vector
// per ring, one for the control queue, one for config changes).
//
// With more than one pair the guest program runs on the whole row of the affinity space (its
// <affinity> loses xpos and width), so that its N vCPU threads are not all on the one CPU of its
// placement: under TCG, with 2 pairs on this 2-CPU machine, that alone ran faster than the
// scenario's placement in 11 of 12 rounds of two invocations, medians 1.4-2.0 x
// (docs/performance.md); with one pair it was slower, so the scenario keeps its own.
// --affinity, applied after, overrides it.
type vhostQueues struct {
	vms            []*config.Node // the <config guest="vhost-user"/>s
	netdev, device *config.Node   // the guest program's --netdev= and --device= <arg>s
	cpus           *config.Node   // its --cpus= <arg>, added when it had none
	guest          *config.Node   // the guest program's <start>
	affinity       *config.Node   // its <affinity> as written, nil without
}

// maxQueues is the vm's most queue pairs (drivers/vhostuser's).
const maxQueues = 16

// findVhostQueues finds what --queues patches: the vhost-user vms and the one QEMU guest
// program on vhost-user; an error says what the scenario lacks.
func (sc *scenario) findVhostQueues() (*vhostQueues, error) {
	q := &vhostQueues{}
	for _, st := range sc.root.Subs("start") {
		if cfg := st.Sub("config"); cfg != nil && startBinary(st) == "vm" && cfg.String("guest", "") == "vhost-user" {
			q.vms = append(q.vms, cfg)
		}
	}
	for _, c := range sc.clients {
		if c.vmArg == nil {
			continue
		}
		if q.netdev != nil {
			return nil, fmt.Errorf("--queues: want one QEMU guest, the scenario has more")
		}
		for _, st := range sc.root.Subs("start") {
			if st.Name() != c.name {
				continue
			}
			for _, a := range st.Sub("config").Subs("arg") {
				v := a.String("value", "")
				switch {
				case strings.HasPrefix(v, "--netdev=vhost-user,"):
					q.netdev = a
				case strings.HasPrefix(v, "--device=virtio-net-pci,"):
					q.device = a
				case strings.HasPrefix(v, "--cpus="):
					q.cpus = a
				}
			}
			if q.netdev != nil && q.cpus == nil {
				q.cpus = &config.Node{Type: "arg", Pos: st.Pos}
				cfg := st.Sub("config")
				cfg.Nodes = append(cfg.Nodes, q.cpus)
			}
			if q.netdev != nil {
				q.guest = st
				if a := st.Sub("affinity"); a != nil {
					q.affinity = a.Clone()
				}
			}
		}
	}
	switch {
	case len(q.vms) == 0:
		return nil, fmt.Errorf("--queues: the scenario has no vm with guest=\"vhost-user\"")
	case q.netdev == nil || q.device == nil:
		return nil, fmt.Errorf("--queues: want a QEMU guest program (nicstack guest) with --netdev=vhost-user,... and --device=virtio-net-pci,...")
	}
	return q, nil
}

// patch sets n pairs everywhere.
func (q *vhostQueues) patch(n int) {
	for _, vm := range q.vms {
		vm.Set("queues", strconv.Itoa(n))
	}
	netdev := strings.TrimPrefix(q.netdev.String("value", ""), "--netdev=")
	q.netdev.Set("value", "--netdev="+setOption(netdev, "queues", strconv.Itoa(n)))
	device := strings.TrimPrefix(q.device.String("value", ""), "--device=")
	mq := "off"
	if n > 1 {
		mq = "on"
	}
	device = setOption(device, "mq", mq)
	if v, ok := option(device, "vectors"); !ok || v != "0" {
		device = setOption(device, "vectors", strconv.Itoa(2*n+2))
	}
	q.device.Set("value", "--device="+device)
	q.cpus.Set("value", "--cpus="+strconv.Itoa(n))
	q.guest.Remove("affinity")
	if q.affinity != nil {
		a := q.affinity.Clone()
		if n > 1 {
			removeAttr(a, "xpos")
			removeAttr(a, "width")
		}
		q.guest.Nodes = append(q.guest.Nodes, a)
	}
}

// option is the value of key in QEMU's comma-separated key=value list s.
func option(s, key string) (string, bool) {
	for _, kv := range strings.Split(s, ",") {
		if v, ok := strings.CutPrefix(kv, key+"="); ok {
			return v, true
		}
	}
	return "", false
}

// setOption sets key=value in QEMU's comma-separated list s, in its place or at the end.
func setOption(s, key, value string) string {
	f := strings.Split(s, ",")
	for i, kv := range f {
		if strings.HasPrefix(kv, key+"=") {
			f[i] = key + "=" + value
			return strings.Join(f, ",")
		}
	}
	return s + "," + key + "=" + value
}

// withQueues checks --queues and runs every point of the matrix once per value.
func (o Options) withQueues(sc *scenario, matrix []setting) ([]setting, error) {
	if len(o.Queues) == 0 {
		return matrix, nil
	}
	for _, n := range o.Queues {
		if n < 1 || n > maxQueues {
			return nil, fmt.Errorf("--queues %d: want 1 to %d queue pairs", n, maxQueues)
		}
	}
	var err error
	if sc.mq, err = sc.findVhostQueues(); err != nil {
		return nil, err
	}
	var out []setting
	for _, m := range matrix {
		for _, n := range o.Queues {
			m.pairs = n
			out = append(out, m)
		}
	}
	return out, nil
}

// addPairs adds a component's per-pair frames (drivers/vhostuser's vhost_rx_frames_pairP and
// vhost_tx_frames_pairP, which only a vm of more than one pair has) over an interval.
func (a *counterDeltas) addPairs(counters map[string]uint64, delta func(string) uint64) {
	for p := range maxQueues {
		rx, tx := fmt.Sprintf("vhost_rx_frames_pair%d", p), fmt.Sprintf("vhost_tx_frames_pair%d", p)
		if _, ok := counters[rx]; !ok {
			return
		}
		if len(a.pairFrames) <= p {
			a.pairFrames = append(a.pairFrames, make([]uint64, p+1-len(a.pairFrames))...)
		}
		a.pairFrames[p] += delta(rx) + delta(tx)
	}
}

// pairShares is each pair's share of frames in percent, nil without frames.
func pairShares(frames []uint64) []float64 {
	var sum uint64
	for _, f := range frames {
		sum += f
	}
	if sum == 0 {
		return nil
	}
	s := make([]float64, len(frames))
	for i, f := range frames {
		s[i] = float64(f) * 100 / float64(sum)
	}
	return s
}

// medianPairShares is each pair's median share over the runs that have them.
func medianPairShares(runs []point) []float64 {
	var with []point
	for _, r := range runs {
		if len(r.PairShares) > 0 {
			with = append(with, r)
		}
	}
	if len(with) == 0 {
		return nil
	}
	s := make([]float64, len(with[0].PairShares))
	for i := range s {
		s[i] = bench.Median(with, func(r point) float64 {
			if i < len(r.PairShares) {
				return r.PairShares[i]
			}
			return 0
		})
	}
	return s
}

// writePairShares prints how the frames spread over the pairs, for the points that count them.
func writePairShares(out io.Writer, points []point) {
	for _, p := range points {
		if len(p.PairShares) == 0 {
			continue
		}
		shares := make([]string, len(p.PairShares))
		for i, v := range p.PairShares {
			shares[i] = fmt.Sprintf("%.0f%%", v)
		}
		fmt.Fprintf(out, "%s: frames per queue pair (both ways, the vm's counters): %s\n", p.setting(), strings.Join(shares, " / "))
	}
}
