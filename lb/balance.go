package lb

import (
	"hash/fnv"
	"net/netip"
	"sync"
	"sync/atomic"
)

// backend is one server with its live state and counters.
type backend struct {
	Backend
	up       atomic.Bool
	active   atomic.Int64
	total    atomic.Uint64
	failed   atomic.Uint64
	bytesIn  atomic.Uint64 // client -> server
	bytesOut atomic.Uint64 // server -> client
	// current is the smooth weighted round robin credit (under picker.mu).
	current int
}

// picker chooses a backend per connection.
type picker struct {
	balance  string
	backends []*backend
	mu       sync.Mutex
	next     int // leastconn tie breaker
}

// pick returns an up backend for a client, skipping those in tried; nil when none is left.
func (p *picker) pick(client netip.Addr, tried map[*backend]bool) *backend {
	switch p.balance {
	case RoundRobin:
		return p.roundRobin(tried)
	case LeastConn:
		return p.leastConn(tried)
	default:
		return p.source(client, tried)
	}
}

func usable(b *backend, tried map[*backend]bool) bool { return b.up.Load() && !tried[b] }

// roundRobin is nginx's smooth weighted round robin: every pick adds each backend's weight to
// its credit and takes the one with the most, minus the total.
func (p *picker) roundRobin(tried map[*backend]bool) *backend {
	p.mu.Lock()
	defer p.mu.Unlock()
	var best *backend
	total := 0
	for _, b := range p.backends {
		if !usable(b, tried) {
			continue
		}
		b.current += b.Weight
		total += b.Weight
		if best == nil || b.current > best.current {
			best = b
		}
	}
	if best != nil {
		best.current -= total
	}
	return best
}

// leastConn takes the backend with the fewest active connections per weight, rotating among
// equals.
func (p *picker) leastConn(tried map[*backend]bool) *backend {
	p.mu.Lock()
	defer p.mu.Unlock()
	var best *backend
	n := len(p.backends)
	for i := range n {
		b := p.backends[(p.next+i)%n]
		if !usable(b, tried) {
			continue
		}
		// a/wa < b/wb  <=>  a*wb < b*wa
		if best == nil || b.active.Load()*int64(best.Weight) < best.active.Load()*int64(b.Weight) {
			best = b
		}
	}
	p.next++
	return best
}

// source hashes the client address over the weighted slots of the usable backends, so a
// client sticks to one backend while the set is unchanged (HAProxy's map-based source hash).
func (p *picker) source(client netip.Addr, tried map[*backend]bool) *backend {
	total := 0
	for _, b := range p.backends {
		if usable(b, tried) {
			total += b.Weight
		}
	}
	if total == 0 {
		return nil
	}
	h := fnv.New32a()
	a := client.As16()
	h.Write(a[:])
	slot := int(h.Sum32() % uint32(total))
	for _, b := range p.backends {
		if !usable(b, tried) {
			continue
		}
		if slot < b.Weight {
			return b
		}
		slot -= b.Weight
	}
	return nil
}
