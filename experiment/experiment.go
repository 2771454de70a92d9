// Package experiment holds the experiment file: scenarios (a lab each), the probes to run in
// every trial, repetitions and warm-up. Decoding is strict and every problem comes back with
// file:line:col, and every lab is loaded and planned before anything is deployed.
package experiment

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/probe/flows"
	"github.com/sfclab/sfclab/probe/ndr"
	"github.com/sfclab/sfclab/probe/rtt"
	"github.com/sfclab/sfclab/probe/rtt/echo"
	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/vnf/kinds"
	"go.yaml.in/yaml/v3"
)

// Experiment is one experiment file.
type Experiment struct {
	// Name of the experiment (default: the file name).
	Name string `yaml:"name"`
	// Study names published figures to compare with (see package studies), "" for none.
	Study       string `yaml:"study,omitempty"`
	Description string `yaml:"description,omitempty"`
	// Reduced says how this run is smaller than the study it reproduces (set by `sfclab
	// reproduce --quick` or `--standard`, recorded with the run and shown in its report).
	Reduced string `yaml:"-"`
	// Placement says where the study's hosts ran when they are not this machine's emulated
	// hosts (reproduce openstack-sfc --runtime kubernetes: its hosts on the cluster's nodes),
	// recorded with the run.
	Placement string `yaml:"-"`
	// NotRun names the study's scenarios left out of this run and why (set by `sfclab
	// reproduce`: study B's KVM column on a host without usable KVM, unless --allow-tcg).
	NotRun map[string]string `yaml:"-"`
	// KeptRuntime names the scenarios that kept the runtime they name (the value) although
	// `sfclab reproduce --runtime` asked for another: the flag applies only to scenarios that
	// name none. The report states them.
	KeptRuntime map[string]string `yaml:"-"`
	// Repetitions of every scenario (default 3); trials interleave scenarios.
	Repetitions int `yaml:"repetitions,omitempty"`
	// Warmup is a throughput run before the first trial of each deploy, not recorded.
	Warmup Duration `yaml:"warmup,omitempty"`
	// Baseline is the scenario others are compared with (default: the first).
	Baseline string `yaml:"baseline,omitempty"`
	// Order is the scenarios' order per repetition: "balanced" (default: rotated, see
	// Order) or "fixed" (the file's order every time).
	Order     string      `yaml:"order,omitempty"`
	Scenarios []*Scenario `yaml:"scenarios"`
	Probes    Probes      `yaml:"probes"`
	// Background is load kept running on a node during every trial's probes (study B: 12
	// processes burning CPU on the proxy's host).
	Background *Background `yaml:"background,omitempty"`
	// BackgroundNodes crosses every scenario with background nodes (see grid.go).
	BackgroundNodes *BackgroundNodes `yaml:"background_nodes,omitempty"`

	File string `yaml:"-"`
}

// Scenario is one lab measured in every trial.
type Scenario struct {
	Name string `yaml:"name"`
	// Lab is the lab file, relative to the experiment file.
	Lab string `yaml:"lab"`
	// Chain is the chain measured (default: the lab's first).
	Chain string `yaml:"chain,omitempty"`
	// Runtime overrides the lab's runtime ("netns", "docker"), so one experiment can compare
	// the same chain on both.
	Runtime string `yaml:"runtime,omitempty"`
	// Attach overrides the lab's docker attachment ("routed", "nat").
	Attach string `yaml:"attach,omitempty"`
	// SingleHost moves every node of a transparent lab onto its first emulated host: the same
	// chain without crossing hosts.
	SingleHost bool `yaml:"single_host,omitempty"`
	// Probes, when set, replace the experiment's probes for this scenario (study C's steering
	// check runs flows where the other scenarios run iperf3).
	Probes *Probes `yaml:"probes,omitempty"`

	// Background is the scenario's background-node cell (set by background_nodes), or nil.
	Background *Cell `yaml:"-"`
	// Plan is the resolved lab (filled by Load).
	Plan *plan.Plan `yaml:"-"`
	// LabPath is Lab resolved against the experiment file.
	LabPath string `yaml:"-"`
	Line    int    `yaml:"-"`
}

// Probes configures the probes every trial runs, in this order: throughput (with CPU sampled
// while it runs), ping, tcprtt. A probe left out is not run.
type Probes struct {
	Iperf3 *Iperf3 `yaml:"iperf3,omitempty"`
	Ping   *Ping   `yaml:"ping,omitempty"`
	TCPRTT *TCPRTT `yaml:"tcprtt,omitempty"`
	HTTP   *HTTP   `yaml:"http,omitempty"`
	RTT    *RTT    `yaml:"rtt,omitempty"`
	// NDR is the no-drop-rate search (UDP, binary search over the offered rate).
	NDR *NDR `yaml:"ndr,omitempty"`
	// Flows runs several flows at once, each on its own chain, and samples every function's
	// egress once per interval (study C's steering check, Fig. 6).
	Flows *Flows `yaml:"flows,omitempty"`
	// CPU samples every node's cgroup and host softirq during the iperf3 probe (default true).
	CPU *bool `yaml:"cpu,omitempty"`
	// More holds the settings of probes registered with WithProbe, by name, as written;
	// validate decodes them into extra (and refuses a name nobody registered).
	More  map[string]yaml.Node `yaml:",inline"`
	extra map[string]any
}

// CPUOn reports whether CPU is sampled.
func (p Probes) CPUOn() bool { return p.CPU == nil || *p.CPU }

// Iperf3 configures the throughput probe.
type Iperf3 struct {
	Duration   Duration `yaml:"duration,omitempty"`
	Protocol   string   `yaml:"protocol,omitempty"`
	Streams    int      `yaml:"streams,omitempty"`
	Reverse    bool     `yaml:"reverse,omitempty"`
	Bitrate    string   `yaml:"bitrate,omitempty"`
	Congestion string   `yaml:"congestion,omitempty"`
	Omit       int      `yaml:"omit,omitempty"`
}

// NDR configures the no-drop-rate search; see probe/ndr and docs/experiment-file.md.
type NDR struct {
	// Frames are frame sizes in bytes or "imix" (default [64]).
	Frames []string `yaml:"frames,omitempty"`
	// Trial is each trial's duration (default 2s); Drain the wait after it (default 300ms).
	Trial Duration `yaml:"trial,omitempty"`
	Drain Duration `yaml:"drain,omitempty"`
	// Precision is the relative width at which a rate is found, e.g. "1%" (default).
	Precision string `yaml:"precision,omitempty"`
	// MaxTrials bounds each search (default 16).
	MaxTrials int `yaml:"max_trials,omitempty"`
	// MaxRate is the upper bound, e.g. "2Mpps" (default: as fast as the generator can).
	MaxRate string `yaml:"max_rate,omitempty"`
	// Loss is the partial-drop threshold, e.g. "0.1%" (default).
	Loss string `yaml:"loss,omitempty"`
}

// Config turns the file's settings into the probe's.
func (n *NDR) Config() (ndr.Config, error) {
	c := ndr.Config{Frames: n.Frames, Trial: n.Trial.Duration, Drain: n.Drain.Duration, MaxTrials: n.MaxTrials}
	var err error
	if n.Precision != "" {
		if c.Precision, err = ndr.ParsePercent(n.Precision); err != nil {
			return c, fmt.Errorf("ndr precision: %w", err)
		}
		if c.Precision == 0 {
			return c, fmt.Errorf("ndr precision %q: give more than 0%%", n.Precision)
		}
	}
	if n.MaxRate != "" {
		if c.MaxRate, err = ndr.ParsePPS(n.MaxRate); err != nil {
			return c, fmt.Errorf("ndr max_rate: %w", err)
		}
	}
	if n.Loss != "" {
		if c.PDRLoss, err = ndr.ParsePercent(n.Loss); err != nil {
			return c, fmt.Errorf("ndr loss: %w", err)
		}
	}
	return c, c.Validate()
}

// Flows configures the flows probe (package probe/flows).
type Flows struct {
	// Interval between two readings of the counters (default 1s).
	Interval Duration `yaml:"interval,omitempty"`
	Flows    []Flow   `yaml:"flows"`
}

// Flow is one flow of the flows probe.
type Flow struct {
	// Chain is the port chain the flow is classified into.
	Chain    string   `yaml:"chain"`
	Protocol string   `yaml:"protocol,omitempty"`
	Bitrate  string   `yaml:"bitrate,omitempty"`
	Duration Duration `yaml:"duration"`
}

// Config turns the file's settings into the probe's.
func (f *Flows) Config() flows.Config {
	c := flows.Config{Interval: f.Interval.Duration}
	for _, x := range f.Flows {
		c.Flows = append(c.Flows, flows.Flow{Chain: x.Chain, Protocol: x.Protocol, Bitrate: x.Bitrate, Duration: x.Duration.Duration})
	}
	return c
}

// ProbesOf returns the probes of a scenario: its own when it has them, else the experiment's.
func (e *Experiment) ProbesOf(s *Scenario) *Probes {
	if s != nil && s.Probes != nil {
		return s.Probes
	}
	return &e.Probes
}

// none reports whether no probe is configured.
func (p *Probes) none() bool {
	return p.Iperf3 == nil && p.Ping == nil && p.TCPRTT == nil && p.HTTP == nil && p.NDR == nil && p.RTT == nil && p.Flows == nil && len(p.More) == 0
}

// Ping configures the ICMP latency probe.
type Ping struct {
	Count    int      `yaml:"count,omitempty"`
	Interval Duration `yaml:"interval,omitempty"`
	Size     int      `yaml:"size,omitempty"`
}

// TCPRTT configures the TCP connect and request/response latency probe.
type TCPRTT struct {
	Connects int      `yaml:"connects,omitempty"`
	Requests int      `yaml:"requests,omitempty"`
	Size     int      `yaml:"size,omitempty"`
	Timeout  Duration `yaml:"timeout,omitempty"`
}

// RTT configures sfclab's own echo probe (package probe/rtt), run once per rate.
type RTT struct {
	// Protocol is icmp (default) or udp.
	Protocol string `yaml:"protocol,omitempty"`
	// Size is the echo message above IP in bytes (default 64).
	Size int `yaml:"size,omitempty"`
	// Rate is one rate or a list (packets/s, "1k", "100k", or "max" for a flood); default 1k.
	Rate Rates `yaml:"rate,omitempty"`
	// Count of echoes per rate (default 1000, or rate x duration).
	Count    int      `yaml:"count,omitempty"`
	Duration Duration `yaml:"duration,omitempty"`
	Timeout  Duration `yaml:"timeout,omitempty"`
	// Window is a flood's outstanding echoes (default 1, as ping -f).
	Window int    `yaml:"window,omitempty"`
	Port   uint16 `yaml:"port,omitempty"`
	// Busy spins between echoes (as ping at short intervals) instead of sleeping.
	Busy bool `yaml:"busy,omitempty"`
	// Attempts, above 1, repeats each rate's run until every echo came back, at most that
	// many runs (study D's "repeated until all packets were successfully transmitted").
	Attempts int `yaml:"attempts,omitempty"`
	// PathEnd is where an echo's path is timed: tc (the sender's interface, the same points
	// for every driver), socket (the socket's timestamps), or unset: tc where the kernel can.
	PathEnd string `yaml:"path_end,omitempty"`
	// Method is how echoes are sent: socket, xdp (pktgen's XDP generator and reflector, 64 B
	// UDP frames, a timestamp in every sample_every-th), or unset: xdp at 100k and above,
	// socket below and for max (rtt.Config.Method).
	Method string `yaml:"method,omitempty"`
	// SampleEvery is, with method xdp, the share of frames timestamped (default 1024).
	SampleEvery int `yaml:"sample_every,omitempty"`
}

// Config returns the probe configuration at one of the rates.
func (r *RTT) Config(rate float64) rtt.Config {
	return rtt.Config{Protocol: r.Protocol, Size: r.Size, Rate: rate, Count: r.Count, Duration: r.Duration.Duration,
		Timeout: r.Timeout.Duration, Window: r.Window, Port: r.Port, Busy: r.Busy, Attempts: r.Attempts, PathEnd: r.PathEnd,
		Method: r.Method, SampleEvery: r.SampleEvery}
}

// Rates is one rate or a list of rates in packets per second; echo.Max stands for "max".
type Rates []float64

// UnmarshalYAML reads 1000, "1k", "2.5M", "max", or a list of them.
func (r *Rates) UnmarshalYAML(n *yaml.Node) error {
	items := []*yaml.Node{n}
	if n.Kind == yaml.SequenceNode {
		items = n.Content
	}
	*r = nil
	for _, it := range items {
		v, err := ParseRate(it.Value)
		if err != nil || it.Kind != yaml.ScalarNode {
			return fmt.Errorf("line %d: rate %q is not a number of packets/s like 1000, 1k, 1M, or max", it.Line, it.Value)
		}
		*r = append(*r, v)
	}
	return nil
}

// ParseRate reads a rate: 1000, 1k, 2.5M (packets/s) or max (echo.Max).
func ParseRate(s string) (float64, error) {
	s = strings.TrimSpace(s)
	if s == "max" {
		return echo.Max, nil
	}
	mult := 1.0
	switch {
	case strings.HasSuffix(s, "k"), strings.HasSuffix(s, "K"):
		mult, s = 1e3, s[:len(s)-1]
	case strings.HasSuffix(s, "M"):
		mult, s = 1e6, s[:len(s)-1]
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("parse rate %q: not a positive number", s)
	}
	return v * mult, nil
}

// HTTP configures the HTTP load probe: every object at every concurrency, N requests each.
type HTTP struct {
	Requests int `yaml:"requests,omitempty"`
	// ObjectRequests overrides Requests for some objects, e.g. {1M: 1000, 10M: 100} (see
	// RequestsFor).
	ObjectRequests map[string]int `yaml:"object_requests,omitempty"`
	Concurrency    []int          `yaml:"concurrency,omitempty"`
	Objects        []string       `yaml:"objects,omitempty"`
	KeepAlive      bool           `yaml:"keepalive,omitempty"`
	Timeout        Duration       `yaml:"timeout,omitempty"`
	// AB also runs Apache Bench (ab) for every cell, for comparison with sfclab's own client.
	AB bool `yaml:"ab,omitempty"`
}

// RequestsFor returns the number of requests of each run for object: ObjectRequests[object]
// when set, else Requests.
func (h *HTTP) RequestsFor(object string) int {
	if n, ok := h.ObjectRequests[object]; ok {
		return n
	}
	return h.Requests
}

// Background is load started before a trial's probes and stopped after them, on one node of
// the lab (study B). The file's `background:` holds either this (with node:) or, with host:,
// study D's background nodes as the issue writes them (`background: {count: [0, 8, 32, 64],
// kind: [cpu, network], host: [sender, responder]}`): Decode moves those to BackgroundNodes.
type Background struct {
	// Kind is "cpu" (busy processes) or "network" (iperf3 streams).
	Kind string `yaml:"kind"`
	// Count is the number of processes or streams.
	Count int `yaml:"count"`
	// Node is the node loaded: a node name, or a function or endpoint group (its first
	// instance).
	Node string `yaml:"node"`
	// Placement is where cpu load runs: "node" (default: inside the node, in its namespace
	// and cgroup, so its CPU counts as the node's) or "host" (beside the node on its host,
	// the same on every runtime: study B's processes on the proxy's server).
	Placement string `yaml:"placement,omitempty"`

	// Line is the line of the mapping in the file.
	Line int `yaml:"-"`
	// nodes is set when the file's background: is study D's grid (it has host:).
	nodes *BackgroundNodes
}

// UnmarshalYAML decodes background: as one node's load (node:) or as background nodes
// (host:, or a field only they have: side:, bitrate:, a list of counts or kinds); a mapping
// with both, or with neither, is refused with what to write.
func (b *Background) UnmarshalYAML(unmarshal func(any) error) error {
	fields, line, err := mappingOf(unmarshal, "background", "{count: [0, 8], kind: cpu, host: sender} or {kind: cpu, count: 12, node: proxy}")
	if err != nil {
		return err
	}
	has := map[string]bool{}
	grid := false
	for k, v := range fields {
		has[k] = true
		grid = grid || k == "host" || k == "side" || k == "bitrate" || ((k == "count" || k == "kind") && v.Kind == yaml.SequenceNode)
	}
	switch {
	case grid && (has["node"] || has["placement"]):
		return lineError(line, "background has host: or side: (background nodes on the sender's or responder's host, a grid factor) "+
			"and node: or placement: (load on one node of the lab); write one: {count: [0, 8], kind: cpu, host: sender} or {kind: cpu, count: 12, node: NODE}")
	case grid:
		g := &BackgroundNodes{}
		type backgroundNodes BackgroundNodes
		if err := unmarshal((*backgroundNodes)(g)); err != nil {
			return err
		}
		g.Key, g.Line = "background", line
		if err := g.mergeHost(); err != nil {
			return err
		}
		*b = Background{Line: line, nodes: g}
		return nil
	case !has["node"]:
		return lineError(line, "background needs host: sender|responder (background nodes on that host: "+
			"{count: [0, 8, 32, 64], kind: [cpu, network], host: [sender, responder]}) or node: NODE (load on one node: {kind: cpu, count: 12, node: proxy})")
	}
	type background Background // without this method; its name is in unknown-field errors
	if err := unmarshal((*background)(b)); err != nil {
		return err
	}
	b.Line = line
	return nil
}

var typeErrorLine = regexp.MustCompile(`^line (\d+): `)

// mappingOf decodes a mapping's fields as nodes, with the line it starts on as well as the
// fields tell it (their first value's; Decode sets the key's exact line afterwards). Anything
// else is refused as "line N: KEY: expected a mapping, e.g. EXAMPLE".
func mappingOf(unmarshal func(any) error, key, example string) (map[string]yaml.Node, int, error) {
	var fields map[string]yaml.Node
	if err := unmarshal(&fields); err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) && len(te.Errors) > 0 {
			if m := typeErrorLine.FindStringSubmatch(te.Errors[0]); m != nil {
				n, _ := strconv.Atoi(m[1])
				return nil, 0, lineError(n, "%s: expected a mapping, e.g. %s", key, example)
			}
		}
		return nil, 0, err
	}
	line := 0
	for _, v := range fields {
		if line == 0 || v.Line < line {
			line = v.Line
		}
	}
	return fields, line, nil
}

// Duration is a time.Duration written as "30s", "100ms".
type Duration struct{ time.Duration }

// UnmarshalYAML decodes "30s"-style durations.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil || v < 0 {
		return fmt.Errorf("line %d: %q is not a duration like 30s or 100ms", n.Line, n.Value)
	}
	d.Duration = v
	return nil
}

// MarshalYAML encodes a duration as "30s".
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

var nameRE = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`)

// Load reads and validates an experiment file and every lab it names.
func Load(path string) (*Experiment, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read experiment: %w", err)
	}
	return Decode(data, path, filepath.Dir(path), nil)
}

var yamlLine = regexp.MustCompile(`^line (\d+): `)

// decodeError turns the YAML decoder's error into one "file:line: message" per problem, in
// the user's words (spec.UserWords), not Go type names.
func decodeError(file string, err error) error {
	var te *yaml.TypeError
	msgs := []string{strings.TrimPrefix(err.Error(), "yaml: ")}
	if errors.As(err, &te) {
		msgs = te.Errors
	}
	out := make([]string, len(msgs))
	for i, m := range msgs {
		m = spec.UserWords(strings.TrimSpace(m))
		if sub := yamlLine.FindStringSubmatch(m); sub != nil {
			m = file + ":" + sub[1] + ": " + m[len(sub[0]):]
		} else {
			m = file + ": " + m
		}
		out[i] = m
	}
	return errors.New(strings.Join(out, "\n"))
}

// LabLoader reads a lab file named by an experiment; nil means spec.Load from disk, with the
// registered function kinds.
type LabLoader func(path string) (*spec.Lab, error)

// Decode decodes and validates an experiment; labs are resolved against dir and loaded with
// load (nil: from disk).
func Decode(data []byte, file, dir string, load LabLoader) (*Experiment, error) {
	if load == nil {
		load = func(path string) (*spec.Lab, error) { return spec.Load(path, kinds.Spec()) }
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, fmt.Errorf("%s: %s", file, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if len(root.Content) == 0 {
		return nil, fmt.Errorf("%s: the experiment file is empty", file)
	}
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(true)
	e := &Experiment{File: file}
	if err := dec.Decode(e); err != nil {
		return nil, decodeError(file, err)
	}
	if b := e.Background; b != nil {
		b.Line = keyLine(root.Content[0], "background", b.Line)
		if b.nodes != nil {
			b.nodes.Line = b.Line
		}
	}
	if g := e.BackgroundNodes; g != nil {
		g.Line = keyLine(root.Content[0], "background_nodes", g.Line)
	}
	if b := e.Background; b != nil && b.nodes != nil {
		if e.BackgroundNodes != nil {
			return nil, fmt.Errorf("%s:%d: background: with host: and background_nodes: both set background nodes; keep one (background: {count, kind, host})", file, b.Line)
		}
		e.BackgroundNodes, e.Background = b.nodes, nil
	}
	lines := scenarioLines(root.Content[0])
	for i, s := range e.Scenarios {
		if s != nil && i < len(lines) {
			s.Line = lines[i]
		}
	}
	var errs []string
	bad := func(line int, f string, a ...any) {
		where := file
		if line > 0 {
			where = fmt.Sprintf("%s:%d", file, line)
		}
		errs = append(errs, where+": "+fmt.Sprintf(f, a...))
	}
	e.defaults(file)
	if e.Order != "" && e.Order != OrderBalanced && e.Order != OrderFixed {
		bad(keyLine(root.Content[0], "order", 0), "order %q is not balanced or fixed; write order: balanced (rotated per repetition, the default) or order: fixed", e.Order)
	}
	if e.Repetitions < 1 || e.Repetitions > 1000 {
		bad(0, "repetitions must be 1-1000, got %d", e.Repetitions)
	}
	if len(e.Scenarios) == 0 {
		bad(0, "no scenarios; add scenarios: with a name and a lab file each")
	}
	allOwn := len(e.Scenarios) > 0
	for _, s := range e.Scenarios {
		if s == nil || s.Probes == nil {
			allOwn = false
		}
	}
	if e.Probes.none() && !allOwn {
		bad(0, "no probes; add probes: iperf3, ping, tcprtt, http, ndr, rtt and/or flows")
	}
	e.validateProbes(bad)
	names := map[string]bool{}
	for i, s := range e.Scenarios {
		if s == nil {
			bad(0, "scenario %d is empty", i+1)
			continue
		}
		if !nameRE.MatchString(s.Name) {
			bad(s.Line, "scenario %d: name %q: use letters, digits, '-', '_' or '.'", i+1, s.Name)
		}
		if names[s.Name] {
			bad(s.Line, "scenario name %q is used twice", s.Name)
		}
		names[s.Name] = true
		if s.Lab == "" {
			bad(s.Line, "scenario %q has no lab file", s.Name)
			continue
		}
		s.LabPath = s.Lab
		if !filepath.IsAbs(s.Lab) {
			s.LabPath = filepath.Join(dir, s.Lab)
		}
		lab, err := load(s.LabPath)
		if err != nil {
			bad(s.Line, "scenario %q: %v", s.Name, err)
			continue
		}
		if err := Override(lab, s.Runtime, s.Attach); err != nil {
			bad(s.Line, "scenario %q: %v", s.Name, err)
			continue
		}
		if s.SingleHost {
			if err := SingleHost(lab); err != nil {
				bad(s.Line, "scenario %q: %v", s.Name, err)
				continue
			}
		}
		if s.Probes != nil {
			s.Probes.defaults()
			s.Probes.validate(func(_ int, f string, a ...any) { bad(s.Line, "scenario %q: "+f, append([]any{s.Name}, a...)...) })
			if s.Probes.none() {
				bad(s.Line, "scenario %q: probes: is empty; name at least one probe or leave probes: out", s.Name)
			}
		}
		p, err := plan.Build(lab)
		if err != nil {
			bad(s.Line, "scenario %q: %v", s.Name, err)
			continue
		}
		s.Plan = p
		c, err := p.ProbeChain(s.Chain)
		if err != nil {
			bad(s.Line, "scenario %q: %v", s.Name, err)
			continue
		}
		s.Chain = c.Name
		e.checkScenarioProbes(s, bad)
	}
	if e.Baseline == "" && len(e.Scenarios) > 0 && e.Scenarios[0] != nil {
		e.Baseline = e.Scenarios[0].Name
	}
	if e.BackgroundNodes != nil && len(errs) == 0 {
		e.expand(load, bad)
		names = map[string]bool{}
		for _, s := range e.Scenarios {
			names[s.Name] = true
		}
	}
	if e.Baseline != "" && !names[e.Baseline] {
		bad(0, "baseline %q is not a scenario", e.Baseline)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return e, nil
}

func (e *Experiment) defaults(file string) {
	if e.Name == "" {
		e.Name = strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
	}
	if e.Repetitions == 0 {
		e.Repetitions = 3
	}
	if e.Order == "" {
		e.Order = OrderBalanced
	}
	e.Probes.defaults()
}

// defaults fills in the probes' defaults.
func (pr *Probes) defaults() {
	if p := pr.Iperf3; p != nil {
		if p.Duration.Duration == 0 {
			p.Duration.Duration = 10 * time.Second
		}
		if p.Protocol == "" {
			p.Protocol = "tcp"
		}
		if p.Streams == 0 {
			p.Streams = 1
		}
	}
	if p := pr.Ping; p != nil {
		if p.Count == 0 {
			p.Count = 100
		}
		if p.Interval.Duration == 0 {
			p.Interval.Duration = 10 * time.Millisecond
		}
		if p.Size == 0 {
			p.Size = 56
		}
	}
	if h := pr.HTTP; h != nil {
		if h.Requests == 0 {
			h.Requests = 10000
		}
		if len(h.Concurrency) == 0 {
			h.Concurrency = []int{1}
		}
		if h.Timeout.Duration == 0 {
			h.Timeout.Duration = 30 * time.Second
		}
	}
	if p := pr.RTT; p != nil && len(p.Rate) == 0 {
		p.Rate = Rates{1000}
	}
	if p := pr.TCPRTT; p != nil {
		if p.Connects == 0 {
			p.Connects = 100
		}
		if p.Requests == 0 {
			p.Requests = 1000
		}
		if p.Size == 0 {
			p.Size = 64
		}
		if p.Timeout.Duration == 0 {
			p.Timeout.Duration = 2 * time.Second
		}
	}
}

// checkScenarioProbes checks what depends on a scenario's lab: HTTP objects its origin serves,
// the background load's node.
func (e *Experiment) checkScenarioProbes(s *Scenario, bad func(int, string, ...any)) {
	p, pr := s.Plan, e.ProbesOf(s)
	c, err := p.ProbeChain(s.Chain)
	if err != nil {
		bad(s.Line, "scenario %q: %v", s.Name, err)
		return
	}
	if f := pr.Flows; f != nil {
		if err := f.Config().Validate(p); err != nil {
			bad(s.Line, "scenario %q: %v", s.Name, err)
		}
	}
	// A VM endpoint. iperf3 runs in a guest at either end (its client through the guest's
	// agent, its server a daemon there, found listening and stopped through the agent), and
	// so do flows' servers in a VM destination and clients in a VM source (the same iperf3
	// helpers; the flows' timing is the host's); ping
	// runs in a guest source and is answered by a guest's kernel; http is answered by an
	// http-server in a guest, and its client (package load) runs in a guest source's agent,
	// ab in a Debian guest source; tcprtt's echo server and client run in a guest's agent;
	// rtt's echoes are answered by a guest destination's kernel (icmp) or agent (udp), and
	// sent from a guest source by its agent (socket method, the socket's timestamps); ndr's
	// receiver counts in a guest destination's agent and its sendmmsg sender runs in a guest
	// source's agent. Registered probes run Go code in the source's network stack from the
	// host (Do: the guest has its own kernel).
	if n := p.Node(c.Path[0]); n != nil && n.VM != nil {
		src := c.Path[0]
		if probes := notFromGuest(pr); len(probes) > 0 {
			bad(s.Line, "scenario %q: source %s is a VM, and %s cannot measure from a guest yet: they open their sockets in the source's network stack from the host (the guest has its own kernel); iperf3, flows, ping, tcprtt, rtt, ndr and http run in a VM source, or keep the endpoints namespaces (vm: on the functions, or runtime: vm, which leaves endpoints without vm: as namespaces)", s.Name, src, strings.Join(probes, ", "))
		}
		if r := pr.RTT; r != nil {
			// The guest's agent sends the echoes from a socket (rtt/echo): pktgen's generator
			// and the tc path-end programs would have to be attached in the guest's kernel.
			if r.Method == echo.MethodXDP {
				bad(s.Line, "scenario %q: source %s is a VM, and rtt's method xdp sends from pktgen's XDP generator in the source's network stack, which is the guest's kernel's; write method: socket (the guest's agent then sends the echoes; or leave method: out: rates from %d pps then use the socket path, saying why)", s.Name, src, echo.HighRateFrom)
			}
			if r.PathEnd == echo.PathEndTC {
				bad(s.Line, "scenario %q: source %s is a VM, and rtt's path_end tc needs tc programs at the sender's interface, which is in the guest's kernel; write path_end: socket (the guest kernel's socket timestamps split the round trip) or leave path_end: out", s.Name, src)
			}
		}
		if h := pr.HTTP; h != nil && h.AB {
			if n.VM.Image != spec.VMImageDebian {
				bad(s.Line, "scenario %q: source %s is a VM with the busybox guest image, which has no ab (Apache Bench) for http's ab: true; write vm: {image: debian} on %s (its root then gets apache2-utils), or leave ab: out (sfclab's own client runs in any guest)", s.Name, src, src)
			} else if !slices.Contains(n.VM.Programs, "ab") {
				// The Debian root gets ab's package (runtime/vm.ProgramSets).
				n.VM.Programs = append(n.VM.Programs, "ab")
			}
		}
	}
	if n := p.Node(c.Path[len(c.Path)-1]); n != nil && n.VM != nil {
		// rtt's echoes are answered by the guest's kernel (icmp) or its agent (udp); its XDP
		// reflector would have to be attached in the guest's kernel.
		if r := pr.RTT; r != nil && r.Method == echo.MethodXDP {
			bad(s.Line, "scenario %q: destination %s is a VM, and rtt's method xdp needs its XDP reflector in the destination's network stack, which is the guest's kernel's; write method: socket (or leave method: out: rates from %d pps then use the socket path, saying why)", s.Name, c.Path[len(c.Path)-1], echo.HighRateFrom)
		}
	}
	if h := pr.HTTP; h != nil {
		dst := p.Node(c.Path[len(c.Path)-1])
		var served []string
		if dst.Function != nil {
			if hs, ok := dst.Function.Params.(spec.ObjectServer); ok {
				served = hs.ServedObjects()
			}
		}
		if served == nil {
			bad(s.Line, "scenario %q: the http probe needs the chain's destination to be an http-server endpoint", s.Name)
		}
		for _, o := range h.Objects {
			if served != nil && !slices.Contains(served, o) {
				bad(s.Line, "scenario %q: object %q is not served by %s (objects: %v)", s.Name, o, dst.Group, served)
			}
		}
	}
	if b := e.Background; b != nil && b.Node != "" && BackgroundNode(p, b.Node) == "" {
		bad(s.Line, "scenario %q: background node %q is not a node or group of lab %s", s.Name, b.Node, p.Lab)
	}
}

// notFromGuest names the probes of pr that cannot run from a VM source, sorted: the
// registered ones (every built-in probe runs there: iperf3, flows and ping as programs in the
// guest, tcprtt, http, rtt and ndr's sender in its agent, ab in a Debian guest).
func notFromGuest(pr *Probes) []string {
	var out []string
	for name := range pr.More {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// BackgroundNode resolves a node or group name to a node of the plan ("" when there is none).
func BackgroundNode(p *plan.Plan, name string) string {
	if p.Node(name) != nil {
		return name
	}
	for _, n := range p.Nodes {
		if n.Group == name {
			return n.Name
		}
	}
	return ""
}

func (e *Experiment) validateProbes(bad func(int, string, ...any)) {
	e.Probes.validate(bad)
	if b := e.Background; b != nil {
		if b.Kind != "cpu" && b.Kind != "network" {
			bad(b.Line, "background kind %q is not cpu or network; write kind: cpu or kind: network", b.Kind)
		}
		if b.Placement != "" && b.Placement != "node" && b.Placement != "host" {
			bad(b.Line, "background placement %q is not node or host; write placement: node (inside the node, the default) or placement: host (beside it)", b.Placement)
		}
		if b.Placement == "host" && b.Kind != "cpu" {
			bad(b.Line, "background placement host is for cpu load; network load leaves from the node itself: drop placement: or write kind: cpu")
		}
		if b.Count < 1 || b.Count > 256 {
			bad(b.Line, "background count must be 1-256, got %d; write e.g. count: 12", b.Count)
		}
		if b.Node == "" {
			bad(b.Line, "background needs node: the node (or function) to load")
		}
	}
}

// validate checks the probes' settings that do not depend on a lab.
func (pr *Probes) validate(bad func(int, string, ...any)) {
	pr.decodeMore(bad)
	if f := pr.Flows; f != nil {
		for _, x := range f.Flows {
			if x.Chain == "" {
				bad(0, "flows: every flow needs chain: the port chain it is classified into")
			}
		}
	}
	if n := pr.NDR; n != nil {
		if _, err := n.Config(); err != nil {
			bad(0, "%v", err)
		}
	}
	if h := pr.HTTP; h != nil {
		if h.Requests < 1 || h.Requests > 10000000 {
			bad(0, "http requests must be 1-10000000, got %d", h.Requests)
		}
		for _, o := range slices.Sorted(maps.Keys(h.ObjectRequests)) {
			if !slices.Contains(h.Objects, o) {
				bad(0, "http object_requests names %q, which is not one of objects %v", o, h.Objects)
			}
			if n := h.ObjectRequests[o]; n < 1 || n > 10000000 {
				bad(0, "http object_requests of %s must be 1-10000000, got %d", o, n)
			}
		}
		for _, c := range h.Concurrency {
			if c < 1 || c > 20000 {
				bad(0, "http concurrency %d is outside 1-20000", c)
			}
		}
		if len(h.Objects) == 0 {
			bad(0, "http needs objects: the sizes to request, e.g. [1k, 10k]")
		}
		for _, o := range h.Objects {
			if _, err := spec.ParseSize(o); err != nil {
				bad(0, "http: %v", err)
			}
		}
	}
	if p := pr.Iperf3; p != nil {
		if p.Duration.Duration < time.Second || p.Duration.Duration > time.Hour {
			bad(0, "iperf3 duration %s must be between 1s and 1h", p.Duration)
		}
		if p.Protocol != "tcp" && p.Protocol != "udp" {
			bad(0, "iperf3 protocol %q is not tcp or udp", p.Protocol)
		}
		if p.Streams < 1 || p.Streams > 128 {
			bad(0, "iperf3 streams must be 1-128, got %d", p.Streams)
		}
	}
	if p := pr.Ping; p != nil {
		if p.Count < 1 || p.Count > 100000 {
			bad(0, "ping count must be 1-100000, got %d", p.Count)
		}
		if p.Interval.Duration < 2*time.Millisecond {
			bad(0, "ping interval %s is below ping's minimum of 2ms", p.Interval)
		}
	}
	if p := pr.RTT; p != nil {
		for _, rate := range p.Rate {
			if err := p.Config(rate).Validate(); err != nil {
				bad(0, "rtt: %s", strings.ReplaceAll(err.Error(), echo.ErrConfig.Error()+": ", ""))
			}
		}
	}
	if p := pr.TCPRTT; p != nil {
		if p.Connects < 0 || p.Requests < 0 || p.Connects+p.Requests == 0 || p.Connects > 100000 || p.Requests > 1000000 {
			bad(0, "tcprtt connects/requests must be 0-100000/0-1000000 and not both 0")
		}
		if p.Size < 1 || p.Size > 65536 {
			bad(0, "tcprtt size must be 1-65536 bytes, got %d", p.Size)
		}
	}
}

// decodeMore decodes the settings of registered probes; a name nobody registered is refused
// as the decoder refuses any unknown field.
func (pr *Probes) decodeMore(bad func(int, string, ...any)) {
	pr.extra = nil
	for _, name := range slices.Sorted(maps.Keys(pr.More)) {
		n := pr.More[name]
		k := registeredProbe(name)
		if k == nil {
			bad(n.Line, "%s", spec.UserWords("field "+name+" not found in type experiment.Probes"))
			continue
		}
		cfg := k.NewConfig()
		if err := n.Decode(cfg); err != nil {
			bad(n.Line, "%s: %s", name, spec.UserWords(strings.TrimPrefix(err.Error(), "yaml: ")))
			continue
		}
		if _, err := k.Probe(cfg); err != nil {
			bad(n.Line, "%s: %v", name, err)
			continue
		}
		if pr.extra == nil {
			pr.extra = map[string]any{}
		}
		pr.extra[name] = cfg
	}
}

// Override sets a lab's runtime and docker attachment when given, and validates the result.
func Override(lab *spec.Lab, runtime, attach string) error {
	if runtime == "" && attach == "" {
		return nil
	}
	if runtime != "" {
		lab.Runtime = runtime
	}
	if attach != "" {
		lab.Docker.Attach = attach
	}
	if errs := spec.Validate(lab); len(errs) > 0 {
		return errs
	}
	return nil
}

// SingleHost moves every node of a transparent lab onto its first host and validates the
// result.
func SingleHost(lab *spec.Lab) error {
	if lab.Steering != spec.SteeringTransparent || len(lab.Hosts) == 0 {
		return fmt.Errorf("single_host: lab %s has no emulated hosts (it needs steering: transparent and hosts:)", lab.Name)
	}
	one := *lab.Hosts[0]
	one.Link = nil // one host has no link to the others
	lab.Hosts = []*spec.HostSpec{&one}
	for _, e := range lab.Endpoints {
		if e != nil {
			e.Host = one.Name
		}
	}
	for _, f := range lab.Functions {
		if f != nil {
			f.Host = one.Name
		}
	}
	if errs := spec.Validate(lab); len(errs) > 0 {
		return errs
	}
	return nil
}

// scenarioLines returns the line of every item under scenarios:.
// keyLine is the line of key in the mapping doc (def when it is not there).
func keyLine(doc *yaml.Node, key string, def int) int {
	for i := 0; i+1 < len(doc.Content); i += 2 {
		if doc.Content[i].Value == key {
			return doc.Content[i].Line
		}
	}
	return def
}

func scenarioLines(doc *yaml.Node) []int {
	for i := 0; i+1 < len(doc.Content); i += 2 {
		if doc.Content[i].Value == "scenarios" {
			var out []int
			for _, c := range doc.Content[i+1].Content {
				out = append(out, c.Line)
			}
			return out
		}
	}
	return nil
}

// Scenario returns the scenario called name, or nil.
func (e *Experiment) Scenario(name string) *Scenario {
	for _, s := range e.Scenarios {
		if s.Name == name {
			return s
		}
	}
	return nil
}
