package supervisor

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/nicstack/nicstack/runtime/dhcplease"
	"github.com/nicstack/nicstack/runtime/netns"
)

// The parent services are sessions the supervisor serves itself, routed with <parent/>: a
// component gets a Linux interface inside a namespace of the run, without privileges. Which
// services there are, and how each makes its interface, the caller hands in
// (Options.ParentServices; package internal/hostservice has Tap and Packet); the supervisor
// does the rest the same way for all: the namespace, the address, route and MTU of the Linux
// side, the command run there, and deleting it all when the session closes.
//
// Args: netns (a name local to the run), netns_path (instead of the run's namespace of that
// name, an existing one at that path under /run/netns or /var/run/netns: a container's, left
// alone when the session closes but for the interface), address (CIDR of the Linux side, or
// dhcp: the supervisor takes a lease from the router's DHCP server on the interface's behalf,
// runtime/dhcplease, and sets its address and route), gateway (default
// route inside the namespace), mtu (1500), exec (a shell command run inside the namespace once
// the interface is up, killed when the session closes; $NICSTACK_INTERFACE names the
// interface); a service may know more (offload).

// ParentService makes the device of one session inside the run's namespace ns (nil when the
// session names none: a device that is no interface, as Platform's PCI device): id is unique
// among the run's sessions (for interface names), mtu the Linux side's, args the session's.
type ParentService func(id uint64, ns *netns.NS, mtu int, args map[string]string) (ParentDevice, error)

// ParentDevice is what a ParentService made: the files the client gets, the interface inside
// the namespace (which the supervisor configures, and deletes when the session closes),
// arguments the client gets besides the session's, and what else to delete then.
type ParentDevice struct {
	Files []*os.File
	Iface string
	Args  map[string]string
	Close func() // nil: nothing beyond the interface
}

// parentSession is what the supervisor made for one session of a parent service; close
// deletes it all.
type parentSession struct {
	id      uint64
	client  string
	service string
	request map[string]string // the arguments it was opened with, as the client asked
	args    map[string]string
	files   []*os.File // handed to the client
	iface   string     // the interface inside the run's namespace
	ns      *netns.NS  // the run's namespace the interface is in
	adopted bool       // ns is another's (netns_path): the session's close removes its name
	undo    func()     // the service's own clean-up (ParentDevice.Close)
	exec    *exec.Cmd
	lease   *dhcplease.Runner // address=dhcp: the lease taken for the interface
	mtu     int
}

// noParentService is the denial of a session routed to the parent for a service it lacks
// (served: the services it has).
func noParentService(service string, served map[string]ParentService) error {
	names := []string{}
	for n := range served {
		names = append(names, n)
	}
	sort.Strings(names)
	return fmt.Errorf("routed to the parent, but the supervisor serves no %s sessions itself (it serves: %s)", service, strings.Join(names, ", "))
}

var netnsName = regexp.MustCompile(`^[A-Za-z0-9_]{1,16}$`)

// openParent makes session id of a parent service for client. It runs off the supervisor
// goroutine (the ip commands take 100-400 ms) and touches no supervisor state but the
// namespaces. remembered is the DHCP lease client's attachment holds, asked for again.
func (s *Supervisor) openParent(service, client string, args map[string]string, id uint64, remembered *dhcplease.Lease) (*parentSession, error) {
	open, ok := s.opts.ParentServices[service]
	if !ok {
		return nil, noParentService(service, s.opts.ParentServices)
	}
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("the supervisor serves %s sessions only when run as root", service)
	}
	name, inNS := args["netns"]
	if inNS && !netnsName.MatchString(name) {
		return nil, fmt.Errorf("%s session: netns=%q: want a name of 1 to 16 letters, digits or _", service, name)
	}
	p := &parentSession{id: id, client: client, service: service, request: args, args: args, mtu: 1500}
	if v, ok := args["mtu"]; ok {
		mtu, err := strconv.Atoi(v)
		if err != nil || mtu < 68 || mtu > 65535 {
			return nil, fmt.Errorf("%s session: mtu=%q: want 68 to 65535", service, v)
		}
		p.mtu = mtu
	}
	if path, ok := args["netns_path"]; ok {
		if dir := filepath.Dir(path); dir != "/run/netns" && dir != "/var/run/netns" {
			return nil, fmt.Errorf("%s session: netns_path=%q: want a namespace in /run/netns or /var/run/netns", service, path)
		}
		ns, err := netns.Adopt(name, path)
		if err != nil {
			return nil, fmt.Errorf("%s session: %w", service, err)
		}
		p.ns, p.adopted = ns, true
	} else if inNS {
		ns, err := s.namespace(name)
		if err != nil {
			return nil, err
		}
		p.ns = ns
	}
	dev, err := open(id, p.ns, p.mtu, args)
	p.files, p.iface, p.undo = dev.Files, dev.Iface, dev.Close
	for k, v := range dev.Args {
		p.args = withArg(p.args, k, v)
	}
	if err != nil {
		p.close()
		return nil, fmt.Errorf("%s session in namespace %s: %w", service, name, err)
	}
	if p.iface == "" { // a device that is no interface (Platform): nothing to configure
		return p, nil
	}
	if err := s.configure(p, remembered); err != nil {
		p.close()
		return nil, fmt.Errorf("%s session in namespace %s: %w", service, name, err)
	}
	return p, nil
}

// namespace returns the run's namespace called name, made on first use.
func (s *Supervisor) namespace(name string) (*netns.NS, error) {
	s.nsMu.Lock()
	defer s.nsMu.Unlock()
	if ns := s.namespaces[name]; ns != nil {
		return ns, nil
	}
	ns, err := netns.New(name)
	if err != nil {
		return nil, err
	}
	s.namespaces[name] = ns
	s.log.Info(fmt.Sprintf("namespace %s made as %s", name, ns.Name))
	return ns, nil
}

// Netns returns the path of the run's namespace called name (usable with setns or ExecIn),
// once a session has made it.
func (s *Supervisor) Netns(name string) (path string, ok bool) {
	s.nsMu.Lock()
	defer s.nsMu.Unlock()
	if ns := s.namespaces[name]; ns != nil {
		return ns.File.Name(), true
	}
	return "", false
}

// deleteNamespaces runs when the run ends.
func (s *Supervisor) deleteNamespaces() {
	s.nsMu.Lock()
	defer s.nsMu.Unlock()
	for name, ns := range s.namespaces {
		if err := ns.Close(); err != nil {
			s.log.Error(fmt.Sprintf("deleting namespace %s: %v", name, err))
		}
		delete(s.namespaces, name)
	}
}

// ExecIn returns a command that runs argv inside the network namespace at nsPath (and dies
// with its parent).
func ExecIn(ctx context.Context, nsPath string, argv []string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "nsenter", append([]string{"--net=" + nsPath, "--"}, argv...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}

func withArg(args map[string]string, k, v string) map[string]string {
	out := map[string]string{k: v}
	for key, val := range args {
		if key != k {
			out[key] = val
		}
	}
	return out
}

// configure sets the Linux side's addresses and routes, or starts taking its IPv4 lease, and
// starts the exec'd command.
func (s *Supervisor) configure(p *parentSession, remembered *dhcplease.Lease) error {
	dhcp, none := p.args["address"] == "dhcp", p.args["address"] == "none"
	if (dhcp || none) && p.args["gateway"] != "" {
		return fmt.Errorf("gateway=%q with address=%s: an address by DHCP takes its gateway from the lease, and an unconfigured interface has none", p.args["gateway"], p.args["address"])
	}
	if a := p.args["address"]; a != "" && !dhcp && !none {
		pfx, err := netip.ParsePrefix(a)
		if err != nil || !pfx.Addr().Is4() || !netns.ScenarioAddr(pfx.Addr()) {
			return fmt.Errorf("address=%q: want a CIDR in 198.18.0.0/15 or a private range", a)
		}
		if err := p.ns.IP("addr", "add", a, "dev", p.iface); err != nil {
			return err
		}
	}
	if err := ipv6Host(p.ns, p.iface, p.args["address6"] != ""); err != nil {
		return err
	}
	if a := p.args["address6"]; a != "" {
		pfx, err := netip.ParsePrefix(a)
		if err != nil || !pfx.Addr().Is6() || !netns.ScenarioAddr(pfx.Addr()) {
			return fmt.Errorf("address6=%q: want a CIDR in 2001:db8::/32 or fd00::/8", a)
		}
		// nodad: a server in the namespace (iperf3 -s) binds it at once, a second early.
		if err := p.ns.IP("-6", "addr", "add", a, "dev", p.iface, "nodad"); err != nil {
			return err
		}
	}
	if err := p.ns.IP("link", "set", p.iface, "up"); err != nil {
		return err
	}
	if g := p.args["gateway"]; g != "" {
		if _, err := netip.ParseAddr(g); err != nil {
			return fmt.Errorf("gateway=%q: %w", g, err)
		}
		if err := p.ns.IP("route", "add", "default", "via", g, "dev", p.iface); err != nil {
			return err
		}
	}
	if g := p.args["gateway6"]; g != "" {
		if a, err := netip.ParseAddr(g); err != nil || !a.Is6() || a.Is4In6() {
			return fmt.Errorf("gateway6=%q: want an IPv6 address", g)
		}
		if err := p.ns.IP("-6", "route", "add", "default", "via", g, "dev", p.iface); err != nil {
			return err
		}
	}
	if dhcp {
		var err error
		client := p.client
		p.lease, err = dhcplease.Run(dhcplease.RunConfig{NS: p.ns, Iface: p.iface, ClientID: append([]byte{0}, client...),
			Remembered: remembered, Log: s.log.With("guest", client), OnLease: func(l *dhcplease.Lease) { go s.post(func() { s.keepLease(client, l) }) }})
		if err != nil {
			return err
		}
	}
	if line := p.args["exec"]; line != "" {
		name := p.client + "/" + p.args["netns"]
		cmd := ExecIn(context.Background(), p.ns.File.Name(), []string{"sh", "-c", line})
		cmd.Env = append(os.Environ(), "NICSTACK_INTERFACE="+p.iface)
		w := s.opts.Out.Writer(name)
		cmd.Stdout, cmd.Stderr = w, w
		cmd.SysProcAttr.Setpgid = true // close kills the shell's children too
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("exec %q: %w", line, err)
		}
		p.exec = cmd
		go func() {
			err := cmd.Wait()
			s.log.Debug(fmt.Sprintf("[%s] %q ended: %v", name, line, err))
		}()
	}
	return nil
}

// ipv6Host makes the interface an IPv6 host's, whatever the namespace's defaults: IPv6 on,
// forwarding off, router advertisements accepted (so Linux takes SLAAC addresses and a default
// route from the scenario's router). A kernel without IPv6 is left alone unless need says the
// interface is to have an IPv6 address.
func ipv6Host(ns *netns.NS, iface string, need bool) error {
	dir := "/proc/sys/net/ipv6/conf/" + iface + "/"
	return ns.Do(func() error {
		if _, err := os.Stat(dir); err != nil {
			if need {
				return fmt.Errorf("address6: no IPv6 on %s: %w", iface, err)
			}
			return nil
		}
		for _, kv := range [][2]string{{"disable_ipv6", "0"}, {"forwarding", "0"}, {"accept_ra", "1"}, {"autoconf", "1"}} {
			if err := os.WriteFile(dir+kv[0], []byte(kv[1]), 0); err != nil {
				return fmt.Errorf("ipv6 sysctl %s of %s: %w", kv[0], iface, err)
			}
		}
		return nil
	})
}

// close kills the exec'd command and deletes the interface (the client may still hold its
// descriptor, which would keep a TAP or the session's namespace alive otherwise).
func (p *parentSession) close() {
	if p.exec != nil {
		syscall.Kill(-p.exec.Process.Pid, syscall.SIGKILL)
	}
	if p.lease != nil {
		p.lease.Stop() // released before, when detached; else kept for the run's next start
	}
	if p.iface != "" {
		p.ns.IP("link", "del", p.iface)
	}
	if p.undo != nil {
		p.undo()
	}
	closeFiles(p.files)
	p.files = nil
	if p.adopted {
		p.ns.Close()
	}
}
