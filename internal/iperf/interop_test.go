package iperf

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nicstack/nicstack/internal/testutil"
)

// The interop tests run every option both ways against the real iperf3: its client against our
// server, our client against its server, and, as the reference, its client against its server.
// Each side's -J output must hold the same set of keys as the reference's, and each side's text
// the same lines, numbers aside.

// interopCase is one iperf3 command line (after -c and -p), and what else to check of the
// client's JSON beyond the keys and the summaries' times.
type interopCase struct {
	name  string
	args  []string
	text  bool // compare the text output too
	check func(client map[string]any) error
	// quiet runs the case before the others, away from their TCP streams that take all the
	// CPU there is: what its check measures needs the host's attention.
	quiet bool
}

var interopCases = []interopCase{
	{name: "tcp", args: []string{"-t", "1"}, text: true},
	{name: "reverse", args: []string{"-t", "1", "-R"}, text: true},
	// The other TCP cases hold their rate, so that the host keeps time for all the tests
	// that run at once.
	{name: "parallel", args: []string{"-t", "1", "-P", "4", "-b", "500M"}, text: true},
	{name: "bidir", args: []string{"-t", "1", "--bidir", "-b", "1G"}, text: true},
	{name: "udp", args: []string{"-t", "2", "-u", "-b", "100M"}, text: true, check: checkUDPRate(100e6), quiet: true},
	{name: "udp-reverse", args: []string{"-t", "2", "-u", "-b", "100M", "-R"}, text: true, check: checkUDPRate(100e6), quiet: true},
	// A TCP -b with -R or --bidir reaches the sender on the server's side in the test's
	// parameters: the server paces (bench iperf --rate relies on it).
	{name: "reverse-rate", args: []string{"-t", "2", "-R", "-b", "200M"}, check: checkTCPRate(200e6), quiet: true},
	{name: "bidir-rate", args: []string{"-t", "2", "--bidir", "-b", "200M"}, check: checkTCPRate(200e6), quiet: true},
	{name: "udp-bidir", args: []string{"-t", "1", "-u", "-b", "10M", "--bidir", "-P", "2"}, text: true},
	{name: "udp-64bit", args: []string{"-t", "1", "-u", "--udp-counters-64bit", "-l", "1400"}},
	{name: "omit", args: []string{"-t", "1", "-O", "1", "-b", "1G"}, text: true, check: checkOmitted},
	{name: "server-output", args: []string{"-t", "1", "--get-server-output", "-b", "1G"}, text: true},
	{name: "window", args: []string{"-t", "1", "-w", "256K", "-b", "1G"}, check: checkStart("sock_bufsize", 262144)},
	{name: "mss", args: []string{"-t", "1", "-M", "1000", "-b", "1G"}, check: checkStart("tcp_mss", 1000)},
	{name: "congestion", args: []string{"-t", "1", "-C", "reno", "-b", "1G"}, check: checkCongestion("reno")},
	{name: "zerocopy", args: []string{"-t", "1", "-Z", "-b", "1G"}},
	{name: "bytes", args: []string{"-n", "50M"}, check: checkBytes(50 << 20)},
	{name: "blocks", args: []string{"-k", "400", "-l", "64K"}, check: checkBytes(400 * 64 << 10)},
	{name: "length", args: []string{"-t", "1", "-l", "16K", "-b", "1G"}, check: checkStart("test_start.blksize", 16384)},
	{name: "interval", args: []string{"-t", "1", "-i", "0.5", "-f", "m", "-b", "1G"}, text: true},
}

// pairing is who plays client and server in one run.
type pairing int

const (
	reference pairing = iota // iperf3 against iperf3
	ourServer                // iperf3's client against our server
	ourClient                // our client against iperf3's server
)

func (p pairing) String() string {
	return [...]string{"iperf3 -> iperf3", "iperf3 -> ours", "ours -> iperf3"}[p]
}

// run is one test's outputs: the client's and the server's.
type run struct {
	client, server string
	err            error
}

func TestInteropWithIperf3(t *testing.T) {
	testutil.RequireCommand(t, "iperf3")
	type key struct {
		c    int
		p    pairing
		json bool
	}
	runs := make(map[key]run)
	var mu sync.Mutex
	slots := make(chan struct{}, 6) // enough to finish in seconds, few enough to measure something
	for _, quiet := range []bool{true, false} {
		var wg sync.WaitGroup
		for ci, c := range interopCases {
			for _, asJSON := range []bool{true, false} {
				if c.quiet != quiet || (!asJSON && !c.text) {
					continue
				}
				for _, p := range []pairing{reference, ourServer, ourClient} {
					wg.Add(1)
					go func() {
						defer wg.Done()
						slots <- struct{}{}
						defer func() { <-slots }()
						r := runPairing(p, loopback4, c.args, asJSON)
						mu.Lock()
						runs[key{ci, p, asJSON}] = r
						mu.Unlock()
					}()
				}
			}
		}
		wg.Wait()
	}

	for ci, c := range interopCases {
		t.Run(c.name, func(t *testing.T) {
			for _, asJSON := range []bool{true, false} {
				if !asJSON && !c.text {
					continue
				}
				ref := runs[key{ci, reference, asJSON}]
				if ref.err != nil {
					t.Fatalf("%v: %v\nclient:\n%s\nserver:\n%s", reference, ref.err, ref.client, ref.server)
				}
				for _, p := range []pairing{ourServer, ourClient} {
					problems := c.verify(ref, runs[key{ci, p, asJSON}], asJSON)
					if len(problems) > 0 {
						// Once more: spans and rates need a host that keeps time, and a busy
						// one may not have. What is wrong with our side is wrong again.
						t.Logf("%v, once more after: %s", p, strings.Join(problems, "; "))
						problems = c.verify(ref, runPairing(p, loopback4, c.args, asJSON), asJSON)
					}
					for _, pr := range problems {
						t.Errorf("%v: %s", p, pr)
					}
				}
			}
		})
	}
}

// interopCases6 run over IPv6 on ::1 with -6, both directions, TCP and UDP.
var interopCases6 = []interopCase{
	{name: "tcp6", args: []string{"-6", "-t", "1", "-b", "1G"}, text: true, check: checkHosts(loopback6)},
	{name: "reverse6", args: []string{"-6", "-t", "1", "-R", "-b", "1G"}, text: true, check: checkHosts(loopback6)},
	{name: "udp6", args: []string{"-6", "-t", "1", "-u", "-b", "10M"}, text: true, check: checkHosts(loopback6)},
	{name: "udp6-reverse", args: []string{"-6", "-t", "1", "-u", "-b", "10M", "-R"}, text: true, check: checkHosts(loopback6)},
}

// TestInteropIPv6WithIperf3: the -6 cases against the real iperf3 on ::1, one at a time,
// compared as TestInteropWithIperf3 compares its cases.
func TestInteropIPv6WithIperf3(t *testing.T) {
	testutil.RequireCommand(t, "iperf3")
	if l, err := net.Listen("tcp6", "[::1]:0"); err != nil {
		testutil.SkipOrFail(t, "no IPv6 loopback: "+err.Error())
	} else {
		l.Close()
	}
	for _, c := range interopCases6 {
		t.Run(c.name, func(t *testing.T) {
			for _, asJSON := range []bool{true, false} {
				ref := runPairing(reference, loopback6, c.args, asJSON)
				if ref.err != nil {
					t.Fatalf("%v: %v\nclient:\n%s\nserver:\n%s", reference, ref.err, ref.client, ref.server)
				}
				for _, p := range []pairing{ourServer, ourClient} {
					for _, pr := range c.verify(ref, runPairing(p, loopback6, c.args, asJSON), asJSON) {
						t.Errorf("%v: %s", p, pr)
					}
				}
			}
		})
	}
}

// checkHosts checks that the client connected from and to host.
func checkHosts(host string) func(map[string]any) error {
	return func(client map[string]any) error {
		start, _ := client["start"].(map[string]any)
		conns, _ := start["connected"].([]any)
		if len(conns) == 0 {
			return fmt.Errorf("no start.connected")
		}
		for _, c := range conns {
			c, _ := c.(map[string]any)
			if c["local_host"] != host || c["remote_host"] != host {
				return fmt.Errorf("connected %v, want %s both ends", c, host)
			}
		}
		return nil
	}
}

// verify compares one run with the reference and checks the case's values; it returns what is
// wrong.
func (c interopCase) verify(ref, r run, asJSON bool) []string {
	var problems []string
	if r.err != nil {
		return []string{fmt.Sprintf("%v\nclient:\n%s\nserver:\n%s", r.err, r.client, r.server)}
	}
	if !asJSON {
		if d := setDiff(lineShapes(ref.client), lineShapes(r.client)); d != "" {
			problems = append(problems, fmt.Sprintf("the client's text differs from iperf3's:\n%s\niperf3's:\n%s\nthis one's:\n%s", d, ref.client, r.client))
		}
		if d := setDiff(lineShapes(ref.server), lineShapes(r.server)); d != "" {
			problems = append(problems, fmt.Sprintf("the server's text differs from iperf3's:\n%s\niperf3's:\n%s\nthis one's:\n%s", d, ref.server, r.server))
		}
		return problems
	}
	for _, side := range []struct{ name, ref, got string }{{"client", ref.client, r.client}, {"server", ref.server, r.server}} {
		want, err := keySet(side.ref)
		if err != nil {
			return []string{"iperf3's " + side.name + ": " + err.Error()}
		}
		got, err := keySet(side.got)
		if err != nil {
			return []string{"the " + side.name + ": " + err.Error()}
		}
		if d := setDiff(want, got); d != "" {
			problems = append(problems, fmt.Sprintf("the %s's -J keys differ from iperf3's (- iperf3's only, + this one's only):\n%s", side.name, d))
		}
	}
	var client map[string]any
	if err := json.Unmarshal([]byte(r.client), &client); err != nil {
		return append(problems, "client JSON: "+err.Error())
	}
	problems = append(problems, sameSpan(client)...)
	if c.check != nil {
		if err := c.check(client); err != nil {
			problems = append(problems, err.Error())
		}
	}
	return problems
}

// The loopback addresses the tests run on: IPv4's, and IPv6's for the -6 cases.
const loopback4, loopback6 = "127.0.0.1", "::1"

// runPairing runs one test with the given client and server on host, each printing JSON or text.
func runPairing(p pairing, host string, args []string, asJSON bool) run {
	// freePort's port comes from the ephemeral range, and a connection of a pairing running
	// beside this one may take it before the real iperf3 binds it: try another.
	for range 2 {
		if r := runPairingOnce(p, host, args, asJSON); r.err == nil || !strings.Contains(r.server, "Address already in use") {
			return r
		}
	}
	return runPairingOnce(p, host, args, asJSON)
}

func runPairingOnce(p pairing, host string, args []string, asJSON bool) run {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var port int
	var serverOut func() (string, error)
	var err error
	if p == ourServer {
		port, serverOut, err = startOurServer(ctx, host, asJSON)
	} else {
		port, serverOut, err = startRealServer(ctx, host, asJSON)
	}
	if err != nil {
		return run{err: err}
	}
	var r run
	var clientErr error
	if p == ourClient {
		r.client, clientErr = runOurClient(ctx, host, port, args, asJSON)
	} else {
		r.client, clientErr = runRealClient(ctx, host, port, args, asJSON)
	}
	var serverErr error
	r.server, serverErr = serverOut()
	switch {
	case clientErr != nil:
		r.err = fmt.Errorf("client: %w", clientErr)
	case serverErr != nil:
		r.err = fmt.Errorf("server: %w", serverErr)
	}
	return r
}

func startRealServer(ctx context.Context, host string, asJSON bool) (int, func() (string, error), error) {
	port, err := freePort(host)
	if err != nil {
		return 0, nil, err
	}
	argv := []string{"-s", "-1", "-B", host, "-p", strconv.Itoa(port)}
	if asJSON {
		argv = append(argv, "-J")
	}
	cmd := exec.CommandContext(ctx, "iperf3", argv...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return 0, nil, err
	}
	// A -J server prints nothing until its test ends: wait for its socket to listen.
	for !listening(host, port) {
		if ctx.Err() != nil {
			_ = cmd.Process.Kill()
			return 0, nil, fmt.Errorf("iperf3 -s did not listen on %d", port)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return port, func() (string, error) {
		err := cmd.Wait()
		return out.String(), err
	}, nil
}

// listening says whether a TCP socket listens on host:port, a loopback address (state 0A in
// /proc/net/tcp or tcp6).
func listening(host string, port int) bool {
	file, want := "/proc/net/tcp", fmt.Sprintf("0100007F:%04X 00000000:0000 0A", port)
	if host == loopback6 {
		file = "/proc/net/tcp6"
		want = fmt.Sprintf("00000000000000000000000001000000:%04X 00000000000000000000000000000000:0000 0A", port)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return false
	}
	return bytes.Contains(b, []byte(want))
}

func freePort(host string) (int, error) {
	// A port free for TCP and UDP alike: the server's UDP tests use the same number.
	for range 10 {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", net.JoinHostPort(host, strconv.Itoa(port)))
		l.Close()
		if err == nil {
			u.Close()
			return port, nil
		}
	}
	return 0, fmt.Errorf("no free port")
}

func startOurServer(ctx context.Context, host string, asJSON bool) (int, func() (string, error), error) {
	ln, err := Kernel.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, nil, err
	}
	var out testutil.SyncBuffer
	var rep *Report
	srv := &Server{Output: &out, JSON: asJSON, OneOff: true, OnReport: func(r *Report) { rep = r }}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	return ln.Addr().(*net.TCPAddr).Port, func() (string, error) {
		err := <-done
		if err == nil && rep != nil && rep.Error != "" {
			err = fmt.Errorf("the test failed: %s", rep.Error)
		}
		return out.String(), err
	}, nil
}

func runRealClient(ctx context.Context, host string, port int, args []string, asJSON bool) (string, error) {
	argv := append([]string{"-c", host, "-p", strconv.Itoa(port)}, args...)
	if asJSON {
		argv = append(argv, "-J")
	}
	var out, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "iperf3", argv...)
	cmd.Stdout, cmd.Stderr = &out, &stderr // -J with -f warns on stderr
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%w: %s", err, stderr.String())
	}
	return out.String(), nil
}

func runOurClient(ctx context.Context, host string, port int, args []string, asJSON bool) (string, error) {
	argv := append([]string{"-c", host, "-p", strconv.Itoa(port)}, args...)
	if asJSON {
		argv = append(argv, "-J")
	}
	c, err := ParseCommand(argv)
	if err != nil {
		return "", err
	}
	var out bytes.Buffer
	cfg := c.ClientConfig(Kernel)
	cfg.Output = &out
	_, err = RunClient(ctx, cfg)
	return out.String(), err
}

// keySet is the set of a JSON document's paths, as jq's paths lists them with array indices
// left out: "end.streams.sender.bytes".
func keySet(doc string) (map[string]bool, error) {
	var v any
	if err := json.Unmarshal([]byte(doc), &v); err != nil {
		return nil, fmt.Errorf("not JSON: %v\n%s", err, doc)
	}
	set := map[string]bool{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				p := k
				if prefix != "" {
					p = prefix + "." + k
				}
				set[p] = true
				walk(p, e)
			}
		case []any:
			for _, e := range v {
				walk(prefix, e)
			}
		}
	}
	walk("", v)
	return set, nil
}

// setDiff lists what only want has (-) and only got has (+), or "" when the sets are equal.
func setDiff(want, got map[string]bool) string {
	var d []string
	for k := range want {
		if !got[k] {
			d = append(d, "- "+k)
		}
	}
	for k := range got {
		if !want[k] {
			d = append(d, "+ "+k)
		}
	}
	slices.Sort(d)
	return strings.Join(d, "\n")
}

var (
	unitPrefix = regexp.MustCompile(`[KMGT]?(Bytes|bits/sec)`)
	number     = regexp.MustCompile(` *-?[0-9]+(\.[0-9]+)?(e[+-][0-9]+)?`)
)

// lineShapes are a text output's distinct lines with every number (and the spaces that align
// it) replaced by #, and units without their prefix: what iperf3's formats print, values aside.
// The datagrams-out-of-order line comes and goes with the network, so it is left out.
func lineShapes(text string) map[string]bool {
	set := map[string]bool{}
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, "out-of-order") {
			continue
		}
		l = unitPrefix.ReplaceAllString(l, "$1")
		set[number.ReplaceAllString(l, "#")] = true
	}
	return set
}

func field(v any, path string) (any, bool) {
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[k]; !ok {
			return nil, false
		}
	}
	return v, true
}

func number64(v any, path string) float64 {
	f, _ := field(v, path)
	n, _ := f.(float64)
	return n
}

// sameSpan checks that the client's summaries have both ends over the same time, for every
// direction and every stream.
func sameSpan(client map[string]any) []string {
	const slack = 0.5 // s: the ends stop a control message apart
	var problems []string
	for _, dir := range []string{"", "_bidir_reverse"} {
		sent, ok := field(client, "end.sum_sent"+dir)
		if !ok {
			continue
		}
		received, _ := field(client, "end.sum_received"+dir)
		s, r := number64(sent, "end"), number64(received, "end")
		if math.Abs(s-r) > slack {
			problems = append(problems, fmt.Sprintf("sum_sent%s covers 0-%.2f s, sum_received%s 0-%.2f s", dir, s, dir, r))
		}
	}
	streams, _ := field(client, "end.streams")
	list, _ := streams.([]any)
	for _, st := range list {
		snd, ok := field(st, "sender")
		if !ok {
			continue // UDP: one object for both ends
		}
		rcv, _ := field(st, "receiver")
		s, r := number64(snd, "end"), number64(rcv, "end")
		if math.Abs(s-r) > slack {
			problems = append(problems, fmt.Sprintf("a stream's sender covers 0-%.2f s, its receiver 0-%.2f s", s, r))
		}
	}
	return problems
}

func checkUDPRate(target float64) func(map[string]any) error {
	return func(client map[string]any) error {
		sent := number64(client, "end.sum_sent.bits_per_second")
		received := number64(client, "end.sum_received.bits_per_second")
		_, hasLost := field(client, "end.sum_received.lost_percent")
		jitter := number64(client, "end.sum_received.jitter_ms")
		summary := fmt.Sprintf("UDP at %.0f Mbit/s: sent %.1f, received %.1f Mbit/s, %.2f %% lost, jitter %.3f ms",
			target/1e6, sent/1e6, received/1e6, number64(client, "end.sum_received.lost_percent"), jitter)
		// What arrives depends on the receiver keeping up on a busy host; iperf3's loses too.
		if math.Abs(sent-target) > 0.05*target || received < 0.5*target || jitter <= 0 || !hasLost {
			return errors.New(summary + ": the rate is not within 5 %, or no loss and jitter")
		}
		return nil
	}
}

// checkTCPRate: each direction's sender held the rate, within 5 % above it (a busy host can
// only slow a sender, so the bound holds on any host), and moved something.
func checkTCPRate(target float64) func(map[string]any) error {
	return func(client map[string]any) error {
		for _, k := range []string{"end.sum_sent", "end.sum_sent_bidir_reverse"} {
			if _, ok := field(client, k); !ok {
				continue
			}
			if bps := number64(client, k+".bits_per_second"); bps > 1.05*target || bps <= 0 {
				return fmt.Errorf("%s: %.1f Mbit/s at -b %.0fM", k, bps/1e6, target/1e6)
			}
		}
		return nil
	}
}

func checkOmitted(client map[string]any) error {
	intervals, _ := field(client, "intervals")
	list, _ := intervals.([]any)
	omitted := 0
	for _, iv := range list {
		if o, _ := field(iv, "sum.omitted"); o == true {
			omitted++
		}
	}
	if omitted == 0 {
		return errors.New("no interval is marked omitted")
	}
	if s := number64(client, "end.sum_sent.seconds"); s > 1.5 {
		return fmt.Errorf("the summary covers %.2f s of a 1 s test after 1 s omitted", s)
	}
	return nil
}

func checkStart(path string, want float64) func(map[string]any) error {
	return func(client map[string]any) error {
		if got := number64(client, "start."+path); got != want {
			return fmt.Errorf("start.%s = %v, want %v", path, got, want)
		}
		return nil
	}
}

func checkCongestion(want string) func(map[string]any) error {
	return func(client map[string]any) error {
		for _, k := range []string{"end.sender_tcp_congestion", "end.receiver_tcp_congestion"} {
			if got, _ := field(client, k); got != want {
				return fmt.Errorf("%s = %v, want %q", k, got, want)
			}
		}
		return nil
	}
}

func checkBytes(want float64) func(map[string]any) error {
	return func(client map[string]any) error {
		if got := number64(client, "end.sum_sent.bytes"); got < want {
			return fmt.Errorf("sent %v bytes, want at least %v", got, want)
		}
		return nil
	}
}
