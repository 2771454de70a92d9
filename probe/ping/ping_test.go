package ping

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/vnf/kinds"
)

// parseTests are ping outputs and what Parse must read from them; each is also a seed of
// FuzzParse (TestFuzzSeedsCoverParseTests).
var parseTests = []struct {
	name       string
	out        string
	replies    []Reply
	tx, rx     int
	loss       float64
	summary    bool
	dups, errs int
}{
	{
		name: "all replies",
		out: `PING 198.18.1.2 (198.18.1.2) 56(84) bytes of data.
64 bytes from 198.18.1.2: icmp_seq=1 ttl=63 time=0.439 ms
64 bytes from 198.18.1.2: icmp_seq=2 ttl=63 time=0.094 ms
64 bytes from 198.18.1.2: icmp_seq=3 ttl=63 time=0.104 ms

--- 198.18.1.2 ping statistics ---
3 packets transmitted, 3 received, 0% packet loss, time 69ms
rtt min/avg/max/mdev = 0.094/0.172/0.439/0.133 ms
`,
		replies: []Reply{{1, 0.439, 63}, {2, 0.094, 63}, {3, 0.104, 63}}, tx: 3, rx: 3, summary: true,
	},
	{
		name: "no reply",
		out: `PING 198.18.0.9 (198.18.0.9) 56(84) bytes of data.

--- 198.18.0.9 ping statistics ---
3 packets transmitted, 0 received, 100% packet loss, time 31ms

`,
		tx: 3, loss: 100, summary: true,
	},
	{
		name: "network unreachable: nothing on stdout",
		out:  ``,
	},
	{
		name: "host unreachable with errors",
		out: `PING 198.18.0.9 (198.18.0.9) 56(84) bytes of data.
From 198.18.0.1 icmp_seq=1 Destination Host Unreachable
From 198.18.0.1 icmp_seq=2 Destination Host Unreachable
64 bytes from 198.18.0.9: icmp_seq=3 ttl=64 time=1.25 ms

--- 198.18.0.9 ping statistics ---
4 packets transmitted, 1 received, +2 errors, 75% packet loss, time 3060ms
`,
		replies: []Reply{{3, 1.25, 64}}, tx: 4, rx: 1, loss: 75, summary: true, errs: 2,
	},
	{
		name: "duplicates, sub-resolution time, seconds",
		out: `64 bytes from 10.0.0.2: icmp_seq=1 ttl=64 time<0.001 ms
64 bytes from 10.0.0.2: icmp_seq=1 ttl=64 time=0.020 ms (DUP!)
64 bytes from 10.0.0.2: icmp_seq=2 ttl=64 time=1.5 s
64 bytes from 10.0.0.2: icmp_seq=3 ttl=64 time=7 ms
--- 10.0.0.2 ping statistics ---
3 packets transmitted, 3 received, +1 duplicates, 0% packet loss, time 2003ms
`,
		replies: []Reply{{1, 0.001, 64}, {2, 1500, 64}, {3, 7, 64}}, tx: 3, rx: 3, summary: true, dups: 1,
	},
	{
		name: "killed before the summary",
		out: `PING 198.18.1.2 (198.18.1.2) 56(84) bytes of data.
64 bytes from 198.18.1.2: icmp_seq=1 ttl=63 time=0.5 ms
`,
		replies: []Reply{{1, 0.5, 63}}, tx: 1, rx: 1,
	},
	{
		name: "killed before the summary, -O says what went unanswered",
		out: `PING 198.18.1.2 (198.18.1.2) 56(84) bytes of data.
64 bytes from 198.18.1.2: icmp_seq=1 ttl=63 time=0.5 ms
no answer yet for icmp_seq=2
64 bytes from 198.18.1.2: icmp_seq=3 ttl=63 time=0.6 ms
no answer yet for icmp_seq=4
`,
		replies: []Reply{{1, 0.5, 63}, {3, 0.6, 63}}, tx: 4, rx: 2,
	},
	{
		name: "sequence beyond 16 bits is not believed",
		out:  "no answer yet for icmp_seq=99999999999\n",
	},
}

func TestParse(t *testing.T) {
	for _, tt := range parseTests {
		t.Run(tt.name, func(t *testing.T) {
			r := Parse([]byte(tt.out))
			if len(r.Replies) != len(tt.replies) {
				t.Fatalf("replies %+v, want %+v", r.Replies, tt.replies)
			}
			for i, w := range tt.replies {
				if r.Replies[i] != w {
					t.Errorf("reply %d = %+v, want %+v", i, r.Replies[i], w)
				}
			}
			if r.Transmitted != tt.tx || r.Received != tt.rx || r.Loss != tt.loss || r.Summary != tt.summary ||
				r.Duplicates != tt.dups || r.Errors != tt.errs {
				t.Errorf("got tx %d rx %d loss %v summary %v dups %d errs %d, want %d %d %v %v %d %d",
					r.Transmitted, r.Received, r.Loss, r.Summary, r.Duplicates, r.Errors, tt.tx, tt.rx, tt.loss, tt.summary, tt.dups, tt.errs)
			}
		})
	}
}

// TestParseCaptured reads a real 20-ping run through the fw example.
func TestParseCaptured(t *testing.T) {
	b, err := os.ReadFile("testdata/fw-20x10ms.txt")
	if err != nil {
		t.Fatal(err)
	}
	r := Parse(b)
	if len(r.Replies) != 20 || r.Transmitted != 20 || r.Loss != 0 {
		t.Fatalf("got %d replies, %d transmitted, loss %v", len(r.Replies), r.Transmitted, r.Loss)
	}
	for i, rep := range r.Replies {
		if rep.Seq != i+1 || rep.RTT <= 0 || rep.TTL != 63 {
			t.Errorf("reply %+v", rep)
		}
	}
}

func TestSamples(t *testing.T) {
	// Killed before the summary: 1 reply of 4 sent.
	s := Samples(Result{Replies: []Reply{{Seq: 2, RTT: 0.5}}, Transmitted: 4, Received: 1}, 56)
	if len(s) != 2 || s[0].Metric != "rtt" || s[0].Unit != "ms" || s[0].Labels["seq"] != "2" || s[0].Value != 0.5 {
		t.Fatalf("samples %+v", s)
	}
	if s[1].Metric != "loss" || s[1].Unit != "%" || s[1].Value != 75 {
		t.Errorf("loss %+v", s[1])
	}
	// Nothing at all: loss 100, no rtt.
	s = Samples(Parse(nil), 56)
	if len(s) != 1 || s[0].Metric != "loss" || s[0].Value != 100 {
		t.Errorf("samples %+v", s)
	}
}

func TestArgs(t *testing.T) {
	got := strings.Join(Config{Count: 1000, Interval: time.Millisecond, Size: 56}.Args("10.0.0.2"), " ")
	if want := "ping -n -O -c 1000 -i 0.001 -s 56 -W 1 10.0.0.2"; got != want {
		t.Errorf("args %q, want %q", got, want)
	}
	if d := (Config{Count: 20, Interval: 10 * time.Millisecond}).Timeout(); d != 5200*time.Millisecond {
		t.Errorf("Timeout = %s", d)
	}
}

// codedErr is an exit error of another runtime (the docker runtime's has ExitCode too).
type codedErr struct {
	code int
	msg  string
}

func (e codedErr) Error() string { return e.msg }
func (e codedErr) ExitCode() int { return e.code }

func TestNoPathAnyRuntime(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{codedErr{2, "ping: connect: Network is unreachable"}, true},
		{codedErr{1, "no reply"}, true},
		{codedErr{2, "ping: unknown host"}, false},
		{errors.New("exec: ping: not found"), false},
	}
	for _, tt := range tests {
		if got := noPath(tt.err); got != tt.want {
			t.Errorf("noPath(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

func TestHasICMPPath(t *testing.T) {
	for file, want := range map[string]bool{"fw.yaml": true, "baseline.yaml": true, "fw-lb.yaml": false, "lb-3.yaml": false} {
		lab, err := spec.Load("../../examples/"+file, kinds.Spec())
		if err != nil {
			t.Fatal(err)
		}
		p, err := plan.Build(lab)
		if err != nil {
			t.Fatal(err)
		}
		if got := hasICMPPath(p, p.Chains[0]); got != want {
			t.Errorf("%s: hasICMPPath = %v, want %v", file, got, want)
		}
	}
}
