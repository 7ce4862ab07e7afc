package guests

import (
	"context"
	"fmt"
	"sync"

	"github.com/nicstack/nicstack/internal/iperf"
)

// serveIperf runs the config's iperf servers until ctx ends: one on cmd's port, or
// iperf_servers of them on consecutive ports, each serving one test at a time as iperf3 does.
func (h *Host) serveIperf(ctx context.Context, cmd *iperf.Command) {
	var wg sync.WaitGroup
	for i := range max(h.cfg.IperfServers, 1) {
		c := *cmd
		c.Port += i
		ln, err := h.st.Listen(c.ListenNetwork(), c.ListenAddress())
		if err != nil {
			h.env.Warn("iperf server", "err", err)
			break
		}
		h.env.Info("iperf server listening", "address", c.ListenAddress())
		srv := c.NewServer(h.st)
		srv.OnReport = h.report
		srv.Logf = func(f string, a ...any) { h.env.Info(fmt.Sprintf(f, a...)) }
		wg.Go(func() {
			if err := srv.Serve(ctx, ln); err != nil && ctx.Err() == nil {
				h.env.Warn("iperf server", "err", err)
			}
		})
	}
	wg.Wait()
}
