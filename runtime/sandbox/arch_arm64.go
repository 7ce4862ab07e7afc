package sandbox

import "golang.org/x/sys/unix"

const arch = unix.AUDIT_ARCH_AARCH64

var archAllowed []uintptr
