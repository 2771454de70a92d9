package telemetry

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sfclab/sfclab/cgroup"
	"github.com/sfclab/sfclab/deploy"
	"github.com/sfclab/sfclab/netdev"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func node(name, role, kind string, rxB, txB, rxP, drops uint64, cpu time.Duration) Node {
	return Node{Name: name, Role: role, Kind: kind, CPU: cgroup.Usage{User: cpu / 2, System: cpu / 2},
		Interfaces: []deploy.InterfaceInfo{{Name: "eth0", Stats: netdev.LinkStats{RxBytes: rxB, TxBytes: txB, RxPackets: rxP, TxPackets: rxP, RxDropped: drops}}}}
}

// vm makes n a VM node under TCG.
func vm(n Node) Node { n.Emulated = true; return n }

func TestRates(t *testing.T) {
	prev := []Lab{{Lab: "a", Status: "ready", Nodes: []Node{
		node("client", "client", "client", 0, 0, 0, 0, 0),
		node("fw", "function", "firewall", 0, 0, 0, 0, 0),
		node("lb", "function", "l4lb", 0, 0, 0, 0, 0),
	}}}
	cases := []struct {
		name       string
		cur        []Lab
		busiest    string
		bottleneck string
		reason     string
	}{
		{"cpu bound proxy", []Lab{{Lab: "a", Status: "ready", Nodes: []Node{
			node("client", "client", "client", 1e6, 2e9, 1e3, 0, 10*time.Millisecond),
			node("fw", "function", "firewall", 2e9, 2e9, 1e6, 0, 20*time.Millisecond),
			node("lb", "function", "l4lb", 1.9e9, 1.9e9, 1e6, 0, 1900*time.Millisecond),
		}}}, "fw", "lb", "cpu"},
		{"drops win over cpu", []Lab{{Lab: "a", Status: "ready", Nodes: []Node{
			node("client", "client", "client", 1e6, 2e9, 1e3, 0, 0),
			node("fw", "function", "firewall", 2e9, 2e9, 1e6, 500, 0),
			node("lb", "function", "l4lb", 1e9, 1e9, 1e6, 0, 1900*time.Millisecond),
		}}}, "fw", "fw", "drops"},
		{"idle lab has none", []Lab{{Lab: "a", Status: "ready", Nodes: []Node{
			node("client", "client", "client", 0, 0, 0, 0, 0),
			node("fw", "function", "firewall", 0, 0, 0, 0, time.Millisecond),
			node("lb", "function", "l4lb", 0, 0, 0, 0, 0),
		}}}, "client", "", ""},
		// An idle VM under TCG: its emulator uses 0.09 cores doing nothing (the walk saw
		// 0.08-0.10), more than MinBottleneckCPU, and no packet moves: no candidate.
		{"idle TCG guest is no bottleneck", []Lab{{Lab: "a", Status: "ready", Nodes: []Node{
			node("client", "client", "client", 0, 0, 4, 0, 0),
			vm(node("fw", "function", "firewall", 0, 0, 2, 0, 180*time.Millisecond)),
			node("lb", "function", "l4lb", 0, 0, 0, 0, 0),
		}}}, "client", "", ""},
		// A busy chain through lb beside an idle TCG guest that uses more CPU: lb, the busy one.
		{"idle guest beside a busy function", []Lab{{Lab: "a", Status: "ready", Nodes: []Node{
			node("client", "client", "client", 1e6, 2e9, 1e3, 0, 0),
			vm(node("fw", "function", "firewall", 0, 0, 2, 0, 180*time.Millisecond)),
			node("lb", "function", "l4lb", 1.9e9, 1.9e9, 1e6, 0, 120*time.Millisecond),
		}}}, "lb", "lb", "cpu"},
		// A TCG guest that carries the traffic is named on CPU (its CPU marked elsewhere).
		{"busy TCG guest", []Lab{{Lab: "a", Status: "ready", Nodes: []Node{
			node("client", "client", "client", 1e6, 2e8, 1e3, 0, 0),
			vm(node("fw", "function", "firewall", 2e8, 2e8, 1e5, 0, 1800*time.Millisecond)),
			node("lb", "function", "l4lb", 0, 0, 0, 0, 0),
		}}}, "fw", "fw", "cpu"},
		// Exactly MinBusyPps received (200 packets in 2 s) is busy; one packet fewer is idle.
		{"at the busy threshold", []Lab{{Lab: "a", Status: "ready", Nodes: []Node{
			node("client", "client", "client", 0, 0, 0, 0, 0),
			node("fw", "function", "firewall", 2e5, 2e5, 2*MinBusyPps, 0, 200*time.Millisecond),
			node("lb", "function", "l4lb", 0, 0, 0, 0, 0),
		}}}, "fw", "fw", "cpu"},
		{"below the busy threshold", []Lab{{Lab: "a", Status: "ready", Nodes: []Node{
			node("client", "client", "client", 0, 0, 0, 0, 0),
			node("fw", "function", "firewall", 2e5, 2e5, 2*MinBusyPps-1, 0, 200*time.Millisecond),
			node("lb", "function", "l4lb", 0, 0, 0, 0, 0),
		}}}, "fw", "", ""},
		// A stray drop in an idle reading names nobody.
		{"drop in an idle reading", []Lab{{Lab: "a", Status: "ready", Nodes: []Node{
			node("client", "client", "client", 0, 0, 4, 0, 0),
			node("fw", "function", "firewall", 600, 600, 4, 2, 0),
			node("lb", "function", "l4lb", 0, 0, 0, 0, 0),
		}}}, "fw", "", ""},
		{"counter reset counts as zero", []Lab{{Lab: "a", Status: "ready", Nodes: []Node{
			node("client", "client", "client", 0, 0, 0, 0, 0),
			node("fw", "function", "firewall", 0, 0, 0, 0, 0),
			{Name: "lb", Role: "function", Kind: "l4lb", CPUErr: "gone", Err: "open netns: not found"},
		}}}, "client", "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Rates(prev, c.cur, 2*time.Second)
			if len(got) != 1 {
				t.Fatalf("got %d labs", len(got))
			}
			nodes := got[0].Nodes
			if nodes[0].Node != c.busiest {
				t.Errorf("busiest first: got %s, want %s", nodes[0].Node, c.busiest)
			}
			var b, reason string
			for _, n := range nodes {
				if n.Bottleneck != "" {
					if b != "" {
						t.Errorf("two bottleneck candidates: %s and %s", b, n.Node)
					}
					b, reason = n.Node, n.Bottleneck
				}
				if n.RxBps < 0 || n.Drops < 0 {
					t.Errorf("%s: negative rate %+v", n.Node, n)
				}
			}
			if b != c.bottleneck || reason != c.reason {
				t.Errorf("bottleneck %q (%s), want %q (%s)", b, reason, c.bottleneck, c.reason)
			}
		})
	}
	// A VM whose guest could not be read shows its host side's counters: no rate from the
	// guest's to the host side's (other devices, other counts), nor back.
	guest, side := node("fw", "function", "firewall", 5e9, 5e9, 1e6, 0, 0), node("fw", "function", "firewall", 9e9, 9e9, 2e6, 0, 0)
	guest.Interfaces[0].SeenBy, side.Interfaces[0].SeenBy = deploy.SeenGuest, deploy.SeenHostSide
	for _, pair := range [][2]Node{{guest, side}, {side, guest}} {
		r := Rates([]Lab{{Lab: "a", Nodes: []Node{pair[0]}}}, []Lab{{Lab: "a", Nodes: []Node{pair[1]}}}, time.Second)[0].Nodes[0]
		if r.RxBps != 0 || r.TxPps != 0 {
			t.Errorf("rate from %s to %s counters: %+v, want none", pair[0].Interfaces[0].SeenBy, pair[1].Interfaces[0].SeenBy, r)
		}
	}

	for _, n := range Rates(prev, cases[4].cur, 2*time.Second)[0].Nodes {
		if n.Emulated != (n.Node == "fw") {
			t.Errorf("%s: emulated %v, want fw's only", n.Node, n.Emulated)
		}
	}

	// The figures: fw received 2e9 bytes in 2 s = 8 Gbit/s; lb used 1.9 s of CPU in 2 s.
	r := Rates(prev, cases[0].cur, 2*time.Second)[0].Nodes
	if r[0].RxBps != 8e9 || r[0].RxPps != 5e5 {
		t.Errorf("fw rates %+v, want 8e9 bit/s and 5e5 pkt/s", r[0])
	}
	if r[1].Node != "lb" || r[1].CPU != 0.95 {
		t.Errorf("lb cpu %+v, want 0.95 cores", r[1])
	}
}

func TestViews(t *testing.T) {
	prev := []Lab{{Lab: "a", Status: "ready", Nodes: []Node{node("fw", "function", "firewall", 0, 0, 0, 0, 0), node("lb", "function", "l4lb", 0, 0, 0, 0, 0)}},
		{Lab: "b", Status: "ready", Nodes: []Node{vm(node("fw", "function", "firewall", 0, 0, 0, 0, 0))}}}
	cur := []Lab{{Lab: "a", Status: "ready", Nodes: []Node{node("fw", "function", "firewall", 2e9, 2e9, 1e6, 0, 0), node("lb", "function", "l4lb", 1e9, 1e9, 5e5, 0, 1500*time.Millisecond)}},
		{Lab: "b", Status: "ready", Nodes: []Node{vm(node("fw", "function", "firewall", 0, 0, 0, 0, 180*time.Millisecond))}}}
	rates := Rates(prev, cur, 2*time.Second)
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		file  string
		write func(*bytes.Buffer) error
	}{
		{"top-table.txt", func(b *bytes.Buffer) error { return WriteTable(b, rates, now, time.Second) }},
		{"top-lines.txt", func(b *bytes.Buffer) error { return WriteLines(b, rates, now) }},
		{"top-empty.txt", func(b *bytes.Buffer) error { return WriteTable(b, nil, now, time.Second) }},
	} {
		var b bytes.Buffer
		if err := c.write(&b); err != nil {
			t.Fatal(err)
		}
		golden := filepath.Join("testdata", c.file)
		if *update {
			os.MkdirAll("testdata", 0o755)
			os.WriteFile(golden, b.Bytes(), 0o644)
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatalf("%v (run go test -update)", err)
		}
		if !bytes.Equal(b.Bytes(), want) {
			t.Errorf("%s differs:\n%s\nwant:\n%s", c.file, b.Bytes(), want)
		}
	}
}
