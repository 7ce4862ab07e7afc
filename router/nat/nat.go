// Package nat allocates the router's source ports (and ICMP query IDs) at one domain from the
// IANA dynamic range 49152-65535, and counts each translated domain's share against its quota.
package nat

// First and Last bound the dynamic range.
const (
	First = 49152
	Last  = 65535
	size  = Last - First + 1
)

// Ports is the port space of one protocol at one domain.
type Ports struct {
	used [size / 64]uint64
	next int // where the round-robin search resumes, so that a freed port is reused last
	n    int
}

// Alloc returns a free port, or false when all 16384 are in use.
func (p *Ports) Alloc() (uint16, bool) {
	if p.n == size {
		return 0, false
	}
	for i := 0; i < size; i++ {
		j := (p.next + i) % size
		if p.used[j/64]&(1<<(j%64)) == 0 {
			p.used[j/64] |= 1 << (j % 64)
			p.next = (j + 1) % size
			p.n++
			return uint16(First + j), true
		}
	}
	return 0, false
}

// Take marks port used (a link state carried over a reconfiguration); false if it was taken
// or is outside the range.
func (p *Ports) Take(port uint16) bool {
	if port < First {
		return false
	}
	j := int(port) - First
	if p.used[j/64]&(1<<(j%64)) != 0 {
		return false
	}
	p.used[j/64] |= 1 << (j % 64)
	p.n++
	return true
}

// Free returns port to the space.
func (p *Ports) Free(port uint16) {
	if port < First {
		return
	}
	j := int(port) - First
	if p.used[j/64]&(1<<(j%64)) != 0 {
		p.used[j/64] &^= 1 << (j % 64)
		p.n--
	}
}

// InUse is the number of allocated ports.
func (p *Ports) InUse() int { return p.n }
