package tap

// Kind is the kind's name in a lab file (the register, vnf/kinds, maps it to this package).
const Kind = "tap"

// TapParams are the parameters of a tap.
type TapParams struct {
	// Pcap is a file inside the lab's run directory the tap writes what it receives to
	// (tcpdump -w); "" only counts.
	Pcap string `yaml:"pcap,omitempty" json:"pcap,omitempty"`
}

// Capture is the pcap file, "" when the tap only counts (spec.Tap).
func (p *TapParams) Capture() string { return p.Pcap }
