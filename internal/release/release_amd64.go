//go:build amd64 && !race

// Package release stores a value for readers on other CPUs, who read it with atomic loads,
// as a release store: everything stored before it is visible to a reader who sees it, and
// it does not wait for those stores to complete. On amd64 a plain aligned store is one
// (stores are not reordered with older loads and stores), while sync/atomic's Store is an
// XCHG, a full barrier that drains the store buffer: in the middle of a batch, with the
// stores of frames and descriptors waiting for their cache lines, that costs as much as a
// few frames. The race detector cannot see a plain store as synchronisation, so race builds
// and other architectures use sync/atomic's Store.
package release

import (
	"sync/atomic"
	"unsafe"
)

// Store32 stores v into u as a release store.
func Store32(u *atomic.Uint32, v uint32) { *(*uint32)(unsafe.Pointer(u)) = v }

// Store64 stores v into u as a release store.
func Store64(u *atomic.Uint64, v uint64) { *(*uint64)(unsafe.Pointer(u)) = v }
