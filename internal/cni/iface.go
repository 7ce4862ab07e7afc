package cni

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/nicstack/nicstack/runtime/netns"
)

// waitUp waits for the supervisor to make the pod's interface (the attach answers before the
// guest's Tap session opens) and returns it.
func waitUp(nsPath, ifname string, st Static) (*net.Interface, error) {
	deadline := time.Now().Add(upTimeout)
	for {
		iface, err := inspect(nsPath, ifname, st)
		if err == nil || time.Now().After(deadline) {
			return iface, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// interfaceHas says whether ifname in the namespace at nsPath is up with the address and, if
// st has a gateway, the default route through it.
func interfaceHas(nsPath, ifname string, st Static) error {
	_, err := inspect(nsPath, ifname, st)
	return err
}

// inspect reads ifname, its addresses and the default route inside the namespace at nsPath.
func inspect(nsPath, ifname string, st Static) (*net.Interface, error) {
	f, err := os.Open(nsPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var iface *net.Interface
	err = netns.Do(f, func() error {
		if iface, err = net.InterfaceByName(ifname); err != nil {
			return err
		}
		if iface.Flags&net.FlagUp == 0 {
			return fmt.Errorf("%s is down", ifname)
		}
		addrs, err := iface.Addrs()
		if err != nil {
			return err
		}
		found := false
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				ones, _ := n.Mask.Size()
				ip, _ := netip.AddrFromSlice(n.IP)
				found = found || netip.PrefixFrom(ip.Unmap(), ones) == st.Address
			}
		}
		if !found {
			return fmt.Errorf("%s has not the address %s (it has %v)", ifname, st.Address, addrs)
		}
		if !st.Gateway.IsValid() {
			return nil
		}
		gw, err := defaultRoute(ifname)
		if err != nil {
			return err
		}
		if gw != st.Gateway {
			return fmt.Errorf("the default route goes via %s, not %s", gw, st.Gateway)
		}
		return nil
	})
	return iface, err
}

// defaultRoute is the gateway of the IPv4 default route through ifname in the calling
// thread's namespace (/proc/thread-self/net/route: /proc/net is the process's).
func defaultRoute(ifname string) (netip.Addr, error) {
	f, err := os.Open("/proc/thread-self/net/route")
	if err != nil {
		return netip.Addr{}, err
	}
	defer f.Close()
	return parseDefaultRoute(f, ifname)
}

// parseDefaultRoute finds the default route through ifname in a /proc/net/route table.
func parseDefaultRoute(r io.Reader, ifname string) (netip.Addr, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		// Iface Destination Gateway Flags RefCnt Use Metric Mask ...: each address the
		// kernel's network-order word printed as a little-endian one, "0102000A" for 10.0.2.1.
		fs := strings.Fields(sc.Text())
		if len(fs) < 8 || fs[0] != ifname || fs[1] != "00000000" || fs[7] != "00000000" {
			continue
		}
		b, err := hex.DecodeString(fs[2])
		if err != nil || len(b) != 4 {
			return netip.Addr{}, fmt.Errorf("route %q: gateway %q", sc.Text(), fs[2])
		}
		return netip.AddrFrom4([4]byte{b[3], b[2], b[1], b[0]}), nil
	}
	if err := sc.Err(); err != nil {
		return netip.Addr{}, err
	}
	return netip.Addr{}, errors.New("no default route through " + ifname)
}

// ipNet is p as the result's address.
func ipNet(p netip.Prefix) net.IPNet {
	return net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}
