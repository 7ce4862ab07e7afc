package intel

import "sync/atomic"

// Counters is what the device counts, read at any time from any goroutine. The fields point
// to counters the caller may own (a component's named counters), so they outlive one device.
type Counters struct {
	Interrupts *atomic.Uint64 // interrupts raised on the line
	// Interrupts that carried this cause, unmasked: pending when raised or latched before the
	// driver read ICR (one interrupt can carry several).
	IntTXDW, IntTXQE, IntLSC, IntRXT0, IntRXO *atomic.Uint64
	// Why a cause did not raise an interrupt of its own: CausesAsserted counts unmasked cause
	// events (a frame written back, the queue emptied) that came while the previous interrupt
	// was outstanding, the driver not having read ICR yet; ITRHeld counts interrupts the ITR
	// interval held back. With ITR 0, interrupts + CausesAsserted is every cause event.
	CausesAsserted, ITRHeld *atomic.Uint64

	Doorbells *atomic.Uint64 // writes to RDT, TDT, ICR and IMS: the ones a hypervisor traps
	TDTWrites *atomic.Uint64
	RDTWrites *atomic.Uint64

	TXDescriptors, TXFrames, TXBytes *atomic.Uint64
	RXDescriptors, RXFrames, RXBytes *atomic.Uint64

	RXNoDescriptor *atomic.Uint64 // frames dropped because no receive descriptor was free
	RXDropped      *atomic.Uint64 // frames dropped: link down, receiver off, filtered, too long or short
	TXDropped      *atomic.Uint64 // frames dropped: link down, too long, or with a bad descriptor
	BadDescriptors *atomic.Uint64 // descriptors or rings outside DMA memory; a corrupt posted-write queue

	// 802.3x PAUSE frames from the link partner that the device honoured (the 82574's XOFFRXC
	// and XONRXC), and the microseconds its transmitter stood paused.
	XOFFReceived, XONReceived, TXPausedTime *atomic.Uint64
}

// NewCounters makes counters whose storage get returns by name (component.Component.Counter);
// nil get: counters of their own.
func NewCounters(get func(name string) *atomic.Uint64) *Counters {
	if get == nil {
		get = func(string) *atomic.Uint64 { return new(atomic.Uint64) }
	}
	return &Counters{
		Interrupts: get("interrupts"),
		IntTXDW:    get("irq_txdw"), IntTXQE: get("irq_txqe"), IntLSC: get("irq_lsc"),
		IntRXT0: get("irq_rxt0"), IntRXO: get("irq_rxo"),
		CausesAsserted: get("irq_causes_while_asserted"), ITRHeld: get("irq_itr_held"),
		Doorbells: get("doorbells"), TDTWrites: get("tdt_writes"), RDTWrites: get("rdt_writes"),
		TXDescriptors: get("tx_descriptors"), TXFrames: get("tx_frames"), TXBytes: get("tx_bytes"),
		RXDescriptors: get("rx_descriptors"), RXFrames: get("rx_frames"), RXBytes: get("rx_bytes"),
		RXNoDescriptor: get("rx_no_descriptor"), RXDropped: get("rx_dropped"),
		TXDropped: get("tx_dropped"), BadDescriptors: get("bad_descriptors"),
		XOFFReceived: get("xoff_rx"), XONReceived: get("xon_rx"), TXPausedTime: get("tx_paused_us"),
	}
}
