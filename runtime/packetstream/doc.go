// Package packetstream is Genode's packet stream over shared memory: a submit queue, an ack
// queue and a bulk buffer in one region, moving frames one way from a source to a sink.
package packetstream
