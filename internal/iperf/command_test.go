package iperf

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseCommand(t *testing.T) {
	c, err := ParseCommand([]string{"iperf3", "-c", "10.0.1.1", "-R", "-t", "5", "-P", "2", "-J", "-p", "5202"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := c.ClientConfig(nil)
	if cfg.Server != "10.0.1.1:5202" || !cfg.Reverse || cfg.Duration != 5*time.Second || cfg.Parallel != 2 || !c.JSON ||
		cfg.BlockSize != 0 || cfg.Interval != time.Second || cfg.Rate != 0 {
		t.Fatalf("parsed %+v into %+v", c, cfg)
	}
	s, err := ParseCommand([]string{"-s", "-1"})
	if err != nil || !s.Server || !s.OneOff || s.ListenAddress() != ":5201" {
		t.Fatalf("server command: %+v, %v", s, err)
	}
}

// TestParseCommandIPVersion: -6 and -4 choose the networks; an IPv6 literal needs no flag.
func TestParseCommandIPVersion(t *testing.T) {
	c, err := ParseCommand(strings.Fields("-c 2001:db8:ffff::2 -6 -t 5"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg := c.ClientConfig(nil); cfg.Server != "[2001:db8:ffff::2]:5201" || cfg.IPVersion != 6 {
		t.Fatalf("parsed into %+v", cfg)
	}
	for args, want := range map[string]string{"-s -6": "tcp6", "-s --version4": "tcp4", "-s": "tcp"} {
		s, err := ParseCommand(strings.Fields(args))
		if err != nil || s.ListenNetwork() != want {
			t.Errorf("%q: %v, %v; want %s", args, s, err, want)
		}
	}
	if c, err := ParseCommand(strings.Fields("-c fd00::1")); err != nil || c.ClientConfig(nil).Server != "[fd00::1]:5201" {
		t.Errorf("an IPv6 literal: %+v, %v", c, err)
	}
	if _, err := ParseCommand(strings.Fields("-c h -4 -6")); err == nil {
		t.Error("-4 -6 accepted")
	}
}

// TestParseCommandOptions reads what users type, suffixes included.
func TestParseCommandOptions(t *testing.T) {
	c, err := ParseCommand(strings.Fields("-c h -u -b 100M/10 -l 16K -w 2M -M 1400 -O 2 --bidir -C reno -Z -S 0x10 -i 0 --get-server-output --udp-counters-64bit -f m"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := c.ClientConfig(nil)
	if !cfg.UDP || cfg.Rate != 100e6 || cfg.Burst != 10 || cfg.BlockSize != 16<<10 || cfg.Window != 2<<20 || cfg.MSS != 1400 ||
		cfg.Omit != 2 || !cfg.Bidir || cfg.Congestion != "reno" || !cfg.ZeroCopy || cfg.TOS != 16 || cfg.Interval >= 0 ||
		!cfg.GetServerOutput || !cfg.UDP64 || cfg.Format != 'm' {
		t.Fatalf("parsed into %+v", cfg)
	}
	u, _ := ParseCommand(strings.Fields("-c h -u"))
	if cfg := u.ClientConfig(nil); cfg.Rate != 1<<20 {
		t.Fatalf("UDP's default rate: %d, want iperf3's 1 Mbit/s", cfg.Rate)
	}
	n, _ := ParseCommand(strings.Fields("-c h -n 1G"))
	if cfg := n.ClientConfig(nil); cfg.Bytes != 1<<30 || cfg.Duration != 0 {
		t.Fatalf("-n 1G: %d bytes, %v", cfg.Bytes, cfg.Duration)
	}
}

// TestParseCommandRefuses refuses what iperf3 refuses, with its words.
func TestParseCommandRefuses(t *testing.T) {
	for _, tc := range []struct {
		line string
		want Code
	}{
		{"", CodeNoRole},
		{"-s -c x", CodeServerClient},
		{"-s -u", CodeClientOnly},
		{"-s -R", CodeClientOnly},
		{"-c x -1", CodeServerOnly},
		{"-c x -R --bidir", CodeReverseBidir},
		{"-c x -P 129", CodeNumStreams},
		{"-c x -t 100000", CodeDuration},
		{"-c x -t 5 -n 1M", CodeEndConditions},
		{"-c x -n 1M -k 10", CodeEndConditions},
		{"-c x -l 2M", CodeBlockSize},
		{"-c x -u -l 8", CodeUDPBlockSize},
		{"-c x -w 1G", CodeBufSize},
		{"-c x -M 10000", CodeMSS},
		{"-c x -O 61", CodeOmit},
		{"-c x -i 0.01", CodeInterval},
		{"-c x -f x", CodeBadFormat},
		{"-c x -p 0", CodeBadPort},
		{"-c x -S 300", CodeBadTOS},
		{"-c x -R --rcv-timeout 99", CodeRcvTimeout},
		{"-s --rcv-timeout 86400001", CodeRcvTimeout},
		{"-c x --rcv-timeout 1000", CodeRcvTimeoutRx},
		{"-c x --snd-timeout -1", CodeSndTimeout},
	} {
		_, err := ParseCommand(strings.Fields(tc.line))
		var ie *Error
		if !errors.As(err, &ie) || ie.Code != tc.want {
			t.Errorf("%q: %v, want code %d", tc.line, err, tc.want)
		}
	}
	for _, bad := range []string{"-c x extra", "-c x -l 16Q", "-c x -b 1G/0", "-c x -n lots"} {
		if _, err := ParseCommand(strings.Fields(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	for _, ok := range []string{"-c x -t 5 -R", "-c x -R --rcv-timeout 100 --snd-timeout 2000", "-c x --bidir --rcv-timeout 5000", "-s --rcv-timeout 2000 --snd-timeout 1"} {
		if _, err := ParseCommand(strings.Fields(ok)); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
}
