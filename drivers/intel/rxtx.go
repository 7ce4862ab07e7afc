package intel

import (
	"encoding/binary"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/nicstack/nicstack/drivers/intel/regs"
	"github.com/nicstack/nicstack/netdev/header"
)

var le = binary.LittleEndian

// ring reads a descriptor ring's registers and checks that the ring lies inside DMA memory.
// Everything in DMA memory and the registers is written by the driver: untrusted.
func (d *Device) ring(bal, bah, dlen, dh, dt uint32) (base uint64, n, head, tail uint32, ok bool) {
	base = (uint64(d.load(bah))<<32 | uint64(d.load(bal))) &^ 0xf
	n = d.load(dlen) / regs.DescSize
	head, tail = d.load(dh), d.load(dt)
	ok = n > 0 && head < n && tail < n && base <= uint64(len(d.dma)) &&
		uint64(n)*regs.DescSize <= uint64(len(d.dma))-base
	return base, n, head, tail, ok
}

// inDMA reports whether [addr, addr+n) lies inside DMA memory.
func (d *Device) inDMA(addr uint64, n int) bool {
	return addr <= uint64(len(d.dma)) && uint64(n) <= uint64(len(d.dma))-addr
}

// statusWord is a descriptor's last 32-bit word, where the status byte hands ownership over.
func (d *Device) statusWord(desc uint64) *uint32 {
	return (*uint32)(unsafe.Pointer(&d.dma[desc+regs.DescStatusWord]))
}

// transmit fetches transmit descriptors while the wire is free and the link partner has not
// paused it, writes DD back where RS asks for it, and returns the frames for the wire.
func (d *Device) transmit(now time.Duration) [][]byte {
	d.batch = d.batch[:0]
	if d.paused {
		if now < d.pauseUntil { // nothing fetched: the ring fills and completions stop
			return nil
		}
		d.endPause(d.pauseUntil)
	}
	base, n, head, tail, ok := d.ring(regs.TDBAL, regs.TDBAH, regs.TDLEN, regs.TDH, regs.TDT)
	if d.fault == FaultGone || d.fault == FaultDMA { // no descriptor can be fetched: the queue stands
		d.txBusy = false
		return nil
	}
	if d.load(regs.TCTL)&regs.TctlEN == 0 || head == tail {
		d.txBusy = false
		return nil
	}
	if !ok {
		d.cnt.BadDescriptors.Add(1)
		d.txBusy = false
		return nil
	}
	if !d.txBusy { // the wire was idle: the next frame starts now
		d.wireFree = max(d.wireFree, now)
	}
	d.txBusy = true
	var causes uint32
	used := 0
	for head != tail && d.wireFree <= now && used+maxFrame <= len(d.arena) {
		desc := base + uint64(head)*regs.DescSize
		addr := le.Uint64(d.dma[desc:])
		lw := le.Uint32(d.dma[desc+regs.DescLenOff:])
		length, cmd := int(lw&0xffff), lw>>regs.TxCmdShift
		d.cnt.TXDescriptors.Add(1)
		switch {
		case cmd&regs.TxCmdDEXT != 0 || !d.inDMA(addr, length):
			d.cnt.BadDescriptors.Add(1)
			d.asmBad = true
		case len(d.asm)+length > maxFrame:
			d.asmBad = true
		default:
			d.asm = append(d.asm, d.dma[addr:addr+uint64(length)]...)
		}
		if cmd&regs.TxCmdRS != 0 {
			w := d.statusWord(desc)
			atomic.StoreUint32(w, atomic.LoadUint32(w)|regs.TxStaDD)
			causes |= regs.IntTXDW
		}
		head = (head + 1) % n
		if cmd&regs.TxCmdEOP == 0 {
			continue
		}
		switch {
		case d.asmBad || len(d.asm) == 0 || !d.linkUp:
			d.cnt.TXDropped.Add(1)
		default:
			f := d.arena[used : used+len(d.asm)]
			copy(f, d.asm)
			used += len(f)
			d.batch = append(d.batch, f)
			d.cnt.TXFrames.Add(1)
			d.cnt.TXBytes.Add(uint64(len(f)))
			d.wireFree += d.wireTime(len(f))
		}
		d.asm, d.asmBad = d.asm[:0], false
	}
	d.store(regs.TDH, head)
	if head == tail {
		causes |= regs.IntTXQE
		d.txBusy = false
	}
	d.cause(now, causes)
	return d.batch
}

// rxBufSize is the receive buffer size RCTL selects.
func rxBufSize(rctl uint32) int {
	sizes := [2][4]int{{2048, 1024, 512, 256}, {2048, 16384, 8192, 4096}}
	bsex := 0
	if rctl&regs.RctlBSEX != 0 {
		bsex = 1
	}
	return sizes[bsex][rctl&regs.RctlBSIZE>>16]
}

// accepts is the receive address filter.
func (d *Device) accepts(rctl uint32, f []byte) bool {
	switch {
	case f[0]&1 == 0: // unicast
		if rctl&regs.RctlUPE != 0 {
			return true
		}
		ral, rah := d.load(regs.RAL), d.load(regs.RAH)
		return rah&regs.RahAV != 0 && le.Uint32(f[0:4]) == ral && uint32(le.Uint16(f[4:6])) == rah&0xffff
	case le.Uint32(f[0:4]) == 0xffffffff && le.Uint16(f[4:6]) == 0xffff:
		return rctl&regs.RctlBAM != 0 || rctl&regs.RctlMPE != 0
	default:
		return rctl&regs.RctlMPE != 0
	}
}

// rxBurst is how far behind the wire may fall and catch up at once: callers hand frames over
// in batches, not at each frame's exact arrival time.
const rxBurst = 2 * time.Millisecond

// Receive clocks frames in from the wire at the link rate and returns how many it took; each
// taken frame is written to the receive ring or dropped and counted. A frame that finds too
// few free descriptors is dropped: the ring is never overrun. Frames not taken arrived faster
// than the link carries them: offer them again after ReceiveWait. The driver's posted writes
// land first: RDT as it last wrote it, doorbell or not (PostedRegisters.PostQuiet).
func (d *Device) Receive(frames [][]byte) (taken int) {
	d.DrainPosted()
	d.mu.Lock()
	defer d.mu.Unlock()
	rctl := d.load(regs.RCTL)
	if d.fault != FaultNone && d.linkUp {
		d.faultReceive(d.clock.Now(), frames)
		return len(frames)
	}
	if !d.linkUp || rctl&regs.RctlEN == 0 {
		d.cnt.RXDropped.Add(uint64(len(frames)))
		return len(frames)
	}
	now := d.clock.Now()
	start := max(d.rxWireFree, now-rxBurst)
	for _, f := range frames {
		if start > now {
			break
		}
		start += d.wireTime(len(f))
		taken++
	}
	d.rxWireFree = start
	frames = frames[:taken]
	base, n, head, tail, ok := d.ring(regs.RDBAL, regs.RDBAH, regs.RDLEN, regs.RDH, regs.RDT)
	if !ok {
		d.cnt.BadDescriptors.Add(1)
		d.cnt.RXDropped.Add(uint64(len(frames)))
		return taken
	}
	bufSize, maxLen := rxBufSize(rctl), 1522
	if rctl&regs.RctlLPE != 0 {
		maxLen = maxFrame
	}
	var causes uint32
	for _, f := range frames {
		if len(f) < header.EthLen || len(f) > maxLen || !d.accepts(rctl, f) {
			d.cnt.RXDropped.Add(1)
			continue
		}
		if need := uint32((len(f) + bufSize - 1) / bufSize); (tail+n-head)%n < need {
			d.cnt.RXNoDescriptor.Add(1)
			causes |= regs.IntRXO
			continue
		}
		bad := false
		for rest := f; len(rest) > 0; {
			desc := base + uint64(head)*regs.DescSize
			addr := le.Uint64(d.dma[desc:])
			chunk := min(len(rest), bufSize)
			status := uint32(regs.RxStatusDD)
			if chunk == len(rest) {
				status |= regs.RxStatusEOP
			}
			if d.inDMA(addr, chunk) {
				copy(d.dma[addr:], rest[:chunk])
			} else {
				bad = true
				status |= regs.RxErrRXE << 8
			}
			// Length (no checksum offload) and status in one store: the driver may read
			// them together from a goroutine of its own (ipxe.Driver.RXQueue).
			atomic.StoreUint64((*uint64)(unsafe.Pointer(&d.dma[desc+regs.DescLenOff])), uint64(chunk)|uint64(status)<<32)
			d.cnt.RXDescriptors.Add(1)
			head = (head + 1) % n
			rest = rest[chunk:]
		}
		if bad {
			d.cnt.BadDescriptors.Add(1)
			continue
		}
		d.cnt.RXFrames.Add(1)
		d.cnt.RXBytes.Add(uint64(len(f)))
		causes |= regs.IntRXT0
	}
	d.store(regs.RDH, head)
	d.cause(now, causes)
	return taken
}

// ReceiveWait is how long until the wire takes the next frame at the link rate.
func (d *Device) ReceiveWait() time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	return max(d.rxWireFree-d.clock.Now(), 0)
}
