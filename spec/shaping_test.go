package spec_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/vnf/kinds"
)

const shapedLab = `name: s
endpoints: {client: {}, server: {}}
functions: {f1: {kind: forwarder}}
chains:
  - from: client
    to: server
    hops: [f1]
    shaping:
      - {segment: 0, rate: 10gbit, burst: 64kb}
      - SECOND
`

func TestShapingGood(t *testing.T) {
	lab, err := spec.Decode([]byte(strings.Replace(shapedLab, "SECOND", "{segment: 1, rate: 1.5mbit, delay: 5ms, jitter: 1ms, loss: 0.1%}", 1)), "s.yaml", kinds.Spec())
	if err != nil {
		t.Fatal(err)
	}
	sh := lab.Chains[0].Shaping
	a, _ := sh[0].Parse()
	b, _ := sh[1].Parse()
	if a.RateBits != 10e9 || a.BurstBytes != 64<<10 || a.NeedsNetem() {
		t.Errorf("segment 0: %+v", a)
	}
	if b.RateBits != 1.5e6 || b.BurstBytes != 16<<10 || b.Delay != 5*time.Millisecond || b.Jitter != time.Millisecond || b.LossPercent != 0.1 || !b.NeedsNetem() {
		t.Errorf("segment 1: %+v", b)
	}
	if got := b.String(); got != "rate 1.5mbit burst 16384b delay 5ms jitter 1ms loss 0.1%" {
		t.Errorf("String() = %q", got)
	}
}

func TestShapingBad(t *testing.T) {
	tests := []struct{ name, entry, want string }{
		{"rate 0", "{segment: 1, rate: 0gbit}", "more than 0"},
		{"bytes per second typo", "{segment: 1, rate: 10gbps}", "bit, kbit, mbit, gbit or tbit"},
		{"no unit", "{segment: 1, rate: 100}", "bit, kbit, mbit, gbit or tbit"},
		{"loss over 100", "{segment: 1, loss: 150%}", "from 0% to 100%"},
		{"loss without %", "{segment: 1, loss: 0.5}", "from 0% to 100%"},
		{"negative delay", "{segment: 1, delay: -5ms}", "from 0 to 1m"},
		{"jitter alone", "{segment: 1, jitter: 1ms}", "needs a delay"},
		{"tiny burst", "{segment: 1, rate: 1gbit, burst: 100b}", "1600b"},
		{"burst alone", "{segment: 1, burst: 64kb}", "needs a rate"},
		{"nothing", "{segment: 1}", "sets nothing"},
		{"no such segment", "{segment: 2, rate: 1gbit}", "segments 0 to 1"},
		{"segment twice", "{segment: 0, rate: 1gbit}", "shaped twice"},
		{"unknown field", "{segment: 1, rate: 1gbit, latency: 5ms}", `unknown field "latency"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := spec.Decode([]byte(strings.Replace(shapedLab, "SECOND", tt.entry, 1)), "bad.yaml", kinds.Spec())
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
			if !strings.Contains(err.Error(), "bad.yaml:11:") && !strings.Contains(err.Error(), "bad.yaml:10:") {
				t.Errorf("err = %v, want the entry's file:line (bad.yaml:11)", err)
			}
		})
	}
}
