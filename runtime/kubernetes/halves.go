package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"sync"

	"github.com/sfclab/sfclab/hosts"
	"github.com/sfclab/sfclab/plan"
)

// The wiring of a lab across Kubernetes nodes (docs/kubernetes.md): each node's agent builds
// its half of the lab's topology, hosts.Topology.Local, whose VXLAN devices (a transparent
// lab's steering device too) it creates in the node's own network namespace on the device
// that holds the node's address and floods to the other nodes' addresses; AttachSteering
// splits a transparent lab's steering the same way.

// nodeHalves splits a lab's topology (in its slot) into one part per Kubernetes node, by
// node: the part builds only the emulated host whose nodes run on that Kubernetes node
// (Local), and every host's underlay address is its Kubernetes node's InternalIP (addrs, by
// Kubernetes node). hostNode maps each emulated host of the topology to its Kubernetes node;
// two hosts on one Kubernetes node, or a host without an address, are refused.
func nodeHalves(topo *hosts.Topology, hostNode map[string]string, addrs map[string]netip.Addr) (map[string]*hosts.Topology, error) {
	byNode := map[string]string{} // Kubernetes node -> host
	hs := slices.Clone(topo.Hosts)
	for i, h := range hs {
		kn := hostNode[h.Name]
		if kn == "" {
			return nil, fmt.Errorf("split the topology of lab %s: host %s is on no Kubernetes node", topo.Lab, h.Name)
		}
		if other, dup := byNode[kn]; dup {
			return nil, fmt.Errorf("split the topology of lab %s: hosts %s and %s are both on Kubernetes node %s (one host per node)", topo.Lab, other, h.Name, kn)
		}
		byNode[kn] = h.Name
		a, ok := addrs[kn]
		if !ok || !a.IsValid() {
			return nil, fmt.Errorf("split the topology of lab %s: Kubernetes node %s has no InternalIP for its VXLAN devices", topo.Lab, kn)
		}
		hs[i].Underlay = netip.PrefixFrom(a, a.BitLen())
	}
	out := map[string]*hosts.Topology{}
	for kn, h := range byNode {
		part := *topo
		part.Hosts = hs
		part.Local = h
		part.UnderlayNS = "" // the agent's: the node's own network namespace
		part.UnderlayIf = "" // found by the agent: the device holding the node's address
		out[kn] = &part
	}
	return out, nil
}

// underlayDevice names the device of the agent's namespace (the node's) that holds addr: a
// node's half of a topology creates its VXLAN devices on it.
func underlayDevice(addr netip.Addr) (string, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return "", fmt.Errorf("find the node's device with address %s: %w", addr, err)
	}
	for _, i := range ifs {
		as, err := i.Addrs()
		if err != nil {
			continue
		}
		for _, a := range as {
			if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr() == addr {
				return i.Name, nil
			}
		}
	}
	return "", fmt.Errorf("find the node's device with address %s: none holds it", addr)
}

// localUnderlay fills in a node's half of a topology on its node: the device that holds
// the Local host's underlay address, when the half names none.
func localUnderlay(t *hosts.Topology) error {
	if t.Local == "" || t.UnderlayIf != "" {
		return nil
	}
	for _, h := range t.Hosts {
		if h.Name == t.Local {
			dev, err := underlayDevice(h.Underlay.Addr())
			if err != nil {
				return fmt.Errorf("build host %s of lab %s: %w", h.Name, t.Lab, err)
			}
			t.UnderlayIf = dev
			return nil
		}
	}
	return fmt.Errorf("build host %s of lab %s: %w", t.Local, t.Lab, hosts.ErrNoHost)
}

// labAgents returns the Kubernetes node of each of a deployed lab's pods (by lab node) and
// the agent pod on each of those nodes: the ones the lab's deploy in this process started
// with (deployAgents), else the ones running there now.
func (r Runtime) labAgents(ctx context.Context, p *plan.Plan) (c *client, where, agents map[string]string, err error) {
	c, err = r.client()
	if err != nil {
		return nil, nil, nil, err
	}
	var list struct{ Items []*podStatus }
	q := url.Values{"labelSelector": {LabelLab + "=" + p.Lab}}
	if err := c.do(ctx, "GET", "/api/v1/namespaces/"+Namespace(p.Lab)+"/pods", q, nil, &list); err != nil {
		return nil, nil, nil, fmt.Errorf("find the pods of lab %s: %w", p.Lab, err)
	}
	where, agents = map[string]string{}, map[string]string{}
	for _, ps := range list.Items {
		kn := ps.Spec.NodeName
		if kn == "" {
			continue
		}
		where[ps.Metadata.Labels[LabelNode]] = kn
		if agents[kn] == "" {
			if agents[kn], err = agentOn(ctx, c, p.Lab, kn); err != nil {
				return nil, nil, nil, err
			}
		}
	}
	for _, n := range p.Nodes {
		if where[n.Name] == "" {
			return nil, nil, nil, fmt.Errorf("find the pods of lab %s: pod %s is on no Kubernetes node", p.Lab, n.Name)
		}
	}
	return c, where, agents, nil
}

// internalIPs reads the InternalIP of each Kubernetes node named: the underlay of a lab's
// VXLAN devices between them.
func internalIPs(ctx context.Context, c *client, kubeNodes []string) (map[string]netip.Addr, error) {
	out := map[string]netip.Addr{}
	for _, kn := range kubeNodes {
		var n kubeNode
		if err := c.do(ctx, "GET", "/api/v1/nodes/"+kn, nil, nil, &n); err != nil {
			return nil, fmt.Errorf("read the address of Kubernetes node %s: %w", kn, err)
		}
		a, ok := n.internalIP()
		if !ok {
			return nil, fmt.Errorf("read the address of Kubernetes node %s: it has no InternalIP", kn)
		}
		out[kn] = a
	}
	return out, nil
}

// callEach sends each Kubernetes node's agent its request (reqs, by node) in parallel; ans,
// when not nil, gives the answer to decode each node's into.
func callEach[R any](ctx context.Context, c *client, agents map[string]string, op string, reqs map[string]R, ans func(kn string) any) error {
	var wg sync.WaitGroup
	errs := make([]error, len(reqs))
	i := 0
	for kn, req := range reqs {
		var a any
		if ans != nil {
			a = ans(kn)
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			errs[i] = agentCall(ctx, c, kn, agents[kn], op, req, a)
		}(i)
		i++
	}
	wg.Wait()
	return errors.Join(errs...)
}
