// Package afpacket is the AF_PACKET back end: a packet socket bound to a named interface with
// a TPACKET_V3 RX ring and a TPACKET_V3 TX ring, both mapped into this process, and
// PACKET_VNET_HDR so that every frame carries its virtio-net header as netdev.Offload
// (TCP super-frames pass whole both ways; the kernel segments and checksums in software where
// the interface cannot).
//
// RX: the kernel fills variable-sized frames into blocks and hands a block over when it is full
// or its retire timeout expires; that timeout is the RX throttle, since the socket becomes
// readable only then. Read takes whole blocks per wakeup. TX: Write fills ring slots and kicks
// the kernel with one sendto per batch; PACKET_QDISC_BYPASS sends without the qdisc.
package afpacket

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/nicstack/nicstack/drivers/tap/vnethdr"
	"github.com/nicstack/nicstack/netdev"
	"github.com/nicstack/nicstack/runtime/netns"
)

const (
	hdr3Len   = unix.SizeofTpacket3Hdr                               // tpacket3_hdr, already TPACKET_ALIGNed
	txDataOff = hdr3Len                                              // TPACKET3_HDRLEN - sizeof(sockaddr_ll): where TX data starts in a slot
	blockHdr  = 8 + int(unsafe.Sizeof(unix.TpacketHdrV1{}))          // tpacket_block_desc with its v1 header
	ethPAll   = (unix.ETH_P_ALL&0xff)<<8 | unix.ETH_P_ALL>>8         // htons(ETH_P_ALL)
	busyTX    = unix.TP_STATUS_SEND_REQUEST | unix.TP_STATUS_SENDING // slot still owned by the kernel
)

// Config describes the socket and its rings. Zero values take the defaults.
type Config struct {
	Interface string   // the interface to bind to, in the socket's namespace
	NetNS     *os.File // Open only: create the socket inside this network namespace

	BlockSize     int           // RX block bytes, a multiple of the page size (default 256 KiB)
	Blocks        int           // RX blocks (default 16)
	RetireTimeout time.Duration // RX block retire timeout, the RX throttle; whole ms, at least 1 (default 1 ms)
	RxMinInterval time.Duration // least time between two wakeups of Read (as a NIC's ITR); 0: none
	TxFrames      int           // TX ring slots (default 128)
	TxFrameSize   int           // largest frame a TX slot holds (default netdev.MaxFrame); larger ones are dropped
}

func (c *Config) defaults() {
	if c.BlockSize == 0 {
		c.BlockSize = 256 << 10
	}
	if c.Blocks == 0 {
		c.Blocks = 16
	}
	if c.RetireTimeout == 0 {
		c.RetireTimeout = time.Millisecond
	}
	if c.TxFrames == 0 {
		c.TxFrames = 128
	}
	if c.TxFrameSize == 0 {
		c.TxFrameSize = netdev.MaxFrame
	}
}

// Stats are the socket's counters. Dropped frames are malformed ones: truncated in the ring,
// a vnet header that does not fit its frame, a frame too large for a TX slot. TxFrames counts
// frames put into the TX ring; frames the kernel then refuses are skipped by it (PACKET_LOSS)
// and not counted here. RxBursts and TxKicks count wakeups of Read and sendto calls.
type Stats struct {
	RxFrames, RxBytes, RxDropped, RxBlocks, RxBursts atomic.Uint64
	TxFrames, TxBytes, TxDropped, TxKicks            atomic.Uint64
}

// Socket is an AF_PACKET socket with mapped rings. One goroutine may Read while another Writes.
type Socket struct {
	Stats Stats

	file   *os.File
	rc     syscall.RawConn
	name   string
	closed atomic.Bool
	mem    []byte

	rx        []byte // Blocks x BlockSize
	minGap    time.Duration
	lastWake  time.Time
	blockSize int
	blocks    int
	rxBlock   int    // next block to take
	cur       []byte // block being read, nil if none
	curLeft   uint32 // packets left in cur
	curOff    uint32 // offset of the next packet in cur

	readFn func(uintptr) bool
	rbufs  [][]byte
	rsizes []int
	roffs  []netdev.Offload
	rn     int
	rerr   error
	waited bool // this Read has slept in the netpoller once

	tx          []byte // TX ring: blocks of whole pages, each holding txPerBlock slots
	txBlockSize int
	txPerBlock  int
	slotSize    int
	slots       int
	txHead      int

	writeFn func(uintptr) bool
	wbufs   [][]byte
	woffs   []netdev.Offload
	wn      int
	pending int // slots filled since the last kick
	werr    error
}

// NewSocket creates an unbound AF_PACKET socket (needs CAP_NET_RAW), inside namespace ns if
// not nil, for a supervisor to hand to an unprivileged component that calls FromFile. It
// blocks, so that it stays out of the caller's netpoller (see tap.Open); FromFile makes it
// non-blocking.
func NewSocket(ns *os.File) (*os.File, error) {
	var fd int
	create := func() (err error) {
		// Protocol 0: no frames are queued before FromFile has set up the rings and binds.
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		return err
	}
	var err error
	if ns != nil {
		err = netns.Do(ns, create)
	} else {
		err = create()
	}
	if err != nil {
		return nil, fmt.Errorf("afpacket: socket: %w", err)
	}
	return os.NewFile(uintptr(fd), "afpacket"), nil
}

// Open creates the socket (in cfg.NetNS if set) and sets it up as FromFile does.
func Open(cfg Config) (*Socket, error) {
	f, err := NewSocket(cfg.NetNS)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return FromFile(f, cfg)
}

// FromFile sets up an unbound AF_PACKET socket made by NewSocket: TPACKET_V3 rings with
// virtio-net headers, mapped, then bound to cfg.Interface (all without privileges). The Socket
// keeps a duplicate of the descriptor: the caller may close f.
func FromFile(f *os.File, cfg Config) (*Socket, error) {
	cfg.defaults()
	page := os.Getpagesize()
	if cfg.BlockSize%page != 0 || cfg.BlockSize < netdev.MaxFrame+page || cfg.Blocks < 2 || cfg.TxFrames < 1 {
		return nil, fmt.Errorf("afpacket: ring geometry %d x %d B, %d TX slots", cfg.Blocks, cfg.BlockSize, cfg.TxFrames)
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	fd := -1
	var cerr error
	if err := rc.Control(func(s uintptr) { fd, cerr = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return nil, err
	}
	if cerr != nil {
		return nil, fmt.Errorf("afpacket: dup: %w", cerr)
	}
	s := &Socket{name: cfg.Interface, blockSize: cfg.BlockSize, blocks: cfg.Blocks, minGap: cfg.RxMinInterval}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("afpacket: %s: %w", cfg.Interface, err)
	}
	if err := s.setup(fd, cfg, page); err != nil {
		if s.mem != nil {
			unix.Munmap(s.mem)
		}
		unix.Close(fd)
		return nil, fmt.Errorf("afpacket: %s: %w", cfg.Interface, err)
	}
	// A non-blocking descriptor makes os.NewFile register it with the netpoller.
	s.file = os.NewFile(uintptr(fd), "afpacket:"+cfg.Interface)
	if s.rc, err = s.file.SyscallConn(); err != nil {
		s.Close()
		return nil, err
	}
	s.readFn = s.readBlocks
	s.writeFn = s.fillAndKick
	return s, nil
}

func (s *Socket) setup(fd int, cfg Config, page int) error {
	ifr, err := unix.NewIfreq(cfg.Interface)
	if err != nil {
		return err
	}
	// Resolved through the socket, so in the socket's namespace.
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFINDEX, ifr); err != nil {
		return fmt.Errorf("interface index: %w", err)
	}
	ifindex := int(ifr.Uint32())
	for _, o := range []struct {
		name     string
		opt, val int
	}{
		{"PACKET_VERSION", unix.PACKET_VERSION, unix.TPACKET_V3},
		{"PACKET_VNET_HDR", unix.PACKET_VNET_HDR, 1},
		// A TX slot the kernel cannot parse is skipped instead of stopping the ring.
		{"PACKET_LOSS", unix.PACKET_LOSS, 1},
		{"PACKET_QDISC_BYPASS", unix.PACKET_QDISC_BYPASS, 1},
		// We are the interface's wire side: frames the host stack sends out are not ours.
		{"PACKET_IGNORE_OUTGOING", unix.PACKET_IGNORE_OUTGOING, 1},
	} {
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, o.opt, o.val); err != nil {
			return fmt.Errorf("%s: %w", o.name, err)
		}
	}
	tov := (cfg.RetireTimeout + time.Millisecond - 1) / time.Millisecond
	rxReq := unix.TpacketReq3{
		Block_size:     uint32(cfg.BlockSize),
		Block_nr:       uint32(cfg.Blocks),
		Frame_size:     uint32(cfg.BlockSize), // V3 RX frames are variable-sized; this only has to divide the block
		Frame_nr:       uint32(cfg.Blocks),
		Retire_blk_tov: uint32(max(tov, 1)),
	}
	if err := unix.SetsockoptTpacketReq3(fd, unix.SOL_PACKET, unix.PACKET_RX_RING, &rxReq); err != nil {
		return fmt.Errorf("PACKET_RX_RING: %w", err)
	}
	// TX slots are fixed-size: header, vnet header, frame. A block is the slot rounded up to
	// whole pages (the kernel's rule), holding as many slots as fit.
	s.slotSize = alignUp(txDataOff+vnethdr.Len+cfg.TxFrameSize, unix.TPACKET_ALIGNMENT)
	txBlock := alignUp(s.slotSize, page)
	perBlock := txBlock / s.slotSize
	txBlocks := (cfg.TxFrames + perBlock - 1) / perBlock
	s.slots = txBlocks * perBlock
	txReq := unix.TpacketReq3{
		Block_size: uint32(txBlock),
		Block_nr:   uint32(txBlocks),
		Frame_size: uint32(s.slotSize),
		Frame_nr:   uint32(s.slots),
	}
	if err := unix.SetsockoptTpacketReq3(fd, unix.SOL_PACKET, unix.PACKET_TX_RING, &txReq); err != nil {
		return fmt.Errorf("PACKET_TX_RING (TPACKET_V3): %w", err)
	}
	rxLen := cfg.BlockSize * cfg.Blocks
	mem, err := unix.Mmap(fd, 0, rxLen+txBlock*txBlocks, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return fmt.Errorf("mmap rings: %w", err)
	}
	s.mem, s.rx = mem, mem[:rxLen]
	s.tx = mem[rxLen:]
	s.txPerBlock, s.txBlockSize = perBlock, txBlock
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: ethPAll, Ifindex: ifindex}); err != nil {
		return fmt.Errorf("bind: %w", err)
	}
	return unix.SetNonblock(fd, true)
}

// syscallErr is errno e as an error, nil for 0.
func syscallErr(e int) error {
	if e == 0 {
		return nil
	}
	return unix.Errno(e)
}

func alignUp(n, a int) int { return (n + a - 1) / a * a }

// Name is the interface the socket is bound to.
func (s *Socket) Name() string { return s.name }

// Close closes the socket and unmaps its rings; a blocked Read or Write returns os.ErrClosed.
func (s *Socket) Close() error {
	s.closed.Store(true)
	var err error
	if s.file != nil {
		// Returns only after every Read and Write in progress has left the rings.
		err = s.file.Close()
	}
	if s.mem != nil {
		unix.Munmap(s.mem)
		s.mem = nil
	}
	return err
}

// KernelDrops returns the frames the kernel dropped because the RX ring was full since the
// last call (PACKET_STATISTICS, which resets on reading).
func (s *Socket) KernelDrops() (uint64, error) {
	var st *unix.TpacketStatsV3
	var err error
	if cerr := s.rc.Control(func(fd uintptr) {
		st, err = unix.GetsockoptTpacketStatsV3(int(fd), unix.SOL_PACKET, unix.PACKET_STATISTICS)
	}); cerr != nil {
		return 0, cerr
	}
	if err != nil {
		return 0, err
	}
	return uint64(st.Drops), nil
}

// Read waits until the kernel hands over an RX block, then copies frames out of ready blocks
// until none is left or bufs are full (the rest of a block waits for the next call). Frame i
// lands in bufs[i][:sizes[i]] with its offload metadata in offs[i]; sizes and offs must be at
// least as long as bufs, and a buffer of netdev.MaxFrame bytes holds any frame. Malformed
// frames are counted in RxDropped and skipped. It returns at least one frame unless err is set.
//
// With RxMinInterval, Read first sleeps out what is left of that interval since the last
// wakeup (unless a block is half read), while frames gather in the ring. When the link goes
// down or the interface disappears, a waiting Read returns ENETDOWN; a later Read waits for
// frames again.
func (s *Socket) Read(bufs [][]byte, sizes []int, offs []netdev.Offload) (int, error) {
	if len(bufs) == 0 {
		return 0, nil
	}
	if s.minGap > 0 && s.cur == nil {
		if d := time.Until(s.lastWake.Add(s.minGap)); d > 0 {
			time.Sleep(d)
		}
	}
	s.rbufs, s.rsizes, s.roffs, s.rn, s.rerr, s.waited = bufs, sizes[:len(bufs)], offs[:len(bufs)], 0, nil, false
	err := s.rc.Read(s.readFn)
	n := s.rn
	if err == nil {
		err = s.rerr
	}
	s.rbufs, s.rsizes, s.roffs, s.rerr = nil, nil, nil, nil
	if n > 0 {
		s.Stats.RxBursts.Add(1)
		if s.minGap > 0 {
			s.lastWake = time.Now()
		}
	}
	return n, s.fix(err)
}

// blockStatus is the block_status word of the block at b, which the kernel writes.
func blockStatus(b []byte) *uint32 { return (*uint32)(unsafe.Pointer(&b[8])) }

// readBlocks runs in the netpoller's Read: false means "no block ready, wait".
func (s *Socket) readBlocks(fd uintptr) bool {
	for s.rn < len(s.rbufs) {
		if s.cur == nil {
			b := s.rx[s.rxBlock*s.blockSize : (s.rxBlock+1)*s.blockSize]
			if atomic.LoadUint32(blockStatus(b))&unix.TP_STATUS_USER == 0 {
				if s.rn > 0 {
					return true
				}
				// Woken without a block: the link went down or the interface went away
				// (ENETDOWN on the socket, which reading clears).
				if s.waited {
					if e, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_ERROR); err != nil || e != 0 {
						s.rerr = errors.Join(err, syscallErr(e))
						return true
					}
				}
				s.waited = true
				return false
			}
			h := (*unix.TpacketHdrV1)(unsafe.Pointer(&b[8]))
			s.cur, s.curLeft, s.curOff = b, h.Num_pkts, h.Offset_to_first_pkt
			s.Stats.RxBlocks.Add(1)
		}
		if s.curLeft == 0 || !s.copyFrame() {
			// Done with the block (or its layout is broken): hand it back.
			atomic.StoreUint32(blockStatus(s.cur), unix.TP_STATUS_KERNEL)
			s.cur = nil
			s.rxBlock = (s.rxBlock + 1) % s.blocks
		}
	}
	return true
}

// copyFrame copies the packet at curOff in the current block to the next buffer. It returns
// false if the block's layout does not hold up, so that the rest of the block is skipped.
func (s *Socket) copyFrame() bool {
	b, off := s.cur, int(s.curOff)
	if off < blockHdr || off+hdr3Len > len(b) {
		s.Stats.RxDropped.Add(uint64(s.curLeft))
		return false
	}
	h := (*unix.Tpacket3Hdr)(unsafe.Pointer(&b[off]))
	mac, snap := off+int(h.Mac), int(h.Snaplen)
	s.curLeft--
	s.curOff += h.Next_offset
	if h.Next_offset == 0 && s.curLeft > 0 {
		s.Stats.RxDropped.Add(uint64(s.curLeft))
		s.curLeft = 0
	}
	buf := s.rbufs[s.rn]
	if int(h.Mac) < hdr3Len+vnethdr.Len || mac+snap > len(b) || snap != int(h.Len) || snap > len(buf) {
		s.Stats.RxDropped.Add(1)
		return true
	}
	n := copy(buf, b[mac:mac+snap])
	if !vnethdr.Decode(b[mac-vnethdr.Len:mac], buf[:n], &s.roffs[s.rn]) {
		s.Stats.RxDropped.Add(1)
		return true
	}
	s.rsizes[s.rn] = n
	s.Stats.RxFrames.Add(1)
	s.Stats.RxBytes.Add(uint64(n))
	s.rn++
	return true
}

// slot returns TX slot i.
func (s *Socket) slot(i int) []byte {
	off := i/s.txPerBlock*s.txBlockSize + i%s.txPerBlock*s.slotSize
	return s.tx[off : off+s.slotSize]
}

// Write puts the frames bufs with their offload metadata offs (nil: none) into TX slots and
// kicks the kernel once per batch (more often only when the ring is full), waiting while no
// slot is free. Frames whose metadata does not fit them, or too large for a slot, are counted
// in TxDropped and skipped. It returns how many frames it consumed, all unless err is set.
func (s *Socket) Write(bufs [][]byte, offs []netdev.Offload) (int, error) {
	if offs != nil {
		offs = offs[:len(bufs)]
	}
	s.wbufs, s.woffs, s.wn, s.werr = bufs, offs, 0, nil
	err := s.rc.Write(s.writeFn)
	n := s.wn
	if err == nil {
		err = s.werr
	}
	s.wbufs, s.woffs, s.werr = nil, nil, nil
	return n, s.fix(err)
}

// fillAndKick runs in the netpoller's Write: false means "wait until the socket is writable".
func (s *Socket) fillAndKick(fd uintptr) bool {
	for s.wn < len(s.wbufs) {
		slot := s.slot(s.txHead)
		h := (*unix.Tpacket3Hdr)(unsafe.Pointer(&slot[0]))
		if atomic.LoadUint32(&h.Status)&busyTX != 0 {
			// Ring full: send what is filled, then wait for the kernel to free slots.
			if s.pending == 0 {
				return false
			}
			if done, again := s.kick(fd); done || again {
				return done
			}
			continue
		}
		frame := s.wbufs[s.wn]
		s.wn++
		var o netdev.Offload
		if s.woffs != nil {
			o = s.woffs[s.wn-1]
		}
		if txDataOff+vnethdr.Len+len(frame) > s.slotSize || len(frame) < 14 || !vnethdr.Fix(frame, &o) {
			s.Stats.TxDropped.Add(1)
			continue
		}
		vnethdr.Encode(slot[txDataOff:], &o)
		copy(slot[txDataOff+vnethdr.Len:], frame)
		h.Len = uint32(vnethdr.Len + len(frame))
		h.Next_offset = 0
		atomic.StoreUint32(&h.Status, unix.TP_STATUS_SEND_REQUEST)
		s.txHead = (s.txHead + 1) % s.slots
		s.pending++
		s.Stats.TxFrames.Add(1)
		s.Stats.TxBytes.Add(uint64(len(frame)))
	}
	if s.pending == 0 {
		return true
	}
	done, again := s.kick(fd)
	return done || !again
}

// kick asks the kernel to send every filled slot. again means it could not take them all now
// (socket buffer full): wait for writability and kick again. done means a fatal error.
func (s *Socket) kick(fd uintptr) (done, again bool) {
	for {
		_, _, e := unix.Syscall6(unix.SYS_SENDTO, fd, 0, 0, unix.MSG_DONTWAIT, 0, 0)
		switch e {
		case 0:
			s.pending = 0
			s.Stats.TxKicks.Add(1)
			return false, false
		case unix.EINTR:
			continue
		case unix.EAGAIN, unix.ENOBUFS:
			return false, true
		default:
			s.werr = e
			return true, false
		}
	}
}

// fix turns the netpoller's error for a closed file into os.ErrClosed.
func (s *Socket) fix(err error) error {
	if err != nil && s.closed.Load() && !errors.Is(err, os.ErrClosed) {
		return fmt.Errorf("afpacket %s: %w", s.name, os.ErrClosed)
	}
	return err
}
