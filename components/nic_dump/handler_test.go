package main

import (
	"bytes"
	"encoding/binary"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nicstack/nicstack/components/nic_dump/nicdump"
	"github.com/nicstack/nicstack/internal/testutil"
	"github.com/nicstack/nicstack/netdev"
	"github.com/nicstack/nicstack/netdev/header"
	"github.com/nicstack/nicstack/runtime/component"
	"github.com/nicstack/nicstack/runtime/config"
	ps "github.com/nicstack/nicstack/runtime/packetstream"
	"github.com/nicstack/nicstack/runtime/pcap"
)

// udpFrame is an Ethernet frame with an IPv4 UDP datagram from 10.0.1.2:port to 10.0.2.2:7.
func udpFrame(port uint16) []byte {
	f := make([]byte, 14+20+8+4)
	copy(f, []byte{2, 2, 2, 2, 2, 0, 2, 0, 0, 0, 0, 1, 0x08, 0x00})
	ip := f[14:]
	ip[0], ip[8], ip[9] = 0x45, 64, 17
	binary.BigEndian.PutUint16(ip[2:], 32)
	copy(ip[12:], []byte{10, 0, 1, 2, 10, 0, 2, 2})
	binary.BigEndian.PutUint16(ip[20:], port)
	binary.BigEndian.PutUint16(ip[22:], 7)
	binary.BigEndian.PutUint16(ip[24:], 12)
	return f
}

func send(t *testing.T, out *ps.Source, frame []byte, o netdev.Offload) {
	t.Helper()
	for out.ReleaseAcked() > 0 {
	}
	p, err := out.Alloc(len(frame))
	if err != nil {
		t.Fatal(err)
	}
	copy(out.Payload(p), frame)
	if o != (netdev.Offload{}) {
		p = p.WithOffload(o)
	}
	if !out.TrySubmit(p) {
		t.Fatal("submit queue full")
	}
	out.Wakeup()
}

// receive waits for the next frame on in and acknowledges it.
func receive(t *testing.T, in *ps.Sink) ([]byte, netdev.Offload) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if p, ok := in.TryGet(); ok {
			f := bytes.Clone(in.Payload(p))
			in.TryAck(p)
			in.Wakeup()
			return f, p.Offload()
		}
	}
	t.Fatal("no frame within 5 s")
	return nil, netdev.Offload{}
}

// diskFiles writes the capture file as the supervisor would, in the test's process.
type diskFiles struct{ t *testing.T }

func (d diskFiles) WriteFile(path string, data []byte) {
	if err := os.WriteFile(path, data, 0o644); err != nil {
		d.t.Error(err)
	}
}

func (d diskFiles) AppendFile(path string, data []byte) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err == nil {
		_, err = f.Write(data)
		f.Close()
	}
	if err != nil {
		d.t.Error(err)
	}
}

type dump struct {
	h        *Handler
	log      *testutil.SyncBuffer
	client   *ps.Client // the downlink's client (a vm, say)
	upstream *ps.Server // the uplink's server (a router, say)
}

// start runs nic_dump with cfg (XML), its downlink served to a client and its uplink open.
func start(t *testing.T, cfg string) *dump {
	t.Helper()
	d := &dump{log: &testutil.SyncBuffer{}}
	d.h = NewHandler(component.New(component.Spec{}, slog.New(slog.DiscardHandler), nil), d.log)
	d.h.files = diskFiles{t}
	n, err := config.ParseXML("test", []byte(cfg))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.h.Configure(nicdumpConfig(t, n)); err != nil {
		t.Fatal(err)
	}
	var srv *ps.Server
	if d.client, srv, err = ps.NewHeapSession(ps.DefaultConfig(), ps.DefaultConfig()); err != nil {
		t.Fatal(err)
	}
	if err := d.h.Open(&component.Session{ID: 1, Service: "Nic", Label: "vm -> ", Server: srv, Role: component.Server}); err != nil {
		t.Fatal(err)
	}
	if d.h.upReq == 0 {
		t.Fatal("no uplink requested for the downlink")
	}
	var cl *ps.Client
	if cl, d.upstream, err = ps.NewHeapSession(ps.DefaultConfig(), ps.DefaultConfig()); err != nil {
		t.Fatal(err)
	}
	if err := d.h.Open(&component.Session{ID: 2, Request: d.h.upReq, Service: "Nic", Label: "nic_dump -> ", Client: cl, Role: component.Client}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.h.Stop()
		d.client.Close()
		srv.Close()
		cl.Close()
		d.upstream.Close()
	})
	return d
}

// Every frame passes unchanged both ways, offload metadata included, each logged in Genode's
// format with the side it came from, and written to the capture file.
func TestFramesPassBothWaysLoggedAndCaptured(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dump.pcap")
	d := start(t, `<config uplink="router" downlink="vm" udp="all" pcap="`+path+`"/>`)
	gso := netdev.Offload{Flags: netdev.OffloadNeedsCsum, GSOType: netdev.GSOTCPv4, HdrLen: 54, GSOSize: 1448, CsumStart: 34, CsumOffset: 16}
	for i := range 3 {
		f := udpFrame(uint16(5000 + i))
		send(t, d.client.TX, f, gso)
		got, o := receive(t, d.upstream.TX)
		if !bytes.Equal(got, f) || o != gso {
			t.Fatalf("up: got %x %+v, sent %x %+v", got, o, f, gso)
		}
		back := udpFrame(uint16(6000 + i))
		send(t, d.upstream.RX, back, netdev.Offload{})
		if got, _ := receive(t, d.client.RX); !bytes.Equal(got, back) {
			t.Fatalf("down: got %x, sent %x", got, back)
		}
	}
	d.h.Stop() // flushes and closes the capture file
	lines := strings.Split(strings.TrimSuffix(d.log.String(), "\n"), "\n")
	want := []string{
		"(router <- vm) ETH 02:00:00:00:00:01 > 02:02:02:02:02:00  IPV4 10.0.1.2 > 10.0.2.2  UDP src 5000 dst 7 len 12 crc 0",
		"(vm <- router) ETH 02:00:00:00:00:01 > 02:02:02:02:02:00  IPV4 10.0.1.2 > 10.0.2.2  UDP src 6000 dst 7 len 12 crc 0",
	}
	if len(lines) != 6 || lines[0] != want[0] || lines[1] != want[1] {
		t.Errorf("log:\n%s\nwant 6 lines beginning\n%s", d.log.String(), strings.Join(want, "\n"))
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := pcap.ReadFile(b)
	if err != nil || len(recs) != 6 {
		t.Fatalf("capture: %d records, %v", len(recs), err)
	}
	if !bytes.Equal(recs[0].Frame, udpFrame(5000)) || !bytes.Equal(recs[5].Frame, udpFrame(6002)) {
		t.Errorf("capture's first and last frames: %x, %x", recs[0].Frame, recs[5].Frame)
	}
}

// echo6Frame is an Ethernet frame with an ICMPv6 echo request from 2001:db8::1 to
// 2001:db8::2, id 1 seq 2.
func echo6Frame() []byte {
	src, dst := netip.MustParseAddr("2001:db8::1").As16(), netip.MustParseAddr("2001:db8::2").As16()
	f := make([]byte, header.EthLen+header.IPv6Len+header.ICMPv6Len+4)
	e := header.Eth(f)
	e.SetDst(header.MAC{2, 2, 2, 2, 2, 0})
	e.SetSrc(header.MAC{2, 0, 0, 0, 0, 1})
	e.SetType(header.EtherTypeIPv6)
	header.PutIPv6(e.Payload(), header.ICMPv6Len+4, header.ProtoICMPv6, 64, src, dst)
	header.PutICMPv6Echo(e.Payload()[header.IPv6Len:], header.ICMPv6EchoRequest, 1, 2, src, dst)
	return f
}

// An IPv6 frame is logged as IPv6 with ipv6= and icmp6=, and without them by its Ethernet
// header alone, as Genode's nic_dump logs it.
func TestIPv6IsLoggedWithItsStyles(t *testing.T) {
	for cfg, want := range map[string]string{
		`<config uplink="router" downlink="vm" ipv6="default" icmp6="default"/>`: "(router <- vm) ETH 02:00:00:00:00:01 > 02:02:02:02:02:00  IPV6 2001:db8::1 > 2001:db8::2  ICMP6 echo request id 1 seq 2\n",
		`<config uplink="router" downlink="vm"/>`:                                "(router <- vm) ETH 02:00:00:00:00:01 > 02:02:02:02:02:00 \n",
	} {
		d := start(t, cfg)
		send(t, d.client.TX, echo6Frame(), netdev.Offload{})
		receive(t, d.upstream.TX)
		d.h.Stop() // the log of every frame passed is written
		if got := d.log.String(); got != want {
			t.Errorf("%s logged\n%q, want\n%q", cfg, got, want)
		}
	}
}

// Frames from the client while the uplink is not open go nowhere: dropped and counted.
func TestFramesWithoutUplinkAreDropped(t *testing.T) {
	d := start(t, `<config default="no"/>`)
	d.h.Close(d.h.up)
	send(t, d.client.TX, udpFrame(1), netdev.Offload{})
	for deadline := time.Now().Add(5 * time.Second); d.h.toUplink.Load() != 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("uplink_dropped %d, want 1", d.h.toUplink.Load())
		}
	}
	if d.log.String() != "" {
		t.Errorf("default=\"no\" logged %q", d.log.String())
	}
}

// A second client is refused: nic_dump, as Genode's, serves one.
func TestSecondClientIsRefused(t *testing.T) {
	d := start(t, `<config/>`)
	cl, srv, err := ps.NewHeapSession(ps.DefaultConfig(), ps.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	defer srv.Close()
	if err := d.h.Open(&component.Session{ID: 3, Service: "Nic", Label: "other -> ", Server: srv, Role: component.Server}); err == nil {
		t.Error("a second downlink was accepted")
	}
}

func TestStopEndsTheWire(t *testing.T) {
	before := runtime.NumGoroutine()
	d := start(t, `<config/>`)
	testutil.Stops(t, d.h.Stop, before)
}

// A pass of the wire, logging and capturing, allocates nothing per frame.
func TestWirePassAllocatesNothing(t *testing.T) {
	down, downSrv, err := ps.NewHeapSession(ps.DefaultConfig(), ps.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	upCl, up, err := ps.NewHeapSession(ps.DefaultConfig(), ps.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { down.Close(); downSrv.Close(); upCl.Close(); up.Close() }()
	var log, capture bytes.Buffer
	w := &wire{
		down: side{name: "downlink", in: downSrv.TX, out: downSrv.RX, dropped: new(atomic.Uint64)},
		up:   side{name: "uplink", in: upCl.RX, out: upCl.TX, dropped: new(atomic.Uint64)},
		cfg:  allStyles, log: &log, capture: &capture, timing: header.NewTiming(time.Now()),
	}
	f := udpFrame(1)
	round := func() {
		for range 8 {
			send(t, down.TX, f, netdev.Offload{})
		}
		w.pass(&w.down, &w.up)
		for {
			p, ok := up.TX.TryGet()
			if !ok {
				break
			}
			up.TX.TryAck(p)
		}
		up.TX.Wakeup()
		log.Reset()
		capture.Reset()
		w.flush()
	}
	if a := testing.AllocsPerRun(200, round); a != 0 {
		t.Errorf("%v allocations per round of 8 frames", a)
	}
}

var allStyles = header.LogConfig{Eth: header.StyleAll, ARP: header.StyleAll, IPv4: header.StyleAll, DHCP: header.StyleAll,
	UDP: header.StyleAll, ICMP: header.StyleAll, TCP: header.StyleAll}

// A changed config applies while frames flow: a new pcap path starts a new capture file, and
// the frames before stay in the old one.
func TestReconfigureStartsANewCaptureFile(t *testing.T) {
	dir := t.TempDir()
	first, second := filepath.Join(dir, "1.pcap"), filepath.Join(dir, "2.pcap")
	d := start(t, `<config default="no" pcap="`+first+`"/>`)
	send(t, d.client.TX, udpFrame(1), netdev.Offload{})
	receive(t, d.upstream.TX)
	n, err := config.ParseXML("test", []byte(`<config default="no" pcap="`+second+`"/>`))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.h.Configure(nicdumpConfig(t, n)); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		send(t, d.client.TX, udpFrame(uint16(2+i)), netdev.Offload{})
		receive(t, d.upstream.TX)
	}
	d.h.Stop()
	for path, want := range map[string]int{first: 1, second: 2} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if recs, err := pcap.ReadFile(b); err != nil || len(recs) != want {
			t.Errorf("%s: %d records (%v), want %d", filepath.Base(path), len(recs), err, want)
		}
	}
}

// nicdumpConfig is n as the table's Parse reads it.
func nicdumpConfig(t *testing.T, n *config.Node) nicdump.Config {
	t.Helper()
	cfg, err := nicdump.ParseConfig(n, "")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
