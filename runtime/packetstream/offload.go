package packetstream

// Offload is the offload metadata a frame carries through a packet stream: the fields of a
// virtio-net header, so that super-frames from a TAP with IFF_VNET_HDR, or from a guest, pass
// through whole and the checksum is filled in only where the frame finally leaves.
type Offload struct {
	Flags      uint8 // OffloadNeedsCsum, OffloadDataValid
	GSOType    uint8 // GSONone, GSOTCPv4, GSOUDP, GSOTCPv6, optionally | GSOECN
	HdrLen     uint16
	GSOSize    uint16
	CsumStart  uint16
	CsumOffset uint16
}

// Values as in Linux's virtio_net.h, so a vnet header converts field by field.
const (
	OffloadNeedsCsum = 1
	OffloadDataValid = 2

	GSONone  = 0
	GSOTCPv4 = 1
	GSOUDP   = 3
	GSOTCPv6 = 4
	GSOECN   = 0x80
)
