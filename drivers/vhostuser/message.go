package vhostuser

import (
	"encoding/binary"
	"fmt"
)

// The vhost-user messages the back end serves (QEMU's docs/interop/vhost-user.rst).
const (
	reqGetFeatures         = 1
	reqSetFeatures         = 2
	reqSetOwner            = 3
	reqResetOwner          = 4
	reqSetMemTable         = 5
	reqSetLogBase          = 6
	reqSetLogFD            = 7
	reqSetVringNum         = 8
	reqSetVringAddr        = 9
	reqSetVringBase        = 10
	reqGetVringBase        = 11
	reqSetVringKick        = 12
	reqSetVringCall        = 13
	reqSetVringErr         = 14
	reqGetProtocolFeatures = 15
	reqSetProtocolFeatures = 16
	reqGetQueueNum         = 17
	reqSetVringEnable      = 18
	reqGetInflightFD       = 31
	reqSetInflightFD       = 32
)

var reqNames = map[uint32]string{
	reqGetFeatures: "GET_FEATURES", reqSetFeatures: "SET_FEATURES", reqSetOwner: "SET_OWNER",
	reqResetOwner: "RESET_OWNER", reqSetMemTable: "SET_MEM_TABLE", reqSetLogBase: "SET_LOG_BASE",
	reqSetLogFD: "SET_LOG_FD", reqSetVringNum: "SET_VRING_NUM", reqSetVringAddr: "SET_VRING_ADDR",
	reqSetVringBase: "SET_VRING_BASE", reqGetVringBase: "GET_VRING_BASE", reqSetVringKick: "SET_VRING_KICK",
	reqSetVringCall: "SET_VRING_CALL", reqSetVringErr: "SET_VRING_ERR",
	reqGetProtocolFeatures: "GET_PROTOCOL_FEATURES", reqSetProtocolFeatures: "SET_PROTOCOL_FEATURES",
	reqGetQueueNum: "GET_QUEUE_NUM", reqSetVringEnable: "SET_VRING_ENABLE",
	reqGetInflightFD: "GET_INFLIGHT_FD", reqSetInflightFD: "SET_INFLIGHT_FD",
}

func reqName(r uint32) string {
	if n, ok := reqNames[r]; ok {
		return n
	}
	return fmt.Sprintf("request %d", r)
}

// Header flags: the protocol version in the low two bits, a reply, and a request for one
// (REPLY_ACK).
const (
	flagVersion   = 0x1
	flagVersionMs = 0x3
	flagReply     = 0x4
	flagNeedReply = 0x8
)

const (
	msgHdrLen = 12
	// maxPayload bounds a message's payload: the largest we take is a memory table of
	// maxRegions regions (8 + 32*8 bytes).
	maxPayload = 8 + regionLen*maxRegions
	maxRegions = 8 // VHOST_MEMORY_BASELINE_NREGIONS: what QEMU sends without CONFIGURE_MEM_SLOTS
	regionLen  = 32
	maxFDs     = maxRegions
	// vringNoFD in a SET_VRING_KICK/CALL/ERR payload: no descriptor comes with it (polling).
	vringNoFD = 1 << 8
)

var le = binary.LittleEndian

// header is a message's fixed part.
type header struct {
	request, flags, size uint32
}

func parseHeader(b []byte) (header, error) {
	h := header{request: le.Uint32(b), flags: le.Uint32(b[4:]), size: le.Uint32(b[8:])}
	if h.flags&flagVersionMs != flagVersion {
		return h, fmt.Errorf("%s: protocol version %d, want 1", reqName(h.request), h.flags&flagVersionMs)
	}
	if h.flags&flagReply != 0 {
		return h, fmt.Errorf("%s: a reply where a request was due", reqName(h.request))
	}
	if h.size > maxPayload {
		return h, fmt.Errorf("%s: payload of %d bytes, at most %d", reqName(h.request), h.size, maxPayload)
	}
	return h, nil
}

// message is one request, its payload checked against its type: the sizes and the number of
// descriptors the request takes.
type message struct {
	header
	u64      uint64 // features, a vring's index with the NOFD bit
	index    uint32 // the vring of a state or address
	num      uint32 // a vring state's number (size, base, enable)
	addr     vringAddr
	mem      [maxRegions]memRegion
	nmem     int
	inflight inflightDesc
}

type vringAddr struct {
	flags             uint32
	desc, used, avail uint64
	log               uint64
}

// memRegion is one region of a memory table: guest physical address, size, the front end's
// address of it, and where it starts in its descriptor.
type memRegion struct {
	gpa, size, uaddr, offset uint64
}

// parseMessage checks the payload p of a request with header h that came with nfds
// descriptors, and decodes it.
func parseMessage(h header, p []byte, nfds int) (message, error) {
	m := message{header: h}
	name := reqName(h.request)
	wantSize := func(n int) error {
		if len(p) != n {
			return fmt.Errorf("%s: payload of %d bytes, want %d", name, len(p), n)
		}
		return nil
	}
	fds := 0
	var err error
	switch h.request {
	case reqGetFeatures, reqGetProtocolFeatures, reqGetQueueNum, reqSetOwner, reqResetOwner:
		// A payload here is tolerated (QEMU has sent one with GET_*), not read.
	case reqSetFeatures, reqSetProtocolFeatures:
		if err = wantSize(8); err == nil {
			m.u64 = le.Uint64(p)
		}
	case reqSetVringNum, reqSetVringBase, reqGetVringBase, reqSetVringEnable:
		if err = wantSize(8); err == nil {
			m.index, m.num = le.Uint32(p), le.Uint32(p[4:])
		}
	case reqSetVringAddr:
		if err = wantSize(40); err == nil {
			m.index = le.Uint32(p)
			m.addr = vringAddr{flags: le.Uint32(p[4:]), desc: le.Uint64(p[8:]), used: le.Uint64(p[16:]),
				avail: le.Uint64(p[24:]), log: le.Uint64(p[32:])}
		}
	case reqSetVringKick, reqSetVringCall, reqSetVringErr:
		if err = wantSize(8); err == nil {
			m.u64 = le.Uint64(p)
			m.index = uint32(m.u64 & 0xff)
			if m.u64&vringNoFD == 0 {
				fds = 1
			}
			if m.u64&^(0xff|vringNoFD) != 0 {
				err = fmt.Errorf("%s: unknown bits %#x", name, m.u64)
			}
		}
	case reqSetMemTable:
		if len(p) < 8 {
			return m, fmt.Errorf("%s: payload of %d bytes, want at least 8", name, len(p))
		}
		n := le.Uint32(p)
		if n == 0 || n > maxRegions {
			return m, fmt.Errorf("%s: %d regions, want 1 to %d", name, n, maxRegions)
		}
		if err = wantSize(8 + regionLen*int(n)); err != nil {
			return m, err
		}
		m.nmem, fds = int(n), int(n)
		for i := range m.nmem {
			r := p[8+regionLen*i:]
			m.mem[i] = memRegion{gpa: le.Uint64(r), size: le.Uint64(r[8:]), uaddr: le.Uint64(r[16:]), offset: le.Uint64(r[24:])}
		}
	case reqGetInflightFD, reqSetInflightFD:
		if err = wantSize(inflightDescLen); err == nil {
			m.inflight = inflightDesc{mmapSize: le.Uint64(p), mmapOffset: le.Uint64(p[8:]), queues: le.Uint16(p[16:]), queueSize: le.Uint16(p[18:])}
			if h.request == reqSetInflightFD {
				fds = 1
			}
		}
	case reqSetLogBase, reqSetLogFD:
		fds = nfds // refused after parsing; the descriptors are closed with the message
	default:
		fds = nfds
	}
	if err != nil {
		return m, err
	}
	if nfds != fds {
		return m, fmt.Errorf("%s: %d descriptors, want %d", name, nfds, fds)
	}
	return m, nil
}

// needsReply reports whether m's front end waits for an answer to a request that has none of
// its own: REPLY_ACK was negotiated and m asks for it.
func (m *message) needsReply(replyAck bool) bool {
	if !replyAck || m.flags&flagNeedReply == 0 {
		return false
	}
	switch m.request {
	case reqGetFeatures, reqGetProtocolFeatures, reqGetQueueNum, reqGetVringBase, reqGetInflightFD:
		return false // answered anyway
	}
	return true
}
