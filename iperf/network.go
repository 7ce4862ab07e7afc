package iperf

import (
	"context"
	"net"
)

// Network is where iperf opens its connections: the host's kernel sockets (Kernel) or a
// user-space stack such as nicstack's netstack.Stack. Addresses are "host:port".
type Network interface {
	DialContext(ctx context.Context, network, address string) (net.Conn, error)
	Listen(network, address string) (net.Listener, error)
}

// Kernel is the host's own network stack.
var Kernel Network = kernelNetwork{}

type kernelNetwork struct{}

func (kernelNetwork) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, network, address)
}

func (kernelNetwork) Listen(network, address string) (net.Listener, error) {
	return net.Listen(network, address)
}
