package hostnic

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nicstack/nicstack/drivers/afpacket"
	"github.com/nicstack/nicstack/drivers/tap"
	"github.com/nicstack/nicstack/netdev"
	"github.com/nicstack/nicstack/runtime/component"
	"github.com/nicstack/nicstack/runtime/config"
	"github.com/nicstack/nicstack/runtime/nicbridge"
)

// Kind is a back end as a component drives it: the parent service that hands over the
// descriptor, and how to open it.
type Kind struct {
	Binary  string // the component's name: linux_nic, packet_nic
	Service string // the supervisor's service: Tap, Packet
	Schema  *config.Schema
	open    func(f *os.File, s *component.Session, cfg Config, counter func(string) *atomic.Uint64) (backend, error)
}

// backend is an opened device with the counters it keeps itself.
type backend interface {
	netdev.Device
	Close() error
	publish()     // copy the device's counters to the component's
	linkUp() bool // the interface is up and has carrier
}

var (
	// TapNIC is linux_nic: a TAP with IFF_VNET_HDR and TSO/checksum offloads.
	TapNIC = &Kind{Binary: "linux_nic", Service: "Tap", Schema: TapSchema, open: openTap}
	// PacketNIC is packet_nic: an AF_PACKET socket with TPACKET_V3 rings on the interface the
	// service names (session argument interface).
	PacketNIC = &Kind{Binary: "packet_nic", Service: "Packet", Schema: PacketSchema, open: openPacket}
)

// Handler is the linux_nic or packet_nic component. It requests its device from the parent once
// configured; while the device is open (the link is up) it requests an Uplink session to the
// router with the NIC's MAC and binds the two.
type Handler struct {
	c          *component.Component
	kind       *Kind
	cfg        Config
	configured bool
	stats      *nicbridge.Stats

	devReq  uint64
	dev     backend
	nic     *nicbridge.NIC
	ran     chan error
	stopMon chan struct{} // ends monitor
	monDone chan struct{}

	mu        sync.Mutex // the link monitor changes the uplink too
	uplinkReq uint64     // 0: none requested (link down)
	uplink    uint64     // the attached session's id
}

// NewHandler returns the handler of a component of kind k.
func NewHandler(c *component.Component, k *Kind) *Handler {
	return &Handler{c: c, kind: k, stats: nicbridge.NewStats(c.Counter)}
}

func (h *Handler) Configure(typed any) error {
	cfg, err := component.ConfigOf[Config](typed)
	if err != nil {
		return err
	}
	if h.configured {
		// The device's arguments are fixed when the parent makes it.
		h.c.Log.Info("config changed: applies when the device is next opened")
		h.cfg = cfg
		return nil
	}
	h.cfg, h.configured = cfg, true
	h.devReq = h.c.RequestDevice(h.kind.Service, "", cfg.Args, component.DeviceSpec{})
	return nil
}

func (h *Handler) Open(s *component.Session) error {
	switch {
	case s.Request == h.devReq && s.Device():
		return h.openDevice(s)
	case s.Client != nil && s.Service == "Uplink":
		h.mu.Lock()
		defer h.mu.Unlock()
		if s.Request != h.uplinkReq || h.uplinkReq == 0 {
			return fmt.Errorf("%s: Uplink session %d answers a request given up (link down)", h.kind.Binary, s.ID)
		}
		if err := h.nic.Attach(s.Client); err != nil {
			return err
		}
		h.uplink = s.ID
		h.c.Log.Info("uplink up", "mac", h.cfg.MAC.String())
		return nil
	}
	return fmt.Errorf("%s: session %d (%s) answers no request of ours", h.kind.Binary, s.ID, s.Service)
}

func (h *Handler) openDevice(s *component.Session) error {
	if len(s.Files) != 1 {
		return fmt.Errorf("%s session: %d files, want 1", h.kind.Service, len(s.Files))
	}
	h.closeDevice() // a new device replaces the old one
	dev, err := h.kind.open(s.Files[0], s, h.cfg, h.c.Counter)
	if err != nil {
		return err
	}
	h.dev, h.nic, h.ran = dev, nicbridge.New(dev, h.stats), make(chan error, 1)
	if h.kind == TapNIC && h.cfg.Args["offload"] == "no" {
		mtu, err := strconv.Atoi(h.cfg.Args["mtu"])
		if err != nil {
			mtu = 1500 // the kernel's default, which the Tap service keeps when none is given
		}
		h.nic.LimitFrames(nicbridge.TapFrameLimit(false, mtu))
	}
	h.stopMon, h.monDone = make(chan struct{}), make(chan struct{})
	go func(nic *nicbridge.NIC, ran chan<- error) { ran <- nic.Run(transient) }(h.nic, h.ran)
	h.c.Log.Info("device open", "service", h.kind.Service, "args", s.Args)
	h.setLink(dev.linkUp())
	go h.monitor(dev, h.stopMon, h.monDone)
	return nil
}

// setLink requests the Uplink session when the link comes up and gives it up when it goes down,
// so the router's interface exists exactly while the wire does.
func (h *Handler) setLink(up bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case up && h.uplinkReq == 0:
		h.uplinkReq = h.c.Request("Uplink", h.cfg.Label, map[string]string{"mac": h.cfg.MAC.String()}, Stream, Stream)
		h.c.Log.Info("link up")
	case !up && h.uplinkReq != 0:
		h.c.Release(h.uplinkReq)
		h.uplinkReq, h.uplink = 0, 0
		h.nic.Detach()
		h.c.Log.Info("link down")
	}
}

// transient errors leave the device usable: the interface under an AF_PACKET socket went down.
func transient(err error) bool { return errors.Is(err, syscall.ENETDOWN) }

// monitorEvery is how often the device's own counters are copied to the component's and its
// link state is checked.
const monitorEvery = 100 * time.Millisecond

func (h *Handler) monitor(dev backend, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(monitorEvery)
	defer t.Stop()
	up := dev.linkUp()
	for {
		select {
		case <-t.C:
			dev.publish()
			if now := dev.linkUp(); now != up {
				up = now
				h.setLink(up)
			}
		case <-stop:
			dev.publish()
			return
		}
	}
}

func (h *Handler) Close(s *component.Session) {
	switch {
	case s.Request == h.devReq && s.Device():
		h.closeDevice()
	case s.Client != nil:
		h.mu.Lock()
		defer h.mu.Unlock()
		if s.ID == h.uplink && h.nic != nil {
			h.nic.Detach()
			h.uplink = 0
			h.c.Log.Info("uplink down")
		}
	}
}

// closeDevice gives up the Uplink session (link down) and closes the device.
func (h *Handler) closeDevice() {
	if h.dev == nil {
		return
	}
	close(h.stopMon)
	<-h.monDone
	h.setLink(false)
	h.dev.Close()
	if err := <-h.ran; !errors.Is(err, os.ErrClosed) {
		h.c.Log.Warn("device", "err", err)
	}
	h.dev, h.nic = nil, nil
	h.c.Log.Info("device closed")
}

type tapBackend struct {
	*tap.Device
	rxDropped, txDropped *atomic.Uint64
}

func openTap(f *os.File, _ *component.Session, _ Config, counter func(string) *atomic.Uint64) (backend, error) {
	d, err := tap.FromFile(f)
	if err != nil {
		return nil, err
	}
	return &tapBackend{Device: d, rxDropped: counter("dev_rx_dropped"), txDropped: counter("dev_tx_dropped")}, nil
}

// linkUp: a TAP's carrier is ours while we hold it.
func (b *tapBackend) linkUp() bool { return true }

func (b *tapBackend) publish() {
	b.rxDropped.Store(b.Stats.RxDropped.Load())
	b.txDropped.Store(b.Stats.TxDropped.Load())
}

type packetBackend struct {
	*afpacket.Socket
	ctl                                                           int // a duplicate of the socket, for the interface's flags
	ifr                                                           *unix.Ifreq
	rxDropped, txDropped, rxBlocks, rxWakeups, txKicks, ringDrops *atomic.Uint64
}

func openPacket(f *os.File, s *component.Session, cfg Config, counter func(string) *atomic.Uint64) (backend, error) {
	ifname := s.Args["interface"]
	if ifname == "" {
		return nil, fmt.Errorf("Packet session: no interface argument")
	}
	ifr, err := unix.NewIfreq(ifname)
	if err != nil {
		return nil, err
	}
	ctl, err := dup(f)
	if err != nil {
		return nil, err
	}
	sock, err := afpacket.FromFile(f, afpacket.Config{Interface: ifname, RetireTimeout: cfg.RetireTimeout, RxMinInterval: cfg.RxMinInterval})
	if err != nil {
		unix.Close(ctl)
		return nil, err
	}
	return &packetBackend{Socket: sock, ctl: ctl, ifr: ifr,
		rxDropped: counter("dev_rx_dropped"), txDropped: counter("dev_tx_dropped"), rxBlocks: counter("dev_rx_blocks"),
		rxWakeups: counter("dev_rx_wakeups"), txKicks: counter("dev_tx_kicks"), ringDrops: counter("dev_ring_drops"),
	}, nil
}

func (b *packetBackend) publish() {
	b.rxDropped.Store(b.Stats.RxDropped.Load())
	b.txDropped.Store(b.Stats.TxDropped.Load())
	b.rxBlocks.Store(b.Stats.RxBlocks.Load())
	b.rxWakeups.Store(b.Stats.RxBursts.Load())
	b.txKicks.Store(b.Stats.TxKicks.Load())
	if d, err := b.KernelDrops(); err == nil {
		b.ringDrops.Add(d) // PACKET_STATISTICS resets on reading
	}
}

// linkUp asks the socket's namespace for the interface's flags: up, with carrier (a veth has
// carrier while its peer is up).
func (b *packetBackend) linkUp() bool {
	if err := unix.IoctlIfreq(b.ctl, unix.SIOCGIFFLAGS, b.ifr); err != nil {
		return false
	}
	const want = unix.IFF_UP | unix.IFF_RUNNING
	return b.ifr.Uint16()&want == want
}

func (b *packetBackend) Close() error {
	unix.Close(b.ctl)
	return b.Socket.Close()
}

// dup duplicates f's descriptor (close-on-exec) without changing its blocking mode.
func dup(f *os.File) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd, ferr := -1, error(nil)
	if err := rc.Control(func(s uintptr) { fd, ferr = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return -1, err
	}
	return fd, ferr
}

// Stop closes the device and ends its goroutines (reader, monitor), should a session still
// hold them.
func (h *Handler) Stop() { h.closeDevice() }
