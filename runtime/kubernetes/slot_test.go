package kubernetes

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/sfclab/sfclab/hosts"
)

// fakeAPI is the part of an API server the slots use: ConfigMaps in the agent's namespace
// (create refused with 409 when the name exists, get, delete, list and delete by the lab's
// label) and namespaces that exist or not.
type fakeAPI struct {
	mu         sync.Mutex
	configMaps map[string]map[string]string // name -> labels
	namespaces map[string]bool
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	const cms = "/api/v1/namespaces/" + AgentNamespace + "/configmaps"
	selected := func(labels map[string]string) bool {
		for _, term := range strings.Split(r.URL.Query().Get("labelSelector"), ",") {
			k, v, eq := strings.Cut(term, "=")
			if _, has := labels[k]; !has || (eq && labels[k] != v) {
				return false
			}
		}
		return true
	}
	switch name, one := strings.CutPrefix(r.URL.Path, cms+"/"); {
	case r.URL.Path == cms && r.Method == "POST":
		var cm struct {
			Metadata struct {
				Name   string            `json:"name"`
				Labels map[string]string `json:"labels"`
			} `json:"metadata"`
		}
		_ = json.NewDecoder(r.Body).Decode(&cm)
		if f.configMaps[cm.Metadata.Name] != nil {
			w.WriteHeader(http.StatusConflict)
			return
		}
		f.configMaps[cm.Metadata.Name] = cm.Metadata.Labels
		w.WriteHeader(http.StatusCreated)
		w.Write([]byte("{}"))
	case r.URL.Path == cms && r.Method == "GET":
		type item struct {
			Metadata struct {
				Labels map[string]string `json:"labels"`
			} `json:"metadata"`
		}
		var out struct {
			Items []item `json:"items"`
		}
		for _, l := range f.configMaps {
			if selected(l) {
				var it item
				it.Metadata.Labels = l
				out.Items = append(out.Items, it)
			}
		}
		json.NewEncoder(w).Encode(out)
	case r.URL.Path == cms && r.Method == "DELETE":
		for n, l := range f.configMaps {
			if selected(l) {
				delete(f.configMaps, n)
			}
		}
		w.Write([]byte("{}"))
	case one && f.configMaps[name] == nil:
		w.WriteHeader(http.StatusNotFound)
	case one && r.Method == "GET":
		json.NewEncoder(w).Encode(map[string]any{"metadata": map[string]any{"labels": f.configMaps[name]}})
	case one && r.Method == "DELETE":
		delete(f.configMaps, name)
		w.Write([]byte("{}"))
	case f.namespaces[strings.TrimPrefix(r.URL.Path, "/api/v1/namespaces/")]:
		w.Write([]byte("{}"))
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

// TestClaimSlot: labs take the lowest free slot, a lab gets its own slot again, a slot whose
// lab's namespace is gone is taken over, a released slot is free again, and two claims at
// once never get the same slot.
func TestClaimSlot(t *testing.T) {
	api := &fakeAPI{configMaps: map[string]map[string]string{}, namespaces: map[string]bool{}}
	srv := httptest.NewServer(api)
	defer srv.Close()
	c := &client{Server: srv.URL, http: srv.Client()}
	ctx := context.Background()
	live := func(labs ...string) {
		api.mu.Lock()
		defer api.mu.Unlock()
		clear(api.namespaces)
		for _, l := range labs {
			api.namespaces[Namespace(l)] = true
		}
	}
	for _, step := range []struct {
		name    string
		live    []string // labs whose namespaces exist
		lab     string
		release bool
		want    int
	}{
		{"first lab", []string{"a"}, "a", false, 0},
		{"second lab", []string{"a", "b"}, "b", false, 1},
		{"a lab's own slot again", []string{"a", "b"}, "a", false, 0},
		{"third lab", []string{"a", "b", "c"}, "c", false, 2},
		{"a's namespace gone (kill -9, namespace removed): its slot is taken over", []string{"b", "c", "d"}, "d", false, 0},
		{"c released", []string{"b", "d"}, "c", true, -1},
		{"c's slot is free again", []string{"b", "d", "e"}, "e", false, 2},
	} {
		live(step.live...)
		if step.release {
			if err := releaseSlot(ctx, c, step.lab); err != nil {
				t.Fatalf("%s: %v", step.name, err)
			}
			if _, ok, _ := labSlot(ctx, c, step.lab); ok {
				t.Errorf("%s: lab %s still holds a slot", step.name, step.lab)
			}
			continue
		}
		got, err := claimSlot(ctx, c, step.lab)
		if err != nil || got != step.want {
			t.Errorf("%s: lab %s got slot %d (%v), want %d", step.name, step.lab, got, err, step.want)
		}
	}

	// Claims at once: every lab a slot of its own.
	labs := []string{"p", "q", "r", "s", "t", "u"}
	live(append([]string{"b", "d", "e"}, labs...)...)
	got := make([]int, len(labs))
	var wg sync.WaitGroup
	for i, l := range labs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			if got[i], err = claimSlot(ctx, c, l); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	seen := map[int]string{0: "d", 1: "b", 2: "e"}
	for i, s := range got {
		if other, dup := seen[s]; dup {
			t.Errorf("labs %s and %s hold slot %d", labs[i], other, s)
		}
		seen[s] = labs[i]
	}
}

// TestInSlot: a topology in a slot has its networks' VNIs in the slot's share and the slot's
// steering port; the plan's topology is left as it was.
func TestInSlot(t *testing.T) {
	topo := &hosts.Topology{Lab: "x", Networks: []hosts.Network{{Name: "n0", VNI: 100}, {Name: "n1", VNI: 101}}}
	for _, tc := range []struct {
		slot     int
		vnis     []uint32
		steerUDP int
	}{
		{0, []uint32{100, 101}, 4790},
		{1, []uint32{4096 + 100, 4096 + 101}, 4791},
		{255, []uint32{255<<12 | 100, 255<<12 | 101}, 4790 + 255},
	} {
		got, err := inSlot(topo, tc.slot)
		if err != nil {
			t.Fatal(err)
		}
		for i, n := range got.Networks {
			if n.VNI != tc.vnis[i] {
				t.Errorf("slot %d: network %s VNI %d, want %d", tc.slot, n.Name, n.VNI, tc.vnis[i])
			}
		}
		if got.SteerPort != tc.steerUDP {
			t.Errorf("slot %d: steering port %d, want %d", tc.slot, got.SteerPort, tc.steerUDP)
		}
	}
	if topo.Networks[0].VNI != 100 || topo.SteerPort != 0 {
		t.Errorf("inSlot changed the plan's topology: %+v", topo)
	}
	big := &hosts.Topology{Networks: []hosts.Network{{Name: "n4096", VNI: 4096}}}
	if _, err := inSlot(big, 1); err == nil {
		t.Error("a VNI of 4096 was put in a slot")
	}
}
