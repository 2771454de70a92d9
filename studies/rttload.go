package studies

import (
	"github.com/sfclab/sfclab/experiment"
	"github.com/sfclab/sfclab/probe/load"
	"github.com/sfclab/sfclab/report"
)

// ReferenceD cites study D. The shared copy of the paper gives no venue or year; it is an
// Elsevier-style journal article citing sources accessed in December 2023.
const ReferenceD = `A. T. de Oliveira Filho, E. Freitas, P. R. X. do Carmo, E. Souto, J. Kelner, D. F. H. Sadok, "Analysis of SR-IOV in Docker containers using RTT measurements", journal article (venue and year not in the shared copy; it cites sources accessed in December 2023)`

// studyD is study D on two emulated hosts (a core each, a 10 Gbit/s link between them).
var studyD = &Study{
	Name:       "rtt-background-load",
	Title:      "D. SR-IOV in Docker containers, RTT measurements (de Oliveira Filho et al.) — on two emulated hosts",
	Experiment: "experiments/rtt-background-load.yaml",
	Published: &report.Published{
		Study:     "D. SR-IOV in Docker containers, RTT measurements (de Oliveira Filho et al.)",
		Source:    "Sections 4-5 and Table 2 of the paper; two hosts back to back, Intel x540-AT2 10 GbE, Docker 26, 1,000 ICMP echoes of 64 B per configuration",
		Reference: ReferenceD,
		Claims:    claimsD,
		Notes: []string{
			"Published finding: with network load and many background containers, RTT with SR-IOV is about 10-15x lower than with the Linux bridge (macvtap); CPU use is about the same (Figs. 4-7, text of section 5.1).",
			"Published: responder CPU % (all containers SR-IOV), min/mean/max/std per background count: 0: 1.50/2.13/2.36/0.12; 8: 1.01/1.19/1.76/0.10; 32: 1.05/1.41/2.30/0.22; 64: 1.06/1.57/1.96/0.31 (Table 2).",
			"Here the study's two servers are emulated hosts on one machine: each a namespace with its own bridge and its own core (every node on it in a cgroup cpuset), joined by a link shaped to 10 Gbit/s per direction (tbf) that the segment crosses in VXLAN; the two cores still share one kernel, its memory and its softirq accounting, unlike two machines.",
			"Background nodes: kind cpu runs K nodes on the chosen side's host (its core); kind network runs K/2 senders on that host and their K/2 receivers on the other host, each pair pushing UDP capped at the experiment's bitrate across the host link.",
			"SR-IOV: the grid has no SR-IOV driver (whether this host has a PF with virtual functions is in the environment table, sriov, as read when the run started). In its place the grid has ebpf-redirect (a veth whose host side redirects IPv4 past the bridges with bpf_redirect_peer, across the link in the steering VXLAN): the kernel's cheapest path between namespaces, not a NIC's VF; ratios against it are not the study's SR-IOV ratios.",
		},
	},
	Quick: func(e *experiment.Experiment) {
		e.Repetitions = 1
		if p := e.Probes.RTT; p != nil {
			p.Count = 200
		}
		// Cells with up to 8 background nodes on the sender's side; the background nodes on
		// another driver than the main pair's only under network load.
		var keep []*experiment.Scenario
		for _, s := range e.Scenarios {
			b := s.Background
			if b != nil && b.Count > 0 && b.Driver != "" && b.Driver != load.DriverSame && b.Kind != load.KindNetwork {
				continue
			}
			if b == nil || b.Count == 0 || (b.Count <= 8 && b.Side == "sender") {
				keep = append(keep, s)
			}
		}
		e.Scenarios = keep
	},
}
