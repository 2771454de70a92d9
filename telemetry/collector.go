package telemetry

import (
	"context"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sfclab/sfclab/deploy"
)

// ScrapeTimeout bounds one scrape: a lab whose firewall does not answer in time is reported
// with what was read.
const ScrapeTimeout = 10 * time.Second

var (
	labels     = []string{"lab", "node", "interface", "segment"}
	descLabUp  = prometheus.NewDesc("sfclab_lab_info", "A deployed lab (1), labelled with its status and runtime.", []string{"lab", "status", "runtime"}, nil)
	descDeploy = prometheus.NewDesc("sfclab_lab_deploy_duration_seconds", "How long the lab's deploy took.", []string{"lab"}, nil)
	descNodeUp = prometheus.NewDesc("sfclab_node_up", "1 when the node's counters could be read, 0 when not (its namespace is gone).", []string{"lab", "node", "role", "kind", "chain"}, nil)
	descRxPk   = prometheus.NewDesc("sfclab_interface_receive_packets_total", "Packets received by a node's interface.", labels, nil)
	descTxPk   = prometheus.NewDesc("sfclab_interface_transmit_packets_total", "Packets sent by a node's interface.", labels, nil)
	descRxB    = prometheus.NewDesc("sfclab_interface_receive_bytes_total", "Bytes received by a node's interface.", labels, nil)
	descTxB    = prometheus.NewDesc("sfclab_interface_transmit_bytes_total", "Bytes sent by a node's interface.", labels, nil)
	descRxDrop = prometheus.NewDesc("sfclab_interface_receive_drops_total", "Packets dropped on receive by a node's interface.", labels, nil)
	descTxDrop = prometheus.NewDesc("sfclab_interface_transmit_drops_total", "Packets dropped on transmit by a node's interface.", labels, nil)
	descRulePk = prometheus.NewDesc("sfclab_firewall_rule_packets_total", "Packets a firewall rule matched.", []string{"lab", "node", "rule"}, nil)
	descRuleB  = prometheus.NewDesc("sfclab_firewall_rule_bytes_total", "Bytes a firewall rule matched.", []string{"lab", "node", "rule"}, nil)
	descCPU    = prometheus.NewDesc("sfclab_node_cpu_seconds_total", "CPU time of a node's processes, from its cgroup (mode user or system); mark \""+CPUMark+"\" on a VM under TCG, whose CPU is the emulator's.", []string{"lab", "node", "chain", "mode", "mark"}, nil)
	hopLabels  = []string{"lab", "chain", "hop", "group", "node", "interface", "source"}
	descHopPk  = prometheus.NewDesc("sfclab_chain_hop_packets_total", "Packets that entered a chain's hop in the chain's direction (source: interface counters or the steering data plane's own).", hopLabels, nil)
	descHopB   = prometheus.NewDesc("sfclab_chain_hop_bytes_total", "Bytes that entered a chain's hop in the chain's direction.", hopLabels, nil)
	descHopDr  = prometheus.NewDesc("sfclab_chain_hop_drops_total", "Receive and transmit drops of the hop's interface.", hopLabels, nil)
	descScrape = prometheus.NewDesc("sfclab_scrape_duration_seconds", "How long reading every lab took.", nil, nil)
	descErr    = prometheus.NewDesc("sfclab_scrape_error", "1 when the lab journal could not be listed.", nil, nil)
)

// Collector is a prometheus.Collector that reads every deployed lab when scraped.
type Collector struct {
	Reader *Reader
}

// NewCollector collects the labs journaled by d, with a data plane's hop counters if hops is
// not nil.
func NewCollector(d *deploy.Deployer, hops HopCounters) *Collector {
	return &Collector{Reader: &Reader{Source: FromDeployer(d), Hops: hops}}
}

// Describe sends every metric's description.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLabUp, descDeploy, descNodeUp, descRxPk, descTxPk, descRxB,
		descTxB, descRxDrop, descTxDrop, descRulePk, descRuleB, descCPU, descHopPk, descHopB, descHopDr,
		descScrape, descErr} {
		ch <- d
	}
}

// Collect reads every lab now. It never fails the scrape: what cannot be read is left out
// (a lab being destroyed) or marked (sfclab_node_up 0, sfclab_scrape_error 1).
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), ScrapeTimeout)
	defer cancel()
	labs, err := c.Reader.Snapshot(ctx)
	failed := 0.0
	if err != nil {
		failed = 1
	}
	for _, l := range labs {
		collectLab(ch, &l)
	}
	ch <- prometheus.MustNewConstMetric(descErr, prometheus.GaugeValue, failed)
	ch <- prometheus.MustNewConstMetric(descScrape, prometheus.GaugeValue, time.Since(t0).Seconds())
}

func collectLab(ch chan<- prometheus.Metric, l *Lab) {
	gauge := func(d *prometheus.Desc, v float64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, lv...)
	}
	counter := func(d *prometheus.Desc, v uint64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), lv...)
	}
	gauge(descLabUp, 1, l.Lab, l.Status, l.Runtime)
	if l.Deployed > 0 {
		gauge(descDeploy, l.Deployed.Seconds(), l.Lab)
	}
	for _, n := range l.Nodes {
		up := 0.0
		if n.Up() {
			up = 1
		}
		gauge(descNodeUp, up, l.Lab, n.Name, n.Role, n.Kind, n.Chain)
		if n.CPUErr == "" {
			mark := "" // an empty label is no label: the series of other nodes are unchanged
			if n.Emulated {
				mark = CPUMark
			}
			ch <- prometheus.MustNewConstMetric(descCPU, prometheus.CounterValue, n.CPU.User.Seconds(), l.Lab, n.Name, n.Chain, "user", mark)
			ch <- prometheus.MustNewConstMetric(descCPU, prometheus.CounterValue, n.CPU.System.Seconds(), l.Lab, n.Name, n.Chain, "system", mark)
		}
		if !n.Up() {
			continue
		}
		for _, i := range n.Interfaces {
			lv := []string{l.Lab, n.Name, i.Name, i.Segment}
			counter(descRxPk, i.Stats.RxPackets, lv...)
			counter(descTxPk, i.Stats.TxPackets, lv...)
			counter(descRxB, i.Stats.RxBytes, lv...)
			counter(descTxB, i.Stats.TxBytes, lv...)
			counter(descRxDrop, i.Stats.RxDropped, lv...)
			counter(descTxDrop, i.Stats.TxDropped, lv...)
		}
		seen := map[string]bool{}
		for _, r := range n.Rules {
			if seen[r.Rule] { // two rules with one comment would make a duplicate series
				continue
			}
			seen[r.Rule] = true
			counter(descRulePk, r.Packets, l.Lab, n.Name, r.Rule)
			counter(descRuleB, r.Bytes, l.Lab, n.Name, r.Rule)
		}
	}
	seen := map[string]bool{}
	for _, h := range l.Hops {
		lv := []string{l.Lab, h.Chain, itoa(h.Index), h.Group, h.Node, h.Interface, h.Source}
		key := fmtKey(lv)
		if seen[key] {
			continue
		}
		seen[key] = true
		counter(descHopPk, h.Packets, lv...)
		counter(descHopB, h.Bytes, lv...)
		if h.Source == "interface" {
			counter(descHopDr, h.Drops, lv...)
		}
	}
}

// Handler serves the metrics of every deployed lab (journal of deploy.New()) in the
// Prometheus text format; mount it at /metrics.
//
// Equivalent to: sfclab metrics --listen 127.0.0.1:9464 && curl 127.0.0.1:9464/metrics
func Handler() http.Handler { return HandlerFor(NewCollector(deploy.New(), nil)) }

// HandlerFor serves one collector's metrics (and the Go runtime's of this process) on a
// registry of its own. A collector error never becomes a 500 with a stack: the handler
// serves what it gathered.
func HandlerFor(c prometheus.Collector) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}
