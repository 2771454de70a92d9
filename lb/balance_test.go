package lb

import (
	"net/netip"
	"testing"
)

func newPicker(balance string, weights ...int) *picker {
	p := &picker{balance: balance}
	for i, w := range weights {
		b := &backend{Backend: Backend{Name: string(rune('a' + i)), Weight: w}}
		b.up.Store(true)
		p.backends = append(p.backends, b)
	}
	return p
}

func TestPick(t *testing.T) {
	client := netip.MustParseAddr("198.18.0.1")
	tests := []struct {
		name    string
		balance string
		weights []int
		down    int // index of a down backend, -1 none
		picks   int
		want    map[string]int
	}{
		{"roundrobin weighted", RoundRobin, []int{1, 1, 2}, -1, 8, map[string]int{"a": 2, "b": 2, "c": 4}},
		{"roundrobin skips down", RoundRobin, []int{1, 1, 2}, 2, 8, map[string]int{"a": 4, "b": 4}},
		{"source sticks", Source, []int{1, 1, 1}, -1, 5, nil},
		{"leastconn spreads held connections by weight", LeastConn, []int{1, 3}, -1, 8, map[string]int{"a": 2, "b": 6}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPicker(tt.balance, tt.weights...)
			if tt.down >= 0 {
				p.backends[tt.down].up.Store(false)
			}
			got := map[string]int{}
			for range tt.picks {
				b := p.pick(client, nil)
				b.active.Add(1) // held open, as leastconn sees it
				got[b.Name]++
			}
			if tt.want == nil { // sticky: one backend took all
				if len(got) != 1 {
					t.Errorf("source hash spread one client over %v", got)
				}
				return
			}
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("picks = %v, want %v", got, tt.want)
					break
				}
			}
		})
	}
	p := newPicker(RoundRobin, 1, 1)
	for _, b := range p.backends {
		b.up.Store(false)
	}
	if b := p.pick(client, nil); b != nil {
		t.Errorf("every backend down: picked %s, want none", b.Name)
	}
}
