package experiment

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSteps pins the trial's steps and their CPU windows: one window per trial, during
// iperf3's transfer when there is one, else over the whole HTTP grid (sfclab's own process
// counted), else over every rtt rate; no window with cpu: false; the warm-up never samples.
func TestSteps(t *testing.T) {
	off := false
	iperf := &Iperf3{Duration: Duration{time.Second}}
	ping := &Ping{Count: 5}
	tcp := &TCPRTT{Connects: 1}
	rtt := &RTT{Rate: Rates{100, 1000}}
	http := &HTTP{Requests: 10, Objects: []string{"1k", "10k"}, Concurrency: []int{1}, AB: true}
	flows := &Flows{Flows: []Flow{{Chain: "c"}}}
	ndr := &NDR{}
	for _, c := range []struct {
		name   string
		probes Probes
		warmup time.Duration
		want   string // name:window[:self] per step, probes count in brackets
	}{
		{"iperf3 takes the window", Probes{Iperf3: iperf, Ping: ping, TCPRTT: tcp, RTT: rtt, HTTP: http},
			0, "iperf3[1]:measured ping[1]:none tcprtt[1]:none rtt[2]:none http[4]:none:sfclab-http-client"},
		{"warm-up samples nothing", Probes{Iperf3: iperf}, 2 * time.Second, "warm-up[1]:none:discard iperf3[1]:measured"},
		{"http before rtt", Probes{RTT: rtt, HTTP: http}, 0, "rtt[2]:none http[4]:whole:sfclab-http-client"},
		{"rtt alone", Probes{Ping: ping, RTT: rtt}, 0, "ping[1]:none rtt[2]:whole"},
		{"cpu off", Probes{Iperf3: iperf, RTT: rtt, CPU: &off}, 0, "iperf3[1]:none rtt[2]:none"},
		{"never during ping, tcprtt, ndr, flows", Probes{Ping: ping, TCPRTT: tcp, NDR: ndr, Flows: flows}, 0,
			"ping[1]:none tcprtt[1]:none ndr[1]:none flows[1]:none"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := &Experiment{Probes: c.probes, Warmup: Duration{c.warmup}}
			steps, err := e.Steps(nil)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, s := range steps {
				g := fmt.Sprintf("%s[%d]:%s", s.Name, len(s.Probes), s.CPU)
				if s.Self != "" {
					g += ":" + s.Self
				}
				if s.Discard {
					g += ":discard"
				}
				got = append(got, g)
			}
			if g := strings.Join(got, " "); g != c.want {
				t.Errorf("steps\n got %s\nwant %s", g, c.want)
			}
		})
	}
}

// TestStepsHTTPFromGuest: the http step counts sfclab's own process as the client's node
// (sfclab-http-client) when the source is a namespace, whose client runs in sfclab; not when
// the source is a VM, whose guest runs the client inside its QEMU, in the node's cgroup.
func TestStepsHTTPFromGuest(t *testing.T) {
	for _, tc := range []struct{ client, self string }{
		{"{kind: client}", HTTPClientNode},
		{"{kind: client, vm: {}}", ""},
	} {
		dir := t.TempDir()
		lab := "name: vmstep\nendpoints:\n  client: " + tc.client + "\n  server: {kind: http-server}\nfunctions:\n  fwd: {kind: forwarder}\nchains:\n  - {name: c, from: client, to: server, hops: [fwd]}\n"
		if err := os.WriteFile(filepath.Join(dir, "lab.yaml"), []byte(lab), 0o644); err != nil {
			t.Fatal(err)
		}
		e, err := Load(write(t, "name: e\nscenarios:\n  - {name: s, lab: '"+filepath.Join(dir, "lab.yaml")+"'}\nprobes:\n  http: {requests: 10, objects: [1k]}\n"))
		if err != nil {
			t.Fatal(err)
		}
		steps, err := e.Steps(e.Scenarios[0])
		if err != nil {
			t.Fatal(err)
		}
		if len(steps) != 1 || steps[0].Name != "http" || steps[0].Self != tc.self {
			t.Errorf("client %s: steps %+v; want the http step with self %q", tc.client, steps, tc.self)
		}
	}
}
