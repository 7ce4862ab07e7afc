package cni

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/nicstack/nicstack/runtime/supervisor"
)

// A vhost-user pod is a VM runtime's (KubeVirt, Kata): the attachment is a vm component that
// serves vhost-user on a socket in the run folder, and the result's interface names that
// socket (socketPath, spec 1.1) for the runtime to hand its VMM. The VM's guest takes its
// address from nic_router's DHCP server itself, so the result has no IPs.

// addVhostUser attaches the container's interface as a vhost-user guest and prints the
// result once the guest listens; on an error nothing stays attached.
func addVhostUser(args *skel.CmdArgs, conf *NetConf) error {
	sock, err := socket(conf)
	if err != nil {
		return err
	}
	a, err := supervisor.RequestAttach(sock, supervisor.Attachment{
		Name: AttachmentName(args.ContainerID, args.IfName), Guest: conf.Guest, Label: conf.Label,
		Router: conf.Router, ContainerID: args.ContainerID,
	})
	if err != nil {
		if status.Code(err) == codes.Unavailable {
			return types.NewError(types.ErrTryAgainLater, "the nicstack run does not answer", err.Error())
		}
		return types.NewError(types.ErrInternal, "nicstack refused the attachment", err.Error())
	}
	if err := waitListening(sock, a); err != nil {
		supervisor.RequestDetach(sock, a.Name) // nothing stays of a failed ADD
		return types.NewError(types.ErrInternal, fmt.Sprintf("the vhost-user guest of %s does not listen", args.IfName), err.Error())
	}
	r := &types100.Result{
		CNIVersion: conf.CNIVersion,
		Interfaces: []*types100.Interface{{Name: args.IfName, SocketPath: a.Socket}},
		DNS:        conf.DNS,
	}
	return types.PrintResult(r, conf.CNIVersion)
}

// waitListening waits until the attachment's guest runs and its socket is there.
func waitListening(sock string, a supervisor.Attachment) error {
	deadline := time.Now().Add(upTimeout)
	for {
		err := listening(sock, a.Name, a.Socket)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// listening says whether the run at sock runs the guest name and its socket path is a socket.
func listening(sock, name, path string) error {
	st, err := supervisor.QueryStatus(sock)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(st.Components, func(c supervisor.ComponentStatus) bool { return c.Name == name })
	switch {
	case i < 0:
		return errors.New("the run has no such guest")
	case st.Components[i].State != "running":
		return fmt.Errorf("its guest is %s", st.Components[i].State)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("%s is no socket", path)
	}
	return nil
}

// checkVhostUser verifies that the run keeps the container's vhost-user attachment and that
// its guest runs and listens.
func checkVhostUser(args *skel.CmdArgs, conf *NetConf) error {
	sock, err := socket(conf)
	if err != nil {
		return err
	}
	st, err := supervisor.QueryStatus(sock)
	if err != nil {
		return types.NewError(types.ErrTryAgainLater, "the nicstack run does not answer", err.Error())
	}
	name := AttachmentName(args.ContainerID, args.IfName)
	i := slices.IndexFunc(st.Attachments, func(a supervisor.Attachment) bool { return a.Name == name })
	if i < 0 || st.Attachments[i].ContainerID != args.ContainerID || st.Attachments[i].Guest != "vhost-user" {
		return types.NewError(types.ErrUnknownContainer, fmt.Sprintf("the run has no vhost-user attachment %s of container %s", name, args.ContainerID), "")
	}
	if err := listening(sock, name, st.Attachments[i].Socket); err != nil {
		return types.NewError(types.ErrInternal, "checking the vhost-user guest "+name, err.Error())
	}
	return nil
}
