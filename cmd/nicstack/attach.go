package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/nicstack/nicstack/runtime/supervisor"
)

func init() {
	var (
		socket, name string
		a            supervisor.Attachment
	)
	attach := &cobra.Command{
		Use:   "attach NAME",
		Short: "Attach a guest to the running scenario: a vm component whose Nic session goes to the router",
		Long: `Attach starts a guest beside the running scenario without touching the rest: a <start> of
the vm component named NAME, its Nic session routed to the router (the child that provides
Nic, or --router) under the label --label (default NAME), which a <policy> of the router
must select. It is a component like any other: status, metrics, capture and the restart
policy count it. A named run (run --name) keeps its attachments and brings them back when
it starts again; detach removes one. Refused, with nothing changed: a name the scenario
has, a label no policy selects, a full DHCP pool in its domain, a missing namespace.

Guests: embedded (gVisor's stack, its address by DHCP), netns (a TAP into a namespace, made
for it by the run or --netns, with --address on the Linux side, a CIDR or dhcp for a lease
the run takes from the router's DHCP server on its behalf: needs a root run), tap (a netns
guest whose interface the run only brings up, unconfigured, for what owns the namespace: a
VM runtime's bridge, a DHCP client of its own) and vhost-user (a QEMU connects to NAME.sock
in the run folder).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path, err := supervisor.FindSocket(socket, name)
			if err != nil {
				return err
			}
			a.Name = args[0]
			got, err := supervisor.RequestAttach(path, a)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s attached: %s guest, label %q at %s\n", got.Name, got.Guest, got.Label, got.Router)
			return nil
		},
	}
	f := attach.Flags()
	f.StringVarP(&name, "name", "s", "", "attach to the run started with --name NAME (a systemd instance: nicstack@NAME)")
	f.StringVar(&socket, "socket", "", "attach to the supervisor at this Unix socket (default: the unnamed run's, else the one named run)")
	f.StringVar(&a.Guest, "guest", "embedded", "the guest: embedded, netns, tap or vhost-user")
	f.StringVar(&a.Label, "label", "", "the label the router sees, which its policies select a domain by (default NAME)")
	f.StringVar(&a.Router, "router", "", "the child that serves the Nic session (default the one that provides Nic)")
	f.StringVar(&a.Affinity, "affinity", "", "X,Y: the cell of the affinity space the guest runs on")
	f.StringVar(&a.Netns, "netns", "", "netns or tap guest: an existing namespace, as /run/netns/NAME (default one the run makes)")
	f.StringVar(&a.Address, "address", "", "netns guest: the address of the Linux side, CIDR, or dhcp (a lease the run takes for it)")
	f.StringVar(&a.Gateway, "gateway", "", "netns guest: the default route of the Linux side")
	root.AddCommand(attach)

	var dsocket, dname string
	detach := &cobra.Command{
		Use:   "detach NAME",
		Short: "Detach a guest that attach attached: stop it and forget it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path, err := supervisor.FindSocket(dsocket, dname)
			if err != nil {
				return err
			}
			if err := supervisor.RequestDetach(path, args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s detached\n", args[0])
			return nil
		},
	}
	detach.Flags().StringVarP(&dname, "name", "s", "", "detach from the run started with --name NAME")
	detach.Flags().StringVar(&dsocket, "socket", "", "detach from the supervisor at this Unix socket (default: the unnamed run's, else the one named run)")
	root.AddCommand(detach)
}
