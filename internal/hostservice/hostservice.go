// Package hostservice is the services the supervisor provides itself on Linux, handed to it
// as providers (supervisor.Options.ParentServices): "Tap", a TAP with virtio-net offloads, and
// "Packet", a veth end for an AF_PACKET socket, each inside a network namespace of the run,
// and "Platform", a PCI device through VFIO (Genode's platform driver hands devices to
// drivers by that name). It makes devices; the supervisor configures, hands over and deletes
// them.
package hostservice

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/nicstack/nicstack/drivers/afpacket"
	"github.com/nicstack/nicstack/drivers/tap"
	"github.com/nicstack/nicstack/drivers/vfio"
	"github.com/nicstack/nicstack/runtime/netns"
	"github.com/nicstack/nicstack/runtime/supervisor"
)

// Services returns the host's parent services by name, for supervisor.Options.
func Services() map[string]supervisor.ParentService {
	return map[string]supervisor.ParentService{"Tap": Tap, "Packet": Packet, "Platform": Platform}
}

// errNoNetns is a Tap or Packet session without the namespace to put its interface in.
var errNoNetns = errors.New("netns= names the namespace of the run the interface goes into; none given")

// Platform opens the VFIO container and IOMMU group of the PCI device args pci names (bound
// to vfio-pci); the client gets both, for drivers/vfio.Open, and the argument pci.
func Platform(_ uint64, _ *netns.NS, _ int, args map[string]string) (supervisor.ParentDevice, error) {
	container, group, err := vfio.Group(args["pci"], "/sys", "/dev/vfio")
	if err != nil {
		return supervisor.ParentDevice{}, err
	}
	return supervisor.ParentDevice{Files: []*os.File{container, group}, Args: map[string]string{"pci": args["pci"]}}, nil
}

// Tap makes a TAP (IFF_VNET_HDR, TSO and checksum offloads unless args offload=no) inside ns,
// named args ifname (a container's interface, as CNI names it) or else tap<id>; the client
// gets the TAP, for drivers/tap.FromFile.
func Tap(id uint64, ns *netns.NS, mtu int, args map[string]string) (supervisor.ParentDevice, error) {
	if ns == nil {
		return supervisor.ParentDevice{}, errNoNetns
	}
	name := args["ifname"]
	if name == "" {
		name = fmt.Sprintf("tap%d", id)
	}
	f, name, err := tap.Open(tap.Config{Name: name, MTU: mtu, NetNS: ns.File})
	if err != nil {
		return supervisor.ParentDevice{}, err
	}
	d := supervisor.ParentDevice{Iface: name, Files: []*os.File{f}}
	switch args["offload"] {
	case "", "yes":
	case "no":
		raw, err := f.SyscallConn()
		var ierr error
		if err == nil {
			err = raw.Control(func(fd uintptr) { ierr = unix.IoctlSetInt(int(fd), unix.TUNSETOFFLOAD, 0) })
		}
		if err != nil || ierr != nil {
			return d, fmt.Errorf("turning offloads off: %v%v", err, ierr)
		}
	default:
		return d, fmt.Errorf("offload=%q: want yes or no", args["offload"])
	}
	return d, nil
}

// Packet makes a veth pair, one end inside ns, the other in a namespace of the session's own;
// the client gets an AF_PACKET socket there and the argument interface, that end's name, for
// drivers/afpacket.FromFile.
func Packet(id uint64, ns *netns.NS, mtu int, _ map[string]string) (supervisor.ParentDevice, error) {
	var d supervisor.ParentDevice
	if ns == nil {
		return d, errNoNetns
	}
	own, err := netns.New("pkt")
	if err != nil {
		return d, err
	}
	d.Close = func() { own.Close() }
	d.Iface = fmt.Sprintf("veth%d", id)
	end := fmt.Sprintf("pkt%d", id)
	if err := netns.Veth(d.Iface, ns, end, own); err != nil {
		return d, err
	}
	if err := ns.IP("link", "set", d.Iface, "mtu", strconv.Itoa(mtu)); err != nil {
		return d, err
	}
	if err := own.IP("link", "set", end, "mtu", strconv.Itoa(mtu)); err != nil {
		return d, err
	}
	sock, err := afpacket.NewSocket(own.File)
	if err != nil {
		return d, err
	}
	d.Files = []*os.File{sock}
	d.Args = map[string]string{"interface": end}
	return d, nil
}
