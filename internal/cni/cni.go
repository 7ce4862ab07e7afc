// Package cni is nicstack-cni's logic: the CNI commands (spec 1.0.0 and 1.1.0, through
// containernetworking/cni's skel) over a nicstack run's attach and detach. A pod's network is
// an attachment: a netns guest whose TAP the supervisor puts into the pod's namespace, named
// as the runtime asks, with a lease the supervisor takes from the router's DHCP server or the
// static address of the network config. It is not the attach
// itself (runtime/supervisor) nor the command (cmd/nicstack-cni, which only calls Main).
package cni

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/nicstack/nicstack/runtime/dhcplease"
	"github.com/nicstack/nicstack/runtime/supervisor"
)

// Versions are the spec versions nicstack-cni speaks: GC and STATUS came with 1.1.0.
var Versions = version.PluginSupports("1.0.0", "1.1.0")

// upTimeout bounds ADD's wait for the supervisor to make the pod's interface, leaseTimeout
// its wait for the lease.
const (
	upTimeout    = 20 * time.Second
	leaseTimeout = 30 * time.Second
)

// Main runs the command the runtime's environment names and exits, printing a CNI error as
// JSON on failure.
func Main() {
	skel.PluginMainFuncs(skel.CNIFuncs{Add: Add, Del: Del, Check: Check, GC: GC, Status: Status},
		Versions, "nicstack-cni: a pod's network as a guest of a nicstack run (spec "+strings.Join(Versions.SupportedVersions(), ", ")+")")
}

// AttachmentName is the attachment of a container's interface: deterministic, so that DEL and
// CHECK find what ADD made, and within a netns guest's name rules (16 letters, digits or _).
func AttachmentName(containerID, ifname string) string {
	h := sha256.Sum256([]byte(containerID + "\x00" + ifname))
	return "cni_" + hex.EncodeToString(h[:6])
}

// Add attaches the container's namespace as CNI_IFNAME, with a lease the supervisor takes
// from the router's DHCP server or the config's static address, and prints the result; on an
// error nothing stays attached.
func Add(args *skel.CmdArgs) error {
	conf, err := ParseNetConf(args.StdinData)
	if err != nil {
		return err
	}
	if conf.Guest == "vhost-user" {
		return addVhostUser(args, conf)
	}
	st, leased, err := address(conf, args.Args)
	if err != nil {
		return err
	}
	if err := netnsPath(args.Netns); err != nil {
		return err
	}
	sock, err := socket(conf)
	if err != nil {
		return err
	}
	if _, err := supervisor.QueryStatus(sock); err != nil {
		return types.NewError(types.ErrTryAgainLater, "the nicstack run does not answer", err.Error())
	}
	a := supervisor.Attachment{
		Name: AttachmentName(args.ContainerID, args.IfName), Guest: conf.Guest, Label: conf.Label,
		Router: conf.Router, Netns: args.Netns, Address: "dhcp", Ifname: args.IfName,
		ContainerID: args.ContainerID,
	}
	if !leased {
		a.Address = st.Address.String()
	}
	if st.Gateway.IsValid() {
		a.Gateway = st.Gateway.String()
	}
	if _, err := supervisor.RequestAttach(sock, a); err != nil {
		if status.Code(err) == codes.Unavailable { // the run ended or went away meanwhile
			return types.NewError(types.ErrTryAgainLater, "the nicstack run does not answer", err.Error())
		}
		return types.NewError(types.ErrInternal, "nicstack refused the attachment", err.Error())
	}
	var lease *dhcplease.Lease
	if leased {
		if lease, err = waitLease(sock, a.Name); err != nil {
			supervisor.RequestDetach(sock, a.Name) // nothing stays of a failed ADD
			return types.NewError(types.ErrInternal, fmt.Sprintf("no DHCP lease for %s in %s", args.IfName, args.Netns), err.Error())
		}
		st = Static{Address: lease.Address, Gateway: lease.Gateway}
	}
	iface, err := waitUp(args.Netns, args.IfName, st)
	if err != nil {
		supervisor.RequestDetach(sock, a.Name)
		return types.NewError(types.ErrInternal, fmt.Sprintf("the interface %s did not come up in %s", args.IfName, args.Netns), err.Error())
	}
	r := &types100.Result{
		CNIVersion: conf.CNIVersion,
		Interfaces: []*types100.Interface{{Name: args.IfName, Mac: iface.HardwareAddr.String(), Mtu: iface.MTU, Sandbox: args.Netns}},
		IPs:        []*types100.IPConfig{{Interface: types100.Int(0), Address: ipNet(st.Address)}},
		DNS:        conf.IPAM.DNS,
	}
	if st.Gateway.IsValid() {
		r.IPs[0].Gateway = net.IP(st.Gateway.AsSlice())
		r.Routes = []*types.Route{{Dst: net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}, GW: r.IPs[0].Gateway}}
	}
	if lease != nil && len(lease.DNS) > 0 {
		r.DNS = types.DNS{}
		for _, d := range lease.DNS {
			r.DNS.Nameservers = append(r.DNS.Nameservers, d.String())
		}
	}
	if r.DNS.IsEmpty() {
		r.DNS = conf.DNS
	}
	return types.PrintResult(r, conf.CNIVersion)
}

// address is the pod's address: leased (from the router's DHCP server, the supervisor's to
// take) or static (st).
func address(conf *NetConf, cniArgs string) (st Static, leased bool, err error) {
	if leased, err = conf.Leased(cniArgs); err != nil || leased {
		return st, leased, err
	}
	st, err = conf.Static(cniArgs)
	return st, false, err
}

// waitLease waits for the supervisor to hold a lease for the attachment name, as its status
// shows it; the supervisor's client retransmits with RFC 2131's backoff (4, 8, 16 s), so a
// router that answers at all answers within leaseTimeout.
func waitLease(sock, name string) (*dhcplease.Lease, error) {
	deadline := time.Now().Add(leaseTimeout)
	for {
		status, err := supervisor.QueryStatus(sock)
		if err == nil {
			i := slices.IndexFunc(status.Attachments, func(a supervisor.Attachment) bool { return a.Name == name })
			switch {
			case i < 0:
				return nil, errors.New("the run detached it")
			case status.Attachments[i].Lease != nil:
				return status.Attachments[i].Lease, nil
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("none within %v (%v)", leaseTimeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Del detaches the container's interface. What is already gone is no error: the attachment,
// the namespace, the run.
func Del(args *skel.CmdArgs) error {
	_, sock, err := netConfAndSocket(args.StdinData)
	if err != nil {
		return err
	}
	return detach(sock, AttachmentName(args.ContainerID, args.IfName))
}

// detach detaches name if the run at sock has it; a run that does not answer has nothing.
func detach(sock, name string) error {
	st, err := supervisor.QueryStatus(sock)
	if err != nil || !slices.ContainsFunc(st.Attachments, func(a supervisor.Attachment) bool { return a.Name == name }) {
		return nil
	}
	// NotFound: the supervisor detached it meanwhile (its namespace vanished).
	if err := supervisor.RequestDetach(sock, name); err != nil && status.Code(err) != codes.NotFound {
		return types.NewError(types.ErrInternal, "detaching "+name, err.Error())
	}
	return nil
}

// Check verifies the container's attachment: the run keeps it and runs its guest (holding its
// lease, for a leased address), and the interface in the namespace has the address and the
// default route.
func Check(args *skel.CmdArgs) error {
	conf, err := ParseNetConf(args.StdinData)
	if err != nil {
		return err
	}
	if conf.Guest == "vhost-user" {
		return checkVhostUser(args, conf)
	}
	st, leased, err := address(conf, args.Args)
	if err != nil {
		return err
	}
	sock, err := socket(conf)
	if err != nil {
		return err
	}
	status, err := supervisor.QueryStatus(sock)
	if err != nil {
		return types.NewError(types.ErrTryAgainLater, "the nicstack run does not answer", err.Error())
	}
	name := AttachmentName(args.ContainerID, args.IfName)
	i := slices.IndexFunc(status.Attachments, func(a supervisor.Attachment) bool { return a.Name == name })
	if i < 0 || status.Attachments[i].ContainerID != args.ContainerID {
		return types.NewError(types.ErrUnknownContainer, fmt.Sprintf("the run has no attachment %s of container %s", name, args.ContainerID), "")
	}
	a := status.Attachments[i]
	want := "dhcp"
	if !leased {
		want = st.Address.String()
	}
	if a.Netns != args.Netns || a.Address != want {
		return types.NewError(types.ErrInternal, fmt.Sprintf("attachment %s is %s in %s, the config says %s in %s", name, a.Address, a.Netns, want, args.Netns), "")
	}
	if leased {
		if a.Lease == nil {
			return types.NewError(types.ErrInternal, fmt.Sprintf("attachment %s holds no DHCP lease", name), "")
		}
		st = Static{Address: a.Lease.Address, Gateway: a.Lease.Gateway}
	}
	for _, c := range status.Components {
		if c.Name == name && c.State != "running" {
			return types.NewError(types.ErrInternal, fmt.Sprintf("attachment %s's guest is %s", name, c.State), "")
		}
	}
	if err := interfaceHas(args.Netns, args.IfName, st); err != nil {
		return types.NewError(types.ErrInternal, "checking "+args.IfName+" in "+args.Netns, err.Error())
	}
	return nil
}

// GC detaches every attachment of a container whose interface is not among the runtime's
// valid attachments. A run serves one CNI network: its other attachments are not nicstack-cni's
// (they have no container id) and stay.
func GC(args *skel.CmdArgs) error {
	conf, sock, err := netConfAndSocket(args.StdinData)
	if err != nil {
		return err
	}
	status, err := supervisor.QueryStatus(sock)
	if err != nil {
		return nil // a run that does not answer keeps nothing attached
	}
	var errs []error
	for _, a := range status.Attachments {
		valid := slices.ContainsFunc(conf.ValidAttachments, func(v types.GCAttachment) bool {
			return v.ContainerID == a.ContainerID && v.IfName == a.Ifname
		})
		if a.ContainerID == "" || valid {
			continue
		}
		if err := detach(sock, a.Name); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return types.NewError(types.ErrInternal, "garbage collection", err.Error())
	}
	return nil
}

// Status says whether the plugin can attach: the run answers (else 50), and none of its
// components has failed for good (else 51, limited connectivity).
func Status(args *skel.CmdArgs) error {
	_, sock, err := netConfAndSocket(args.StdinData)
	if err != nil {
		return err
	}
	status, err := supervisor.QueryStatus(sock)
	if err != nil {
		return types.NewError(types.ErrPluginNotAvailable, "the nicstack run does not answer", err.Error())
	}
	var failed []string
	for _, c := range status.Components {
		if c.State == "failed" {
			failed = append(failed, c.Name)
		}
	}
	if len(failed) > 0 {
		return types.NewError(types.ErrLimitedConnectivity, "components of the nicstack run failed: "+strings.Join(failed, ", "), "")
	}
	return nil
}

// netConfAndSocket parses a netconf and finds the socket of the run it names.
func netConfAndSocket(data []byte) (*NetConf, string, error) {
	conf, err := ParseNetConf(data)
	if err != nil {
		return nil, "", err
	}
	sock, err := socket(conf)
	return conf, sock, err
}

// socket is the control socket of the config's run, found as `nicstack status -s RUN` finds it.
func socket(conf *NetConf) (string, error) {
	sock, err := supervisor.FindSocket("", conf.Run)
	if err != nil {
		return "", invalid("run: " + err.Error())
	}
	return sock, nil
}

// netnsPath refuses a CNI_NETNS the supervisor cannot adopt: it takes the runtime's pinned
// namespaces (/run/netns, /var/run/netns), not a process's /proc/PID/ns/net, which would name
// another namespace once the process is gone and its pid reused.
func netnsPath(path string) error {
	if dir := filepath.Dir(path); !filepath.IsAbs(path) || dir != "/run/netns" && dir != "/var/run/netns" {
		return types.NewError(types.ErrInvalidEnvironmentVariables,
			fmt.Sprintf("CNI_NETNS=%q: nicstack takes a namespace pinned in /run/netns or /var/run/netns (a /proc/PID/ns/net path is still to come)", path), "")
	}
	if _, err := os.Stat(path); err != nil {
		return types.NewError(types.ErrUnknownContainer, "CNI_NETNS: the namespace is not there", err.Error())
	}
	return nil
}
