package vhostuser

import (
	"runtime/debug"
	"time"
)

// The control queue's commands (virtio-net 5.1.6.5): class, command, data, and one
// device-writable ack byte.
const (
	ctrlRx            = 0 // PROMISC, ALLMULTI, ALLUNI, NOMULTI, NOUNI, NOBCAST: 0 to 5
	ctrlMAC           = 1 // MAC_TABLE_SET 0, MAC_ADDR_SET 1
	ctrlAnnounce      = 3 // ANNOUNCE_ACK 0
	ctrlMQ            = 4
	ctrlMQVQPairsSet  = 0
	ctrlOK            = 0
	ctrlErr           = 1
	ctrlCmdMax        = 8 // the command bytes the device looks at: class, command, data
	ctrlRxCommandsMax = 5
)

// serveCtrl runs the control queue c until the connection ends.
func (d *Device) serveCtrl(c *queue) {
	for !d.closed.Load() {
		d.ctrlRound(c)
	}
}

// ctrlRound serves c's posted commands and waits for the next kick.
func (d *Device) ctrlRound(c *queue) {
	defer d.guard(c, debug.SetPanicOnFault(true))
	k, changed, err := d.ctrlBatch(c)
	if changed {
		// Pairs went in or out of use: their loops look again, and a takeover resumes
		// with them (the device's state changed without a message).
		for i := range d.q[:2*d.pairs] {
			q := &d.q[i]
			q.mu.Lock()
			q.wake()
			q.mu.Unlock()
		}
		d.keep(0)
	}
	if err != nil {
		d.breakDown(err, c)
		return
	}
	if c.waitFor(k, time.Time{}) && k != nil {
		d.stats.Kicks.Add(1)
	}
}

// ctrlBatch answers the commands posted on c; with none it has armed the kick and returns
// the kicker to wait on. changed: the pairs in use changed.
func (d *Device) ctrlBatch(c *queue) (k *kicker, changed bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d.broken.Load() || !c.ready() {
		return nil, false, nil
	}
	c.disarm()
	for {
		head, ok, perr := c.pop()
		if perr != nil {
			err = perr
			break
		}
		if !ok {
			if c.arm() {
				continue
			}
			k = c.kick
			break
		}
		ch, cerr := d.command(c, head)
		if cerr != nil {
			err = cerr
			break
		}
		changed = changed || ch
		c.push(head, 1)
	}
	if c.publish() && c.call >= 0 {
		signal(c.call)
		d.stats.Calls.Add(1)
	}
	return k, changed, err
}

// command carries out the command of the chain at head and writes its ack. A chain without
// class and command, or without a writable ack byte, is a fault; a command the device does
// not know or refuses is answered VIRTIO_NET_ERR.
func (d *Device) command(c *queue, head uint16) (changed bool, err error) {
	var cmd [ctrlCmdMax]byte
	n := 0
	var ack []byte
	ch := c.chain(c.mem, head)
	for {
		b, write, err := ch.buffer()
		if err != nil {
			return false, err
		}
		if b == nil {
			break
		}
		if write {
			if ack == nil {
				ack = b
			}
			continue
		}
		if n < len(cmd) {
			copy(cmd[n:], b)
		}
		n += len(b)
	}
	if n < 2 {
		return false, c.faultf("control command at %d has %d bytes, less than class and command", head, n)
	}
	if ack == nil {
		return false, c.faultf("control command at %d has no writable ack byte", head)
	}
	class, command, data := cmd[0], cmd[1], cmd[2:min(n, ctrlCmdMax)]
	result := byte(ctrlErr)
	switch {
	case class == ctrlMQ && command == ctrlMQVQPairsSet:
		if len(data) != 2 {
			d.log.Warn("control queue: VQ_PAIRS_SET without its 2-byte count", "bytes", len(data))
			break
		}
		pairs := int(le.Uint16(data))
		if pairs < 1 || pairs > d.pairs {
			d.log.Warn("control queue: the driver asks for more queue pairs than the device has, or none; it keeps the pairs it has",
				"asked", pairs, "pairs", d.pairs, "in_use", d.active.Load())
			break
		}
		changed = int(d.active.Swap(int32(pairs))) != pairs
		d.log.Info("control queue: queue pairs in use", "pairs", pairs)
		result = ctrlOK
	case class == ctrlRx && command <= ctrlRxCommandsMax, class == ctrlMAC && command <= 1, class == ctrlAnnounce && command == 0:
		// Receive filtering is the router's: the device hands the guest every frame it is
		// given, which satisfies promiscuous and all-multicast modes, and ignores a MAC
		// filter (the spec lets a device pass more than the filter asks).
		result = ctrlOK
	}
	ack[0] = result
	return changed, nil
}
