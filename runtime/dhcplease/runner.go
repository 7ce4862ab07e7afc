package dhcplease

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nicstack/nicstack/netdev/header"
	"github.com/nicstack/nicstack/runtime/netns"
)

// RunConfig is the interface a Runner takes a lease for, and whom it tells.
type RunConfig struct {
	NS         *netns.NS
	Iface      string
	ClientID   []byte // option 61; nil: none
	Remembered *Lease // a previous run's lease, asked for again
	Log        *slog.Logger
	// OnLease is called with each lease bound or renewed, and with nil when it is lost, so
	// that the caller keeps it for a restarted run. It must not block for long.
	OnLease func(*Lease)
}

// Runner is a Client on a packet socket bound to the interface inside its namespace (the
// pod has no address yet, so the server's unicast replies reach no UDP socket), configuring
// the interface with `ip` on each step: on ACK the address with the lease's lifetime (so
// that the kernel drops it at the lease's end should the runner no longer run) and the
// default route via the router option; on a loss it removes the address.
type Runner struct {
	cfg    RunConfig
	c      *Client
	sock   *os.File
	ifidx  int
	server header.MAC // the server's link address, from its last ACK: RENEWING and RELEASE go there
	in     chan packet
	stop   chan bool // true: release first
	// Dropped replies are logged once a second at most (another pod may send to port 68):
	// when the last line was, and how many were dropped since without one.
	droppedAt time.Time
	quiet     int
	done      chan struct{}
	once      sync.Once
}

type packet struct {
	payload []byte
	from    header.MAC
}

// ethPIP is htons(ETH_P_IP), as a packet socket takes its protocol.
const ethPIP = (unix.ETH_P_IP&0xff)<<8 | unix.ETH_P_IP>>8

// replyFilter passes IPv4 UDP datagrams to port 68 that are no fragment (a SOCK_DGRAM
// socket's filter sees the packet from its IP header on), so that the pod's other traffic
// costs the supervisor nothing.
var replyFilter = []unix.SockFilter{
	{Code: unix.BPF_LD | unix.BPF_B | unix.BPF_ABS, K: 9},
	{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jf: 6, K: unix.IPPROTO_UDP},
	{Code: unix.BPF_LD | unix.BPF_H | unix.BPF_ABS, K: 6},
	{Code: unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K, Jt: 4, K: 0x1fff},
	{Code: unix.BPF_LDX | unix.BPF_B | unix.BPF_MSH, K: 0},
	{Code: unix.BPF_LD | unix.BPF_H | unix.BPF_IND, K: 2},
	{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jf: 1, K: header.DHCPClientPort},
	{Code: unix.BPF_RET | unix.BPF_K, K: 0xffff},
	{Code: unix.BPF_RET | unix.BPF_K, K: 0},
}

// Run opens the socket in the namespace and starts taking the lease.
func Run(cfg RunConfig) (*Runner, error) {
	r := &Runner{cfg: cfg, in: make(chan packet, 8), stop: make(chan bool), done: make(chan struct{})}
	var hw net.HardwareAddr
	err := cfg.NS.Do(func() error {
		ifc, err := net.InterfaceByName(cfg.Iface)
		if err != nil {
			return err
		}
		hw, r.ifidx = ifc.HardwareAddr, ifc.Index
		// Protocol 0 until the filter is on: nothing is queued unfiltered.
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
		if err != nil {
			return fmt.Errorf("packet socket: %w", err)
		}
		r.sock = os.NewFile(uintptr(fd), "dhcp-"+cfg.Iface)
		prog := unix.SockFprog{Len: uint16(len(replyFilter)), Filter: &replyFilter[0]}
		if err := unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &prog); err != nil {
			return fmt.Errorf("filter: %w", err)
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: ethPIP, Ifindex: r.ifidx})
	})
	if err == nil && len(hw) != 6 {
		err = fmt.Errorf("%s has no Ethernet address (%v)", cfg.Iface, hw)
	}
	if err != nil {
		if r.sock != nil {
			r.sock.Close()
		}
		return nil, fmt.Errorf("DHCP on %s in %s: %w", cfg.Iface, cfg.NS.Name, err)
	}
	r.c = New(Config{MAC: header.MAC(hw), ClientID: cfg.ClientID, Remembered: cfg.Remembered})
	go r.read()
	go r.loop()
	return r, nil
}

// Release gives the lease back (DHCPRELEASE) and stops; the address stays on the interface,
// which goes next.
func (r *Runner) Release() { r.end(true) }

// Stop stops without releasing: a run that ends keeps the lease for its next start.
func (r *Runner) Stop() { r.end(false) }

func (r *Runner) end(release bool) {
	r.once.Do(func() {
		r.stop <- release
		<-r.done
	})
}

func (r *Runner) loop() {
	defer close(r.done)
	defer r.sock.Close() // ends read
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	r.do(r.c.Start(time.Now()), header.MAC{})
	for {
		if next := r.c.Next(); !next.IsZero() {
			timer.Reset(time.Until(next))
		}
		select {
		case p := <-r.in:
			r.do(r.c.Receive(time.Now(), p.payload), p.from)
		case <-timer.C:
			r.do(r.c.Tick(time.Now()), header.MAC{})
		case release := <-r.stop:
			if release {
				if s := r.c.Release(); s.Send != nil {
					r.send(s)
					r.cfg.Log.Info(fmt.Sprintf("DHCP lease of %s on %s released", s.From, r.cfg.Iface))
				}
			}
			return
		}
	}
}

// do carries out a step: from is the link address of the reply it answers.
func (r *Runner) do(s Step, from header.MAC) {
	if s.Dropped != "" {
		if now := time.Now(); now.Sub(r.droppedAt) >= time.Second {
			more := ""
			if r.quiet > 0 {
				more = fmt.Sprintf(" (and %d more since the last line)", r.quiet)
			}
			r.cfg.Log.Warn(fmt.Sprintf("DHCP on %s: reply dropped: %s%s", r.cfg.Iface, s.Dropped, more))
			r.droppedAt, r.quiet = now, 0
		} else {
			r.quiet++
		}
	}
	if s.Lost != nil {
		r.cfg.Log.Warn(fmt.Sprintf("DHCP on %s: lease of %s lost", r.cfg.Iface, s.Lost.Address))
		if err := r.cfg.NS.IP("addr", "del", s.Lost.Address.String(), "dev", r.cfg.Iface); err != nil {
			r.cfg.Log.Error(err.Error())
		}
		if s.Bound == nil && r.cfg.OnLease != nil {
			r.cfg.OnLease(nil)
		}
	}
	if s.Bound != nil {
		r.server = from
		if err := r.configure(*s.Bound); err != nil {
			r.cfg.Log.Error(fmt.Sprintf("DHCP on %s: configuring %s: %v", r.cfg.Iface, s.Bound.Address, err))
		}
		if r.cfg.OnLease != nil {
			r.cfg.OnLease(s.Bound)
		}
	}
	if s.Send != nil {
		r.send(s)
	}
}

// configure puts the lease on the interface: the address with the lease's lifetime, replaced
// at each renewal, and the default route via the router option.
func (r *Runner) configure(l Lease) error {
	secs := strconv.Itoa(max(1, int(time.Until(l.Expires)/time.Second)))
	if err := r.cfg.NS.IP("addr", "replace", l.Address.String(), "dev", r.cfg.Iface, "valid_lft", secs, "preferred_lft", secs); err != nil {
		return err
	}
	r.cfg.Log.Info(fmt.Sprintf("DHCP on %s: %s from %s, gateway %v, DNS %v, for %s", r.cfg.Iface, l.Address, l.Server, l.Gateway, l.DNS, secs+"s"))
	if l.Gateway.IsValid() {
		return r.cfg.NS.IP("route", "replace", "default", "via", l.Gateway.String(), "dev", r.cfg.Iface)
	}
	return nil
}

// send writes the step's message as a UDP datagram from port 68 to 67: broadcast, or to
// the server's address and link address.
func (r *Runner) send(s Step) {
	src, dst, mac := [4]byte{}, [4]byte{255, 255, 255, 255}, header.Broadcast
	if s.From.IsValid() {
		src = s.From.As4()
	}
	if s.To.IsValid() && r.server != (header.MAC{}) {
		dst, mac = s.To.As4(), r.server
	}
	n := header.IPv4Len + header.UDPLen + len(s.Send)
	b := make([]byte, n)
	header.PutIPv4(b, n, header.ProtoUDP, src, dst)
	copy(b[header.IPv4Len+header.UDPLen:], s.Send)
	header.PutUDP(b[header.IPv4Len:], src, dst, header.DHCPClientPort, header.DHCPServerPort)
	to := &unix.SockaddrLinklayer{Protocol: ethPIP, Ifindex: r.ifidx, Halen: 6}
	copy(to.Addr[:], mac[:])
	raw, err := r.sock.SyscallConn()
	if err == nil {
		werr := raw.Write(func(fd uintptr) bool {
			err = unix.Sendto(int(fd), b, 0, to)
			return !errors.Is(err, unix.EAGAIN)
		})
		err = errors.Join(err, werr)
	}
	if err != nil {
		r.cfg.Log.Warn(fmt.Sprintf("DHCP on %s: sending: %v", r.cfg.Iface, err))
	}
}

// read hands the loop each reply to port 68, until the socket closes.
func (r *Runner) read() {
	raw, err := r.sock.SyscallConn()
	if err != nil {
		return
	}
	buf := make([]byte, 1<<16)
	for {
		var n int
		var from unix.Sockaddr
		var rerr error
		err := raw.Read(func(fd uintptr) bool {
			n, from, rerr = unix.Recvfrom(int(fd), buf, 0)
			return !errors.Is(rerr, unix.EAGAIN)
		})
		if err != nil {
			return // closed
		}
		ll, ok := from.(*unix.SockaddrLinklayer)
		if rerr != nil || !ok || ll.Pkttype == unix.PACKET_OUTGOING {
			continue
		}
		ip, ok := header.NewIPv4(buf[:n])
		if !ok || ip.Protocol() != header.ProtoUDP || len(ip.Payload()) < header.UDPLen {
			continue
		}
		p := packet{payload: append([]byte(nil), ip.Payload()[header.UDPLen:]...)}
		copy(p.from[:], ll.Addr[:6])
		select {
		case r.in <- p:
		case <-r.done:
			return
		default: // a flood: the loop is behind, this one is dropped as on a wire
		}
	}
}
