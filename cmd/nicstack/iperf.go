package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/nicstack/nicstack/iperf"
	"github.com/spf13/cobra"
)

func init() {
	var (
		server   bool
		client   string
		port     int
		seconds  float64
		reverse  bool
		parallel int
		jsonOut  bool
		oneOff   bool
		length   int
		interval float64
		bind     string
	)
	cmd := &cobra.Command{
		Use:   "iperf (-s | -c HOST) [flags]",
		Short: "Measure TCP throughput; speaks iperf3's protocol both ways",
		Long: "iperf measures TCP throughput like iperf3 and interoperates with it: a real iperf3 client\n" +
			"can measure against `nicstack iperf -s`, and `nicstack iperf -c` against a real iperf3 server.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if server == (client != "") {
				return errors.New("iperf: give exactly one of -s and -c HOST")
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			out := cmd.OutOrStdout()
			every := time.Duration(interval * float64(time.Second))
			if server {
				return runIperfServer(ctx, out, net.JoinHostPort(bind, strconv.Itoa(port)), oneOff, jsonOut, every)
			}
			cfg := iperf.ClientConfig{
				Server:    net.JoinHostPort(client, strconv.Itoa(port)),
				Duration:  time.Duration(seconds * float64(time.Second)),
				Reverse:   reverse,
				Parallel:  parallel,
				BlockSize: length,
				Interval:  every,
			}
			return runIperfClient(ctx, out, cfg, jsonOut)
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&server, "server", "s", false, "run as a server")
	f.StringVarP(&client, "client", "c", "", "run as a client of the server at `HOST`")
	f.IntVarP(&port, "port", "p", 5201, "server port")
	f.Float64VarP(&seconds, "time", "t", 10, "seconds to transmit")
	f.BoolVarP(&reverse, "reverse", "R", false, "reverse: the server sends, the client receives")
	f.IntVarP(&parallel, "parallel", "P", 1, "number of parallel streams")
	f.BoolVarP(&jsonOut, "json", "J", false, "print results as iperf3-style JSON")
	f.BoolVarP(&oneOff, "one-off", "1", false, "server: handle one test, then exit")
	f.IntVarP(&length, "length", "l", iperf.DefaultBlockSize, "bytes per read or write")
	f.Float64VarP(&interval, "interval", "i", 1, "seconds between periodic reports")
	f.StringVarP(&bind, "bind", "B", "", "server: address to listen on")
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
