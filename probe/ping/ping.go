// Package ping is the ICMP latency probe: iputils ping from the chain's source to the chain
// destination's own address (never a proxy's service address, so a chain through an L4 proxy
// honestly has no ICMP path and reports 100 % loss).
package ping

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/probe"
	"github.com/sfclab/sfclab/results"
	"github.com/sfclab/sfclab/results/metric"
)

// Name is the probe's name in samples.
const Name = "ping"

// ExtraTime is added to Count*Interval to bound one run.
const ExtraTime = 5 * time.Second

// Config is one ping run.
type Config struct {
	// Count is the number of echo requests (-c); 0 means 10.
	Count int
	// Interval between requests (-i); 0 means 1 s. As root, intervals down to 2 ms work.
	Interval time.Duration
	// Size is the ICMP payload in bytes (-s); 0 means 56 (a 64-byte ICMP message).
	Size int
}

func (c Config) withDefaults() Config {
	if c.Count <= 0 {
		c.Count = 10
	}
	if c.Interval <= 0 {
		c.Interval = time.Second
	}
	if c.Size <= 0 {
		c.Size = 56
	}
	return c
}

// Timeout is how long a run may take at most: Count*Interval + ExtraTime.
func (c Config) Timeout() time.Duration {
	c = c.withDefaults()
	return time.Duration(c.Count)*c.Interval + ExtraTime
}

// Args returns the ping command line against dest.
//
// Equivalent to: ping -n -O -c COUNT -i INTERVAL -s SIZE -W 1 DEST. -O makes ping say "no
// answer yet for icmp_seq=N" for each request without a reply before it sends the next, so
// a run killed before its summary still tells how many requests it sent.
func (c Config) Args(dest string) []string {
	c = c.withDefaults()
	return []string{"ping", "-n", "-O", "-c", strconv.Itoa(c.Count),
		"-i", strconv.FormatFloat(c.Interval.Seconds(), 'f', -1, 64),
		"-s", strconv.Itoa(c.Size), "-W", "1", dest}
}

type prober struct{ cfg Config }

// New returns the ping probe.
func New(cfg Config) probe.Probe { return &prober{cfg: cfg} }

// Name returns "ping".
func (*prober) Name() string { return Name }

// Run pings probe.DestinationAddr from the chain's source and emits one "rtt" sample (ms,
// label seq) per reply and one "loss" sample (%). When nothing comes back — no ICMP path
// through a proxy, "Network is unreachable" — it emits loss 100 and returns nil: that is data.
// Only failures to run ping at all (no such node, no ping, bad arguments) are errors.
func (p *prober) Run(ctx context.Context, env probe.Env, emit func(results.Sample)) error {
	cfg := p.cfg.withDefaults()
	c := env.Chain
	dest := probe.DestinationAddr(env.Plan, c)
	if !dest.IsValid() || len(c.Path) == 0 {
		return fmt.Errorf("run ping on chain %s: destination %q has no address", c.Name, c.To)
	}
	what := fmt.Sprintf("run ping from %s to %s", c.Path[0], dest)
	src, err := env.Node(c.Path[0])
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	rctx, cancel := context.WithTimeout(ctx, cfg.Timeout())
	defer cancel()
	out, rerr := src.Output(rctx, nil, cfg.Args(dest.String())...)
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", what, ctx.Err())
	}
	res := Parse(out)
	if rerr != nil && !res.Summary && !noPath(rerr) && rctx.Err() == nil {
		return fmt.Errorf("%s: %w", what, rerr)
	}
	// Without a summary (killed, or failed early) Parse counted the requests ping said it
	// sent (MaxSeq), never the Count asked for.
	noICMP := !hasICMPPath(env.Plan, c)
	if len(res.Replies) == 0 && !noICMP {
		return fmt.Errorf("%s: %w: %d requests sent, none answered, though no proxy on the chain stops ICMP", what, ErrNoReply, res.Transmitted)
	}
	for _, s := range Samples(res, cfg.Size) {
		if noICMP && s.Metric == "loss" {
			s.Labels["icmp_path"] = "none"
		}
		emit(s)
	}
	return nil
}

// ErrNoReply is the error of a ping run without a single reply on a chain that has an ICMP
// path: a failed trial, not a figure.
var ErrNoReply = errors.New("no echo reply")

// hasICMPPath reports whether echo requests can reach the chain's destination: not when a
// proxy (an L4 load balancer or an HTTP proxy) on the path terminates the connections.
func hasICMPPath(p *plan.Plan, c *plan.Chain) bool {
	if p == nil {
		return true
	}
	for _, name := range c.Path {
		if p.Node(name).IsProxy() {
			return false
		}
	}
	return true
}

// noPath reports whether ping ran and failed for lack of a path (exit status 1: no reply;
// 2 with an unreachable network or host), as opposed to not running properly.
//
// Any runtime's exit error counts: *exec.ExitError from a namespace, the docker runtime's own
// error type from a container; both have ExitCode.
func noPath(err error) bool {
	var ee interface{ ExitCode() int }
	if !errors.As(err, &ee) {
		return false
	}
	switch ee.ExitCode() {
	case 1:
		return true
	case 2:
		msg := err.Error()
		return strings.Contains(msg, "unreachable") || strings.Contains(msg, "No route to host")
	}
	return false
}

// Reply is one echo reply.
type Reply struct {
	Seq int
	// RTT in milliseconds. "time<X ms" (below ping's resolution) is taken as X.
	RTT float64
	TTL int
}

// Result is what one ping run printed.
type Result struct {
	// Replies in arrival order, duplicates left out.
	Replies []Reply
	// Transmitted, Received and Loss (percent) are from the summary; without one,
	// Transmitted is 0 and Received counts the replies.
	Transmitted, Received int
	Loss                  float64
	// Duplicates counts "(DUP!)" replies; Errors counts ICMP errors (e.g. "Destination Host
	// Unreachable") ping reported.
	Duplicates, Errors int
	// Summary is true when ping printed its statistics line.
	Summary bool
	// MaxSeq is the highest icmp_seq ping printed (a reply, an ICMP error or, with -O, "no
	// answer yet"): at least that many requests were sent, which is what a run killed
	// before its summary counts as transmitted.
	MaxSeq int
}

var (
	replyRE   = regexp.MustCompile(`icmp_seq=(\d+)(?: ttl=(\d+))?.* time([=<])([0-9.]+) ?(ms|s|us|µs)?`)
	summaryRE = regexp.MustCompile(`(\d+) packets transmitted, (\d+) (?:packets )?received(?:, \+(\d+) duplicates)?(?:, \+(\d+) errors)?, ([0-9.]+)% packet loss`)
	errorRE   = regexp.MustCompile(`^From \S+ icmp_seq=\d+ `)
	seqRE     = regexp.MustCompile(`icmp_seq=(\d+)`)
)

// maxSeq bounds what Parse believes of an icmp_seq: ping's sequence is 16 bits wide.
const maxSeq = 65535

// Parse reads iputils ping output (-n). It never fails: what it cannot read it leaves out.
func Parse(out []byte) Result {
	var r Result
	seen := map[int]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(line)
		if m := seqRE.FindStringSubmatch(line); m != nil {
			if seq, err := strconv.Atoi(m[1]); err == nil && seq > r.MaxSeq && seq <= maxSeq {
				r.MaxSeq = seq
			}
		}
		if m := summaryRE.FindStringSubmatch(line); m != nil {
			r.Summary = true
			r.Transmitted, _ = strconv.Atoi(m[1])
			r.Received, _ = strconv.Atoi(m[2])
			r.Loss, _ = strconv.ParseFloat(m[5], 64)
			continue
		}
		if errorRE.MatchString(line) {
			r.Errors++
			continue
		}
		m := replyRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		seq, _ := strconv.Atoi(m[1])
		if strings.Contains(line, "(DUP!)") || seen[seq] {
			r.Duplicates++
			continue
		}
		seen[seq] = true
		rtt, err := strconv.ParseFloat(m[4], 64)
		if err != nil {
			continue
		}
		switch m[5] {
		case "s":
			rtt *= 1000
		case "us", "µs":
			rtt /= 1000
		}
		ttl, _ := strconv.Atoi(m[2])
		r.Replies = append(r.Replies, Reply{Seq: seq, RTT: rtt, TTL: ttl})
	}
	if !r.Summary {
		r.Received = len(r.Replies)
		r.Transmitted = r.MaxSeq
	}
	return r
}

// Samples turns a result into samples: "rtt" (ms, label seq) per reply and one "loss" (%).
// Without a summary the loss is computed from Transmitted; with nothing transmitted and no
// reply it is 100. Every sample carries the payload size as label size.
func Samples(r Result, size int) []results.Sample {
	sz := strconv.Itoa(size)
	var out []results.Sample
	for _, rep := range r.Replies {
		out = append(out, metric.PingRTT.Sample(rep.RTT, map[string]string{"seq": strconv.Itoa(rep.Seq), "size": sz}))
	}
	loss := r.Loss
	if !r.Summary {
		loss = 100
		if r.Transmitted > 0 {
			loss = 100 * float64(max(r.Transmitted-len(r.Replies), 0)) / float64(r.Transmitted)
		}
	}
	out = append(out, metric.PingLoss.Sample(loss, map[string]string{"size": sz}))
	return out
}
