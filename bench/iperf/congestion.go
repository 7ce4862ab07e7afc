package iperf

import (
	"fmt"
	"os"
	"slices"
	"strings"
)

// checkCongestion refuses a --congestion this kernel does not offer, or that a guest of sc
// could not take: only Linux's TCP has the choice (netns guests and the references).
func (o Options) checkCongestion(sc *scenario) error {
	if o.Congestion == "" {
		return nil
	}
	for _, c := range sc.clients {
		if c.netns == "" {
			return fmt.Errorf("--congestion %s: guest %s does not run Linux's TCP (only netns guests and the references do)", o.Congestion, c.name)
		}
	}
	offered, err := os.ReadFile(availableCongestion)
	if err != nil {
		return fmt.Errorf("--congestion %s: %w", o.Congestion, err)
	}
	if !slices.Contains(strings.Fields(string(offered)), o.Congestion) {
		return fmt.Errorf("--congestion %s: this kernel offers %s", o.Congestion, strings.TrimSpace(string(offered)))
	}
	return nil
}

// linuxTCP says whether a guest of sc runs Linux's TCP (a netns guest).
func (sc *scenario) linuxTCP() bool {
	for _, c := range sc.clients {
		if c.netns != "" {
			return true
		}
	}
	return false
}

// The TCP congestion controls the kernel has loaded, and its default.
const (
	availableCongestion = "/proc/sys/net/ipv4/tcp_available_congestion_control"
	defaultCongestion   = "/proc/sys/net/ipv4/tcp_congestion_control"
)

// congestion is the TCP congestion control the Linux iperf3s use: --congestion, else the
// kernel's default ("" when unreadable).
func (o Options) congestion() string {
	if o.Congestion != "" {
		return o.Congestion
	}
	b, _ := os.ReadFile(defaultCongestion)
	return strings.TrimSpace(string(b))
}

// congestionTitle names the TCP congestion control the Linux iperf3s use.
func (o Options) congestionTitle() string {
	switch cc := o.congestion(); {
	case o.Congestion != "":
		return "TCP congestion control " + cc
	case cc != "":
		return "TCP congestion control " + cc + " (the kernel's default)"
	}
	return "TCP congestion control: the kernel's default"
}
