package supervisor

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	controlpb "github.com/nicstack/nicstack/proto"
)

// Status is what `nicstack status` shows: the run and each component.
type Status struct {
	Pid        int               `json:"pid"`
	Scenario   string            `json:"scenario"`
	Space      string            `json:"affinity_space"`
	Machine    string            `json:"machine_space"`
	Note       string            `json:"note,omitempty"` // how the space maps when the two differ
	Components []ComponentStatus `json:"components"`
	// Attachments are the guests attached at run time, as kept (attach.go).
	Attachments []Attachment `json:"attachments,omitempty"`
}

// ComponentStatus is one component's state, resources, sessions and counters.
type ComponentStatus struct {
	Name     string `json:"name"`
	Binary   string `json:"binary"`
	Version  string `json:"version,omitempty"`
	Attached bool   `json:"attached,omitempty"` // by `nicstack attach`, not the scenario file
	State    string `json:"state"`              // a State: starting, running, waiting, failed, stopped, exited
	Pid      int    `json:"pid,omitempty"`
	Restarts int    `json:"restarts"`
	ExitCode int    `json:"exit_code"` // of its last process; -1 when a signal ended it
	// SkippedHeartbeats counts the heartbeats its process left unanswered (<heartbeat/>).
	SkippedHeartbeats uint64  `json:"skipped_heartbeats,omitempty"`
	Location          string  `json:"location"` // virtual affinity location
	CPUs              string  `json:"cpus"`     // the physical CPU set, as Linux writes it
	CPULoad           float64 `json:"cpu_load"` // percent of one CPU since the previous status
	// CPUSeconds is the process's user and system time since it started.
	CPUSeconds float64           `json:"cpu_seconds"`
	RSS        uint64            `json:"rss_bytes"`
	RAM        uint64            `json:"ram_quota"`
	RAMUsed    uint64            `json:"ram_used"` // session buffers charged to it
	Sessions   []SessionStatus   `json:"sessions"`
	Requests   []RequestStatus   `json:"requested"`
	Counters   map[string]uint64 `json:"counters,omitempty"`
	Queues     []QueueStatus     `json:"queues,omitempty"`
}

// QueueStatus is what waits at one hop of a component's data path: the stream a session
// sends on ("<label> tx" or "<label> rx", and its " acks"), a driver's ring, frames a router
// holds. Sojourn is the age of the oldest frame waiting, 0 when none waits.
type QueueStatus struct {
	Hop     string        `json:"hop"`
	Frames  uint64        `json:"frames"`
	Bytes   uint64        `json:"bytes"`
	Sojourn time.Duration `json:"sojourn_ns"`
}

// SessionStatus is an open session as one side reports it.
type SessionStatus struct {
	ID       uint64       `json:"id"`
	Role     string       `json:"role"` // client or server
	Service  string       `json:"service"`
	Label    string       `json:"label"`
	LinkUp   bool         `json:"link_up"`
	Sent     StreamStatus `json:"sent"`
	Received StreamStatus `json:"received"`
}

// StreamStatus counts one direction of a session at one side.
type StreamStatus struct {
	Frames          uint64 `json:"frames"`
	Bytes           uint64 `json:"bytes"`
	Drops           uint64 `json:"drops"`
	SignalsSent     uint64 `json:"signals_sent"`
	SignalsReceived uint64 `json:"signals_received"`
}

// RequestStatus is a session a component asked for.
type RequestStatus struct {
	Service  string    `json:"service"`
	Label    string    `json:"label"`
	Server   string    `json:"server,omitempty"` // a child's name, or "parent" for the supervisor's own services
	State    string    `json:"state"`            // open, waiting, denied
	Session  uint64    `json:"session,omitempty"`
	OpenedAt time.Time `json:"opened_at,omitzero"`
	Reason   string    `json:"reason,omitempty"`
}

// cpuSample is the last CPU time read for a process, for the load since then.
type cpuSample struct {
	mu  sync.Mutex
	pid int
	at  time.Time
	cpu time.Duration
}

// Status asks the running supervisor for its state; false once the run has ended. The
// supervisor goroutine only takes the snapshot; the components are asked for their counters
// from here, so a hung component delays this caller, never the supervisor.
func (s *Supervisor) Status() (Status, bool) {
	var st Status
	var procs []*process
	var samples []*cpuSample
	ok := s.call(func() { st, procs, samples = s.status() })
	if !ok {
		return st, false
	}
	var wg sync.WaitGroup
	for i := range st.Components {
		if procs[i] == nil {
			continue
		}
		wg.Add(1)
		go func(cs *ComponentStatus, p *process, sample *cpuSample) {
			defer wg.Done()
			cs.RSS, cs.CPULoad, cs.CPUSeconds = procStats(p.pid, sample)
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			reply, err := p.ctl.State(ctx, &controlpb.StateRequest{})
			if err != nil {
				return
			}
			cs.Counters = reply.GetCounters()
			for _, q := range reply.GetQueues() {
				cs.Queues = append(cs.Queues, QueueStatus{Hop: q.GetHop(), Frames: q.GetFrames(), Bytes: q.GetBytes(), Sojourn: time.Duration(q.GetSojournNs())})
			}
			for _, ss := range reply.GetSessions() {
				cs.Sessions = append(cs.Sessions, SessionStatus{
					ID: ss.GetSessionId(), Role: strings.ToLower(ss.GetRole().String()), Service: ss.GetService(),
					Label: ss.GetLabel(), LinkUp: ss.GetLinkUp(),
					Sent: streamStatus(ss.GetSent()), Received: streamStatus(ss.GetReceived()),
				})
			}
		}(&st.Components[i], procs[i], samples[i])
	}
	wg.Wait()
	return st, true
}

// status takes the supervisor's part of a status: each component and its process, if any.
func (s *Supervisor) status() (Status, []*process, []*cpuSample) {
	var procs []*process
	var samples []*cpuSample
	st := Status{Pid: os.Getpid(), Scenario: s.path, Space: s.sc.Space.String(), Machine: s.topo.Space().String(), Note: ScaleNote(s.sc.Space, s.topo),
		Attachments: slices.Clone(s.attached)}
	for _, start := range s.sc.Starts {
		c := s.children[start.Name]
		if c == nil {
			continue
		}
		cs := ComponentStatus{
			Name: start.Name, Binary: start.Binary, Version: start.Version, Attached: s.attachment(start.Name) != nil, State: c.state.String(),
			Restarts: c.restarts, ExitCode: c.exitCode, SkippedHeartbeats: c.skipped, Location: c.place.Virtual.String(),
			CPUs: c.place.CPUs.String(), RAM: start.RAM, RAMUsed: uint64(c.ramUsed),
		}
		if c.proc != nil {
			cs.Pid = c.proc.pid
		}
		procs, samples = append(procs, c.proc), append(samples, c.cpu)
		for k, r := range s.requests {
			if k.client != start.Name {
				continue
			}
			rs := RequestStatus{Service: r.service, Label: r.label, Session: r.session, State: "waiting", Reason: r.denied}
			if r.decision != nil {
				rs.Server = r.decision.Server
				if r.decision.Parent {
					rs.Server = "parent"
				}
			}
			switch {
			case r.session != 0 && !r.opening:
				rs.State, rs.OpenedAt = "open", r.openedAt
			case r.denied != "":
				rs.State = "denied"
			}
			cs.Requests = append(cs.Requests, rs)
		}
		sort.Slice(cs.Requests, func(i, j int) bool { return cs.Requests[i].Label < cs.Requests[j].Label })
		st.Components = append(st.Components, cs)
	}
	return st, procs, samples
}

func streamStatus(c *controlpb.StreamCounters) StreamStatus {
	return StreamStatus{Frames: c.GetFrames(), Bytes: c.GetBytes(), Drops: c.GetDrops(), SignalsSent: c.GetSignalsSent(), SignalsReceived: c.GetSignalsReceived()}
}

// clockTicks is USER_HZ, 100 on every Linux architecture Go supports.
const clockTicks = 100

// procStats reads a process's resident memory, its CPU load since the previous sample and its
// CPU time.
func procStats(pid int, prev *cpuSample) (rss uint64, load, cpuSeconds float64) {
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				kb, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
				rss = kb * 1024
			}
		}
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return rss, 0, 0
	}
	// Fields after the parenthesized command name: state is field 3, utime 14, stime 15.
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return rss, 0, 0
	}
	cpu, ok := processCPU(pid)
	if !ok {
		ut, _ := strconv.ParseUint(f[11], 10, 64)
		st, _ := strconv.ParseUint(f[12], 10, 64)
		cpu = time.Duration(ut+st) * time.Second / clockTicks
	}
	now := time.Now()
	prev.mu.Lock()
	defer prev.mu.Unlock()
	if prev.pid == pid && now.After(prev.at) {
		load = (cpu - prev.cpu).Seconds() / now.Sub(prev.at).Seconds() * 100
	} else if len(f) > 19 {
		// First look at this process: the load since it started (field 22, in ticks since boot).
		start, _ := strconv.ParseUint(f[19], 10, 64)
		if up := uptime(); up > float64(start)/clockTicks {
			load = cpu.Seconds() / (up - float64(start)/clockTicks) * 100
		}
	}
	prev.pid, prev.at, prev.cpu = pid, now, cpu
	return rss, load, cpu.Seconds()
}

// processCPU is the CPU time of all of a process's threads, live and exited, from its CPU-time
// clock (clock_getcpuclockid): to the nanosecond, where /proc's utime and stime come in 10 ms
// ticks, which over a bench's 5 s window made a driver at 7 % of a CPU read up to 6 % high or low.
func processCPU(pid int) (time.Duration, bool) {
	var ts unix.Timespec
	// The clock id of a process's CPU clock (CPUCLOCK_SCHED, the scheduler's runtime), as glibc makes it.
	if unix.ClockGettime(int32(^pid<<3|2), &ts) != nil {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}

// uptime is the seconds since boot, from /proc/uptime.
func uptime() float64 {
	b, err := os.ReadFile("/proc/uptime")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}
