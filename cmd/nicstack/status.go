package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/nicstack/nicstack/runtime/supervisor"
)

func init() {
	var socket, name string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the components of the running supervisor: pid, state, CPUs, load, memory, sessions, counters, queues",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path, err := supervisor.FindSocket(socket, name)
			if err != nil {
				return err
			}
			st, err := supervisor.QueryStatus(path)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(st)
			}
			printStatus(cmd.OutOrStdout(), st)
			return nil
		},
	}
	cmd.Flags().StringVarP(&name, "name", "s", "", "ask the run started with --name NAME (a systemd instance: nicstack@NAME)")
	cmd.Flags().StringVar(&socket, "socket", "", "ask the supervisor at this Unix socket (default: the unnamed run's, else the one named run)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON for scripts")
	root.AddCommand(cmd)
}

func printStatus(out io.Writer, st supervisor.Status) {
	fmt.Fprintf(out, "supervisor pid %d, %s, affinity space %s on a %s machine\n", st.Pid, st.Scenario, st.Space, st.Machine)
	if st.Note != "" {
		fmt.Fprintf(out, "note: %s\n", st.Note)
	}
	fmt.Fprintln(out)
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tPID\tSTATE\tRESTARTS\tCPUS\tCPU%\tRSS\tSESSION RAM\tSESSIONS")
	for _, c := range st.Components {
		state := c.State
		if state == "exited" {
			state += fmt.Sprintf(" (%d)", c.ExitCode)
		}
		if c.SkippedHeartbeats > 0 {
			state += fmt.Sprintf(" (skipped %d heartbeats)", c.SkippedHeartbeats)
		}
		name := c.Name
		if c.Attached {
			name += " (attached)"
		}
		fmt.Fprintf(w, "%s\t%d\t%s\t%d\t%s\t%.1f\t%s\t%s/%s\t%d\n", name, c.Pid, state, c.Restarts, c.CPUs,
			c.CPULoad, size(c.RSS), size(c.RAMUsed), size(c.RAM), len(c.Sessions))
	}
	w.Flush()
	for _, c := range st.Components {
		if len(c.Sessions) == 0 && len(c.Counters) == 0 && len(c.Requests) == 0 && len(c.Queues) == 0 {
			continue
		}
		fmt.Fprintf(out, "\n[%s]\n", c.Name)
		for _, s := range c.Sessions {
			link := "up"
			if !s.LinkUp {
				link = "down"
			}
			fmt.Fprintf(out, "  session %d %s %s %q link %s: sent %d frames %d bytes, received %d frames %d bytes, invalid %d, signals sent %d received %d\n",
				s.ID, s.Role, s.Service, s.Label, link, s.Sent.Frames, s.Sent.Bytes, s.Received.Frames, s.Received.Bytes,
				s.Sent.Drops+s.Received.Drops, s.Sent.SignalsSent+s.Received.SignalsSent, s.Sent.SignalsReceived+s.Received.SignalsReceived)
		}
		for _, r := range c.Requests {
			line := fmt.Sprintf("  requested %s %q: %s", r.Service, r.Label, r.State)
			if r.Server != "" {
				line += " at " + r.Server
			}
			if r.Reason != "" {
				line += " (" + strings.SplitN(r.Reason, "\n", 2)[0] + ")"
			}
			fmt.Fprintln(out, line)
		}
		names := make([]string, 0, len(c.Counters))
		for n := range c.Counters {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			fmt.Fprintf(out, "  %s %d\n", n, c.Counters[n])
		}
		printQueues(out, c.Queues)
	}
}

// printQueues is a component's "queues" section: what waits at each hop and since when.
func printQueues(out io.Writer, queues []supervisor.QueueStatus) {
	if len(queues) == 0 {
		return
	}
	fmt.Fprintln(out, "  queues:")
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "    FRAMES\tBYTES\tSOJOURN\t\tHOP")
	for _, q := range queues {
		fmt.Fprintf(w, "    %d\t%s\t%s\t\t%s\n", q.Frames, size(q.Bytes), q.Sojourn.Round(time.Microsecond), q.Hop)
	}
	w.Flush()
}

func size(b uint64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.1fG", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1fM", float64(b)/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.0fK", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%d", b)
}
