package pktgen

import (
	"fmt"

	"github.com/vishvananda/netlink"
)

// Refused is how many frames the generator's interface has refused so far: its tx_dropped
// counter, where a veth counts the frames it could not put on its peer's ring (the ring
// full, or the peer without a NAPI instance). The program's own count (Sent) counts every
// XDP_TX verdict, so frames the veth refused are in it: sent by the program, never left
// the interface. Read it in the sender's namespace.
//
// Equivalent to: ip -s link show dev IF (TX dropped)
func (g *Generator) Refused() (uint64, error) {
	l, err := netlink.LinkByIndex(g.ifindex)
	if err != nil {
		return 0, fmt.Errorf("read the generator's interface %d: %w", g.ifindex, err)
	}
	s := l.Attrs().Statistics
	if s == nil {
		return 0, fmt.Errorf("read the statistics of interface %s: none reported", l.Attrs().Name)
	}
	return s.TxDropped, nil
}

// passThrough are root queueing disciplines that only queue (or, noqueue, do not exist):
// frames that bypass them are not let through faster than they would be.
var passThrough = map[string]bool{"noqueue": true, "pfifo_fast": true, "pfifo": true, "bfifo": true,
	"fq_codel": true, "mq": true, "sfq": true, "prio": true}

// BypassedQdisc returns the kind of the root queueing discipline of interface ifindex (in the
// calling thread's namespace) when it is one that limits or alters traffic (tbf, netem, htb,
// cake, fq's pacing, ...), else "". The generator's frames never pass it: live-frame XDP_TX
// hands them to the driver's XDP transmit (ndo_xdp_xmit), below the qdisc layer, so a shaper
// on the sender's own interface never sees them and a measurement through it would not be
// shaped at all.
//
// Equivalent to: tc qdisc show dev IF root
func BypassedQdisc(ifindex int) (string, error) {
	l, err := netlink.LinkByIndex(ifindex)
	if err != nil {
		return "", fmt.Errorf("read interface %d: %w", ifindex, err)
	}
	qs, err := netlink.QdiscList(l)
	if err != nil {
		return "", fmt.Errorf("list the qdiscs of %s: %w", l.Attrs().Name, err)
	}
	for _, q := range qs {
		if a := q.Attrs(); a.Parent == netlink.HANDLE_ROOT && !passThrough[q.Type()] {
			return q.Type(), nil
		}
	}
	return "", nil
}
