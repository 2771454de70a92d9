package experiment

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func write(t *testing.T, text string) string {
	t.Helper()
	dir := t.TempDir()
	f := filepath.Join(dir, "exp.yaml")
	if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

const good = `name: e
repetitions: 2
scenarios:
  - {name: base, lab: LABDIR/baseline.yaml}
  - {name: fw, lab: LABDIR/fw.yaml, runtime: docker}
probes:
  iperf3: {duration: 2s}
  ping: {count: 10}
`

func labs(t *testing.T) string {
	abs, err := filepath.Abs("../examples")
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

func TestLoadGood(t *testing.T) {
	e, err := Load(write(t, strings.ReplaceAll(good, "LABDIR", labs(t))))
	if err != nil {
		t.Fatal(err)
	}
	if e.Baseline != "base" || e.Repetitions != 2 || e.Probes.Iperf3.Duration.Duration != 2*time.Second || e.Probes.Iperf3.Streams != 1 {
		t.Errorf("experiment = %+v", e)
	}
	if e.Probes.Ping.Interval.Duration != 10*time.Millisecond || !e.Probes.CPUOn() || e.Probes.TCPRTT != nil {
		t.Errorf("probe defaults = %+v", e.Probes)
	}
	if e.Scenario("fw").Plan.Runtime != "docker" || e.Scenario("base").Plan.Runtime != "netns" {
		t.Error("scenario runtime override not applied")
	}
}

func TestLoadNDR(t *testing.T) {
	text := strings.Replace(good, "ping: {count: 10}", "ndr: {frames: [64, 512, 1518, imix], trial: 1s, precision: 1%, max_trials: 10, max_rate: 1Mpps, loss: 0.1%}", 1)
	e, err := Load(write(t, strings.ReplaceAll(text, "LABDIR", labs(t))))
	if err != nil {
		t.Fatal(err)
	}
	c, err := e.Probes.NDR.Config()
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Frames) != 4 || c.Trial != time.Second || c.Precision != 0.01 || c.MaxTrials != 10 || c.MaxRate != 1e6 || c.PDRLoss != 0.001 {
		t.Errorf("ndr config = %+v", c)
	}
}

// badExperiments are experiment files (LABDIR: the examples) and the message part their
// error must hold; each is also a seed of FuzzDecode (TestFuzzSeedsCoverBadExperiments).
var badExperiments = []struct{ name, text, want string }{
	{"rtt rate word", strings.Replace(good, "ping: {count: 10}", "rtt: {rate: fast}", 1), `rate "fast" is not a number`},
	{"rtt rate too low", strings.Replace(good, "ping: {count: 10}", "rtt: {rate: [1k, 0.5]}", 1), "rate 0.5 must be 1-"},
	{"rtt protocol", strings.Replace(good, "ping: {count: 10}", "rtt: {protocol: tcp}", 1), `protocol "tcp" is not icmp or udp`},
	{"rtt size", strings.Replace(good, "ping: {count: 10}", "rtt: {size: 10}", 1), "size 10 must be 24-"},
	{"rtt attempts", strings.Replace(good, "ping: {count: 10}", "rtt: {attempts: 21}", 1), "attempts 21 must be 0-20"},
	{"rtt path end", strings.Replace(good, "ping: {count: 10}", "rtt: {path_end: nic}", 1), `path_end "nic" is not tc or socket`},
	{"missing lab", strings.Replace(good, "LABDIR/fw.yaml", "LABDIR/nope.yaml", 1), `scenario "fw"`},
	{"unknown probe", strings.Replace(good, "ping: {count: 10}", "pong: {count: 10}", 1), "exp.yaml:8: unknown field pong in probes"},
	{"bad duration", strings.Replace(good, "duration: 2s", "duration: soon", 1), "not a duration"},
	{"short duration", strings.Replace(good, "duration: 2s", "duration: 10ms", 1), "between 1s and 1h"},
	{"no probes", strings.Replace(good, "probes:\n  iperf3: {duration: 2s}\n  ping: {count: 10}\n", "", 1), "no probes"},
	{"duplicate scenario", strings.Replace(good, "name: fw,", "name: base,", 1), "used twice"},
	{"unknown chain", strings.Replace(good, "lab: LABDIR/fw.yaml,", "lab: LABDIR/fw.yaml, chain: nope,", 1), `no chain "nope"`},
	{"bad baseline", strings.Replace(good, "repetitions: 2", "repetitions: 2\nbaseline: x", 1), `baseline "x"`},
	{"ping interval", strings.Replace(good, "count: 10", "count: 10, interval: 1ms", 1), "minimum of 2ms"},
	{"object_requests of an object not run", strings.Replace(good, "ping: {count: 10}", "ping: {count: 10}\n  http: {objects: [1k], object_requests: {1M: 10}}", 1), `object_requests names "1M"`},
	{"bad runtime", strings.Replace(good, "runtime: docker", "runtime: kvm", 1), "not one of netns, docker"},
	{"ndr frame", strings.Replace(good, "ping: {count: 10}", "ndr: {frames: [63]}", 1), "64 to 9018 or imix"},
	{"ndr precision", strings.Replace(good, "ping: {count: 10}", "ndr: {precision: 1}", 1), "followed by %"},
	{"ndr rate unit", strings.Replace(good, "ping: {count: 10}", "ndr: {max_rate: 10gbps}", 1), "pps, kpps or Mpps"},
	{"background host", strings.Replace(good, "ping: {count: 10}", "rtt: {}\nbackground: {count: [0, 8], kind: cpu, host: left}", 1), `background host "left" is not sender or responder`},
	{"background host and node", strings.Replace(good, "ping: {count: 10}", "rtt: {}\nbackground: {count: 8, kind: cpu, host: sender, node: fw}", 1), "write one"},
	{"background neither host nor node", strings.Replace(good, "ping: {count: 10}", "rtt: {}\nbackground: {count: 8, kind: cpu}", 1), "background needs host: sender|responder"},
	{"ndr loss", strings.Replace(good, "ping: {count: 10}", "ndr: {loss: 150%}", 1), "below 100"},
}

func TestLoadBad(t *testing.T) {
	for _, tt := range badExperiments {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(write(t, strings.ReplaceAll(tt.text, "LABDIR", labs(t))))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestLoadRTT(t *testing.T) {
	text := strings.Replace(good, "ping: {count: 10}", "rtt: {protocol: udp, rate: [1, 1k, 2.5M, max], count: 500}", 1)
	e, err := Load(write(t, strings.ReplaceAll(text, "LABDIR", labs(t))))
	if err != nil {
		t.Fatal(err)
	}
	if r := e.Probes.RTT; len(r.Rate) != 4 || r.Rate[0] != 1 || r.Rate[1] != 1000 || r.Rate[2] != 2.5e6 || r.Rate[3] != -1 || r.Count != 500 {
		t.Errorf("rtt = %+v", r)
	}
	text = strings.Replace(good, "ping: {count: 10}", "rtt: {}", 1)
	if e, err = Load(write(t, strings.ReplaceAll(text, "LABDIR", labs(t)))); err != nil || len(e.Probes.RTT.Rate) != 1 || e.Probes.RTT.Rate[0] != 1000 {
		t.Errorf("rtt defaults: %v, %+v", err, e)
	}
}

func TestLoadBackgroundNodes(t *testing.T) {
	text := strings.Replace(good, "ping: {count: 10}", "rtt: {}\nbackground_nodes: {count: [0, 8, 64], kind: [cpu, network], side: [sender, responder]}", 1)
	text = strings.Replace(text, ", runtime: docker", "", 1)
	e, err := Load(write(t, strings.ReplaceAll(text, "LABDIR", labs(t))))
	if err != nil {
		t.Fatal(err)
	}
	// Per scenario: bg-0 once, then 2 counts x 2 kinds x 2 sides.
	if len(e.Scenarios) != 2*9 || e.Baseline != "base.bg-0" {
		t.Fatalf("%d scenarios, baseline %q", len(e.Scenarios), e.Baseline)
	}
	s := e.Scenario("fw.bg-network-responder-64")
	if s == nil || s.Background.Count != 64 || s.Background.Side != "responder" || s.Plan.Node("bg64") == nil || s.Plan.Chain("bgc32") == nil {
		t.Fatalf("scenario %+v", s)
	}
	for _, bad := range []struct{ grid, want string }{
		{"{count: [3], kind: cpu}", "must be even"},
		{"{count: [1000000], kind: cpu}", "this machine holds"},
		{"{count: [8], kind: disk}", `kind "disk"`},
		{"{count: [8], kind: cpu, side: left}", `side "left"`},
		{"{kind: cpu}", "needs count"},
	} {
		text := strings.Replace(good, "ping: {count: 10}", "rtt: {}\nbackground_nodes: "+bad.grid, 1)
		if _, err := Load(write(t, strings.ReplaceAll(text, "LABDIR", labs(t)))); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: %v, want %q", bad.grid, err, bad.want)
		}
	}
}

// bgText is the good experiment with the rtt probe, no docker scenario and the given
// background lines (the first of them on line 9).
func bgText(t *testing.T, lines string) string {
	text := strings.Replace(good, "ping: {count: 10}", "rtt: {}\n"+lines, 1)
	return strings.ReplaceAll(strings.Replace(text, ", runtime: docker", "", 1), "LABDIR", labs(t))
}

// TestLoadBackgroundForms: study D's background nodes as the issue writes them (background:
// with host:) and as background_nodes: with side:, crossing the same cells; study B's
// one-node background load still decodes as before.
func TestLoadBackgroundForms(t *testing.T) {
	for _, tt := range []struct {
		name, lines  string
		key, hostKey string
		scenarios    []string // per base scenario, in grid order
	}{
		{"issue form, lists", "background: {count: [0, 8], kind: [cpu, network], host: [sender, responder]}", "background", "host",
			[]string{"bg-0", "bg-cpu-sender-8", "bg-cpu-responder-8", "bg-network-sender-8", "bg-network-responder-8"}},
		{"issue form, one value each", "background: {count: 8, kind: network, host: responder}", "background", "host",
			[]string{"bg-network-responder-8"}},
		{"issue form, block style", "background:\n  count: [0, 32]\n  kind: cpu\n  host: sender\n  bitrate: 50M", "background", "host",
			[]string{"bg-0", "bg-cpu-sender-32"}},
		{"background with side:", "background: {count: [8], kind: cpu, side: responder}", "background", "side",
			[]string{"bg-cpu-responder-8"}},
		{"background_nodes with side:", "background_nodes: {count: [0, 8], kind: cpu, side: [sender, responder]}", "background_nodes", "side",
			[]string{"bg-0", "bg-cpu-sender-8", "bg-cpu-responder-8"}},
		{"background_nodes with host:", "background_nodes: {count: 8, kind: cpu, host: sender}", "background_nodes", "host",
			[]string{"bg-cpu-sender-8"}},
		{"no host: the sender's", "background_nodes: {count: [8], kind: cpu}", "background_nodes", "side",
			[]string{"bg-cpu-sender-8"}},
		// Study D's network load capped and unthrottled: a factor of the network cells only.
		{"bitrate factor", "background: {count: 8, kind: [cpu, network], host: sender, bitrate: [100M, max]}", "background", "host",
			[]string{"bg-cpu-sender-8", "bg-network-sender-8-at-100M", "bg-network-sender-8-at-max"}},
		// Study D's §5.2: the background nodes' driver as a factor.
		{"driver factor", "background: {count: [0, 8], kind: cpu, host: sender, driver: [same, macvlan, veth]}", "background", "host",
			[]string{"bg-0", "bg-cpu-sender-8-on-same", "bg-cpu-sender-8-on-macvlan"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e, err := Load(write(t, bgText(t, tt.lines)))
			if err != nil {
				t.Fatal(err)
			}
			g := e.BackgroundNodes
			if e.Background != nil || g == nil || g.Key != tt.key || g.HostKey != tt.hostKey || g.Line != 9 || len(g.Host) != 0 {
				t.Fatalf("background %+v, background nodes %+v", e.Background, g)
			}
			var got []string
			for _, s := range e.Scenarios {
				if base, cell, _ := strings.Cut(s.Name, "."); base == "base" {
					got = append(got, cell)
				}
			}
			if strings.Join(got, " ") != strings.Join(tt.scenarios, " ") || len(e.Scenarios) != 2*len(tt.scenarios) {
				t.Errorf("scenarios %v of %d, want %v per base", got, len(e.Scenarios), tt.scenarios)
			}
			for _, s := range e.Scenarios {
				if s.Background.Count > 0 && !strings.Contains(s.Name, "-"+s.Background.Side+"-") {
					t.Errorf("scenario %s has host %q", s.Name, s.Background.Side)
				}
			}
		})
	}
	e, err := Load(write(t, bgText(t, "background: {count: 8, kind: network, host: sender, bitrate: max, driver: macvlan}")))
	if err != nil {
		t.Fatal(err)
	}
	if s := e.Scenario("base.bg-network-sender-8"); s == nil || s.Background.Bitrate != "max" || s.Background.Driver != "macvlan" ||
		s.Plan.Node("bg1").Driver == nil || s.Plan.Node("bg1").Driver.Type != "macvlan" {
		t.Errorf("unthrottled macvlan cell: %+v", s)
	}
	e, err = Load(write(t, bgText(t, "background: {kind: cpu, count: 12, node: client, placement: host}")))
	if err != nil {
		t.Fatal(err)
	}
	if b := e.Background; b == nil || e.BackgroundNodes != nil || b.Node != "client" || b.Count != 12 || b.Placement != "host" || b.Line != 9 || len(e.Scenarios) != 2 {
		t.Errorf("one-node background %+v, nodes %+v", e.Background, e.BackgroundNodes)
	}
}

// TestLoadBackgroundBad: every refusal names the file and line and says what to write.
func TestLoadBackgroundBad(t *testing.T) {
	for _, tt := range []struct{ lines, want string }{
		{"background: {count: [8], kind: cpu, host: left}", `exp.yaml:9: background host "left" is not sender or responder`},
		{"background: {count: [8], kind: cpu, host: left}", "write host: sender, host: responder or host: [sender, responder]"},
		{"background_nodes: {count: [8], kind: cpu, side: left}", `exp.yaml:9: background_nodes side "left" is not sender or responder`},
		{"background_nodes: {count: [8], kind: cpu, side: left}", "write side: sender"},
		{"background: {count: [3], kind: cpu, host: sender}", "exp.yaml:9: background count 3 must be even"},
		{"background: {count: [1000000], kind: cpu, host: sender}", "this machine holds"},
		{"background: {count: [8], kind: disk, host: sender}", `exp.yaml:9: background kind "disk" is not cpu or network; write kind: cpu`},
		{"background: {kind: cpu, host: sender}", "exp.yaml:9: background needs count: and kind:, e.g. background: {count: [0, 8, 32, 64]"},
		{"background: {count: [8], kind: cpu, host: sender, side: sender}", "exp.yaml:9: background has both host: and side:"},
		{"background: {count: 8, kind: cpu, host: sender, node: client}", "exp.yaml:9: background has host: or side:"},
		{"background: {count: 8, kind: cpu, host: sender, node: client}", "write one: {count: [0, 8], kind: cpu, host: sender} or {kind: cpu, count: 12, node: NODE}"},
		{"background: {count: 8, kind: cpu}", "exp.yaml:9: background needs host: sender|responder"},
		{"background: {count: [8], kind: cpu, host: sender, nodes: 3}", "exp.yaml:9: unknown field nodes in background nodes"},
		{"background: {count: eight, kind: cpu, host: sender}", `exp.yaml:9: "eight" is not a whole number`},
		{"background: [cpu]", "exp.yaml:9: background: expected a mapping"},
		{"background: {count: 8, kind: cpu, host: sender}\nbackground_nodes: {count: 8, kind: cpu}", "exp.yaml:9: background: with host: and background_nodes: both"},
		{"background: {kind: cpu, count: 12, node: client, placement: side}", `exp.yaml:9: background placement "side" is not node or host; write placement: node`},
		{"background: {kind: cpu, count: 0, node: client}", "exp.yaml:9: background count must be 1-256, got 0; write e.g. count: 12"},
		{"background: {count: 8, kind: network, host: sender, bitrate: fast}", `exp.yaml:9: background bitrate "fast" is not a rate like 100M, 1G or 500K, or max (unthrottled)`},
		{"background: {count: 8, kind: network, host: sender, driver: sriov}", `exp.yaml:9: background driver "sriov" is not one of same, veth, macvlan, ebpf-redirect`},
	} {
		_, err := Load(write(t, bgText(t, tt.lines)))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s:\n got %v\nwant %q", tt.lines, err, tt.want)
		}
	}
}

func TestShippedExperimentsLoad(t *testing.T) {
	files, _ := filepath.Glob("../experiments/*.yaml")
	if len(files) == 0 {
		t.Fatal("no experiments shipped")
	}
	for _, f := range files {
		if _, err := Load(f); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestRequestsFor(t *testing.T) {
	h := &HTTP{Requests: 10000, ObjectRequests: map[string]int{"1M": 1000}}
	if h.RequestsFor("1k") != 10000 || h.RequestsFor("1M") != 1000 {
		t.Errorf("RequestsFor = %d, %d; want 10000, 1000", h.RequestsFor("1k"), h.RequestsFor("1M"))
	}
}

// TestLoadVMEndpoint: every built-in probe loads from and to VM endpoints (rtt and ndr from a
// VM source too: the guest's agent sends), and VM functions between namespace endpoints;
// refused, naming the scenario, the endpoint and what to write instead: rtt's method xdp at
// either VM end, its path_end tc from a VM source, and http's ab: true from a busybox VM
// source (vm: {image: debian} gives its guest ab, which the test checks).
func TestLoadVMEndpoint(t *testing.T) {
	const flows = "flows: {flows: [{chain: c, protocol: tcp, duration: 2s}]}"
	for _, tt := range []struct{ name, client, server, fw, probes, want string }{
		{"vm client, ping and iperf3", "{kind: client, vm: {}}", "{kind: server}", "{kind: forwarder}", "ping: {count: 10}\n  iperf3: {duration: 2s}", ""},
		{"vm client, tcprtt", "{kind: client, vm: {}}", "{kind: server}", "{kind: forwarder}", "ping: {count: 10}\n  iperf3: {duration: 2s}\n  tcprtt: {connects: 5}", ""},
		// rtt's echoes and ndr's sender run in the guest's agent; what needs the host in the
		// source's stack (rtt's XDP generator, its tc path ends) is refused.
		{"vm client, rtt and ndr", "{kind: client, vm: {}}", "{kind: server}", "{kind: forwarder}", "rtt: {}\n  ndr: {}\n  tcprtt: {connects: 5}", ""},
		{"vm client, rtt udp path_end socket", "{kind: client, vm: {}}", "{kind: server}", "{kind: forwarder}", "rtt: {protocol: udp, path_end: socket, rate: [100, 200000]}", ""},
		{"vm client, rtt method socket", "{kind: client, vm: {}}", "{kind: server}", "{kind: forwarder}", "rtt: {method: socket}", ""},
		{"vm client, rtt method xdp", "{kind: client, vm: {}}", "{kind: server}", "{kind: forwarder}", "rtt: {method: xdp}", `scenario "s": source client is a VM, and rtt's method xdp sends from pktgen's XDP generator in the source's network stack, which is the guest's kernel's; write method: socket`},
		{"vm client, rtt path_end tc", "{kind: client, vm: {}}", "{kind: server}", "{kind: forwarder}", "rtt: {path_end: tc}", `scenario "s": source client is a VM, and rtt's path_end tc needs tc programs at the sender's interface, which is in the guest's kernel; write path_end: socket`},
		{"vm client (debian), ndr", "{kind: client, vm: {image: debian}}", "{kind: server}", "{kind: forwarder}", "ndr: {frames: [64, imix]}", ""},
		{"vm server, iperf3", "{kind: client}", "{kind: server, vm: {}}", "{kind: forwarder}", "ping: {count: 10}\n  iperf3: {duration: 2s}", ""},
		{"vm server, tcprtt", "{kind: client}", "{kind: server, vm: {}}", "{kind: forwarder}", "iperf3: {duration: 2s}\n  tcprtt: {connects: 5}", ""},
		// rtt's echoes are answered by the guest's kernel or agent, ndr's receiver counts in its
		// agent; rtt's XDP reflector cannot be attached in a guest.
		{"vm server, ndr and rtt", "{kind: client}", "{kind: server, vm: {}}", "{kind: forwarder}", "ndr: {}\n  rtt: {protocol: udp}\n  tcprtt: {connects: 5}", ""},
		{"vm server, rtt at a high rate", "{kind: client}", "{kind: server, vm: {}}", "{kind: forwarder}", "rtt: {rate: [200000]}", ""},
		{"vm server, rtt method xdp", "{kind: client}", "{kind: server, vm: {}}", "{kind: forwarder}", "rtt: {method: xdp}", `scenario "s": destination server is a VM, and rtt's method xdp needs its XDP reflector in the destination's network stack, which is the guest's kernel's; write method: socket`},
		{"vm server, rtt method socket", "{kind: client}", "{kind: server, vm: {}}", "{kind: forwarder}", "rtt: {method: socket}", ""},
		{"namespace server, rtt method xdp", "{kind: client}", "{kind: server}", "{kind: forwarder, vm: {}}", "rtt: {method: xdp}", ""},
		{"vm server, ping", "{kind: client}", "{kind: server, vm: {}}", "{kind: forwarder}", "ping: {count: 10}", ""},
		{"vm server, flows", "{kind: client}", "{kind: server, vm: {}}", "{kind: forwarder, vm: {}}", flows, ""},
		{"vm server, flows and ndr", "{kind: client}", "{kind: server, vm: {}}", "{kind: forwarder}", flows + "\n  ndr: {}", ""},
		{"vm ends, rtt", "{kind: client, vm: {}}", "{kind: server, vm: {}}", "{kind: forwarder}", "rtt: {protocol: udp}\n  ndr: {}", ""},
		{"vm client, flows", "{kind: client, vm: {}}", "{kind: server}", "{kind: forwarder}", flows, ""},
		{"vm client, flows and http", "{kind: client, vm: {}}", "{kind: http-server}", "{kind: forwarder}", flows + "\n  http: {requests: 10, objects: [1k]}", ""},
		{"vm client, http with ab", "{kind: client, vm: {}}", "{kind: http-server}", "{kind: forwarder}", "http: {requests: 10, objects: [1k], ab: true}", `scenario "s": source client is a VM with the busybox guest image, which has no ab (Apache Bench) for http's ab: true; write vm: {image: debian} on client`},
		{"vm client (busybox named), http with ab", "{kind: client, vm: {image: busybox}}", "{kind: http-server}", "{kind: forwarder}", "http: {requests: 10, objects: [1k], ab: true}", `write vm: {image: debian} on client`},
		{"vm client (debian), http with ab", "{kind: client, vm: {image: debian}}", "{kind: http-server}", "{kind: forwarder}", "http: {requests: 10, objects: [1k], ab: true}", ""},
		{"vm server (busybox), http with ab", "{kind: client}", "{kind: http-server, vm: {}}", "{kind: forwarder}", "http: {requests: 10, objects: [1k], ab: true}", ""},
		{"vm ends, iperf3", "{kind: client, vm: {}}", "{kind: server, vm: {}}", "{kind: forwarder}", "iperf3: {duration: 2s}", ""},
		{"vm function", "{kind: client}", "{kind: server}", "{kind: forwarder, vm: {}}", "ping: {count: 10}\n  iperf3: {duration: 2s}", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			lab := "name: vmend\nendpoints:\n  client: " + tt.client + "\n  server: " + tt.server + "\nfunctions:\n  fwd: " + tt.fw + "\nchains:\n  - {name: c, from: client, to: server, hops: [fwd], classifier: {protocol: tcp, destination_port: 5201}}\n"
			if err := os.WriteFile(filepath.Join(dir, "lab.yaml"), []byte(lab), 0o644); err != nil {
				t.Fatal(err)
			}
			e, err := Load(write(t, "name: e\nscenarios:\n  - {name: s, lab: '"+filepath.Join(dir, "lab.yaml")+"'}\nprobes:\n  "+tt.probes+"\n"))
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
			if err != nil {
				return
			}
			// ab from a Debian guest source: the source's guest is given ab (its root gets
			// apache2-utils); no other guest is.
			for _, n := range e.Scenarios[0].Plan.Nodes {
				want := []string(nil)
				if n.Name == "client" && strings.Contains(tt.probes, "ab: true") && n.VM != nil {
					want = []string{"ab"}
				}
				if n.VM != nil && !slices.Equal(n.VM.Programs, want) {
					t.Errorf("node %s: guest programs %v, want %v", n.Name, n.VM.Programs, want)
				}
			}
		})
	}
}
