// Package studies lists the published studies sfclab reproduces: the experiment each one runs
// and the figures the study published, to be printed beside ours, always labelled as published.
package studies

import (
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
	"time"

	sfclab "github.com/sfclab/sfclab"
	"github.com/sfclab/sfclab/experiment"
	"github.com/sfclab/sfclab/report"
	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/vnf/kinds"
)

// ReferenceA cites study A.
const ReferenceA = `R. Z. Fitroh, I. N. Ichsan, "Performance Analysis of Docker-based NFV Service Chaining Networks in a Single-Host Environment", Sistemasi: Jurnal Sistem Informasi 15(2), 2026`

// Scale is how much of a study a run reproduces.
type Scale string

// Scales of a run.
const (
	// Full runs the study's experiment as the study ran it.
	Full Scale = ""
	// Quick is a short smoke run (`--quick`).
	Quick Scale = "quick"
	// Standard is the study's scale reduced to fit a sitting (`--standard`): one to two hours.
	Standard Scale = "standard"
)

// Study is one reproducible study.
type Study struct {
	// Name is what `sfclab reproduce NAME` takes.
	Name  string
	Title string
	// Experiment is the experiment file, as a path in the embedded files.
	Experiment string
	// Published are the study's own figures.
	Published *report.Published
	// Quick shortens the experiment for a smoke run (`--quick`).
	Quick func(e *experiment.Experiment)
	// NetnsOnly, when set, says why the study runs on the netns runtime only; --runtime of
	// another is refused with it.
	NetnsOnly string
	// VMFlag, when set, says how the study runs its functions as VMs instead of --runtime vm
	// (study C: --vm, which makes every function of its data plane a VM and gates TCG); --runtime vm is
	// refused with it.
	VMFlag string
	// VMColumn marks a study whose experiment puts its VM scenarios on runtime vm itself
	// (study B's KVM column): --runtime vm selects them (VMScenarios) instead of moving the
	// labs, which would make the other scenarios' functions VMs too.
	VMColumn bool
	// VMBaselines are the scenarios a VM column is compared with beside the experiment's own
	// baseline: with --runtime vm they run with the VM scenarios and the first of them is the
	// run's baseline (study A: the netns scenarios, whose endpoints the VM scenarios share).
	VMBaselines []string
	// Standard, when set, scales the experiment to one to two hours on a two-core machine
	// (`--standard`); it sets e.Reduced to say what is smaller than the study.
	Standard func(e *experiment.Experiment)
}

var all = map[string]*Study{
	OpenStackSFC:          studyC,
	"http-proxy":          studyB,
	"rtt-background-load": studyD,
	"single-host-chain": {
		Name:       "single-host-chain",
		Title:      "A. Docker-based NFV service chaining on a single host (2026)",
		Experiment: "experiments/single-host-chain.yaml",
		// Its vm-* scenarios put the netns scenarios' functions into VMs (beyond the study).
		VMColumn:    true,
		VMBaselines: []string{"netns-baseline", "netns-1-vnf", "netns-2-vnf"},
		Published: &report.Published{
			Study:     "A. Docker-based NFV service chaining on a single host (2026)",
			Source:    "Tables 3, 4 and 5 of the paper; 2 vCPU VM, Docker Engine 29, means of 3 runs x 30 s",
			Reference: ReferenceA,
			Claims:    claimsA,
			Rows: []report.PublishedRow{
				{Scenario: "baseline", Metric: report.MetricThroughput, Value: 29.5, Unit: "Gbit/s"},
				{Scenario: "1-vnf", Metric: report.MetricThroughput, Value: 19.7, Unit: "Gbit/s"},
				{Scenario: "2-vnf", Metric: report.MetricThroughput, Value: 2.36, Unit: "Gbit/s"},
				{Scenario: "baseline", Metric: report.MetricPingRTT, Value: 0.089, Unit: "ms"},
				{Scenario: "1-vnf", Metric: report.MetricPingRTT, Value: 0.177, Unit: "ms"},
				{Scenario: "2-vnf", Metric: report.MetricPingRTT, Text: "N/A"},
				{Scenario: "1-vnf", Metric: report.NodeMetric(report.MetricCPUTotal, "fw"), Value: 0.01, Unit: "%"},
				{Scenario: "2-vnf", Metric: report.NodeMetric(report.MetricCPUTotal, "lb"), Value: 118.42, Unit: "%"},
			},
		},
		Quick: func(e *experiment.Experiment) {
			e.Repetitions = 2
			e.Warmup.Duration = time.Second
			if p := e.Probes.Iperf3; p != nil {
				p.Duration.Duration = 3 * time.Second
			}
			if p := e.Probes.Ping; p != nil {
				p.Count = 20
			}
			if p := e.Probes.TCPRTT; p != nil {
				p.Connects, p.Requests = 20, 100
			}
		},
	},
}

// Get returns a study by name.
func Get(name string) (*Study, error) {
	s, ok := all[name]
	if !ok {
		hint := ""
		if n := closest(name); n != "" {
			hint = fmt.Sprintf("did you mean %s? ", n)
		}
		return nil, fmt.Errorf("get study %q: unknown; %sthe studies are %s", name, hint, strings.Join(Names(), ", "))
	}
	return s, nil
}

// closest returns the study whose name is within a few typing slips (edits) of name, or "".
func closest(name string) string {
	best, bestD := "", 4
	for _, n := range Names() {
		if d := editDistance(name, n); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			sub := 1
			if a[i-1] == b[j-1] {
				sub = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+sub)
		}
		prev = cur
	}
	return prev[len(b)]
}

// Names lists the studies, sorted.
func Names() []string {
	var out []string
	for n := range all {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Published returns the published figures of a study, or nil for "" or an unknown study.
func Published(name string) *report.Published {
	if s, ok := all[name]; ok {
		return s.Published
	}
	return nil
}

// Load reads a study's experiment and the labs it names from the files built into the binary;
// inputs holds their bytes by name (experiment.yaml, labs/NAME.yaml) for the run directory.
// scale is Full, Quick or Standard; runtime (when not "") is the runtime of every lab whose
// scenario does not name one.
func (s *Study) Load(scale Scale, runtime string) (e *experiment.Experiment, inputs map[string][]byte, err error) {
	return s.LoadEach(scale, runtime, nil)
}

// LoadEach is Load with each applied to every lab after --runtime (when each is not nil):
// reproduce openstack-sfc --runtime kubernetes maps the study's hosts onto the cluster's nodes.
func (s *Study) LoadEach(scale Scale, runtime string, each func(*spec.Lab) error) (e *experiment.Experiment, inputs map[string][]byte, err error) {
	if s.NetnsOnly != "" && runtime != "" && runtime != spec.RuntimeNetns {
		return nil, nil, fmt.Errorf("load study %s: it runs on the netns runtime only: %s; leave out --runtime", s.Name, s.NetnsOnly)
	}
	if s.VMFlag != "" && runtime == spec.RuntimeVM {
		return nil, nil, fmt.Errorf("load study %s: --runtime vm is not how it runs VMs: %s", s.Name, s.VMFlag)
	}
	if s.VMColumn && runtime == spec.RuntimeVM {
		runtime = ""
	}
	data, err := fs.ReadFile(sfclab.Files, s.Experiment)
	if err != nil {
		return nil, nil, fmt.Errorf("read embedded experiment: %w", err)
	}
	inputs = map[string][]byte{"experiment.yaml": data}
	vmNodes := 0 // nodes --runtime vm would make VMs: functions, and endpoints with vm:
	load := func(p string) (*spec.Lab, error) {
		p = path.Clean(p)
		lab, err := fs.ReadFile(sfclab.Files, p)
		if err != nil {
			return nil, fmt.Errorf("read embedded lab: %w", err)
		}
		inputs["labs/"+path.Base(p)] = lab
		l, err := spec.Decode(lab, p, kinds.Spec())
		if err == nil {
			vmNodes += len(l.Functions)
			for _, ep := range l.Endpoints {
				if ep != nil && ep.VM != nil {
					vmNodes++
				}
			}
		}
		if err != nil || runtime == "" {
			return l, err
		}
		if err := experiment.Override(l, runtime, ""); err != nil || each == nil {
			return l, err
		}
		return l, each(l)
	}
	if e, err = experiment.Decode(data, s.Experiment, path.Dir(s.Experiment), load); err != nil {
		return nil, nil, err
	}
	if runtime == spec.RuntimeVM && vmNodes == 0 {
		// Runtime vm makes a lab's functions VMs and leaves its other nodes namespaces: on labs
		// of endpoints only it would run the netns study under another name.
		return nil, nil, fmt.Errorf("load study %s: --runtime vm puts a lab's service functions into VMs, and this study's labs have none (only endpoints, which stay namespaces), so nothing would run in a VM; leave out --runtime (or --runtime docker: its nodes as containers)", s.Name)
	}
	if err := s.keepOwnRuntimes(e, runtime); err != nil {
		return nil, nil, err
	}
	switch scale {
	case Full:
	case Quick:
		if s.Quick != nil {
			s.Quick(e)
		}
		if e.Reduced == "" {
			e.Reduced = "quick smoke run (--quick): fewer and shorter repetitions than the study"
		}
	case Standard:
		if s.Standard == nil {
			return nil, nil, fmt.Errorf("load study %s: it has no --standard scale; run it in full or --quick", s.Name)
		}
		s.Standard(e)
	default:
		return nil, nil, fmt.Errorf("load study %s: unknown scale %q", s.Name, scale)
	}
	return e, inputs, nil
}

// keepOwnRuntimes says what --runtime did to e's scenarios: it applies only to a scenario that
// names no runtime of its own (the study compares the runtimes its scenarios name). When every
// scenario names one, the flag would change nothing and is refused; otherwise the scenarios that
// kept a runtime other than runtime are recorded in e.KeptRuntime, which the report states.
func (s *Study) keepOwnRuntimes(e *experiment.Experiment, runtime string) error {
	if runtime == "" {
		return nil
	}
	var order []string
	byRuntime := map[string][]string{}
	kept := map[string]string{}
	for _, sc := range e.Scenarios {
		if sc.Runtime == "" {
			continue
		}
		if byRuntime[sc.Runtime] == nil {
			order = append(order, sc.Runtime)
		}
		byRuntime[sc.Runtime] = append(byRuntime[sc.Runtime], sc.Name)
		if sc.Runtime != runtime {
			kept[sc.Name] = sc.Runtime
		}
	}
	if len(byRuntime) > 0 && len(e.Scenarios) == countNames(byRuntime) {
		var groups []string
		for _, rt := range order {
			groups = append(groups, strings.Join(byRuntime[rt], ", ")+" on "+rt)
		}
		hint := "leave out --runtime"
		if s.VMColumn {
			hint += " (--runtime vm runs its VM scenarios)"
		}
		return fmt.Errorf("load study %s: --runtime %s would change nothing: every scenario names its own runtime, which the study compares (%s); %s",
			s.Name, runtime, strings.Join(groups, "; "), hint)
	}
	if len(kept) > 0 {
		e.KeptRuntime = kept
	}
	return nil
}

func countNames(m map[string][]string) int {
	n := 0
	for _, v := range m {
		n += len(v)
	}
	return n
}
