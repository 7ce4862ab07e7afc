package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/nicstack/nicstack/iperf"
)

func init() {
	var c iperf.Command
	cmd := &cobra.Command{
		Use:   "iperf (-s | -c HOST) [flags]",
		Short: "Measure TCP throughput; speaks iperf3's protocol both ways",
		Long: "iperf measures TCP throughput like iperf3 and interoperates with it: a real iperf3 client\n" +
			"can measure against `nicstack iperf -s`, and `nicstack iperf -c` against a real iperf3 server.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := c.Check(); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			out := cmd.OutOrStdout()
			if c.Server {
				return runIperfServer(ctx, out, c.ListenAddress(), c.OneOff, c.JSON, c.IntervalDuration())
			}
			return runIperfClient(ctx, out, c.ClientConfig(iperf.Kernel), c.JSON)
		},
	}
	c.AddFlags(cmd.Flags())
	root.AddCommand(cmd)
}

func runIperfClient(ctx context.Context, out io.Writer, cfg iperf.ClientConfig, jsonOut bool) error {
	if !jsonOut {
		host, port, _ := net.SplitHostPort(cfg.Server)
		fmt.Fprintf(out, "Connecting to host %s, port %s\n", host, port)
		if cfg.Reverse {
			fmt.Fprintf(out, "Reverse mode, remote host %s is sending\n", host)
		}
		fmt.Fprintln(out, "[ ID] Interval           Transfer     Bitrate")
		cfg.OnInterval = func(iv iperf.Interval) { iperf.WriteInterval(out, iv) }
	}
	rep, err := iperf.RunClient(ctx, cfg)
	if jsonOut {
		if rep == nil {
			rep = &iperf.Report{}
		}
		if err != nil {
			rep.Error = err.Error()
		}
		return writeIperfJSON(out, rep, err)
	}
	if rep != nil && rep.Error == "" {
		rep.WriteText(out)
	}
	return err
}

func runIperfServer(ctx context.Context, out io.Writer, addr string, oneOff, jsonOut bool, every time.Duration) error {
	ln, err := iperf.Kernel.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &iperf.Server{OneOff: oneOff, Interval: every}
	if jsonOut {
		srv.OnReport = func(r *iperf.Report) { _ = writeIperfJSON(out, r, nil) }
	} else {
		fmt.Fprintln(out, "-----------------------------------------------------------")
		fmt.Fprintf(out, "Server listening on %s\n", ln.Addr())
		fmt.Fprintln(out, "-----------------------------------------------------------")
		srv.Logf = func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }
		srv.OnInterval = func(iv iperf.Interval) { iperf.WriteInterval(out, iv) }
		srv.OnReport = func(r *iperf.Report) { r.WriteText(out) }
	}
	return srv.Serve(ctx, ln)
}

func writeIperfJSON(out io.Writer, rep *iperf.Report, err error) error {
	b, merr := json.MarshalIndent(rep, "", "\t")
	if merr != nil {
		return merr
	}
	fmt.Fprintln(out, string(b))
	return err
}
