package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/nicstack/nicstack/internal/iperf"
)

func init() {
	var c iperf.Command
	cmd := &cobra.Command{
		Use:   "iperf (-s | -c HOST) [flags]",
		Short: "Measure TCP and UDP throughput; speaks iperf3's protocol both ways",
		Long: "iperf measures throughput like iperf3 and interoperates with it: a real iperf3 client\n" +
			"can measure against `nicstack iperf -s`, and `nicstack iperf -c` against a real iperf3 server.\n" +
			"It takes iperf3's flags and prints iperf3's lines (or its JSON with -J).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := c.Check(); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			out := cmd.OutOrStdout()
			if c.Server {
				return runIperfServer(ctx, out, &c)
			}
			cfg := c.ClientConfig(iperf.Kernel)
			cfg.Output = out
			if _, err := iperf.RunClient(ctx, cfg); err != nil {
				return fmt.Errorf("iperf: error - %w", err)
			}
			return nil
		},
	}
	c.AddFlags(cmd.Flags())
	root.AddCommand(cmd)
}

func runIperfServer(ctx context.Context, out io.Writer, c *iperf.Command) error {
	ln, err := iperf.Kernel.Listen(c.ListenNetwork(), c.ListenAddress())
	if err != nil {
		return err
	}
	srv := c.NewServer(iperf.Kernel)
	srv.Output = out
	return srv.Serve(ctx, ln)
}
