//go:build !amd64 && !arm64

package sandbox

// arch 0: Confine refuses, naming the architecture it has no filter for.
const arch = 0

var archAllowed []uintptr
