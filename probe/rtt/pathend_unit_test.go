package rtt

import (
	"testing"
	"time"

	"github.com/sfclab/sfclab/probe/rtt/echo"
	"github.com/sfclab/sfclab/results"
)

// TestSamplesPathEnd: with tc stamps the path and the stack either side come from them and
// say so (tx_stamp tc, path_end end=tc, the socket stamps' offsets beside); an echo of such a
// run without both tc stamps has no path (never the socket's in its place); without tc stamps
// the socket's path is labelled end=socket.
func TestSamplesPathEnd(t *testing.T) {
	us := func(n int64) int64 { return 1_000_000_000_000 + n*1000 }
	wire := &Result{Protocol: echo.ProtoICMP, Size: 64, Requested: 1000, Sent: 2, Received: 2, PathEnd: echo.PathEndTC, Packets: []Packet{
		// sent 0, tc out 5, socket TX 6, socket RX 30 (macvlan-like: before the interface), tc in 52, read 60
		{Seq: 0, Sent: us(0), WireOut: us(5), TXKernel: us(6), RXKernel: us(30), WireIn: us(52), Recv: us(60), Wire: true},
		{Seq: 1, Sent: us(1000), TXKernel: us(1006), RXKernel: us(1030), Recv: us(1060), Wire: true}, // no tc stamps
	}}
	got := map[string][]results.Sample{}
	for _, s := range Samples(wire) {
		got[s.Metric] = append(got[s.Metric], s)
	}
	near := func(v, want float64) bool { return v > want-1e-9 && v < want+1e-9 }
	if p := got["path"]; len(p) != 1 || !near(p[0].Value, 0.047) || p[0].Labels["tx_stamp"] != "tc" {
		t.Errorf("path samples %+v: want one, 47 µs, tx_stamp tc", p)
	}
	if s := got["stack_tx"]; len(s) != 1 || !near(s[0].Value, 0.005) {
		t.Errorf("stack_tx %+v: want 5 µs (send call to tc egress)", s)
	}
	if s := got["stack_rx"]; len(s) != 1 || !near(s[0].Value, 0.008) {
		t.Errorf("stack_rx %+v: want 8 µs (tc ingress to read)", s)
	}
	if e := got["path_end"]; len(e) != 1 || e[0].Value != 1 || e[0].Labels["end"] != "tc" {
		t.Errorf("path_end %+v", e)
	}
	if o := got["socket_rx_offset"]; len(o) != 1 || !near(o[0].Value, -0.022) {
		t.Errorf("socket_rx_offset %+v: want -22 µs", o)
	}
	if o := got["socket_tx_offset"]; len(o) != 1 || !near(o[0].Value, 0.001) {
		t.Errorf("socket_tx_offset %+v: want 1 µs", o)
	}

	sock := &Result{Protocol: echo.ProtoICMP, Size: 64, Requested: 1000, Sent: 1, Received: 1, PathEnd: echo.PathEndSocket, PathEndNote: "no tcx",
		Packets: []Packet{{Seq: 0, Sent: us(0), TXKernel: us(6), RXKernel: us(30), Recv: us(60)}}}
	got = map[string][]results.Sample{}
	for _, s := range Samples(sock) {
		got[s.Metric] = append(got[s.Metric], s)
	}
	if p := got["path"]; len(p) != 1 || !near(p[0].Value, 0.024) || p[0].Labels["tx_stamp"] != "driver" {
		t.Errorf("socket path %+v", p)
	}
	if e := got["path_end"]; len(e) != 1 || e[0].Labels["end"] != "socket" || e[0].Labels["note"] != "no tcx" || len(got["socket_rx_offset"]) != 0 {
		t.Errorf("path_end %+v, offsets %+v", e, got["socket_rx_offset"])
	}
	if d := (Packet{Sent: 1, Recv: 2}).RTT(); d != time.Duration(1) {
		t.Errorf("RTT %s", d)
	}
}

func TestPathEndValidate(t *testing.T) {
	for _, pe := range []string{"", echo.PathEndTC, echo.PathEndSocket} {
		if err := (Config{PathEnd: pe}).Validate(); err != nil {
			t.Errorf("path_end %q: %v", pe, err)
		}
	}
	if err := (Config{PathEnd: "driver"}).Validate(); err == nil {
		t.Error("path_end driver accepted")
	}
}
