// Package tap is the TAP back end: a Linux TAP device with IFF_VNET_HDR and TSO/checksum
// offloads, read and written in batches. Every frame carries its virtio-net header as
// netdev.Offload, so 64 KiB TCP super-frames pass whole in both directions.
//
// The descriptor is non-blocking and waits in Go's netpoller: Read takes frames until the TAP
// is empty (one wakeup per burst), ReadTo does the same into buffers its caller hands out as
// frames arrive (straight into a packet stream), Write hands over a whole batch. A TAP has no
// batch syscall, so each frame still costs one readv or writev; with super-frames that is one
// per 64 KiB.
package tap

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/nicstack/nicstack/drivers/tap/vnethdr"
	"github.com/nicstack/nicstack/netdev"
	"github.com/nicstack/nicstack/netdev/header"
	"github.com/nicstack/nicstack/runtime/netns"
)

// TUNSETOFFLOAD bits (linux/if_tun.h); x/sys/unix does not define them.
const (
	tunFCsum = 0x01
	tunFTSO4 = 0x02
	tunFTSO6 = 0x04
)

// Config says which TAP to create or attach to.
type Config struct {
	Name  string   // interface name; empty lets the kernel pick tapN
	MTU   int      // 0 keeps the kernel's default (1500)
	NetNS *os.File // create the TAP inside this network namespace; nil: the caller's own
}

// Stats are the device's counters. Dropped frames are malformed ones: a vnet header that does
// not fit its frame, a frame larger than the read buffer, one the kernel refused on write.
type Stats struct {
	RxFrames, RxBytes, RxDropped, RxBursts atomic.Uint64
	TxFrames, TxBytes, TxDropped           atomic.Uint64
	TxJoined                               atomic.Uint64 // frames written as part of a super-frame (gro.go)
}

// Device is an open TAP. One goroutine may Read while another Writes.
type Device struct {
	Stats Stats

	file   *os.File
	rc     syscall.RawConn
	name   string
	closed atomic.Bool

	// Read's state, kept here so that the netpoller callback is a method value made once.
	readFn func(uintptr) bool
	rt     netdev.Target  // where the frames of the Read or ReadTo in progress go
	bufs   netdev.Buffers // Read's target
	rn     int            // frames read by the call in progress
	rerr   error
	rhdr   [vnethdr.Len]byte
	roff   netdev.Offload
	rspill [1]byte // a frame that reaches this byte did not fit its buffer
	riov   [3]unix.Iovec

	writeFn func(uintptr) bool
	wbufs   [][]byte
	woffs   []netdev.Offload
	wn      int
	werr    error
	whdr    [vnethdr.Len]byte
	wiov    [2 + maxJoin]unix.Iovec                   // vnet header, frame or super-frame header and payloads
	wsuper  [header.EthLen + header.IPv4Len + 60]byte // a joined super-frame's headers
}

// Create creates the TAP cfg.Name (or attaches to an existing persistent one of that name)
// with IFF_VNET_HDR and TSO4/TSO6/checksum offloads, sets its MTU and brings it up. It needs
// CAP_NET_ADMIN. A TAP it creates is not persistent: it disappears with the last descriptor.
func Create(cfg Config) (*Device, error) {
	f, _, err := Open(cfg)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return FromFile(f)
}

// Open makes the TAP as Create does and returns its descriptor and interface name, for
// FromFile in another process. The descriptor blocks: a non-blocking one joins the caller's
// netpoller, whose edge-triggered epoll then wakes the caller at every frame the TAP queues
// and every write it completes, though the caller never reads it (the supervisor, which holds
// each TAP it hands out, spent a fifth of a CPU on linux_tap so). FromFile sets the shared
// file's mode to non-blocking for its reader.
func Open(cfg Config) (*os.File, string, error) {
	fd := -1
	var name string
	create := func() error {
		var err error
		fd, err = unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("tap: open /dev/net/tun: %w", err)
		}
		ifr, err := unix.NewIfreq(cfg.Name)
		if err != nil {
			return err
		}
		ifr.SetUint16(unix.IFF_TAP | unix.IFF_NO_PI | unix.IFF_VNET_HDR)
		if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
			return fmt.Errorf("tap: TUNSETIFF %q: %w", cfg.Name, err)
		}
		name = ifr.Name()
		if err := unix.IoctlSetInt(fd, unix.TUNSETOFFLOAD, tunFCsum|tunFTSO4|tunFTSO6); err != nil {
			return fmt.Errorf("tap: TUNSETOFFLOAD: %w", err)
		}
		return linkUp(name, cfg.MTU)
	}
	var err error
	if cfg.NetNS != nil {
		err = netns.Do(cfg.NetNS, create)
	} else {
		err = create()
	}
	if err != nil {
		if fd >= 0 {
			unix.Close(fd)
		}
		return nil, "", err
	}
	return os.NewFile(uintptr(fd), "tap:"+name), name, nil
}

// linkUp sets the MTU of interface name (unless 0) and brings it up, in the current namespace.
func linkUp(name string, mtu int) error {
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(s)
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return err
	}
	if mtu > 0 {
		ifr.SetUint32(uint32(mtu))
		if err := unix.IoctlIfreq(s, unix.SIOCSIFMTU, ifr); err != nil {
			return fmt.Errorf("tap: MTU %d on %s: %w", mtu, name, err)
		}
	}
	if err := unix.IoctlIfreq(s, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(s, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("tap: bringing %s up: %w", name, err)
	}
	return nil
}

// FromFile makes a Device of a TAP descriptor someone else created (the supervisor hands it
// over), so the caller needs no privileges. The TAP must have IFF_TAP, IFF_NO_PI and
// IFF_VNET_HDR with the 10-byte header. The Device keeps a duplicate: the caller may close f.
func FromFile(f *os.File) (*Device, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	fd := -1
	var cerr error
	if err := rc.Control(func(s uintptr) {
		fd, cerr = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0)
	}); err != nil {
		return nil, err
	}
	if cerr != nil {
		return nil, fmt.Errorf("tap: dup: %w", cerr)
	}
	ifr, err := unix.NewIfreq("")
	if err == nil {
		err = unix.IoctlIfreq(fd, unix.TUNGETIFF, ifr)
	}
	want := uint16(unix.IFF_TAP | unix.IFF_NO_PI | unix.IFF_VNET_HDR)
	if err == nil && ifr.Uint16()&want != want {
		err = fmt.Errorf("flags %#x lack IFF_TAP|IFF_NO_PI|IFF_VNET_HDR", ifr.Uint16())
	}
	if err == nil {
		var sz int
		if sz, err = unix.IoctlGetInt(fd, unix.TUNGETVNETHDRSZ); err == nil && sz != vnethdr.Len {
			err = fmt.Errorf("vnet header size %d, want %d", sz, vnethdr.Len)
		}
	}
	if err == nil {
		err = unix.SetNonblock(fd, true)
	}
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("tap: %s: %w", f.Name(), err)
	}
	return newDevice(fd, ifr.Name())
}

func newDevice(fd int, name string) (*Device, error) {
	// A non-blocking descriptor makes os.NewFile register it with the netpoller.
	f := os.NewFile(uintptr(fd), "tap:"+name)
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	d := &Device{file: f, rc: rc, name: name}
	d.readFn = d.readBurst
	d.writeFn = d.writeBurst
	d.riov[0].Base = &d.rhdr[0]
	d.riov[0].SetLen(vnethdr.Len)
	d.riov[2].Base = &d.rspill[0]
	d.riov[2].SetLen(1)
	d.wiov[0].Base = &d.whdr[0]
	d.wiov[0].SetLen(vnethdr.Len)
	return d, nil
}

// Name is the interface name.
func (d *Device) Name() string { return d.name }

// File is the TAP descriptor, to hand to another process.
func (d *Device) File() *os.File { return d.file }

// Close closes the descriptor (a blocked Read or Write returns os.ErrClosed). A TAP that
// Create made disappears once no process holds a descriptor of it.
func (d *Device) Close() error {
	d.closed.Store(true)
	return d.file.Close()
}

// ReadTo waits until the TAP has frames, then reads into t's buffers until it is empty or t
// hands out no more. It returns the number of frames read, at least one unless err is set.
func (d *Device) ReadTo(t netdev.Target) (int, error) {
	d.rt, d.rn, d.rerr = t, 0, nil
	err := d.rc.Read(d.readFn)
	n := d.rn
	if err == nil {
		err = d.rerr
	}
	d.rt, d.rerr = nil, nil
	d.riov[1] = unix.Iovec{}
	if n > 0 {
		d.Stats.RxBursts.Add(1)
	}
	return n, d.fix(err)
}

// Read waits until the TAP has frames, then reads until it is empty or bufs are full. Frame i
// lands in bufs[i][:sizes[i]] with its offload metadata in offs[i]; sizes and offs must be at
// least as long as bufs, and a buffer of netdev.MaxFrame bytes holds any frame. Malformed
// frames are counted in RxDropped and skipped. It returns the number of frames read, at least
// one unless err is set.
func (d *Device) Read(bufs [][]byte, sizes []int, offs []netdev.Offload) (int, error) {
	if len(bufs) == 0 {
		return 0, nil
	}
	d.bufs.Into(bufs, sizes, offs)
	n, err := d.ReadTo(&d.bufs)
	d.bufs = netdev.Buffers{}
	return n, err
}

// readBurst runs in the netpoller's Read: false means "nothing yet, wait for readability".
func (d *Device) readBurst(fd uintptr) bool {
	t := d.rt
	t.Begin()
	defer t.End()
	for {
		buf := t.Buffer()
		if buf == nil {
			return true
		}
		d.riov[1].Base = unsafe.SliceData(buf)
		d.riov[1].SetLen(len(buf))
	again:
		// Raw here and in writeBurst: the descriptor never blocks, and the runtime's bookkeeping around
		// an ordinary system call woke its monitor thread into 20 µs polling (7,600 wakeups/s
		// in linux_nic at 13 Gbit/s; 70 with raw calls).
		r, _, e := unix.RawSyscall(unix.SYS_READV, fd, uintptr(unsafe.Pointer(&d.riov[0])), 3)
		switch e {
		case 0:
		case unix.EAGAIN:
			t.Frame(0, nil)
			return d.rn > 0
		case unix.EINTR:
			goto again
		default:
			t.Frame(0, nil)
			d.rerr = e
			return true
		}
		n := int(r) - vnethdr.Len
		if n < 0 || n > len(buf) || !vnethdr.Decode(d.rhdr[:], buf[:n], &d.roff) {
			d.Stats.RxDropped.Add(1)
			goto again
		}
		t.Frame(n, &d.roff)
		d.Stats.RxFrames.Add(1)
		d.Stats.RxBytes.Add(uint64(n))
		d.rn++
	}
}

// Write writes the frames bufs with their offload metadata offs (nil: none), waiting while the
// TAP cannot take more. Frames whose metadata does not fit them, and frames the kernel refuses
// (too short, invalid header, link down), are counted in TxDropped and skipped. It returns how
// many frames it consumed, all of them unless err is set.
func (d *Device) Write(bufs [][]byte, offs []netdev.Offload) (int, error) {
	if offs != nil {
		offs = offs[:len(bufs)]
	}
	d.wbufs, d.woffs, d.wn, d.werr = bufs, offs, 0, nil
	err := d.rc.Write(d.writeFn)
	n := d.wn
	if err == nil {
		err = d.werr
	}
	d.wbufs, d.woffs, d.werr = nil, nil, nil
	clear(d.wiov[1:])
	return n, d.fix(err)
}

func (d *Device) writeBurst(fd uintptr) bool {
	for d.wn < len(d.wbufs) {
		n, iovs, bytes := d.prepare()
		if iovs == 0 {
			d.Stats.TxDropped.Add(1)
			d.wn++
			continue
		}
		for {
			_, _, e := unix.RawSyscall(unix.SYS_WRITEV, fd, uintptr(unsafe.Pointer(&d.wiov[0])), uintptr(iovs))
			switch e {
			case 0:
				d.Stats.TxFrames.Add(uint64(n))
				d.Stats.TxBytes.Add(bytes)
				if n > 1 {
					d.Stats.TxJoined.Add(uint64(n))
				}
			case unix.EINTR:
				continue
			case unix.EAGAIN:
				return false
			case unix.EINVAL, unix.EIO, unix.EMSGSIZE:
				d.Stats.TxDropped.Add(uint64(n))
			default:
				d.werr = e
				return true
			}
			break
		}
		d.wn += n
	}
	return true
}

// prepare sets up the header and iovecs for the next write: frame d.wn alone or a run of
// segments joined from it (see gro.go). It returns how many frames the write takes, how many
// iovecs it has (0: frame d.wn is malformed) and the frames' bytes.
func (d *Device) prepare() (n, iovs int, bytes uint64) {
	frame := d.wbufs[d.wn]
	n, seg := run(d.wbufs, d.woffs, d.wn)
	if n > 1 {
		hdr := d.wsuper[:seg.hdrLen]
		payload, last := 0, d.wbufs[d.wn+n-1]
		for k, f := range d.wbufs[d.wn : d.wn+n] {
			p := f[seg.hdrLen:]
			d.wiov[2+k].Base = unsafe.SliceData(p)
			d.wiov[2+k].SetLen(len(p))
			payload += len(p)
			bytes += uint64(len(f))
		}
		o := superHeader(hdr, frame, seg, payload, last[header.EthLen+header.IPv4Len+13]&header.TCPPsh != 0)
		vnethdr.Encode(d.whdr[:], &o)
		d.wiov[1].Base = unsafe.SliceData(hdr)
		d.wiov[1].SetLen(len(hdr))
		return n, 2 + n, bytes
	}
	var o netdev.Offload
	if d.woffs != nil {
		o = d.woffs[d.wn]
	}
	if !vnethdr.Fix(frame, &o) {
		return 1, 0, 0
	}
	vnethdr.Encode(d.whdr[:], &o)
	d.wiov[1].Base = unsafe.SliceData(frame)
	d.wiov[1].SetLen(len(frame))
	return 1, 2, uint64(len(frame))
}

// fix turns the netpoller's error for a closed file into os.ErrClosed.
func (d *Device) fix(err error) error {
	if err != nil && d.closed.Load() && !errors.Is(err, os.ErrClosed) {
		return fmt.Errorf("tap %s: %w", d.name, os.ErrClosed)
	}
	return err
}
