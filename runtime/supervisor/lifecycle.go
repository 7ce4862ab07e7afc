// The lifecycle of a child: launch (pinned, with its control socket), follow its exit and
// heartbeat, restart with back-off (restart="yes", or too many skipped heartbeats), stop.
// All of it runs on the supervisor goroutine or reports back to it as an event.

package supervisor

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync/atomic"
	"time"

	controlpb "github.com/nicstack/nicstack/proto"
	"github.com/nicstack/nicstack/runtime/component"
	"github.com/nicstack/nicstack/runtime/fifo"
)

// launch starts c's process and hands it its config off the supervisor goroutine (that takes
// 50-180 ms, during which the others' events keep flowing); launched takes over from there.
func (s *Supervisor) launch(c *child) {
	c.life++
	c.state = Starting
	c.skipped = 0
	c.announced = map[string]bool{}
	c.place = Place(c.start, s.sc.Space, s.topo)
	if c.place.Warning != "" {
		s.log.Warn(c.place.Warning)
	}
	bin, err := s.binary(c.start)
	if err != nil {
		s.failed(c, err)
		return
	}
	state, err := s.stateRegion(c)
	if err != nil {
		s.failed(c, err)
		return
	}
	socks, err := s.socketsOf(c.start)
	if err != nil {
		s.failed(c, err)
		return
	}
	life, name, cpus := c.life, c.start.Name, c.place.CPUs
	req := &controlpb.StartRequest{Name: name, Cpus: cpus.String(), Config: configText(s.sc, c.start)}
	c.launchedWith = nil
	if s.configROM(c) != nil {
		if c.romConfig == nil {
			s.log.Debug(fmt.Sprintf("%s waits for its config ROM", name))
			c.waitsForConfig = true
			return
		}
		req.Config, c.launchedWith = s.romConfigText(c), c.romConfig
	}
	runDir, out, cred := s.opts.RunDir, s.opts.Out, s.ids.of(name)
	argv, program := programArgs(s.opts.Components, c.start)
	var cmd *exec.Cmd
	if program {
		if cred = s.ids.program(name); c.start.Privileged {
			cred = nil
			s.log.Info(fmt.Sprintf("%s runs as the supervisor's user (privileged=\"yes\")", name))
		}
		if cmd, err = programCmd(bin, argv, c.start.Config, runDir, cred); err != nil {
			s.failed(c, fmt.Errorf("%s: %w", name, err))
			return
		}
		for i, f := range cmd.ExtraFiles {
			s.log.Debug(fmt.Sprintf("%s gets %s as /proc/self/fd/%d", name, f.Name(), 3+i))
		}
	}
	kept, err := c.keptForLaunch()
	if err != nil {
		if state != nil {
			state.Close()
		}
		s.failed(c, err)
		return
	}
	s.launching.Add(1)
	go func() {
		defer s.launching.Done()
		t0 := time.Now()
		var p *process
		var err error
		if program {
			p, err = launchProgram(bin, cmd, cpus, out, name)
		} else {
			p, err = launch(bin, runDir, cpus, out, name, cred, state, socks, kept)
		}
		if state != nil {
			state.Close() // the child holds its own; c.state stays with the supervisor
		}
		kept.close()
		if err == nil {
			ctx, cancel := s.ctx()
			_, serr := p.ctl.Start(ctx, req)
			cancel()
			if serr != nil {
				err = fmt.Errorf("%s did not start (exit code %d): %v", name, p.kill(), serr)
				p = nil
			}
		}
		select {
		case s.events <- func() { s.launched(c, life, p, err, bin, time.Since(t0)) }:
		case <-s.quitting:
			if p != nil {
				p.kill()
			}
		}
	}()
}

// launched follows a component whose launch succeeded (p) or failed (err), unless it was
// stopped or replaced meanwhile.
func (s *Supervisor) launched(c *child, life int, p *process, err error, bin string, took time.Duration) {
	if c.life != life || s.stopping || s.children[c.start.Name] != c {
		if p != nil {
			s.end(p)
		}
		return
	}
	if err != nil {
		s.failed(c, err)
		return
	}
	c.proc, c.started, c.state = p, time.Now(), Running
	p.watchExit(func(value int, reported bool) { s.post(func() { s.exited(c, life, value, reported) }) },
		func(key uint32, data []byte, files []*os.File, err error) {
			s.post(func() {
				switch {
				case err != nil:
					s.log.Warn(fmt.Sprintf("%s: %v", c.start.Name, err))
				case c.life == life:
					c.keep(key, data, files)
					return
				}
				closeFiles(files)
			})
		})
	s.log.Info(fmt.Sprintf("%s started", c.start.Name), "pid", p.pid, "cpus", c.place.CPUs.String(), "binary", bin, "took", took)
	evctx, evcancel := context.WithCancel(context.Background())
	p.cancel = evcancel
	p.calls = fifo.New[call]()
	s.ending.Add(1)
	go s.serveCalls(evctx, c.start.Name, p.calls)
	go s.follow(evctx, c, life, p)
	if c.start.Heartbeat && s.sc.HeartbeatMS > 0 {
		go s.heartbeat(evctx, c, life, p, time.Duration(s.sc.HeartbeatMS)*time.Millisecond)
	}
	// Sessions this component serves open once it announces them; the ones it requests
	// arrive as events.
	if c.launchedWith != nil && !bytes.Equal(c.launchedWith, c.romConfig) {
		s.updateConfig(c, s.romConfigText(c)) // its config ROM changed during the launch
	}
}

// configText hands a component its <config> (and nothing else of the scenario) with the
// positions the nodes had in the scenario, so that its errors name the scenario's lines.
func configText(sc *Scenario, st *Start) *controlpb.Config {
	if st.Config == nil {
		return &controlpb.Config{}
	}
	return &controlpb.Config{Text: string(st.Config.XML()), Origin: sc.File, Positions: component.Positions(st.Config)}
}

// follow forwards the component's events to the supervisor goroutine.
func (s *Supervisor) follow(ctx context.Context, c *child, life int, p *process) {
	stream, err := p.ctl.Events(ctx, &controlpb.EventsRequest{})
	if err != nil {
		return
	}
	for {
		ev, err := stream.Recv()
		if err != nil {
			return
		}
		s.post(func() {
			if c.life == life && c.proc == p {
				s.event(c, ev)
			}
		})
	}
}

// heartbeat sends the process a heartbeat every rate and counts the ones it leaves
// unanswered, as Genode's init does: a heartbeat is outstanding until the process answers any
// (one at a time is in flight), and one outstanding is fine (it needs time to answer), so the
// skipped count is outstanding-1. The count shows in the status and the state report; more
// than <heartbeat restart_after_skipped> restarts the component.
func (s *Supervisor) heartbeat(ctx context.Context, c *child, life int, p *process, rate time.Duration) {
	t := time.NewTicker(rate)
	defer t.Stop()
	var outstanding atomic.Uint64
	var inflight atomic.Bool
	var last uint64
	for seq := uint64(1); ; seq++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		skipped := max(outstanding.Add(1), 1) - 1
		if !inflight.Swap(true) {
			go func(seq uint64) {
				defer inflight.Store(false)
				if _, err := p.ctl.Heartbeat(ctx, &controlpb.HeartbeatRequest{Seq: seq}); err == nil {
					outstanding.Store(0)
				}
			}(seq)
		}
		if skipped == last {
			continue
		}
		last = skipped
		s.post(func() {
			if c.life != life || c.proc != p {
				return
			}
			c.skipped = skipped
			if after := c.start.RestartAfterSkipped; after > 0 && skipped > after && !c.heartbeatRestart {
				s.log.Warn(fmt.Sprintf("%s skipped %d heartbeats (restart_after_skipped=%d); restarting it", c.start.Name, skipped, after))
				c.heartbeatRestart = true
				p.cmd.Process.Kill()
			}
		})
	}
}

// exited handles the end of a component's process: its sessions close on their peers and its
// requests go away. As in Genode's init, an exit is logged with its value and the child stays
// exited; with <exit propagate="yes"/> the run ends with the value instead. restart="yes"
// (ours) starts it again after the back-off; too many skipped heartbeats at once.
func (s *Supervisor) exited(c *child, life int, value int, reported bool) {
	if c.life != life || c.proc == nil {
		return
	}
	p := c.proc
	c.proc = nil
	t0 := time.Now()
	c.exitCode = p.kill()
	if reported {
		c.exitCode = value
	}
	s.log.Debug(fmt.Sprintf("%s reaped", c.start.Name), "took", time.Since(t0))
	c.state = Exited
	restarts := !s.stopping && (c.heartbeatRestart || c.start.Restart && (p.signal() != 0 || !c.start.Propagate))
	reason := fmt.Sprintf("%s exited", c.start.Name)
	if restarts && p.signal() != 0 {
		reason += component.RestartsReason // its servers may keep what its sessions made
	}
	s.dropSessions(c, reason)
	defer func() {
		if !restarts {
			s.closeKept(c)
		}
	}()
	if s.stopping {
		c.state = Stopped
		return
	}
	name := c.start.Name
	if c.heartbeatRestart {
		c.heartbeatRestart = false
		c.restarts++
		s.launch(c)
		return
	}
	sig := p.signal()
	switch {
	case sig != 0:
		s.log.Warn(fmt.Sprintf("child \"%s\" was killed by signal %d (%v)", name, int(sig), sig))
	case c.start.Propagate:
		s.log.Info(fmt.Sprintf("exit value %d of child \"%s\" propagated (<exit propagate=\"yes\"/>): the run ends", c.exitCode, name))
		s.exit = &PropagatedExit{Child: name, Value: c.exitCode}
		return
	default:
		// Genode's init prints exactly this; tests and run scripts wait for it.
		s.log.Info(fmt.Sprintf("child \"%s\" exited with exit value %d", name, c.exitCode))
	}
	if !c.start.Restart {
		return
	}
	c.state = Restarting
	if time.Since(c.started) > s.opts.StableAfter {
		c.backoff = s.opts.MinBackoff
	}
	wait := c.backoff
	c.backoff = min(2*c.backoff, s.opts.MaxBackoff)
	s.log.Info(fmt.Sprintf("%s: restarting in %v (restart=\"yes\")", name, wait))
	s.restartAfter(c, wait)
}

// PropagatedExit ends Run when a child with <exit propagate="yes"/> exits: the run exits
// with the child's exit value (ExitStatus), as Genode's init exits to its parent.
type PropagatedExit struct {
	Child string
	Value int
}

func (e *PropagatedExit) Error() string {
	return fmt.Sprintf("child %q exited with exit value %d (<exit propagate>)", e.Child, e.Value)
}

// ExitStatus is the exit value, for the process to exit with.
func (e *PropagatedExit) ExitStatus() int { return e.Value }

func (s *Supervisor) restartAfter(c *child, wait time.Duration) {
	life := c.life
	time.AfterFunc(wait, func() {
		s.post(func() {
			if c.life == life && c.proc == nil && !s.stopping && s.children[c.start.Name] == c {
				c.restarts++
				s.launch(c)
			}
		})
	})
}

// failed handles a launch that did not succeed: with restart="yes" it is tried again after
// the back-off, else at the next change of the scenario (as Genode's init retries an
// incomplete child on every config update).
func (s *Supervisor) failed(c *child, err error) {
	c.state = Failed
	s.log.Error(err.Error())
	if s.stopping || !c.start.Restart {
		return
	}
	wait := c.backoff
	c.backoff = min(2*c.backoff, s.opts.MaxBackoff)
	s.log.Warn(fmt.Sprintf("%s: trying again in %v", c.start.Name, wait))
	s.restartAfter(c, wait)
}

// stop closes c's sessions at their peers and ends its process (its Stop closes them there).
func (s *Supervisor) stop(c *child) {
	c.life++ // its exit is expected; a launch in flight or a pending restart is void
	p := c.proc
	c.proc = nil
	c.state = Stopped
	c.waitsForConfig = false
	c.discardRegion()
	// After dropSessions, which keeps the open parent-service sessions for a next process that
	// a stop has none of.
	s.dropSessions(c, fmt.Sprintf("%s stopped", c.start.Name)) // without a process: its config ROM
	s.closeKept(c)
	if p != nil {
		s.end(p)
	}
}

// end stops process p in the background (a Stop call, then go-plugin's kill, which waits and
// escalates to SIGKILL), so that a restart or a slow exit never holds up the event loop. Its
// queued calls are dropped and the one in flight is cancelled. The run waits for every end
// before it returns.
func (s *Supervisor) end(p *process) {
	if p.cancel != nil {
		p.cancel()
	}
	s.ending.Add(1)
	go func() {
		defer s.ending.Done()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		p.ctl.Stop(ctx, &controlpb.StopRequest{})
		cancel()
		p.kill()
	}()
}

func (s *Supervisor) stopAll() {
	s.stopping = true
	close(s.quitting)
	s.launching.Wait()
	// Launches that finished before quitting closed wait in the queue; launched kills them.
	s.drain()
	for i := len(s.sc.Starts) - 1; i >= 0; i-- {
		if c := s.children[s.sc.Starts[i].Name]; c != nil {
			s.stop(c)
		}
	}
	for _, c := range s.children {
		s.stop(c) // starts removed by a reload but still running
	}
	s.ending.Wait()
	// Call results that made it into the queue still close their session's files.
	s.drain()
	s.log.Info("all components stopped")
}

// drain runs the events waiting in the queue.
func (s *Supervisor) drain() {
	for {
		select {
		case fn := <-s.events:
			fn()
		default:
			return
		}
	}
}
