package scale

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/nicstack/nicstack/runtime/supervisor"
)

// run is what one run of n guests measured.
type run struct {
	mbps       []float64          // each guest's result, receiver side, in guest order
	bytes      uint64             // the guests' tests carried
	pss        map[string]float64 // bytes, per start, right after the streams
	idlePSS    map[string]float64 // and at the end of the idle window
	lease      float64            // seconds from the scenario's start until every guest held a lease
	dhcp       float64            // the longest from a guest's link up to its lease, seconds
	idleCPU    map[string]float64 // percent of one CPU per start, over the idle window
	idleSelf   float64            // the supervisor's (this process's), same window
	routerCPUs float64            // the router's CPU seconds while the streams ran
	// each guest's Mbit/s over the window in which all tests ran (its session's data
	// direction, frames with their headers), and the window; nil when there was none
	shared       []float64
	sharedWindow time.Duration
	retransmits  []uint64 // each guest's TCP segments sent again
	// begun is each guest's test's beginning, seconds after the tests' common start (begun)
	begun []float64
	// drops are the frames dropped while the streams ran, per start and counter (every
	// counter named *drop*), where the guests' TCP lost what it sent again
	drops map[string]uint64
}

const (
	routerBinary = "nic_router"
	leaseTimeout = 60 * time.Second
	// settle lets the far end's servers finish their tests' reports before the idle window.
	settle = time.Second
	// minShared is the shortest window of all tests running that measures fairness.
	minShared = time.Second
)

// measure runs the scenario with n guests once.
func measure(ctx context.Context, b *base, st setting, o Options) (run, error) {
	var r run
	n := st.n
	t := o.test()
	t.start = time.Now().Add(startAfter(n))
	text, err := b.scenario(n, t, o.Domains, st.fq)
	if err == nil && o.FarEndRxBuf != "" {
		text, err = b.farEndRxBuf(text, o.FarEndRxBuf)
	}
	if err == nil && st.far == farEndCPURouter {
		text, err = b.farEndWithRouter(text)
	}
	if err != nil {
		return r, err
	}
	leases := newLeaseWatch(b.prefix, n)
	c := o.Components
	c.Logs = leases
	if o.Logs != nil {
		c.Logs = io.MultiWriter(o.Logs, leases)
	}
	sc, err := c.StartScenario(ctx, "scale", text)
	if err != nil {
		return r, err
	}
	defer sc.Stop()
	start := time.Now()
	// wait ends early when the scenario or the bench does.
	wait := func(ch <-chan struct{}, d time.Duration) error {
		select {
		case <-ch:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case err := <-sc.Done:
			sc.Done <- err
			return fmt.Errorf("the scenario ended early: %v", err)
		case <-time.After(d):
			return context.DeadlineExceeded
		}
	}
	// sleep waits d, unless the scenario or the bench ends first.
	sleep := func(d time.Duration) error {
		if err := wait(nil, d); !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		return nil
	}
	if err := wait(leases.all, leaseTimeout); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return r, fmt.Errorf("%d of %d guests held a DHCP lease after %v (-v shows the logs)", leases.count(), n, leaseTimeout)
		}
		return r, err
	}
	r.lease, r.dhcp = leases.last().Sub(start).Seconds(), leases.dhcpTime().Seconds()

	guest := func(name string) int { // guest's number, 0 for another start
		if i := guestNumber(name, b.prefix); i <= n {
			return i
		}
		return 0
	}
	status := func() (supervisor.Status, error) {
		st, ok := sc.S.Status()
		if !ok {
			return st, errors.New("the supervisor gave no status")
		}
		return st, nil
	}
	routerCPU := func(st supervisor.Status) float64 {
		for _, cs := range st.Components {
			if filepath.Base(cs.Binary) == routerBinary {
				return cs.CPUSeconds
			}
		}
		return 0
	}
	// traffic samples the guests' sessions in the data's direction.
	traffic := func(st supervisor.Status) sample {
		sm := sample{at: time.Now(), bytes: make([]uint64, n)}
		for _, cs := range st.Components {
			i := guest(cs.Name)
			if i == 0 {
				continue
			}
			for _, ss := range cs.Sessions {
				if o.test().rx {
					sm.bytes[i-1] += ss.Received.Bytes
				} else {
					sm.bytes[i-1] += ss.Sent.Bytes
				}
			}
			if cs.Counters["iperf_tests"] > 0 {
				sm.finished++
			}
		}
		return sm
	}
	first, err := status()
	if err != nil {
		return r, err
	}
	if o.FarEndNice != 0 {
		for _, cs := range first.Components {
			if cs.Name == b.server {
				if err := renice(cs.Pid, o.FarEndNice); err != nil {
					return r, fmt.Errorf("--far-end-nice: %v", err)
				}
			}
		}
	}
	samples := []sample{traffic(first)}
	// The streams: every guest's test ends (or fails).
	var last supervisor.Status
	deadline := o.Time + leaseTimeout
	for t0 := time.Now(); ; {
		if err := sleep(500 * time.Millisecond); err != nil {
			return r, err
		}
		if last, err = status(); err != nil {
			return r, err
		}
		samples = append(samples, traffic(last))
		done := 0
		for _, cs := range last.Components {
			if guest(cs.Name) == 0 || cs.Counters["iperf_tests"] == 0 {
				continue
			}
			if cs.Counters["iperf_errors"] > 0 {
				return r, fmt.Errorf("%s: its iperf test failed (-v shows the logs)", cs.Name)
			}
			done++
		}
		if done == n {
			break
		}
		if time.Since(t0) > deadline {
			return r, fmt.Errorf("%d of %d guests finished their test within %v", done, n, deadline)
		}
	}
	r.routerCPUs = routerCPU(last) - routerCPU(first)
	r.shared, r.sharedWindow, _ = contention(samples, settle, minShared)
	r.begun = begun(samples, t.start)
	r.drops = drops(first, last)
	r.mbps, r.retransmits = make([]float64, n), make([]uint64, n)
	for _, cs := range last.Components {
		if i := guest(cs.Name); i > 0 {
			r.mbps[i-1] = float64(cs.Counters["iperf_bits_per_second"]) / 1e6
			r.retransmits[i-1] = cs.Counters["tcp_retransmits"]
			r.bytes += cs.Counters["iperf_bytes"]
		}
	}
	if r.pss, err = pssOf(last); err != nil {
		return r, err
	}

	// Idle: no traffic, nobody polls; the supervisor's own time is this process's.
	if err := sleep(settle); err != nil {
		return r, err
	}
	before, err := status()
	if err != nil {
		return r, err
	}
	t0, self0 := time.Now(), ownCPUSeconds()
	if err := sleep(o.Idle); err != nil {
		return r, err
	}
	dt, self1 := time.Since(t0).Seconds(), ownCPUSeconds()
	after, err := status()
	if err != nil {
		return r, err
	}
	cpu0 := map[string]float64{}
	for _, cs := range before.Components {
		cpu0[cs.Name] = cs.CPUSeconds
	}
	r.idleCPU = map[string]float64{}
	for _, cs := range after.Components {
		if c0, ok := cpu0[cs.Name]; ok && cs.CPUSeconds >= c0 {
			r.idleCPU[cs.Name] = (cs.CPUSeconds - c0) / dt * 100
		} else {
			return r, fmt.Errorf("%s restarted during the idle window", cs.Name)
		}
	}
	r.idleSelf = (self1 - self0) / dt * 100
	r.idlePSS, err = pssOf(after)
	return r, err
}

// pssOf reads the PSS of every component's process, in bytes by start.
func pssOf(st supervisor.Status) (map[string]float64, error) {
	pss := map[string]float64{}
	for _, cs := range st.Components {
		if cs.Pid == 0 {
			return nil, fmt.Errorf("%s: no process (%s)", cs.Name, cs.State)
		}
		v, err := PSS(cs.Pid)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", cs.Name, err)
		}
		pss[cs.Name] = float64(v)
	}
	return pss, nil
}

// drops sums the growth of every counter named *drop* (and the fq-codel queues' overlimit,
// and the emulated NIC's PAUSE frames from the far end, xoff_rx, which hold back instead of
// dropping) from a to b, by "start counter", leaving out those that did not grow.
func drops(a, b supervisor.Status) map[string]uint64 {
	before := map[string]uint64{}
	for _, cs := range a.Components {
		for k, v := range cs.Counters {
			before[cs.Name+" "+k] = v
		}
	}
	d := map[string]uint64{}
	for _, cs := range b.Components {
		for k, v := range cs.Counters {
			if key := cs.Name + " " + k; (strings.Contains(k, "drop") || k == "overlimit" || k == "xoff_rx") && v > before[key] {
				d[key] = v - before[key]
			}
		}
	}
	return d
}
