package qemu

import (
	"strings"
	"testing"
)

func TestFindMarker(t *testing.T) {
	out := "[guest] [    1.5] e1000e: link up NICSTACK-GUEST: irq-start 5\n[guest] NICSTACK-GUEST: irq 77\n"
	if v, ok := FindMarker(out, "irq"); !ok || v != "77" {
		t.Errorf("irq: %q %v, want 77 (not irq-start's line)", v, ok)
	}
	if v, ok := FindMarker(out, "irq-start"); !ok || v != "5" {
		t.Errorf("irq-start after kernel messages on its line: %q %v", v, ok)
	}
	if _, ok := FindMarker(out, "exit"); ok {
		t.Error("found an exit marker that is not there")
	}
}

func TestCPUTimes(t *testing.T) {
	t0, err := ParseCPUTimes("cpu  20 0 620 545 0 0 15 0 0 0")
	if err != nil {
		t.Fatal(err)
	}
	// guest time (the ninth field) is in user already and must not count twice.
	t1, err := ParseCPUTimes("cpu  120 0 720 645 100 0 15 0 90 0")
	if err != nil {
		t.Fatal(err)
	}
	if load, seconds := t1.Since(t0, 2); load != 100 || seconds != 2 {
		t.Errorf("200 ticks busy of 400 on 2 CPUs: load %v %%, %v s; want 100 %%, 2 s", load, seconds)
	}
	for _, bad := range []string{"intr 1 2 3", "cpu 1 2 3", "cpu  1 2 x 4 5 6 7 8"} {
		if _, err := ParseCPUTimes(bad); err == nil || !strings.Contains(err.Error(), "cpu line") {
			t.Errorf("%q: %v, want an error naming the line", bad, err)
		}
	}
}
