package nicperf

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/nicstack/nicstack/netdev/header"
	"github.com/nicstack/nicstack/runtime/packetstream"
)

// The TCP generator sends SYN, ACK with data, FIN|ACK, ACK per connection with valid
// checksums and sequence numbers; the peer answers the SYN and the FIN.
func TestTCPExchange(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	cl, srv, err := packetstream.NewHeapSession(packetstream.DefaultConfig(), packetstream.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	defer srv.Close()
	gen := New(Config{MAC: header.MAC{2, 0, 0, 0, 0, 1}, IP: [4]byte{10, 0, 1, 2}, TX: true, TCP: true, DstIP: [4]byte{10, 0, 2, 2},
		SrcPort: 40000, DstPort: 80, Flows: 2, Size: 100, Rate: 8}, NewCounters(nil), quiet)
	peerCtr := NewCounters(nil)
	peer := New(Config{MAC: header.MAC{2, 0, 0, 0, 0, 2}, IP: [4]byte{10, 0, 2, 2}}, peerCtr, quiet)
	start := time.Now()
	gen.Step(cl.TX, cl.RX, start)
	gen.Step(cl.TX, cl.RX, start.Add(time.Second)) // 8 frames: two connections
	want := []struct {
		port  uint16
		flags uint8
		seq   uint32
		data  int
	}{
		{40000, header.TCPSyn, 1000, 0}, {40000, header.TCPAck | header.TCPPsh, 1001, 46}, {40000, header.TCPFin | header.TCPAck, 1047, 0}, {40000, header.TCPAck, 1048, 0},
		{40001, header.TCPSyn, 1000, 0},
	}
	var got int
	for {
		pk, ok := srv.TX.TryGet()
		if !ok {
			break
		}
		b := srv.TX.Payload(pk)
		ip, _ := header.NewIPv4(b[header.EthLen:])
		seg, ok := header.L4Header(ip)
		if !ok || ip.Protocol() != header.ProtoTCP {
			t.Fatalf("frame %d is no TCP segment", got)
		}
		if header.Checksum(seg, header.PseudoSum(ip.Src(), ip.Dst(), header.ProtoTCP, len(seg))) != 0 {
			t.Fatalf("frame %d: bad TCP checksum", got)
		}
		if got < len(want) {
			w := want[got]
			if header.Ports(seg).Src() != w.port || header.TCPFlags(seg) != w.flags || header.TCPSeq(seg) != w.seq || header.TCPPayloadLen(seg) != w.data {
				t.Errorf("frame %d: port %d flags %#x seq %d data %d, want %+v", got, header.Ports(seg).Src(), header.TCPFlags(seg), header.TCPSeq(seg), header.TCPPayloadLen(seg), w)
			}
		}
		got++
		srv.TX.TryAck(pk)
	}
	if got != 8 {
		t.Fatalf("generated %d segments, want 8", got)
	}
	// The next two connections go to the peer, which answers both SYNs and both FINs.
	gen.Step(cl.TX, cl.RX, start.Add(2*time.Second))
	peer.Step(srv.RX, srv.TX, start)
	if n, a := peerCtr.RxFrames.Load(), peerCtr.Answers.Load(); n != 8 || a != 4 {
		t.Fatalf("peer received %d segments and answered %d, want 8 and 4", n, a)
	}
	gen.Step(cl.TX, cl.RX, start.Add(2*time.Second))
	if n := gen.ctr.RxFrames.Load(); n != 4 {
		t.Errorf("generator received %d answers, want 4", n)
	}
}
