package iperf

import (
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
		cfg.BlockSize != DefaultBlockSize || cfg.Interval != time.Second {
		t.Fatalf("parsed %+v into %+v", c, cfg)
	}
	s, err := ParseCommand([]string{"-s", "-1"})
	if err != nil || !s.Server || !s.OneOff || s.ListenAddress() != ":5201" {
		t.Fatalf("server command: %+v, %v", s, err)
	}
	for _, bad := range [][]string{{}, {"-s", "-c", "x"}, {"-c", "x", "extra"}, {"-u", "-c", "x"}} {
		if _, err := ParseCommand(bad); err == nil {
			t.Errorf("ParseCommand(%q) accepted", bad)
		}
	}
}
