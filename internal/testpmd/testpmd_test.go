package testpmd

import (
	"context"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nicstack/nicstack/internal/testutil"
)

// What testpmd 22.11 prints for "show port xstats all" of a net_vhost port (ethdev's
// per-queue counters beside the driver's) and a net_virtio one (the driver's only), with an
// EAL log line between.
const xstats = `
###### NIC extended statistics for port 0 
rx_good_packets: 1389312
tx_good_packets: 0
rx_good_bytes: 88915968
tx_good_bytes: 0
rx_missed_errors: 3
rx_errors: 0
tx_errors: 0
rx_mbuf_allocation_errors: 0
rx_q0_packets: 1389312
rx_q0_bytes: 88915968
rx_q0_errors: 0
tx_q0_packets: 0
tx_q0_bytes: 0
rx_q0_good_packets: 1389300
rx_q0_good_bytes: 88915968
rx_q0_size_64_packets: 1389312
VHOST_CONFIG: (/tmp/a.sock) read message VHOST_USER_GET_VRING_BASE
###### NIC extended statistics for port 1 
rx_good_packets: 0
tx_good_packets: 20736
rx_good_bytes: 0
tx_good_bytes: 1327104
rx_missed_errors: 0
rx_errors: 0
tx_errors: 0
rx_mbuf_allocation_errors: 0
tx_q0_good_packets: 20000
tx_q0_good_bytes: 1280000
tx_q1_good_packets: 736
tx_q1_good_bytes: 47104
`

func TestParseXstats(t *testing.T) {
	ports, err := ParseXstats(xstats)
	if err != nil {
		t.Fatal(err)
	}
	want := []PortStats{
		{Port: 0, RX: Counts{1389312, 88915968}, Missed: 3,
			Queues: []Queue{{RX: Counts{1389300, 88915968}}}}, // the driver's good_ counters win
		{Port: 1, TX: Counts{20736, 1327104},
			Queues: []Queue{{TX: Counts{20000, 1280000}}, {TX: Counts{736, 47104}}}},
	}
	if !reflect.DeepEqual(ports, want) {
		t.Errorf("got  %+v\nwant %+v", ports, want)
	}
	d := ports[1].Sub(PortStats{Port: 1, TX: Counts{736, 47104}, Queues: []Queue{{TX: Counts{736, 47104}}}})
	if d.TX != (Counts{20000, 1280000}) || d.Queues[0].TX != (Counts{19264, 1232896}) || d.Queues[1].TX != (Counts{736, 47104}) {
		t.Errorf("interval: %+v", d)
	}
	if _, err := ParseXstats("testpmd: no ports\n"); err == nil {
		t.Error("output without statistics parsed")
	}
	if _, err := ParseXstats("###### NIC extended statistics for port 0\nrx_q99999_packets: 1\n"); err == nil ||
		!strings.Contains(err.Error(), "rx_q99999_packets") {
		t.Errorf("absurd queue index: %v, want an error naming the counter", err)
	}
}

func TestParseForwardStats(t *testing.T) {
	s := `Telling cores to stop...
  ---------------------- Forward statistics for port 0  ----------------------
  RX-packets: 1389312        RX-dropped: 0             RX-total: 1389312
  TX-packets: 0              TX-dropped: 0             TX-total: 0
  ----------------------------------------------------------------------------

  ---------------------- Forward statistics for port 1  ----------------------
  RX-packets: 0              RX-dropped: 0             RX-total: 0
  TX-packets: 20736          TX-dropped: 1368576       TX-total: 1389312
  ----------------------------------------------------------------------------

  +++++++++++++++ Accumulated forward statistics for all ports+++++++++++++++
  RX-packets: 1389312        RX-dropped: 0             RX-total: 1389312
  TX-packets: 20736          TX-dropped: 1368576       TX-total: 1389312
Done.
`
	want := []ForwardStats{{Port: 0, RX: 1389312}, {Port: 1, TX: 20736, TXDropped: 1368576}}
	if got := ParseForwardStats(s); !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func TestArgs(t *testing.T) {
	mac, _ := net.ParseMAC("02:00:00:00:00:01")
	peer, _ := net.ParseMAC("02:00:00:00:00:02")
	c := Config{CPUs: []int{1}, HugeDir: "/h", Forward: TxOnly, Queues: 2,
		VirtioUser: []VirtioUser{{Path: "/s", Queues: 2, MAC: mac, Mergeable: true}},
		TxPkts:     Segments(9000, 2048), EthPeer: peer,
		TxIP: [2]netip.Addr{netip.MustParseAddr("10.0.1.2"), netip.MustParseAddr("10.0.2.2")}}
	got := strings.Join(c.Args("p"), " ")
	for _, w := range []string{
		"--lcores 0@1,1@1 ", "--file-prefix p ", "--huge-dir /h ",
		"--vdev net_virtio_user0,path=/s,queues=2,packed_vq=0,mrg_rxbuf=1,in_order=0,mac=02:00:00:00:00:01 ",
		"-- -i --forward-mode=txonly --nb-cores=1 --rxq=2 --txq=2 ",
		"--txpkts=2048,2048,2048,2048,808", "--eth-peer=0,02:00:00:00:00:02", "--tx-ip=10.0.1.2,10.0.2.2",
	} {
		if !strings.Contains(got, w) {
			t.Errorf("args %q lack %q", got, w)
		}
	}
	sw := Config{CPUs: []int{0, 1}, Cores: 2, HugeDir: "/h", Forward: IO,
		Vhost: []Vhost{{Iface: "/a"}, {Iface: "/b"}}}
	got = strings.Join(sw.Args("p"), " ")
	for _, w := range []string{"--lcores 0@0,1@0,2@1 ", "--vdev net_vhost0,iface=/a,queues=1 --vdev net_vhost1,iface=/b,queues=1 ", "--nb-cores=2"} {
		if !strings.Contains(got, w) {
			t.Errorf("switch args %q lack %q", got, w)
		}
	}
}

// DPDK's vhost switch between two virtio-user testpmds: frames the generator sends arrive
// at the sink, counted on every port and queue on the way, and nothing is left behind: no
// process, no EAL file, no hugetlbfs, no hugepages.
func TestSwitchBetweenFrontEnds(t *testing.T) {
	testutil.RequireRoot(t)
	if err := Installed(); err != nil {
		testutil.SkipOrFail(t, err.Error())
	}
	before, err := readCount(nrHugepages)
	if err != nil {
		testutil.SkipOrFail(t, err.Error())
	}
	h, err := ReserveHugepages(3 * 64 / 2)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		dir := h.Dir
		if err := h.Release(); err != nil {
			t.Error(err)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("hugetlbfs folder %s left: %v", dir, err)
		}
		if after, _ := readCount(nrHugepages); after != before {
			t.Errorf("nr_hugepages %d after, %d before", after, before)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.sock"), filepath.Join(dir, "b.sock")
	sw, err := Start(ctx, Config{Name: "switch", CPUs: []int{0}, HugeDir: h.Dir, MemMB: 64, Forward: IO,
		Vhost: []Vhost{{Iface: a}, {Iface: b}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sw.Kill()
	sink, err := Start(ctx, Config{Name: "sink", CPUs: []int{1}, HugeDir: h.Dir, MemMB: 64, Forward: RxOnly,
		VirtioUser: []VirtioUser{{Path: b}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Kill()
	gen, err := Start(ctx, Config{Name: "gen", CPUs: []int{1}, HugeDir: h.Dir, MemMB: 64, Forward: TxOnly,
		TxPkts: []int{64}, VirtioUser: []VirtioUser{{Path: a}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer gen.Kill()
	for _, p := range []*Testpmd{sw, sink, gen} {
		if err := p.StartForwarding(); err != nil {
			t.Fatal(err)
		}
	}
	var got []PortStats
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if got, err = sink.Stats(); err != nil {
			t.Fatal(err)
		}
		if got[0].RX.Packets >= 1000 {
			break
		}
	}
	if len(got[0].Queues) != 1 || got[0].Queues[0].RX.Packets == 0 || got[0].RX.Bytes != 64*got[0].RX.Packets {
		t.Fatalf("the sink counted %+v; want 64-byte frames on queue 0", got)
	}
	for _, p := range []*Testpmd{gen, sw, sink} {
		if _, err := p.StopForwarding(); err != nil {
			t.Fatal(err)
		}
	}
	g, _ := gen.Stats()
	s, _ := sw.Stats()
	r, _ := sink.Stats()
	// Everything stopped: the switch passed on what it took from port 0 but what port 1's
	// ring refused, and the sink has what the switch passed.
	if s[0].RX.Packets > g[0].TX.Packets || s[1].TX.Packets != r[0].RX.Packets {
		t.Errorf("generator sent %d, switch took %d and passed %d, sink got %d",
			g[0].TX.Packets, s[0].RX.Packets, s[1].TX.Packets, r[0].RX.Packets)
	}
	t.Logf("generator sent %d, switch took %d and passed %d, sink got %d",
		g[0].TX.Packets, s[0].RX.Packets, s[1].TX.Packets, r[0].RX.Packets)
	for _, p := range []*Testpmd{gen, sink, sw} {
		if err := p.Quit(); err != nil {
			t.Error(err)
		}
		if _, err := os.Stat(filepath.Join(runtimeDir, p.prefix)); !os.IsNotExist(err) {
			t.Errorf("%s's EAL folder left: %v", p.Name, err)
		}
	}
	if left, _ := os.ReadDir(h.Dir); len(left) > 0 {
		t.Errorf("hugepage files left: %v", left)
	}
}
