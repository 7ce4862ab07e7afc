package guest

import (
	"strings"
	"testing"

	"github.com/nicstack/nicstack/runtime/config"
	"github.com/nicstack/nicstack/runtime/packetstream"
)

func TestParseConfig(t *testing.T) {
	for _, tc := range []struct {
		xml, err string
	}{
		{`<config guest="embedded" mtu="1500" iperf="-c 198.18.0.2 -R -t 10 -J"/>`, ""},
		{`<config address="198.18.0.2/24" iperf="-s" session="Uplink" uplink_mac="02:00:00:00:00:fe"/>`, ""},
		{`<config guest="netns" tap_address="10.0.1.2/24" exec="iperf3 -s"/>`, ""},
		{`<config guest="qemu"/>`, `guest="qemu"`},
		{`<config guest="vhost-user" socket="/run/nicstack/vm.sock"/>`, ""},
		{`<config guest="vhost-user" queues="16"/>`, ""},
		{`<config guest="vhost-user" queues="0"/>`, "queues=\"0\": want a vhost-user guest's queue pairs, 1 to 16"},
		{`<config guest="vhost-user" queues="17"/>`, "queues=\"17\""},
		{`<config guest="stream" queues="2"/>`, "queues="},
		{`<config mtu="100"/>`, "mtu=100"},
		{`<config session="Uplink"/>`, "uplink_mac"},
		{`<config iperf="-c"/>`, "iperf="},
		{`<config guest="netns"/>`, "tap_address"},
		{`<config iperf="-c 198.18.0.2" rr="-c 198.18.0.2 -l 1,1K -t 0.5"/>`, ""},
		{`<config rr="-c 198.18.0.2 -l 0"/>`, "rr="},
		{`<config rr="-c 198.18.0.2" rr_load_sec="5" rr_load_omit_sec="3"/>`, ""},
		{`<config iperf="-c 198.18.0.2" rr="-c 198.18.0.2" rr_load_sec="5"/>`, "without an iperf client"},
		{`<config rr="-s" rr_load_sec="5"/>`, "without an iperf client"},
		{`<config rr="-c 198.18.0.2" rr_load_sec="0"/>`, "rr_load_sec=0"},
		{`<config rr="-c 198.18.0.2" rr_load_sec="5" rr_load_omit_sec="61"/>`, "rr_load_omit_sec=61"},
		{`<config rr="-c 198.18.0.2" rr_load_omit_sec="3"/>`, "without rr_load_sec"},
		{`<config iperf="-c 198.18.0.2" iperf_start="2026-12-05T10:00:05.25Z"/>`, ""},
		{`<config iperf="-c 198.18.0.2" iperf_start="10:00"/>`, "RFC 3339"},
		{`<config iperf="-s" iperf_start="2026-12-05T10:00:05Z"/>`, "iperf client"},
		{`<config guest="netns" tap_address="10.0.1.2/24" rr="-s"/>`, "embedded guest only"},
		{`<config guest="netns" tap_address="10.0.1.2/24" ifname="eth0"/>`, ""},
		{`<config guest="netns" tap_address="10.0.1.2/24" ifname="a23456789012345"/>`, ""},
		{`<config guest="netns" tap_address="10.0.1.2/24" ifname="a234567890123456"/>`, "ifname="},
		{`<config guest="netns" tap_address="10.0.1.2/24" ifname=""/>`, "ifname="},
		{`<config guest="netns" tap_address="10.0.1.2/24" ifname="eth/0"/>`, "ifname="},
		{`<config guest="netns" tap_address="10.0.1.2/24" ifname=".."/>`, "ifname="},
		{`<config guest="embedded" ifname="eth0"/>`, "ifname="},
		{`<config guest="netns" tap_address="none"/>`, ""},
		{`<config guest="netns" tap_address="none" tap_gateway="10.0.1.1"/>`, "stays unconfigured"},
		{`<config address="198.18.0.2/24" iperf="-s -p 5201" iperf_servers="32"/>`, ""},
		{`<config address="198.18.0.2/24" iperf="-s" qdisc="fq_codel"/>`, ""},
		{`<config address="198.18.0.2/24" qdisc="none"/>`, ""},
		{`<config address="198.18.0.2/24" qdisc="fq_codel" tx_bql_limit_max="125000"/>`, ""},
		{`<config address="198.18.0.2/24" qdisc="fq_codel" tx_bql_limit_max="64K"/>`, ""},
		{`<config address="198.18.0.2/24" qdisc="fq_codel" tx_bql_limit_max="1ms"/>`, "vm.xml:1:50: tx_bql_limit_max=\"1ms\""},
		{`<config address="198.18.0.2/24" qdisc="fq_codel" tx_bql_limit_max="8G"/>`, "tx_bql_limit_max=\"8G\""},
		{`<config address="198.18.0.2/24" tx_bql_limit_max="125000"/>`, "tx_bql_limit_max: only with qdisc"},
		{`<config address="198.18.0.2/24" qdisc="pfifo"/>`, "qdisc=\"pfifo\""},
		{`<config guest="netns" tap_address="10.0.1.2/24" qdisc="fq_codel"/>`, "qdisc"},
		{`<config iperf="-c 198.18.0.2" iperf_servers="2"/>`, "iperf_servers"},
		{`<config address="198.18.0.2/24" iperf="-s" iperf_servers="0"/>`, "iperf_servers=0"},
		{`<config address="198.18.0.2/24" iperf="-s -p 65535" iperf_servers="2"/>`, "iperf_servers=2"},
		{`<config guest="netns" tap_address="10.0.1.2/24" iperf="-s" iperf_servers="2"/>`, "iperf_servers"},
		{`<config address="198.18.0.2/24" iperf="-s" rx_buf_size="12M" tx_buf_size="1600"/>`, ""},
		{`<config rx_buf_size="1599"/>`, "vm.xml:1:9: rx_buf_size="},
		{`<config tx_buf_size="200M"/>`, "tx_buf_size="},
		{`<config rx_buf_size="lots"/>`, "rx_buf_size"},
		{`<config guest="netns" tap_address="10.0.1.2/24" rx_buf_size="12M"/>`, "embedded guest's buffer"},
		{`<config address6="2001:db8::2/64" gateway6="fe80::1" iperf="-c 2001:db8:ffff::2 -6 -t 5"/>`, ""},
		{`<config gateway6="2001:db8::1" rr="-c 2001:db8:ffff::2 -6"/>`, ""},
		{`<config address6="10.0.1.2/24"/>`, "IPv6 prefix"},
		{`<config address6="fe80::2/64"/>`, "address6="},
		{`<config address6="ff02::2/64"/>`, "address6="},
		{`<config gateway6="ff02::2"/>`, "gateway6="},
		{`<config gateway6="10.0.1.1"/>`, "IPv6 address"},
		{`<config guest="netns" tap_address="10.0.1.2/24" address6="2001:db8::2/64"/>`, "tap_address6"},
		{`<config guest="netns" tap_address="10.0.1.2/24" tap_address6="2001:db8:1::2/64" tap_gateway6="fe80::1"/>`, ""},
		{`<config guest="netns" tap_address="10.0.1.2/24" tap_address6="2001:4860::2/64"/>`, "2001:db8::/32 or fd00::/8"},
		{`<config guest="netns" tap_address="10.0.1.2/24" tap_gateway6="::"/>`, "tap_gateway6="},
		{`<config tap_address6="fd00::2/64"/>`, "netns guest's"},
	} {
		n, err := config.Parse("vm.xml", []byte(tc.xml))
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := ParseConfig(n, "vm")
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.xml, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want one naming %q", tc.xml, err, tc.err)
		case tc.err != "" && !strings.Contains(err.Error(), "vm.xml:1:"):
			t.Errorf("%s: error %v does not name the file and line", tc.xml, err)
		case err == nil && len(cfg.MAC) != 6:
			t.Errorf("%s: no default MAC", tc.xml)
		}
	}
	n, _ := config.Parse("vm.xml", []byte(`<config guest="netns" tap_address="10.0.1.2/24" tap_address6="fd00:1::2/64" tap_gateway6="fd00:1::1"/>`))
	cfg, err := ParseConfig(n, "vm")
	if args := cfg.TapArgs(); err != nil || args["address6"] != "fd00:1::2/64" || args["gateway6"] != "fd00:1::1" {
		t.Errorf("TapArgs %v, %v", args, err)
	}
	a, b := defaultMAC("vm"), defaultMAC("vm2")
	if a.String() == b.String() || a[0]&2 == 0 {
		t.Errorf("default MACs %v, %v: want distinct, locally administered", a, b)
	}
}

// rx_buf_size and tx_buf_size size an embedded guest's streams: that buffer, rounded down to
// whole blocks, a descriptor per block; Genode's default without them.
func TestBufSize(t *testing.T) {
	for _, tc := range []struct {
		xml    string
		tx, rx packetstream.Config
	}{
		{`<config/>`, packetstream.DefaultConfig(), packetstream.DefaultConfig()},
		{`<config rx_buf_size="12M" tx_buf_size="4000"/>`,
			packetstream.Config{QueueSize: 2, BulkSize: 2 * packetstream.BlockSize},
			packetstream.Config{QueueSize: 8192, BulkSize: 7864 * packetstream.BlockSize}},
	} {
		n, err := config.Parse("vm.xml", []byte(tc.xml))
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := ParseConfig(n, "vm")
		if err != nil {
			t.Fatal(err)
		}
		if cfg.TX != tc.tx || cfg.RX != tc.rx || cfg.RX.Validate() != nil {
			t.Errorf("%s: tx %+v rx %+v, want %+v %+v", tc.xml, cfg.TX, cfg.RX, tc.tx, tc.rx)
		}
	}
}

// TestQdiscLimitMax: qdisc="fq_codel" caps its byte limit at DefaultTxBQLLimitMax unless
// tx_bql_limit_max says otherwise (0: no cap); without the qdisc there is nothing to cap.
func TestQdiscLimitMax(t *testing.T) {
	for xml, want := range map[string]uint32{
		`<config qdisc="fq_codel"/>`:                         DefaultTxBQLLimitMax,
		`<config qdisc="fq_codel" tx_bql_limit_max="0"/>`:    0,
		`<config qdisc="fq_codel" tx_bql_limit_max="256K"/>`: 256 << 10,
		`<config qdisc="none"/>`:                             0,
	} {
		n, err := config.Parse("vm.xml", []byte(xml))
		if err != nil {
			t.Fatal(err)
		}
		if cfg, err := ParseConfig(n, "vm"); err != nil || cfg.TxBQLLimitMax != want {
			t.Errorf("%s: TxBQLLimitMax %d, %v; want %d", xml, cfg.TxBQLLimitMax, err, want)
		}
	}
}
