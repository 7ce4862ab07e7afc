// Package fqcodel decides which frame leaves an interface next, and which is dropped or
// marked: flow queueing with CoDel (RFC 8290 over RFC 8289), in two levels, for nic_router's
// egress.
//
// A frame waiting to leave an interface is queued under its class, the session it came
// from (the router's ingress interface: at the uplink's egress, guest A's frames are A's and
// guest B's are B's, whatever their destination, so that one guest's load cannot crowd out
// another's), and within the class under its flow, the bucket its 5-tuple hashes to. Deficit
// round robin serves the classes, then the flows of the class it picked; at both levels a
// class or flow that has just become active is on the new list and served before those on
// the old list (the sparse-flow optimisation of fq_codel). Each flow's queue is a CoDel queue
// that drops, or marks CE when the frame is ECN-capable, once its sojourn time has stayed
// above target for an interval.
//
// The scheduler holds handles, not frames: the caller's descriptor of a buffer it keeps
// (nic_router: the id of a frame it holds in the ingress session's packet stream). Dropped
// handles are appended to a slice the caller passes, for it to release. Time is the caller's
// monotonic clock in nanoseconds. Nothing is allocated per frame: New allocates the entries,
// and a class its flow table at its first frame. A Scheduler is not safe for concurrent use; nic_router runs
// one per egress interface on its one event loop.
package fqcodel
