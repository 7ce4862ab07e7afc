package component

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/nicstack/nicstack/runtime/sandbox"

	"github.com/nicstack/nicstack/runtime/logformat"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
)

// LogFormatEnv tells a component its log format, one of package logformat's (text when
// unset).
const LogFormatEnv = "NICSTACK_LOG_FORMAT"

// StateFDEnv names the descriptor of the component's state region (Spec.State), when it has
// one.
const StateFDEnv = "NICSTACK_STATE_FD"

// Option adjusts Main.
type Option func(*mainOptions)

type mainOptions struct{ oneP bool }

// OneP keeps GOMAXPROCS at what the CPU mask gives (1 on one CPU), for a component that polls
// on purpose: the emulated NIC clocks its wire by spinning, and with a second P its goroutines
// ran as two threads the kernel time-sliced on the one CPU, 4 ms at a time (bench driver: 90 %
// of line rate and RX overruns instead of 100 %).
func OneP() Option { return func(o *mainOptions) { o.oneP = true } }

// Main runs a component process: it serves the control protocol until the supervisor stops
// it or it calls Exit, then exits with its exit value. It never returns.
func Main(spec Spec, newHandler func(*Component) (Handler, error), opts ...Option) {
	var o mainOptions
	for _, opt := range opts {
		opt(&o)
	}
	if os.Getenv(Handshake.MagicCookieKey) != Handshake.MagicCookieValue {
		fmt.Fprintf(os.Stderr, "%s is a nicstack component: start it from a scenario with `nicstack run`\n", os.Args[0])
		os.Exit(2)
	}
	// A component pinned to one CPU gets GOMAXPROCS 1, and then each wait of its packet-stream
	// loop in epoll_wait (a blocking system call) longer than sysmon's 20 µs tick has its P
	// taken, which keeps sysmon polling every 20 µs for as long as traffic comes in bursts:
	// a fifth of a nic_router's samples behind an interrupt-throttled driver were sysmon's
	// wakeups. With a second P idle, sysmon leaves a waiting P alone for 10 ms and backs off.
	// Affinity still keeps every thread on the component's CPUs.
	if !o.oneP && os.Getenv("GOMAXPROCS") == "" && runtime.GOMAXPROCS(0) < 2 {
		runtime.GOMAXPROCS(2)
	}
	// Logs go to the process's real stderr, which the supervisor prefixes with the name (or,
	// for JSON, tags with a "component" field).
	log := slog.New(logformat.Handler(os.Stderr, os.Getenv(LogFormatEnv), slog.LevelInfo))
	c := New(spec, log, newHandler)
	var err error
	if c.state, err = mapState(spec); err != nil {
		log.Error("state region", "err", err)
		os.Exit(1)
	}
	sock, err := controlSocket()
	if err != nil {
		log.Error("control socket", "err", err)
		os.Exit(1)
	}
	c.control = sock
	go func() {
		err := c.inbox.receive(sock)
		select {
		case <-c.stopped:
		default:
			log.Error("supervisor went away", "err", err)
			os.Exit(1)
		}
	}()
	var srv *grpc.Server
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: Handshake,
		Plugins:         plugin.PluginSet{PluginName: &Plugin{Impl: c}},
		// go-plugin's own errors only (its init failing, e.g. on its socket); our logs are c.Log
		Logger: hclog.New(&hclog.LoggerOptions{Output: os.Stderr, Level: hclog.Error, Name: "go-plugin"}),
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			if err := sandbox.Confine(); err != nil {
				log.Error("sandbox", "err", err)
				os.Exit(1)
			}
			srv = plugin.DefaultGRPCServer(opts)
			go func() {
				<-c.stopped
				if c.exiting.Load() {
					// Ended by Exit: the supervisor learns the whole exit value (the exit
					// status keeps 8 bits of it). No call of the supervisor's waits for its
					// answer, and go-plugin's own stdio stream would keep a graceful stop
					// waiting until the supervisor hangs up, which it does only when it
					// stops us.
					if err := sendExit(sock, c.ExitValue()); err != nil {
						log.Error("telling the supervisor the exit value", "err", err)
					}
					srv.Stop()
					return
				}
				srv.GracefulStop()
			}()
			return srv
		},
	})
	os.Exit(c.ExitValue())
}

// mapState maps the state region the supervisor handed (StateFDEnv), nil without one. It is
// the size the Spec says or refused: a region of another size belongs to something else.
func mapState(spec Spec) ([]byte, error) {
	v := os.Getenv(StateFDEnv)
	if v == "" {
		return nil, nil
	}
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		return nil, fmt.Errorf("%s=%q is no descriptor", StateFDEnv, v)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("descriptor %d: %w", fd, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size != int64(spec.State) || spec.State == 0 {
		return nil, fmt.Errorf("descriptor %d has %d bytes, want a memfd of %d", fd, st.Size, spec.State)
	}
	mem, err := unix.Mmap(fd, 0, spec.State, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mapping descriptor %d: %w", fd, err)
	}
	return mem, nil
}

func controlSocket() (*net.UnixConn, error) {
	f := os.NewFile(ControlFD, "control")
	defer f.Close()
	c, err := net.FileConn(f)
	if err != nil {
		return nil, fmt.Errorf("fd %d is not the control socket the supervisor passes: %w", ControlFD, err)
	}
	u, ok := c.(*net.UnixConn)
	if !ok {
		c.Close()
		return nil, fmt.Errorf("fd %d is not a Unix socket", ControlFD)
	}
	return u, nil
}
