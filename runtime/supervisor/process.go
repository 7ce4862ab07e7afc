package supervisor

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"golang.org/x/sys/unix"

	controlpb "github.com/nicstack/nicstack/proto"
	"github.com/nicstack/nicstack/runtime/affinity"
	"github.com/nicstack/nicstack/runtime/component"
	"github.com/nicstack/nicstack/runtime/fifo"
)

// process is one life of a component: the go-plugin client, its gRPC control client and the
// supervisor's end of its control socket; or of a program (program.go), which has none.
type process struct {
	waited chan struct{} // a program's: closed when it ended
	client *plugin.Client
	cmd    *exec.Cmd
	ctl    controlpb.ComponentClient
	sock   *net.UnixConn
	pid    int
	cpus   affinity.Set // its placement, which it pins threads within (pin.go)
	calls  *fifo.Queue[call]
	cancel context.CancelFunc // ends the event stream, heartbeat and call queue
}

// launch starts binary pinned to cpus with its control socket as fd 3, and waits for the
// go-plugin handshake. Every thread of the child carries the CPU mask from its first
// instruction, because the fork happens on a thread that carries it. With cred, the child
// runs as that user, without capabilities: its go-plugin socket goes in a folder of its own
// in runDir, and the binary is executed through a descriptor the supervisor opened, so the
// user need not reach the binary's folder. state (nil: none) is the component's state region,
// handed as the descriptor component.StateFDEnv names; the sockets it serves and the
// descriptors kept for it (component.KeptEnv) follow as further files.
func launch(binary, runDir string, cpus affinity.Set, out *Output, name string, cred *syscall.Credential, state *os.File, socks []*boundSocket, kept keptLaunch) (*process, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	ours := os.NewFile(uintptr(fds[0]), "control")
	theirs := os.NewFile(uintptr(fds[1]), "control")
	defer theirs.Close()
	conn, err := net.FileConn(ours)
	ours.Close()
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	p := &process{sock: conn.(*net.UnixConn), cpus: cpus}

	p.cmd = exec.Command(binary)
	p.cmd.ExtraFiles = []*os.File{theirs} // fd 3 = component.ControlFD
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Credential: cred}
	socketDir := runDir
	if cred != nil {
		if socketDir, err = ownFolder(runDir, cred); err != nil {
			return nil, err
		}
		exe, err := os.OpenFile(binary, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, err
		}
		defer exe.Close()
		p.cmd.ExtraFiles = append(p.cmd.ExtraFiles, exe) // fd 4: executed as /proc/self/fd/4
		p.cmd.Path, p.cmd.Args = "/proc/self/fd/4", []string{binary}
	}
	p.cmd.Env = append(os.Environ(), plugin.EnvUnixSocketDir+"="+socketDir)
	p.cmd.Env = append(p.cmd.Env, component.LogFormatEnv+"="+out.format)
	if state != nil {
		p.cmd.ExtraFiles = append(p.cmd.ExtraFiles, state)
		p.cmd.Env = append(p.cmd.Env, fmt.Sprintf("%s=%d", component.StateFDEnv, 2+len(p.cmd.ExtraFiles)))
	}
	if files, env := socketFiles(socks, 3+len(p.cmd.ExtraFiles)); env != "" {
		p.cmd.ExtraFiles = append(p.cmd.ExtraFiles, files...)
		p.cmd.Env = append(p.cmd.Env, env)
	}
	if env := kept.env(3 + len(p.cmd.ExtraFiles)); env != "" {
		p.cmd.ExtraFiles = append(p.cmd.ExtraFiles, kept.files...)
		p.cmd.Env = append(p.cmd.Env, env)
	}
	logs := out.Writer(name)
	p.client = plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  component.Handshake,
		Plugins:          plugin.PluginSet{component.PluginName: &component.Plugin{}},
		Cmd:              p.cmd,
		SkipHostEnv:      true,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Logger:           hclog.NewNullLogger(),
		Stderr:           logs,
		SyncStdout:       logs,
		SyncStderr:       logs,
		StartTimeout:     10 * time.Second,
	})
	err = affinity.Run(cpus, func() error { _, err := p.client.Start(); return err })
	if err == nil {
		p.pid = p.cmd.Process.Pid
		var rpc plugin.ClientProtocol
		if rpc, err = p.client.Client(); err == nil {
			var raw any
			if raw, err = rpc.Dispense(component.PluginName); err == nil {
				p.ctl = raw.(controlpb.ComponentClient)
			}
		}
	}
	if err != nil {
		p.kill()
		return nil, fmt.Errorf("starting %s: %w", binary, err)
	}
	return p, nil
}

// ownFolder makes the folder in runDir that only components running as cred may write
// (named after the uid, short: a Unix socket's path is short): where their go-plugin
// sockets go.
func ownFolder(runDir string, cred *syscall.Credential) (string, error) {
	dir := filepath.Join(runDir, strconv.FormatUint(uint64(cred.Uid), 10))
	if err := os.Mkdir(dir, 0o700); err != nil && !os.IsExist(err) {
		return "", err
	}
	return dir, os.Chown(dir, int(cred.Uid), int(cred.Gid))
}

// kill ends the process (if still running) and waits for it; it returns the exit code, or
// -1 when killed by a signal.
func (p *process) kill() int {
	if p.cancel != nil {
		p.cancel()
	}
	if p.waited != nil {
		p.stopProgram()
	} else {
		p.sock.Close()
		p.client.Kill()
	}
	if st := p.cmd.ProcessState; st != nil {
		return st.ExitCode()
	}
	return -1
}

// signal is the signal that ended the process after kill, or 0.
func (p *process) signal() syscall.Signal {
	if st := p.cmd.ProcessState; st != nil {
		if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return ws.Signal()
		}
	}
	return 0
}

// watchExit reports when the component's end of the control socket closes: the process
// ended. The one message a component writes on it, right before it exits, is its exit value
// (component.Exit): done gets it, reported true, when it came. The others are descriptors to
// keep for its next process (component.Keep), which keep gets in order, before done, and
// threads to pin (component.PinThread), which are pinned and answered here.
func (p *process) watchExit(done func(value int, reported bool), keep func(key uint32, data []byte, files []*os.File, err error)) {
	if p.waited != nil {
		go func() {
			<-p.waited
			done(0, false)
		}()
		return
	}
	go func() {
		buf := make([]byte, component.MaxKeepMessage)
		oob := make([]byte, unix.CmsgSpace(4*component.MaxKept))
		value, reported := 0, false
		for {
			n, oobn, _, _, err := p.sock.ReadMsgUnix(buf, oob)
			if err != nil || n == 0 {
				done(value, reported)
				return
			}
			files, ferr := component.ReceivedFiles(oob[:oobn], "kept")
			if v, ok := component.ParseExit(buf[:n]); ok {
				value, reported = v, true
			} else if key, data, kept, ok, kerr := component.ParseKeep(buf[:n], files); ok {
				keep(key, data, kept, cmp.Or(ferr, kerr))
				continue
			} else if tid, index, ok := component.ParsePinThread(buf[:n]); ok {
				p.answerPin(tid, index)
			}
			closeFiles(files)
		}
	}()
}
