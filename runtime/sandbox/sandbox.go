// Package sandbox confines a component process once it runs: no new privileges (no setuid
// binary or file capability can raise it again) and a seccomp filter that allows the system
// calls a component makes on the descriptors its supervisor hands it (memfds, eventfds, TAP
// and packet sockets, its control socket) and refuses, with EPERM, what would reach the host
// beyond them: opening files, sockets other than Unix ones, new processes, mounts, ptrace.
// The filter covers every thread of the process (TSYNC) and every thread it starts later.
package sandbox

import (
	"fmt"
	"runtime"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// allowed are the system calls of a running component on every architecture: the Go
// runtime's (threads, signals, memory, timers, the network poller), descriptor I/O, Unix
// sockets for gRPC and the control socket, ioctl and socket options for TAP and AF_PACKET.
var allowed = []uintptr{
	unix.SYS_READ, unix.SYS_WRITE, unix.SYS_READV, unix.SYS_WRITEV, unix.SYS_PREAD64, unix.SYS_PWRITE64,
	unix.SYS_CLOSE, unix.SYS_FSTAT, unix.SYS_LSEEK, unix.SYS_FCNTL, unix.SYS_DUP, unix.SYS_DUP3, unix.SYS_IOCTL,
	unix.SYS_MMAP, unix.SYS_MUNMAP, unix.SYS_MPROTECT, unix.SYS_MADVISE, unix.SYS_MREMAP, unix.SYS_BRK, unix.SYS_MINCORE,
	unix.SYS_FTRUNCATE,
	// memfd_create: anonymous memory, as mmap's, that a component may share with a peer over
	// a Unix socket: the vhost-user back end's inflight region, which the protocol has the
	// back end make (GET_INFLIGHT_FD). It reaches nothing of the host's.
	unix.SYS_MEMFD_CREATE,
	// A received descriptor's kind is checked by reading its /proc/self/fd link
	// ("anon_inode:[eventfd]"); a link names a file, it opens none.
	unix.SYS_READLINKAT,
	unix.SYS_RT_SIGACTION, unix.SYS_RT_SIGPROCMASK, unix.SYS_RT_SIGRETURN, unix.SYS_SIGALTSTACK, unix.SYS_TGKILL,
	unix.SYS_EXIT, unix.SYS_EXIT_GROUP, unix.SYS_FUTEX, unix.SYS_SET_ROBUST_LIST, unix.SYS_RSEQ,
	unix.SYS_SCHED_YIELD, unix.SYS_SCHED_GETAFFINITY, unix.SYS_GETTID, unix.SYS_GETPID, unix.SYS_GETPPID,
	unix.SYS_GETUID, unix.SYS_GETEUID, unix.SYS_GETGID, unix.SYS_GETEGID, unix.SYS_PRLIMIT64, unix.SYS_GETRUSAGE,
	unix.SYS_UNAME, unix.SYS_GETRANDOM, unix.SYS_RESTART_SYSCALL,
	unix.SYS_NANOSLEEP, unix.SYS_CLOCK_GETTIME, unix.SYS_CLOCK_NANOSLEEP, unix.SYS_GETTIMEOFDAY,
	unix.SYS_EPOLL_CREATE1, unix.SYS_EPOLL_CTL, unix.SYS_EPOLL_PWAIT, unix.SYS_PPOLL, unix.SYS_PSELECT6,
	unix.SYS_EVENTFD2, unix.SYS_PIPE2, unix.SYS_TIMERFD_CREATE, unix.SYS_TIMERFD_SETTIME,
	unix.SYS_CONNECT, unix.SYS_ACCEPT4, unix.SYS_BIND, unix.SYS_LISTEN, unix.SYS_SHUTDOWN,
	unix.SYS_SENDTO, unix.SYS_RECVFROM, unix.SYS_SENDMSG, unix.SYS_RECVMSG, unix.SYS_SENDMMSG, unix.SYS_RECVMMSG,
	unix.SYS_GETSOCKNAME, unix.SYS_GETPEERNAME, unix.SYS_SETSOCKOPT, unix.SYS_GETSOCKOPT,
}

// Confine sets no-new-privileges and installs the filter on every thread of the process.
// Call it once the process has what it needs from the file system (the time zone is loaded
// here first, for the same reason).
func Confine() error {
	if arch == 0 {
		return fmt.Errorf("sandbox: no seccomp filter for %s", runtime.GOARCH)
	}
	_ = time.Now().Local() // loads /etc/localtime, which the filter would refuse later
	// no_new_privs is a thread's: set it on the thread that installs the filter (which TSYNC
	// then gives every other thread), or the kernel refuses the filter with EACCES.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("sandbox: no_new_privs: %w", err)
	}
	prog := program(append(append([]uintptr{}, allowed...), archAllowed...))
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if _, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC,
		uintptr(unsafe.Pointer(&fprog))); e != 0 {
		return fmt.Errorf("sandbox: seccomp: %w", e)
	}
	return nil
}

// Offsets in struct seccomp_data.
const (
	offNr   = 0
	offArch = 4
	offArg0 = 16 // the low 32 bits of the first argument (little endian)
)

// program is the filter: a call of another architecture kills the process (its numbers mean
// other calls); an allowed call passes; socket passes for AF_UNIX only, clone for a thread
// only (CLONE_THREAD: no new process); clone3, whose flags a filter cannot read, fails ENOSYS,
// which makes glibc's pthread_create (cgo, the race detector) fall back to clone; the rest
// fail EPERM.
func program(calls []uintptr) []unix.SockFilter {
	stmt := func(code uint16, k uint32) unix.SockFilter { return unix.SockFilter{Code: code, K: k} }
	jeq := func(k uint32, jt, jf uint8) unix.SockFilter {
		return unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: k, Jt: jt, Jf: jf}
	}
	const (
		load   = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		ret    = unix.BPF_RET | unix.BPF_K
		allow  = unix.SECCOMP_RET_ALLOW
		kill   = unix.SECCOMP_RET_KILL_PROCESS
		refuse = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
		absent = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
	)
	p := []unix.SockFilter{
		stmt(load, offArch),
		jeq(arch, 1, 0),
		stmt(ret, kill),
		stmt(load, offNr),
	}
	// Each allowed number jumps over the rest of the list and the checks of clone3, socket
	// and clone (9 instructions) to the final ALLOW.
	n := len(calls)
	for i, c := range calls {
		p = append(p, jeq(uint32(c), uint8(n-i+8), 0))
	}
	return append(p,
		jeq(uint32(unix.SYS_CLONE3), 0, 1),
		stmt(ret, absent),
		jeq(uint32(unix.SYS_SOCKET), 0, 2),
		stmt(load, offArg0),
		jeq(unix.AF_UNIX, 4, 3), // to ALLOW, or to the refusal
		jeq(uint32(unix.SYS_CLONE), 0, 2),
		stmt(load, offArg0),
		unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K, K: unix.CLONE_THREAD, Jt: 1, Jf: 0},
		stmt(ret, refuse),
		stmt(ret, allow),
	)
}
