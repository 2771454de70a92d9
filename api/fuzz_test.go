package api

import (
	"flag"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sfclab/sfclab/internal/fuzzseed"
)

// updateSeeds writes the conformance corpus's bodies into testdata/fuzz:
// go test ./api -run TestFuzzSeeds -update-seeds
var updateSeeds = flag.Bool("update-seeds", false, "write missing fuzz seeds from the conformance corpus into testdata/fuzz")

// A fuzz input is one selector byte and a request body. The selector picks the resource
// kind (kinds[b%5]) and the method (b/5%2: POST a new one, PUT the first one of the kind);
// the body may name existing resources by token, replaced before the request is sent.
var fuzzTokens = []string{"$PORT_IN", "$PORT_OUT", "$PORT_SRC", "$PORT_DST", "$FC", "$PP", "$PPG", "$PC"}

// FuzzRequestBody drives `sfclab serve`'s create and update handlers with any body over a
// lab that holds one of every resource: the answer must never be a 5xx, and every error
// must be a NeutronError with a type. Seeds: testdata/fuzz/FuzzRequestBody, the bodies of
// the conformance corpus (TestFuzzSeedsCoverCorpus keeps them there).
//
//	go test ./api -run '^$' -fuzz FuzzRequestBody -fuzztime 60s
func FuzzRequestBody(f *testing.F) {
	h := newHarness(f, fixture(f, "api-a"), Config{})
	fc, pps, ppgs, pc := h.chain("api-a", "f1", "f2")
	ids := map[string]string{
		"$PORT_IN": PortID("api-a", "f3", "ingress"), "$PORT_OUT": PortID("api-a", "f3", "egress"),
		"$PORT_SRC": PortID("api-a", "client", "eth0"), "$PORT_DST": PortID("api-a", "server", "eth0"),
		"$FC": fc, "$PP": pps[0], "$PPG": ppgs[0], "$PC": pc,
	}
	f.Add([]byte{0, '{', '}'})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		h := &harness{t: t, s: h.s, rec: h.rec, url: h.url, tok: h.tok} // failures belong to t
		k := kinds[int(data[0])%len(kinds)]
		body := string(data[1:])
		for _, tok := range fuzzTokens {
			body = strings.ReplaceAll(body, tok, ids[tok])
		}
		method, path := "POST", "/v2.0/sfc/"+k.plural
		if data[0]/5%2 == 1 {
			method = "PUT"
			_, list := h.do("GET", path, nil)
			items, _ := list[k.plural].([]any)
			if len(items) == 0 {
				return
			}
			path += "/" + items[0].(map[string]any)["id"].(string)
		}
		code, m := h.do(method, path, body)
		if code >= 500 {
			t.Fatalf("%s %s %q: %d %v", method, path, body, code, m)
		}
		if code >= 400 && errType(m) == "" {
			t.Fatalf("%s %s %q: %d without a NeutronError type: %v", method, path, body, code, m)
		}
		if code != http.StatusCreated && code != http.StatusOK && code < 400 {
			t.Fatalf("%s %s %q: unexpected status %d", method, path, body, code)
		}
	})
}

// corpusSeeds are the POST and PUT bodies of the conformance corpus as fuzz inputs: the
// selector byte of the step's kind and method, labels replaced by tokens.
func corpusSeeds() map[string][]byte {
	token := func(label string) string {
		switch {
		case label == "port:f1-ingress" || label == "port:f2-ingress" || label == "port:f3-ingress":
			return "$PORT_IN"
		case strings.HasSuffix(label, "-egress"):
			return "$PORT_OUT"
		case label == "port:client-eth0":
			return "$PORT_SRC"
		case strings.HasPrefix(label, "port:"):
			return "$PORT_DST"
		case strings.HasPrefix(label, "fc"):
			return "$FC"
		case strings.HasPrefix(label, "ppg"):
			return "$PPG"
		case strings.HasPrefix(label, "pp"):
			return "$PP"
		default:
			return "$PC"
		}
	}
	out := map[string][]byte{}
	for _, s := range conformanceCorpus() {
		if s.body == "" || (s.method != "POST" && s.method != "PUT") {
			continue
		}
		for i, k := range kinds {
			if !strings.HasPrefix(s.path, "/v2.0/sfc/"+k.plural) {
				continue
			}
			sel := byte(i)
			if s.method == "PUT" {
				sel += byte(len(kinds))
			}
			body := labelRe.ReplaceAllStringFunc(s.body, func(m string) string { return token(m[2 : len(m)-2]) })
			out[fuzzseed.Name("corpus-", s.name)] = append([]byte{sel}, body...)
		}
	}
	return out
}

// TestFuzzSeedsCoverCorpus checks that every body of the conformance corpus is a committed
// seed of FuzzRequestBody.
func TestFuzzSeedsCoverCorpus(t *testing.T) {
	missing, err := fuzzseed.Sync(filepath.Join("testdata", "fuzz", "FuzzRequestBody"), corpusSeeds(), *updateSeeds)
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) > 0 {
		t.Fatalf("%d corpus bodies are not fuzz seeds (%s ...); run go test ./api -run TestFuzzSeedsCoverCorpus -update-seeds", len(missing), missing[0])
	}
}
