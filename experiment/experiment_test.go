package experiment

import (
	"os"
	"path/filepath"
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

func TestLoadBad(t *testing.T) {
	tests := []struct{ name, text, want string }{
		{"missing lab", strings.Replace(good, "LABDIR/fw.yaml", "LABDIR/nope.yaml", 1), `scenario "fw"`},
		{"unknown probe", strings.Replace(good, "ping: {count: 10}", "pong: {count: 10}", 1), "field pong not found"},
		{"bad duration", strings.Replace(good, "duration: 2s", "duration: soon", 1), "not a duration"},
		{"short duration", strings.Replace(good, "duration: 2s", "duration: 10ms", 1), "between 1s and 1h"},
		{"no probes", strings.Replace(good, "probes:\n  iperf3: {duration: 2s}\n  ping: {count: 10}\n", "", 1), "no probes"},
		{"duplicate scenario", strings.Replace(good, "name: fw,", "name: base,", 1), "used twice"},
		{"unknown chain", strings.Replace(good, "lab: LABDIR/fw.yaml,", "lab: LABDIR/fw.yaml, chain: nope,", 1), `no chain "nope"`},
		{"bad baseline", strings.Replace(good, "repetitions: 2", "repetitions: 2\nbaseline: x", 1), `baseline "x"`},
		{"ping interval", strings.Replace(good, "count: 10", "count: 10, interval: 1ms", 1), "minimum of 2ms"},
		{"bad runtime", strings.Replace(good, "runtime: docker", "runtime: kvm", 1), "not one of netns, docker"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(write(t, strings.ReplaceAll(tt.text, "LABDIR", labs(t))))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
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
