// Package packetstream is Genode's packet stream over shared memory: a submit queue, an ack
// queue and a bulk buffer in one region, moving frames one way from a source to a sink.
//
// The supervisor creates a stream's files (NewStreamFiles, or NewSessionFiles for the two
// streams of a Nic or Uplink session: TX with the client as source, RX with the server as
// source) and hands them to the two components, which map them (OpenClient, OpenServer,
// OpenSource, OpenSink).
//
// Region layout (Config fixes it; both sides must agree):
//
//	0                  submit queue: 4 x 128-byte lines (head, tail, two armed flags),
//	                   then QueueSize descriptors of 16 bytes (offset, size, offload
//	                   metadata) and QueueSize checksum offsets of 2 bytes
//	after it           ack queue, the same
//	64-byte aligned    bulk buffer, BulkSize bytes, in BlockSize blocks
//
// The source allocates in the bulk buffer with an allocator in its own memory. Frames start on
// a cache line, unless Config.IPAlign shifts them 2 bytes as Genode does. Every index
// and descriptor the peer writes is read once and checked; a bad one is counted and dropped,
// never followed. A side keeps its own indices privately and only writes them to the region.
//
// Two APIs, as in Genode: try calls (TrySubmit, GetAcked, TryGet, TryAck) followed by one
// Wakeup per batch, which publishes and sends at most one signal; and eager calls (Submit,
// WaitAcked, Get, Ack) that wait and signal at once. A side signals its peer only when the
// peer armed a flag in the region before sleeping (Waiter), so a saturated stream runs
// without system calls.
//
// Source.Queue reports where the stream's queue stands (frames, bytes and the oldest's
// sojourn in the submit queue, frames in the ack queue) to any goroutine, from marks the
// source records once per batch and the sink's tail.
//
// SetTap hands a copy of every frame an endpoint passes to a Tap (a capture), taken up and
// flushed at Wakeup: the stream is wrapped, not the loop that drives it.
package packetstream
