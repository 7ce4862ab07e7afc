package tcpstate

import (
	"testing"

	"github.com/nicstack/nicstack/netdev/header"
)

func TestHandshakeAndClose(t *testing.T) {
	var c Conn
	// Both SYNs must be acknowledged: a SYN-ACK alone does not open.
	seg(&c, 0, header.TCPSyn, 10, 0, 0)
	if seg(&c, 1, header.TCPSyn|header.TCPAck, 20, 11, 0) != Opening {
		t.Fatal("opened before the client acknowledged the server's SYN")
	}
	if seg(&c, 0, header.TCPAck, 11, 21, 0) != Open {
		t.Fatal("not open after the three-way handshake")
	}
	// A FIN acknowledged on one side only keeps closing.
	seg(&c, 1, header.TCPFin|header.TCPAck, 21, 11, 5) // FIN after 5 data bytes: occupies 26
	if seg(&c, 0, header.TCPAck, 11, 26, 0) != Closing {
		t.Fatal("closing expected while the acknowledgement misses the FIN")
	}
	seg(&c, 0, header.TCPAck, 11, 27, 0)
	if seg(&c, 0, header.TCPFin|header.TCPAck, 11, 27, 0) != Closing {
		t.Fatal("closing expected until the second FIN is acknowledged")
	}
	if seg(&c, 1, header.TCPAck, 27, 12, 0) != Closed {
		t.Fatal("closed expected when both FINs are acknowledged")
	}
}

// seg is Segment's state alone.
func seg(c *Conn, side int, flags uint8, seq, ack uint32, payload int) State {
	s, _ := c.Segment(side, flags, seq, ack, payload)
	return s
}
