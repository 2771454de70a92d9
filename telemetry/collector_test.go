package telemetry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/sfclab/sfclab/cgroup"
	"github.com/sfclab/sfclab/deploy"
	"github.com/sfclab/sfclab/internal/labtest"
	"github.com/sfclab/sfclab/journal"
	"github.com/sfclab/sfclab/netdev"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/runtime"
	"github.com/sfclab/sfclab/runtime/vm/accel"
)

const fwLab = `
name: t-telem-fw
endpoints: {client: {}, server: {}}
functions:
  fw: {kind: firewall, params: {rules: [{action: deny, protocol: tcp, port: 9999}]}}
  f1: {kind: forwarder}
chains: [{name: web, from: client, to: server, hops: [fw, f1]}]
`

// gather scrapes a collector through its HTTP handler, as Prometheus would, and parses the
// text it served.
func gather(t *testing.T, h http.Handler) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("scrape: status %d: %s", rec.Code, rec.Body)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatalf("parse scrape: %v", err)
	}
	return fams
}

// value finds the sample of a family whose labels include all of want.
func value(fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		}
	}
	return 0, false
}

func TestCollectDeployedLab(t *testing.T) {
	l := labtest.Deploy(t, fwLab)
	client := l.Node(t, "client")
	target := l.P.Chains[0].Target.String()
	if out, err := client.Output(context.Background(), nil, "ping", "-n", "-c", "5", "-i", "0.05", "-W", "1", target); err != nil {
		t.Fatalf("ping %s: %v\n%s", target, err, out)
	}
	h := HandlerFor(&Collector{Reader: &Reader{Source: FromDeployer(l.D)}})
	fams := gather(t, h)
	lab := l.P.Lab
	fw := l.P.Node("fw")
	cases := []struct {
		metric string
		labels map[string]string
		min    float64
	}{
		{"sfclab_lab_info", map[string]string{"lab": lab, "status": journal.StatusReady, "runtime": "netns"}, 1},
		{"sfclab_lab_deploy_duration_seconds", map[string]string{"lab": lab}, 1e-6},
		{"sfclab_node_up", map[string]string{"lab": lab, "node": "fw", "role": "function", "chain": "web"}, 1},
		{"sfclab_interface_receive_packets_total", map[string]string{"lab": lab, "node": "fw", "interface": fw.Function.Ingress}, 5},
		{"sfclab_interface_transmit_packets_total", map[string]string{"lab": lab, "node": "fw", "interface": fw.Function.Egress}, 5},
		{"sfclab_interface_receive_bytes_total", map[string]string{"lab": lab, "node": "server"}, 5 * 84},
		{"sfclab_interface_receive_drops_total", map[string]string{"lab": lab, "node": "fw"}, 0},
		{"sfclab_firewall_rule_packets_total", map[string]string{"lab": lab, "node": "fw", "rule": "rule-1"}, 0},
		{"sfclab_firewall_rule_packets_total", map[string]string{"lab": lab, "node": "fw", "rule": "policy"}, 1},
		{"sfclab_chain_hop_packets_total", map[string]string{"lab": lab, "chain": "web", "hop": "0", "node": "client", "source": "interface"}, 5},
		{"sfclab_chain_hop_packets_total", map[string]string{"lab": lab, "chain": "web", "hop": "1", "node": "fw"}, 5},
		{"sfclab_chain_hop_packets_total", map[string]string{"lab": lab, "chain": "web", "hop": "2", "node": "f1"}, 5},
		{"sfclab_chain_hop_bytes_total", map[string]string{"lab": lab, "chain": "web", "hop": "3", "node": "server"}, 5 * 84},
		{"sfclab_scrape_error", nil, 0},
	}
	for _, c := range cases {
		v, ok := value(fams, c.metric, c.labels)
		if !ok {
			t.Errorf("%s%v: no sample", c.metric, c.labels)
			continue
		}
		if v < c.min {
			t.Errorf("%s%v = %v, want >= %v", c.metric, c.labels, v, c.min)
		}
	}
	// CPU: every node has a cgroup; the firewall's nft ran in it at deploy.
	for _, n := range l.P.Nodes {
		for _, mode := range []string{"user", "system"} {
			if _, ok := value(fams, "sfclab_node_cpu_seconds_total", map[string]string{"lab": lab, "node": n.Name, "mode": mode}); !ok {
				t.Errorf("no cpu %s sample for node %s", mode, n.Name)
			}
		}
	}
}

// TestScrapeWhileDestroying scrapes over HTTP in a loop while the lab is destroyed: every
// scrape must answer 200 with parseable metrics, and the last must no longer show the lab.
func TestScrapeWhileDestroying(t *testing.T) {
	l := labtest.Deploy(t, strings.ReplaceAll(fwLab, "t-telem-fw", "t-telem-gone"))
	srv := httptest.NewServer(HandlerFor(&Collector{Reader: &Reader{Source: FromDeployer(l.D)}}))
	defer srv.Close()
	scrape := func() (string, error) {
		resp, err := http.Get(srv.URL)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return "", fmt.Errorf("status %d: %s", resp.StatusCode, body)
		}
		p := expfmt.NewTextParser(model.LegacyValidation)
		if _, err := p.TextToMetricFamilies(strings.NewReader(string(body))); err != nil {
			return "", fmt.Errorf("parse: %w", err)
		}
		return string(body), nil
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var scrapes, sawLab, sawDown int
	var firstErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 2000; i++ { // bounded; the destroy takes well under a second
			select {
			case <-stop:
				return
			default:
			}
			body, err := scrape()
			if err != nil && firstErr == nil {
				firstErr = err
			}
			scrapes++
			if strings.Contains(body, `lab="t-telem-gone"`) {
				sawLab++
			}
			if strings.Contains(body, `sfclab_node_up{chain="web",kind="firewall",lab="t-telem-gone",node="fw",role="function"} 0`) {
				sawDown++
			}
		}
	}()
	time.Sleep(50 * time.Millisecond)
	if err := l.D.Destroy(context.Background(), l.P.Lab); err != nil {
		t.Fatalf("destroy: %v", err)
	}
	close(stop)
	wg.Wait()
	if firstErr != nil {
		t.Fatalf("a scrape during destroy failed: %v", firstErr)
	}
	body, err := scrape()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(body, `lab="t-telem-gone"`) {
		t.Errorf("destroyed lab still reported:\n%s", body)
	}
	t.Logf("%d scrapes during destroy, %d showed the lab, %d with its firewall's namespace already gone", scrapes, sawLab, sawDown)
	if sawLab == 0 {
		t.Errorf("no scrape saw the lab before it was gone")
	}
	if _, err := exec.LookPath("ip"); err == nil {
		if ns, _ := netdev.ListNetns(plan.NetnsName(l.P.Lab, "")); len(ns) > 0 {
			t.Errorf("namespaces left: %v", ns)
		}
	}
}

// fakeSource serves labs from memory; a lab in gone vanishes between listing and reading.
type fakeSource struct {
	labs map[string]*deploy.LabInfo
	gone map[string]bool
	err  error
	// cpu, when set, is every node's CPU time.
	cpu *cgroup.Usage
}

func (f *fakeSource) Labs() ([]string, error) {
	var out []string
	for l := range f.labs {
		out = append(out, l)
	}
	return out, f.err
}

func (f *fakeSource) Inspect(_ context.Context, lab string) (*deploy.LabInfo, error) {
	if f.gone[lab] {
		return nil, fmt.Errorf("read lab %q: %w", lab, journal.ErrNotDeployed)
	}
	return f.labs[lab], nil
}

func (f *fakeSource) Node(*plan.Plan, string) (runtime.Node, error) {
	if f.cpu != nil {
		return cpuNode{f.cpu}, nil
	}
	return nil, errors.New("no cgroup")
}

// cpuNode is a node that only reports CPU time.
type cpuNode struct{ usage *cgroup.Usage }

func (n cpuNode) CPU() (cgroup.Usage, error) { return *n.usage, nil }
func (cpuNode) Output(context.Context, []byte, ...string) ([]byte, error) {
	return nil, errors.New("not a node")
}
func (cpuNode) Daemon([]string, string) (int, error) { return 0, errors.New("not a node") }
func (cpuNode) Do(func() error) error                { return errors.New("not a node") }
func (cpuNode) Run(*exec.Cmd) error                  { return errors.New("not a node") }

// TestCollectorCPUMark: the CPU of a VM under TCG carries CPUMark as its mark label; a
// namespace's and a KVM guest's carry none.
func TestCollectorCPUMark(t *testing.T) {
	p := &plan.Plan{Lab: "a", Nodes: []*plan.Node{{Name: "n1", Role: "function"}}}
	for _, c := range []struct {
		machine, mark string
	}{
		{"1 vCPU, 512 MiB, nic virtio-net-pci on tap; " + accel.TCGMark + "; boot 3.1 s", CPUMark},
		{"1 vCPU, 512 MiB, nic virtio-net-pci on tap; boot 0.8 s", ""},
		{"", ""},
	} {
		info := &deploy.LabInfo{Lab: "a", Status: journal.StatusReady, Plan: p,
			Nodes: []deploy.NodeInfo{{Name: "n1", Role: "function", Machine: c.machine}}}
		src := &fakeSource{labs: map[string]*deploy.LabInfo{"a": info}, cpu: &cgroup.Usage{User: 3 * time.Second}}
		fams := gather(t, HandlerFor(&Collector{Reader: &Reader{Source: src}}))
		if v, ok := value(fams, "sfclab_node_cpu_seconds_total", map[string]string{"node": "n1", "mode": "user", "mark": c.mark}); !ok || v != 3 {
			t.Errorf("machine %q: cpu with mark %q = %v (present %v), want 3", c.machine, c.mark, v, ok)
		}
	}
}

type fakeHops []HopCount

func (f fakeHops) HopCounts(context.Context, string) ([]HopCount, error) { return f, nil }

func TestCollectorFaults(t *testing.T) {
	p := &plan.Plan{Lab: "a", Nodes: []*plan.Node{{Name: "n1", Role: "function"}}}
	info := &deploy.LabInfo{Lab: "a", Status: journal.StatusDestroying, Plan: p,
		Nodes: []deploy.NodeInfo{{Name: "n1", Role: "function", Error: "open netns sfc.a.n1: not found"}}}
	// A VM whose guest does not answer: inspect shows its host side; telemetry exports none of
	// it under the guest's series, and the node is not up.
	hung := &deploy.LabInfo{Lab: "a", Status: journal.StatusReady, Plan: p,
		Nodes: []deploy.NodeInfo{{Name: "n1", Role: "function", Machine: "1 vCPU", Down: "its guest agent did not answer within 10s",
			Interfaces: []deploy.InterfaceInfo{{Name: "eth0", SeenBy: deploy.SeenHostSide, Stats: netdev.LinkStats{RxPackets: 9}}}}}}
	guest := &deploy.LabInfo{Lab: "a", Status: journal.StatusReady, Plan: p,
		Nodes: []deploy.NodeInfo{{Name: "n1", Role: "function", Machine: "1 vCPU",
			Interfaces: []deploy.InterfaceInfo{{Name: "eth0", SeenBy: deploy.SeenGuest, Stats: netdev.LinkStats{RxPackets: 5}}}}}}
	cases := []struct {
		name    string
		src     *fakeSource
		hops    HopCounters
		want    map[string]float64 // metric -> value of its single sample (labels ignored)
		missing []string
	}{
		{"lab vanishes between list and read", &fakeSource{labs: map[string]*deploy.LabInfo{"a": info}, gone: map[string]bool{"a": true}},
			nil, map[string]float64{"sfclab_scrape_error": 0}, []string{"sfclab_lab_info", "sfclab_node_up"}},
		{"namespace gone: node down, no interface samples", &fakeSource{labs: map[string]*deploy.LabInfo{"a": info}},
			nil, map[string]float64{"sfclab_lab_info": 1, "sfclab_node_up": 0}, []string{"sfclab_interface_receive_packets_total", "sfclab_node_cpu_seconds_total"}},
		{"VM guest unreadable: node down, no host-side samples", &fakeSource{labs: map[string]*deploy.LabInfo{"a": hung}},
			nil, map[string]float64{"sfclab_node_up": 0}, []string{"sfclab_interface_receive_packets_total"}},
		{"VM guest read: its counters", &fakeSource{labs: map[string]*deploy.LabInfo{"a": guest}},
			nil, map[string]float64{"sfclab_node_up": 1, "sfclab_interface_receive_packets_total": 5}, nil},
		{"journal unreadable", &fakeSource{err: errors.New("permission denied")},
			nil, map[string]float64{"sfclab_scrape_error": 1}, []string{"sfclab_lab_info"}},
		{"steering hop counters", &fakeSource{labs: map[string]*deploy.LabInfo{"a": info}},
			fakeHops{{Chain: "c", Hop: 1, Node: "n1", Packets: 7, Bytes: 700}}, map[string]float64{"sfclab_chain_hop_packets_total": 7, "sfclab_chain_hop_bytes_total": 700}, []string{"sfclab_chain_hop_drops_total"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fams := gather(t, HandlerFor(&Collector{Reader: &Reader{Source: c.src, Hops: c.hops}}))
			for m, want := range c.want {
				if v, ok := value(fams, m, nil); !ok || v != want {
					t.Errorf("%s = %v (present %v), want %v", m, v, ok, want)
				}
			}
			for _, m := range c.missing {
				if fams[m] != nil {
					t.Errorf("%s present: %v", m, fams[m])
				}
			}
		})
	}
}

var _ prometheus.Collector = (*Collector)(nil)
