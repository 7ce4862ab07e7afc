package tcpstate

import (
	"testing"

	"github.com/nicstack/nicstack/router/header"
)

func TestHandshakeAndClose(t *testing.T) {
	var c Conn
	// Both SYNs must be acknowledged: a SYN-ACK alone does not open.
	c.Segment(0, header.TCPSyn, 10, 0, 0)
	if c.Segment(1, header.TCPSyn|header.TCPAck, 20, 11, 0) != Opening {
		t.Fatal("opened before the client acknowledged the server's SYN")
	}
	if c.Segment(0, header.TCPAck, 11, 21, 0) != Open {
		t.Fatal("not open after the three-way handshake")
	}
	// A FIN acknowledged on one side only keeps closing.
	c.Segment(1, header.TCPFin|header.TCPAck, 21, 11, 5) // FIN after 5 data bytes: occupies 26
	if c.Segment(0, header.TCPAck, 11, 26, 0) != Closing {
		t.Fatal("closing expected while the acknowledgement misses the FIN")
	}
	c.Segment(0, header.TCPAck, 11, 27, 0)
	if c.Segment(0, header.TCPFin|header.TCPAck, 11, 27, 0) != Closing {
		t.Fatal("closing expected until the second FIN is acknowledged")
	}
	if c.Segment(1, header.TCPAck, 27, 12, 0) != Closed {
		t.Fatal("closed expected when both FINs are acknowledged")
	}
}
