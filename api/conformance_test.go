package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/sfclab/sfclab/internal/oracle"
)

// The differential conformance suite: the corpus (conformance_corpus_test.go) is replayed
// against `sfclab serve` and against the real networking-sfc server (internal/oracle), and
// every answer is compared: status, NeutronError type and message, body field by field,
// with ids mapped back to the corpus's labels, and timestamps, MACs and the project masked.
// A difference fails the test unless conformanceAllow lists the step with its reason
// (docs/api.md prints that list).

// step is one request of the corpus. Path and body may name resources by label, {{label}}:
// the ids each server gave them (ports: {{port:NAME}}).
type step struct {
	name         string
	method, path string
	body         string
	// save labels the created resource's id (2xx answers only).
	save string
	// unordered compares a list as a set: its order depends on ids, which differ.
	unordered bool
	// page compares a page of a list by its size and its links' rels: the servers' ids
	// differ, so do pages in id order. saveLast labels the page's last item (a marker);
	// its label starts with "last:".
	page     bool
	saveLast string
	// sync is not compared: it deletes a resource only one server created (after an
	// allowed difference), so that what follows starts from the same state on both.
	sync bool
}

// endpoint is one server under test and the ids it gave the corpus's labels.
type endpoint struct {
	name   string
	url    string
	labels map[string]string
}

// missingID stands for a label the server did not create.
const missingID = "00000000-0000-4000-8000-00000000dead"

var (
	labelRe = regexp.MustCompile(`\{\{([^}]+)\}\}`)
	uuidRe  = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
)

func (e *endpoint) resolve(t *testing.T, s string) string {
	return labelRe.ReplaceAllStringFunc(s, func(m string) string {
		l := m[2 : len(m)-2]
		id, ok := e.labels[l]
		if !ok {
			// The other server created it, this one refused: ask for an id it does not have.
			t.Logf("%s: no resource labelled %q: using %s", e.name, l, missingID)
			return missingID
		}
		return id
	})
}

// answer is a response: status and decoded JSON body (nil when empty).
type answer struct {
	status int
	body   any
	raw    string
}

func (e *endpoint) send(t *testing.T, s step) answer {
	t.Helper()
	var rd io.Reader
	if s.body != "" {
		rd = strings.NewReader(e.resolve(t, s.body))
	}
	req, err := http.NewRequestWithContext(context.Background(), s.method, e.url+e.resolve(t, s.path), rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s: %s: %v", e.name, s.name, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, raw: string(data)}
	if len(bytes.TrimSpace(data)) > 0 {
		if err := json.Unmarshal(data, &a.body); err != nil {
			a.body = "non-JSON: " + string(data)
		}
	}
	if s.saveLast != "" && a.status == http.StatusOK {
		for k, v := range a.body.(map[string]any) {
			if list, ok := v.([]any); ok && !strings.HasSuffix(k, "_links") && len(list) > 0 {
				e.labels[s.saveLast] = fmt.Sprint(list[len(list)-1].(map[string]any)["id"])
			}
		}
	}
	if s.save != "" && a.status/100 == 2 {
		if m, ok := a.body.(map[string]any); ok {
			for _, v := range m {
				if r, ok := v.(map[string]any); ok {
					if id, ok := r["id"].(string); ok {
						e.labels[s.save] = id
					}
				}
			}
		}
	}
	return a
}

// normalize rewrites an answer so that the two servers' answers compare: ids become
// <label> (or <uuid> for ids the corpus never labelled), the base URL <base>, and
// timestamps, MACs and the project are masked.
func (e *endpoint) normalize(v any, s step) any {
	rev := map[string]string{}
	for l, id := range e.labels {
		if !strings.HasPrefix(l, "last:") { // a page's last item has its own label too
			rev[id] = "<" + l + ">"
		}
	}
	var walk func(key string, v any) any
	walk = func(key string, v any) any {
		switch x := v.(type) {
		case map[string]any:
			out := map[string]any{}
			for k, val := range x {
				nk := k
				if uuidRe.MatchString(k) { // a service graph's port_chains are keyed by id
					nk = walk("", k).(string)
				}
				out[nk] = walk(k, val)
				if l, ok := out[nk].([]any); ok && nk != k { // ... to sets of ids
					sort.Slice(l, func(i, j int) bool { return canonical(l[i]) < canonical(l[j]) })
				}
			}
			return out
		case []any:
			out := make([]any, len(x))
			for i, val := range x {
				out[i] = walk(key, val)
			}
			if s.unordered && strings.HasSuffix(key, "s") && !strings.HasSuffix(key, "_links") {
				sort.Slice(out, func(i, j int) bool { return canonical(out[i]) < canonical(out[j]) })
			}
			return out
		case string:
			switch key {
			case "created_at", "updated_at":
				return "<time>"
			case "mac_address":
				return "<mac>"
			case "tenant_id", "project_id":
				return "<project>"
			}
			x = strings.ReplaceAll(x, e.url, "<base>")
			return uuidRe.ReplaceAllStringFunc(x, func(id string) string {
				if l, ok := rev[id]; ok {
					return l
				}
				return "<uuid>"
			})
		}
		return v
	}
	v = walk("", v)
	if m, ok := v.(map[string]any); ok && s.page {
		for k, val := range m {
			switch x := val.(type) {
			case []any:
				if strings.HasSuffix(k, "_links") {
					rels := []any{}
					for _, l := range x {
						rels = append(rels, l.(map[string]any)["rel"])
					}
					m[k] = rels
				} else {
					m[k] = len(x)
				}
			}
		}
	}
	return v
}

func canonical(v any) string {
	data, _ := json.Marshal(v)
	return string(data)
}

// TestConformance replays the corpus against both servers and compares every answer.
func TestConformance(t *testing.T) {
	// Start says ErrMissing when the server cannot run here (and checks that only then: the
	// check is seconds of Python start-up).
	o, err := oracle.Start(context.Background())
	if errors.Is(err, oracle.ErrMissing) {
		t.Skipf("SKIPPED LOUDLY: the differential suite needs the real server: %v (scripts/install-deps.sh installs it)", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(o.Stop)
	h := newHarness(t, fixture(t, "conf"), Config{})
	ours := &endpoint{name: "sfclab", url: h.url, labels: map[string]string{}}
	real := &endpoint{name: "networking-sfc", url: o.URL, labels: map[string]string{}}
	mirrorPorts(t, o, ours, real)

	corpus := conformanceCorpus()
	seen := map[string]bool{}
	differ := map[string]bool{}
	compared := 0
	for _, s := range corpus {
		if seen[s.name] {
			t.Fatalf("corpus: step name %q twice", s.name)
		}
		seen[s.name] = true
		a, b := ours.send(t, s), real.send(t, s)
		if s.sync {
			if a.status/100 != 2 && b.status/100 != 2 {
				t.Errorf("%s: neither server had the resource to delete: %d, %d", s.name, a.status, b.status)
			}
			continue
		}
		compared++
		if a.status >= 500 {
			t.Errorf("%s: sfclab answered %d: %s", s.name, a.status, a.raw)
		}
		if _, ok := conformanceAllow[s.name]; b.status >= 500 && !ok {
			t.Errorf("%s: networking-sfc answered %d (corpus bug?): %s\n%s", s.name, b.status, b.raw, lastTraceback(o.Log()))
		}
		na, nb := canonical(ours.normalize(a.body, s)), canonical(real.normalize(b.body, s))
		if a.status == b.status && na == nb {
			continue
		}
		differ[s.name] = true
		if reason, ok := conformanceAllow[s.name]; ok {
			t.Logf("%s: allowed difference (%s)", s.name, reason.why)
			continue
		}
		t.Errorf("%s: %s %s\n  sfclab          %d %s\n  networking-sfc  %d %s", s.name, s.method, s.path, a.status, short(na, nb), b.status, short(nb, na))
	}
	for name := range conformanceAllow {
		if !seen[name] {
			t.Errorf("allowlist: no step %q in the corpus", name)
		} else if !differ[name] {
			t.Errorf("allowlist: step %q no longer differs; remove its entry", name)
		}
	}
	t.Logf("corpus: %d requests compared (%d sent), %d allowed differences", compared, len(corpus), len(conformanceAllow))
	if compared < 150 {
		t.Errorf("corpus: %d requests compared, want at least 150", compared)
	}
}

// mirrorPorts mirrors sfclab's networks and ports into the oracle (oracle.Mirror) and
// labels both servers' ports port:NAME and networks net:NAME.
func mirrorPorts(t *testing.T, o *oracle.Oracle, ours, real *endpoint) {
	t.Helper()
	ids, err := o.Mirror(context.Background(), ours.url, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ collection, prefix string }{{"networks", "net:"}, {"ports", "port:"}} {
		resp, err := http.Get(ours.url + "/v2.0/" + c.collection)
		if err != nil {
			t.Fatal(err)
		}
		var list map[string][]map[string]any
		err = json.NewDecoder(resp.Body).Decode(&list)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if len(list[c.collection]) == 0 {
			t.Fatalf("sfclab serves no %s to mirror", c.collection)
		}
		for _, x := range list[c.collection] {
			id, name := fmt.Sprint(x["id"]), fmt.Sprint(x["name"])
			ours.labels[c.prefix+name], real.labels[c.prefix+name] = id, ids[id]
		}
	}
}

// short is a, or, when a and b are long, the part of a from shortly before where they
// first differ.
func short(a, b string) string {
	if len(a) < 300 {
		return a
	}
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	from := max(0, i-80)
	return "..." + a[from:min(len(a), from+300)] + "..."
}

// lastTraceback is the exception lines of the last Python traceback in the oracle's log
// (the frames left out).
func lastTraceback(log string) string {
	i := strings.LastIndex(log, "Traceback")
	if i < 0 {
		return ""
	}
	var out []string
	for _, line := range strings.Split(log[i:], "\n")[1:] {
		_, rest, ok := strings.Cut(line, " ERROR ")
		if !ok {
			break
		}
		if _, msg, ok := strings.Cut(rest, " "); ok && !strings.HasPrefix(msg, " ") && !strings.HasPrefix(msg, "[") {
			out = append(out, msg)
		}
	}
	return strings.Join(out, "\n")
}
