//go:build amd64 && !race

package packetstream

import (
	"sync/atomic"
	"unsafe"
)

// storeRelease publishes an index in the middle of a batch. On amd64 a plain store is a
// release store (stores are not reordered with older loads and stores), and it does not drain
// the store buffer as the XCHG of an atomic Store does: the stores of the frames and
// descriptors before it, many of them waiting for lines from the other CPU, keep overlapping.
// The race detector cannot see a plain store as synchronisation, so race builds use Store.
func storeRelease(u *atomic.Uint32, v uint32) { *(*uint32)(unsafe.Pointer(u)) = v }
