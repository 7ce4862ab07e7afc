package iperf

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nicstack/nicstack/drivers/ipxe"
	"github.com/nicstack/nicstack/internal/iperf"
	"github.com/nicstack/nicstack/runtime/supervisor"
)

// sample is what one status tells the bench.
type sample struct {
	at       time.Time
	status   supervisor.Status
	traffic  uint64 // bytes through the clients' sessions
	finished int    // clients whose test ended
	mbps     float64
	// retransmits the embedded guests counted (a netns guest's come with its result)
	retransmits uint64
}

// read takes a status apart; results holds what the bench's own iperf3 runs measured.
func (sc *scenario) read(st supervisor.Status, results map[string]float64) sample {
	sm := sample{at: time.Now(), status: st}
	for _, c := range st.Components {
		sm.retransmits += c.Counters["tcp_retransmits"] // embedded guests count them
		for _, cl := range sc.clients {
			if c.Name != cl.counted() {
				continue
			}
			for _, ss := range c.Sessions {
				sm.traffic += ss.Sent.Bytes + ss.Received.Bytes
			}
			if mbps, ok := results[cl.name]; ok {
				sm.finished++
				sm.mbps += mbps
			} else if cl.netns == "" && c.Counters["iperf_tests"] > 0 {
				sm.finished++
				sm.mbps += float64(c.Counters["iperf_bits_per_second"]+c.Counters["iperf_bidir_reverse_bits_per_second"]) / 1e6
			}
		}
	}
	return sm
}

// runInNetns runs the client's test with the real iperf3 inside its guest's namespace, once
// the supervisor made it, retrying while the server is not up yet.
func runInNetns(ctx context.Context, s *supervisor.Supervisor, c *client, t iperfTest) (mbps, cpu float64, retransmits uint64, err error) {
	var last error
	for ctx.Err() == nil {
		path, ok := s.Netns(c.netns)
		if ok {
			argv := append([]string{"iperf3", "-J", "-c", c.cmd.Client, "-p", strconv.Itoa(c.cmd.Port),
				"-P", strconv.Itoa(c.cmd.Parallel)}, t.args()...)
			if c.cmd.UDP {
				argv = append(argv, "-u", "-l", strconv.Itoa(c.cmd.Length))
			}
			if b := rateArg(c.cmd); b != "" {
				argv = append(argv, "-b", b)
			}
			argv = append(argv, directionArgs(c.cmd)...)
			if c.cmd.Version6 {
				argv = append(argv, "-6")
			}
			var out bytes.Buffer
			cmd := supervisor.ExecIn(ctx, path, argv)
			cmd.Stdout = &out
			err := cmd.Run()
			var rep iperf.Report
			if jerr := json.Unmarshal(out.Bytes(), &rep); jerr == nil && rep.Error == "" && err == nil {
				if s := rep.End.SumSent; s != nil && s.Retransmits != nil {
					retransmits = *s.Retransmits
				}
				return bothWays(&rep), endsCPU(&rep), retransmits, nil
			} else if rep.Error != "" {
				err = errors.New(rep.Error)
			} else if err == nil {
				err = jerr
			}
			last = err
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
	if last == nil {
		return 0, 0, 0, fmt.Errorf("iperf3 in namespace %s: the namespace never came up (is its component running? -v shows the logs)", c.netns)
	}
	return 0, 0, 0, fmt.Errorf("iperf3 in namespace %s: %v", c.netns, last)
}

// activeBytes is the traffic in an interval that counts it as measured (not start-up or DHCP).
const activeBytes = 1 << 20

// trafficWindow picks the intervals between two status samples that are measured: those that
// carried traffic, from omit after the first one did (iperf's -O leaves those seconds out of
// its result, and the components' CPU leaves them out too).
type trafficWindow struct {
	omit  time.Duration
	start time.Time // the traffic began; zero before
}

func (w *trafficWindow) counts(prev, cur sample) bool {
	if cur.traffic-prev.traffic < activeBytes || prev.status.Components == nil {
		return false
	}
	if w.start.IsZero() {
		w.start = prev.at
	}
	return !prev.at.Before(w.start.Add(w.omit))
}

// measure runs the scenario once at setting m.
func measure(ctx context.Context, sc *scenario, m setting, o Options, prog *progress) (point, error) {
	p := point{CPU: map[string]float64{}}
	text, err := sc.patch(m, o)
	if err != nil {
		return p, err
	}
	runCtx, cancelRun := context.WithCancel(ctx) // also ends the iperf3s a netns guest runs
	defer cancelRun()
	console := &consoleMarkers{} // a QEMU guest's, which prints the figures of a guest scenario
	c := o.Components
	c.Logs = console
	if o.Logs != nil {
		c.Logs = io.MultiWriter(o.Logs, console)
	}
	run, err := c.StartScenario(runCtx, "iperf", text)
	if err != nil {
		return p, err
	}
	defer run.Stop()
	s := run.S

	results := map[string]float64{}
	type result struct {
		name        string
		mbps, cpu   float64
		retransmits uint64
		err         error
	}
	measured := make(chan result, len(sc.clients))
	for _, c := range sc.clients {
		if c.netns != "" {
			go func() {
				ctx, cancel := context.WithTimeout(runCtx, o.test().total()+60*time.Second)
				defer cancel()
				mbps, cpu, retr, err := runInNetns(ctx, s, c, o.test())
				measured <- result{c.name, mbps, cpu, retr, err}
			}()
		}
	}
	var acc counterDeltas
	var retransmits uint64
	limit := o.test().total() + 60*time.Second
	if sc.inGuest() {
		limit += 3 * time.Minute // TCG boots the guest and its scenario slowly on a loaded machine
	}
	deadline := time.Now().Add(limit)
	prev := sample{at: time.Now()}
	win := trafficWindow{omit: o.Omit}
	queues := queueSamples{}
	for {
		select {
		case <-ctx.Done():
			return p, ctx.Err()
		case err := <-run.Done:
			run.Done <- err
			return p, fmt.Errorf("the scenario ended early: %v", err)
		case r := <-measured:
			if r.err != nil {
				return p, r.err
			}
			results[r.name] = r.mbps
			retransmits += r.retransmits
			p.EndsCPU += r.cpu
		case <-time.After(500 * time.Millisecond):
		}
		st, ok := s.Status()
		if !ok {
			continue
		}
		cur := sc.read(st, results)
		if win.counts(prev, cur) {
			acc.add(prev, cur)
			queues.add(st)
		}
		if !win.start.IsZero() {
			prog.traffic(cur.at.Sub(win.start).Seconds())
		}
		prev = cur
		if cur.finished == len(sc.clients) {
			p.Mbps = cur.mbps
			retransmits += cur.retransmits
			break
		}
		if time.Now().After(deadline) {
			return p, fmt.Errorf("the iperf test did not finish within %v (run with -v for the logs)", limit)
		}
	}
	acc.fill(&p)
	p.Queues = queues.figures()
	if acc.seconds > 0 {
		p.RetransPerS = float64(retransmits) / acc.seconds
	}
	if p.EndsCPU > 0 {
		p.GbitPerCPUSecond = gbitPerCPUSecond(p.Mbps, p.pathCPU())
	}
	for _, c := range sc.clients {
		if c.guest != nil {
			g, err := waitGuest(console, c.guest.cpus)
			if err != nil {
				return p, err
			}
			g.fill(&p, c.name)
		}
	}
	if o.Latency {
		p.RR, err = sc.readRR(ctx, s, o.test())
	}
	return p, err
}

// counterDeltas sums what changed over the intervals in which traffic flowed.
type counterDeltas struct {
	seconds     float64
	cpuSeconds  map[string]float64 // percent-seconds per component
	irqs, txIrq uint64
	tdtWrites   uint64
	txFrames    uint64 // the NIC sent
	signals     uint64
	frames      uint64
	itrMS       [ipxe.Classes]uint64 // the driver's time per latency class: lowest, low, bulk, stream
	itrChanges  uint64
	pairFrames  []uint64 // frames through each vhost-user queue pair, both ways (queues.go)
	// fromDriver: the NIC's events are the driver's counts (a PCI device has no counters of
	// ours), not the emulated hardware's.
	fromDriver bool
}

// itrCounters are the driver's counters of adaptive moderation, by latency class.
var itrCounters = [ipxe.Classes]string{"itr_lowest_ms", "itr_low_ms", "itr_bulk_ms", "itr_stream_ms"}

func (a *counterDeltas) add(prev, cur sample) {
	dt := cur.at.Sub(prev.at).Seconds()
	a.seconds += dt
	if a.cpuSeconds == nil {
		a.cpuSeconds = map[string]float64{}
	}
	before := map[string]supervisor.ComponentStatus{}
	for _, c := range prev.status.Components {
		before[c.Name] = c
	}
	for _, c := range cur.status.Components {
		b, ok := before[c.Name]
		if ok && c.CPUSeconds >= b.CPUSeconds {
			a.cpuSeconds[c.Name] += (c.CPUSeconds - b.CPUSeconds) * 100
		} else {
			a.cpuSeconds[c.Name] += c.CPULoad * dt // started or restarted in the interval
		}
		delta := func(name string) uint64 {
			if c.Counters[name] < b.Counters[name] {
				return 0 // restarted
			}
			return c.Counters[name] - b.Counters[name]
		}
		switch filepath.Base(c.Binary) {
		case hardwareBinary:
			a.irqs += delta("interrupts")
			a.txIrq += delta("irq_txdw") + delta("irq_txqe")
			a.tdtWrites += delta("tdt_writes")
			a.txFrames += delta("tx_frames")
		case driverBinary:
			if a.fromDriver {
				a.irqs += delta("interrupts")
				a.tdtWrites += delta("tdt_writes")
				a.txFrames += delta("tx_frames")
			}
			// The driver books a quiet line's time at the first interrupt after it: a sample
			// that booked more than it lasted carries the idle time before the traffic.
			var booked [ipxe.Classes]uint64
			var sum uint64
			for i, name := range itrCounters {
				booked[i] = delta(name)
				sum += booked[i]
			}
			if float64(sum) <= dt*1000+float64(2*ipxe.ModerationInterval/time.Millisecond) {
				for i := range booked {
					a.itrMS[i] += booked[i]
				}
			}
			a.itrChanges += delta("itr_changes")
		}
		a.addPairs(c.Counters, delta)
		var sig0, fr0 uint64
		for _, ss := range b.Sessions {
			sig0 += ss.Sent.SignalsSent + ss.Received.SignalsSent
			fr0 += ss.Sent.Frames
		}
		var sig1, fr1 uint64
		for _, ss := range c.Sessions {
			sig1 += ss.Sent.SignalsSent + ss.Received.SignalsSent
			fr1 += ss.Sent.Frames
		}
		if sig1 >= sig0 && fr1 >= fr0 {
			a.signals += sig1 - sig0
			a.frames += fr1 - fr0
		}
	}
}

func (a *counterDeltas) fill(p *point) {
	p.Seconds = a.seconds
	if a.seconds == 0 {
		return
	}
	for name, cs := range a.cpuSeconds {
		p.CPU[name] = cs / a.seconds
	}
	p.IrqsPerS = float64(a.irqs) / a.seconds
	if a.txFrames > 0 {
		p.TxIrqsPerK = float64(a.txIrq) * 1000 / float64(a.txFrames)
		p.DoorbellsPerK = float64(a.tdtWrites) * 1000 / float64(a.txFrames)
	}
	var ms uint64
	for _, v := range a.itrMS {
		ms += v
	}
	if ms > 0 {
		p.ITRPercent = map[string]float64{}
		for i, v := range a.itrMS {
			p.ITRPercent[ipxe.Latency(i).String()] = float64(v) * 100 / float64(ms)
		}
		p.ITRChangesPerS = float64(a.itrChanges) / a.seconds
	}
	if a.frames > 0 {
		p.SignalsPerK = float64(a.signals) * 1000 / float64(a.frames)
	}
	p.PairShares = pairShares(a.pairFrames)
}
