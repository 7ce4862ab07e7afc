// A program is a <start> that is no nicstack component: its binary is found on PATH and its
// <config> is its command line, one <arg value="..."/> per argument with argv[0] first, as
// Genode's libc takes a program's arguments from its config. It is our extension, for the VM
// a scenario runs beside its stream guest (QEMU): it is launched pinned to its CPUs like a
// component, in a process group of its own that dies with the supervisor, with the run
// folder as its working folder (where a relative socket path of a guest's config is bound),
// and stopped with SIGTERM, then SIGKILL. It has no sessions, counters or heartbeat.
//
// It runs with the least it needs: under a supervisor running as root, as a dynamic uid of
// its own in the run's program group (which owns the sockets the supervisor binds, so it
// can connect to them), without other groups but /dev/kvm's when that group may use KVM,
// with no_new_privs, and with an environment of PATH and its <env>s only. No seccomp filter:
// an arbitrary program (QEMU) makes too many system calls for a list of ours; QEMU confines
// itself with its own -sandbox option. A <start privileged="yes"> runs as the supervisor's
// user instead, for a program that needs root (a VM given a host's PCI device through VFIO).

package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"

	controlpb "github.com/nicstack/nicstack/proto"
	"github.com/nicstack/nicstack/runtime/affinity"
	"github.com/nicstack/nicstack/runtime/component"
	"github.com/nicstack/nicstack/runtime/config"
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

// programCmd is the command that runs argv (argv[0] as the program's name, binary the file
// run) in runDir as cred (nil: the supervisor's user), with cfg's environment. As another
// user it executes binary through a descriptor the supervisor opened (fd 3), so that the user
// need not reach the binary's folder. The caller closes cmd.ExtraFiles once it started.
func programCmd(binary string, argv []string, cfg *config.Node, runDir string, cred *syscall.Credential) (*exec.Cmd, error) {
	cmd := exec.Command(binary, argv[1:]...)
	cmd.Args[0] = argv[0]
	cmd.Dir = runDir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: cred}
	if cred != nil {
		exe, err := os.OpenFile(binary, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, err
		}
		cmd.Path, cmd.ExtraFiles = "/proc/self/fd/3", []*os.File{exe}
	}
	env, files, err := programEnv(cfg, 3+len(cmd.ExtraFiles))
	if err != nil {
		closeAll(cmd.ExtraFiles)
		return nil, err
	}
	cmd.Env, cmd.ExtraFiles = env, append(cmd.ExtraFiles, files...)
	return cmd, nil
}

// programEnv is a program's environment, and the files it is handed from fd first on: the
// supervisor's PATH, then its <config>'s <env key value/>s, as Genode's libc takes a program's
// environment from its config. Our extensions: an <env key/> without value passes the
// supervisor's own (left out when unset); open="yes" makes the value a path the supervisor
// opens and hands over as a descriptor, and the program gets /proc/self/fd/N in its stead,
// through which it reaches that file or folder however the folders above it are set (the
// guest image in root's cache), and nothing beside it.
func programEnv(cfg *config.Node, first int) ([]string, []*os.File, error) {
	env := []string{"PATH=" + os.Getenv("PATH")}
	var files []*os.File
	for _, e := range cfg.Subs("env") {
		key := e.String("key", "")
		open, err := e.Bool("open", false)
		if err == nil && (key == "" || strings.ContainsRune(key, '=')) {
			err = config.Errorf(e.Pos, "<env> needs a key without '='")
		}
		if err != nil {
			closeAll(files)
			return nil, nil, err
		}
		value, ok := e.String("value", ""), e.Has("value")
		if !ok {
			if value, ok = os.LookupEnv(key); !ok {
				continue
			}
		}
		if open {
			f, err := os.OpenFile(value, unix.O_PATH|unix.O_CLOEXEC, 0)
			if err != nil {
				closeAll(files)
				return nil, nil, config.Errorf(e.Pos, "<env key=%q open=\"yes\">: %v", key, err)
			}
			value = "/proc/self/fd/" + strconv.Itoa(first+len(files))
			files = append(files, f)
		}
		env = append(env, key+"="+value)
	}
	return env, files, nil
}

func closeAll(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

// launchProgram starts cmd pinned to cpus, from the launcher thread when it runs as another
// user (no_new_privs).
func launchProgram(binary string, cmd *exec.Cmd, cpus affinity.Set, out *Output, name string) (*process, error) {
	defer closeAll(cmd.ExtraFiles)
	w := out.Writer(name)
	cmd.Stdout, cmd.Stderr = w, w
	start := func() error { return affinity.Run(cpus, cmd.Start) }
	if cred := cmd.SysProcAttr.Credential; cred != nil {
		start = func() error { return onLauncher(func() error { return affinity.Run(cpus, cmd.Start) }) }
	}
	if err := start(); err != nil {
		if cred := cmd.SysProcAttr.Credential; cred != nil && errors.Is(err, syscall.EACCES) {
			return nil, fmt.Errorf("starting %s as uid %d: %w (it, and a script's interpreter, must be executable by others; or <start privileged=\"yes\">)",
				binary, cred.Uid, err)
		}
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

var (
	launcherOnce sync.Once
	launches     chan func()
	launcherErr  error
)

// onLauncher runs start on the launcher thread, which carries no_new_privs: every program
// forked there inherits it (no setuid binary or file capability can raise it again), and no
// other goroutine runs there, as a thread keeps it for life. The thread lives as long as the
// process, because a child's Pdeathsig fires when the thread that forked it ends.
func onLauncher(start func() error) error {
	launcherOnce.Do(func() {
		launches = make(chan func())
		go func() {
			runtime.LockOSThread() // never unlocked
			launcherErr = unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
			for f := range launches {
				f()
			}
		}()
	})
	errc := make(chan error, 1)
	launches <- func() {
		if launcherErr != nil {
			errc <- fmt.Errorf("no_new_privs: %w", launcherErr)
			return
		}
		errc <- start()
	}
	return <-errc
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
