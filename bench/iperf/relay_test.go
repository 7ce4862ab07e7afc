package iperf

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nicstack/nicstack/internal/testutil"
	"github.com/nicstack/nicstack/netdev"
)

// --compare relay joins two namespaces through this process's TAPs, moves a short iperf,
// counts the relay's CPU in the path's, and leaves no namespace or TAP behind.
func TestRelayReference(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireCommand(t, "iperf3")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, dir := range []string{dirRX, dirTX} {
		p, err := measureReference(ctx, reference{name: "relay"}, iperfTest{run: time.Second}, dir)
		if err != nil {
			t.Fatal(err)
		}
		if p.Mbps <= 0 || p.GbitPerCPUSecond <= 0 {
			t.Errorf("relay %s: %v Mbit/s, %v Gbit per CPU-second", dir, p.Mbps, p.GbitPerCPUSecond)
		}
	}
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Fatal(err)
	}
	if ns := fmt.Sprintf("nsbi%d", os.Getpid()); strings.Contains(string(out), ns) {
		t.Errorf("namespace %s left behind:\n%s", ns, out)
	}
}

// fakeDevice reads the frames queued in in, a batch a call, and records what it is given.
type fakeDevice struct {
	in   chan [][]byte
	out  [][]byte
	offs []netdev.Offload
}

func (d *fakeDevice) Read(bufs [][]byte, sizes []int, offs []netdev.Offload) (int, error) {
	batch, ok := <-d.in
	if !ok {
		return 0, os.ErrClosed
	}
	for i, f := range batch {
		sizes[i] = copy(bufs[i], f)
		offs[i] = netdev.Offload{GSOType: netdev.GSOTCPv4, GSOSize: uint16(i + 1)}
	}
	return len(batch), nil
}

func (d *fakeDevice) Write(bufs [][]byte, offs []netdev.Offload) (int, error) {
	for i, b := range bufs {
		d.out = append(d.out, slices.Clone(b))
		d.offs = append(d.offs, offs[i])
	}
	return len(bufs), nil
}

// The relay writes every frame it reads, whole and in order, with its offload metadata.
func TestRelayCopiesFrames(t *testing.T) {
	src, dst := &fakeDevice{in: make(chan [][]byte, 2)}, &fakeDevice{}
	src.in <- [][]byte{[]byte("first frame"), make([]byte, 65000)}
	src.in <- [][]byte{[]byte("third")}
	close(src.in)
	r := &tapRelay{}
	r.wg.Add(1)
	r.copyFrames(dst, src)
	if len(dst.out) != 3 || string(dst.out[0]) != "first frame" || len(dst.out[1]) != 65000 || string(dst.out[2]) != "third" {
		t.Fatalf("relayed %d frames: %q...", len(dst.out), dst.out[0])
	}
	if dst.offs[1].GSOSize != 2 || dst.offs[2].GSOSize != 1 || dst.offs[0].GSOType != netdev.GSOTCPv4 {
		t.Errorf("offloads %+v", dst.offs)
	}
}
