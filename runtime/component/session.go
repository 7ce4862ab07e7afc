package component

import (
	"os"
	"strings"
	"sync/atomic"

	controlpb "github.com/nicstack/nicstack/proto"
	"github.com/nicstack/nicstack/runtime/packetstream"
)

// DeviceSpec is the geometry of a device session: a session that is not a packet stream but
// shared memory and eventfds whose use the two sides agree on (an emulated NIC's register
// page, DMA memory, doorbell and interrupt, say).
type DeviceSpec struct {
	Mems     []int // byte sizes of shared-memory regions (memfds, sealed to that size)
	Eventfds int   // number of eventfds
}

// Session is one open session as this component sees it.
type Session struct {
	ID      uint64
	Request uint64 // for a client: the id Request returned
	Service string
	Label   string // as the server sees it: "client -> label", or the route's rewrite
	Args    map[string]string
	Client  *packetstream.Client // set when this component is a packet-stream session's client
	Server  *packetstream.Server // set when this component serves a packet-stream session
	Role    Role
	// Device sessions (Client and Server nil): both sides get the same files, the memfds in
	// Spec.Mems order, then the eventfds. A parent service's session carries what the service
	// says (a TAP, a packet socket). The files are closed right after Handler.Close returns;
	// a handler that needs one longer keeps a duplicate.
	Files []*os.File
	Spec  DeviceSpec

	// ClientRestarts is set, when the session closes, if its client's process crashed and
	// is started again: a server may keep what the session made for the client's next
	// session with the same label (nic_router keeps a crashed vm's NAT mappings).
	ClientRestarts bool

	linkUp   atomic.Bool
	tappedBy uint64 // the capture tapping the session's streams, 0: none
}

// RestartsReason ends the reason the supervisor gives for closing the sessions of a client
// whose process crashed and is started again (Session.ClientRestarts).
const RestartsReason = "; it restarts"

// Role says which side of a session this component is.
type Role int

const (
	Client Role = iota + 1
	Server
)

// Device reports whether s is a device session (no packet stream).
func (s *Session) Device() bool { return s.Client == nil && s.Server == nil }

// LinkUp reports the link state last reported by the session's server (up when opened).
func (s *Session) LinkUp() bool { return s.linkUp.Load() }

// counters returns what this side sends and receives; nil for a device session, whose traffic
// only its handler sees.
func (s *Session) counters() (sent, received *packetstream.Counters) {
	switch {
	case s.Client != nil:
		return s.Client.TX.Counters(), s.Client.RX.Counters()
	case s.Server != nil:
		return s.Server.RX.Counters(), s.Server.TX.Counters()
	}
	return nil, nil
}

// queues reports the stream this side sends on (the client's TX, the server's RX), as
// hops "<label> tx" or "<label> rx" (what waits for the peer to take it) and the same with
// " acks" (what the peer acknowledged and this side has not collected). A device session's
// queues are its handler's to report (Component.Queue).
func (s *Session) queues() []*controlpb.QueueDepth {
	var src *packetstream.Source
	var dir string
	switch {
	case s.Client != nil:
		src, dir = s.Client.TX, "tx"
	case s.Server != nil:
		src, dir = s.Server.RX, "rx"
	default:
		return nil
	}
	submit, acks := src.Queue()
	return []*controlpb.QueueDepth{queueDepth(Hop(s.Label, dir), submit), queueDepth(Hop(s.Label, dir+" acks"), acks)}
}

// Hop names a queue of the session labelled label as the status shows it: "vm -> tx" (a
// session asked for with no label has the label "vm -> ", whose blank is dropped).
func Hop(label, what string) string { return strings.TrimSpace(label) + " " + what }

func (s *Session) unmap() error {
	switch {
	case s.Client != nil:
		return s.Client.Close()
	case s.Server != nil:
		return s.Server.Close()
	}
	var first error
	for _, f := range s.Files {
		if err := f.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// DeviceSpecProto and DeviceSpecFrom convert a DeviceSpec to and from the control protocol.
func DeviceSpecProto(s DeviceSpec) *controlpb.DeviceSpec {
	p := &controlpb.DeviceSpec{Eventfds: uint32(s.Eventfds)}
	for _, m := range s.Mems {
		p.Mems = append(p.Mems, uint64(m))
	}
	return p
}

func DeviceSpecFrom(p *controlpb.DeviceSpec) DeviceSpec {
	s := DeviceSpec{Eventfds: int(p.GetEventfds())}
	for _, m := range p.GetMems() {
		s.Mems = append(s.Mems, int(m))
	}
	return s
}

func streamSize(c packetstream.Config) *controlpb.StreamSize {
	return &controlpb.StreamSize{QueueSize: uint32(c.QueueSize), BulkSize: uint32(c.BulkSize)}
}

// StreamConfig converts a StreamSize, defaults for zero fields.
func StreamConfig(s *controlpb.StreamSize) packetstream.Config {
	c := packetstream.DefaultConfig()
	if s.GetQueueSize() != 0 {
		c.QueueSize = int(s.GetQueueSize())
	}
	if s.GetBulkSize() != 0 {
		c.BulkSize = int(s.GetBulkSize())
	}
	return c
}

// openStream maps a packet-stream session's files as s's side of the stream.
func openStream(s *Session, files []*os.File, req *controlpb.OpenSessionRequest) error {
	sf, err := packetstream.SessionFilesFrom(files, StreamConfig(req.GetTx()), StreamConfig(req.GetRx()))
	if err != nil {
		closeAll(files)
		return err
	}
	defer sf.Close() // the mappings and duplicated eventfds outlive the received files
	// Each side bounds the bytes in flight of the stream it sends on as the session's route
	// says (supervisor.QueueBounds).
	if s.Role == Client {
		if s.Client, err = packetstream.OpenClient(sf); err == nil {
			s.Client.TX.SetQueueBytes(int(req.GetTx().GetQueueBytes()))
		}
	} else {
		if s.Server, err = packetstream.OpenServer(sf); err == nil {
			s.Server.RX.SetQueueBytes(int(req.GetRx().GetQueueBytes()))
		}
	}
	return err
}
