package component

import (
	"context"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	controlpb "github.com/nicstack/nicstack/proto"
)

// Handshake is what the supervisor and a component agree on before talking; a component binary
// started by hand sees no cookie and says it must be run by the supervisor.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  1,
	MagicCookieKey:   "NICSTACK_COMPONENT",
	MagicCookieValue: "started-by-nicstack-supervisor",
}

// PluginName is the one plugin every component serves.
const PluginName = "component"

// ControlFD is the component's end of its control socket, the first of exec.Cmd.ExtraFiles.
const ControlFD = 3

// Plugin connects the control service to go-plugin (gRPC only). The supervisor uses it with
// Server nil and gets a controlpb.ComponentClient from Dispense.
type Plugin struct {
	plugin.NetRPCUnsupportedPlugin
	Impl controlpb.ComponentServer
}

func (p *Plugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	controlpb.RegisterComponentServer(s, p.Impl)
	return nil
}

func (p *Plugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return controlpb.NewComponentClient(c), nil
}
