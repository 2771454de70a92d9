package netdev

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/vishvananda/netlink"
)

// AddMacvlan creates a macvlan device in bridge mode on parent (a device of this namespace)
// directly in target's namespace under name, left down. Macvlans of one parent in bridge mode
// reach each other inside the parent's driver, and everything else through the parent.
//
// Equivalent to: ip -n NS link add NAME link PARENT netns TARGET mtu MTU type macvlan mode bridge
func (n *NS) AddMacvlan(parent string, target *NS, name string, mtu int) error {
	return n.addOnParent("macvlan", parent, target, name, mtu, func(attrs netlink.LinkAttrs) netlink.Link {
		return &netlink.Macvlan{LinkAttrs: attrs, Mode: netlink.MACVLAN_MODE_BRIDGE}
	})
}

// addOnParent creates the link that mk makes of attrs (name, MTU, parent parent of this
// namespace, namespace target's) directly in target's namespace, left down: AddMacvlan's and
// AddMacvtap's common part; kind names the link in errors.
func (n *NS) addOnParent(kind, parent string, target *NS, name string, mtu int, mk func(netlink.LinkAttrs) netlink.Link) error {
	if target == nil {
		target = n
	}
	what := fmt.Sprintf("add %s %s on %s", kind, target.where(name), n.where(parent))
	if err := checkIfname(name); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	h, p, err := n.link(parent)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	attrs := netlink.NewLinkAttrs()
	attrs.Name = name
	attrs.MTU = mtu
	attrs.ParentIndex = p.Attrs().Index
	attrs.Namespace = netlink.NsFd(target.fd)
	if err := h.LinkAdd(mk(attrs)); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// MoveLink sets link down, gives it the alias alias ("" keeps the current one), moves it into
// target's namespace under its current name, and renames it there to name (so a name taken in
// this namespace, such as the host's eth0, does not matter).
//
// Equivalent to: ip -n NS link set LINK down alias ALIAS netns TARGET; ip -n TARGET link set LINK name NAME
func (n *NS) MoveLink(link string, target *NS, name, alias string) error {
	what := fmt.Sprintf("move %s to %s", n.where(link), target.where(name))
	if err := checkIfname(name); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	h, l, err := n.link(link)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := h.LinkSetDown(l); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if alias != "" {
		if err := h.LinkSetAlias(l, alias); err != nil {
			return fmt.Errorf("%s: set alias: %w", what, err)
		}
	}
	if err := h.LinkSetNsFd(l, int(target.fd)); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if link != name {
		if err := target.RenameLink(link, name); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	return nil
}

// dumpRetries is how many times an interrupted netlink dump is read again.
const dumpRetries = 5

// LinkAlias is a device and its alias (ifalias).
type LinkAlias struct {
	Name, Alias string
}

// Aliased lists the devices of the namespace whose alias starts with prefix.
//
// Equivalent to: ip -n NS -o link show | grep 'alias PREFIX'
func (n *NS) Aliased(prefix string) ([]LinkAlias, error) {
	h, err := n.handle()
	if err != nil {
		return nil, fmt.Errorf("list links of %s: %w", displayName(n.name), err)
	}
	// A dump that overlaps link changes in the namespace (the kernel flags it
	// NLM_F_DUMP_INTR, e.g. while a teardown deletes veths beside it) is read again:
	// a destroy must not fail on it (study D's full run lost 63 trials to one such).
	var links []netlink.Link
	for try := 0; ; try++ {
		links, err = h.LinkList()
		if !errors.Is(err, netlink.ErrDumpInterrupted) || try == dumpRetries {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("list links of %s: %w", displayName(n.name), err)
	}
	var out []LinkAlias
	for _, l := range links {
		if a := l.Attrs().Alias; strings.HasPrefix(a, prefix) {
			out = append(out, LinkAlias{Name: l.Attrs().Name, Alias: a})
		}
	}
	return out, nil
}

// ClearAlias removes a device's alias.
//
// Equivalent to: ip -n NS link set LINK alias ""
func (n *NS) ClearAlias(link string) error {
	h, l, err := n.link(link)
	if err != nil {
		return fmt.Errorf("clear alias of %s: %w", n.where(link), err)
	}
	if err := h.LinkSetAlias(l, ""); err != nil {
		return fmt.Errorf("clear alias of %s: %w", n.where(link), err)
	}
	return nil
}

// HostDevice describes a device of this namespace for the checks before it is taken: does it
// exist, does it carry addresses, is it the interface of a default route.
type HostDevice struct {
	Exists, HasAddress, DefaultRoute bool
	Kind                             string
}

// Inspect returns what the checks before taking a device need to know about link.
//
// Equivalent to: ip -n NS addr show LINK; ip -n NS route show default
func (n *NS) Inspect(link string) (HostDevice, error) {
	h, l, err := n.link(link)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return HostDevice{}, nil
		}
		return HostDevice{}, err
	}
	d := HostDevice{Exists: true, Kind: l.Type()}
	addrs, err := h.AddrList(l, netlink.FAMILY_ALL)
	if err != nil {
		return d, fmt.Errorf("list addresses of %s: %w", n.where(link), err)
	}
	for _, a := range addrs {
		if a.IP != nil && !a.IP.IsLinkLocalUnicast() {
			d.HasAddress = true
		}
	}
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		routes, err := h.RouteListFiltered(fam, &netlink.Route{Table: 0}, 0)
		if err != nil {
			return d, fmt.Errorf("list routes of %s: %w", displayName(n.name), err)
		}
		for _, r := range routes {
			isDefault := r.Dst == nil || (r.Dst.IP.IsUnspecified() && ones(r.Dst) == 0)
			if isDefault && r.LinkIndex == l.Attrs().Index {
				d.DefaultRoute = true
			}
			for _, nh := range r.MultiPath {
				if isDefault && nh.LinkIndex == l.Attrs().Index {
					d.DefaultRoute = true
				}
			}
		}
	}
	return d, nil
}

func ones(n *net.IPNet) int {
	o, _ := n.Mask.Size()
	return o
}
