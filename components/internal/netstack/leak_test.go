package netstack

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/nicstack/nicstack/internal/iperf"
)

// TestCloseLeavesNoGoroutines matters for the VM component, which rebuilds its stack when its
// session is re-established.
func TestCloseLeavesNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	for i := 0; i < 3; i++ {
		a, b := newPair(t, false, false)
		ln, err := b.Listen("tcp", ":7")
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			if c, err := ln.Accept(); err == nil {
				c.Close()
			}
		}()
		c, err := a.DialContext(context.Background(), "tcp", "198.18.0.2:7", iperf.Options{})
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		ln.Close()
		a.Close()
		b.Close()
	}
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<16)
		t.Fatalf("%d goroutines before, %d after closing\n%s", before, n, buf[:runtime.Stack(buf, true)])
	}
}
