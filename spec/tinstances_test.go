package spec_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/vnf/kinds"
)

// TestTransparentInstances: instances: N on a function gives N nodes NAME-1..NAME-N, each
// port pair on the function's ports becomes one pair per instance with the function's
// weights, and its group lists them all.
func TestTransparentInstances(t *testing.T) {
	lab := strings.Replace(transparentBase, "b: {kind: forwarder}", "b: {kind: forwarder, instances: 3, weights: [1, 2, 3]}", 1)
	l, err := spec.Decode([]byte(lab), "t.yaml", kinds.Spec())
	if err != nil {
		t.Fatal(err)
	}
	m, err := l.SFCModel()
	if err != nil {
		t.Fatal(err)
	}
	var ports, pairs []string
	for _, p := range m.Ports {
		ports = append(ports, p.Name+"@"+p.Node)
	}
	for _, pp := range m.PortPairs {
		pairs = append(pairs, fmt.Sprintf("%s:%s>%s/%d", pp.Name, pp.Ingress, pp.Egress, pp.Weight))
	}
	for _, tc := range []struct{ what, got, want string }{
		{"ports", strings.Join(ports, " "), "client.eth0@client server.eth0@server a.in@a a.out@a b-1.eth0@b-1 b-2.eth0@b-2 b-3.eth0@b-3 t.eth0@t"},
		{"pairs", strings.Join(pairs, " "), "pa:a.in>a.out/1 pb-1:b-1.eth0>b-1.eth0/1 pb-2:b-2.eth0>b-2.eth0/2 pb-3:b-3.eth0>b-3.eth0/3 pt:t.eth0>t.eth0/1"},
		{"group gb", strings.Join(m.PortPairGroups[1].PortPairs, " "), "pb-1 pb-2 pb-3"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %s\nwant  %s", tc.what, tc.got, tc.want)
		}
	}
	// Without weights: the pair's own weight (or 1) for every instance.
	lab = strings.Replace(transparentBase, "b: {kind: forwarder}", "b: {kind: forwarder, instances: 2}", 1)
	lab = strings.Replace(lab, "pb: {ingress: b.eth0, egress: b.eth0}", "pb: {ingress: b.eth0, egress: b.eth0, weight: 5}", 1)
	l, err = spec.Decode([]byte(lab), "t.yaml", kinds.Spec())
	if err != nil {
		t.Fatal(err)
	}
	m, _ = l.SFCModel()
	if w1, w2 := m.PortPairs[1].Weight, m.PortPairs[2].Weight; w1 != 5 || w2 != 5 {
		t.Errorf("weights %d, %d; want 5, 5", w1, w2)
	}
	// One instance with weights: [W]: its pairs get W.
	lab = strings.Replace(transparentBase, "b: {kind: forwarder}", "b: {kind: forwarder, weights: [4]}", 1)
	if l, err = spec.Decode([]byte(lab), "t.yaml", kinds.Spec()); err != nil {
		t.Fatal(err)
	}
	m, _ = l.SFCModel()
	if pb := m.PortPairs[1]; pb.Name != "pb" || pb.Weight != 4 {
		t.Errorf("pair %s has weight %d; want pb with 4", pb.Name, pb.Weight)
	}
	if got := spec.InstanceNames("fw", 1); len(got) != 1 || got[0] != "fw" {
		t.Errorf("InstanceNames(fw, 1) = %v", got)
	}
}

// TestTransparentInstancesBadInput: every combination that makes no sense is refused before
// anything is created, at its file:line.
func TestTransparentInstancesBadInput(t *testing.T) {
	const b2 = "b: {kind: forwarder, instances: 2}"
	for _, tc := range []struct {
		name string
		edit [][2]string
		want string
	}{
		{"endpoint instances", [][2]string{{"server: {kind: server}", "server: {kind: server, instances: 2}"}},
			"t.yaml:6:11: endpoint \"server\": instances: a transparent endpoint is the one port flow classifiers name"},
		{"instance name taken", [][2]string{{"b: {kind: forwarder}", b2 + "\n  b-1: {kind: forwarder}"}},
			"t.yaml:9:6: function \"b\": instance b-1 of its 2 instances has the name of function b-1"},
		{"pair across an instanced function and another node", [][2]string{{"b: {kind: forwarder}", b2}, {"pb: {ingress: b.eth0, egress: b.eth0}", "pb: {ingress: b.eth0, egress: a.out}"}},
			"t.yaml:13:25: port pair pb: function b has 2 instances, so the pair stands for each of them (pb-1 .. pb-2) and both its ports must be b's"},
		{"pair with an instanced egress only", [][2]string{{"b: {kind: forwarder}", b2}, {"pa: {ingress: a.in, egress: a.out}", "pa: {ingress: a.in, egress: b.eth0}"}},
			"t.yaml:12:23: port pair pa: function b has 2 instances"},
		{"one instance's port in a pair", [][2]string{{"b: {kind: forwarder}", b2}, {"pb: {ingress: b.eth0, egress: b.eth0}", "pb: {ingress: b-1.eth0, egress: b-1.eth0}"}},
			"t.yaml:13:8: port pair pb: port b-1.eth0 is one instance's port; in the lab file name function b's port as b.eth0"},
		{"unknown port of an instanced function", [][2]string{{"b: {kind: forwarder}", b2}, {"pb: {ingress: b.eth0, egress: b.eth0}", "pb: {ingress: b.eth9, egress: b.eth0}"}},
			"t.yaml:13:8: port pair pb: function b has no port \"eth9\" (its ports: [eth0])"},
		{"weight and weights", [][2]string{{"b: {kind: forwarder}", "b: {kind: forwarder, instances: 2, weights: [1, 2]}"}, {"pb: {ingress: b.eth0, egress: b.eth0}", "pb: {ingress: b.eth0, egress: b.eth0, weight: 3}"}},
			"t.yaml:13:41: port pair pb: weight 3 and function b's weights [1 2] both give its instances' weights; keep one"},
		{"weights count", [][2]string{{"b: {kind: forwarder}", "b: {kind: forwarder, instances: 2, weights: [1]}"}},
			"t.yaml:9:6: function \"b\": 1 weights for 2 instances"},
		{"weight above a pair's", [][2]string{{"b: {kind: forwarder}", "b: {kind: forwarder, instances: 2, weights: [1, 100]}"}},
			"t.yaml:9:6: function \"b\": weight 100: each weight becomes a port pair's, which is 1-64"},
		{"pair weight above 64, on the file's pair", [][2]string{{"b: {kind: forwarder}", b2}, {"pb: {ingress: b.eth0, egress: b.eth0}", "pb: {ingress: b.eth0, egress: b.eth0, weight: 65}"}},
			"t.yaml:13:41: port pair pb-1: weight 65: use 0-64"},
		{"weight and weights, one instance", [][2]string{{"b: {kind: forwarder}", "b: {kind: forwarder, weights: [2]}"}, {"pb: {ingress: b.eth0, egress: b.eth0}", "pb: {ingress: b.eth0, egress: b.eth0, weight: 3}"}},
			"t.yaml:13:41: port pair pb: weight 3 and function b's weights [2] both give its weight; keep one"},
		{"weight above a pair's, one instance", [][2]string{{"b: {kind: forwarder}", "b: {kind: forwarder, weights: [65]}"}},
			"t.yaml:9:6: function \"b\": weight 65: each weight becomes a port pair's, which is 1-64"},
		{"expanded pair name taken", [][2]string{{"b: {kind: forwarder}", b2 + "\n  c: {kind: forwarder}"}, {"pt: {ingress: t.eth0, egress: t.eth0}", "pt: {ingress: t.eth0, egress: t.eth0}\n  pb-2: {ingress: c.eth0, egress: c.eth0}"}},
			"t.yaml:14:7: port pair pb: its pair for instance 2 of function b is named pb-2, which another port pair of the file is called"},
		{"logical source port on an instanced function", [][2]string{{"b: {kind: forwarder}", b2}, {"dns: {protocol: udp, logical_source_port: client.eth0}", "dns: {protocol: udp, logical_source_port: b.eth0}"}},
			"t.yaml:21:24: flow classifier dns: logical_source_port b.eth0 is a port of function b, which has 2 instances: a logical port is one port"},
		{"logical destination port on one instance", [][2]string{{"b: {kind: forwarder}", b2}, {"logical_destination_port: server.eth0", "logical_destination_port: b-2.eth0"}},
			"t.yaml:20:58: flow classifier web: port b-2.eth0 is one instance's port"},
		{"tap instances with one pcap", [][2]string{{"t: {kind: tap}", "t: {kind: tap, instances: 2, params: {pcap: t.pcap}}"}},
			"t.yaml:10:6: function \"t\": 2 tap instances would all write pcap t.pcap"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lab := transparentBase
			for _, e := range tc.edit {
				if !strings.Contains(lab, e[0]) {
					t.Fatalf("case does not apply: %q", e[0])
				}
				lab = strings.Replace(lab, e[0], e[1], 1)
			}
			_, err := spec.Decode([]byte(lab), "t.yaml", kinds.Spec())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v\nwant %q", err, tc.want)
			}
		})
	}
}

// TestPairWeight: a port pair's weight in a lab file is taken as given, 0 included
// (networking-sfc's weight is non-negative: 0 takes no flows), 1 when not given; a negative
// one is refused at its line.
func TestPairWeight(t *testing.T) {
	for _, tc := range []struct {
		name, pair string
		want       int
		wantErr    string
	}{
		{"not given", "pb: {ingress: b.eth0, egress: b.eth0}", 1, ""},
		{"zero", "pb: {ingress: b.eth0, egress: b.eth0, weight: 0}", 0, ""},
		{"three", "pb: {ingress: b.eth0, egress: b.eth0, weight: 3}", 3, ""},
		{"negative", "pb: {ingress: b.eth0, egress: b.eth0, weight: -1}", 0, "weight -1"},
		{"too large", "pb: {ingress: b.eth0, egress: b.eth0, weight: 65}", 0, "weight 65"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lab := strings.Replace(transparentBase, "pb: {ingress: b.eth0, egress: b.eth0}", tc.pair, 1)
			l, err := spec.Decode([]byte(lab), "t.yaml", kinds.Spec())
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "t.yaml:") {
					t.Fatalf("Decode: %v, want a t.yaml:LINE error about %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			m, err := l.SFCModel()
			if err != nil {
				t.Fatal(err)
			}
			for _, pp := range m.PortPairs {
				if pp.Name == "pb" && pp.Weight != tc.want {
					t.Errorf("weight %d, want %d", pp.Weight, tc.want)
				}
			}
		})
	}
}
