package api

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"
)

// DataPlane puts port chains into the kernel. The API calls it before it answers, as
// networking-sfc does: a 201 means the chain steers traffic. Both calls must be idempotent:
// after a restart the server applies every stored chain again and removes chains whose
// creation was interrupted. Calls are serialized (never two at once).
//
// The transparent data plane compiles a lab's whole model into its maps, so its adapter keeps
// per lab the chains it was given, and on every call rebuilds the lab's model (the lab file's
// resources plus these chains, ports by node and interface), compiles it with the ports'
// bindings and writes the tables to the lab's pinned maps.
type DataPlane interface {
	// ApplyChain installs a chain, or replaces the installed chain with the same ID (an
	// update of its groups, classifiers or port pairs).
	ApplyChain(ctx context.Context, c *Chain) error
	// RemoveChain stops steering a chain; a chain that is not installed is no error.
	RemoveChain(ctx context.Context, lab, id string) error
}

// GraphPlane is a DataPlane that also links chains into service graphs: traffic leaving a
// graph's source chain continues into the destination chain whose classifier matches. The
// server calls ApplyGraph after a graph is validated (and at start for every stored graph)
// and RemoveGraph before it is deleted; both must be idempotent. A DataPlane without it gets
// graphs stored, not steered.
type GraphPlane interface {
	ApplyGraph(ctx context.Context, g *Graph) error
	RemoveGraph(ctx context.Context, lab, id string) error
}

// Checker is a DataPlane that says, before anything is stored or applied, whether it can
// steer a chain or link a graph, so that a limit of the data plane is a 400 the client can
// act on, not a 500 after the fact: networking-sfc's drivers refuse what they cannot do the
// same way, with SfcBadRequest in their precommit. Both return nil, an *Error (the API
// answers it as it is), or another error (the check itself failed: a 500 SfcDriverError).
// c and g replace the chain or graph of their id, if there is one.
type Checker interface {
	CheckChain(ctx context.Context, c *Chain) error
	CheckGraph(ctx context.Context, g *Graph) error
}

// Graph is a service graph resolved for a data plane: its edges by port chain id.
type Graph struct {
	Lab  string `json:"lab"`
	ID   string `json:"id"`
	Name string `json:"name"`
	// Edges maps a source chain's id to the ids of the chains its traffic continues on.
	Edges map[string][]string `json:"edges"`
	// LabFile names, by id, the chains of the graph that the lab file declares (their name
	// there); the others were created over the API.
	LabFile map[string]string `json:"lab_file,omitempty"`
}

// Chain is a port chain resolved to what a data plane needs: every id replaced by the port,
// pair, group and classifier it names.
type Chain struct {
	Lab         string       `json:"lab"`
	ID          string       `json:"id"`
	Name        string       `json:"name"`
	ChainID     int          `json:"chain_id"`
	Symmetric   bool         `json:"symmetric"`
	Correlation string       `json:"correlation"`
	Classifiers []Classifier `json:"classifiers"`
	Groups      []Group      `json:"groups"`
	// LabFile is the chain's name in the lab file when the lab file declares it ("" for a
	// chain created over the API). The same field on a classifier, group or pair says the
	// chain uses that resource of the lab file: a data plane that holds the file's resources
	// must reuse it, not add a copy.
	LabFile string `json:"lab_file,omitempty"`
}

// Classifier is a flow classifier with its logical ports resolved.
type Classifier struct {
	ID                      string `json:"id"`
	Ethertype               string `json:"ethertype"`
	Protocol                string `json:"protocol,omitempty"`
	SourcePortRangeMin      int    `json:"source_port_range_min,omitempty"`
	SourcePortRangeMax      int    `json:"source_port_range_max,omitempty"`
	DestinationPortRangeMin int    `json:"destination_port_range_min,omitempty"`
	DestinationPortRangeMax int    `json:"destination_port_range_max,omitempty"`
	SourceIPPrefix          string `json:"source_ip_prefix,omitempty"`
	DestinationIPPrefix     string `json:"destination_ip_prefix,omitempty"`
	// PortZero says a port range of the classifier is exactly port 0 (0:0): a data plane
	// that reads 0 as "any port" cannot steer it. Port ranges given with one bound have
	// the other filled in (0 or 65535).
	PortZero           bool     `json:"port_zero,omitempty"`
	LogicalSource      *PortRef `json:"logical_source_port,omitempty"`
	LogicalDestination *PortRef `json:"logical_destination_port,omitempty"`
	LabFile            string   `json:"lab_file,omitempty"`
}

// Group is one hop of a chain: a port pair group.
type Group struct {
	ID       string   `json:"id"`
	GroupID  int      `json:"group_id"`
	Tap      bool     `json:"tap"`
	LBFields []string `json:"lb_fields"`
	Pairs    []Pair   `json:"pairs"`
	LabFile  string   `json:"lab_file,omitempty"`
}

// Pair is one instance of a hop's function.
type Pair struct {
	ID      string  `json:"id"`
	Weight  int     `json:"weight"`
	Ingress PortRef `json:"ingress"`
	Egress  PortRef `json:"egress"`
	LabFile string  `json:"lab_file,omitempty"`
}

// PortRef is where a Neutron port is in the lab: node, namespace and interface.
type PortRef struct {
	ID    string `json:"id"`
	Node  string `json:"node"`
	Netns string `json:"netns"`
	Iface string `json:"iface"`
	MAC   string `json:"mac"`
	Addr  string `json:"addr"`
}

func refOf(p *Port) PortRef {
	r := PortRef{ID: p.ID, Node: p.Node, Netns: p.Netns, Iface: p.Iface, MAC: p.MACAddress}
	if p.Addr.IsValid() {
		r.Addr = p.Addr.String()
	}
	return r
}

// RecordedCall is one call a Recorder received.
type RecordedCall struct {
	Op    string    `json:"op"` // "apply", "remove", "apply_graph" or "remove_graph"
	Lab   string    `json:"lab"`
	ID    string    `json:"id"`
	Chain *Chain    `json:"chain,omitempty"`
	Graph *Graph    `json:"graph,omitempty"`
	Time  time.Time `json:"time"`
}

// Recorder is a DataPlane that steers nothing: it records every call it receives and keeps
// the set of chains that would be installed, for tests and for `sfclab serve` until the
// transparent data plane is wired (`sfclab serve --record FILE` keeps the calls). With Path set it also appends each call
// as a JSON line to that file before answering (so a test sees what a killed server did).
type Recorder struct {
	Path string
	// Delay is slept inside ApplyChain after the call is recorded (tests kill the server there).
	Delay time.Duration

	mu        sync.Mutex
	calls     []RecordedCall
	installed map[string]*Chain
	graphs    map[string]*Graph
}

var _ GraphPlane = (*Recorder)(nil)

// ApplyGraph records the graph and marks it installed.
func (r *Recorder) ApplyGraph(_ context.Context, g *Graph) error {
	cp := *g
	if err := r.record(RecordedCall{Op: "apply_graph", Lab: g.Lab, ID: g.ID, Graph: &cp, Time: time.Now()}); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.graphs == nil {
		r.graphs = map[string]*Graph{}
	}
	r.graphs[g.ID] = &cp
	return nil
}

// RemoveGraph records the removal and forgets the graph.
func (r *Recorder) RemoveGraph(_ context.Context, lab, id string) error {
	if err := r.record(RecordedCall{Op: "remove_graph", Lab: lab, ID: id, Time: time.Now()}); err != nil {
		return err
	}
	r.mu.Lock()
	delete(r.graphs, id)
	r.mu.Unlock()
	return nil
}

// Graphs returns the graphs installed now, by id.
func (r *Recorder) Graphs() map[string]*Graph {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]*Graph, len(r.graphs))
	for k, v := range r.graphs {
		out[k] = v
	}
	return out
}

// ApplyChain records the chain and marks it installed.
func (r *Recorder) ApplyChain(ctx context.Context, c *Chain) error {
	cp := *c
	if err := r.record(RecordedCall{Op: "apply", Lab: c.Lab, ID: c.ID, Chain: &cp, Time: time.Now()}); err != nil {
		return err
	}
	r.mu.Lock()
	if r.installed == nil {
		r.installed = map[string]*Chain{}
	}
	r.installed[c.ID] = &cp
	r.mu.Unlock()
	if r.Delay > 0 {
		select {
		case <-time.After(r.Delay):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// RemoveChain records the removal and forgets the chain.
func (r *Recorder) RemoveChain(_ context.Context, lab, id string) error {
	if err := r.record(RecordedCall{Op: "remove", Lab: lab, ID: id, Time: time.Now()}); err != nil {
		return err
	}
	r.mu.Lock()
	delete(r.installed, id)
	r.mu.Unlock()
	return nil
}

func (r *Recorder) record(c RecordedCall) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, c)
	if r.Path == "" {
		return nil
	}
	line, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("record data plane call: %w", err)
	}
	f, err := os.OpenFile(r.Path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("record data plane call: %w", err)
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("record data plane call: %w", err)
	}
	return f.Close()
}

// Calls returns a copy of the calls received so far.
func (r *Recorder) Calls() []RecordedCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]RecordedCall(nil), r.calls...)
}

// Installed returns the chains installed now, by id.
func (r *Recorder) Installed() map[string]*Chain {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]*Chain, len(r.installed))
	for k, v := range r.installed {
		out[k] = v
	}
	return out
}
