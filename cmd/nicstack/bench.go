package main

import (
	"encoding/json"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/nicstack/nicstack/bench"
	"github.com/nicstack/nicstack/bench/driver"
	"github.com/nicstack/nicstack/bench/faults"
	"github.com/nicstack/nicstack/bench/iperf"
	"github.com/nicstack/nicstack/bench/router"
	"github.com/nicstack/nicstack/bench/scale"
	"github.com/nicstack/nicstack/bench/stream"
	"github.com/nicstack/nicstack/bench/vhost"
	"github.com/nicstack/nicstack/runtime/packetstream"
	"github.com/nicstack/nicstack/runtime/supervisor"
)

// benchCmd is the parent of the benchmarks (`nicstack bench stream`, `nicstack bench router`,
// ...). Each subcommand parses its flags and calls its harness in bench/.
var benchCmd = &cobra.Command{
	Use:   "bench",
	Short: "Run a benchmark and print its numbers",
}

func init() {
	benchCmd.AddCommand(benchStreamCmd(), benchStreamPeerCmd(), benchRouterCmd(), benchDriverCmd(), benchIperfCmd(), benchFaultsCmd(), benchScaleCmd(), benchVhostCmd())
	root.AddCommand(benchCmd)
}

func benchStreamCmd() *cobra.Command {
	var (
		o      stream.Options
		cpus   string
		blocks int
	)
	cmd := &cobra.Command{
		Use:   "stream",
		Short: "Packet-stream throughput between two pinned processes, against a bare descriptor ring",
		Long: "stream runs a source and a sink process, pinned to different CPUs, over one packet stream\n" +
			"(memfd + eventfds). The source allocates and writes every frame (claiming the lines of the next\n" +
			"frames ahead with PREFETCHW, and with non-temporal stores from 16 KiB), the sink checks every byte,\n" +
			"both wait event-driven (spin briefly, arm, sleep). Right before each point two processes move\n" +
			"bare descriptors over one busy-polled ring, published every 32, as the reference. Each point is\n" +
			"measured --runs times; the table shows the medians, the ratio is the median of the runs' ratios.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if o.CPUs, err = stream.CPUs(cpus); err != nil {
				return err
			}
			self, err := os.Executable()
			if err != nil {
				return err
			}
			o.Peer = []string{self, "bench", "stream-peer"}
			o.Stream.BulkSize = blocks * packetstream.BlockSize
			return stream.Run(cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	f.IntSliceVar(&o.Sizes, "sizes", []int{64, 1500, 65536}, "frame sizes in bytes")
	f.DurationVar(&o.Time, "time", 2*time.Second, "measuring time per point and run")
	f.IntVar(&o.Runs, "runs", 3, "runs per point; the median is reported")
	f.StringVar(&o.JSON, "json", "", "also write the results to this file as JSON")
	f.IntVar(&o.Batch, "batch", 64, "frames per batch (one Wakeup each)")
	f.IntVar(&o.Stream.QueueSize, "queue", 1024, "entries per queue")
	f.IntVar(&blocks, "blocks", 1024, "bulk buffer size in 1600-byte blocks (frames larger than a block get room for 64)")
	f.BoolVar(&o.Boost, "boost", true, "as root, run each peer in its own scheduling group at nice -20, so that other work on the machine does not share its CPU equally")
	f.BoolVar(&o.Stream.IPAlign, "ip-align", false, "shift frames 2 bytes into their blocks as Genode does (a 64-byte frame then spans two cache lines)")
	f.StringVar(&cpus, "cpus", "", "two CPUs for source and sink, e.g. 0,1 (default: the first two this process may use)")
	return cmd
}

// benchStreamPeerCmd is one side of `bench stream`, which starts two of them.
func benchStreamPeerCmd() *cobra.Command {
	var o stream.PeerOptions
	cmd := &cobra.Command{
		Use:    "stream-peer",
		Short:  "One side of `bench stream` (started by it, with the stream's files as fds 3-5)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return json.NewEncoder(os.Stdout).Encode(stream.RunPeer(o))
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

func benchRouterCmd() *cobra.Command {
	var o router.Options
	cmd := &cobra.Command{
		Use:   "router",
		Short: "nic_perf -> nic_router -> nic_perf against nic_perf -> nic_perf, three processes",
		Long: "router runs Genode's nic_perf router test: one nic_perf sends UDP as fast as its stream takes\n" +
			"it, through nic_router (a udp-forward rule, then NAT) to a second nic_perf that counts what\n" +
			"arrives; in the same run the two nic_perfs are connected directly as the reference. On two\n" +
			"CPUs the sender has the first CPU, the router and the receiver share the second; directly\n" +
			"connected, each nic_perf has a CPU. A run measures the direct reference and both routed modes\n" +
			"one after the other, each in a fresh scenario for --time after a warm-up; the ratio of a run\n" +
			"is routed over that run's direct rate, so that a machine whose speed drifts between runs\n" +
			"compares like with like. The table shows the medians of --runs runs.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return router.Run(cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	f.IntSliceVar(&o.Sizes, "sizes", []int{64, 1500}, "Ethernet frame sizes in bytes")
	f.DurationVar(&o.Time, "time", 2*time.Second, "measuring time per point and run")
	f.IntVar(&o.Runs, "runs", 3, "runs per point; the median is reported")
	f.StringVar(&o.JSON, "json", "", "also write the results to this file as JSON")
	componentFlags(cmd, &o.Components)
	return cmd
}

func benchDriverCmd() *cobra.Command {
	var o driver.Options
	cmd := &cobra.Command{
		Use:   "driver",
		Short: "ipxe_nic against the emulated NIC at 1 Gbit/s line rate both ways, per rx_irq_throttle and tx_batch",
		Long: "driver runs ipxe_nic (CPU 0) and intel_nic_hw (an 82574L at 1 Gbit/s, CPU 1) as separate pinned\n" +
			"processes with a device session between them. A nic_perf serving the driver's Uplink session\n" +
			"sends 1514-byte frames as fast as the driver takes them; a nic_perf at the far end of the cable\n" +
			"sends as fast as the wire carries them. Both nic_perfs run on CPU 1 without spinning, so that\n" +
			"the driver has CPU 0 to itself as in Genode's measurement (router on another CPU).\n" +
			"Per point (rx_irq_throttle 0, 651, 5580 x tx_batch no, yes; tx_batch=no uses descriptor_done TX\n" +
			"interrupts as iPXE does, yes queue_empty) it reports the model's interrupts, TX interrupts and\n" +
			"TX doorbells, each process's CPU from /proc/PID/stat, the frames carried against line rate, and\n" +
			"the frames the device dropped for want of a free RX descriptor.\n\n" +
			"With rx_irq_throttle 0 the model raises an interrupt for the first cause after the driver has\n" +
			"read ICR, as the hardware does; causes before that ride on the outstanding interrupt (counter\n" +
			"irq_causes_while_asserted, -v). So interrupts per frame there measure the driver's round trip\n" +
			"(eventfd wakeup, handler, ICR read), which on a 2-core VM is several frame times.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return driver.Run(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	f.DurationVar(&o.Time, "time", 10*time.Second, "measuring time per point and run")
	f.IntVar(&o.Runs, "runs", 1, "consecutive windows per point; the one of median throughput is reported")
	f.IntSliceVar(&o.Throttles, "rx-irq-throttle", []int{0, 651, 5580}, "the rx_irq_throttle values to measure")
	f.StringSliceVar(&o.Batches, "tx-batch", []string{"no", "yes"}, "the tx_batch values to measure (no, yes)")
	f.DurationVar(&o.Spin, "spin", 2*time.Millisecond, "the model spins for waits shorter than this (frames arrive one by one, ITR is kept to the µs); its CPU stands for hardware")
	f.StringVar(&o.JSON, "json", "", "also write the results to this file as JSON")
	componentFlags(cmd, &o.Components)
	return cmd
}

func benchIperfCmd() *cobra.Command {
	var o iperf.Options
	cmd := &cobra.Command{
		Use:   "iperf SCENARIO",
		Short: "Run an iperf scenario once per driver setting and direction: throughput against each component's CPU",
		Long: "iperf runs SCENARIO once per point of the matrix --rx-irq-throttle x --tx-batch and --direction,\n" +
			"patching the <config> of its ipxe_nic driver, and the iperf test of its guests (the <config\n" +
			"iperf=\"-c ...\"> of a vm) to --time and the direction: rx, the far end sends to the guest (iperf -R);\n" +
			"tx, the guest sends; bidir, both at once (--bidir, Mbit/s of both). --runs N runs the matrix N times in rounds and reports medians. For each\n" +
			"point it reports the guests' iperf result, the CPU load of every component while traffic flowed\n" +
			"(from /proc; the emulated hardware is its own component), the emulated NIC's interrupts per\n" +
			"second, its TX interrupts and TDT doorbells per 1000 frames sent, the packet streams' signals\n" +
			"per 1000 frames, and for rx_irq_throttle=adaptive how long the driver held each latency class.\n" +
			"--latency adds round trips (p50/p99/p99.9 of 1 B and 1 KiB transactions, as `nicstack rr`)\n" +
			"timed by the guest during the test and on the idle path after it, and the ratio of the 1 B p99s;\n" +
			"with --flows 1,4 --direction bidir that is RRUL's shape (bulk up and down, round trips beside).\n" +
			"--latency-guest separate times them in a second guest B (a copy of the client's start, its own\n" +
			"session) while the client runs the bulk test alone: one guest's delay under another's load.\n" +
			"A terminal shows a progress bar on stderr, anything else (and -v) a line per run.\n" +
			"--compare kernel (root) measures the same topology with Linux forwarding between namespaces,\n" +
			"--compare pasta with pasta, in the same invocation, and prints the ratios. Each runs with its\n" +
			"defaults: the kernel's veths at MTU 1500 with their offloads, pasta's TAP at its MTU 65520;\n" +
			"NAME@MTU sets a reference's MTU (kernel@65000,pasta@1500), to compare like with like.\n" +
			"--compare relay (root) joins the two namespaces through two TAPs that this process copies\n" +
			"between, with our TAPs' offloads: the simplest user-space path through TAPs.\n" +
			"--congestion sets the TCP congestion control of every Linux iperf3 (netns guests, references):\n" +
			"a pacing sender (bbr) hands a path of batching components one frame per wakeup, a bursting\n" +
			"one (cubic) several, so a comparison says which it used; the default is the kernel's.\n" +
			"A scenario whose QEMU guest runs guest-scenario (deploy/qemu_e1000e.hid) is patched inside the\n" +
			"guest: the driver's and the guest's components' figures come from the guest's supervisor, CPU\n" +
			"in % of one vCPU, \"guest\" the whole guest's, \"qemu\" QEMU's on the host; --compare linux\n" +
			"runs Linux's e1000e in the same guest in its place, as a row of the tables.\n" +
			"--rate 0,600M paces each bulk TCP flow at iperf3's -b (per stream; with -R the far end's server\n" +
			"paces, as iperf3's does) for every point: below the wire no queue stands, and the round trips\n" +
			"under load show what the path costs a sparse flow without one (0: unpaced, as without --rate;\n" +
			"the --compare references stay unpaced).\n" +
			"--udp-rate N makes the test a UDP stream of N 64-byte datagrams per second instead of bulk TCP.\n" +
			"--ip 4,6 runs every point over IPv4 and over IPv6 (iperf -6 to the far end's address6, the one\n" +
			"beside the IPv4 address a guest's iperf names) and prints each IPv6 point's ratio to IPv4's.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return iperf.Run(ctx, cmd.OutOrStdout(), args[0], o)
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&o.Throttles, "rx-irq-throttle", []string{"0", "651", "5580"}, "the driver's rx_irq_throttle values: ITR intervals (256 ns units) or adaptive")
	f.StringSliceVar(&o.Batches, "tx-batch", []string{"no", "yes"}, "the driver's tx_batch values")
	f.StringSliceVar(&o.FQCodel, "fq-codel", nil, "on, off: run every point with <fq-codel/> in every domain of the nic_router and qdisc=\"fq_codel\" at the embedded far end, and without either (docs/isolation.md), and print the comparison")
	f.StringSliceVar(&o.BQLLimitMax, "bql-limit-max", nil, "bytes, a dimension of the matrix: cap the byte queue limits below the schedulers (the driver's tx_bql_limit_max, the far end's with qdisc=\"fq_codel\") at each, 0 for none: 0,62500,125000")
	f.StringSliceVar(&o.Directions, "direction", []string{"rx"}, "rx (the far end sends to the guest, iperf -R), tx (the guest sends), bidir (both at once, iperf --bidir)")
	f.StringSliceVar(&o.IPs, "ip", []string{"4"}, "the IP versions of the tests: 4, 6 (iperf -6 to the far end's address6); 4,6 prints IPv6/IPv4")
	f.IntVar(&o.Runs, "runs", 1, "runs per point, in rounds over the matrix; the tables show medians")
	f.DurationVar(&o.Time, "time", 10*time.Second, "iperf test time per run, measured")
	f.DurationVar(&o.Omit, "omit", 3*time.Second, "whole seconds at each test's start left out of throughput and the components' CPU (iperf3's -O): TCP's slow start")
	f.StringVar(&o.JSON, "json", "", "also write the points to this file as JSON")
	f.StringVar(&o.Plot, "plot", "", "draw throughput and CPU against the throttle setting into this PNG")
	f.StringSliceVar(&o.Compare, "compare", nil, "also measure the reference paths: kernel, pasta, relay, NAME@MTU, qemu-user, qemu-tap, passt; linux for a guest scenario")
	f.StringSliceVar(&o.Rates, "rate", nil, "each bulk TCP flow's iperf -b (bits/s per stream, iperf3's units: 500M, 1G; 0: unpaced), a dimension of the matrix in both directions: 0,300M,600M; default: the scenario's")
	f.IntVar(&o.UDPRate, "udp-rate", 0, "a UDP stream of this many 64-byte datagrams per second instead of bulk TCP (0: TCP)")
	f.StringVar(&o.Congestion, "congestion", "", "TCP congestion control of every Linux iperf3, the netns guests' and the references' (iperf3 -C): cubic, bbr, ...; default: the kernel's")
	f.BoolVar(&o.Latency, "latency", false, "also time request/response round trips (1 B and 1 KiB, TCP_RR-style) during each test and idle after it")
	f.StringVar(&o.LatencyGuest, "latency-guest", "same", "who times the round trips: same (the guest of the bulk test) or separate (a second guest, a copy of it, while it runs the bulk)")
	f.IntSliceVar(&o.Queues, "queues", nil, "vhost-user queue pairs of the vm and its QEMU guest (queues=N, mq=on, N vCPUs), a dimension of the matrix: 1,2; default: the scenario's")
	f.IntSliceVar(&o.Flows, "flows", nil, "parallel bulk streams per client and direction (iperf -P), a dimension of the matrix: 1,4; default: the scenario's")
	f.StringArrayVar(&o.Affinity, "affinity", nil, "a placement to measure, a dimension of the matrix (repeat the flag): as-written, or \"START=X+W[,Y+H] ...\" giving those starts xpos+width (and ypos+height) in the affinity space")
	componentFlags(cmd, &o.Components)
	return cmd
}

func benchFaultsCmd() *cobra.Command {
	var o faults.Options
	cmd := &cobra.Command{
		Use:   "faults SCENARIO",
		Short: "Kill each component of an iperf scenario with SIGKILL during a test: time to restart, to traffic, flows kept",
		Long: "faults runs SCENARIO once per fault: once the guests' iperf traffic flows it kills one component\n" +
			"(--fault, each start in turn by default) with SIGKILL and watches the run for --observe. It reports\n" +
			"the time from the kill until the component's new process runs, until the guests' sessions move data\n" +
			"again (1 MiB after the restart), the longest pause after that, whether the clients' tests went on\n" +
			"(same process, no test ended) and the errors the guests' iperf tests ended with. The guests' iperf\n" +
			"commands get --rcv-timeout and --snd-timeout of --timeout (a test whose peer died ends after it) and a\n" +
			"test time that outlasts the watch. Restarts need restart=\"yes\" on the scenario's starts.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			_, err := faults.Run(ctx, cmd.OutOrStdout(), args[0], o)
			return err
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&o.Faults, "fault", nil, "the starts to kill, one per run (default: every start)")
	f.DurationVar(&o.Settle, "settle", 2*time.Second, "traffic before the kill")
	f.DurationVar(&o.Observe, "observe", 6*time.Second, "how long each run is watched after the kill")
	f.DurationVar(&o.Timeout, "timeout", 2*time.Second, "the guests' iperf --rcv-timeout and --snd-timeout")
	f.StringVar(&o.JSON, "json", "", "also write the results to this file as JSON")
	componentFlags(cmd, &o.Components)
	return cmd
}

func benchScaleCmd() *cobra.Command {
	var o scale.Options
	cmd := &cobra.Command{
		Use:   "scale",
		Short: "N guests behind one router, each with a TCP stream at once: fairness, memory, leases, idle CPU",
		Long: "scale multiplies the embedded guest of --scenario (the one whose <config iperf=\"-c HOST\"> runs a\n" +
			"client) into N guests vm1..vmN, as many <start>s with the template's affinity and route, and\n" +
			"gives the far end (the embedded guest with iperf=\"-s\") N iperf servers on ports 5201.. with\n" +
			"iperf_servers=\"N\", one per guest, since an iperf server serves one test at a time. Each guest\n" +
			"takes a DHCP lease and runs one TCP stream of --time to its server, all at once (--direction tx:\n" +
			"the guests send; rx: the far end sends, iperf -R). Per N it reports the aggregate throughput\n" +
			"(the sum of the guests' results; the seed's wire is 1 Gbit/s) and Jain's fairness index\n" +
			"(sum x)^2 / (N sum x^2) over the guests' throughputs; every process's PSS from\n" +
			"/proc/PID/smaps_rollup after the streams (the guests' mean and largest); the time from the\n" +
			"scenario's start until the last guest logged its lease; every component's CPU over --idle\n" +
			"with no traffic after the streams, in percent of one CPU (and the supervisor's, this process);\n" +
			"and the router's CPU seconds while the streams ran over the gigabits carried, as percent of\n" +
			"one CPU per Gbit/s. --domains per-guest gives each guest a router domain of its own. Each N runs --runs times, in rounds; the table shows medians, the growth\n" +
			"from the fewest to the most guests and the targets of issue 33.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return scale.Run(ctx, cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Scenario, "scenario", "deploy/sculpt_iperf.hid", "the base scenario: one embedded guest with an iperf client, one with the server")
	f.IntSliceVar(&o.Guests, "guests", []int{1, 8, 32}, "the numbers of guests to measure")
	f.DurationVar(&o.Time, "time", 10*time.Second, "each guest's TCP stream, whole seconds")
	f.DurationVar(&o.Idle, "idle", 10*time.Second, "the idle window after the streams, over which the CPU is measured")
	f.StringVar(&o.Direction, "direction", "tx", "tx (the guests send to the far end) or rx (the far end sends, iperf -R)")
	f.StringVar(&o.Domains, "domains", "shared", "shared: the guests in the base's one domain (the router sends each of its frames to every guest); per-guest: a domain each, with its own /24, DHCP server and NAT")
	f.StringSliceVar(&o.FQCodel, "fq-codel", nil, "on,uplink,off: every number of guests with <fq-codel/> in every domain of the router (a scheduler class per guest at the uplink's egress), in the domains no guest is in (the uplink's), and without, in the same rounds; default: the scenario as written")
	f.StringVar(&o.FarEndRxBuf, "far-end-rx-buf", "", "the far end's rx_buf_size (\"12M\"): the buffer of the stream the wire delivers into, which holds what arrives while the far end waits for the CPU; default Genode's 1600K")
	f.StringSliceVar(&o.FarEndCPU, "far-end-cpu", nil, "scenario,router: every number of guests with the far end where --scenario puts it (the seed's: on the guests' CPU) and with the router's affinity (a CPU no guest runs on: it stands for another machine), in the same rounds; default: the scenario as written")
	f.IntVar(&o.FarEndNice, "far-end-nice", 0, "the nice value of the far end's process (root for < 0): it stands for another machine, and at nice 0 it gets 1/(N+1) of the CPU it shares with N guests")
	f.IntVar(&o.Runs, "runs", 3, "runs per number of guests; the median is reported")
	f.StringVar(&o.JSON, "json", "", "also write the results to this file as JSON")
	f.StringVar(&o.Plot, "plot", "", "draw the figures against the number of guests into this PNG")
	componentFlags(cmd, &o.Components)
	return cmd
}

func benchVhostCmd() *cobra.Command {
	var o vhost.Options
	cmd := &cobra.Command{
		Use:   "vhost",
		Short: "DPDK testpmd front ends through vm -> nic_router -> vm against DPDK's own vhost switch",
		Long: "vhost (root) measures the vm's vhost-user back end with front ends nobody here wrote: DPDK's\n" +
			"dpdk-testpmd (Debian's dpdk-dev) with a virtio-user port sends UDP from 10.0.1.2 to 10.0.2.2\n" +
			"as fast as its ring takes it (--forward-mode=txonly) into one vm, nic_router routes it to a\n" +
			"second vm, and a second testpmd counts what arrives (icmpecho, which answers the router's\n" +
			"ARP). In the same run the reference is DPDK's own vhost switch: testpmd with two net_vhost\n" +
			"ports in io forwarding between the same two front ends. The middle (nic_router and both\n" +
			"vms, or the switch) runs on --middle-cpu, the two front ends on --ends-cpu. The bench\n" +
			"reserves 2 MiB hugepages and mounts a hugetlbfs for the run and undoes both.\n" +
			"Per frame size (without FCS; over 1514 bytes with mergeable RX buffers on both front ends)\n" +
			"and queue count it reports the rate delivered at the sink in Mpps and Gbit/s, the loss\n" +
			"(sent - delivered over sent), every process's CPU from /proc, the middle's CPU per delivered\n" +
			"Mpps, the sink's per-queue counts, and ours over DPDK's. testpmd busy-polls: its CPU is\n" +
			"~100% of its core by design. Each point runs --runs times, both setups per run; the table\n" +
			"shows the medians, the ratios are the medians of the runs' ratios.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return vhost.Run(ctx, cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	f.IntSliceVar(&o.Sizes, "sizes", []int{64, 1500, 9000}, "frame sizes in bytes without FCS (testpmd's --txpkts)")
	f.IntSliceVar(&o.Queues, "queues", []int{1}, "queue pairs of every port")
	f.DurationVar(&o.Time, "time", 5*time.Second, "measuring time per point, setup and run")
	f.IntVar(&o.Runs, "runs", 3, "runs per point; the median is reported")
	f.IntVar(&o.Middle, "middle-cpu", 0, "the CPU of nic_router and the vms, or of DPDK's switch")
	f.IntVar(&o.Ends, "ends-cpu", 1, "the CPU of the two testpmd front ends")
	f.StringVar(&o.JSON, "json", "", "also write the points to this file as JSON")
	f.StringVar(&o.Plot, "plot", "", "draw the delivered rate and CPU per Mpps against the frame size into this PNG")
	f.IntVar(&o.QueueSize, "queue-size", 1024, "entries per virtqueue of the front ends: the frames a front end's ring holds while it waits for its CPU, which the two share")
	f.BoolVar(&o.Boost, "boost", true, "run every measured process's scheduling group (autogroup) at nice -20, so that other work on the machine does not share the measured CPUs equally")
	f.StringVar(&o.Baseline, "baseline", "", "a folder of other component binaries (an older build): run with them as a third setup in every run, and print ours over the baseline")
	componentFlags(cmd, &o.Components)
	return cmd
}

// componentFlags gives cmd --bin and --verbose, the flags of every bench that runs components,
// and fills c from them before it runs.
func componentFlags(cmd *cobra.Command, c *bench.Components) {
	var binDir string
	cmd.Flags().StringVar(&binDir, "bin", "", "folder with component binaries, searched first")
	cmd.Flags().BoolVarP(&c.Verbose, "verbose", "v", false, "show the components' logs")
	cmd.PreRun = func(*cobra.Command, []string) { c.Bins = supervisor.BinDirs(binDir) }
}
