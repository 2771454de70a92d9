package netdev

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// ErrNoNetem means the kernel has no netem queueing discipline (module sch_netem), so delay,
// jitter and loss cannot be emulated.
var ErrNoNetem = errors.New("the kernel has no netem (module sch_netem)")

// Shape is what a link's egress is limited to: a rate (tbf) and, with netem, delay, jitter
// and loss.
type Shape struct {
	RateBits    uint64
	BurstBytes  uint32
	Delay       time.Duration
	Jitter      time.Duration
	LossPercent float64
}

func (s Shape) netem() bool { return s.Delay > 0 || s.Jitter > 0 || s.LossPercent > 0 }

// tbfLatency is how long a packet may wait in the tbf queue; it sizes the queue (as tc's
// latency parameter does).
const tbfLatency = 50 * time.Millisecond

// NetemAvailable reports whether this kernel has netem: loaded, built in, or a module that
// modprobe would find. Nothing is loaded.
//
// Equivalent to: modinfo sch_netem
func NetemAvailable() error {
	if _, err := os.Stat("/sys/module/sch_netem"); err == nil {
		return nil
	}
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return fmt.Errorf("check netem: %w", err)
	}
	dir := filepath.Join("/lib/modules", unix.ByteSliceToString(u.Release[:]))
	for _, f := range []string{"modules.builtin", "modules.dep"} {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err == nil && strings.Contains(string(data), "/sch_netem.ko") {
			return nil
		}
	}
	return fmt.Errorf("check netem: %w: not loaded, not built in and not under %s; delay, jitter and loss need it (install the kernel's extra modules, or leave them out and keep rate)", ErrNoNetem, dir)
}

// SetShape replaces the root queueing discipline of a link: tbf for a rate alone; netem for
// delay, jitter or loss, with a tbf below it when a rate is set too.
//
// Equivalent to: tc qdisc replace dev LINK root tbf rate R burst B latency 50ms
// (or: tc qdisc replace dev LINK root handle 1: netem delay D J loss L; tc qdisc add dev LINK parent 1:1 tbf ...)
func (n *NS) SetShape(link string, s Shape) error {
	what := fmt.Sprintf("shape %s", n.where(link))
	h, l, err := n.link(link)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	idx := l.Attrs().Index
	parent := uint32(netlink.HANDLE_ROOT)
	if s.netem() {
		q := netlink.NewNetem(netlink.QdiscAttrs{LinkIndex: idx, Parent: netlink.HANDLE_ROOT, Handle: netlink.MakeHandle(1, 0)},
			netlink.NetemQdiscAttrs{Latency: uint32(s.Delay.Microseconds()), Jitter: uint32(s.Jitter.Microseconds()),
				Loss: float32(s.LossPercent), Limit: 10000})
		if err := h.QdiscReplace(q); err != nil {
			if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EOPNOTSUPP) {
				err = ErrNoNetem
			}
			return fmt.Errorf("%s: netem: %w", what, err)
		}
		parent = netlink.MakeHandle(1, 1)
	}
	if s.RateBits > 0 {
		rate := s.RateBits / 8
		limit := uint64(float64(rate)*tbfLatency.Seconds()) + uint64(s.BurstBytes)
		q := &netlink.Tbf{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: idx, Parent: parent, Handle: netlink.MakeHandle(2, 0)},
			Rate: rate, Buffer: netlink.Xmittime(rate, s.BurstBytes), Limit: uint32(min(limit, math.MaxUint32))}
		if err := h.QdiscReplace(q); err != nil {
			return fmt.Errorf("%s: tbf: %w", what, err)
		}
	}
	return nil
}

// Shaping describes the tbf and netem queueing disciplines of a link ("" when it has none),
// as tc shows them.
//
// Equivalent to: tc qdisc show dev LINK
func (n *NS) Shaping(link string) (string, error) {
	h, l, err := n.link(link)
	if err != nil {
		return "", fmt.Errorf("read qdiscs of %s: %w", n.where(link), err)
	}
	qs, err := h.QdiscList(l)
	if err != nil {
		return "", fmt.Errorf("read qdiscs of %s: %w", n.where(link), err)
	}
	var parts []string
	for _, q := range qs {
		switch q := q.(type) {
		case *netlink.Netem:
			p := fmt.Sprintf("netem delay %s", time.Duration(q.Latency)*time.Microsecond)
			if q.Jitter > 0 {
				p += fmt.Sprintf(" jitter %s", time.Duration(q.Jitter)*time.Microsecond)
			}
			if q.Loss > 0 {
				p += fmt.Sprintf(" loss %.3g%%", float64(q.Loss)/float64(math.MaxUint32)*100)
			}
			parts = append(parts, p)
		case *netlink.Tbf:
			parts = append(parts, fmt.Sprintf("tbf rate %s burst %db", rateText(q.Rate*8), netlink.Xmitsize(q.Rate, q.Buffer)))
		}
	}
	return strings.Join(parts, ", "), nil
}

func rateText(bits uint64) string {
	for _, u := range []struct {
		s string
		m float64
	}{{"gbit", 1e9}, {"mbit", 1e6}, {"kbit", 1e3}} {
		if float64(bits) >= u.m {
			return fmt.Sprintf("%.4g%s", float64(bits)/u.m, u.s)
		}
	}
	return fmt.Sprintf("%dbit", bits)
}
