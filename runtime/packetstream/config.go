package packetstream

import "fmt"

// Config sizes one packet stream. Both sides of a stream must use the same Config: it fixes the
// region layout.
type Config struct {
	QueueSize int // entries per queue (submit and ack), a power of two; default 1024
	BulkSize  int // bytes of the bulk buffer; default 1024*1600 as in Genode

	// IPAlign shifts every frame IPAlignShift bytes into its block, as Genode does. Off by
	// default, frames start on a cache line: a 64-byte frame then fills one line instead of
	// spanning two, and the lines moving between the CPUs are what a stream of small frames
	// costs (64-byte frames: 1.6 times the rate with plain writes, 1.15 times when the source
	// prefetches the lines it writes; measured). Nothing here needs the IP header
	// aligned (Go reads headers with byte loads, and x86 and arm64 load unaligned words at
	// full speed). Only the source uses it: the sink checks offsets against the buffer alone.
	IPAlign bool
}

// BlockSize is the allocation unit of the bulk buffer. As in Genode it holds one 1500-byte
// frame after the 2-byte shift; a larger frame takes several adjacent blocks. It is a multiple
// of 64, so every block starts on a cache line.
const BlockSize = 1600

// IPAlignShift is how far each frame starts into its first block with Config.IPAlign: 2 bytes,
// so that the IP header behind a 14-byte Ethernet header is 4-byte aligned (Genode does so).
const IPAlignShift = 2

// Default bound of a source's bytes in flight (Source.SetQueueBytes), for a stream whose
// source has no scheduler above it: what the link carries in 10 ms, at the rate of the
// scenarios' wire, 1 Gbit/s: 1250000 bytes. Twice CoDel's target of 5 ms, not the target
// itself: a source and its peer share CPUs here, and at 5 ms (625000 bytes) the stream ran
// dry while the source waited for its CPU, 5-7 % of bench iperf's throughput
// (docs/isolation.md). At least four 64 KiB super-frames, so that a source with offloads still
// batches; at most the buffer.
const (
	QueueLinkRate = 1e9 / 8 // bytes per second
	QueueTime     = 10e-3   // seconds
	minQueueBytes = 4 << 16
)

// DefaultQueueBytes is the default bound of the bytes in flight of a source whose stream has
// c's buffer: QueueLinkRate x QueueTime, at least four super-frames, at most BulkSize.
func (c Config) DefaultQueueBytes() int {
	return min(c.BulkSize, max(int(QueueLinkRate*QueueTime), minQueueBytes))
}

// Limits of a Config.
const (
	MinQueueSize = 2
	MaxQueueSize = 1 << 16
	MaxBulkSize  = 1 << 31
)

// DefaultConfig is Genode's NIC session default: 1024 entries per queue, 1024 x 1600 bytes.
func DefaultConfig() Config { return Config{QueueSize: 1024, BulkSize: 1024 * BlockSize} }

// Validate reports why c cannot size a stream, naming the field.
func (c Config) Validate() error {
	if c.QueueSize < MinQueueSize || c.QueueSize > MaxQueueSize || c.QueueSize&(c.QueueSize-1) != 0 {
		return fmt.Errorf("packetstream config: QueueSize %d is not a power of two in [%d, %d]",
			c.QueueSize, MinQueueSize, MaxQueueSize)
	}
	if c.BulkSize < BlockSize || c.BulkSize > MaxBulkSize {
		return fmt.Errorf("packetstream config: BulkSize %d is not in [%d, %d]", c.BulkSize, BlockSize, MaxBulkSize)
	}
	return nil
}

// MaxFrame is the largest frame one Alloc can return with this config.
func (c Config) MaxFrame() int { return c.blocks()*BlockSize - c.frameShift() }

// frameShift is how far each frame starts into its first block.
func (c Config) frameShift() int {
	if c.IPAlign {
		return IPAlignShift
	}
	return 0
}

func (c Config) blocks() int { return c.BulkSize / BlockSize }

// Region layout. Each queue starts with four lines of 128 bytes (x86 prefetches pairs of 64-byte
// lines, so 128 keeps writers of neighbouring words from sharing): the producer's head, the
// consumer's tail, the consumer's armed flag (it sleeps until the queue is non-empty) and the
// producer's armed flag (it sleeps until the queue is non-full). The descriptor ring follows.
const (
	lineSize      = 128
	offHead       = 0 * lineSize
	offTail       = 1 * lineSize
	offConsArmed  = 2 * lineSize
	offProdArmed  = 3 * lineSize
	queueHdrSize  = 4 * lineSize
	descSize      = 16
	pageSize      = 4096
	bulkAlignment = 64
	descOffOffset = 0 // uint32: frame offset from the region start
	descOffSize   = 4 // uint32: frame size
	descOffGSO    = 8 // uint64: netdev.Offload packed as in Packet but for CsumOffset
	csumSize      = 2 // netdev.Offload.CsumOffset, in an array after the descriptors
)

// queueBytes: the header, the descriptors, then their CsumOffsets (kept apart so that four
// descriptors share a 64-byte line), rounded to whole lines.
func (c Config) queueBytes() int {
	return (queueHdrSize + c.QueueSize*(descSize+csumSize) + lineSize - 1) &^ (lineSize - 1)
}

// submitQueue, ackQueue and bulkStart are byte offsets into the region.
func (c Config) submitQueue() int { return 0 }
func (c Config) ackQueue() int    { return c.queueBytes() }
func (c Config) bulkStart() int {
	return (2*c.queueBytes() + bulkAlignment - 1) &^ (bulkAlignment - 1)
}

// RegionSize is the bytes of shared memory one stream needs, rounded up to whole pages: what a
// session charges to its client's ram quota.
func (c Config) RegionSize() int {
	return (c.bulkStart() + c.BulkSize + pageSize - 1) &^ (pageSize - 1)
}
