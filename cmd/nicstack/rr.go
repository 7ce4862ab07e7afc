package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/nicstack/nicstack/internal/iperf"
	"github.com/nicstack/nicstack/internal/rr"
)

func init() {
	var c rr.Command
	cmd := &cobra.Command{
		Use:   "rr (-s | -c HOST) [flags]",
		Short: "Measure request/response round trips (TCP_RR-style): p50, p99, p99.9",
		Long: "rr times transactions over one TCP connection as netperf's TCP_RR does: the client sends a\n" +
			"request of each -l size, the server (`nicstack rr -s`, or a guest's rr=\"-s\") sends it back,\n" +
			"and the next request leaves once the response is in. It prints each size's percentiles.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := c.Check(); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if c.Server {
				ln, err := iperf.Kernel.Listen(c.Network(), fmt.Sprintf(":%d", c.Port))
				if err != nil {
					return err
				}
				return rr.Serve(ctx, iperf.Kernel, ln)
			}
			for _, size := range c.Sizes {
				r, err := rr.Run(ctx, iperf.Kernel, c.Network(), c.Address(), size, time.Now().Add(c.Time))
				if err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), r)
			}
			return nil
		},
	}
	c.AddFlags(cmd.Flags())
	root.AddCommand(cmd)
}
