//go:build !amd64 || race

package packetstream

import "sync/atomic"

// storeRelease publishes an index in the middle of a batch (see the amd64 version).
func storeRelease(u *atomic.Uint32, v uint32) { u.Store(v) }
