package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/nicstack/nicstack/runtime/supervisor"
)

func init() {
	root.AddCommand(&cobra.Command{
		Use:   "cleanup",
		Short: "Remove what killed runs left behind: processes in their namespaces, namespaces, run folders, sockets",
		Long: `Cleanup removes what runs that were killed (SIGKILL, a crash) left behind: the processes
still inside their network namespaces, the namespaces, their run folders and control sockets
no supervisor answers on. Nothing of a live run is touched. nicstack run does the same when
it starts.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			removed := supervisor.RemoveLeftovers()
			for _, r := range removed {
				fmt.Fprintln(cmd.OutOrStdout(), "removed", r)
			}
			if len(removed) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "nothing left behind")
			}
			return nil
		},
	})
}
