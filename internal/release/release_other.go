//go:build !amd64 || race

// Package release stores a value for readers on other CPUs, who read it with atomic loads,
// as a release store (see the amd64 version).
package release

import "sync/atomic"

// Store32 stores v into u as a release store.
func Store32(u *atomic.Uint32, v uint32) { u.Store(v) }

// Store64 stores v into u as a release store.
func Store64(u *atomic.Uint64, v uint64) { u.Store(v) }
