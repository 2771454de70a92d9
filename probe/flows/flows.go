// Package flows is the steering check of study C (its Fig. 6): several iperf3 flows at once,
// each classified into its own chain, while every function's port counters are read once per
// interval, so the traffic at each function's egress is a time series: a function shared by
// chains carries the sum of theirs, and a tap's ingress shows the copies it gets.
package flows

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/sfclab/sfclab/hosts"
	"github.com/sfclab/sfclab/netdev"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/probe"
	"github.com/sfclab/sfclab/probe/iperf3"
	"github.com/sfclab/sfclab/results"
	"github.com/sfclab/sfclab/results/metric"
	"github.com/sfclab/sfclab/spec"
	"github.com/vishvananda/netlink"
)

// Name is the probe's name in samples.
const Name = "flows"

// Metrics of the probe's samples.
const (
	// MetricEgressRate is a function's egress rate over one interval, bit/s; labels node,
	// host, t (the interval's nominal end in seconds since the flows started: i x interval).
	MetricEgressRate = "egress_rate"
	// MetricTapRate is a tap function's ingress rate (the copies it receives), bit/s; same
	// labels as MetricEgressRate.
	MetricTapRate = "tap_rate"
	// MetricEgressBytes and MetricTapBytes are the totals over the whole run, bytes; label
	// node, host.
	MetricEgressBytes = "egress_bytes"
	MetricTapBytes    = "tap_bytes"
	// MetricFlowThroughput is a flow's throughput as iperf3 reports it, bit/s; labels flow
	// (its chain), side, bitrate, duration.
	MetricFlowThroughput = "flow_throughput"
	// MetricFlowLoss is a UDP flow's loss as iperf3's receiver reports it, %; label flow.
	MetricFlowLoss = "flow_loss"
)

// Flow is one iperf3 flow.
type Flow struct {
	// Chain is the chain (port chain) the flow is classified into; its classifier must name
	// one destination port, which tells the flows apart.
	Chain string
	// Protocol is "udp" (default) or "tcp".
	Protocol string
	// Bitrate is the UDP rate (iperf3 -b, e.g. "1M").
	Bitrate string
	// Duration is how long the flow lasts (whole seconds).
	Duration time.Duration
}

// Config is one run of the probe.
type Config struct {
	Flows []Flow
	// Interval between two counter readings (default 1s).
	Interval time.Duration
}

type prober struct{ cfg Config }

// New returns the probe.
func New(cfg Config) probe.Probe { return &prober{cfg: cfg} }

// Name returns "flows".
func (*prober) Name() string { return Name }

// port is one counted port: a function's egress, or a tap's ingress.
type port struct {
	Port
	ns *netdev.NS
	// host and peer: where a Peer port's host-side end is (its namespace, its ifindex there).
	host        *netdev.NS
	peer        int
	first, last uint64
}

// Port is a port the probe counts: Ifname inside node Node (namespace Netns), on Host (""
// for a routed lab); Tap says it is a tap's ingress (else a function's egress).
type Port struct {
	Node, Host, Ifname, Netns string
	Tap                       bool
	// Peer: count what the host-side end of the port's veth received (in namespace HostNetns,
	// "" the machine's own) instead of what the port transmitted. A transparent function's
	// egress: a forwarder's bump program hands its frames to that end directly, so the port
	// itself counts no transmit; the host-side end counts them either way.
	Peer      bool
	HostNetns string
	// Prev and PrevHost are, for a tap, the hop before it in the (first) chain that taps
	// into it, and that hop's host (study C: networking-sfc's tap worked only there).
	Prev, PrevHost string
}

// isTap reports whether a node's function is a tap (spec.Tap): it only receives copies.
func isTap(n *plan.TNode) bool { return n != nil && n.Function != nil && spec.IsTap(n.Function.Params) }

// Ports returns the ports the probe counts, in plan order: every function's egress interface
// (inside its node) and, for a tap, its ingress.
func Ports(p *plan.Plan) []Port {
	var out []Port
	if t := p.Transparent; t != nil {
		prev := map[string]string{}
		for _, pc := range t.Model.PortChains {
			c, err := p.ProbeChain(pc.Name)
			if err != nil {
				continue
			}
			for i, h := range c.Hops {
				if len(h.Instances) == 0 || !isTap(t.Node(h.Instances[0])) || prev[h.Instances[0]] != "" {
					continue
				}
				before := c.From
				for j := i - 1; j >= 0; j-- {
					if len(c.Hops[j].Instances) > 0 && !isTap(t.Node(c.Hops[j].Instances[0])) {
						before = c.Hops[j].Instances[0]
						break
					}
				}
				prev[h.Instances[0]] = before
			}
		}
		for _, n := range t.Nodes {
			if n.Role != plan.RoleFunction || n.Function == nil {
				continue
			}
			tap := isTap(n)
			ifn := n.Function.Egress
			if tap {
				ifn = n.Function.Ingress
			}
			pt := Port{Node: n.Name, Host: n.Host, Ifname: ifn, Netns: n.Netns, Tap: tap, Peer: !tap}
			if h := t.Host(n.Host); h != nil {
				pt.HostNetns = h.Netns
			}
			if b := t.Node(prev[n.Name]); tap && b != nil {
				pt.Prev, pt.PrevHost = b.Name, b.Host
			}
			out = append(out, pt)
		}
		return out
	}
	for _, n := range p.Nodes {
		if n.Role == plan.RoleFunction && n.Function != nil {
			out = append(out, Port{Node: n.Name, Ifname: n.Function.Egress, Netns: n.Netns})
		}
	}
	return out
}

// Validate checks the flows against a plan: every chain exists and has its own destination
// port, durations are 1s-1h.
func (c Config) Validate(p *plan.Plan) error {
	if len(c.Flows) == 0 || len(c.Flows) > 16 {
		return fmt.Errorf("configure flows: give 1-16 flows, got %d", len(c.Flows))
	}
	if c.Interval != 0 && (c.Interval < 100*time.Millisecond || c.Interval > time.Minute) {
		return fmt.Errorf("configure flows: interval %s must be 100ms-1m", c.Interval)
	}
	ports := map[uint16]string{}
	for _, f := range c.Flows {
		if f.Protocol != "" && f.Protocol != "udp" && f.Protocol != "tcp" {
			return fmt.Errorf("configure flows: flow on %s: protocol %q is not udp or tcp", f.Chain, f.Protocol)
		}
		if f.Duration < time.Second || f.Duration > time.Hour {
			return fmt.Errorf("configure flows: flow on %s: duration %s must be 1s-1h", f.Chain, f.Duration)
		}
		ch, err := p.ProbeChain(f.Chain)
		if err != nil {
			return fmt.Errorf("configure flows: %w", err)
		}
		if ch.Port == 0 {
			return fmt.Errorf("configure flows: chain %s: its flow classifier must name one destination port (destination_port_range_min = max) so that each flow reaches its own server", f.Chain)
		}
		if other, ok := ports[ch.Port]; ok {
			return fmt.Errorf("configure flows: chains %s and %s both use destination port %d; give each flow's classifier its own port", other, f.Chain, ch.Port)
		}
		ports[ch.Port] = f.Chain
	}
	return nil
}

// Run starts a one-off iperf3 server per flow on its chain's destination (in a VM
// destination through the guest's agent: iperf3.StartServer), waits until they listen,
// starts every flow at once, reads the counted ports every interval until the longest flow
// ended (plus one interval), and emits the rates, the totals and each flow's iperf3 figures.
// The servers still running on the way out (done, failed, cancelled) are stopped
// (iperf3.StopServers: a guest's through its agent).
func (pr *prober) Run(ctx context.Context, env probe.Env, emit func(results.Sample)) (err error) {
	cfg := pr.cfg
	if cfg.Interval == 0 {
		cfg.Interval = time.Second
	}
	if err := cfg.Validate(env.Plan); err != nil {
		return err
	}
	var ports []*port
	defer func() {
		for _, pt := range ports {
			if pt.ns != nil {
				pt.ns.Close()
			}
			if pt.host != nil {
				pt.host.Close()
			}
		}
	}()
	for _, p := range Ports(env.Plan) {
		ns, err := netdev.OpenNS(p.Netns)
		if err != nil {
			return fmt.Errorf("count ports of %s: %w", p.Node, err)
		}
		pt := &port{Port: p, ns: ns}
		ports = append(ports, pt)
		if p.Peer {
			if pt.peer, _, err = hosts.PeerOf(ns, p.Ifname); err != nil {
				return fmt.Errorf("count ports of %s: %w", p.Node, err)
			}
			if pt.host, err = netdev.OpenNS(p.HostNetns); err != nil {
				return fmt.Errorf("count ports of %s: %w", p.Node, err)
			}
		}
	}
	read := func(pt *port) (uint64, error) {
		if pt.Peer {
			var rx uint64
			err := pt.host.Do(func() error {
				l, err := netlink.LinkByIndex(pt.peer)
				if err != nil {
					return err
				}
				if st := l.Attrs().Statistics; st != nil {
					rx = st.RxBytes
				}
				return nil
			})
			if err != nil {
				return 0, fmt.Errorf("read counters of %s %s (its host-side end, ifindex %d): %w", pt.Node, pt.Ifname, pt.peer, err)
			}
			return rx, nil
		}
		st, err := pt.ns.LinkStats(pt.Ifname)
		if err != nil {
			return 0, fmt.Errorf("read counters of %s %s: %w", pt.Node, pt.Ifname, err)
		}
		if pt.Tap {
			return st.RxBytes, nil
		}
		return st.TxBytes, nil
	}

	logDir := env.LogDir
	if logDir == "" {
		if logDir, err = os.MkdirTemp("", "sfclab-flows-"); err != nil {
			return err
		}
		defer os.RemoveAll(logDir)
	}
	type run struct {
		flow  Flow
		chain *plan.Chain
		src   probe.Node
		res   iperf3.Result
		err   error
	}
	var runs []*run
	var servers []iperf3.Server
	defer func() {
		if serr := iperf3.StopServers(servers); serr != nil {
			err = errors.Join(err, serr)
		}
	}()
	longest := time.Duration(0)
	for _, f := range cfg.Flows {
		ch, _ := env.Plan.ProbeChain(f.Chain) // checked by Validate
		src, err := env.Node(ch.Path[0])
		if err != nil {
			return fmt.Errorf("start flow on %s: %w", f.Chain, err)
		}
		dst, err := env.Node(ch.To)
		if err != nil {
			return fmt.Errorf("start flow on %s: %w", f.Chain, err)
		}
		log := filepath.Join(logDir, fmt.Sprintf("flows-server-%s-%d.log", ch.To, ch.Port))
		srv, err := iperf3.StartServer(dst, ch.To, ch.Port, log)
		if err != nil {
			return fmt.Errorf("start flow on %s: %w", f.Chain, err)
		}
		servers = append(servers, srv)
		runs = append(runs, &run{flow: f, chain: ch, src: src})
		longest = max(longest, f.Duration)
	}
	// The servers listen: on the host best effort (the clients retry a refusal anyway); in a
	// VM guest a check, since an emulated iperf3 may take seconds to start.
	if err := iperf3.WaitServers(ctx, servers); err != nil {
		return fmt.Errorf("start flows: %w", err)
	}

	for _, pt := range ports {
		v, err := read(pt)
		if err != nil {
			return err
		}
		pt.first, pt.last = v, v
	}
	start := time.Now()
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Go(func() {
			c := iperf3.Config{Duration: r.flow.Duration, Protocol: r.flow.Protocol, Bitrate: r.flow.Bitrate}
			if c.Protocol == "" {
				c.Protocol = "udp"
			}
			rctx, cancel := context.WithTimeout(ctx, c.Timeout())
			defer cancel()
			args := c.ClientArgs(r.chain.Target.String(), r.chain.Port)
			// A VM source's client runs in its guest through the agent (as iperf3's): its
			// report's start second is the guest's clock, kept out of the flows' timing
			// (which is the host's: the counters' readings); an emulated iperf3 also takes
			// longer to fail.
			_, inGuest := probe.InGuest(r.src)
			quick := time.Second
			if inGuest {
				quick = 5 * time.Second
			}
			for try := 0; ; try++ {
				began := time.Now()
				out, rerr := r.src.Output(rctx, nil, args...)
				res, perr := iperf3.Parse(out)
				if perr == nil {
					if inGuest {
						res.Timesecs = 0
					}
					r.res = res
					return
				}
				// Only a quick failure (no server listening yet) is tried again: a flow that
				// ran and failed is not restarted.
				if try >= 20 || rctx.Err() != nil || time.Since(began) > quick {
					r.err = fmt.Errorf("flow on %s to %s:%d: %w", r.flow.Chain, r.chain.Target, r.chain.Port, errors.Join(perr, rerr))
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()

	tick := time.NewTicker(cfg.Interval)
	defer tick.Stop()
	prev := start
	finished := false
	var sampleErr error
	for i := 1; ; i++ {
		select {
		case <-ctx.Done():
			<-done
			return ctx.Err()
		case <-done:
			finished = true
			<-tick.C
		case <-tick.C:
		}
		now := time.Now()
		dt := now.Sub(prev).Seconds()
		prev = now
		// t is nominal (interval i's end), so trials line up; the sample's time is the real one.
		t := strconv.FormatFloat(float64(i)*cfg.Interval.Seconds(), 'f', -1, 64)
		for _, pt := range ports {
			v, err := read(pt)
			if err != nil {
				sampleErr = err
				continue
			}
			d := metric.FlowsEgressRate
			if pt.Tap {
				d = metric.FlowsTapRate
			}
			s := d.Sample(float64(v-pt.last)*8/dt, map[string]string{"node": pt.Node, "host": pt.Host, "t": t})
			s.Time = now.UTC()
			emit(s)
			pt.last = v
		}
		if finished || now.Sub(start) > longest+iperf3.ExtraTime+time.Duration(len(cfg.Flows))*time.Second {
			break
		}
	}
	<-done
	for _, pt := range ports {
		d := metric.FlowsEgressBytes
		if pt.Tap {
			d = metric.FlowsTapBytes
		}
		l := map[string]string{"node": pt.Node, "host": pt.Host}
		if pt.Tap {
			l["prev"], l["prev_host"] = pt.Prev, pt.PrevHost
		}
		emit(d.Sample(float64(pt.last-pt.first), l))
	}
	var errs []error
	for _, r := range runs {
		if r.err != nil {
			errs = append(errs, r.err)
			continue
		}
		l := map[string]string{"flow": r.flow.Chain, "bitrate": r.flow.Bitrate, "duration": r.flow.Duration.String()}
		for _, side := range []struct {
			name string
			v    float64
		}{{"sender", r.res.SentBPS}, {"receiver", r.res.ReceivedBPS}} {
			ls := map[string]string{"side": side.name}
			for k, v := range l {
				ls[k] = v
			}
			emit(metric.FlowsThroughput.Sample(side.v, ls))
		}
		if r.res.Protocol == "udp" {
			emit(metric.FlowsLoss.Sample(r.res.LostPercent, l))
		}
	}
	return errors.Join(append(errs, sampleErr)...)
}
