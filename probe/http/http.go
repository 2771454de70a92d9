// Package http is the HTTP load probe of study B: N requests for one object at concurrency C
// from the chain's source, through the chain's HTTP proxy when it has one (proxy requests with
// absolute URLs, as `ab -X` sends them) or straight to the origin, timed like Apache Bench. The
// client is sfclab's own, built as ab is (client.go: one thread inside the source node's
// network namespace, non-blocking sockets, epoll, HTTP/1.0 requests); RunAB runs ab itself in
// the source node for comparison.
//
// Failed requests are data: connection errors, timeouts, short bodies and non-2xx answers are
// counted, never retried, and every request is bounded by Config.Timeout and the run by
// Config.Deadline, so a dead chain gives counts quickly rather than a hang.
package http

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"runtime"
	"slices"
	"strconv"
	"time"

	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/probe"
	"github.com/sfclab/sfclab/probe/http/load"
	"github.com/sfclab/sfclab/results"
	"github.com/sfclab/sfclab/results/metric"
	"github.com/sfclab/sfclab/spec"
	"golang.org/x/sys/unix"
)

// Name is the probe's name in samples.
const Name = "http"

// Defaults.
const (
	DefaultRequests = 10000 // study B's N
	DefaultTimeout  = 30 * time.Second
	DefaultDeadline = time.Hour
	// DeadAfter is how many requests must fail at the connection level, with none answered,
	// before a run stops early: the chain is dead.
	DeadAfter = 10
	// MaxConcurrency is ab's limit.
	MaxConcurrency = 20000
)

// ErrDeadChain is returned (with the samples emitted) when the first DeadAfter requests all
// failed without an answer.
var ErrDeadChain = errors.New("chain is dead: no request got an answer")

// Config is one HTTP load run.
type Config struct {
	// Requests is the number of requests (ab -n); 0 means DefaultRequests.
	Requests int
	// Concurrency is the number of requests in flight at once (ab -c); 0 means 1.
	Concurrency int
	// Object is the size name of the object requested (e.g. "10k": GET /obj-10k); "" means
	// the origin's first object.
	Object string
	// KeepAlive reuses connections (ab -k); off by default, as ab: one connection per request.
	KeepAlive bool
	// Timeout bounds each request, connect to end of answer (ab -s); 0 means 30 s.
	Timeout time.Duration
	// Deadline bounds the whole run; 0 means one hour.
	Deadline time.Duration
}

func (c Config) withDefaults() Config {
	if c.Requests <= 0 {
		c.Requests = DefaultRequests
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 1
	}
	if c.Concurrency > c.Requests {
		c.Concurrency = c.Requests // as ab refuses -c > -n
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Deadline <= 0 {
		c.Deadline = DefaultDeadline
	}
	return c
}

type prober struct{ cfg Config }

// New returns the HTTP load probe.
func New(cfg Config) probe.Probe { return &prober{cfg: cfg} }

// Name returns "http".
func (*prober) Name() string { return Name }

// Target is where a run sends its requests.
type Target struct {
	// Source is the node the requests leave from (the chain's source).
	Source string
	// Proxy is the HTTP proxy's service address and port, invalid when the chain has none.
	Proxy netip.AddrPort
	// URL is the object's absolute URL at the origin (as the proxy reaches it when there is one).
	URL string
	// Size is the object's size in bytes.
	Size int64
	// Object is the object's size name.
	Object string
}

// Resolve finds the source, proxy and origin URL of a chain for an object size name ("" for
// the origin's first object).
func Resolve(p *plan.Plan, c *plan.Chain, object string) (Target, error) {
	var t Target
	if len(c.Path) == 0 {
		return t, fmt.Errorf("resolve http target of chain %s: it has no path", c.Name)
	}
	t.Source = c.Path[0]
	var origin *plan.Node
	for _, n := range p.Nodes {
		if n.Group == c.To && n.Role != plan.RoleFunction && (origin == nil || n.Instance < origin.Instance) {
			origin = n
		}
	}
	if origin == nil {
		return t, fmt.Errorf("resolve http target of chain %s: destination %q has no nodes", c.Name, c.To)
	}
	var hs spec.ObjectServer
	if origin.Function != nil {
		hs, _ = origin.Function.Params.(spec.ObjectServer)
	}
	if object == "" {
		if hs == nil || len(hs.ServedObjects()) == 0 {
			return t, fmt.Errorf("resolve http target of chain %s: say which object to request; %s is not an http-server", c.Name, origin.Name)
		}
		object = hs.ServedObjects()[0]
	}
	size, err := spec.ParseSize(object)
	if err != nil {
		return t, fmt.Errorf("resolve http target of chain %s: %w", c.Name, err)
	}
	if hs != nil && !contains(hs.ServedObjects(), object) {
		return t, fmt.Errorf("resolve http target of chain %s: origin %s serves %v, not %q", c.Name, origin.Name, hs.ServedObjects(), object)
	}
	t.Object, t.Size = object, size
	path := spec.ObjectPath(object)

	// Through the first HTTP proxy: the origin as the proxy reaches it.
	for _, h := range c.Hops {
		if len(h.Instances) == 0 {
			continue
		}
		pn := p.Node(h.Instances[0])
		if pn == nil || pn.Function == nil {
			continue
		}
		if _, ok := pn.Function.Params.(spec.ForwardProxy); !ok {
			continue
		}
		if len(pn.Function.Backends) == 0 {
			return t, fmt.Errorf("resolve http target of chain %s: proxy %s has no origin", c.Name, h.Instances[0])
		}
		be := pn.Function.Backends[0]
		t.Proxy = netip.AddrPortFrom(c.Target, c.Port)
		t.URL = "http://" + netip.AddrPortFrom(be.Addr, be.Port).String() + path
		return t, nil
	}
	port := c.Port
	if port == 0 {
		port = 80
		if hs != nil {
			port = hs.ListenPort()
		}
	}
	t.URL = "http://" + netip.AddrPortFrom(c.Target, port).String() + path
	return t, nil
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// Run sends cfg.Requests GETs for the object from the chain's source, cfg.Concurrency at a
// time, then emits, all labelled object, concurrency, keepalive and via (proxy or direct):
//
//   - total_time (s): wall time from the first request to the last answer (ab's "Time taken
//     for tests");
//   - rps (requests/s): finished requests (answered or failed, as ab counts them) / total_time;
//   - request_time (ms): one sample per answered request, connect to end of response;
//   - errors (count): requests with no complete answer (connection refused or reset, timeout,
//     body shorter or longer than the object), labelled first_error with the first one's text;
//   - non2xx (count): answers with a status outside 200-299;
//   - bytes (count): body bytes received;
//   - requests (count): requests finished;
//   - phase_median and phase_mean (ms), labelled phase: connect, wait, body and close, the
//     median and mean over the answered requests of each part of their time (see Phases;
//     the means add up to the mean request_time).
//
// The client works like ab (see client.go): one thread inside the source node's network
// namespace keeps Concurrency connections busy with one HTTP/1.0 request each; without
// KeepAlive the server closes the connection after its answer and, as for ab, the request
// ends when it has.
//
// It returns ErrDeadChain when the first DeadAfter requests all failed without an answer, an
// error when Deadline passed or ctx ended (with the samples of the requests done), else nil.
//
// Equivalent to: ip netns exec SRC ab -n N -c C [-k] [-X PROXY:PORT] http://ORIGIN/obj-SIZE
func (p *prober) Run(ctx context.Context, env probe.Env, emit func(results.Sample)) error {
	cfg := p.cfg.withDefaults()
	if cfg.Concurrency > MaxConcurrency {
		return fmt.Errorf("run http probe: concurrency %d is over %d", cfg.Concurrency, MaxConcurrency)
	}
	t, err := Resolve(env.Plan, env.Chain, cfg.Object)
	if err != nil {
		return err
	}
	what := fmt.Sprintf("run http probe from %s: GET %s", t.Source, t.URL)
	if t.Proxy.IsValid() {
		what += " via proxy " + t.Proxy.String()
	}
	src, err := env.Node(t.Source)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Deadline)
	defer cancel()
	res, err := runLoad(ctx, src, t, cfg)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}

	via := "direct"
	if t.Proxy.IsValid() {
		via = "proxy"
	}
	labels := map[string]string{"object": t.Object, "concurrency": strconv.Itoa(cfg.Concurrency),
		"keepalive": strconv.FormatBool(cfg.KeepAlive), "via": via}
	for _, r := range res.Times {
		s := metric.HTTPRequestTime.Sample(r.MS, labels)
		s.Time = r.At
		emit(s)
	}
	sum := func(d metric.Def, v float64) { emit(d.Sample(v, labels)) }
	sum(metric.HTTPTotalTime, res.Total.Seconds())
	rps := 0.0
	if res.Total > 0 {
		rps = float64(res.Finished) / res.Total.Seconds()
	}
	sum(metric.HTTPRPS, rps)
	errLabels := labels
	if res.FirstErr != nil { // say why, on the errors sample
		errLabels = maps.Clone(labels)
		errLabels["first_error"] = res.FirstErr.Error()
	}
	emit(metric.HTTPErrors.Sample(float64(res.Errors), errLabels))
	sum(metric.HTTPNon2xx, float64(res.Non2xx))
	sum(metric.HTTPBytes, float64(res.Bytes))
	sum(metric.HTTPRequests, float64(res.Finished))
	for _, ph := range phaseStats(res.Phases) {
		l := maps.Clone(labels)
		l["phase"] = ph.name
		emit(metric.HTTPPhaseMedian.Sample(ph.median, l))
		emit(metric.HTTPPhaseMean.Sample(ph.mean, l))
	}

	switch {
	case res.Dead:
		return fmt.Errorf("%s: %w; first error: %v", what, ErrDeadChain, res.FirstErr)
	case ctx.Err() != nil && res.Finished < int64(cfg.Requests):
		return fmt.Errorf("%s: stopped after %d of %d requests (deadline %s): %w", what, res.Finished, cfg.Requests, cfg.Deadline, ctx.Err())
	}
	return nil
}

// Guest is a source node whose network stack Go code cannot enter (a VM guest): it runs the
// load generator itself (its agent runs load.Run) and returns the result, timed by its own
// clock.
type Guest interface {
	HTTPLoad(ctx context.Context, s load.Spec) (*load.Result, error)
}

// loadSpec is the load generator's run of cfg against t.
func loadSpec(t Target, cfg Config) load.Spec {
	return load.Spec{URL: t.URL, Proxy: t.Proxy, Size: t.Size, Requests: cfg.Requests, Concurrency: cfg.Concurrency,
		KeepAlive: cfg.KeepAlive, Timeout: cfg.Timeout, Deadline: cfg.Deadline, DeadAfter: DeadAfter}
}

// runLoad runs the requests on one thread inside the source node (see package load), or in
// a guest source through its agent (Guest); it collects their outcomes.
func runLoad(ctx context.Context, src probe.Node, t Target, cfg Config) (*load.Result, error) {
	if g, ok := src.(Guest); ok {
		if _, in := probe.InGuest(src); in {
			res, err := g.HTTPLoad(ctx, loadSpec(t, cfg))
			if res == nil {
				return nil, err
			}
			// The guest's clock dates its requests' ends: the samples are stamped with the
			// host's time now, as tcprtt's from a guest; durations stay the guest's.
			now := time.Now()
			for i := range res.Times {
				res.Times[i].At = now
			}
			if res.FirstError != "" && res.FirstErr == nil {
				res.FirstErr = errors.New(res.FirstError)
			}
			return res, err
		}
	}
	return load.Run(ctx, loadSpec(t, cfg), func(f func() error) error { return inNode(src, f) })
}

// Phases splits an answered request's time into what it waited for (load.Phases).
type Phases = load.Phases

type phaseStat struct {
	name         string
	median, mean float64 // ms
}

// phaseStats returns the median and mean of each phase, in the order connect, wait, body,
// close; nothing when no request was dated.
func phaseStats(ps []Phases) []phaseStat {
	if len(ps) == 0 {
		return nil
	}
	get := []struct {
		name string
		f    func(Phases) time.Duration
	}{
		{"connect", func(p Phases) time.Duration { return p.Connect }},
		{"wait", func(p Phases) time.Duration { return p.Wait }},
		{"body", func(p Phases) time.Duration { return p.Body }},
		{"close", func(p Phases) time.Duration { return p.Close }},
	}
	out := make([]phaseStat, 0, len(get))
	v := make([]float64, len(ps))
	for _, g := range get {
		total := 0.0
		for i, p := range ps {
			v[i] = float64(g.f(p).Nanoseconds()) / 1e6
			total += v[i]
		}
		slices.Sort(v)
		med := v[len(v)/2]
		if len(v)%2 == 0 {
			med = (v[len(v)/2-1] + v[len(v)/2]) / 2
		}
		out = append(out, phaseStat{name: g.name, median: med, mean: total / float64(len(v))})
	}
	return out
}

// inNode runs fn on an OS thread moved into the source node's network namespace (fn's
// sockets belong to the node), then moves the thread back. If the thread cannot move back it
// stays locked, so it ends with the goroutine and nothing else runs there.
//
// Equivalent to: ip netns exec NODE ...
func inNode(src probe.Node, fn func() error) error {
	var node int
	if err := src.Do(func() (err error) {
		node, err = unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		return err
	}); err != nil {
		return fmt.Errorf("open the source node's network namespace: %w", err)
	}
	defer unix.Close(node)
	runtime.LockOSThread()
	host, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("open the host network namespace: %w", err)
	}
	defer unix.Close(host)
	if err := unix.Setns(node, unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("enter the source node's network namespace: %w", err)
	}
	ferr := fn()
	if err := unix.Setns(host, unix.CLONE_NEWNET); err != nil {
		return errors.Join(ferr, fmt.Errorf("leave the source node's network namespace: %w", err))
	}
	runtime.UnlockOSThread()
	return ferr
}
