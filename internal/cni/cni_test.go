package cni

import (
	"encoding/json"
	"errors"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/nicstack/nicstack/internal/testutil"
)

// conf is a network config as a runtime hands it to the plugin, with extra fields merged in.
func conf(extra string) []byte {
	base := `{"cniVersion": "1.1.0", "name": "nicstack", "type": "nicstack-cni", "run": "node", "label": "pod"`
	if extra != "" {
		base += ", " + extra
	}
	return []byte(base + "}")
}

const static = `"ipam": {"type": "static", "addresses": [{"address": "10.0.2.10/24", "gateway": "10.0.2.1"}], "routes": [{"dst": "0.0.0.0/0"}], "dns": {"nameservers": ["10.0.2.1"]}}`

func TestParseNetConf(t *testing.T) {
	c, err := ParseNetConf(conf(static))
	if err != nil {
		t.Fatal(err)
	}
	if c.Run != "node" || c.Label != "pod" || c.Guest != "netns" || c.IPAM.DNS.Nameservers[0] != "10.0.2.1" {
		t.Errorf("parsed %+v", c)
	}
	st, err := c.Static("")
	if err != nil || st.Address != netip.MustParsePrefix("10.0.2.10/24") || st.Gateway != netip.MustParseAddr("10.0.2.1") {
		t.Errorf("static %+v, %v", st, err)
	}
	// CNI_ARGS give each pod its own address, as for the static IPAM plugin.
	st, err = c.Static("IgnoreUnknown=1;K8S_POD_NAME=a;IP=10.0.2.11/24;GATEWAY=10.0.2.1")
	if err != nil || st.Address != netip.MustParsePrefix("10.0.2.11/24") {
		t.Errorf("static from CNI_ARGS %+v, %v", st, err)
	}
	// No ipam, or type dhcp: a lease, unless CNI_ARGS give the pod its address.
	for _, ipam := range []string{"", `"ipam": {"type": "dhcp", "routes": [{"dst": "0.0.0.0/0"}]}`} {
		c, err := ParseNetConf(conf(ipam))
		if err != nil {
			t.Fatal(err)
		}
		if _, leased, err := address(c, "K8S_POD_NAME=a"); !leased || err != nil {
			t.Errorf("%s: leased %v, %v", ipam, leased, err)
		}
		if st, leased, err := address(c, "IP=10.0.2.11/24;GATEWAY=10.0.2.1"); leased || err != nil || st.Address != netip.MustParsePrefix("10.0.2.11/24") {
			t.Errorf("%s with CNI_ARGS IP=: %+v, leased %v, %v", ipam, st, leased, err)
		}
	}
	if c, err := ParseNetConf([]byte(`{"name": "net", "guest": "vhost-user"}`)); err != nil || c.Guest != "vhost-user" {
		t.Errorf("a vhost-user pod without ipam: %+v, %v", c, err)
	}
	if c, err := ParseNetConf([]byte(`{"name": "net", "ipam": {"type": "static"}}`)); err != nil || c.Label != "net" {
		t.Errorf("the label defaults to the network's name: %+v, %v", c, err)
	}

	for _, tc := range []struct {
		conf, args string
		code       uint
		msg        string
	}{
		{`{"name": "nicstack",`, "", types.ErrDecodingFailure, "decoding"},
		{string(conf(`"ipam": {"type": "static", "routes": [{"dst": "nonsense"}]}`)), "", types.ErrDecodingFailure, "decoding"},
		{string(conf(`"guest": "embedded", ` + static)), "", types.ErrInvalidNetworkConfig, `guest "embedded"`},
		{string(conf(`"guest": "vhost-user", ` + static)), "", types.ErrInvalidNetworkConfig, "leave ipam out"},
		{string(conf(`"ipam": {"type": "dhcp", "addresses": [{"address": "10.0.2.10/24"}]}`)), "", types.ErrInvalidNetworkConfig, "addresses are for type static"},
		{string(conf(`"ipam": {"type": "dhcp", "routes": [{"dst": "10.9.0.0/16"}]}`)), "", types.ErrUnsupportedField, "only the default route"},
		{string(conf(`"ipam": {"type": "host-local"}`)), "", types.ErrInvalidNetworkConfig, `ipam type "host-local"`},
		{string(conf(`"ipam": {"type": "static"}`)), "", types.ErrInvalidNetworkConfig, "no address"},
		{string(conf(`"ipam": {"type": "static", "addresses": [{"address": "10.0.2.10"}]}`)), "", types.ErrInvalidNetworkConfig, "want a CIDR"},
		{string(conf(`"ipam": {"type": "static", "addresses": [{"address": "8.8.8.8/24"}]}`)), "", types.ErrInvalidNetworkConfig, "private range"},
		{string(conf(`"ipam": {"type": "static", "addresses": [{"address": "fd00::2/64"}]}`)), "", types.ErrUnsupportedField, "IPv4 only"},
		{string(conf(`"ipam": {"type": "static", "addresses": [{"address": "10.0.2.10/24"}, {"address": "10.0.2.11/24"}]}`)), "", types.ErrUnsupportedField, "one address per pod"},
		{string(conf(`"ipam": {"type": "static", "addresses": [{"address": "10.0.2.10/24", "gateway": "10.0.3.1"}]}`)), "", types.ErrInvalidNetworkConfig, "ipam gateway"},
		{string(conf(`"ipam": {"type": "static", "addresses": [{"address": "10.0.2.10/24"}], "routes": [{"dst": "0.0.0.0/0"}]}`)), "", types.ErrInvalidNetworkConfig, "needs the address's gateway"},
		{string(conf(`"ipam": {"type": "static", "addresses": [{"address": "10.0.2.10/24", "gateway": "10.0.2.1"}], "routes": [{"dst": "10.9.0.0/16"}]}`)), "", types.ErrUnsupportedField, "only the default route"},
		{string(conf(`"ipam": {"type": "static"}`)), "GATEWAY=10.0.2.1", types.ErrInvalidEnvironmentVariables, "GATEWAY= without IP="},
		{string(conf(`"ipam": {"type": "static"}`)), "IP", types.ErrInvalidEnvironmentVariables, "KEY=VALUE"},
	} {
		c, err := ParseNetConf([]byte(tc.conf))
		if err == nil {
			_, _, err = address(c, tc.args)
		}
		var e *types.Error
		if !errors.As(err, &e) || e.Code != tc.code || !strings.Contains(e.Msg+e.Details, tc.msg) {
			t.Errorf("%s (CNI_ARGS %q): %v, want code %d with %q", tc.conf, tc.args, err, tc.code, tc.msg)
		}
	}
}

func TestAttachmentName(t *testing.T) {
	a := AttachmentName("0123456789abcdef0123456789abcdef", "eth0")
	rule := regexp.MustCompile(`^[A-Za-z0-9_]{1,16}$`) // supervisor's attachedNetns
	switch {
	case !rule.MatchString(a):
		t.Errorf("%q is no netns guest's name", a)
	case a != AttachmentName("0123456789abcdef0123456789abcdef", "eth0"):
		t.Error("not deterministic")
	case a == AttachmentName("0123456789abcdef0123456789abcdef", "eth1"), a == AttachmentName("other", "eth0"):
		t.Error("two interfaces share a name")
	}
}

func TestParseDefaultRoute(t *testing.T) {
	table := "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n" +
		"eth0\t0002000A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n" +
		"eth0\t00000000\t0102000A\t0003\t0\t0\t0\t00000000\t0\t0\t0\n"
	if gw, err := parseDefaultRoute(strings.NewReader(table), "eth0"); err != nil || gw != netip.MustParseAddr("10.0.2.1") {
		t.Errorf("gateway %v, %v; want 10.0.2.1", gw, err)
	}
	if _, err := parseDefaultRoute(strings.NewReader(table), "eth1"); err == nil {
		t.Error("a default route through eth1")
	}
}

// fakeRun listens where the run "node" would and counts who asks.
func fakeRun(t *testing.T) *atomic.Int32 {
	t.Helper()
	base := "/run/nicstack"
	if os.Geteuid() != 0 {
		tmp := t.TempDir()
		t.Setenv("XDG_RUNTIME_DIR", tmp)
		base = filepath.Join(tmp, "nicstack")
	}
	dir := filepath.Join(base, "node")
	if _, err := os.Stat(dir); err == nil {
		t.Skipf("%s exists: a run named node is up here", dir)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	l, err := net.Listen("unix", filepath.Join(dir, "control.sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var asked atomic.Int32
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			asked.Add(1)
			c.Close()
		}
	}()
	return &asked
}

// A broken config is refused before the plugin asks the run for anything: nothing is made.
func TestAddRefusesBeforeAsking(t *testing.T) {
	asked := fakeRun(t)
	netns := filepath.Join("/var/run/netns", "nicstack-cni-test-none")
	for _, tc := range []struct {
		args skel.CmdArgs
		code uint
	}{
		{skel.CmdArgs{StdinData: conf(`"guest": "embedded", ` + static)}, types.ErrInvalidNetworkConfig},
		{skel.CmdArgs{StdinData: conf(`"ipam": {"type": "static"}`)}, types.ErrInvalidNetworkConfig},
		{skel.CmdArgs{StdinData: conf(static), Netns: "/proc/1/ns/net"}, types.ErrInvalidEnvironmentVariables},
		{skel.CmdArgs{StdinData: conf(static), Netns: netns}, types.ErrUnknownContainer},
	} {
		tc.args.ContainerID, tc.args.IfName = "ctr", "eth0"
		err := Add(&tc.args)
		var e *types.Error
		if !errors.As(err, &e) || e.Code != tc.code {
			t.Errorf("ADD %s in %q: %v, want code %d", tc.args.StdinData, tc.args.Netns, err, tc.code)
		}
	}
	if n := asked.Load(); n != 0 {
		t.Errorf("the plugin asked the run %d times for refused configs", n)
	}
}

// The built plugin speaks through skel: VERSION lists the spec versions, and an error is CNI
// error JSON on stdout with exit status 1.
func TestPluginBinary(t *testing.T) {
	bin := testutil.Binary(t, "github.com/nicstack/nicstack/cmd/nicstack-cni")
	run := func(env []string, stdin string) (map[string]any, error) {
		cmd := exec.Command(bin)
		cmd.Env = append(env, "CNI_PATH=/opt/cni/bin")
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.Output()
		var got map[string]any
		if jerr := json.Unmarshal(out, &got); jerr != nil {
			t.Fatalf("%v: stdout %q is no JSON: %v", env, out, jerr)
		}
		return got, err
	}
	got, err := run([]string{"CNI_COMMAND=VERSION"}, "")
	if err != nil || !strings.Contains(strings.Join(strings.Fields(jsonText(got["supportedVersions"])), ""), `["1.0.0","1.1.0"]`) {
		t.Errorf("VERSION: %v, %v", got, err)
	}
	env := []string{"CNI_COMMAND=ADD", "CNI_CONTAINERID=ctr", "CNI_NETNS=/var/run/netns/x", "CNI_IFNAME=eth0"}
	got, err = run(env, string(conf(`"guest": "embedded", `+static)))
	if code, _ := got["code"].(float64); err == nil || code != float64(types.ErrInvalidNetworkConfig) {
		t.Errorf("ADD with a broken config: %v, %v; want code 7 and a failure", got, err)
	}
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
