// Attachments: guests that come and go while the run goes on (`nicstack attach`, `nicstack
// detach`). Each is a <start> of the vm component that the supervisor writes itself; the
// running scenario is the file's starts followed by the attachments', so a reload of the file
// keeps them and an attach is a reload with one more start: nothing else restarts. The event
// loop owns them. A named run keeps them in its state folder (Options.StateDir), so that a run
// of the same name that starts again, after a crash or a stop, brings them back.

package supervisor

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/nicstack/nicstack/runtime/config"
	"github.com/nicstack/nicstack/runtime/dhcplease"
)

// Attachment is a guest attached at run time: what `nicstack attach` asks for. Attach fills
// in what it defaults (Label, Router), so that the saved attachment comes back the same.
type Attachment struct {
	Name string `json:"name"`
	// Guest is embedded (the default), netns, tap (a netns guest whose interface the supervisor
	// leaves unconfigured, for what owns the namespace: a VM runtime's bridge, a DHCP client of
	// its own) or vhost-user.
	Guest string `json:"guest"`
	// Label is the label the router sees for the guest's Nic session, which its policies
	// select a domain by; default Name.
	Label string `json:"label,omitempty"`
	// Router is the child that serves the Nic session; default the one child that provides
	// Nic (of several, the one whose component selects clients by policy, Spec.Serves).
	Router string `json:"router,omitempty"`
	// Affinity is "X,Y", a cell of the affinity space; "": the component's default.
	Affinity string `json:"affinity,omitempty"`
	// Netns is an existing namespace (a path, as /run/netns/NAME) a netns guest's TAP goes
	// into; "": the run makes one for the guest, named after it.
	Netns string `json:"netns,omitempty"`
	// Address and Gateway are a netns guest's Linux side: its address (CIDR) and default
	// route; or Address "dhcp": the supervisor takes a lease from the router's DHCP server on
	// the guest's behalf, sets its address and route, and keeps it in Lease.
	Address string `json:"address,omitempty"`
	Gateway string `json:"gateway,omitempty"`
	// Lease is the DHCP lease held for an Address "dhcp", while there is one: kept with the
	// attachment so that a run of the same name that starts again asks for the same address
	// (INIT-REBOOT), and shown to nicstack-cni, whose result it is.
	Lease *dhcplease.Lease `json:"lease,omitempty"`
	// Ifname names a netns guest's interface in its namespace (1 to 15 characters); "": tapN.
	Ifname string `json:"ifname,omitempty"`
	// Socket is where a vhost-user guest's front end (QEMU, a VM runtime) connects: NAME.sock in
	// the run folder, where the supervisor listens. Attach fills it in; a request's is ignored.
	Socket string `json:"socket,omitempty"`
	// ContainerID is the container a CNI runtime attached the guest for (nicstack-cni), by
	// which its DEL, CHECK and GC find the attachment; the supervisor only keeps it.
	ContainerID string `json:"container_id,omitempty"`
}

// Guest kinds an attachment may be.
var attachGuests = []string{"embedded", "netns", "tap", "vhost-user"}

// attachmentsFile holds a named run's attachments in its state folder, as JSON.
const attachmentsFile = "attachments.json"

// attachedNetns is how a netns guest may be named: its name names its namespace (parent.go's
// netnsName), the run's own or, with a path, the name the run gives another's.
var attachedNetns = regexp.MustCompile(`^[A-Za-z0-9_]{1,16}$`)

// Attach starts the guest a describes beside the running scenario, or says why not and
// changes nothing: a name the scenario has, a router that is not there, a label no policy of
// the router selects, a full address pool, a namespace that does not exist.
func (s *Supervisor) Attach(a Attachment) (Attachment, error) {
	var err error
	if !s.call(func() { a, err = s.attach(a) }) {
		return a, errEnded
	}
	return a, err
}

// Detach stops the attached guest name and forgets it.
func (s *Supervisor) Detach(name string) error {
	var err error
	if !s.call(func() { err = s.detach(name, "detached") }) {
		return errEnded
	}
	return err
}

// attach plans a, keeps it and starts it (on the loop).
func (s *Supervisor) attach(a Attachment) (Attachment, error) {
	a.Lease = nil // the supervisor's to take, not the request's to say
	sc, a, err := s.plan(a)
	if err != nil {
		return a, err
	}
	s.attached = append(s.attached, a)
	if err := s.saveAttachments(); err != nil {
		s.attached = s.attached[:len(s.attached)-1]
		return a, err
	}
	s.log.Info(fmt.Sprintf("%s attached: %s guest, label %q at %s", a.Name, a.Guest, a.Label, a.Router))
	s.apply(sc)
	return a, nil
}

// detach forgets the attachment name and stops its child; why says so in the log.
func (s *Supervisor) detach(name, why string) error {
	i := slices.IndexFunc(s.attached, func(a Attachment) bool { return a.Name == name })
	if i < 0 {
		if s.sc.Start(name) != nil {
			return refuse(codes.FailedPrecondition, fmt.Errorf("%q is a <start> of the scenario file, not an attachment: remove it from the file", name))
		}
		return refuse(codes.NotFound, fmt.Errorf("no attachment %q (nicstack status marks them)", name))
	}
	kept := slices.Delete(slices.Clone(s.attached), i, i+1)
	sc, err := s.compose(kept)
	if err != nil {
		return err
	}
	prev := s.attached
	s.attached = kept
	if err := s.saveAttachments(); err != nil {
		s.attached = prev
		return err
	}
	s.log.Info(fmt.Sprintf("%s %s", name, why))
	s.releaseLeases(name)
	s.checkConfigs(sc, func(*Start) bool { return false })
	s.apply(sc)
	return nil
}

// plan checks a against the running scenario and returns the scenario with it, and a with
// its defaults filled in.
func (s *Supervisor) plan(a Attachment) (*Scenario, Attachment, error) {
	if a.Guest == "" {
		a.Guest = "embedded"
	}
	a.Socket = ""
	if a.Guest == "vhost-user" {
		a.Socket = filepath.Join(s.opts.RunDir, a.Name+".sock") // the guest's config's default socket
	}
	if a.Label == "" {
		a.Label = a.Name
	}
	// refuseAs refuses a as a request of the kind code; fail as a malformed one, the most
	// common kind.
	refuseAs := func(code codes.Code, format string, args ...any) (*Scenario, Attachment, error) {
		return nil, a, refuse(code, fmt.Errorf("attach %s: "+format, append([]any{a.Name}, args...)...))
	}
	fail := func(format string, args ...any) (*Scenario, Attachment, error) {
		return refuseAs(codes.InvalidArgument, format, args...)
	}
	switch {
	case a.Name == "":
		return nil, a, refuse(codes.InvalidArgument, errors.New("attach: name the guest"))
	case s.sc.Start(a.Name) != nil || s.sc.Alias(a.Name) != nil:
		where := "the scenario file has"
		if s.attachment(a.Name) != nil {
			where = "an attachment has"
		}
		return refuseAs(codes.AlreadyExists, "%s that name already", where)
	case !slices.Contains(attachGuests, a.Guest):
		return fail("guest %q: want %s", a.Guest, strings.Join(attachGuests, ", "))
	case a.Guest != "netns" && a.Guest != "tap" && (a.Netns != "" || a.Address != "" || a.Gateway != "" || a.Ifname != ""):
		return fail("a namespace, interface name, address and gateway are for a netns guest")
	case a.Guest == "tap" && (a.Address != "" || a.Gateway != ""):
		return fail("a tap guest's interface stays unconfigured: no address or gateway (a netns guest has them)")
	case a.Guest == "netns" && a.Address == "":
		return fail("a netns guest needs the address of its Linux side (CIDR, or dhcp)")
	case a.Address == "dhcp" && a.Gateway != "":
		return fail("an address by DHCP takes its gateway from the lease: leave the gateway out")
	case (a.Guest == "netns" || a.Guest == "tap") && !attachedNetns.MatchString(a.Name):
		return fail("a %s guest's name names its namespace: want 1 to 16 letters, digits or _", a.Guest)
	}
	if a.Netns != "" {
		if err := namespaceThere(a.Netns); err != nil {
			return refuseAs(codes.FailedPrecondition, "%v", err)
		}
	}
	router, err := s.attachRouter(a.Router)
	if err != nil {
		return refuseAs(status.Code(err), "%v", err)
	}
	a.Router = router.Name
	if a.Affinity != "" {
		if _, _, err := attachCell(a.Affinity, s.sc.Space); err != nil {
			return fail("%v", err)
		}
	}
	sc, err := s.compose(append(slices.Clone(s.attached), a))
	if err != nil {
		return fail("%v", err)
	}
	st := sc.Start(a.Name)
	if _, err := s.binary(st); err != nil {
		return refuseAs(codes.FailedPrecondition, "%v", err)
	}
	if errs := s.checkConfigs(sc, func(st *Start) bool { return st.Name == a.Name }); len(errs) > 0 {
		return fail("%v", errors.Join(errs...))
	}
	if err := s.serves(sc, sc.Start(router.Name), st); err != nil {
		return refuseAs(codes.FailedPrecondition, "%v", err)
	}
	return sc, a, nil
}

// attachRouter is the child an attachment's Nic session goes to: the one named, or the one
// that provides Nic, or of several the one whose component selects its clients by policy.
func (s *Supervisor) attachRouter(name string) (*Start, error) {
	if name != "" {
		st := s.sc.Child(name)
		switch {
		case st == nil:
			return nil, refuse(codes.NotFound, fmt.Errorf("router %q: the scenario has no such child", name))
		case !slices.Contains(st.Provides, "Nic"):
			return nil, refuse(codes.InvalidArgument, fmt.Errorf("router %q does not provide Nic", name))
		}
		return st, nil
	}
	var all, serving []*Start
	for _, st := range s.sc.Starts {
		if !slices.Contains(st.Provides, "Nic") || s.attachment(st.Name) != nil {
			continue
		}
		all = append(all, st)
		if spec, err := s.opts.Components.Lookup(st.Binary); err == nil && spec.Serves != nil {
			serving = append(serving, st)
		}
	}
	switch {
	case len(all) == 1:
		return all[0], nil
	case len(serving) == 1:
		return serving[0], nil
	case len(all) == 0:
		return nil, refuse(codes.FailedPrecondition, errors.New("no child of the scenario provides Nic"))
	}
	names := make([]string, len(all))
	for i, st := range all {
		names[i] = st.Name
	}
	return nil, refuse(codes.InvalidArgument, fmt.Errorf("several children provide Nic (%s): name the router", strings.Join(names, ", ")))
}

// serves asks the router's component whether it would take client's Nic session beside the
// sessions the scenario routes to it already (Spec.Serves).
func (s *Supervisor) serves(sc *Scenario, router, client *Start) error {
	spec, err := s.opts.Components.Lookup(router.Binary)
	if err != nil || spec.Serves == nil {
		return nil
	}
	if router.parsed == nil {
		return fmt.Errorf("%s's config is refused; it serves no one", router.Name)
	}
	d, err := sc.Resolve(client, "Nic", "")
	if err != nil {
		return err
	}
	var others []string
	for _, st := range sc.Starts {
		cs, err := s.opts.Components.Lookup(st.Binary)
		if st == client || err != nil || cs.Sessions == nil || st.parsed == nil {
			continue
		}
		for _, r := range cs.Sessions(st.parsed) {
			if od, err := sc.Resolve(st, r.Service, r.Label); err == nil && !od.Parent && od.Server == router.Name && r.Service == "Nic" {
				others = append(others, od.Label)
			}
		}
	}
	return spec.Serves(router.parsed, "Nic", d.Label, others)
}

// compose is the scenario of the file's init config (as last read) with the attachments'
// starts after its own.
func (s *Supervisor) compose(attached []Attachment) (*Scenario, error) {
	n := *s.file
	n.Nodes = slices.Clone(s.file.Nodes)
	for _, a := range attached {
		n.Nodes = append(n.Nodes, a.start(s.file))
	}
	return FromNode(s.path, &n)
}

// start is the <start> node of the attachment, in a scenario whose init config is root: the
// vm component, its Nic session routed to the router under the attachment's label, everything
// else as the scenario's <default-route> says.
func (a Attachment) start(root *config.Node) *config.Node {
	pos := config.Pos{File: "attachment " + a.Name, Line: 1, Col: 1}
	// node makes a node with the attributes of the name, value pairs whose value is not empty.
	node := func(typ string, attrs ...string) *config.Node {
		n := &config.Node{Type: typ, Pos: pos}
		for i := 0; i+1 < len(attrs); i += 2 {
			if attrs[i+1] != "" {
				n.Attrs = append(n.Attrs, config.Attr{Name: attrs[i], Value: attrs[i+1], Pos: pos})
			}
		}
		return n
	}
	st := node("start", "name", a.Name)
	st.Nodes = append(st.Nodes, node("binary", "name", "vm"))
	if a.Affinity != "" {
		x, y, _ := strings.Cut(a.Affinity, ",")
		st.Nodes = append(st.Nodes, node("affinity", "xpos", strings.TrimSpace(x), "ypos", strings.TrimSpace(y)))
	}
	route := node("route")
	nic := node("service", "name", "Nic")
	nic.Nodes = []*config.Node{node("child", "name", a.Router, "label", a.Label)}
	route.Nodes = append(route.Nodes, nic)
	if dr := root.Sub("default-route"); dr != nil {
		route.Nodes = append(route.Nodes, dr.Children()...)
	} else {
		anyService := node("any-service")
		anyService.Nodes = []*config.Node{node("parent")}
		route.Nodes = append(route.Nodes, anyService)
	}
	st.Nodes = append(st.Nodes, route)
	cfg := node("config", "guest", a.Guest)
	switch a.Guest {
	case "netns":
		cfg = node("config", "guest", a.Guest, "netns", a.Name, "netns_path", a.Netns, "ifname", a.Ifname,
			"tap_address", a.Address, "tap_gateway", a.Gateway)
	case "tap": // a netns guest whose interface the supervisor only brings up
		cfg = node("config", "guest", "netns", "netns", a.Name, "netns_path", a.Netns, "ifname", a.Ifname,
			"tap_address", "none")
	}
	st.Nodes = append(st.Nodes, cfg)
	return st
}

// attachCell reads "X,Y", a cell of space.
func attachCell(s string, space Space) (x, y int, err error) {
	xs, ys, ok := strings.Cut(s, ",")
	x, errX := strconv.Atoi(strings.TrimSpace(xs))
	y, errY := strconv.Atoi(strings.TrimSpace(ys))
	if !ok || errX != nil || errY != nil || x < 0 || y < 0 || x >= space.Width || y >= space.Height {
		return 0, 0, fmt.Errorf("affinity %q: want X,Y within the affinity space %s", s, space)
	}
	return x, y, nil
}

// namespaceThere says whether path is a network namespace one can enter.
func namespaceThere(path string) error {
	if !filepath.IsAbs(path) {
		return fmt.Errorf("namespace %q: want an absolute path (as /run/netns/NAME)", path)
	}
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("namespace %s: %w", path, errors.Unwrap(err))
	}
	return nil
}

// attachment returns the attachment name, or nil.
func (s *Supervisor) attachment(name string) *Attachment {
	for i := range s.attached {
		if s.attached[i].Name == name {
			return &s.attached[i]
		}
	}
	return nil
}

// saveAttachments writes the attachments to the state folder, whole (temporary file and
// rename): a crash leaves the old list or the new one.
func (s *Supervisor) saveAttachments() error {
	if s.opts.StateDir == "" {
		return nil
	}
	path := filepath.Join(s.opts.StateDir, attachmentsFile)
	if len(s.attached) == 0 { // none: no file, so that the instance folder empties with the run
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("keeping the attachments: %w", err)
		}
		return nil
	}
	b, err := json.MarshalIndent(s.attached, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".new"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("keeping the attachments: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("keeping the attachments: %w", err)
	}
	return nil
}

// restoreAttachments reads the attachments a run of this name kept and plans each again, in
// order, before the run starts; one that no longer fits (its name is now the file's, its
// namespace vanished, the router refuses it) is dropped with a log line.
func (s *Supervisor) restoreAttachments() error {
	if s.opts.StateDir == "" {
		return nil
	}
	b, err := os.ReadFile(filepath.Join(s.opts.StateDir, attachmentsFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var saved []Attachment
	if err := json.Unmarshal(b, &saved); err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(s.opts.StateDir, attachmentsFile), err)
	}
	for _, a := range saved {
		sc, a, err := s.plan(a)
		if err != nil {
			s.log.Warn(fmt.Sprintf("%s not restored: %v", a.Name, err))
			continue
		}
		s.sc = sc
		s.attached = append(s.attached, a)
		s.log.Info(fmt.Sprintf("%s restored: %s guest, label %q at %s", a.Name, a.Guest, a.Label, a.Router))
	}
	if len(s.attached) != len(saved) {
		return s.saveAttachments()
	}
	return nil
}

// releaseLeases gives back the DHCP leases held for the attached guest name (its Tap
// session's, address=dhcp) while the guest still bridges its interface to the router: the
// DHCPRELEASE goes out before the guest stops and its TAP goes.
func (s *Supervisor) releaseLeases(name string) {
	for _, r := range s.requests {
		if r.key.client == name && r.parent != nil && r.parent.lease != nil {
			r.parent.lease.Release()
		}
	}
}

// leaseOf is the DHCP lease the attachment name holds, nil without.
func (s *Supervisor) leaseOf(name string) *dhcplease.Lease {
	if a := s.attachment(name); a != nil {
		return a.Lease
	}
	return nil
}

// keepLease records the lease (nil: lost) of the attachment name and saves the attachments,
// so that a run that starts again asks for the same address.
func (s *Supervisor) keepLease(name string, l *dhcplease.Lease) {
	a := s.attachment(name)
	if a == nil {
		return
	}
	a.Lease = l
	if err := s.saveAttachments(); err != nil {
		s.log.Error(err.Error())
	}
}

// detachVanished detaches the netns guests whose namespace is gone (its container ended).
func (s *Supervisor) detachVanished() {
	for _, a := range slices.Clone(s.attached) {
		if a.Netns == "" {
			continue
		}
		if err := namespaceThere(a.Netns); err != nil {
			if err := s.detach(a.Name, fmt.Sprintf("detached: its namespace %s vanished", a.Netns)); err != nil {
				s.log.Error(err.Error())
			}
		}
	}
}
