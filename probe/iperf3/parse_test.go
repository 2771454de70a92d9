package iperf3

import (
	"errors"
	"math"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

func read(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-6*math.Max(1, math.Abs(b)) }

// The testdata files are real iperf3 3.12 -J outputs captured on labs of the examples.
func TestParse(t *testing.T) {
	tests := []struct {
		file string
		want Result
	}{
		{"tcp-fw.json", Result{}}, // checked loosely below
		{"tcp-fwlb-P2-cubic.json", Result{Protocol: "tcp", Streams: 2, SentBPS: 4532340919.268088, ReceivedBPS: 4556987186.969173,
			SentBytes: 568066048, ReceivedBytes: 568066048,
			Retransmits: 0, HostCPU: 33.37060378125635, RemoteCPU: 19.05687691424196, SenderCC: "cubic", ReceiverCC: "cubic"}},
		{"tcp-fwlb-reverse.json", Result{Protocol: "tcp", Streams: 1, Reverse: true, SentBPS: 2845759889.9318237, ReceivedBPS: 2695899125.9916363,
			SentBytes: 357826560, ReceivedBytes: 337408288,
			Retransmits: 160, HostCPU: 12.20497067081816, RemoteCPU: 29.095584658002128, SenderCC: "bbr", ReceiverCC: "bbr"}},
		{"udp-fw-200M.json", Result{Protocol: "udp", Streams: 1, SentBPS: 198869877.32703748, ReceivedBPS: 197114421.51264793,
			SentBytes: 24933112, ReceivedBytes: 24717360,
			HostCPU: 34.42303338405154, RemoteCPU: 15.041836312623651, JitterMS: 0.2660874308819118, LostPercent: 0.865323189499971,
			LostPackets: 149, Packets: 17219}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got, err := Parse(read(t, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if tt.want.Protocol == "" {
				if got.Protocol != "tcp" || got.Streams != 1 || got.SentBPS <= 0 || got.ReceivedBPS <= 0 || got.ReceivedBytes <= 0 || got.SenderCC == "" {
					t.Errorf("got %+v", got)
				}
				return
			}
			w := tt.want
			if got.Protocol != w.Protocol || got.Streams != w.Streams || got.Reverse != w.Reverse || got.Retransmits != w.Retransmits ||
				got.SenderCC != w.SenderCC || got.ReceiverCC != w.ReceiverCC || got.LostPackets != w.LostPackets || got.Packets != w.Packets ||
				got.SentBytes != w.SentBytes || got.ReceivedBytes != w.ReceivedBytes {
				t.Errorf("got %+v\nwant %+v", got, w)
			}
			for _, f := range [][3]any{{"sent", got.SentBPS, w.SentBPS}, {"received", got.ReceivedBPS, w.ReceivedBPS},
				{"host cpu", got.HostCPU, w.HostCPU}, {"remote cpu", got.RemoteCPU, w.RemoteCPU},
				{"jitter", got.JitterMS, w.JitterMS}, {"loss", got.LostPercent, w.LostPercent}} {
				if !near(f[1].(float64), f[2].(float64)) {
					t.Errorf("%s = %v, want %v", f[0], f[1], f[2])
				}
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	for file, want := range map[string]string{
		"error-udp-haproxy.json":       "unable to connect stream: Network is unreachable",
		"error-split-interrupted.json": "interrupt - the client has terminated",
	} {
		_, err := Parse(read(t, file))
		var ie *Error
		if !errors.As(err, &ie) || ie.Msg != want {
			t.Errorf("%s: error %v, want iperf3's %q", file, err, want)
		}
	}
	for _, out := range []string{"", "iperf3: error - unable to connect", `{"start":{},"end":{}}`} {
		if _, err := Parse([]byte(out)); err == nil {
			t.Errorf("Parse(%q) succeeded", out)
		}
	}
}

func TestSamples(t *testing.T) {
	r, err := Parse(read(t, "udp-fw-200M.json"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	var metrics []string
	for _, s := range Samples(r, now) {
		metrics = append(metrics, s.Metric+"/"+s.Labels["side"]+s.Labels["end"])
		if s.Probe != "iperf3" || s.Labels["protocol"] != "udp" || s.Labels["streams"] != "1" || !s.Time.Equal(now) {
			t.Errorf("sample %+v", s)
		}
		if _, ok := s.Labels["cc"]; ok {
			t.Errorf("udp sample with a cc label: %+v", s)
		}
	}
	want := []string{"throughput/sender", "throughput/receiver", "jitter/receiver", "loss/receiver", "process_cpu/client", "process_cpu/server"}
	if !slices.Equal(metrics, want) {
		t.Errorf("metrics %v, want %v", metrics, want)
	}

	r, err = Parse(read(t, "tcp-fwlb-reverse.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range Samples(r, now) {
		if s.Labels["cc"] != "bbr" || s.Labels["direction"] != "reverse" {
			t.Errorf("sample %+v", s)
		}
		if s.Metric == "retransmits" && (s.Value != 160 || s.Unit != "count") {
			t.Errorf("retransmits %+v", s)
		}
		if s.Metric == "throughput" && s.Labels["side"] == "receiver" && !near(s.Value, 2695899125.9916363) {
			t.Errorf("receiver throughput %+v", s)
		}
	}
}

func TestClientArgs(t *testing.T) {
	got := strings.Join(Config{Duration: 1500 * time.Millisecond, Protocol: "udp", Streams: 4, Reverse: true, Bitrate: "1G",
		Congestion: "cubic", Omit: 2}.ClientArgs("198.18.1.2", 80), " ")
	want := "iperf3 -c 198.18.1.2 -p 80 -t 2 -J -P 4 -u -b 1G -R -O 2"
	if got != want {
		t.Errorf("udp args %q, want %q", got, want)
	}
	got = strings.Join(Config{Congestion: "cubic"}.ClientArgs("10.0.0.1", 5201), " ")
	want = "iperf3 -c 10.0.0.1 -p 5201 -t 10 -J -C cubic"
	if got != want {
		t.Errorf("tcp args %q, want %q", got, want)
	}
	if d := (Config{Duration: time.Second, Omit: 1}).Timeout(); d != 17*time.Second {
		t.Errorf("Timeout = %s, want 17s", d)
	}
	if err := (Config{Protocol: "sctp"}).withDefaults().validate(); err == nil {
		t.Error("protocol sctp accepted")
	}
}

func TestSockets(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := uint16(l.Addr().(*net.TCPAddr).Port)
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	listen, est, err := sockets(os.Getpid(), port)
	if err != nil || listen != 1 || est != 1 {
		t.Errorf("sockets on port %d: %d listening, %d established, %v; want 1, 1", port, listen, est, err)
	}
	if _, _, err := sockets(1<<30, 1); err == nil {
		t.Error("sockets of a nonexistent process succeeded")
	}
	if alive(os.Getpid()) {
		t.Error("the test process is taken for an iperf3")
	}
}

// TestTransfer checks the transfer window of real -J outputs: it ends at the client's exit,
// lasts the measured (not omitted) intervals, and never starts before the client did or
// before the control connection's second (start.timestamp.timesecs).
func TestTransfer(t *testing.T) {
	sec := func(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }
	tests := []struct {
		file              string
		measured, omitted float64 // seconds, from the file's intervals
		// started and exited are the client's run, in seconds after timesecs.
		started, exited float64
		// from is the window's start in seconds after timesecs; it ends at exited.
		from float64
	}{
		// 1 s test: the client started 0.3 s before the second iperf3 dates its connect.
		{"tcp-fw.json", 1.001848, 0, -0.3, 1.2, 1.2 - 1.001848},
		// The same output as if the client had run for 0.9 s only: the window is clamped
		// to the client's start.
		{"tcp-fw.json", 1.001848, 0, 0.2, 1.1, 0.2},
		// ... and as if the client had started 1 s before timesecs and exited 0.5 s after
		// it: the transfer cannot have started before the control connection's second.
		{"tcp-fw.json", 1.001848, 0, -1, 0.5, 0},
		{"tcp-fwlb-reverse.json", 1.001249, 0, -0.1, 1.05, 1.05 - 1.001249},
		{"udp-fw-200M.json", 1.002992, 0, -0.1, 1.05, 1.05 - 1.002992},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			r, err := Parse(read(t, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if !near(r.Measured, tt.measured) || !near(r.Omitted, tt.omitted) || r.Timesecs <= 0 {
				t.Fatalf("measured %v omitted %v timesecs %d, want %v, %v, > 0", r.Measured, r.Omitted, r.Timesecs, tt.measured, tt.omitted)
			}
			ts := time.Unix(r.Timesecs, 0)
			w, ok := r.Transfer(ts.Add(sec(tt.started)), ts.Add(sec(tt.exited)))
			if !ok {
				t.Fatal("no transfer window")
			}
			if d := w.From.Sub(ts.Add(sec(tt.from))); d < -time.Microsecond || d > time.Microsecond {
				t.Errorf("window starts %v after timesecs, want %v", w.From.Sub(ts), sec(tt.from))
			}
			if !w.To.Equal(ts.Add(sec(tt.exited))) {
				t.Errorf("window ends %v after timesecs, want at the client's exit %v", w.To.Sub(ts), sec(tt.exited))
			}
		})
	}
	if _, ok := (Result{}).Transfer(time.Now(), time.Now().Add(time.Second)); ok {
		t.Error("a result without intervals gave a transfer window")
	}
}

// TestTransferMatchesStrace checks the end anchor against what strace saw of the same runs
// (iperf3 3.12 in a baseline lab, `strace -f -ttt -e trace=connect,exit_group`): the
// measured transfer starts when the data connection is up (plus the omitted second with
// -O 1), and the window computed from the client's exit and the report starts within 10 ms of
// that. With -O 1, iperf3 3.12 restarts the interval offsets after the omitted interval.
func TestTransferMatchesStrace(t *testing.T) {
	unix := func(f float64) time.Time { return time.Unix(0, int64(f*1e9)) }
	tests := []struct {
		file                         string
		started, dataConnect, exited float64 // Unix seconds
		measured, omitted            float64
	}{
		{"tcp-t2.json", 1795448509.756337969, 1795448509.818274, 1795448511.824111, 2.000506, 0},
		{"tcp-t2-O1.json", 1795448506.354984398, 1795448506.398044, 1795448509.402908, 1.999438, 1.000659},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			r, err := Parse(read(t, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(r.Measured-tt.measured) > 1e-6 || math.Abs(r.Omitted-tt.omitted) > 1e-6 {
				t.Fatalf("measured %v omitted %v, want %v %v", r.Measured, r.Omitted, tt.measured, tt.omitted)
			}
			w, ok := r.Transfer(unix(tt.started), unix(tt.exited))
			if !ok {
				t.Fatal("no transfer window")
			}
			want := unix(tt.dataConnect).Add(time.Duration(tt.omitted * float64(time.Second)))
			if d := w.From.Sub(want); d < 0 || d > 10*time.Millisecond {
				t.Errorf("window starts %v after the measured transfer did (data connection up + omitted), want within [0, 10ms]", d)
			}
			if got := time.Unix(r.Timesecs, 0); got.After(unix(tt.dataConnect)) || unix(tt.dataConnect).Sub(got) > time.Second {
				t.Errorf("timesecs %v is not the whole second before the connects (%v)", got, unix(tt.dataConnect))
			}
		})
	}
}
