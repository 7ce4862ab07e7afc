package guests

import (
	"github.com/nicstack/nicstack/runtime/component"
	"github.com/nicstack/nicstack/runtime/config"
)

// VM is the vm component's handler: its first config's guest attribute picks the guest,
// which stays for the component's life.
type VM struct {
	c *component.Component
	component.Handler
}

// NewVM returns the handler.
func NewVM(c *component.Component) *VM { return &VM{c: c} }

func (v *VM) Configure(n *config.Node) error {
	if v.Handler == nil {
		switch g := n.String("guest", "embedded"); g {
		case "embedded":
			v.Handler = NewEmbedded(v.c)
		case "netns":
			v.Handler = NewNetns(v.c)
		case "stream":
			v.Handler = NewStream(v.c, component.Listener)
		default:
			a, _ := n.Attr("guest")
			return config.Errorf(a.Pos, "guest=%q: expected embedded, netns or stream", g)
		}
	}
	return v.Handler.Configure(n)
}

// Stop stops the guest, if a config picked one.
func (v *VM) Stop() {
	if v.Handler != nil {
		v.Handler.Stop()
	}
}
