package intel

import (
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// deadlineTimer wakes Run at its next deadline to the kernel's high-resolution timer. Go's
// timers do not: with nothing else to do, a process sleeps in the netpoller with a
// millisecond timeout, rounded up, so every ITR interval below 1 ms came out at ~1.1 ms
// and 1.43 ms (5580) at ~2.2 ms. A timerfd wakes the netpoller by becoming readable.
type deadlineTimer struct {
	C  chan struct{} // receives once per expiry (coalesced)
	f  *os.File      // the timerfd; nil: it could not be made, and fallback serves
	fd int

	fallback *time.Timer
}

func newDeadlineTimer() *deadlineTimer {
	t := &deadlineTimer{C: make(chan struct{}, 1)}
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		t.fallback = time.AfterFunc(time.Hour, t.fire)
		return t
	}
	t.fd, t.f = fd, os.NewFile(uintptr(fd), "timerfd")
	go func() {
		var buf [8]byte
		for {
			if _, err := t.f.Read(buf[:]); err != nil {
				return // closed
			}
			t.fire()
		}
	}()
	return t
}

func (t *deadlineTimer) fire() {
	select {
	case t.C <- struct{}{}:
	default:
	}
}

// Reset arms the timer to expire once, d from now; an expiry still in C may wake the caller
// early, which then finds nothing due.
func (t *deadlineTimer) Reset(d time.Duration) {
	if t.f == nil {
		t.fallback.Reset(d)
		return
	}
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(int64(max(d, time.Microsecond)))} // 0 would disarm it
	if err := unix.TimerfdSettime(t.fd, 0, &spec, nil); err != nil {
		t.fire() // the caller polls now rather than sleeping without a deadline
	}
}

// Stop releases the timer.
func (t *deadlineTimer) Stop() {
	if t.f == nil {
		t.fallback.Stop()
		return
	}
	t.f.Close()
}
