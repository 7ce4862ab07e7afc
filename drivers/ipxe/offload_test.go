package ipxe_test

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/nicstack/nicstack/drivers/ipxe"
	"github.com/nicstack/nicstack/netdev"
	"github.com/nicstack/nicstack/netdev/header"
)

var be = binary.BigEndian

func onesSum(b []byte, acc uint32) uint32 {
	for ; len(b) >= 2; b = b[2:] {
		acc += uint32(be.Uint16(b))
	}
	if len(b) == 1 {
		acc += uint32(b[0]) << 8
	}
	for acc>>16 != 0 {
		acc = acc&0xffff + acc>>16
	}
	return acc
}

// superFrame is a TCP frame over IPv4 or IPv6 with payload bytes of data, its checksum field
// holding the pseudo header's sum as CHECKSUM_PARTIAL leaves it.
func superFrame(v6 bool, payload int, flags uint8) []byte {
	l3, ipLen := 14, 20
	etype := uint16(header.EtherTypeIPv4)
	if v6 {
		ipLen, etype = 40, header.EtherTypeIPv6
	}
	l4 := l3 + ipLen
	f := make([]byte, l4+32+payload) // TCP header with 12 bytes of options
	copy(f, nicPeer)
	copy(f[6:], nicMAC)
	be.PutUint16(f[12:], etype)
	ip := f[l3:]
	if v6 {
		ip[0] = 0x60
		be.PutUint16(ip[4:], uint16(len(f)-l4))
		ip[6], ip[7] = 6, 64
		for i := range 32 {
			ip[8+i] = byte(0x20 + i)
		}
	} else {
		ip[0] = 0x45
		be.PutUint16(ip[2:], uint16(len(f)-l3))
		be.PutUint16(ip[4:], 0xfff0) // the ID wraps among the segments
		ip[6] = 0x40                 // DF
		ip[8], ip[9] = 64, 6
		copy(ip[12:], []byte{198, 18, 0, 1, 198, 18, 0, 2})
	}
	tcp := f[l4:]
	be.PutUint16(tcp[0:], 40000)
	be.PutUint16(tcp[2:], 5201)
	be.PutUint32(tcp[4:], 0xfffff000) // the sequence number wraps too
	be.PutUint32(tcp[8:], 77)
	tcp[12] = 8 << 4
	tcp[13] = flags
	be.PutUint16(tcp[14:], 65000)
	copy(tcp[20:], []byte{1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2}) // NOP NOP timestamps
	for i := range payload {
		tcp[32+i] = byte(i*13 + i/251)
	}
	return f
}

var nicPeer = []byte{0x02, 0, 0, 0, 0, 0x99}

// checkSegment checks one frame on the wire: lengths, checksums, and returns its TCP payload,
// sequence number, flags and (IPv4) ID.
func checkSegment(t *testing.T, v6 bool, f []byte) (payload []byte, seq uint32, flags uint8, id uint16) {
	t.Helper()
	l3 := 14
	var l4 int
	var pseudo uint32
	if v6 {
		l4 = l3 + 40
		if int(be.Uint16(f[l3+4:])) != len(f)-l4 {
			t.Fatalf("IPv6 payload length %d, frame has %d", be.Uint16(f[l3+4:]), len(f)-l4)
		}
		pseudo = onesSum(f[l3+8:l4], 0)
	} else {
		l4 = l3 + 20
		if int(be.Uint16(f[l3+2:])) != len(f)-l3 {
			t.Fatalf("IPv4 total length %d, frame has %d", be.Uint16(f[l3+2:]), len(f)-l3)
		}
		if onesSum(f[l3:l4], 0) != 0xffff {
			t.Fatalf("IPv4 header checksum %#04x wrong", be.Uint16(f[l3+10:]))
		}
		pseudo = onesSum(f[l3+12:l3+20], 0)
		id = be.Uint16(f[l3+4:])
	}
	if onesSum(f[l4:], pseudo+6+uint32(len(f)-l4)) != 0xffff {
		t.Fatalf("TCP checksum %#04x wrong", be.Uint16(f[l4+16:]))
	}
	doff := int(f[l4+12]>>4) * 4
	return f[l4+doff:], be.Uint32(f[l4+4:]), f[l4+13], id
}

// offloadUplink is the router's session as the driver sees it when frames carry offload
// metadata: each frame to send goes through the driver's SoftOffload, as the component's
// session adapter does.
type offloadUplink struct {
	fakeUplink
	queue []offloadFrame
	soft  *ipxe.SoftOffload
}

type offloadFrame struct {
	f []byte
	o netdev.Offload
}

func (u *offloadUplink) Fetch(buf []byte) (int, bool) {
	if u.soft.Pending() {
		return u.soft.Next(buf), true
	}
	if len(u.queue) == 0 {
		return 0, false
	}
	q := u.queue[0]
	u.queue = u.queue[1:]
	return u.soft.Copy(buf, q.f, q.o), true
}

// newOffloadRig is a rig whose driver sends through an offloadUplink counting in the driver's
// counters.
func newOffloadRig(t *testing.T) (*rig, *offloadUplink) {
	r := newRig(t, "82574L", ipxe.DefaultConfig())
	r.waitLink(t)
	u := &offloadUplink{soft: ipxe.NewSoftOffload(r.drv.Counters())}
	r.drv.SetUplink(u)
	return r, u
}

// TestSoftwareOffload: the router hands the driver TCP super-frames over IPv4 and IPv6 and a
// UDP frame with a partial checksum; the NIC has no offloads, so the driver cuts the
// super-frames into segments of GSOSize bytes and completes the checksums, and the wire
// carries frames a receiver takes.
func TestSoftwareOffload(t *testing.T) {
	r, up := newOffloadRig(t)
	submit := func(f []byte, o netdev.Offload) { up.queue = append(up.queue, offloadFrame{f, o}) }
	const mss, payload = 1448, 60000                 // 42 segments: more than fit a TX batch of a few
	v4 := superFrame(false, payload, 0x18|0x01|0x80) // PSH ACK FIN CWR
	v6 := superFrame(true, 5000, 0x18)
	submit(v4, netdev.Offload{Flags: netdev.OffloadNeedsCsum, GSOType: netdev.GSOTCPv4,
		GSOSize: mss, HdrLen: 66, CsumStart: 34, CsumOffset: 16})
	submit(v6, netdev.Offload{Flags: netdev.OffloadNeedsCsum, GSOType: netdev.GSOTCPv6,
		GSOSize: 1208, HdrLen: 86, CsumStart: 54, CsumOffset: 16})
	// UDP with a partial checksum: the field holds the pseudo header's sum
	udp := make([]byte, 14+20+8+300)
	copy(udp, v4[:34])
	be.PutUint16(udp[16:], uint16(len(udp)-14))
	udp[23] = 17
	be.PutUint16(udp[24:], 0)
	be.PutUint16(udp[24:], ^uint16(onesSum(udp[14:34], 0)))
	be.PutUint16(udp[38:], uint16(len(udp)-34))
	for i := 42; i < len(udp); i++ {
		udp[i] = byte(i)
	}
	be.PutUint16(udp[40:], uint16(onesSum(udp[26:34], 17+uint32(len(udp)-34))))
	submit(udp, netdev.Offload{Flags: netdev.OffloadNeedsCsum, CsumStart: 34, CsumOffset: 6})
	// a super-frame whose metadata does not fit it is dropped and counted
	submit(v4[:100], netdev.Offload{Flags: netdev.OffloadNeedsCsum, GSOType: netdev.GSOUDP, GSOSize: mss, CsumStart: 34, CsumOffset: 6})

	want4 := (payload + mss - 1) / mss
	want6 := (5000 + 1207) / 1208
	for steps := 0; len(r.wire.frames) < want4+want6+1; steps++ {
		if steps > 10000 {
			t.Fatalf("stuck at %d frames on the wire", len(r.wire.frames))
		}
		r.drv.Transmit()
		r.step(8 * frameTime)
	}
	if len(r.wire.frames) != want4+want6+1 {
		t.Fatalf("%d frames on the wire, want %d + %d + 1", len(r.wire.frames), want4, want6)
	}
	for _, c := range []struct {
		name   string
		v6     bool
		frames [][]byte
		super  []byte
		mss    int
		flags  uint8
	}{
		{"IPv4", false, r.wire.frames[:want4], v4, mss, 0x18 | 0x01 | 0x80},
		{"IPv6", true, r.wire.frames[want4 : want4+want6], v6, 1208, 0x18},
	} {
		var data []byte
		for i, f := range c.frames {
			p, seq, flags, id := checkSegment(t, c.v6, f)
			if i < len(c.frames)-1 && len(p) != c.mss {
				t.Errorf("%s segment %d carries %d bytes, want %d", c.name, i, len(p), c.mss)
			}
			if want := uint32(0xfffff000) + uint32(len(data)); seq != want {
				t.Errorf("%s segment %d: sequence number %#x, want %#x", c.name, i, seq, want)
			}
			wantFlags := c.flags
			if i > 0 {
				wantFlags &^= 0x80 // CWR on the first only
			}
			if i < len(c.frames)-1 {
				wantFlags &^= 0x08 | 0x01 // PSH and FIN on the last only
			}
			if flags != wantFlags {
				t.Errorf("%s segment %d: flags %#02x, want %#02x", c.name, i, flags, wantFlags)
			}
			if !c.v6 && id != 0xfff0+uint16(i) {
				t.Errorf("%s segment %d: IP ID %#x, want %#x", c.name, i, id, 0xfff0+uint16(i))
			}
			data = append(data, p...)
		}
		l4 := 14 + 20
		if c.v6 {
			l4 = 14 + 40
		}
		if !bytes.Equal(data, c.super[l4+32:]) {
			t.Errorf("%s: the segments' payload is not the super-frame's", c.name)
		}
	}
	got := r.wire.frames[want4+want6]
	if len(got) != len(udp) || onesSum(got[34:], onesSum(got[26:34], 17+uint32(len(got)-34))) != 0xffff {
		t.Errorf("UDP frame's checksum %#04x wrong", be.Uint16(got[40:]))
	}
	if c := r.drv.Counters(); c.TXSoftGSO.Load() != 2 || c.TXSegments.Load() != uint64(want4+want6) ||
		c.TXSoftCsum.Load() != 1 || c.TXOffloadDropped.Load() != 1 {
		t.Errorf("super-frames %d, segments %d, checksums %d, dropped %d; want 2, %d, 1, 1", c.TXSoftGSO.Load(),
			c.TXSegments.Load(), c.TXSoftCsum.Load(), c.TXOffloadDropped.Load(), want4+want6)
	}
	if n := r.drv.Counters().TXFrames.Load(); n != uint64(want4+want6+1) {
		t.Errorf("driver counted %d frames sent, want %d", n, want4+want6+1)
	}
}

// FuzzSoftwareOffload feeds the driver frames with arbitrary offload metadata from the router:
// it must neither panic nor put more than a buffer on the wire.
func FuzzSoftwareOffload(f *testing.F) {
	f.Add(superFrame(false, 3000, 0x18), uint8(1), uint8(netdev.GSOTCPv4), uint16(1448), uint16(34), uint16(16))
	f.Add(superFrame(true, 3000, 0x18), uint8(1), uint8(netdev.GSOTCPv6), uint16(1208), uint16(54), uint16(16))
	f.Add(superFrame(false, 300, 0x18), uint8(1), uint8(0), uint16(0), uint16(34), uint16(16))
	f.Fuzz(func(t *testing.T, frame []byte, flags, gso uint8, size, start, off uint16) {
		if len(frame) == 0 || len(frame) > 65535 {
			return
		}
		soft := ipxe.NewSoftOffload(ipxe.NewCounters(nil))
		buf := make([]byte, ipxe.BufSize)
		n := soft.Copy(buf, frame, netdev.Offload{Flags: flags, GSOType: gso, GSOSize: size, CsumStart: start, CsumOffset: off})
		for range 1 << 17 {
			if n > len(buf) {
				return // dropped by the driver
			}
			if !soft.Pending() {
				return
			}
			n = soft.Next(buf)
		}
		t.Fatal("one frame made more segments than it has bytes")
	})
}
