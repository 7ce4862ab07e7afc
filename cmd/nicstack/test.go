package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/nicstack/nicstack/components"
	"github.com/nicstack/nicstack/internal/hostservice"
	"github.com/nicstack/nicstack/runtime/pkgtest"
	"github.com/nicstack/nicstack/runtime/supervisor"
)

func init() {
	var (
		binDir          string
		asJSON, verbose bool
	)
	cmd := &cobra.Command{
		Use:   "test RUNTIME...",
		Short: "Run Genode package runtime files as tests, as Genode's depot autopilot does",
		Long: `test runs each Genode package runtime file (binary init) in turn: its <config> under the
supervisor, until one of its <succeed> or <fail> criteria decides, by a log pattern, the exit
value of a child with <exit propagate="yes"/>, or its after_seconds. The patterns see the log
as the depot autopilot shows it: the init's own lines as they are, a component's as
"[NAME] text". One line per package says ok or failed, why, and how long it took; the log of
a failed one follows. The exit status is 0 only when every package succeeded.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			out := cmd.OutOrStdout()
			var echo io.Writer
			if verbose && !asJSON {
				echo = out
			}
			var verdicts []*pkgtest.Verdict
			failed := 0
			for _, file := range args {
				v := pkgtest.Run(ctx, file, supervisor.Options{
					Components: components.Table, ParentServices: hostservice.Services(), BinDirs: supervisor.BinDirs(binDir),
				}, echo)
				verdicts = append(verdicts, v)
				if v.Result != "ok" {
					failed++
				}
				if asJSON {
					continue
				}
				fmt.Fprintln(out, v)
				if v.Result != "ok" && !verbose {
					for _, l := range v.Log {
						fmt.Fprintln(out, "   ", l)
					}
				}
			}
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				if err := enc.Encode(verdicts); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(out, "succeeded: %d failed: %d\n", len(verdicts)-failed, failed)
			}
			if failed > 0 {
				return fmt.Errorf("%d of %d packages failed", failed, len(verdicts))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&binDir, "bin", "", "folder with component binaries, searched first")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the verdicts as JSON")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "print every test's log as it runs")
	root.AddCommand(cmd)
}
