package rtt

import (
	"testing"
	"time"

	"github.com/sfclab/sfclab/probe/rtt/echo"
)

func TestSamples(t *testing.T) {
	ms := int64(time.Millisecond)
	r := &Result{Protocol: echo.ProtoICMP, Size: 64, Requested: 1000, Achieved: 800, Sent: 3, Received: 2, Reordered: 1,
		Wall: time.Second, CPU: 10 * time.Millisecond,
		Packets: []Packet{
			{Seq: 0, Sent: 1 * ms, TXKernel: 1*ms + 10_000, RXKernel: 2*ms - 20_000, Recv: 2 * ms},
			{Seq: 1, Sent: 3 * ms},
			{Seq: 2, Sent: 5 * ms, Recv: 6 * ms}, // no kernel stamps: rtt only
		}}
	if r.RateReached() {
		t.Error("800 of 1000 pps counted as reached")
	}
	got := map[string][]float64{}
	for _, s := range Samples(r) {
		got[s.Metric] = append(got[s.Metric], s.Value)
		if s.Labels["rate"] != "1000" || s.Labels["protocol"] != "icmp" || s.Labels["size"] != "64" {
			t.Errorf("labels %v", s.Labels)
		}
		if s.Metric == "rate_achieved" && s.Labels["rate_reached"] != "false" {
			t.Errorf("rate_achieved labels %v", s.Labels)
		}
	}
	want := map[string][]float64{"rtt": {1, 1}, "path": {0.97}, "stack_tx": {0.01}, "stack_rx": {0.02},
		"sent": {3}, "received": {2}, "reordered": {1}, "timestamped": {1}, "rate_requested": {1000}, "rate_achieved": {800},
		"cpu_self": {0.01}}
	for m, w := range want {
		if len(got[m]) != len(w) {
			t.Errorf("%s: %v, want %v", m, got[m], w)
			continue
		}
		for i := range w {
			if d := got[m][i] - w[i]; d > 1e-9 || d < -1e-9 {
				t.Errorf("%s: %v, want %v", m, got[m], w)
			}
		}
	}
	if l := got["loss"]; len(l) != 1 || l[0] < 33.33 || l[0] > 33.34 {
		t.Errorf("loss %v", l)
	}
	if (&Result{Requested: echo.Max, Achieved: 5}).RateReached() != true {
		t.Error("a flood has no rate to miss")
	}
	if echo.RateLabel(echo.Max) != "max" || echo.RateLabel(1e6) != "1000000" {
		t.Error("RateLabel")
	}
	if echo.Median([]time.Duration{3, 1, 2, 10}) != 2 || echo.Median(nil) != 0 {
		t.Error("Median")
	}
}

// TestTracedEchoes checks the reading of perf script lines for BenchmarkFloorTraced: two
// netif_rx after a send make an echo, a send cut short by the thread's next send is left out,
// other processes are ignored, and the probe's echoes go to the iteration of the ping before.
func TestTracedEchoes(t *testing.T) {
	const in = ` 100/100   10.000000000:  syscalls:sys_enter_sendto: 
 100/100   10.000003000:               net:netif_rx: 
 300/300   10.000003500:               net:netif_rx: 
 100/100   10.000007000:               net:netif_rx: 
 100/100   10.000010000:  syscalls:sys_enter_sendto: 
 100/100   10.000012000:               net:netif_rx: 
 200/201   10.000020000: syscalls:sys_enter_sendmsg: 
 200/201   10.000024000:               net:netif_rx: 
 200/201   10.000029000:               net:netif_rx: 
 101/101   11.000000000:  syscalls:sys_enter_sendto: 
 101/101   11.000002000:               net:netif_rx: 
 101/101   11.000005000:               net:netif_rx: 
 200/201   11.000010000: syscalls:sys_enter_sendmsg: 
 200/201   11.000011000:  syscalls:sys_enter_sendmsg: 
 200/201   11.000013000:               net:netif_rx: 
 200/201   11.000016000:               net:netif_rx: 
`
	probe, ping := tracedEchoes([]byte(in), 200, map[int]int{100: 0, 101: 1}, 2)
	us := func(n float64) time.Duration { return time.Duration(n * 1000) }
	near := func(a, b time.Duration) bool { return a-b < 10 && b-a < 10 } // float seconds
	tests := []struct {
		name string
		got  []tracedEcho
		want []tracedEcho
	}{
		{"ping 0", ping[0], []tracedEcho{{us(3), us(7)}}},
		{"ping 1", ping[1], []tracedEcho{{us(2), us(5)}}},
		{"probe 0", probe[0], []tracedEcho{{us(4), us(9)}}},
		{"probe 1", probe[1], []tracedEcho{{us(2), us(5)}}},
	}
	for _, tt := range tests {
		ok := len(tt.got) == len(tt.want)
		for i := 0; ok && i < len(tt.got); i++ {
			ok = near(tt.got[i].stack, tt.want[i].stack) && near(tt.got[i].total, tt.want[i].total)
		}
		if !ok {
			t.Errorf("%s: got %v, want %v", tt.name, tt.got, tt.want)
		}
	}
}
