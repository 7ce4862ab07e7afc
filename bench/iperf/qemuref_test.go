package iperf

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nicstack/nicstack/internal/qemu"
	"github.com/nicstack/nicstack/internal/testutil"
)

// --compare passt boots the test guest on QEMU's stream netdev to passt in a namespace of its
// own, moves a short iperf to the server there, reports QEMU's, passt's and the machine's CPU,
// and leaves no namespace behind.
func TestPasstReference(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireCommand(t, "passt", "iperf3", qemu.Binary)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p, err := measureReference(ctx, reference{name: "passt"}, iperfTest{run: time.Second}, dirTX)
	if err != nil {
		t.Fatal(err)
	}
	if p.Mbps <= 0 {
		t.Errorf("passt: %v Mbit/s", p.Mbps)
	}
	for _, n := range []string{"qemu", "passt", machine} {
		if _, ok := p.CPU[n]; !ok {
			t.Errorf("passt: no CPU of %s in %v", n, p.CPU)
		}
	}
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Fatal(err)
	}
	if ns := fmt.Sprintf("nsbq%dp", os.Getpid()); strings.Contains(string(out), ns) {
		t.Errorf("namespace %s left behind:\n%s", ns, out)
	}
}
