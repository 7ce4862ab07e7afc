// A child is a <start> of the scenario and, while it runs, its process; its State is where it
// is in the lifecycle (lifecycle.go moves it from one to the next).

package supervisor

import (
	"fmt"
	"os"
	"time"
)

// child is a <start> and its current process.
type child struct {
	start    *Start
	place    Placement
	state    State
	proc     *process
	life     int // counts launches; events of an earlier life are dropped
	restarts int
	exitCode int // the exit value of its last process; -1 when a signal ended it
	started  time.Time
	// skipped is how many heartbeats the running process skipped (Genode's
	// skipped_heartbeats); heartbeatRestart says its end is a restart for skipping too many.
	skipped          uint64
	heartbeatRestart bool
	backoff          time.Duration
	announced        map[string]bool
	ramUsed          int
	cpu              *cpuSample // shared with Status callers outside the supervisor goroutine
	// refusedFiles are the paths whose write for it was refused or failed and logged, so
	// that a report written every second is not logged every second.
	refusedFiles map[string]bool
	// romConfig is the config from its config ROM (configROM), nil before the first; while
	// waitsForConfig, its launch waits for that first. launchedWith is the config its
	// process was started with.
	romConfig, launchedWith []byte
	waitsForConfig          bool
	// region is the component's state region (component.Spec.State): made at its first
	// launch, handed to every process, kept across a crash, discarded by a deliberate
	// restart (discardRegion).
	region *os.File
	// kept are the parent-service sessions (a TAP with its namespace and the command in it) of
	// a process that crashed, for its next process to take over: the far end of a wire
	// outlives a restart of the driver on it. Closed by a deliberate stop (closeKept).
	kept []*parentSession
	// keptFiles are the descriptors its processes asked to be held for the next one
	// (component.Keep), by key; closed by closeKept too.
	keptFiles map[uint32]kept
}

// newChild is st before its first launch.
func (s *Supervisor) newChild(st *Start) *child {
	return &child{start: st, backoff: s.opts.MinBackoff, cpu: &cpuSample{}, refusedFiles: map[string]bool{}}
}

// State is where a child is in its lifecycle.
type State int

const (
	Starting   State = iota // being launched or handed its config
	Running                 // up: it serves and requests sessions
	Restarting              // exited (restart="yes"); waiting out the back-off to start again
	Failed                  // could not be launched or configured; with restart="yes" tried again after the back-off, else at the next change of the scenario
	Stopped                 // stopped by the supervisor (a scenario change, the end of the run)
	Exited                  // its process ended and it stays so (Genode's init does not restart an exited child)
)

// String is the state as the status and the state report show it.
func (s State) String() string {
	switch s {
	case Starting:
		return "starting"
	case Running:
		return "running"
	case Restarting:
		return "waiting"
	case Failed:
		return "failed"
	case Stopped:
		return "stopped"
	case Exited:
		return "exited"
	}
	return fmt.Sprintf("state(%d)", int(s))
}
