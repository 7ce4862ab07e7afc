package region

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/nicstack/nicstack/netdev/header"
	"github.com/nicstack/nicstack/router/tcpstate"
)

func mustOpen(t interface {
	Helper()
	Fatal(...any)
}, mem []byte) (*Region, *Contents) {
	t.Helper()
	r, c, err := Open(mem)
	if err != nil {
		t.Fatal(err)
	}
	return r, c
}

// A new (zero) region is formatted without a complaint; Open refuses memory of no layout.
func TestOpenNewAndBad(t *testing.T) {
	r, c := mustOpen(t, make([]byte, Size(8)))
	if r.Slots() != 8 || r.InUse() != 0 || c.Discarded != 0 {
		t.Fatalf("%d slots, %d in use, %d discarded", r.Slots(), r.InUse(), c.Discarded)
	}
	for _, n := range []int{0, SlotSize, Size(2) + 1} {
		if _, _, err := Open(make([]byte, n)); err == nil {
			t.Errorf("%d bytes opened", n)
		}
	}
}

// conn is a TCP state that Segment reaches: a handshake, some of it.
func conn(t *rapid.T) tcpstate.Conn {
	var c tcpstate.Conn
	steps := rapid.IntRange(0, 6).Draw(t, "steps")
	seq := [2]uint32{rapid.Uint32().Draw(t, "seq0"), rapid.Uint32().Draw(t, "seq1")}
	script := []struct {
		side  int
		flags uint8
	}{{0, header.TCPSyn}, {1, header.TCPSyn | header.TCPAck}, {0, header.TCPAck}, {0, header.TCPFin | header.TCPAck},
		{1, header.TCPAck}, {1, header.TCPFin | header.TCPAck}, {0, header.TCPAck}}
	for _, s := range script[:steps] {
		c.Segment(s.side, s.flags, seq[s.side], seq[1-s.side]+1, 0)
		if s.flags&(header.TCPSyn|header.TCPFin) != 0 {
			seq[s.side]++
		}
	}
	return c
}

func tupleGen(t *rapid.T, label string) Tuple {
	return Tuple{Src: [4]byte(rapid.SliceOfN(rapid.Byte(), 4, 4).Draw(t, label+"src")),
		Dst:   [4]byte(rapid.SliceOfN(rapid.Byte(), 4, 4).Draw(t, label+"dst")),
		Sport: rapid.Uint16().Draw(t, label+"sport"), Dport: rapid.Uint16().Draw(t, label+"dport")}
}

// record draws any well-formed record; put writes it to slot s of r.
func record(t *rapid.T) (any, func(r *Region, s int32) int32) {
	switch rapid.IntRange(0, 5).Draw(t, "kind") {
	case 5:
		c := &SLAAC{Domain: Name(rapid.Uint64().Draw(t, "domain")), Addr: [16]byte(rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, "addr")),
			PrefixBits: rapid.Uint8().Draw(t, "bits"), Gateway: [16]byte(rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, "gw")),
			HasGateway: rapid.Bool().Draw(t, "hasgw"), ValidEnd: rapid.Int64().Draw(t, "valid"), PreferredEnd: rapid.Int64().Draw(t, "preferred"),
			RouterEnd: rapid.Int64().Draw(t, "router"), MTU: rapid.Uint16().Draw(t, "mtu"), RDNSSEnd: rapid.Int64().Draw(t, "rdnssend")}
		for range rapid.IntRange(0, MaxRDNSS).Draw(t, "rdnss") {
			c.RDNSS = append(c.RDNSS, [16]byte(rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, "rdnssip")))
		}
		return *c, func(r *Region, s int32) int32 { return r.Put(s, c) }
	case 0:
		l := &Link{Proto: rapid.SampledFrom([]uint8{header.ProtoTCP, header.ProtoUDP, header.ProtoICMP}).Draw(t, "proto"),
			Client: Name(rapid.Uint64().Draw(t, "client")), Server: Name(rapid.Uint64().Draw(t, "server")),
			Owner: Name(rapid.Uint64().Draw(t, "owner")), ClientTuple: tupleGen(t, "c"), ServerTuple: tupleGen(t, "s")}
		if rapid.Bool().Draw(t, "nat") {
			l.NATPort = rapid.Uint16Range(49152, 65535).Draw(t, "port")
		}
		switch l.Proto {
		case header.ProtoTCP:
			l.TCP = conn(t)
			if l.TCP.State == tcpstate.Closed {
				l.ClosedAt = rapid.Int64Min(0).Draw(t, "closed")
			}
		case header.ProtoICMP:
			l.ClientTuple.Dport, l.ServerTuple.Dport = l.ClientTuple.Sport, l.ServerTuple.Sport
			fallthrough
		default:
			l.TCP.State = tcpstate.State(rapid.IntRange(0, 1).Draw(t, "open"))
		}
		return *l, func(r *Region, s int32) int32 { return r.Put(s, l) }
	case 4:
		l := &Link6{Proto: rapid.SampledFrom([]uint8{header.ProtoTCP, header.ProtoUDP, header.ProtoICMPv6}).Draw(t, "proto"),
			Client: Name(rapid.Uint64().Draw(t, "client")), Server: Name(rapid.Uint64().Draw(t, "server")),
			Owner: Name(rapid.Uint64().Draw(t, "owner")),
			ClientTuple: Tuple6{Src: [16]byte(rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, "src")),
				Dst: [16]byte(rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, "dst")), Sport: rapid.Uint16().Draw(t, "sport"), Dport: rapid.Uint16().Draw(t, "dport")},
			ServerDst: [16]byte(rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, "serverdst"))}
		if rapid.Bool().Draw(t, "nat") {
			l.NATPort = rapid.Uint16Range(49152, 65535).Draw(t, "port")
		}
		switch l.Proto {
		case header.ProtoTCP:
			l.TCP = conn(t)
			if l.TCP.State == tcpstate.Closed {
				l.ClosedAt = rapid.Int64Min(0).Draw(t, "closed")
			}
		case header.ProtoICMPv6:
			l.ClientTuple.Dport = l.ClientTuple.Sport
			fallthrough
		default:
			l.TCP.State = tcpstate.State(rapid.IntRange(0, 1).Draw(t, "open"))
		}
		return *l, func(r *Region, s int32) int32 { return r.Put(s, l) }
	case 1:
		a := &ARP{Domain: Name(rapid.Uint64().Draw(t, "domain")), IP: [4]byte(rapid.SliceOfN(rapid.Byte(), 4, 4).Draw(t, "ip")),
			MAC: [6]byte(rapid.SliceOfN(rapid.Byte(), 6, 6).Draw(t, "mac"))}
		return *a, func(r *Region, s int32) int32 { return r.Put(s, a) }
	case 2:
		l := &Lease{Domain: Name(rapid.Uint64().Draw(t, "domain")), Owner: Name(rapid.Uint64().Draw(t, "owner")),
			MAC: [6]byte(rapid.SliceOfN(rapid.Byte(), 6, 6).Draw(t, "mac")), IP: [4]byte(rapid.SliceOfN(rapid.Byte(), 4, 4).Draw(t, "ip")),
			Bound: rapid.Bool().Draw(t, "bound"), Deadline: rapid.Int64().Draw(t, "deadline")}
		return *l, func(r *Region, s int32) int32 { return r.Put(s, l) }
	}
	c := &Client{Domain: Name(rapid.Uint64().Draw(t, "domain")), State: rapid.Uint8().Draw(t, "state"), XID: rapid.Uint32().Draw(t, "xid"),
		Deadline: rapid.Int64().Draw(t, "deadline"), LeaseEnd: rapid.Int64().Draw(t, "end"), PrefixBits: rapid.Uint8().Draw(t, "bits"),
		HasGateway: rapid.Bool().Draw(t, "gw"), DNSDomain: rapid.StringN(0, MaxDNSDomain, MaxDNSDomain).Draw(t, "dnsdomain")}
	for range rapid.IntRange(0, MaxDNSServers).Draw(t, "dns") {
		c.DNS = append(c.DNS, [4]byte(rapid.SliceOfN(rapid.Byte(), 4, 4).Draw(t, "dnsip")))
	}
	if !c.Fits() { // a multi-byte rune can take it past MaxDNSDomain bytes
		c.DNSDomain = ""
	}
	return *c, func(r *Region, s int32) int32 { return r.Put(s, c) }
}

// found lists what Open found by slot, without the slots.
func found(c *Contents) map[int32]any {
	out := map[int32]any{}
	bySlot(out, c.Links, func(x *Link) *int32 { return &x.Slot })
	bySlot(out, c.Links6, func(x *Link6) *int32 { return &x.Slot })
	bySlot(out, c.ARP, func(x *ARP) *int32 { return &x.Slot })
	bySlot(out, c.Leases, func(x *Lease) *int32 { return &x.Slot })
	bySlot(out, c.Clients, func(x *Client) *int32 { return &x.Slot })
	bySlot(out, c.SLAAC, func(x *SLAAC) *int32 { return &x.Slot })
	return out
}

func bySlot[T any](out map[int32]any, xs []T, slot func(*T) *int32) {
	for _, x := range xs {
		s := *slot(&x)
		*slot(&x) = 0
		out[s] = x
	}
}

// Whatever sequence of writes, rewrites and frees a router makes, Open of the region finds
// exactly the records of the slots in use, and a region found full takes nothing more.
func TestRegionModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 12).Draw(t, "slots")
		mem := make([]byte, Size(n))
		r, _ := mustOpen(t, mem)
		model := map[int32]any{}
		var slots []int32
		for range rapid.IntRange(0, 60).Draw(t, "ops") {
			switch op := rapid.IntRange(0, 3).Draw(t, "op"); {
			case op <= 1: // a new record
				rec, put := record(t)
				s := put(r, None)
				if s == None {
					if len(model) != n {
						t.Fatalf("region refused a record with %d of %d slots in use", len(model), n)
					}
					continue
				}
				if _, taken := model[s]; taken {
					t.Fatalf("slot %d handed out twice", s)
				}
				model[s] = rec
				slots = append(slots, s)
			case op == 2 && len(slots) > 0: // a change
				s := rapid.SampledFrom(slots).Draw(t, "rewrite")
				rec, put := record(t)
				if put(r, s) != s {
					t.Fatalf("rewrite of slot %d moved it", s)
				}
				model[s] = rec
			case op == 3 && len(slots) > 0:
				k := rapid.IntRange(0, len(slots)-1).Draw(t, "free")
				r.Free(slots[k])
				delete(model, slots[k])
				slots = append(slots[:k], slots[k+1:]...)
			}
			if r.InUse() != len(model) {
				t.Fatalf("%d in use, model has %d", r.InUse(), len(model))
			}
		}
		r2, c := mustOpen(t, mem)
		if c.Discarded != 0 {
			t.Fatalf("discarded %d: %v", c.Discarded, c.Why)
		}
		if got := found(c); !reflect.DeepEqual(got, model) && !(len(got) == 0 && len(model) == 0) {
			t.Fatalf("found %v\nwant %v", got, model)
		}
		if r2.InUse() != len(model) {
			t.Fatalf("reopened: %d in use, want %d", r2.InUse(), len(model))
		}
	})
}

// A write that never completed (the router killed in the middle) is discarded, whatever the
// slot held before; the other slots stay.
func TestTornWriteDiscarded(t *testing.T) {
	mem := make([]byte, Size(4))
	r, _ := mustOpen(t, mem)
	a := &ARP{IP: [4]byte{10, 0, 0, 1}}
	s1 := r.Put(None, a)
	s2 := r.Put(None, a)
	b, _, _ := r.begin(s2, KindARP) // killed before commit
	b[0] = 1
	_, c := mustOpen(t, mem)
	if len(c.ARP) != 1 || c.ARP[0].Slot != s1 || c.Discarded != 1 || !strings.Contains(c.Why[0], "torn") {
		t.Fatalf("found %v, discarded %d: %v", c.ARP, c.Discarded, c.Why)
	}
	// The discarded slot is free again, and zero.
	r3, c3 := mustOpen(t, mem)
	if c3.Discarded != 0 || r3.InUse() != 1 {
		t.Fatalf("second open: %d discarded, %d in use", c3.Discarded, r3.InUse())
	}
}

// Any change to a byte of a slot in use makes Open discard that slot, a record moved to
// another slot included, and any change to the header formats the region with the reason.
func TestFlippedBytesDiscarded(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		mem := make([]byte, Size(3))
		r, _ := mustOpen(t, mem)
		_, put := record(t)
		s := put(r, None)
		put(r, None)
		var off int
		left := 1
		switch rapid.IntRange(0, 2).Draw(t, "where") {
		case 0: // the record
			off = int(s)*SlotSize + 4 + rapid.IntRange(0, SlotSize-5).Draw(t, "at")
			mem[off] ^= rapid.ByteRange(1, 255).Draw(t, "flip")
		case 1: // copied into the free slot
			copy(mem[3*SlotSize:4*SlotSize], mem[int(s)*SlotSize:])
			left = 2
		default:
			off = rapid.IntRange(0, hdrLen-1).Draw(t, "at")
			mem[off] ^= rapid.ByteRange(1, 255).Draw(t, "flip")
			_, c, err := Open(mem)
			var f *Formatted
			if !errors.As(err, &f) || len(found(c)) != 0 {
				t.Fatalf("header byte %d flipped: err %v, found %v", off, err, found(c))
			}
			return
		}
		_, c := mustOpen(t, mem)
		if c.Discarded != 1 || len(found(c)) != left {
			t.Fatalf("discarded %d (%v), found %v", c.Discarded, c.Why, found(c))
		}
	})
}

// FuzzOpen loads any bytes as a region: nothing panics, and a second Open finds the same,
// discards nothing and changes no byte (the first left only what it trusts).
func FuzzOpen(f *testing.F) {
	mem := make([]byte, Size(5))
	r, _, _ := Open(mem)
	r.Put(None, &Link{Proto: header.ProtoTCP, NATPort: 50000, ClientTuple: Tuple{Sport: 1, Dport: 2}})
	r.Put(None, &ARP{Domain: 7, IP: [4]byte{10, 0, 0, 1}})
	r.Put(None, &Link6{Proto: header.ProtoICMPv6, NATPort: 50000, ClientTuple: Tuple6{Sport: 3, Dport: 3}})
	r.Put(None, &Lease{Domain: 7, Bound: true, Deadline: 5})
	r.Put(None, &Client{Domain: 7, State: 3, PrefixBits: 24, DNS: [][4]byte{{1, 1, 1, 1}}, DNSDomain: "example.org"})
	f.Add(bytes.Clone(mem))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		mem := make([]byte, Size(5))
		copy(mem, data)
		if len(data) < hdrLen { // most inputs keep the valid header to reach the records
			copy(mem, seedHeader(t))
		}
		_, c, _ := Open(mem)
		before := bytes.Clone(mem)
		r2, c2, err := Open(mem)
		if err != nil || c2.Discarded != 0 || !reflect.DeepEqual(found(c), found(c2)) || !bytes.Equal(before, mem) {
			t.Fatalf("second open: err %v, discarded %d, found %v then %v", err, c2.Discarded, found(c), found(c2))
		}
		if r2.InUse() != len(found(c2)) {
			t.Fatalf("%d in use, %d found", r2.InUse(), len(found(c2)))
		}
	})
}

func seedHeader(t *testing.T) []byte {
	mem := make([]byte, Size(5))
	if _, _, err := Open(mem); err != nil {
		t.Fatal(err)
	}
	return mem[:hdrLen]
}

// TestRecordsFitASlot: each kind's record fits the body of a slot.
func TestRecordsFitASlot(t *testing.T) {
	for k, n := range map[Kind]int{KindLink: linkLen, KindLink6: link6Len, KindARP: arpLen, KindLease: leaseLen, KindClient: clientLen, KindSLAAC: slaacLen} {
		if n > SlotSize-bodyOff {
			t.Errorf("%v: %d bytes, a slot holds %d", k, n, SlotSize-bodyOff)
		}
	}
}
