package ipxe

import (
	"fmt"

	"github.com/nicstack/nicstack/drivers/vfio"
	"github.com/nicstack/nicstack/runtime/config"
)

// TxIrq selects the transmit interrupt cause the driver unmasks.
type TxIrq int

const (
	// TxIrqQueueEmpty asks for TXQE, one interrupt when the device has sent everything
	// queued, and only while frames wait for room in a full ring (Driver.txCause).
	TxIrqQueueEmpty TxIrq = iota
	// TxIrqDescriptorDone asks for TXDW: an interrupt per descriptor written back (iPXE's way).
	TxIrqDescriptorDone
)

func (t TxIrq) String() string {
	if t == TxIrqDescriptorDone {
		return "descriptor_done"
	}
	return "queue_empty"
}

// PhyReset says whether the driver resets the PHY along with the MAC when it opens the device
// with the link down (iPXE's rule).
type PhyReset int

const (
	// PhyResetAuto resets the PHY except on parts known to come back at 10 Mbit/s.
	PhyResetAuto PhyReset = iota
	PhyResetYes
	PhyResetNo
)

func (p PhyReset) String() string {
	return [...]string{"auto", "yes", "no"}[p]
}

// Config is the driver's configuration, the attributes of its <config> node:
//
//	<config rx_irq_throttle="651" tx_batch="yes" tx_irq="queue_empty" tx_bql="yes" tx_bql_limit_max="0" rx_poll_on_tx="no" phy_reset="auto" pci="0000:00:02.0"/>
//
// rx_irq_throttle is an ITR interval or "adaptive" (moderation.go). tx_bql="yes" (the
// default) bounds the TX ring's bytes in flight by a limit learned from completions
// (netdev/dql), with TXDW unmasked so that every interrupt brings them; frames beyond it wait
// in the Uplink session, where the router's <fq-codel> schedules them (docs/isolation.md).
// "no" lets the router's bursts fill the ring. tx_bql_limit_max caps that limit in bytes, as
// Linux's byte_queue_limits/limit_max does (0: the ring's bytes, no cap). rx_poll_on_tx="yes"
// (off by default: it costs the driver and the router CPU under a received stream) takes what the RX ring holds whenever the driver runs to transmit a batch of
// the router's while the ITR in effect spaces interrupts wider than 250 µs (adaptive's stream
// class, a fixed ITR above 977), not only at the RX interrupt (Driver.Transmit). pci names a PCI
// device (bound to vfio-pci) the driver gets through VFIO from its parent's Platform service;
// without it the driver drives the emulated NIC of its Platform session.
type Config struct {
	RxIrqThrottle uint32 // ITR value in 256 ns units; 0 = off; unused when adaptive
	// AdaptiveThrottle moves ITR between the latency classes' intervals as traffic changes.
	AdaptiveThrottle bool
	TxBatch          bool // one TDT write per batch instead of per frame
	TxIrq            TxIrq
	TxBQL            bool // a dynamic limit on the TX ring's bytes in flight
	// TxBQLLimitMax caps that limit, bytes (0: no cap but the ring's).
	TxBQLLimitMax uint32
	// RxPollOnTx takes received frames when the driver runs to transmit, too, while the
	// interrupts are far apart.
	RxPollOnTx bool
	PhyReset   PhyReset
	PCI        string // the PCI device's address; "": the emulated NIC
}

// ConfigSchema is what the driver's <config> may hold, for config.Check.
var ConfigSchema = &config.Schema{Type: "config", Attrs: []string{"rx_irq_throttle", "tx_batch", "tx_irq", "tx_bql", "tx_bql_limit_max", "rx_poll_on_tx", "phy_reset", "pci"}}

// DefaultRxIrqThrottle is Genode's value: 651 x 256 ns = 166.7 µs, at most ~6000 interrupts/s.
const DefaultRxIrqThrottle = 651

// DefaultConfig is the configuration of an empty <config/>.
func DefaultConfig() Config {
	return Config{RxIrqThrottle: DefaultRxIrqThrottle, TxBatch: true, TxIrq: TxIrqQueueEmpty, TxBQL: true, PhyReset: PhyResetAuto}
}

// ParseThrottle reads a value of rx_irq_throttle: an ITR interval in 256 ns units (0-65535,
// as config numbers are written) or "adaptive".
func ParseThrottle(s string) (itr uint32, adaptive bool, err error) {
	if s == "adaptive" {
		return 0, true, nil
	}
	v, err := config.ParseNumber(s)
	if err != nil {
		return 0, false, fmt.Errorf("%q is neither an ITR interval (in 256 ns units) nor adaptive", s)
	}
	if v > 0xffff {
		return 0, false, fmt.Errorf("%d does not fit the 16-bit ITR interval (at most 65535)", v)
	}
	return uint32(v), false, nil
}

// ParseConfig reads ipxe_nic's <config> node (nil: none); errors name the attribute's file,
// line and column. start, the <start>'s name, is unused.
func ParseConfig(n *config.Node, start string) (Config, error) {
	c := DefaultConfig()
	if n == nil { // no <config> at all
		n = &config.Node{Type: "config"}
	}
	if a, ok := n.Attr("rx_irq_throttle"); ok {
		itr, adaptive, err := ParseThrottle(a.Value)
		if err != nil {
			return c, config.Errorf(a.Pos, "attribute \"rx_irq_throttle\" of <%s>: %v", n.Type, err)
		}
		c.RxIrqThrottle, c.AdaptiveThrottle = itr, adaptive
	}
	var err error
	if c.TxBatch, err = n.Bool("tx_batch", true); err != nil {
		return c, err
	}
	if a, ok := n.Attr("tx_irq"); ok {
		switch a.Value {
		case "queue_empty":
			c.TxIrq = TxIrqQueueEmpty
		case "descriptor_done":
			c.TxIrq = TxIrqDescriptorDone
		default:
			return c, config.Errorf(a.Pos, "attribute \"tx_irq\" of <%s>: %q is not queue_empty or descriptor_done", n.Type, a.Value)
		}
	}
	if c.TxBQL, err = n.Bool("tx_bql", true); err != nil {
		return c, err
	}
	if a, ok := n.Attr("tx_bql_limit_max"); ok {
		v, err := config.ParseNumber(a.Value)
		if err != nil || v > bqlMax {
			return c, config.Errorf(a.Pos, "attribute \"tx_bql_limit_max\" of <%s>: %q is not a byte count up to the ring's %d (0: no cap)", n.Type, a.Value, bqlMax)
		}
		c.TxBQLLimitMax = uint32(v)
	}
	if c.RxPollOnTx, err = n.Bool("rx_poll_on_tx", false); err != nil {
		return c, err
	}
	if a, ok := n.Attr("phy_reset"); ok {
		switch a.Value {
		case "auto":
			c.PhyReset = PhyResetAuto
		case "yes":
			c.PhyReset = PhyResetYes
		case "no":
			c.PhyReset = PhyResetNo
		default:
			return c, config.Errorf(a.Pos, "attribute \"phy_reset\" of <%s>: %q is not auto, yes or no", n.Type, a.Value)
		}
	}
	if a, ok := n.Attr("pci"); ok {
		if err := vfio.CheckAddress(a.Value); err != nil {
			return c, config.Errorf(a.Pos, "attribute \"pci\" of <%s>: %v", n.Type, err)
		}
		c.PCI = a.Value
	}
	return c, nil
}
