package packetstream

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// StreamFiles are the files of one stream as the supervisor creates and hands them out: the
// region (a sealed memfd) and one eventfd per direction of signalling.
type StreamFiles struct {
	Cfg      Config
	Mem      *os.File // memfd, RegionSize bytes, sealed against shrinking and growing
	ToSink   *os.File // eventfd: packet_avail and ready_to_ack, written by the source
	ToSource *os.File // eventfd: ack_avail and ready_to_submit, written by the sink
}

// NewStreamFiles creates the files of one stream; name labels the memfd (visible in
// /proc/PID/fd).
func NewStreamFiles(name string, cfg Config) (*StreamFiles, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	fd, err := unix.MemfdCreate("nicstack-stream-"+name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("packetstream %s: memfd_create: %w", name, err)
	}
	mem := os.NewFile(uintptr(fd), "stream-"+name)
	if err := unix.Ftruncate(fd, int64(cfg.RegionSize())); err != nil {
		mem.Close()
		return nil, fmt.Errorf("packetstream %s: sizing region to %d bytes: %w", name, cfg.RegionSize(), err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		mem.Close()
		return nil, fmt.Errorf("packetstream %s: sealing region: %w", name, err)
	}
	// Blocking eventfds, so that os.File treats them as plain files and never changes their
	// mode; each endpoint switches its own to non-blocking when it opens the stream.
	toSink, err := newEventFile(name + "-to-sink")
	if err != nil {
		mem.Close()
		return nil, err
	}
	toSource, err := newEventFile(name + "-to-source")
	if err != nil {
		mem.Close()
		toSink.Close()
		return nil, err
	}
	return &StreamFiles{Cfg: cfg, Mem: mem, ToSink: toSink, ToSource: toSource}, nil
}

func newEventFile(name string) (*os.File, error) {
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("packetstream %s: eventfd: %w", name, err)
	}
	return os.NewFile(uintptr(fd), name), nil
}

// Close closes the three files; endpoints opened from them keep working.
func (s *StreamFiles) Close() error {
	return errors.Join(s.Mem.Close(), s.ToSink.Close(), s.ToSource.Close())
}

// check verifies that the files are what a stream with s.Cfg needs.
func (s *StreamFiles) check(what string) error {
	if err := s.Cfg.Validate(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if s.Mem == nil || s.ToSink == nil || s.ToSource == nil {
		return fmt.Errorf("%s: missing file", what)
	}
	var err error
	cerr := control(s.Mem, func(fd int) { err = checkRegionSize(fd, s.Cfg) })
	if err = errors.Join(cerr, err); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	for _, f := range []*os.File{s.ToSink, s.ToSource} {
		if err := checkEventFile(f); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	return nil
}

func checkEventFile(f *os.File) error {
	var link string
	var err error
	cerr := control(f, func(fd int) { link, err = os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd)) })
	if err = errors.Join(cerr, err); err != nil {
		return fmt.Errorf("file %s: %w", f.Name(), err)
	}
	if !strings.Contains(link, "eventfd") {
		return fmt.Errorf("file %s is %s, not an eventfd", f.Name(), link)
	}
	return nil
}

// SessionFiles are the files of one Nic or Uplink session: two streams.
type SessionFiles struct {
	TX *StreamFiles // the client is the source
	RX *StreamFiles // the server is the source
}

// NewSessionFiles creates both streams of a session.
func NewSessionFiles(name string, tx, rx Config) (*SessionFiles, error) {
	t, err := NewStreamFiles(name+"-tx", tx)
	if err != nil {
		return nil, err
	}
	r, err := NewStreamFiles(name+"-rx", rx)
	if err != nil {
		t.Close()
		return nil, err
	}
	return &SessionFiles{TX: t, RX: r}, nil
}

// Files returns the six files in the order a component receives them: TX.Mem, TX.ToSink,
// TX.ToSource, RX.Mem, RX.ToSink, RX.ToSource.
func (s *SessionFiles) Files() []*os.File {
	return []*os.File{s.TX.Mem, s.TX.ToSink, s.TX.ToSource, s.RX.Mem, s.RX.ToSink, s.RX.ToSource}
}

// SessionFilesFrom is the inverse of Files: it takes six files (for example os.NewFile of the
// inherited descriptors) and checks them against the configs.
func SessionFilesFrom(files []*os.File, tx, rx Config) (*SessionFiles, error) {
	if len(files) != 6 {
		return nil, fmt.Errorf("packetstream session: got %d files, want 6 (tx mem, to-sink, to-source, rx mem, to-sink, to-source)", len(files))
	}
	s := &SessionFiles{
		TX: &StreamFiles{Cfg: tx, Mem: files[0], ToSink: files[1], ToSource: files[2]},
		RX: &StreamFiles{Cfg: rx, Mem: files[3], ToSink: files[4], ToSource: files[5]},
	}
	if err := s.TX.check("packetstream session tx"); err != nil {
		return nil, err
	}
	if err := s.RX.check("packetstream session rx"); err != nil {
		return nil, err
	}
	return s, nil
}

// Close closes all six files; endpoints opened from them keep working.
func (s *SessionFiles) Close() error { return errors.Join(s.TX.Close(), s.RX.Close()) }

// Files returns the stream's three files in the order StreamFilesFrom takes them.
func (s *StreamFiles) Files() []*os.File { return []*os.File{s.Mem, s.ToSink, s.ToSource} }

// StreamFilesFrom is the inverse of StreamFiles.Files, with checks.
func StreamFilesFrom(files []*os.File, cfg Config) (*StreamFiles, error) {
	if len(files) != 3 {
		return nil, fmt.Errorf("packetstream: got %d files, want 3 (mem, to-sink, to-source)", len(files))
	}
	s := &StreamFiles{Cfg: cfg, Mem: files[0], ToSink: files[1], ToSource: files[2]}
	if err := s.check("packetstream stream"); err != nil {
		return nil, err
	}
	return s, nil
}
