package intel

import (
	"net"
	"time"

	"github.com/nicstack/nicstack/runtime/config"
)

// ConfigSchema is what the emulated NIC's <config> may hold, for config.Check:
//
//	<config model="i217-LM" mac="02:00:00:00:00:01" partner_speed="1000" autoneg_ms="20"
//	        carrier="yes" spin_us="0">
//		<wire type="tap" netns="far" address="198.18.0.2/24" exec="iperf3 -s"/>
//	</config>
//
// or <wire type="session" flow_control="no"/>.
//
// carrier="no" pulls the cable (live); spin_us is DeviceConfig.SpinWait; <wire> is WireSchema.
var ConfigSchema = &config.Schema{Type: "config", Attrs: []string{"model", "mac", "partner_speed", "autoneg_ms", "carrier", "spin_us"},
	Nodes: []*config.Schema{WireSchema}}

// DefaultMAC is the permanent address when the config names none (locally administered).
var DefaultMAC = net.HardwareAddr{0x02, 0x00, 0x00, 0x00, 0x00, 0x01}

// Config is intel_nic_hw's <config>: the device model's settings and where its cable leads.
type Config struct {
	Device DeviceConfig // the parts a <config> sets (Model, MAC, PartnerSpeed, Autoneg, NoCarrier, SpinWait, FlowControl)
	Wire   WireConfig
}

// ParseConfig reads the emulated NIC's <config> node (nil: none), <wire> included, so that
// check refuses what the component would; errors name the attribute's file, line and column.
// start, the <start>'s name, is unused.
func ParseConfig(n *config.Node, start string) (Config, error) {
	if n == nil { // no <config> at all
		n = &config.Node{Type: "config"}
	}
	dev, err := parseDevice(n)
	if err != nil {
		return Config{Device: dev}, err
	}
	wire, err := parseWire(n.Sub("wire"))
	dev.FlowControl = wire.FlowControl // the link partner at the wire's far end negotiates it
	return Config{Device: dev, Wire: wire}, err
}

// parseDevice reads the device model's attributes of <config>.
func parseDevice(n *config.Node) (DeviceConfig, error) {
	c := DeviceConfig{Model: Models[0], MAC: DefaultMAC}
	if a, ok := n.Attr("model"); ok {
		m, found := ModelByName(a.Value)
		if !found {
			return c, config.Errorf(a.Pos, "attribute \"model\" of <%s>: %q is not a model (82574L, i217-LM)", n.Type, a.Value)
		}
		c.Model = m
	}
	mac, ok, err := n.MAC("mac")
	if err != nil {
		return c, err
	}
	if ok {
		c.MAC = mac
	}
	speed, err := n.Number("partner_speed", 1000)
	if err != nil {
		return c, err
	}
	if speed != 1000 && speed != 100 && speed != 10 {
		a, _ := n.Attr("partner_speed")
		return c, config.Errorf(a.Pos, "attribute \"partner_speed\" of <%s>: %d is not 1000, 100 or 10", n.Type, speed)
	}
	c.PartnerSpeed = int(speed)
	if c.Autoneg, err = n.Duration("autoneg_ms", time.Millisecond, DefaultAutoneg); err != nil {
		return c, err
	}
	carrier, err := n.Bool("carrier", true)
	if err != nil {
		return c, err
	}
	c.NoCarrier = !carrier
	if c.SpinWait, err = n.Duration("spin_us", time.Microsecond, 0); err != nil {
		return c, err
	}
	return c, nil
}
