package load

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/sfclab/sfclab/probe"
	"github.com/sfclab/sfclab/spec"
)

// Background nodes: study D's background containers. K extra nodes join a scenario's lab,
// in pairs (bg1 -> bg2, bg3 -> bg4, ...: one chain and one network each), each loading what it
// can load: its CPU (one stress-ng worker per node) or the network (the pair pushes bounded
// UDP at a capped rate from the odd node to the even one). They are deployed and destroyed
// with the lab, so nothing of them outlives a trial. How many a machine holds is NodeLimit.
//
// On emulated hosts (a lab with hosts:) the side picks the host: "sender" is the host of the
// lab's first chain's source, "responder" that of its destination. Kind cpu puts all K nodes
// on that host, so with cores (cpus:) they compete with that host's nodes only; kind network
// puts each pair's sending node there and its receiving node on the other side's host, so
// every pair's stream crosses the host link.
const (
	// NodePrefix names background nodes: bg1, bg2, ...
	NodePrefix = "bg"
	// DefaultNodeBitrate caps each background pair's UDP stream.
	DefaultNodeBitrate = "100M"
	// BitrateMax as a bitrate leaves each pair's UDP stream unthrottled (iperf3 -b 0): study D's
	// background containers sent "at the highest bandwidth occupation of each VM".
	BitrateMax = "max"
	// DriverSame as a background driver attaches every background node with the driver of
	// the lab's first chain's source (the main pair's).
	DriverSame = "same"
)

// iperf3Bitrate is the iperf3 -b argument for a background pair's bitrate: "0" (unlimited)
// for BitrateMax, DefaultNodeBitrate for "".
func iperf3Bitrate(b string) string {
	switch b {
	case "":
		return DefaultNodeBitrate
	case BitrateMax:
		return "0"
	}
	return b
}

// BackgroundDrivers are the drivers background nodes can be attached with: those that need no
// device of their own per node (host-device and sriov take one each).
func BackgroundDrivers() []string {
	return []string{DriverSame, spec.DriverVeth, spec.DriverMacvlan, spec.DriverEBPFRedirect}
}

// ErrNodes is wrapped by a background-node request the lab cannot take.
var ErrNodes = errors.New("invalid background nodes")

// Placement says where background nodes go on a lab with emulated hosts.
type Placement struct {
	// Kind is "cpu" or "network" ("" places like cpu).
	Kind string
	// Side is "sender" or "responder" ("" = sender).
	Side string
	// Driver attaches every background node (one of BackgroundDrivers; "" = the default,
	// veth): study D's §5.2 ran the background containers on the fast path (SR-IOV) while the
	// main pair used the bridge, and everything on the bridge.
	Driver string
}

// driver returns the spec driver the background nodes get (nil: the default).
func (pl Placement) driver(lab *spec.Lab) (*spec.Driver, error) {
	switch pl.Driver {
	case "":
		return nil, nil
	case DriverSame:
		if len(lab.Chains) == 0 {
			return nil, fmt.Errorf("add background nodes: %w: driver same needs a chain whose source's driver to copy", ErrNodes)
		}
		src := lab.Endpoints[lab.Chains[0].From.Name]
		if src == nil || src.Driver == nil {
			return nil, nil
		}
		if t := src.Driver.Type; t == spec.DriverHostDevice || t == spec.DriverSRIOV {
			return nil, fmt.Errorf("add background nodes: %w: driver same: the main pair's driver %s takes a device per node; give the background nodes one of %v", ErrNodes, t, BackgroundDrivers()[1:])
		}
		return &spec.Driver{Type: src.Driver.Type}, nil
	case spec.DriverVeth, spec.DriverMacvlan, spec.DriverEBPFRedirect:
		return &spec.Driver{Type: pl.Driver}, nil
	}
	return nil, fmt.Errorf("add background nodes: %w: driver %q is not one of %v", ErrNodes, pl.Driver, BackgroundDrivers())
}

// hosts returns the hosts of the side and of the other side (both "" on a lab without hosts).
func (pl Placement) hosts(lab *spec.Lab) (side, other string, err error) {
	if len(lab.Hosts) == 0 {
		return "", "", nil
	}
	if len(lab.Chains) == 0 {
		return "", "", fmt.Errorf("add background nodes: %w: lab %s has no chain to take sides from", ErrNodes, lab.Name)
	}
	hostOf := func(r spec.Ref) string {
		if e := lab.Endpoints[r.Name]; e != nil && e.Host != "" {
			return e.Host
		}
		return lab.Hosts[0].Name
	}
	snd, rsp := hostOf(lab.Chains[0].From), hostOf(lab.Chains[0].To)
	switch pl.Side {
	case "", "sender":
		return snd, rsp, nil
	case "responder":
		return rsp, snd, nil
	}
	return "", "", fmt.Errorf("add background nodes: %w: side %q is not sender or responder", ErrNodes, pl.Side)
}

// AddNodes adds count background endpoints (bg1 ... bgCOUNT, count even) and the chains that
// pair them to lab, placed on its emulated hosts by pl when it has hosts, and validates the
// result. A count over what the machine holds (NodeLimit) is refused with the figures.
func AddNodes(lab *spec.Lab, count int, pl Placement) error {
	lim := NodeLimit()
	switch {
	case count == 0:
		return nil
	case count < 0 || count > lim.Max:
		return fmt.Errorf("add background nodes: %w: count %d must be 0-%d (%s)", ErrNodes, count, lim.Max, lim.Why)
	case count%2 != 0:
		return fmt.Errorf("add background nodes: %w: count %d must be even (nodes come in pairs)", ErrNodes, count)
	}
	side, other, err := pl.hosts(lab)
	if err != nil {
		return err
	}
	drv, err := pl.driver(lab)
	if err != nil {
		return err
	}
	if lab.Endpoints == nil {
		lab.Endpoints = map[string]*spec.Endpoint{}
	}
	for i := 1; i <= count; i++ {
		name := NodeName(i)
		if _, taken := lab.Endpoints[name]; taken {
			return fmt.Errorf("add background nodes: %w: lab %s already has an endpoint %s", ErrNodes, lab.Name, name)
		}
		kind := spec.EndpointClient
		if i%2 == 0 {
			kind = spec.EndpointServer
		}
		host := side
		if pl.Kind == KindNetwork && i%2 == 0 {
			host = other // the pair's receiver: its stream crosses the host link
		}
		ep := &spec.Endpoint{Kind: kind, Host: host}
		if drv != nil {
			d := *drv
			ep.Driver = &d
		}
		lab.Endpoints[name] = ep
	}
	for i := 1; i < count; i += 2 {
		lab.Chains = append(lab.Chains, &spec.Chain{Name: "bgc" + strconv.Itoa((i+1)/2),
			From: spec.Ref{Name: NodeName(i)}, To: spec.Ref{Name: NodeName(i + 1)}})
	}
	if errs := spec.Validate(lab); len(errs) > 0 {
		return fmt.Errorf("add background nodes: %w", errs)
	}
	return nil
}

// NodeName is the name of background node i (1-based).
func NodeName(i int) string { return NodePrefix + strconv.Itoa(i) }

// NodesConfig is the load the background nodes of a trial run.
type NodesConfig struct {
	// Kind is "cpu" or "network".
	Kind string
	// Count is the number of background nodes in the lab (AddNodes).
	Count int
	// Bitrate caps each pair's UDP stream (iperf3 -b); "" means DefaultNodeBitrate,
	// BitrateMax no cap.
	Bitrate string
	// Limit is every process's hard time limit; 0 means ten minutes.
	Limit time.Duration
}

// StartNodes starts the load of every background node and returns it running; Stop ends it
// all. cpu: every node runs one stress-ng CPU worker; network: every pair runs
// iperf3 -u from its odd to its even node, capped at Bitrate, over the pair's own network.
//
// Equivalent to (cpu, per node): ip netns exec sfc.LAB.bgI timeout -s KILL LIMIT stress-ng --cpu 1 --timeout LIMIT
// (network, per pair): the same with iperf3 -s on bg2I and iperf3 -u -b RATE -c BG2I_ADDR on bg2I-1
// (RATE 0, unlimited, for BitrateMax).
func StartNodes(ctx context.Context, env probe.Env, cfg NodesConfig) (*Load, error) {
	all := &Load{cfg: Config{Kind: cfg.Kind, Count: cfg.Count, Node: NodePrefix + "*", Limit: cfg.Limit}}
	cfg.Bitrate = iperf3Bitrate(cfg.Bitrate)
	var errs []error
	switch cfg.Kind {
	case KindCPU:
		for i := 1; i <= cfg.Count; i++ {
			l, err := Start(ctx, env, Config{Kind: KindCPU, Count: 1, Node: NodeName(i), Limit: cfg.Limit})
			if err != nil {
				errs = append(errs, err)
				break
			}
			all.procs = append(all.procs, l.procs...)
			l.stop()
		}
	case KindNetwork:
		for i := 1; i < cfg.Count; i += 2 {
			pair := env
			pair.Chain = env.Plan.Chain("bgc" + strconv.Itoa((i+1)/2))
			if pair.Chain == nil {
				errs = append(errs, fmt.Errorf("background pair %d: the lab has no chain bgc%d (see AddNodes)", (i+1)/2, (i+1)/2))
				break
			}
			l, err := Start(ctx, pair, Config{Kind: KindNetwork, Count: 1, Node: NodeName(i), Bitrate: cfg.Bitrate, UDP: true, Limit: cfg.Limit})
			if err != nil {
				errs = append(errs, err)
				break
			}
			all.procs = append(all.procs, l.procs...)
			l.stop()
		}
	default:
		return nil, fmt.Errorf("start background nodes: kind %q is not one of cpu, network", cfg.Kind)
	}
	if len(errs) > 0 {
		return nil, errors.Join(append(errs, all.Stop())...)
	}
	all.stop = context.AfterFunc(ctx, func() { _ = all.Stop() })
	return all, nil
}
