package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/nicstack/nicstack/internal/qemu"
)

func init() {
	var (
		c         qemu.Config
		scenarios bool
	)
	cmd := &cobra.Command{
		Use:   "guest --netdev NETDEV [--iperf ARGS | --run COMMAND]",
		Short: "Boot the QEMU test guest (built and cached by scripts/guest-image.sh) on a netdev",
		Long: "guest boots the test guest in QEMU, replacing itself with QEMU (so a supervisor's SIGTERM\n" +
			"reaches QEMU): the guest takes a DHCP lease on eth0, runs `nicstack iperf ARGS` (or COMMAND),\n" +
			"prints NICSTACK-GUEST: markers on the console (stdout) and powers off, which ends QEMU.\n" +
			"NETDEV is QEMU's -netdev value with id=" + qemu.NetID + ", e.g. stream,id=net0,server=off,addr.type=unix,addr.path=vm.sock\n" +
			"KVM is used when a probe boot works here, else TCG (" + qemu.AccelEnv + "=kvm|tcg decides).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			build := qemu.BuildImage
			if scenarios {
				build = func(ctx context.Context, _ ...string) (qemu.Image, error) { return qemu.BuildScenarioImage(ctx, false) }
			}
			im, err := build(cmd.Context())
			if err != nil {
				return err
			}
			c.Image = im
			// QEMU's own seccomp filter: no obsolete calls, no setuid, no new processes, no
			// changes of scheduling or affinity (the supervisor pins it).
			c.Extra = append(c.Extra, "-sandbox", "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny")
			args, err := c.Args()
			if err != nil {
				return err
			}
			bin, err := exec.LookPath(qemu.Binary)
			if err != nil {
				return err
			}
			return fmt.Errorf("exec %s: %w", bin, syscall.Exec(bin, append([]string{qemu.Binary}, args...), os.Environ()))
		},
	}
	f := cmd.Flags()
	f.StringVar(&c.Netdev, "netdev", "", "QEMU -netdev value (id="+qemu.NetID+")")
	f.StringVar(&c.Device, "device", "", "the NIC's -device (default virtio-net-pci on "+qemu.NetID+")")
	f.StringArrayVar(&c.Extra, "qemu-arg", nil, "a further QEMU argument (repeatable)")
	f.StringVar(&c.Iperf, "iperf", "", "arguments of the guest's `nicstack iperf`")
	f.StringVar(&c.Run, "run", "", "a shell command the guest runs instead")
	f.IntVar(&c.MemoryMB, "memory", 256, "guest RAM in MiB")
	f.IntVar(&c.CPUs, "cpus", 1, "guest vCPUs")
	f.StringVar(&c.Accel, "accel", "", "kvm or tcg (default: KVM when it works here)")
	f.StringVar(&c.IOMMU, "iommu", "", "an IOMMU's -device, given before the NIC (e.g. intel-iommu,intremap=on,caching-mode=on)")
	f.StringVar(&c.Machine, "machine", "", "QEMU -machine value (e.g. q35,kernel-irqchip=split for an intel-iommu)")
	f.StringVar(&c.Append, "append", "", "more kernel command line (e.g. intel_iommu=on dhcp=no)")
	f.BoolVar(&scenarios, "scenarios", false, "boot the image that runs scenarios inside the guest (components, deploy/'s scenarios in /etc/nicstack, guest-scenario, VFIO modules)")
	cmd.MarkFlagRequired("netdev")
	root.AddCommand(cmd)
}
