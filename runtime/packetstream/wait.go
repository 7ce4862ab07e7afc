package packetstream

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Endpoint is a Source or a Sink, as a Waiter sees it.
type Endpoint interface {
	ready() bool
	arm()
	disarm()
	base() *endpoint
}

// DefaultSpin is how many times a Waiter polls an endpoint before it arms and sleeps: some
// 50 µs here (a poll of one endpoint costs about 5 ns; a Waiter on n endpoints polls them all
// Spin/n times), Linux's usual busy-poll budget, and
// longer than a signal and a wakeup through the scheduler cost together. Shorter spins let a
// stream of 64 KiB frames, which arrive every 10-20 µs, sleep and signal between frames.
const DefaultSpin = 10000

// shortSleep is a sleep that spinning could have bridged more cheaply: a signal and a wakeup
// cost some microseconds on both sides.
const shortSleep = 50 * time.Microsecond

// A Waiter polls only while polling pays. Its score (0..scoreMax) rises by one when a poll
// finds work or a sleep ends within shortSleep, and falls by longSleepCost when a poll ran out
// into a long sleep; it polls while the score is at least scoreMax/2. Below that it sleeps at
// once, but every probeEvery-th wait polls in full to see whether polling pays again (a sleep
// alone cannot tell: its length includes the wakeup's latency). A 64 KiB stream finds work by
// polling thousands of times per long sleep; a nic_router behind an interrupt-throttled driver
// about once, and a fifth of its CPU went into polls that ran out between bursts.
const (
	scoreMax      = 16
	longSleepCost = 3
	probeEvery    = 8
)

// Waiter lets one goroutine wait on several endpoints at once (a router serves many sessions):
// it spins briefly, then arms each endpoint's flag in shared memory, checks once more, and
// sleeps in epoll_wait on its own epoll instance. That is a blocking system call, so the Go
// scheduler hands the goroutine's P to other goroutines while it sleeps (a pinned component
// with GOMAXPROCS 1 keeps serving its control plane); only the thread waits, and a signal
// wakes it directly rather than through the netpoller (UseNetpoll parks the goroutine in the
// netpoller instead, for a component whose goroutines should share one thread). A Waiter is
// used by one goroutine; Wake and Close may be called from others.
//
// The no-lost-wakeup argument: the sleeper stores its armed flag and then loads the queue
// index; the peer stores the index and then loads the flag. Both stores are atomic swaps
// (the arm in Source and Sink, producer.publish and consumer.publish), sequentially
// consistent in Go's memory model, so at least one of them sees the other's store: either
// the sleeper sees the work and does not block, or the peer sees the flag and signals, and
// the eventfd keeps the signal until the sleeper's epoll_wait collects it.
type Waiter struct {
	// Spin is how many polls a wait starts with before it sleeps; 0 sleeps at once. A waiter
	// whose sleeps keep ending by a signal within shortSleep polls up to 8 times longer (a
	// steady stream whose gaps are a little longer than the spin then needs no signals), and
	// falls back once a sleep is long. Whether it polls at all follows the score (see
	// scoreMax).
	Spin    int
	more    int // extra polls learned from short sleeps
	score   int // 0..scoreMax
	waits   int // waits while not polling, for the probes
	learned int // the Spin that score and more were learned with: setting Spin starts afresh

	eps    []Endpoint
	epfd   int
	waitMu sync.Mutex // held while blocked; Close takes it before closing the fds
	wakeMu sync.Mutex // Wake against Close: never write to a closed (and maybe reused) fd
	wake   int        // eventfd for Wake and Close; -1 once closed
	wakeID int32      // its number as epoll reports it
	woken  atomic.Bool
	closed atomic.Bool
	events [8]unix.EpollEvent
	n      int // events the last epoll_wait returned

	// Netpoll, set before the first Wait, parks the goroutine in Go's netpoller instead of
	// blocking its thread in epoll_wait. See UseNetpoll.
	poll *os.File
	rc   syscall.RawConn
}

// NewWaiter returns a Waiter over eps.
func NewWaiter(eps ...Endpoint) (*Waiter, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("packetstream waiter: epoll_create: %w", err)
	}
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("packetstream waiter: eventfd: %w", err)
	}
	w := &Waiter{Spin: DefaultSpin, score: scoreMax, learned: DefaultSpin, epfd: epfd, wake: wake, wakeID: int32(wake)}
	if err := w.ctl(unix.EPOLL_CTL_ADD, wake); err != nil {
		w.Close()
		return nil, err
	}
	for _, e := range eps {
		if err := w.Add(e); err != nil {
			w.Close()
			return nil, err
		}
	}
	return w, nil
}

// NewSignalWaiter returns a Waiter over eps that sleeps at once (Spin 0) and in Go's netpoller
// (UseNetpoll): the wait of a loop its peers' signals drive, as a Genode component waits for
// its signals and a driver for its interrupt. A spin there keeps the peers that share the
// loop's CPUs from running; in the netpoller the component's goroutines share one thread.
func NewSignalWaiter(eps ...Endpoint) (*Waiter, error) {
	w, err := NewWaiter(eps...)
	if err != nil {
		return nil, err
	}
	w.Spin = 0
	if err := w.UseNetpoll(); err != nil {
		w.Close()
		return nil, err
	}
	return w, nil
}

// UseNetpoll makes Wait park the goroutine in Go's netpoller (the Waiter's epoll instance is
// itself pollable) instead of blocking a thread in epoll_wait. A component with one Go P and
// several waiting goroutines then sleeps on one thread, and the scheduler's monitor does not
// poll every 20 µs to take the P back from a blocked system call.
func (w *Waiter) UseNetpoll() error {
	if w.poll != nil {
		return nil
	}
	if err := unix.SetNonblock(w.epfd, true); err != nil {
		return fmt.Errorf("packetstream waiter: %w", err)
	}
	f := os.NewFile(uintptr(w.epfd), "packetstream-waiter")
	rc, err := f.SyscallConn()
	if err != nil {
		return fmt.Errorf("packetstream waiter: %w", err)
	}
	w.poll, w.rc = f, rc
	return nil
}

func (w *Waiter) ctl(op, fd int) error {
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}
	if err := unix.EpollCtl(w.epfd, op, fd, &ev); err != nil {
		return fmt.Errorf("packetstream waiter: epoll_ctl: %w", err)
	}
	return nil
}

// Add makes Wait return also when e is ready.
func (w *Waiter) Add(e Endpoint) error {
	if err := w.ctl(unix.EPOLL_CTL_ADD, e.base().in); err != nil {
		return err
	}
	w.eps = append(w.eps, e)
	return nil
}

// Remove stops watching e (before e is closed).
func (w *Waiter) Remove(e Endpoint) error {
	for i, x := range w.eps {
		if x == e {
			w.eps = append(w.eps[:i], w.eps[i+1:]...)
			return w.ctl(unix.EPOLL_CTL_DEL, e.base().in)
		}
	}
	return nil
}

// Wake makes the current or next Wait return; any goroutine may call it.
func (w *Waiter) Wake() {
	if !w.woken.Swap(true) {
		w.kick()
	}
}

func (w *Waiter) kick() {
	w.wakeMu.Lock()
	if w.wake >= 0 {
		eventfdWrite(w.wake)
	}
	w.wakeMu.Unlock()
}

// Close ends the Waiter; a Wait in progress returns ErrClosed.
func (w *Waiter) Close() error {
	if w.closed.Swap(true) {
		return nil
	}
	w.kick()
	w.waitMu.Lock()
	defer w.waitMu.Unlock()
	w.wakeMu.Lock()
	unix.Close(w.wake)
	w.wake = -1
	w.wakeMu.Unlock()
	if w.poll != nil {
		return w.poll.Close()
	}
	return unix.Close(w.epfd)
}

func (w *Waiter) anyReady() bool {
	for _, e := range w.eps {
		if e.ready() {
			return true
		}
	}
	return false
}

// Wait returns once an endpoint is ready: a sink has packets (or ack space it waited for), a
// source has acknowledgements it needs (its last Alloc failed, WaitAcked waits, or half a
// queue is in flight) or submit space it waited for; or when Wake was called. It may return early; callers loop.
func (w *Waiter) Wait() error { return w.WaitUntil(time.Time{}) }

// WaitUntil is Wait with a deadline (zero: none); past it, it returns os.ErrDeadlineExceeded.
func (w *Waiter) WaitUntil(deadline time.Time) error {
	if w.learned != w.Spin {
		w.score, w.more, w.learned = scoreMax, 0, w.Spin
	}
	// Spin counts polls of one endpoint: a poll of all of them takes len(eps) of it, so that
	// the spin lasts as long for a router's dozens of sessions as for one stream.
	per := max(len(w.eps), 1)
	spin := 0
	if w.score >= scoreMax/2 || func() bool { w.waits++; return w.waits%probeEvery == 0 }() {
		spin = (w.Spin + w.more) / per
	}
	for i := 0; i < spin; i++ {
		if w.anyReady() || w.woken.Load() {
			w.woken.Store(false)
			if i < w.Spin/per {
				w.score = min(w.score+1, scoreMax)
			} else {
				// Found only by the extension: polling longer than a sleep and a signal
				// cost (behind a throttled driver, polling across the gap between two
				// interrupts' bursts) is no evidence that polling pays.
				w.more /= 2
			}
			return nil
		}
	}
	for _, e := range w.eps {
		e.arm()
	}
	if w.anyReady() || w.woken.Load() {
		w.disarm()
		return nil
	}
	for _, e := range w.eps {
		e.base().ctr.Sleeps.Add(1)
	}
	slept := time.Now()
	err := w.block(deadline)
	w.disarm()
	if err == nil && time.Since(slept) < shortSleep {
		w.more = min(2*w.more+w.Spin, 7*w.Spin)
		w.score = min(w.score+1, scoreMax)
	} else {
		w.more = 0
		if spin > 0 {
			w.score = max(w.score-longSleepCost, 0)
		}
	}
	return err
}

func (w *Waiter) disarm() {
	for _, e := range w.eps {
		e.disarm()
	}
	w.woken.Store(false)
}

// block sleeps in epoll_wait until an eventfd fires, then resets the ones that did.
func (w *Waiter) block(deadline time.Time) error {
	w.waitMu.Lock()
	defer w.waitMu.Unlock()
	if w.closed.Load() {
		return ErrClosed
	}
	var err error
	if w.rc != nil {
		err = w.parkNetpoll(deadline)
	} else {
		err = w.blockThread(deadline)
	}
	if err != nil {
		return err
	}
	if w.closed.Load() {
		return ErrClosed
	}
	for _, ev := range w.events[:w.n] {
		if ev.Fd == w.wakeID {
			var b [8]byte
			unix.RawSyscall(unix.SYS_READ, uintptr(ev.Fd), uintptr(unsafe.Pointer(&b[0])), 8)
			continue
		}
		for _, e := range w.eps {
			if e.base().in == int(ev.Fd) {
				e.base().drain()
			}
		}
	}
	return nil
}

// blockThread blocks the thread in epoll_wait until it reports events.
func (w *Waiter) blockThread(deadline time.Time) error {
	for {
		if w.closed.Load() {
			return ErrClosed
		}
		timeout := -1
		if !deadline.IsZero() {
			d := time.Until(deadline)
			if d <= 0 {
				return os.ErrDeadlineExceeded
			}
			timeout = int((d + time.Millisecond - 1) / time.Millisecond)
		}
		n, err := unix.EpollWait(w.epfd, w.events[:], timeout)
		if err == unix.EINTR || (err == nil && n == 0) {
			continue
		}
		if err != nil {
			return fmt.Errorf("packetstream waiter: epoll_wait: %w", err)
		}
		w.n = n
		return nil
	}
}

// parkNetpoll parks the goroutine until the epoll instance has events, and collects them.
func (w *Waiter) parkNetpoll(deadline time.Time) error {
	w.poll.SetReadDeadline(deadline)
	var werr error
	err := w.rc.Read(func(fd uintptr) bool {
		// Raw: it does not block (timeout 0), and an ordinary system call would wake the
		// scheduler's monitor thread from its deep sleep into polling every 20 µs.
		n, _, errno := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, fd, uintptr(unsafe.Pointer(&w.events[0])), uintptr(len(w.events)), 0, 0, 0)
		switch {
		case errno == unix.EINTR || (errno == 0 && n == 0):
			return false
		case errno != 0:
			werr = fmt.Errorf("packetstream waiter: epoll_wait: %w", errno)
		}
		w.n = int(n)
		return true
	})
	if err == nil {
		err = werr
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return os.ErrDeadlineExceeded
	}
	if err != nil && w.closed.Load() {
		return ErrClosed
	}
	return err
}
