package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nicstack/nicstack/internal/scenariotest"
	"github.com/nicstack/nicstack/internal/testutil"
	"github.com/nicstack/nicstack/netdev/header"
	"github.com/nicstack/nicstack/runtime/netns"
	"github.com/nicstack/nicstack/runtime/supervisor"
)

// The model's cable into Linux: intel_nic_hw with a TAP (or AF_PACKET) wire into namespace
// "far" at 198.18.0.2, driven by ipxe_nic, whose Uplink client nic_router has 198.18.0.1.
// The far namespace's kernel pings the router across wire, model, driver and router, with
// payloads up to the MTU, and every reply comes back intact.
const wireScenario = `<config>
	<parent-provides> <service name="LOG"/> <service name="Tap"/> <service name="Packet"/> </parent-provides>
	<default-route> <any-service> <parent/> <any-child/> </any-service> </default-route>
	<default caps="100" ram="64M"/>
	<start name="intel_nic_hw">
		<provides> <service name="Platform"/> <service name="Nic"/> </provides>
		<config model="i217-LM" mac="02:00:00:00:00:42">
			<wire type="WIRE" netns="far" address="198.18.0.2/24"/>
		</config>
	</start>
	<start name="ipxe_nic">
		<config rx_irq_throttle="651" tx_batch="yes"/>
	</start>
	<start name="nic_router" ram="32M">
		<provides> <service name="Nic"/> <service name="Uplink"/> </provides>
		<config>
			<policy label="ipxe_nic -> uplink" domain="uplink"/>
			<domain name="uplink" interface="198.18.0.1/24"/>
		</config>
	</start>
</config>`

func TestTapWire(t *testing.T)    { testLinuxWire(t, "tap") }
func TestPacketWire(t *testing.T) { testLinuxWire(t, "packet") }

func testLinuxWire(t *testing.T, wire string) {
	testutil.RequireRoot(t)
	if wire == "packet" {
		testutil.RequireCommand(t, "ethtool")
	}
	bins := ""
	for _, c := range []string{"intel_nic_hw", "ipxe_nic", "nic_router"} {
		bins = filepath.Dir(testutil.Binary(t, "github.com/nicstack/nicstack/components/"+c))
	}
	r := scenariotest.Start(t, "wire.xml", strings.Replace(wireScenario, "WIRE", wire, 1),
		supervisor.Options{BinDirs: []string{bins}, WatchInterval: 50 * time.Millisecond})
	nsPath := ""
	defer func() {
		r.Stop()
		// the supervisor deleted the namespace, and the TAP or veth with it
		if nsPath != "" {
			if _, err := os.Stat(nsPath); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("namespace %s still there after the run: %v", nsPath, err)
			}
		}
	}()

	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("waited 30 s for %s", what)
			}
		}
	}
	waitFor("namespace far", func() bool { nsPath, _ = r.S.Netns("far"); return nsPath != "" })
	waitFor("the Uplink session", func() bool {
		for _, q := range r.Component("ipxe_nic").Requests {
			if q.Service == "Uplink" && q.State == "open" {
				return true
			}
		}
		return false
	})

	nsFile, err := os.Open(nsPath)
	if err != nil {
		t.Fatal(err)
	}
	defer nsFile.Close()
	var fd int
	if err := netns.Do(nsFile, func() (err error) {
		fd, err = unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_ICMP)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 200000}); err != nil {
		t.Fatal(err)
	}
	// The first echo waits for ARP and the link; retry each for up to 30 s in all.
	deadline := time.Now().Add(30 * time.Second)
	for seq, size := range []int{56, 1000, 1472, 1472, 56} {
		for !echo(t, fd, uint16(seq+1), size) {
			if time.Now().After(deadline) {
				t.Fatalf("no intact echo reply for %d bytes from 198.18.0.1 across the %s wire", size, wire)
			}
		}
	}
	hw := r.Component("intel_nic_hw").Counters
	if hw["rx_frames"] < 5 || hw["tx_frames"] < 5 || hw["wire_rx_invalid"] != 0 || hw["wire_rx_offload"] != 0 {
		t.Errorf("model counters %v", hw)
	}
}

// echo sends one ICMP echo request with size payload bytes and reports whether its reply came
// back with the payload intact (other replies are skipped).
func echo(t *testing.T, fd int, seq uint16, size int) bool {
	const id = 0x4e53
	msg := make([]byte, 8+size)
	msg[0] = 8 // echo request
	binary.BigEndian.PutUint16(msg[4:], id)
	binary.BigEndian.PutUint16(msg[6:], seq)
	for i := range size {
		msg[8+i] = byte(i*7 + int(seq))
	}
	binary.BigEndian.PutUint16(msg[2:], header.Checksum(msg, 0))
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrInet4{Addr: [4]byte{198, 18, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 2048)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return false // timed out: send again
		}
		ip := buf[:n]
		if len(ip) < 20 {
			continue
		}
		icmp := ip[int(ip[0]&0xf)*4:]
		if len(icmp) < 8 || icmp[0] != 0 || binary.BigEndian.Uint16(icmp[4:]) != id || binary.BigEndian.Uint16(icmp[6:]) != seq {
			continue
		}
		if header.Checksum(icmp, 0) != 0 || !bytes.Equal(icmp[8:], msg[8:]) {
			t.Errorf("echo reply %d (%d bytes) damaged", seq, size)
		}
		return true
	}
}
