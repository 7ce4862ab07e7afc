package guests

import (
	"fmt"

	"github.com/nicstack/nicstack/components/internal/guest"
	"github.com/nicstack/nicstack/runtime/component"
)

// VM is the vm component's handler: its first config's guest attribute picks the guest,
// which stays for the component's life.
type VM struct {
	c *component.Component
	component.Handler
}

// NewVM returns the handler.
func NewVM(c *component.Component) *VM { return &VM{c: c} }

func (v *VM) Configure(typed any) error {
	if v.Handler == nil {
		cfg, err := component.ConfigOf[guest.Config](typed)
		if err != nil {
			return err
		}
		switch cfg.Guest {
		case "embedded":
			v.Handler = NewEmbedded(v.c)
		case "netns":
			v.Handler = NewNetns(v.c)
		case "stream":
			v.Handler = NewStream(v.c, component.Listener)
		case "vhost-user":
			v.Handler = NewVhostUser(v.c, component.Listener)
		default: // guest.ParseConfig refused it
			return fmt.Errorf("guest=%q: expected embedded, netns, stream or vhost-user", cfg.Guest)
		}
	}
	return v.Handler.Configure(typed)
}

// Stop stops the guest, if a config picked one.
func (v *VM) Stop() {
	if v.Handler != nil {
		v.Handler.Stop()
	}
}
