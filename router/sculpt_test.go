package router

import (
	"os"
	"reflect"
	"testing"

	"github.com/nicstack/nicstack/internal/testutil"
	"github.com/nicstack/nicstack/netdev/header"
	"github.com/nicstack/nicstack/router/model"
	"github.com/nicstack/nicstack/runtime/config"
)

// TestSculptConfigBothSyntaxes reads the nic_router-nat shaped config of runtime/config's
// golden files in XML and in HID: both give the same model without a single problem, and a
// VM behind it reaches the outside through NAT.
func TestSculptConfigBothSyntaxes(t *testing.T) {
	var models []*model.Config
	for _, f := range []string{"nic_router.xml", "nic_router.hid"} {
		n, err := config.ParseFile("../runtime/config/testdata/" + f)
		if os.IsNotExist(err) {
			testutil.SkipOrFail(t, "golden configs not present: "+err.Error())
		}
		if err != nil {
			t.Fatal(err)
		}
		m := model.Parse(n)
		if len(m.Problems) != 0 {
			t.Fatalf("%s: %v", f, m.Problems)
		}
		models = append(models, m)
	}
	if !reflect.DeepEqual(models[0], models[1]) {
		t.Fatal("XML and HID give different models")
	}
	if len(models[0].Domains) != 3 || len(models[0].Invalid) != 0 {
		t.Fatalf("domains %d, invalid %v", len(models[0].Domains), models[0].Invalid)
	}
	b := newBench(t, "<config/>")
	b.r.Configure(models[1])
	vm, vmp := b.attach("vm_1 -> nic", Nic, header.MAC{})
	up, upp := b.attach("nic_drv -> uplink", Uplink, macUplink)
	if vm.Domain() != "default" || up.Domain() != "uplink" {
		t.Fatalf("policies: %q %q", vm.Domain(), up.Domain())
	}
	b.send(up, arpFrame(header.ARPReply, macGateway, ip4("198.18.0.1"), macUplink, ip4("198.18.0.10"), macUplink))
	b.send(vm, tcpFrame(vm.MAC(), routerMACNic, ip4("10.0.1.50"), ip4("93.184.216.34"), 40000, 443, header.TCPSyn, 1, 0, nil))
	out := upp.take()
	if len(out) != 1 {
		t.Fatal("TCP 443 not routed to the uplink")
	}
	if p := parse(t, out[0]); p.src() != ip4("198.18.0.10") || p.sport < 49152 {
		t.Fatal("not translated")
	}
	b.send(vm, tcpFrame(vm.MAC(), routerMACNic, ip4("10.0.1.50"), ip4("93.184.216.34"), 40001, 25, header.TCPSyn, 1, 0, nil))
	if len(upp.take()) != 0 {
		t.Fatal("TCP 25 routed although no rule permits it")
	}
	if out := vmp.take(); len(out) != 1 || parse(t, out[0]).icmp.Code() != header.ICMPHostUnreachable {
		t.Fatal("TCP 25 not answered with an ICMP host unreachable")
	}
	b.send(vm, dhcpRequest(vm.MAC(), header.DHCPDiscover, 9, [4]byte{}))
	if o := dhcpReplyOf(t, vmp); o.YIAddr() != ip4("10.0.1.2") {
		t.Fatal("no DHCP offer")
	}
}
