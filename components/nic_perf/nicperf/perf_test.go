package nicperf

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/nicstack/nicstack/netdev/header"
	"github.com/nicstack/nicstack/runtime/config"
	"github.com/nicstack/nicstack/runtime/packetstream"
)

func parse(t *testing.T, xml string) (Config, error) {
	t.Helper()
	n, err := config.ParseXML("test", []byte(xml))
	if err != nil {
		t.Fatal(err)
	}
	return ParseConfig(n, "nic_perf")
}

func TestParseConfig(t *testing.T) {
	cfg, err := parse(t, `<config tx="yes" protocol="icmp" dst_ip="198.18.0.1" size="64" rate="100" flows="4"/>`)
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.TX || !cfg.ICMP || cfg.DstIP != [4]byte{198, 18, 0, 1} || cfg.Size != 64 || cfg.Rate != 100 || cfg.Flows != 4 || cfg.NoAck {
		t.Errorf("parsed %+v", cfg)
	}
	for _, bad := range []string{`<config size="20"/>`, `<config protocol="sctp"/>`, `<config protocol="tcp" size="54"/>`, `<config session="Rom"/>`, `<config dst_ip="1.2.3"/>`} {
		if _, err := parse(t, bad); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
	if cfg, err := parse(t, `<config protocol="tcp" size="64" churn="300"/>`); err != nil || !cfg.TCP || cfg.Churn != 300 {
		t.Errorf("tcp and churn: %+v, %v", cfg, err)
	}
}

// One nic_perf generates UDP with valid checksums to another over a session, which counts it
// and answers ARP and ICMP echo for its address.
func TestGeneratorAndSink(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	cl, srv, err := packetstream.NewHeapSession(packetstream.DefaultConfig(), packetstream.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	defer srv.Close()
	gen := New(Config{MAC: header.MAC{2, 0, 0, 0, 0, 1}, IP: [4]byte{10, 0, 1, 2}, TX: true, DstIP: [4]byte{10, 0, 2, 2},
		SrcPort: 40000, DstPort: 12345, Flows: 3, Size: 100}, NewCounters(nil), quiet)
	sinkCtr := NewCounters(nil)
	sink := New(Config{MAC: header.MAC{2, 0, 0, 0, 0, 2}, IP: [4]byte{10, 0, 2, 2}}, sinkCtr, quiet)
	now := time.Now()
	gen.Step(cl.TX, cl.RX, now)
	// Check the frames as they sit in the sink's queue, then let the sink count them.
	frames := 0
	for {
		pk, ok := srv.TX.TryGet()
		if !ok {
			break
		}
		b := srv.TX.Payload(pk)
		ip, _ := header.NewIPv4(b[header.EthLen:])
		seg := ip.Payload()
		if header.Checksum(seg, header.PseudoSum(ip.Src(), ip.Dst(), header.ProtoUDP, len(seg))) != 0 {
			t.Fatalf("frame %d: bad UDP checksum", frames)
		}
		if want := uint16(40000 + frames%3); header.Ports(seg).Src() != want {
			t.Fatalf("frame %d from port %d, want %d", frames, header.Ports(seg).Src(), want)
		}
		frames++
		srv.TX.TryAck(pk)
	}
	if frames != batch {
		t.Fatalf("generated %d frames in one step, want %d", frames, batch)
	}
	// ARP request and ping to the sink, which sits on the server end here.
	arp := make([]byte, header.EthLen+header.ARPLen)
	header.Eth(arp).SetDst(header.Broadcast)
	header.Eth(arp).SetType(header.EtherTypeARP)
	header.PutARP(arp[header.EthLen:], header.ARPRequest, header.MAC{2, 0, 0, 0, 0, 9}, [4]byte{10, 0, 2, 1}, header.MAC{}, [4]byte{10, 0, 2, 2})
	ping := make([]byte, header.EthLen+20+16)
	header.Eth(ping).SetType(header.EtherTypeIPv4)
	header.PutIPv4(ping[header.EthLen:], 36, header.ProtoICMP, [4]byte{10, 0, 2, 1}, [4]byte{10, 0, 2, 2})
	ping[header.EthLen+20] = header.ICMPEchoRequest
	header.ICMP(ping[header.EthLen+20:]).UpdateChecksum()
	for _, f := range [][]byte{arp, ping} {
		pk, err := cl.TX.Alloc(len(f))
		if err != nil {
			t.Fatal(err)
		}
		copy(cl.TX.Payload(pk), f)
		cl.TX.TrySubmit(pk)
	}
	cl.TX.Wakeup()
	sink.Step(srv.RX, srv.TX, now)
	if n := sinkCtr.Answers.Load(); n != 2 {
		t.Fatalf("sink answered %d requests, want 2", n)
	}
	gen.Step(cl.TX, cl.RX, now) // receives the ARP reply (other) and the echo reply (rx)
	if n := gen.ctr.RxFrames.Load(); n != 1 {
		t.Errorf("generator counted %d echo replies, want 1", n)
	}
}

// The hot path allocates nothing per frame: a round of generator and sink, once the
// generator has its address and its destination's MAC (Genode's form, over DHCP and ARP).
func TestStepAllocatesNothing(t *testing.T) {
	p := directPair(t)
	p.steps(3)
	p.now = p.now.Add(arpRetry)
	p.steps(3)
	if p.srvCtr.RxFrames.Load() == 0 {
		t.Fatal("no traffic")
	}
	if n := testing.AllocsPerRun(100, func() { p.steps(1) }); n != 0 {
		t.Errorf("%v allocations per round", n)
	}
}
