package sandbox

import "golang.org/x/sys/unix"

const arch = unix.AUDIT_ARCH_X86_64

// archAllowed are the calls of amd64 that newer architectures dropped for the *at and p*
// forms the runtime uses there.
var archAllowed = []uintptr{unix.SYS_EPOLL_WAIT, unix.SYS_POLL, unix.SYS_ARCH_PRCTL, unix.SYS_PIPE, unix.SYS_READLINK}
