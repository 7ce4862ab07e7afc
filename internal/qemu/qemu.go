// Package qemu boots nicstack's test guest in QEMU for tests and benchmarks: the image that
// scripts/guest-image.sh builds and caches (Debian's cloud kernel, busybox, the virtio-net
// modules, a static nicstack for iperf), started with the netdev a test names, under KVM when
// /dev/kvm is usable and TCG otherwise. The guest's init takes a DHCP lease on eth0, runs the
// iperf (or command) the kernel command line names and powers off; its console lines
// "NICSTACK-GUEST: ..." are the markers a test waits for.
package qemu

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Binary is the QEMU that runs the guest.
const Binary = "qemu-system-x86_64"

// ImageEnv names a folder holding a prebuilt image (vmlinuz, initrd.img), used instead of
// building one.
const ImageEnv = "NICSTACK_GUEST_IMAGE"

// Image is the guest's kernel and initramfs.
type Image struct {
	Kernel, Initrd string
}

func imageIn(dir string) (Image, error) {
	im := Image{Kernel: filepath.Join(dir, "vmlinuz"), Initrd: filepath.Join(dir, "initrd.img")}
	for _, p := range []string{im.Kernel, im.Initrd} {
		if _, err := os.Stat(p); err != nil {
			return im, fmt.Errorf("guest image: %w", err)
		}
	}
	return im, nil
}

var (
	buildMu sync.Mutex
	built   = map[string]Image{}
)

// BuildImage returns the cached guest image, building it first when an input changed (the
// script's own check; a few seconds when only nicstack changed). modules are kernel modules
// loaded after the virtio-net ones (paths under the kernel's modules folder, without .ko).
func BuildImage(ctx context.Context, modules ...string) (Image, error) {
	return build(ctx, modules)
}

// VFIOModules are the kernel modules that give a guest's PCI device to a user-space driver.
var VFIOModules = []string{"virt/lib/irqbypass", "drivers/vfio/vfio", "drivers/vfio/vfio_iommu_type1",
	"drivers/vfio/vfio_virqfd", "drivers/vfio/pci/vfio-pci-core", "drivers/vfio/pci/vfio-pci"}

// NetfilterModules are the kernel modules of guest-linux-router (scripts/guest-linux-router.sh):
// the veth pair to the vm's namespace and nftables' forwarding filter and masquerade, in the
// order they depend on each other (libcrc32c asks the crypto API for a crc32c, which must be
// loaded already: the guest has no modprobe).
var NetfilterModules = []string{"crypto/crc32c_generic", "lib/libcrc32c",
	"net/ipv4/netfilter/nf_defrag_ipv4", "net/ipv6/netfilter/nf_defrag_ipv6", "net/netfilter/nf_conntrack",
	"net/netfilter/nf_nat", "net/netfilter/nfnetlink", "net/netfilter/nf_tables", "net/netfilter/nft_chain_nat",
	"net/netfilter/nft_ct", "net/netfilter/nft_masq", "drivers/net/veth"}

// BuildScenarioImage is BuildImage for scenarios that run inside the guest: the image also
// holds the seed topology's components, deploy/'s scenarios in /etc/nicstack and the
// guest-scenario command, and loads VFIOModules. With linuxE1000e the kernel is Debian's
// generic one instead of the cloud kernel, with what the reference a user-space driver of
// QEMU's e1000e is measured against needs: Linux's e1000e driver, and for forwarding and NAT
// in Linux's place of nic_router's, nft, guest-linux-router and NetfilterModules (one image
// for both sides, so they boot the same guest).
func BuildScenarioImage(ctx context.Context, linuxE1000e bool) (Image, error) {
	if !linuxE1000e {
		return build(ctx, append([]string{"--components"}, VFIOModules...))
	}
	args := append([]string{"--components", "--netfilter"}, VFIOModules...)
	args = append(append(args, "drivers/net/ethernet/intel/e1000e/e1000e"), NetfilterModules...)
	return build(ctx, args, "NICSTACK_GUEST_KERNEL=amd64")
}

func build(ctx context.Context, modules []string, env ...string) (Image, error) {
	if dir := os.Getenv(ImageEnv); dir != "" {
		return imageIn(dir)
	}
	if os.Getenv("HOME") == "" && os.Getenv("XDG_CACHE_HOME") == "" {
		// A program under the supervisor: it gets no home, and builds nothing.
		return Image{}, errors.New("guest image: no " + ImageEnv + " and no cache folder (HOME): run the supervisor with " +
			ImageEnv + "=$(scripts/guest-image.sh), which a scenario hands its program with <env key=\"" + ImageEnv + "\" open=\"yes\"/>")
	}
	key := strings.Join(append(modules, env...), " ")
	buildMu.Lock()
	defer buildMu.Unlock()
	if im, ok := built[key]; ok {
		return im, nil
	}
	root, err := repoRoot()
	if err != nil {
		return Image{}, err
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, filepath.Join(root, "scripts", "guest-image.sh"), modules...)
	cmd.Stderr = &stderr
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.Output()
	if err != nil {
		return Image{}, fmt.Errorf("scripts/guest-image.sh: %v\n%s", err, stderr.Bytes())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	im, err := imageIn(lines[len(lines)-1])
	if err == nil {
		built[key] = im
	}
	return im, err
}

// repoRoot finds the source tree the script is in: up from the working folder (a test's is
// its package's, a benchmark's the checkout), else where this file was compiled.
func repoRoot() (string, error) {
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if _, file, _, ok := runtime.Caller(0); ok {
		starts = append(starts, filepath.Dir(file))
	}
	for _, d := range starts {
		for ; d != filepath.Dir(d); d = filepath.Dir(d) {
			if _, err := os.Stat(filepath.Join(d, "scripts", "guest-image.sh")); err == nil {
				return d, nil
			}
		}
	}
	return "", errors.New("guest image: scripts/guest-image.sh not found above the working folder (run from the nicstack checkout, or set " + ImageEnv + ")")
}

// AccelEnv, when set to kvm or tcg, picks the accelerator instead of the probe.
const AccelEnv = "NICSTACK_QEMU_ACCEL"

var (
	kvmOnce sync.Once
	kvmOK   bool
)

// KVM reports whether KVM runs the guest here. /dev/kvm opening is not enough: a nested
// hypervisor may hand out a /dev/kvm whose guests spin and never boot (this was seen, with
// -cpu host even aborting on an MSR), so the answer is a probe, a boot of im that must power
// off within a few seconds, kept for the machine's boot in the image cache.
func KVM(im Image) bool {
	switch os.Getenv(AccelEnv) {
	case "kvm":
		return true
	case "tcg":
		return false
	}
	kvmOnce.Do(func() { kvmOK = probeKVM(im) })
	return kvmOK
}

func probeKVM(im Image) bool {
	fd, err := unix.Open("/dev/kvm", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	unix.Close(fd)
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	mark := filepath.Join(filepath.Dir(filepath.Dir(im.Kernel)), "kvm-"+strings.TrimSpace(string(boot)))
	if b, err := os.ReadFile(mark); err == nil {
		return string(b) == "yes"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	ok := false
	if v, err := Start(Config{Image: im, Netdev: "user,id=" + NetID, Run: "true", Accel: "kvm"}, nil); err == nil {
		_, err = v.Wait(ctx)
		v.Kill()
		ok = err == nil
	}
	os.WriteFile(mark, []byte(map[bool]string{true: "yes", false: "no"}[ok]), 0o644)
	return ok
}

// NetID is the id of the guest's -netdev, which Config.Netdev's value must carry.
const NetID = "net0"

// Config is one VM.
type Config struct {
	Image Image
	// Netdev is the -netdev value, e.g. "stream,id=net0,addr.type=unix,addr.path=/run/vm.sock".
	Netdev string
	// Device is the -device of the guest's NIC; empty: virtio-net-pci on NetID.
	Device string
	// Extra comes last: more -object, -chardev or -device options.
	Extra []string
	// MemoryMB is the guest's RAM (256 when 0); CPUs its vCPUs (1 when 0).
	MemoryMB, CPUs int
	// Iperf runs `nicstack iperf` with these arguments once the guest has its lease; else Run,
	// a shell command, when set.
	Iperf, Run string
	// Accel is "kvm" or "tcg"; empty: KVM when it works here (KVM).
	Accel string
	// Under is a command QEMU runs under (ip netns exec NS), which must exec it.
	Under []string
	// IOMMU is the -device of an IOMMU (e.g. intel-iommu,intremap=on,caching-mode=on),
	// given before the NIC, which it then translates.
	IOMMU string
	// Machine is -machine's value (QEMU's default when empty), e.g. q35,kernel-irqchip=split
	// for an intel-iommu with interrupt remapping.
	Machine string
	// Append is more of the kernel's command line (intel_iommu=on, dhcp=no: init takes no
	// lease).
	Append string
}

// Cmdline is the guest kernel's command line for c: the console, and the lease, iperf or
// command its init reads (a libvirt domain's <cmdline> takes it as it is).
func (c Config) Cmdline() (string, error) {
	if strings.ContainsRune(c.Iperf+c.Run+c.Append, '"') {
		return "", fmt.Errorf("guest command %q: no double quotes on the kernel command line", c.Iperf+c.Run+c.Append)
	}
	// no_timer_check: under TCG on a loaded machine the boot's timer check can miss its ticks,
	// and with an intel-iommu's interrupt remapping the kernel then panics ("timer doesn't
	// work through Interrupt-remapped IO-APIC"; seen here at load 8).
	cmdline := "console=ttyS0 quiet panic=-1 random.trust_cpu=on no_timer_check"
	if c.Iperf != "" {
		cmdline += ` iperf="` + c.Iperf + `"`
	}
	if c.Run != "" {
		cmdline += ` run="` + c.Run + `"`
	}
	if c.Append != "" {
		cmdline += " " + c.Append
	}
	return cmdline, nil
}

// Args is QEMU's command line for c, without the binary.
func (c Config) Args() ([]string, error) {
	cmdline, err := c.Cmdline()
	if err != nil {
		return nil, err
	}
	if !strings.Contains(c.Netdev, "id="+NetID) {
		return nil, fmt.Errorf("netdev %q: want id=%s", c.Netdev, NetID)
	}
	accel := c.Accel
	if accel == "" {
		accel = "tcg"
		if KVM(c.Image) {
			accel = "kvm"
		}
	}
	mem, cpus, dev := c.MemoryMB, c.CPUs, c.Device
	if mem == 0 {
		mem = 256
	}
	if cpus == 0 {
		cpus = 1
	}
	if dev == "" {
		dev = "virtio-net-pci,netdev=" + NetID
	}
	args := []string{"-accel", accel, "-m", strconv.Itoa(mem), "-smp", strconv.Itoa(cpus),
		"-nodefaults", "-display", "none", "-serial", "stdio", "-no-reboot",
		"-kernel", c.Image.Kernel, "-initrd", c.Image.Initrd, "-append", cmdline,
		"-netdev", c.Netdev}
	if c.IOMMU != "" {
		args = append(args, "-device", c.IOMMU)
	}
	args = append(args, "-device", dev)
	if c.Machine != "" {
		args = append(args, "-machine", c.Machine)
	}
	return append(args, c.Extra...), nil
}

// Marker starts every line the guest's init prints for its runner.
const Marker = "NICSTACK-GUEST: "

// VM is a running QEMU. Its console (the guest's serial port and QEMU's own messages) is
// kept, and copied to the Console writer given to Start.
type VM struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	lines  []string
	more   chan struct{} // closed and replaced when a line arrives or QEMU ends
	exited bool
	err    error // QEMU's end
	done   chan struct{}
}

// Start boots a VM; console, when not nil, gets a copy of its console as it comes. QEMU runs
// in a process group of its own and dies with its parent.
func Start(c Config, console io.Writer) (*VM, error) {
	args, err := c.Args()
	if err != nil {
		return nil, err
	}
	argv := append(append(c.Under[:len(c.Under):len(c.Under)], Binary), args...)
	v := &VM{cmd: exec.Command(argv[0], argv[1:]...), more: make(chan struct{}), done: make(chan struct{})}
	v.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	out, err := v.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	v.cmd.Stderr = v.cmd.Stdout
	if err := v.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", Binary, err)
	}
	go v.read(out, console)
	return v, nil
}

func (v *VM) read(out io.Reader, console io.Writer) {
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 4<<20) // a guest may print a report on one line
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if console != nil {
			fmt.Fprintln(console, line)
		}
		v.mu.Lock()
		v.lines = append(v.lines, line)
		close(v.more)
		v.more = make(chan struct{})
		v.mu.Unlock()
	}
	err := v.cmd.Wait()
	v.mu.Lock()
	v.exited, v.err = true, err
	close(v.more)
	v.mu.Unlock()
	close(v.done)
}

// Pid is QEMU's process id.
func (v *VM) Pid() int { return v.cmd.Process.Pid }

// Console is everything the VM printed so far.
func (v *VM) Console() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return strings.Join(v.lines, "\n")
}

// WaitMarker waits for the guest's marker line that begins with what (after Marker) and
// returns the rest of it; an error when QEMU ends or ctx does first.
func (v *VM) WaitMarker(ctx context.Context, what string) (string, error) {
	rest, err := v.waitFor(ctx, what)
	return strings.TrimPrefix(rest, what), err
}

// waitFor returns the first marker that begins with one of whats, after Marker.
func (v *VM) waitFor(ctx context.Context, whats ...string) (string, error) {
	seen := 0
	for {
		v.mu.Lock()
		for ; seen < len(v.lines); seen++ {
			// The marker may follow kernel messages on the same console line.
			i := strings.Index(v.lines[seen], Marker)
			if i < 0 {
				continue
			}
			rest := strings.TrimSpace(v.lines[seen][i+len(Marker):])
			for _, w := range whats {
				if strings.HasPrefix(rest, w) {
					v.mu.Unlock()
					return rest, nil
				}
			}
		}
		more, exited, err := v.more, v.exited, v.err
		v.mu.Unlock()
		if exited {
			return "", fmt.Errorf("QEMU ended (%v) before the guest printed %s%q", err, Marker, whats)
		}
		select {
		case <-more:
		case <-ctx.Done():
			return "", fmt.Errorf("waiting for %s%q: %w", Marker, whats, ctx.Err())
		}
	}
}

// Lease waits for the guest's DHCP lease and returns "ADDRESS/LEN via GATEWAY".
func (v *VM) Lease(ctx context.Context) (string, error) {
	rest, err := v.waitFor(ctx, "lease ", "no lease")
	if err == nil && !strings.HasPrefix(rest, "lease ") {
		return "", errors.New("the guest got no DHCP lease")
	}
	return strings.TrimPrefix(rest, "lease "), err
}

// Wait waits for QEMU to end after the guest's command, and returns the command's exit
// status.
func (v *VM) Wait(ctx context.Context) (int, error) {
	rest, err := v.WaitMarker(ctx, "exit ")
	if err != nil {
		return 0, err
	}
	code, err := strconv.Atoi(rest)
	if err != nil {
		return 0, fmt.Errorf("guest exit marker %q: %w", rest, err)
	}
	select {
	case <-v.done:
	case <-ctx.Done():
		return code, fmt.Errorf("QEMU did not end after the guest powered off: %w", ctx.Err())
	}
	return code, nil
}

// Stop ends QEMU: SIGTERM to its process group (QEMU shuts the guest down), SIGKILL after
// grace, and waits for it.
func (v *VM) Stop(grace time.Duration) {
	syscall.Kill(-v.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-v.done:
		return
	case <-time.After(grace):
	}
	v.Kill()
}

// Kill ends QEMU at once (as a crash would) and waits for it.
func (v *VM) Kill() {
	syscall.Kill(-v.cmd.Process.Pid, syscall.SIGKILL)
	<-v.done
}
