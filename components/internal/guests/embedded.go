package guests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nicstack/nicstack/components/internal/guest"
	"github.com/nicstack/nicstack/components/internal/netstack"
	"github.com/nicstack/nicstack/internal/iperf"
	"github.com/nicstack/nicstack/internal/rr"
	"github.com/nicstack/nicstack/netdev"
	"github.com/nicstack/nicstack/netdev/header"
	"github.com/nicstack/nicstack/runtime/component"
	"github.com/nicstack/nicstack/runtime/packetstream"
)

// Counters the embedded guest reports; the bench reads them through the supervisor's status.
type Counters struct {
	Leases *atomic.Uint64 // DHCP leases obtained
	Tests  *atomic.Uint64 // iperf tests finished (as client or server)
	Errors *atomic.Uint64 // iperf tests that failed
	// Timeouts: failed ones that stopped moving (--rcv-timeout, or --snd-timeout's ETIMEDOUT)
	Timeouts *atomic.Uint64
	Bps      *atomic.Uint64 // the last test's bits per second, as the receiver counted them (a server that sent: as it sent them)
	Bytes    *atomic.Uint64 // the bytes behind Bps
	Seconds  *atomic.Uint64 // the last test's duration in milliseconds
	// BidirBps: a bidirectional test's other direction (server to client), as its receiver
	// counted it; 0 after any other test.
	BidirBps *atomic.Uint64

	// Copied from the stack every counterEvery: where a slow test lost its frames.
	Retransmits          *atomic.Uint64 // TCP segments sent again
	RxDropped, TxDropped *atomic.Uint64 // frames the link dropped (malformed in; no room out)
	// Why TCP sent again (netstack.TCPStats): RTOs, SACK or NewReno recoveries, the segments
	// each resent, and how many recoveries the far end's D-SACKs or timestamps showed needless.
	RTOs, SACKRecovery, FastRecovery             *atomic.Uint64
	FastRetransmits, SlowStartRetransmits        *atomic.Uint64
	DSACKSegments, SpuriousRecovery, SpuriousRTO *atomic.Uint64
	SendErrors                                   *atomic.Uint64

	// RRTests counts finished request/response tests (each size of both phases), RRErrors
	// failed ones; RecordRR's counters carry their figures.
	RRTests, RRErrors *atomic.Uint64
	// IPv6Addresses counts the IPv6 addresses in use: link-local, static and SLAAC (the log
	// names each as it comes and goes).
	IPv6Addresses *atomic.Uint64
	// qdisc="fq_codel": frames CoDel or the scheduler's limit dropped, frames it marked CE,
	// frames the stream's buffer had no room for.
	Qdisc qdiscCounters
	get   func(string) *atomic.Uint64
}

// counterEvery is how often the stack's own counters are copied into Counters while frames
// pass; an idle guest copies them less and less often, down to every idleCounterEvery, so
// that 32 idle guests cost next to no CPU together (bench scale's idle figure).
const (
	counterEvery     = 250 * time.Millisecond
	idleCounterEvery = 4 * time.Second
)

// NewCounters makes the counters with get (the component's c.Counter).
func NewCounters(get func(string) *atomic.Uint64) *Counters {
	return &Counters{Leases: get("dhcp_leases"), Tests: get("iperf_tests"), Errors: get("iperf_errors"), Timeouts: get("iperf_timeouts"),
		Bps: get("iperf_bits_per_second"), Bytes: get("iperf_bytes"), Seconds: get("iperf_ms"),
		BidirBps:    get("iperf_bidir_reverse_bits_per_second"),
		Retransmits: get("tcp_retransmits"), RxDropped: get("link_rx_dropped"), TxDropped: get("link_tx_dropped"),
		RTOs: get("tcp_rtos"), SACKRecovery: get("tcp_sack_recoveries"), FastRecovery: get("tcp_fast_recoveries"),
		FastRetransmits: get("tcp_fast_retransmits"), SlowStartRetransmits: get("tcp_slow_start_retransmits"),
		DSACKSegments: get("tcp_dsack_segments"), SpuriousRecovery: get("tcp_spurious_recoveries"), SpuriousRTO: get("tcp_spurious_rtos"),
		SendErrors: get("tcp_send_errors"),
		RRTests:    get("rr_tests"), RRErrors: get("rr_errors"), IPv6Addresses: get("ipv6_addresses"),
		Qdisc: qdiscCounters{Dropped: get("qdisc_dropped"), Marked: get("qdisc_marked"), NoRoom: get("qdisc_no_room")}, get: get}
}

// store copies the stack's TCP counters.
func (c *Counters) store(t netstack.TCPStats) {
	c.Retransmits.Store(t.Retransmits)
	c.RTOs.Store(t.Timeouts)
	c.SACKRecovery.Store(t.SACKRecovery)
	c.FastRecovery.Store(t.FastRecovery)
	c.FastRetransmits.Store(t.FastRetransmits)
	c.SlowStartRetransmits.Store(t.SlowStartRetransmits)
	c.DSACKSegments.Store(t.DSACKSegments)
	c.SpuriousRecovery.Store(t.SpuriousRecovery)
	c.SpuriousRTO.Store(t.SpuriousRTO)
	c.SendErrors.Store(t.SendErrors)
}

// RecordRR counts a request/response test of phase ("idle", or "load" during the iperf
// test) as rr_PHASE_SIZE_{p50,p99,p999}_ns and rr_PHASE_SIZE_transactions.
func (c *Counters) RecordRR(phase string, r rr.Result) {
	name := fmt.Sprintf("rr_%s_%d_", phase, r.Size)
	c.get(name + "p50_ns").Store(uint64(r.P50))
	c.get(name + "p99_ns").Store(uint64(r.P99))
	c.get(name + "p999_ns").Store(uint64(r.P999))
	c.get(name + "transactions").Store(uint64(r.Transactions))
	c.RRTests.Add(1)
}

// Record counts a finished test.
func (c *Counters) Record(rep *iperf.Report) {
	if rep.Error != "" {
		c.Errors.Add(1)
	}
	if iperf.TimedOut(rep.Err) {
		c.Timeouts.Add(1)
	}
	r := rep.Measured()
	c.Bps.Store(uint64(r.BitsPerSecond))
	c.Bytes.Store(r.Bytes)
	c.Seconds.Store(uint64(r.Seconds * 1000))
	var back uint64
	if rev := rep.End.SumReceivedBidirReverse; rev != nil {
		back = uint64(rev.BitsPerSecond)
	}
	c.BidirBps.Store(back)
	c.Tests.Add(1)
}

// Host is an embedded guest: a netstack host on one session, with a static address or one
// from DHCP, running iperf as its config says. It is the Go API the component wraps: tests
// attach it to heap sessions with Attach.
type Host struct {
	cfg  guest.Config
	env  env
	ctr  *Counters
	st   *netstack.Stack
	port atomic.Pointer[Port]

	cancel context.CancelFunc
	done   sync.WaitGroup

	addrs6 map[netip.Prefix]bool // the IPv6 addresses in use; the stack's OnAddress alone touches it
}

// env is what a guest needs of its component: logging, and files written for it.
type env interface {
	Info(msg string, args ...any)
	Warn(msg string, args ...any)
	WriteFile(path string, data []byte)
}

// NewHost builds the stack and starts the guest's work (DHCP, then iperf), which waits for a
// session to be attached.
func NewHost(cfg guest.Config, ctr *Counters, env env) (*Host, error) {
	h := &Host{cfg: cfg, env: env, ctr: ctr, addrs6: map[netip.Prefix]bool{}}
	st, err := netstack.New(netstack.Config{MAC: cfg.MAC, MTU: cfg.MTU, Offload: cfg.Offload, Address: cfg.Address, Gateway: cfg.Gateway,
		Address6: cfg.Address6, Gateway6: cfg.Gateway6, OnAddress: h.addressEvent},
		netstack.OutboundFunc(h.writeFrames))
	if err != nil {
		return nil, err
	}
	h.st = st
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	h.done.Add(2)
	go func() {
		defer h.done.Done()
		h.run(ctx)
	}()
	go func() {
		defer h.done.Done()
		h.copyCounters(ctx)
	}()
	return h, nil
}

// addressEvent logs an IPv6 address that came into use (link-local, static, SLAAC) or went
// out of it, and counts those in use.
func (h *Host) addressEvent(ev netstack.AddressEvent) {
	if ev.Ready {
		h.addrs6[ev.Prefix] = true
		h.env.Info("ipv6 address", "address", ev.Prefix)
	} else {
		delete(h.addrs6, ev.Prefix)
		h.env.Warn("ipv6 address not in use", "address", ev.Prefix, "reason", ev.Reason)
	}
	h.ctr.IPv6Addresses.Store(uint64(len(h.addrs6)))
}

func (h *Host) copyCounters(ctx context.Context) {
	every := counterEvery
	t := time.NewTimer(every)
	defer t.Stop()
	var frames uint64
	for {
		h.ctr.store(h.st.TCPStats())
		st := h.st.Stats()
		h.ctr.RxDropped.Store(st.RxDropped.Load())
		h.ctr.TxDropped.Store(st.TxDropped.Load())
		if now := st.RxFrames.Load() + st.TxFrames.Load() + st.RxDropped.Load() + st.TxDropped.Load(); now != frames {
			frames, every = now, counterEvery
		} else {
			every = min(2*every, idleCounterEvery)
		}
		t.Reset(every)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Stack is the host's stack.
func (h *Host) Stack() *netstack.Stack { return h.st }

func (h *Host) writeFrames(frames []netstack.Frame) int {
	p := h.port.Load()
	if p == nil {
		return 0 // no link: dropped, as on a cable pulled out
	}
	return p.WriteFrames(frames)
}

// Attach binds the host to a session's streams (link up), and solicits routers anew, as
// Linux does on a link up: those the stack sent before had no link.
func (h *Host) Attach(out *packetstream.Source, in *packetstream.Sink) error {
	var p *Port
	var err error
	if h.cfg.Qdisc == guest.QdiscFQCodel {
		p, err = NewQueuedPort(out, in, h.st.DeliverFrames, h.cfg.MTU+header.EthLen, h.cfg.TxBQLLimitMax, h.ctr.Qdisc)
	} else {
		p, err = NewPort(out, in, h.st.DeliverFrames)
	}
	if err != nil {
		return err
	}
	if old := h.port.Swap(p); old != nil {
		old.Close()
	}
	h.st.SolicitRouters()
	return nil
}

// Queue is what waits in the host's qdisc (qdisc="fq_codel"), the status's "fq-codel" hop.
func (h *Host) Queue() netdev.Depth {
	if p := h.port.Load(); p != nil {
		return p.Queue()
	}
	return netdev.Depth{}
}

// Detach unbinds the session (link down); it is not touched once Detach returns.
func (h *Host) Detach() {
	if p := h.port.Swap(nil); p != nil {
		p.Close()
	}
}

// Close stops the guest's work and its stack.
func (h *Host) Close() {
	h.cancel()
	h.Detach()
	h.st.Close()
	h.done.Wait()
}

// run does the guest's work: without a static IPv4 address it asks DHCP first, and its tests
// wait for the lease, unless they are IPv6's alone (ipv6Only), which start at once while
// DHCP goes on beside them.
func (h *Host) run(ctx context.Context) {
	if !h.cfg.Address.IsValid() {
		if !ipv6Only(h.cfg) {
			if !h.dhcp(ctx) {
				return // closed before a lease came
			}
		} else {
			h.done.Add(1)
			go func() {
				defer h.done.Done()
				h.dhcp(ctx)
			}()
		}
	}
	if c := h.cfg.RR; c != nil && c.Server {
		ln, err := h.st.Listen(c.Network(), fmt.Sprintf(":%d", c.Port))
		if err != nil {
			h.env.Warn("rr server", "err", err)
			return
		}
		h.done.Add(1)
		go func() {
			defer h.done.Done()
			if err := rr.Serve(ctx, h.st, ln); err != nil && ctx.Err() == nil {
				h.env.Warn("rr server", "err", err)
			}
		}()
	}
	cmd := h.cfg.Iperf
	switch {
	case cmd == nil && h.cfg.RRLoad > 0:
		// Beside another guest's test, started as this guest started (the bench's guest B);
		// the idle round trips wait until that test has ended.
		end := time.Now().Add(h.cfg.RRLoadOmit + h.cfg.RRLoad + rrLoadEnd)
		for _, r := range h.rrDuring(ctx, h.cfg.RRLoadOmit, h.cfg.RRLoad)() {
			h.recordRR("load", r)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Until(end)):
		}
	case cmd == nil:
	case cmd.Server:
		h.serveIperf(ctx, cmd)
	default:
		select { // iperf_start: with other guests' tests
		case <-ctx.Done():
		case <-time.After(time.Until(h.cfg.IperfStart)):
		}
		deadline := time.Now().Add(guest.ClientRetry)
		for ctx.Err() == nil {
			cfg := cmd.ClientConfig(h.st)
			during := h.rrDuring(ctx, time.Duration(cfg.Omit)*time.Second, cfg.Duration)
			rep, err := iperf.RunClient(ctx, cfg)
			loaded := during()
			var ie *iperf.Error
			unreachable := errors.As(err, &ie) && (ie.Code == iperf.CodeConnect || ie.Code == iperf.CodeAccessDenied)
			if !unreachable || time.Now().After(deadline) {
				if rep == nil {
					rep = &iperf.Report{Error: err.Error(), Err: err}
				}
				for _, r := range loaded {
					h.recordRR("load", r)
				}
				h.report(rep)
				break
			}
			h.env.Info("iperf server not reachable or busy yet", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(guest.RetryEvery):
			}
		}
	}
	if c := h.cfg.RR; c != nil && !c.Server {
		h.rrIdle(ctx, c)
	}
}

// dhcp obtains a lease and keeps it renewed in the background; false: ctx ended first.
func (h *Host) dhcp(ctx context.Context) bool {
	lease, err := h.st.RunDHCP(ctx)
	if err != nil {
		return false
	}
	h.ctr.Leases.Add(1)
	h.env.Info("dhcp lease", "address", lease.Address, "gateway", lease.Gateway, "lease", lease.Duration)
	h.done.Add(1)
	go func() {
		defer h.done.Done()
		if err := h.st.KeepLease(ctx, lease); err != nil && ctx.Err() == nil {
			h.env.Warn("dhcp lease lost", "err", err)
		}
	}()
	return true
}

// ipv6Only says whether the guest has tests and all are IPv6's (-6, or an IPv6 target), so
// that they need no DHCP lease.
func ipv6Only(cfg guest.Config) bool {
	v6 := func(version6 bool, target string) bool {
		a, err := netip.ParseAddr(target)
		return version6 || (err == nil && a.Is6() && !a.Is4In6())
	}
	if c := cfg.Iperf; c != nil && !v6(c.Version6, c.Client) {
		return false
	}
	if c := cfg.RR; c != nil && !v6(c.Version6, c.Client) {
		return false
	}
	return cfg.Iperf != nil || cfg.RR != nil
}

// rrResult is one size's request/response test.
type rrResult struct {
	rr.Result
	err error
}

// rrDuring starts the rr client's test, if the config has one, during an iperf test that
// starts now and measures d after omit: from the end of omit, or of its first second
// (connection, slow start), each size for an equal share of the rest, less a last second.
// The function returned waits for it (an iperf test that ended early does not cut it short: a
// loaded machine may have started it late) and says what it measured.
func (h *Host) rrDuring(ctx context.Context, omit, d time.Duration) func() []rrResult {
	c := h.cfg.RR
	lead := max(omit, time.Second)
	if c == nil || c.Server || omit+d-time.Second-lead <= 0 {
		return func() []rrResult { return nil }
	}
	done := make(chan []rrResult, 1)
	go func() {
		var out []rrResult
		start := time.Now().Add(lead)
		share := (omit + d - time.Second - lead) / time.Duration(len(c.Sizes))
		select {
		case <-ctx.Done():
		case <-time.After(time.Until(start)):
			for i, size := range c.Sizes {
				r, err := rr.Run(ctx, h.st, c.Network(), c.Address(), size, start.Add(time.Duration(i+1)*share))
				out = append(out, rrResult{r, err})
			}
		}
		done <- out
	}()
	return func() []rrResult { return <-done }
}

// rrLoadEnd is how long after its times another guest's test (rr_load_sec) may still run:
// its connection and its results' exchange, on a loaded machine.
const rrLoadEnd = 2 * time.Second

// rrIdleGap is how long the line stays quiet before the idle test: long enough for adaptive
// moderation to see a quiet interval, as a request after a pause would.
const rrIdleGap = 300 * time.Millisecond

// rrIdle runs the rr client's test on the idle path, each size in turn, retrying while the
// server is not reachable yet.
func (h *Host) rrIdle(ctx context.Context, c *rr.Command) {
	select {
	case <-ctx.Done():
		return
	case <-time.After(rrIdleGap):
	}
	deadline := time.Now().Add(guest.ClientRetry)
	for _, size := range c.Sizes {
		for ctx.Err() == nil {
			r, err := rr.Run(ctx, h.st, c.Network(), c.Address(), size, time.Now().Add(c.Time))
			if err == nil || time.Now().After(deadline) {
				h.recordRR("idle", rrResult{r, err})
				break
			}
			select {
			case <-ctx.Done():
			case <-time.After(guest.RetryEvery):
			}
		}
	}
}

// recordRR logs and counts one size's test.
func (h *Host) recordRR(phase string, r rrResult) {
	if r.err != nil {
		h.ctr.RRErrors.Add(1)
		h.env.Warn("rr", "phase", phase, "bytes", r.Size, "err", r.err)
		return
	}
	h.ctr.RecordRR(phase, r.Result)
	h.env.Info("rr result", "phase", phase, "result", r.Result.String())
}

// report logs a finished test, counts it and writes the JSON file the config names.
func (h *Host) report(rep *iperf.Report) {
	h.ctr.Record(rep)
	r := rep.Measured()
	h.env.Info("iperf result", "mbit_per_s", fmt.Sprintf("%.1f", r.BitsPerSecond/1e6), "bytes", r.Bytes,
		"seconds", fmt.Sprintf("%.2f", r.Seconds), "error", rep.Error)
	if h.cfg.Report == "" && !(h.cfg.Iperf != nil && h.cfg.Iperf.JSON) {
		return
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		h.env.Warn("iperf report", "err", err)
		return
	}
	if h.cfg.Report == "" {
		fmt.Fprintf(os.Stderr, "%s\n", b) // -J: the JSON goes to the log, as iperf3 prints it
		return
	}
	h.env.WriteFile(h.cfg.Report, append(b, '\n'))
}

// componentEnv is a guest's env in a component: its log, and the supervisor writing files.
type componentEnv struct{ c *component.Component }

func (e componentEnv) Info(msg string, args ...any)       { e.c.Log.Info(msg, args...) }
func (e componentEnv) Warn(msg string, args ...any)       { e.c.Log.Warn(msg, args...) }
func (e componentEnv) WriteFile(path string, data []byte) { e.c.WriteFile(path, data) }

// Embedded is the component handler of an embedded guest (remote_host, and vm with
// guest="embedded"): it requests its one session when first configured and attaches the
// host to it whenever it is up. Later config changes are logged and wait for a restart.
type Embedded struct {
	c       *component.Component
	host    *Host
	session uint64 // the session the host is attached to
}

// NewEmbedded returns the handler.
func NewEmbedded(c *component.Component) *Embedded { return &Embedded{c: c} }

func (e *Embedded) Configure(typed any) error {
	if e.host != nil {
		e.c.Log.Warn("config changed: the guest keeps its config until it restarts")
		return nil
	}
	cfg, err := component.ConfigOf[guest.Config](typed)
	if err != nil {
		return err
	}
	if cfg.Guest != "embedded" {
		return fmt.Errorf("guest=%q is not an embedded guest", cfg.Guest)
	}
	if e.host, err = NewHost(cfg, NewCounters(e.c.Counter), componentEnv{e.c}); err != nil {
		return err
	}
	e.c.Queue("stack tx", e.host.Stack().Queue)
	if cfg.Qdisc == guest.QdiscFQCodel {
		e.c.Queue("fq-codel", e.host.Queue)
	}
	e.c.Log.Info("embedded guest", "config", cfg.String(), "address", cfg.Address, "address6", cfg.Address6)
	e.c.Request(cfg.Session, cfg.Label, sessionArgs(cfg), cfg.TX, cfg.RX)
	return nil
}

// sessionArgs are the request's arguments: an Uplink client names the MAC of the wire's end.
func sessionArgs(cfg guest.Config) map[string]string {
	if cfg.Session != "Uplink" {
		return nil
	}
	return map[string]string{"mac": cfg.UplinkMAC.String()}
}

func (e *Embedded) Open(s *component.Session) error {
	if s.Client == nil {
		return errors.New("the embedded guest serves no sessions")
	}
	e.c.Log.Info("link up", "session", s.ID, "label", s.Label)
	if err := e.host.Attach(s.Client.TX, s.Client.RX); err != nil {
		return err
	}
	e.session = s.ID
	return nil
}

// Close takes the link down only when it is the attached session that closed: the old session
// of a restarted server may close after its new one opened.
func (e *Embedded) Close(s *component.Session) {
	if s.ID != e.session {
		return
	}
	e.host.Detach()
	e.session = 0
	e.c.Log.Info("link down", "session", s.ID)
}

// Stop ends the guest's work and its stack (its DHCP client, iperf, timers).
func (e *Embedded) Stop() {
	if e.host != nil {
		e.host.Close()
	}
}
