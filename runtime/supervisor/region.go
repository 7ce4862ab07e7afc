package supervisor

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// stateRegion returns a descriptor of c's state region for its next process, nil when its
// component keeps none (component.Spec.State), and makes the region at the first launch: a
// memfd of the spec's size, zero (the component formats it), sealed to its size so that no
// process of the component can make the next one's mapping fault.
func (s *Supervisor) stateRegion(c *child) (*os.File, error) {
	if s.opts.Components == nil {
		return nil, nil
	}
	spec, err := s.opts.Components.Lookup(c.start.Binary)
	if err != nil || spec.State <= 0 {
		return nil, nil
	}
	if c.region == nil {
		name := "nicstack-state-" + c.start.Name
		fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
		if err != nil {
			return nil, fmt.Errorf("%s: state region: memfd_create: %w", c.start.Name, err)
		}
		f := os.NewFile(uintptr(fd), name)
		if err := unix.Ftruncate(fd, int64(spec.State)); err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: state region of %d bytes: %w", c.start.Name, spec.State, err)
		}
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: sealing the state region: %w", c.start.Name, err)
		}
		c.region = f
	}
	// A copy for the launch, which runs beside the loop: a stop meanwhile closes c.region.
	fd, err := unix.FcntlInt(c.region.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: state region: %w", c.start.Name, err)
	}
	return os.NewFile(uintptr(fd), c.region.Name()), nil
}

// discardRegion lets c's state region go: its next process starts afresh, as a child that
// Genode's init restarts deliberately does.
func (c *child) discardRegion() {
	if c.region != nil {
		c.region.Close()
		c.region = nil
	}
}
