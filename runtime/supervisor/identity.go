// Whom components run as: the supervisor alone keeps root's powers. Run as root, it starts
// each component as an unprivileged user with no capabilities (its own dynamic uid by
// default); the component then confines itself (package sandbox). It hands components only
// descriptors, so they need no access to anything on the host.

package supervisor

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// dynamicUIDBase starts the uids given to components as their own (the range systemd gives
// DynamicUser services): one uid and gid per child name, so that a component cannot signal
// or trace another.
const dynamicUIDBase = 61184

// RunAs values: each component its own uid, or all as the supervisor (root: no drop).
const (
	RunAsDynamic = "dynamic"
	RunAsRoot    = "root"
)

// identities hands out whom each child runs as.
type identities struct {
	mode  string // RunAsDynamic, RunAsRoot, or a user: all children as uid/gid
	uid   uint32
	gid   uint32
	names map[string]uint32 // dynamic: the uid each child name got
}

// newIdentities reads Options.RunAs. Not running as root, components run as the supervisor's
// own user (they can have no more).
func newIdentities(runAs string) (*identities, error) {
	if os.Geteuid() != 0 || runAs == RunAsRoot {
		return &identities{mode: RunAsRoot}, nil
	}
	if runAs == "" || runAs == RunAsDynamic {
		return &identities{mode: RunAsDynamic, names: map[string]uint32{}}, nil
	}
	u, err := user.Lookup(runAs)
	if err != nil {
		if u, err = user.LookupId(runAs); err != nil {
			return nil, fmt.Errorf("run components as %q: no such user (or use %q, %q)", runAs, RunAsDynamic, RunAsRoot)
		}
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	if uid == 0 {
		return &identities{mode: RunAsRoot}, nil
	}
	return &identities{mode: runAs, uid: uint32(uid), gid: uint32(gid)}, nil
}

// drops reports whether children run as another user than the supervisor.
func (id *identities) drops() bool { return id.mode != RunAsRoot }

// of returns the credential child name runs with, nil for the supervisor's own.
func (id *identities) of(name string) *syscall.Credential {
	switch id.mode {
	case RunAsRoot:
		return nil
	case RunAsDynamic:
		uid, ok := id.names[name]
		if !ok {
			uid = dynamicUIDBase + uint32(len(id.names))
			id.names[name] = uid
		}
		return &syscall.Credential{Uid: uid, Gid: uid, Groups: []uint32{}}
	}
	return &syscall.Credential{Uid: id.uid, Gid: id.gid, Groups: []uint32{}}
}

// program returns the credential program name runs with, nil for the supervisor's: its own
// uid, the run's program group (programGroup) as its group, and /dev/kvm's group as its one
// other when that group may use KVM (QEMU then picks KVM; else TCG).
func (id *identities) program(name string) *syscall.Credential {
	c := id.of(name)
	if c == nil {
		return nil
	}
	c.Gid, _ = id.programGroup()
	if fi, err := os.Stat("/dev/kvm"); err == nil && fi.Mode()&os.ModeCharDevice != 0 && fi.Mode().Perm()&0o060 == 0o060 {
		if g := fi.Sys().(*syscall.Stat_t).Gid; g != 0 {
			c.Groups = []uint32{g}
		}
	}
	return c
}

// programGroup is the group programs run in and the sockets the supervisor binds belong to
// (group read and write), so that a program (QEMU) connects to them.
// false: no children run as other users.
func (id *identities) programGroup() (uint32, bool) {
	c := id.of("") // no child is named "": the group gets a dynamic id of its own
	if c == nil {
		return 0, false
	}
	return c.Gid, true
}

// traversable reports whether every folder on dir's path lets others through, so that a
// component running as another user reaches the folder made for it inside.
func traversable(dir string) bool {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return false
	}
	for {
		fi, err := os.Stat(dir)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return false
		}
		if dir == "/" {
			return true
		}
		dir = filepath.Dir(dir)
	}
}
