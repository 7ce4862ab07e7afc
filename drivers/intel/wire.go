package intel

import (
	"github.com/nicstack/nicstack/runtime/config"
)

// WireSchema is the <wire> sub-node of the emulated NIC's <config>: where its cable leads.
//
//	<wire type="session" flow_control="yes"/>    (default, also without <wire>): a Nic session
//	                                             served to the far end, another component
//	<wire type="tap" netns="far" address="198.18.0.2/24" gateway="..." exec="iperf3 -s"/>
//	<wire type="packet" netns="far" address="198.18.0.2/24" gateway="..." exec="..."/>
//
// tap asks the supervisor's parent service "Tap" for a TAP inside the run's namespace netns,
// packet its service "Packet" for an AF_PACKET socket on a veth into it; address, gateway and
// exec are the Linux side's (see internal/hostservice). The model has no offloads and takes
// frames up to 1518 bytes, so the Linux side gets MTU 1500 and a TAP no offloads: offload="no"
// is the only value accepted.
//
// flow_control (session only, default DefaultFlowControl) is 802.3x flow control between the
// far end's NIC and ours: the far end's receive stream above a high watermark sends the device
// a PAUSE frame, below a low one an XON (components/intel_nic_hw/intelhw). A Linux port's
// kernel sends no PAUSE frames: flow_control="yes" is refused there.
var WireSchema = &config.Schema{Type: "wire", Attrs: []string{"type", "netns", "address", "gateway", "exec", "offload", "flow_control"}}

// DefaultFlowControl is flow_control's default: a far end on a CPU share too small to take
// in what the wire brings then holds the device back instead of dropping at its receive
// stream, so that the queue forms above the driver, where the router's scheduler decides who
// backs off (docs/performance.md, issue 33).
const DefaultFlowControl = true

// Wire types.
const (
	WireSession = "session"
	WireTap     = "tap"
	WirePacket  = "packet"
)

// WireConfig is the parsed <wire>.
type WireConfig struct {
	Type    string            // WireSession, WireTap or WirePacket
	Service string            // the parent service that hands over the device: Tap, Packet ("" for session)
	Args    map[string]string // that service's session arguments
	// FlowControl: the far end's NIC negotiates 802.3x PAUSE and sends it (session only)
	FlowControl bool
}

// WireMTU is the Linux side's MTU: the largest frame the model receives without long packet
// enable is 1522 bytes with a VLAN tag.
const WireMTU = "1500"

// parseWire reads the <wire> sub-node n of the emulated NIC's <config> (nil: none, the Nic
// session); errors name the attribute's file, line and column.
func parseWire(n *config.Node) (WireConfig, error) {
	w := WireConfig{Type: WireSession, FlowControl: DefaultFlowControl}
	if n == nil {
		return w, nil
	}
	attr := func(name string) config.Attr { a, _ := n.Attr(name); return a }
	w.Type = n.String("type", WireSession)
	switch w.Type {
	case WireSession:
		for _, name := range []string{"netns", "address", "gateway", "exec", "offload"} {
			if n.Has(name) {
				return w, config.Errorf(attr(name).Pos, "attribute %q of <wire>: a wire of type \"session\" has no Linux side (type=\"tap\" or \"packet\" have)", name)
			}
		}
		var err error
		w.FlowControl, err = n.Bool("flow_control", DefaultFlowControl)
		return w, err
	case WireTap:
		w.Service = "Tap"
	case WirePacket:
		w.Service = "Packet"
	default:
		return w, config.Errorf(attr("type").Pos, "attribute \"type\" of <wire>: %q is not a wire (session, tap, packet)", w.Type)
	}
	if !n.Has("netns") {
		return w, config.Errorf(n.Pos, "<wire type=%q> needs attribute \"netns\": the namespace of the run its Linux side is in", w.Type)
	}
	w.FlowControl = false
	w.Args = map[string]string{"mtu": WireMTU}
	for _, name := range []string{"netns", "address", "gateway", "exec"} {
		if a, ok := n.Attr(name); ok {
			w.Args[name] = a.Value
		}
	}
	if _, _, err := n.Prefix("address"); err != nil {
		return w, err
	}
	if _, _, err := n.IPv4("gateway"); err != nil {
		return w, err
	}
	offload, err := n.Bool("offload", false)
	if err != nil {
		return w, err
	}
	if n.Has("flow_control") {
		if fc, err := n.Bool("flow_control", false); err != nil || fc {
			return w, config.Errorf(attr("flow_control").Pos, "attribute \"flow_control\" of <wire>: a Linux port sends no PAUSE frames (only type=\"session\" has flow control); leave it out or say \"no\"")
		}
	}
	if offload {
		return w, config.Errorf(attr("offload").Pos, "attribute \"offload\" of <wire>: the emulated NIC has no offloads (it would get super-frames longer than its MTU); leave it out or say \"no\"")
	}
	if w.Type == WireTap {
		w.Args["offload"] = "no"
	} else {
		// The veth's end in netns would hand TSO super-frames and partial checksums to the
		// socket: turn its offloads off before anything else runs there.
		line := `ethtool -K "$NICSTACK_INTERFACE" tso off gso off tx off >/dev/null 2>&1`
		if x := w.Args["exec"]; x != "" {
			line += "; " + x
		}
		w.Args["exec"] = line
	}
	return w, nil
}
