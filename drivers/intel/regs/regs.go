// Package regs is the register map of the Intel gigabit NICs nicstack drives and emulates
// (82574L / e1000e layout): register offsets and bits, the legacy descriptor format, and the
// posted-write transport through which a driver in one process reaches a device in another.
// It is what the driver (drivers/ipxe) and the emulation (drivers/intel) agree on, and
// nothing of either: no device model, no driver logic.
package regs

// Register offsets in the register page (BAR0), as in the 82574L datasheet.
const (
	CTRL   = 0x0000 // device control
	STATUS = 0x0008 // device status (read only)
	ICR    = 0x00C0 // interrupt cause read: read-to-clear, write-1-to-clear
	ITR    = 0x00C4 // interrupt throttling: minimum interval in 256 ns units, 0 = off
	ICS    = 0x00C8 // interrupt cause set (software-raised causes)
	IMS    = 0x00D0 // interrupt mask set: writing 1s enables causes; reads the mask
	IMC    = 0x00D8 // interrupt mask clear: writing 1s disables causes
	RCTL   = 0x0100 // receive control
	TCTL   = 0x0400 // transmit control
	RDBAL  = 0x2800 // receive descriptor base, low 32 bits
	RDBAH  = 0x2804
	RDLEN  = 0x2808 // receive ring length in bytes (a multiple of 128)
	RDH    = 0x2810 // receive head (owned by the device)
	RDT    = 0x2818 // receive tail (owned by the driver)
	TDBAL  = 0x3800
	TDBAH  = 0x3804
	TDLEN  = 0x3808
	TDH    = 0x3810
	TDT    = 0x3818
	RXCSUM = 0x5000 // receive checksum offload control
	RFCTL  = 0x5008 // receive filter control: EXTEN selects extended receive descriptors
	MRQC   = 0x5818 // multiple receive queues (RSS) control
	RAL    = 0x5400 // receive address low: MAC bytes 0-3
	RAH    = 0x5404 // receive address high: MAC bytes 4-5, AV in bit 31

	// RegisterPageSize is the size of the register page (the 82574L's 128 KiB BAR0).
	RegisterPageSize = 0x20000
)

// InPage reports whether off names a 32-bit register inside the page.
func InPage(off uint32) bool { return off%4 == 0 && off < RegisterPageSize }

// CTRL bits.
const (
	CtrlFD      = 1 << 0 // full duplex
	CtrlLRST    = 1 << 3 // link reset
	CtrlASDE    = 1 << 5 // auto-speed detection enable
	CtrlSLU     = 1 << 6 // set link up
	CtrlSpd1000 = 1 << 9
	CtrlRST     = 1 << 26 // MAC reset, self-clearing
	CtrlRFCE    = 1 << 27 // receive flow control: honour PAUSE frames from the link partner
	CtrlTFCE    = 1 << 28 // transmit flow control: send PAUSE frames (the model sends none)
	CtrlPHYRST  = 1 << 31 // PHY reset, held while set (not self-clearing)
)

// STATUS bits.
const (
	StatusFD        = 1 << 0
	StatusLU        = 1 << 1 // link up
	StatusTXOFF     = 1 << 4 // transmission paused by a PAUSE frame from the link partner
	StatusSpeedMask = 3 << 6
	StatusSpeed10   = 0 << 6
	StatusSpeed100  = 1 << 6
	StatusSpeed1000 = 2 << 6
	StatusPHYRA     = 1 << 10 // PHY reset asserted
)

// Interrupt causes (ICR, ICS, IMS, IMC).
const (
	IntTXDW     = 1 << 0 // a transmit descriptor with RS was written back
	IntTXQE     = 1 << 1 // the transmit queue ran empty
	IntLSC      = 1 << 2 // link status change
	IntRXO      = 1 << 6 // receive overrun: a frame found no free descriptor
	IntRXT0     = 1 << 7 // receive timer: frames were written to the ring
	IntAsserted = 1 << 31
)

// RCTL and TCTL bits.
const (
	RctlEN    = 1 << 1
	RctlUPE   = 1 << 3 // unicast promiscuous
	RctlMPE   = 1 << 4 // multicast promiscuous
	RctlLPE   = 1 << 5 // long packets (over 1522 bytes)
	RctlBAM   = 1 << 15
	RctlBSIZE = 3 << 16 // with BSEX clear: 00 = 2048, 01 = 1024, 10 = 512, 11 = 256 bytes
	RctlBSEX  = 1 << 25 // buffer sizes times 16 (01 = 16384, 10 = 8192, 11 = 4096)
	RctlSECRC = 1 << 26 // strip the Ethernet CRC

	TctlEN  = 1 << 1
	TctlPSP = 1 << 3 // pad short packets
)

// RahAV marks the receive address valid.
const RahAV = 1 << 31

// Legacy descriptors are 16 bytes, little endian:
//
//	RX: buffer address (8), length (2), checksum (2), status (1), errors (1), special (2)
//	TX: buffer address (8), length (2), CSO (1), command (1), status (1), CSS (1), special (2)
//
// The status byte sits at offset 12, the low byte of the descriptor's last 32-bit word, which
// both sides access atomically: it is where ownership changes hands.
const (
	DescSize       = 16
	DescLenOff     = 8
	DescStatusWord = 12

	RxStatusDD  = 1 << 0 // descriptor done
	RxStatusEOP = 1 << 1 // end of packet
	RxErrRXE    = 1 << 7 // receive data error (the device also reports unusable buffers this way)

	TxCmdEOP  = 1 << 0
	TxCmdIFCS = 1 << 1 // insert FCS
	TxCmdRS   = 1 << 3 // report status: write DD back
	TxCmdDEXT = 1 << 5 // extended descriptor (not supported by the model)
	TxStaDD   = 1 << 0

	// TxCmdShift is where the command byte sits in the descriptor's length word (offset 8).
	TxCmdShift = 24
)
