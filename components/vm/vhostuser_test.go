package main

import (
	"strings"
	"testing"
)

// deploy/qemu_iperf_vhost: a QEMU guest over vhost-user: QEMU negotiates with the vm's back end, the guest takes its
// lease from nic_router's DHCP server and moves an iperf test each way through the NAT to
// remote_host, with no fault on the device.
func TestQEMUGuestOverVhostUser(t *testing.T) {
	both := "--run=nicstack iperf -c 198.18.0.2 -t 2 &amp;&amp; nicstack iperf -c 198.18.0.2 -t 2 -R"
	r := startQEMUScenario(t, "qemu_iperf_vhost.xml", "--iperf=-c 198.18.0.2 -R -t 10", both)
	waitLog(t, r, `guest\" exited with exit value 0`, 1)
	logs := r.Logs.String()
	for _, want := range []string{"[guest] NICSTACK-GUEST: lease 10.0.1.", "[guest] NICSTACK-GUEST: exit 0", `msg="front end connected"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log lacks %q", want)
		}
	}
	if n := strings.Count(logs, "receiver\n"); n != 2 {
		t.Errorf("%d iperf results in the guest's log, want 2", n)
	}
	vm := r.Component("vm").Counters
	if vm["vhost_faults"] != 0 || vm["vhost_rx_frames"] == 0 || vm["vhost_tx_frames"] == 0 {
		t.Errorf("vm counters %v: want frames both ways, no fault", vm)
	}
	srv := r.Component("remote_host").Counters
	if srv["iperf_tests"] != 2 || srv["iperf_errors"] != 0 {
		t.Errorf("remote_host counters %v: want two tests, no error", srv)
	}
}

// QEMU killed in the middle of a transfer over vhost-user: the vm's device for it ends with
// the connection, the supervisor starts the guest again (restart="yes"), and the new QEMU gets
// a fresh device and a lease; the old one's memory is let go and nothing panics.
func TestQEMUKilledMidTransferOverVhostUser(t *testing.T) {
	killMidTransfer(t, "qemu_iperf_vhost.xml", "front end", "vhost_faults")
}
