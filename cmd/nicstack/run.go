package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/nicstack/nicstack/components"
	"github.com/nicstack/nicstack/internal/hostservice"
	"github.com/nicstack/nicstack/internal/qemu"
	"github.com/nicstack/nicstack/runtime/config"
	"github.com/nicstack/nicstack/runtime/supervisor"
)

func init() {
	var (
		binDir, socket, name, report, metrics, logFormat, runAs string
		verbose                                                 bool
		watch                                                   time.Duration
	)
	cmd := &cobra.Command{
		Use:   "run SCENARIO",
		Short: "Run a scenario (Genode init config, XML or HID) until Ctrl-C",
		Long: `Run starts every <start> of the scenario as a component process pinned to its CPUs,
routes the sessions they request, and applies changes to the scenario file while it runs. A
component that exits stays exited, as in Genode's init (restart="yes" on its <start> or on
<default> starts it again); one with <exit propagate="yes"/> ends the run, and nicstack exits
with its exit value. SCENARIO may also be a Genode package's runtime file (binary init): its
<config> runs. Ctrl-C or SIGTERM stops everything and removes what the run made. Component
binaries are looked up next to nicstack and in bin/.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// Before the first line: a reader of our output that has gone must not kill us.
			pipe := make(chan os.Signal, 1)
			signal.Notify(pipe, syscall.SIGPIPE)
			defer signal.Stop(pipe)
			var out *supervisor.Output
			switch logFormat {
			case "text", "json":
				out = supervisor.NewOutput(os.Stderr, logFormat == "json")
			case "genode":
				out = supervisor.NewGenodeOutput(os.Stderr, nil)
			default:
				return fmt.Errorf("--log-format %q: want text, json or genode", logFormat)
			}
			for _, r := range supervisor.RemoveLeftovers() {
				out.Logger(false).Info("removed what a killed run left: " + r)
			}
			if root, err := config.ParseFile(args[0]); err == nil {
				built, err := qemu.PrepareImage(cmd.Context(), root)
				if err != nil {
					return fmt.Errorf("%s: %w", args[0], err)
				}
				if built {
					out.Logger(false).Info("guest image ready", "folder", os.Getenv(qemu.ImageEnv))
				}
			} // a scenario that does not parse gets supervisor.New's error
			// A named run keeps its attachments in its instance folder, for the next run of
			// that name.
			stateDir := ""
			if name != "" {
				var err error
				if socket, err = instanceSocket(name); err != nil {
					return err
				}
				stateDir = filepath.Dir(socket)
				defer os.Remove(stateDir) // only when empty: systemd's RuntimeDirectory removes its own
			}
			s, err := supervisor.New(args[0], supervisor.Options{
				Components: components.Table, ParentServices: hostservice.Services(),
				BinDirs: supervisor.BinDirs(binDir), Out: out, Verbose: verbose, WatchInterval: watch, RunAs: runAs,
				StateDir: stateDir,
			})
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			go stopWhenOutputGone(ctx, cancel, pipe)
			if err := s.ServeControl(ctx, socket); err != nil {
				return err
			}
			if metrics != "" {
				if err := serveMetrics(ctx, s, metrics); err != nil {
					return err
				}
			}
			if report != "" {
				go s.WriteReports(ctx, report, time.Second)
			}
			return s.Run(ctx)
		},
	}
	f := cmd.Flags()
	f.StringVar(&binDir, "bin", "", "folder with component binaries, searched first")
	f.StringVar(&socket, "socket", supervisor.DefaultSocket(), "serve status on this Unix socket")
	f.StringVarP(&name, "name", "s", "", "name the run: its socket goes to the instance folder, where status -s NAME finds it, and it keeps its attachments there for the next run of that name")
	f.StringVar(&report, "report", "", "write Genode's init state report to this file every second")
	f.StringVar(&metrics, "metrics", "", "serve Prometheus metrics on this loopback address (like 127.0.0.1:9464)")
	f.StringVar(&runAs, "user", supervisor.RunAsDynamic, "run as root: whom components run as: dynamic (each its own uid), a user name or uid, or root (no drop)")
	f.StringVar(&logFormat, "log-format", "text", "text ([name] prefixed lines), json, or genode (as Genode's log: [init -> name] text)")
	f.BoolVarP(&verbose, "verbose", "v", false, "log session and routing decisions")
	f.DurationVar(&watch, "watch", 500*time.Millisecond, "how often to check the scenario file for changes (0: never)")
	root.AddCommand(cmd)
}

// stopWhenOutputGone ends the run (cleanly, as Ctrl-C does) when whoever reads its output has
// gone, as in `nicstack run ... | head`: instead of dying of SIGPIPE and leaving everything
// behind. A SIGPIPE (pipe, notified) tells at once, when we write; a pipe whose reader closed is also seen
// between writes, by polling stdout and stderr for an error every second. A SIGPIPE of a
// socket's write (a status client that left) does not stop the run.
func stopWhenOutputGone(ctx context.Context, stop func(), pipe <-chan os.Signal) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-pipe:
		case <-tick.C:
		}
		fds := []unix.PollFd{{Fd: 1, Events: unix.POLLOUT}, {Fd: 2, Events: unix.POLLOUT}}
		if n, err := unix.Poll(fds, 0); err == nil && n > 0 {
			for _, f := range fds {
				if f.Revents&unix.POLLERR != 0 {
					stop()
					return
				}
			}
		}
	}
}

// instanceSocket is the socket of the run named name, its folder made.
func instanceSocket(name string) (string, error) {
	path, err := supervisor.InstanceSocket(name)
	if err != nil {
		return "", fmt.Errorf("--name: %w", err)
	}
	return path, os.MkdirAll(filepath.Dir(path), 0o700)
}

// serveMetrics serves /metrics on a loopback address only: the counters are not for the network.
func serveMetrics(ctx context.Context, s *supervisor.Supervisor, addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--metrics %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("--metrics %q: only loopback addresses (127.0.0.1, [::1])", addr)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--metrics: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", s.MetricsHandler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(l)
	go func() { <-ctx.Done(); srv.Close() }()
	return nil
}
