package supervisor

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/nicstack/nicstack/runtime/affinity"
	"github.com/nicstack/nicstack/runtime/component"
)

// Pinned threads (component.PinThread): a component's sandbox refuses sched_setaffinity, so
// that none of its threads leaves the CPUs its placement gave it; the supervisor pins a thread
// on its behalf, only to one of those CPUs, as Genode's parent places a thread within the
// component's affinity space.

// pinThread pins thread tid of process pid to CPU index of cpus, the process's placement
// (modulo its size). A tid that is no thread of pid is refused with ESRCH.
func pinThread(pid int, cpus affinity.Set, tid, index int) error {
	if len(cpus) == 0 {
		return fmt.Errorf("pinning thread %d: the process has no CPUs placed: %w", tid, unix.EINVAL)
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(pid) + "/task/" + strconv.Itoa(tid)); tid <= 0 || err != nil {
		return fmt.Errorf("pinning thread %d: not a thread of process %d: %w", tid, pid, unix.ESRCH)
	}
	var m unix.CPUSet
	m.Set(cpus[index%len(cpus)])
	if err := unix.SchedSetaffinity(tid, &m); err != nil {
		return fmt.Errorf("pinning thread %d of process %d to cpu %d: %w", tid, pid, cpus[index%len(cpus)], err)
	}
	return nil
}

// answerPin pins the thread a PinThread names and answers it. The answer is written past the
// socket's write deadline, which the queue handing sessions sets for its own writes: it is one
// small message, and a component that does not read its socket goes without.
func (p *process) answerPin(tid, index int) {
	msg := component.PinAnswer(tid, pinThread(p.pid, p.cpus, tid, index))
	if rc, err := p.sock.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) { unix.Sendmsg(int(fd), msg, nil, nil, unix.MSG_DONTWAIT) })
	}
}
