package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/nicstack/nicstack/components"
	"github.com/nicstack/nicstack/runtime/config"
	"github.com/nicstack/nicstack/runtime/pkgtest"
	"github.com/nicstack/nicstack/runtime/supervisor"
)

func init() {
	var componentName, binDir string
	cmd := &cobra.Command{
		Use:   "check [--component NAME] FILE",
		Short: "Validate a scenario, a package's runtime file, or a bare component config, without starting anything",
		Long: `check reads a scenario (XML or HID) and reports every problem with file:line:column:
syntax, unknown nodes and attributes, unknown binaries, routes to services nobody provides,
ambiguous <any-child/>, aliases of missing children, affinity outside the space, and component
configs that do not match their component's schema. FILE may be a Genode package's runtime
file: its own nodes and criteria are checked too. Then one note per line names what the file
says that nicstack accepts and ignores (caps, priority, Genode's core services, content that
is no component). With --component NAME, FILE is a bare <config> of that component (a router
config pasted from Sculpt, say), checked against its schema.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := os.ReadFile(args[0])
			if err != nil {
				return err
			}
			var errs []error
			var notes []*config.Error
			switch {
			case componentName != "":
				errs = supervisor.CheckComponent(components.Table, componentName, args[0], data)
			case pkgtest.IsRuntime(args[0], data):
				errs, notes = pkgtest.Check(args[0], data, supervisor.BinDirs(binDir), components.Table)
			default:
				errs = supervisor.Check(args[0], data, supervisor.BinDirs(binDir), components.Table)
				notes = supervisor.IgnoredIn(args[0], data)
			}
			for _, n := range notes {
				fmt.Fprintf(cmd.OutOrStdout(), "%s: note: %s\n", n.Pos, n.Msg)
			}
			for _, e := range errs {
				fmt.Fprintln(cmd.ErrOrStderr(), e)
			}
			if len(errs) > 0 {
				return fmt.Errorf("%s: %d problem(s)", args[0], len(errs))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: ok\n", args[0])
			return nil
		},
	}
	cmd.Flags().StringVar(&componentName, "component", "", "check FILE as the config of this component")
	cmd.Flags().StringVar(&binDir, "bin", "", "folder with component binaries, searched first")
	root.AddCommand(cmd)
}
