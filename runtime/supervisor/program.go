// A program is a <start> that is no nicstack component: its binary is found on PATH and its
// <config> is its command line, one <arg value="..."/> per argument with argv[0] first, as
// Genode's libc takes a program's arguments from its config. It is our extension, for the VM
// a scenario runs beside its stream guest (QEMU): it is launched pinned to its CPUs like a
// component, in a process group of its own that dies with the supervisor, with the run
// folder as its working folder (where a relative socket path of a guest's config is bound),
// and stopped with SIGTERM, then SIGKILL. It has no sessions, counters or heartbeat, and runs
// as the supervisor's user (QEMU must reach its image and the socket), without the sandbox.

package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"google.golang.org/grpc"

	controlpb "github.com/nicstack/nicstack/proto"
	"github.com/nicstack/nicstack/runtime/affinity"
	"github.com/nicstack/nicstack/runtime/component"
)

// programGrace is how long a program has to end after SIGTERM (QEMU: at once).
const programGrace = 3 * time.Second

// programArgs is st's command line when st is a program: its binary is no component of
// table and its config lists <arg>s.
func programArgs(table component.Table, st *Start) ([]string, bool) {
	if table == nil || st.Config == nil {
		return nil, false
	}
	if _, err := table.Lookup(st.Binary); err == nil {
		return nil, false
	}
	var argv []string
	for _, a := range st.Config.Subs("arg") {
		argv = append(argv, a.String("value", ""))
	}
	return argv, len(argv) > 0
}

// programPath finds a program in the binary folders (nicstack beside its components), then
// on PATH.
func programPath(name string, binDirs []string) (string, error) {
	for _, d := range binDirs {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return exec.LookPath(name)
}

// launchProgram starts argv (argv[0] as the program's name, binary the file run).
func launchProgram(binary string, argv []string, runDir string, cpus affinity.Set, out *Output, name string) (*process, error) {
	cmd := exec.Command(binary, argv[1:]...)
	cmd.Args[0] = argv[0]
	cmd.Dir = runDir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	w := out.Writer(name)
	cmd.Stdout, cmd.Stderr = w, w
	if err := affinity.Run(cpus, cmd.Start); err != nil {
		return nil, fmt.Errorf("starting %s: %w", binary, err)
	}
	p := &process{cmd: cmd, pid: cmd.Process.Pid, waited: make(chan struct{})}
	p.ctl = programControl{}
	go func() {
		cmd.Wait()
		close(p.waited)
	}()
	return p, nil
}

// stopProgram ends a program's process group: SIGTERM, SIGKILL after programGrace.
func (p *process) stopProgram() {
	syscall.Kill(-p.pid, syscall.SIGTERM)
	select {
	case <-p.waited:
	case <-time.After(programGrace):
		syscall.Kill(-p.pid, syscall.SIGKILL)
		<-p.waited
	}
	syscall.Kill(-p.pid, syscall.SIGKILL) // what the program left in its group
}

var errProgram = errors.New("a program has no control channel")

// programControl answers the supervisor's control calls for a program: it starts, stops and
// shows in the status without counters; it serves and requests nothing.
type programControl struct{ controlpb.ComponentClient }

func (programControl) Start(context.Context, *controlpb.StartRequest, ...grpc.CallOption) (*controlpb.StartReply, error) {
	return &controlpb.StartReply{}, nil
}

func (programControl) Events(context.Context, *controlpb.EventsRequest, ...grpc.CallOption) (grpc.ServerStreamingClient[controlpb.Event], error) {
	return nil, errProgram
}

func (programControl) UpdateConfig(context.Context, *controlpb.Config, ...grpc.CallOption) (*controlpb.Empty, error) {
	return nil, errors.New("a program keeps its command line until it restarts")
}

func (programControl) OpenSession(context.Context, *controlpb.OpenSessionRequest, ...grpc.CallOption) (*controlpb.Empty, error) {
	return nil, errProgram
}

func (programControl) CloseSession(context.Context, *controlpb.CloseSessionRequest, ...grpc.CallOption) (*controlpb.Empty, error) {
	return nil, errProgram
}

func (programControl) LinkState(context.Context, *controlpb.LinkStateRequest, ...grpc.CallOption) (*controlpb.Empty, error) {
	return nil, errProgram
}

func (programControl) Denied(context.Context, *controlpb.DeniedRequest, ...grpc.CallOption) (*controlpb.Empty, error) {
	return nil, errProgram
}

func (programControl) State(context.Context, *controlpb.StateRequest, ...grpc.CallOption) (*controlpb.StateReply, error) {
	return &controlpb.StateReply{}, nil
}

func (programControl) Heartbeat(context.Context, *controlpb.HeartbeatRequest, ...grpc.CallOption) (*controlpb.HeartbeatReply, error) {
	return &controlpb.HeartbeatReply{}, nil
}

func (programControl) Stop(context.Context, *controlpb.StopRequest, ...grpc.CallOption) (*controlpb.Empty, error) {
	return &controlpb.Empty{}, nil
}

func (programControl) StartCapture(context.Context, *controlpb.CaptureRequest, ...grpc.CallOption) (*controlpb.Empty, error) {
	return nil, errProgram
}

func (programControl) StopCapture(context.Context, *controlpb.CaptureStop, ...grpc.CallOption) (*controlpb.Empty, error) {
	return nil, errProgram
}
