package intel

import "sync/atomic"

// Counters is what the device counts, read at any time from any goroutine.
type Counters struct {
	Interrupts atomic.Uint64 // interrupts raised on the line
	// Interrupts that carried this cause, unmasked: pending when raised or latched before the
	// driver read ICR (one interrupt can carry several).
	IntTXDW, IntTXQE, IntLSC, IntRXT0, IntRXO atomic.Uint64

	Doorbells atomic.Uint64 // writes to RDT, TDT, ICR and IMS: the ones a hypervisor traps
	TDTWrites atomic.Uint64
	RDTWrites atomic.Uint64

	TXDescriptors, TXFrames, TXBytes atomic.Uint64
	RXDescriptors, RXFrames, RXBytes atomic.Uint64

	RXNoDescriptor atomic.Uint64 // frames dropped because no receive descriptor was free
	RXDropped      atomic.Uint64 // frames dropped: link down, receiver off, filtered, too long or short
	TXDropped      atomic.Uint64 // frames dropped: link down, too long, or with a bad descriptor
	BadDescriptors atomic.Uint64 // descriptors or rings outside DMA memory; a corrupt posted-write queue
}
