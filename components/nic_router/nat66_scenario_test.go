package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nicstack/nicstack/internal/testutil"
)

// nat66 runs deploy/ipv6.hid (NAT66, issue 35) until the vm has its SLAAC address and its
// default route from the router's RA, and returns the scenario and the vm's namespace. Run
// under flock /tmp/nicstack-root.lock (namespaces vm and far).
func nat66(t *testing.T) (*scenario, *ipv6NS) {
	sc, vm, _ := slaacScenario(t, "ipv6.hid")
	return sc, vm
}

// slaacScenario runs deploy/name, deploy/ipv6.hid's shape (a netns vm behind the router's lan
// with <ra>, the far end's iperf3 server in namespace far), until the vm has its SLAAC address
// and default route, and returns the scenario and the namespaces of the vm and the far end.
func slaacScenario(t *testing.T, name string) (*scenario, *ipv6NS, *ipv6NS) {
	testutil.RequireRoot(t)
	testutil.RequireCommand(t, "ip", "ping", "iperf3")
	testutil.Binary(t, "github.com/nicstack/nicstack/components/vm")
	testutil.Binary(t, "github.com/nicstack/nicstack/components/linux_nic")
	sc := run(t, name)
	vm, far := ipv6Namespace(t, sc, sc.within, "vm"), ipv6Namespace(t, sc, sc.within, "far")
	show := func() string { return vm.ip("-6", "addr") + vm.ip("-6", "route") + far.ip("-6", "addr") }
	sc.within("the vm's SLAAC address from the RA's prefix", func() bool {
		a := vm.ip("-6", "addr", "show", "dev", vm.dev, "scope", "global")
		return strings.Contains(a, "2001:db8:1:0:") && !strings.Contains(a, "tentative")
	}, show)
	sc.within("the vm's default route via the router's link-local address", func() bool {
		return strings.Contains(vm.ip("-6", "route", "show", "default"), "via fe80::")
	}, show)
	sc.within("the far end's iperf3 server", func() bool {
		out, _ := exec.Command("ip", "netns", "exec", far.name, "ss", "-Htln", "sport", "5201").Output()
		return len(out) > 0
	}, show)
	return sc, vm, far
}

// iperf3Result is what the test reads of iperf3 -J's report.
type iperf3Result struct {
	Error string `json:"error"`
	End   struct {
		SumReceived struct {
			Bytes         uint64  `json:"bytes"`
			Seconds       float64 `json:"seconds"`
			BitsPerSecond float64 `json:"bits_per_second"`
		} `json:"sum_received"`
	} `json:"end"`
}

// runIperf3 runs the real iperf3 -6 in the vm's namespace against the far end (args: -t, -R),
// bounded to a minute, and returns its report, or why it failed.
func runIperf3(vm *ipv6NS, args ...string) (iperf3Result, string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", vm.name, "iperf3", "-6", "-J", "-c", "2001:db8:ffff::2"}, args...)...)
	out, err := cmd.Output()
	var r iperf3Result
	if jerr := json.Unmarshal(out, &r); err != nil || jerr != nil || r.Error != "" || r.End.SumReceived.Bytes == 0 {
		return r, fmt.Sprintf("iperf3 -6 %v: %v %v %q, %d bytes\n%s", args, err, jerr, r.Error, r.End.SumReceived.Bytes, out)
	}
	return r, ""
}

// iperf3 is runIperf3, failing the test on an error.
func iperf3(t *testing.T, vm *ipv6NS, args ...string) iperf3Result {
	t.Helper()
	r, failed := runIperf3(vm, args...)
	if failed != "" {
		t.Fatal(failed)
	}
	return r
}

// deploy/ipv6.hid: the netns vm behind nic_router configures itself by SLAAC from the RA,
// ping -6 reaches the far end through NAT66 (the replies come back by the link states: the
// uplink has no rule into the lan), and the real iperf3 -6 runs both ways.
func TestNAT66Scenario(t *testing.T) {
	sc, vm := nat66(t)
	if out, err := exec.Command("ip", "netns", "exec", vm.name, "ping", "-6", "-c", "3", "-i", "0.2", "-W", "2", "2001:db8:ffff::2").CombinedOutput(); err != nil {
		t.Fatalf("ping -6 the far end from the vm: %v\n%s\nlogs:\n%s", err, out, sc.Logs.String())
	}
	up := iperf3(t, vm, "-t", "2")
	down := iperf3(t, vm, "-t", "2", "-R")
	t.Logf("iperf3 -6 through NAT66: vm to far %.0f Mbit/s, far to vm %.0f Mbit/s", up.End.SumReceived.BitsPerSecond/1e6, down.End.SumReceived.BitsPerSecond/1e6)
}

// kill -9 of nic_router while an iperf3 -6 runs through its NAT66: the supervisor restarts it
// on the state region, the router restores the test's connections (control and data) with
// their NAT ports, and the same connections carry the test to its end.
func TestNAT66SurvivesRouterKill(t *testing.T) {
	sc, vm := nat66(t)
	type result struct {
		r      iperf3Result
		failed string
	}
	done := make(chan result, 1)
	go func() {
		r, failed := runIperf3(vm, "-t", "6")
		done <- result{r, failed}
	}()
	sc.waitCounter("nic_router", "frames_received", 20000) // the test's data flows
	select {
	case res := <-done:
		t.Fatalf("iperf3 ended before the kill: %+v %s", res.r.End.SumReceived, res.failed)
	default:
	}
	killed := time.Now()
	pid := sc.Kill("nic_router")
	sc.WaitRestarted("nic_router", pid)
	restarted := time.Since(killed)
	res := <-done
	if res.failed != "" {
		t.Fatalf("%s\nlogs:\n%s", res.failed, sc.Logs.String())
	}
	r := res.r
	if r.End.SumReceived.Seconds < 5.5 {
		t.Fatalf("the test ended early: %+v", r.End.SumReceived)
	}
	m := regexp.MustCompile(`state region: restored.*link_states=(\d+)`).FindStringSubmatch(sc.Logs.String())
	restored := 0
	if m != nil {
		restored, _ = strconv.Atoi(m[1])
	}
	if restored < 2 {
		t.Fatalf("the router's log shows %d link states restored, want the test's two connections\n%s", restored, sc.Logs.String())
	}
	t.Logf("kill -9 nic_router during iperf3 -6: running again after %v, %d link states restored, %.0f Mbit/s over the test",
		restarted.Round(time.Millisecond), restored, r.End.SumReceived.BitsPerSecond/1e6)
}
